"""One monitor run: the new chunks of a production stream estimated, alerts checked, labels
joined, the history stored, the figure drawn. :func:`run_monitor` is the plain function under
``alsa-bench monitor`` and the ``monitor`` flow; the caller holds the state folder's lock.

The walk of a run:

1. **Reference**: read and checked (:func:`~tasks.monitor.estimation.load_reference`); each
   method is fitted on it, or its fit is read from the signed cache
   (:mod:`tasks.monitor.fit_cache`), keyed on the reference's content: a run does not refit.
2. **Files**: listed (:func:`~tasks.monitor.files.list_files`); a file still being written is
   skipped; each complete one is read and checked, one at a time, and fed to the chunker
   (:mod:`tasks.monitor.chunking`); a file with the same logits as an earlier one is a
   duplicate (read for its labels only); a bad file is refused in one line and the rest goes on.
3. **Chunks**: each chunk's key (stream, chunking, content) and each method's estimator key
   (reference, method, parameters, calibration) are looked up in the history
   (:mod:`storage.monitor`): only the missing pairs are estimated, and a chunk's rows are read
   again only when something is missing (memory: one chunk and one file). A chunk whose labels
   are all known gets its realized accuracy.
4. **Storage**: each chunk is written in one transaction (the chunk, its new estimates, its
   realized accuracy), then the history is exported to Parquet and drawn.

Nothing is estimated twice for one key, nothing of a refused file is stored, and a run killed
midway keeps every chunk it finished.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from storage.db import connect
from storage.monitor import (
    MonitorChunk,
    MonitorEstimate,
    Realized,
    estimated_pairs,
    export_history,
    mark_current,
    read_history,
    stored_chunks,
    stream_references,
    write_chunk,
)
from storage.paths import reports_dir, state_dir
from tasks.monitor.alerts import Alert, check_alerts, describe
from tasks.monitor.chunking import ChunkPlan, display_names, make_chunker, part_rows
from tasks.monitor.estimation import (
    ChunkEstimate,
    FittedMethod,
    calibration_digest,
    empty_estimate,
    estimate_chunk,
    fit_methods,
    load_reference,
)
from tasks.monitor.files import (
    Batch,
    BatchError,
    is_complete,
    list_files,
    read_batch,
    read_label_array,
)
from tasks.monitor.fit_cache import FitCache
from tasks.monitor.keys import canonical_json, chunk_key, stream_slug
from tasks.monitor.options import MonitorOptions
from tasks.monitor.realized import Coverage, LabelIndex, band_coverage, realized_accuracy

__all__ = ["AlertRecord", "MonitorResult", "fit_cache_dir", "history_export_path", "run_monitor"]

logger = logging.getLogger(__name__)


def fit_cache_dir() -> Path:
    """Where fitted estimators are cached: ``<state>/monitor/fits``."""
    return state_dir() / "monitor" / "fits"


def history_export_path() -> Path:
    """The Parquet export of ``monitor_history``: ``<state>/monitor/history.parquet``."""
    return state_dir() / "monitor" / "history.parquet"


def figure_path(slug: str) -> Path:
    """The run's figure: ``<reports>/monitor/<stream slug>/monitor.png``."""
    return reports_dir() / "monitor" / slug / "monitor.png"


@dataclass(frozen=True)
class AlertRecord:
    """An alert with the chunk and method it belongs to.

    Attributes
    ----------
    stream, chunk_key, chunk_name, method : str
    period_start : str or None
        ISO time, UTC.
    alert : Alert
    message : str
        One line (:func:`tasks.monitor.alerts.describe`).
    """

    stream: str
    chunk_key: str
    chunk_name: str
    method: str
    period_start: str | None
    alert: Alert
    message: str

    def to_record(self) -> dict[str, Any]:
        """JSON-safe dict: the alert's fields plus the chunk's."""
        return {"stream": self.stream, "chunk_key": self.chunk_key,
                "chunk_name": self.chunk_name, "method": self.method,
                "period_start": self.period_start, "message": self.message,
                **self.alert.to_record()}


@dataclass
class MonitorResult:
    """What a run did and what the history now says (the current reference's estimates).

    Attributes
    ----------
    stream, slug, chunking : str
    reference, reference_sha256 : str
    methods : tuple of str
    level : float
    run_id : str
    files : int
        Production files listed.
    new_chunks : list of str
        Names of the chunks estimated by this run (a chunk with several methods counts once).
    new_estimates : int
    realized_joined : list of str
        Chunks whose realized accuracy this run joined in.
    duplicates : list of (str, str)
        ``(file, the earlier file with the same logits)``.
    incomplete : list of str
        Files skipped because they are still being written.
    refused : list of str
        One line per refused file (the run goes on; the command exits non-zero).
    notes, warnings : list of str
    alerts : list of AlertRecord
        Alerts of the chunks estimated by this run.
    history : list of dict
        ``monitor_history`` rows of the current chunks under the current estimators.
    coverage : dict of str to Coverage
    references : dict of str to (float, (float, float))
        Per method, the reference's own estimate and band.
    fits_from_cache : dict of str to bool
    figure, export : Path or None
    """

    stream: str
    slug: str
    chunking: str
    reference: str
    reference_sha256: str
    methods: tuple[str, ...]
    level: float
    run_id: str
    files: int = 0
    new_chunks: list[str] = field(default_factory=list)
    new_estimates: int = 0
    realized_joined: list[str] = field(default_factory=list)
    duplicates: list[tuple[str, str]] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    alerts: list[AlertRecord] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    coverage: dict[str, Coverage] = field(default_factory=dict)
    references: dict[str, tuple[float, tuple[float, float]]] = field(default_factory=dict)
    fits_from_cache: dict[str, bool] = field(default_factory=dict)
    figure: Path | None = None
    export: Path | None = None

    def to_record(self) -> dict[str, Any]:
        """JSON-safe summary (what ``--json`` prints and the flow returns)."""
        def clean(value: Any) -> Any:
            if isinstance(value, float):
                return value if math.isfinite(value) else None
            if isinstance(value, datetime):
                return value.isoformat()
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [clean(v) for v in value]
            return value

        history = [{**{k: clean(v) for k, v in row.items()
                       if k not in ("signals_json", "alerts_json", "params_json")},
                    "alerts": json.loads(row["alerts_json"]) if row.get("alerts_json") else [],
                    "signals": (json.loads(row["signals_json"]) if row.get("signals_json")
                                else None)}
                   for row in self.history]
        return clean({
            "stream": self.stream, "chunking": self.chunking, "reference": self.reference,
            "reference_sha256": self.reference_sha256, "methods": list(self.methods),
            "level": self.level, "run_id": self.run_id, "files": self.files,
            "new_chunks": self.new_chunks, "new_estimates": self.new_estimates,
            "realized_joined": self.realized_joined,
            "duplicates": [list(d) for d in self.duplicates], "incomplete": self.incomplete,
            "refused": self.refused, "notes": self.notes, "warnings": self.warnings,
            "alerts": [a.to_record() for a in self.alerts],
            "references": {m: {"estimate": acc, "band": list(band)}
                           for m, (acc, band) in self.references.items()},
            "coverage": {m: c.to_record() for m, c in self.coverage.items()},
            "fits_from_cache": self.fits_from_cache,
            "figure": None if self.figure is None else str(self.figure),
            "export": None if self.export is None else str(self.export),
            "history": history,
        })


@dataclass
class _File:
    """A production file of this run that is not a duplicate."""

    path: Path
    name: str
    digest: str
    n_rows: int
    own_labels: bool
    label_files: list[Path] = field(default_factory=list)  # duplicates carrying labels
    stems: list[str] = field(default_factory=list)


class _Reader:
    """Re-reads the files of a chunk, keeping the last one (memory: one file)."""

    def __init__(self, files: list[_File], n_classes: int, need_timestamps: bool) -> None:
        self.files = files
        self.n_classes = n_classes
        self.need_timestamps = need_timestamps
        self.last: tuple[int, Batch] | None = None

    def batch(self, index: int) -> Batch:
        if self.last is not None and self.last[0] == index:
            return self.last[1]
        batch = read_batch(self.files[index].path, self.n_classes,
                           need_timestamps=self.need_timestamps)
        if batch.digest != self.files[index].digest:
            raise BatchError(f"{self.files[index].path}: changed while this run read it; it is "
                             "read again by the next run.")
        self.last = (index, batch)
        return batch


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.replace(tzinfo=UTC).isoformat()


def _label_source(
    info: _File, index: LabelIndex,
) -> tuple[str, Path] | None:
    """Where the labels of a production file come from (see :mod:`tasks.monitor.realized`)."""
    if info.own_labels:
        return ("own", info.path)
    if info.label_files:
        return ("file", info.label_files[0])
    matched = index.match(info.stems, info.digest)
    return None if matched is None else ("index", matched)


def _file_labels(info: _File, source: tuple[str, Path], batch: Batch, index: LabelIndex,
                 n_classes: int) -> NDArray[np.int64]:
    kind, path = source
    if kind == "own":
        assert batch.labels is not None
        return batch.labels
    if kind == "file":
        labels, _ = read_label_array(path)
        return labels
    return index.read(path, info.n_rows, n_classes, info.digest)


def _record(
    fitted: FittedMethod, key: str, estimate: ChunkEstimate, alerts: list[Alert],
    reference_sha256: str, calibration: str | None, run_id: str,
) -> MonitorEstimate:
    return MonitorEstimate(
        chunk_key=key, estimator_key=fitted.estimator_key, method=fitted.method,
        reference_sha256=reference_sha256, params_json=fitted.params_json,
        calibration_sha256=calibration, estimated_accuracy=estimate.accuracy,
        shift_low=estimate.band[0], shift_high=estimate.band[1],
        interval_low=estimate.interval[0], interval_high=estimate.interval[1],
        interval_level=estimate.level, reference_accuracy=fitted.reference_accuracy,
        signals_json=None if estimate.signals is None else canonical_json(estimate.signals),
        diagnostics_json=canonical_json(estimate.diagnostics) if estimate.diagnostics else None,
        alert=bool(alerts),
        alerts_json=json.dumps([a.to_record() for a in alerts]) if alerts else None,
        run_id=run_id, estimate_seconds=estimate.seconds,
    )


def _plan_stream(
    paths: list[Path], n_classes: int, rule: Any, now_ns: int, result: MonitorResult,
) -> tuple[list[_File], list[ChunkPlan]]:
    """Pass 1: read each complete file once (one in memory), drop duplicates, plan the chunks.

    Incomplete files, refused files, duplicates and what waits are recorded in ``result``.
    """
    folder = Path(result.stream) if Path(result.stream).is_dir() else None
    name_of = dict(zip(paths, display_names(paths, folder), strict=True))
    files: list[_File] = []
    by_digest: dict[str, _File] = {}
    chunker = make_chunker(rule)
    for path in paths:
        if not is_complete(path):
            result.incomplete.append(str(path))
            result.notes.append(f"{path}: not complete yet (no end-of-file marker: still "
                                "being written?); read by a later run once it is")
            continue
        try:
            batch = read_batch(path, n_classes, need_timestamps=rule.kind == "period")
        except BatchError as exc:
            result.refused.append(str(exc))
            continue
        result.warnings += list(batch.warnings)
        earlier = by_digest.get(batch.digest)
        if earlier is not None:
            result.duplicates.append((str(path), str(earlier.path)))
            earlier.stems.append(path.stem)
            if batch.labels is not None:
                earlier.label_files.append(path)
            result.notes.append(f"{path}: same logits as {earlier.path}: one content, "
                                "estimated once"
                                + (" (its labels are used)" if batch.labels is not None else ""))
            continue
        info = _File(path, name_of[path], batch.digest, batch.n_rows, batch.labels is not None,
                     stems=[path.stem])
        by_digest[batch.digest] = info
        files.append(info)
        chunker.add(len(files) - 1, batch, info.name)
        del batch
    plans = chunker.finish(now_ns)
    result.notes += chunker.notes
    return files, plans


def run_monitor(
    options: MonitorOptions,
    *,
    plot: Path | None = None,
    now: datetime | None = None,
) -> MonitorResult:
    """Estimate the new chunks of ``options.production`` and store them (see the module).

    The caller holds the state folder's lock (:func:`storage.lock.state_lock`).

    Parameters
    ----------
    options : MonitorOptions
        Checked options (:func:`tasks.monitor.options.make_options`).
    plot : Path, optional
        Also write the figure there (``--plot FILE``).
    now : datetime, optional
        The run's time (UTC): periods ending after it wait. Default: now.

    Returns
    -------
    MonitorResult

    Raises
    ------
    ValueError
        A bad reference, ``--production`` or ``--labels`` (one line naming the option); bad
        production files do not raise: they are listed in ``refused``.
    """
    run_id = options.run_id or f"cli-{uuid.uuid4().hex[:12]}"
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    now_ns = int(moment.timestamp() * 1e9)
    reference = load_reference(options.reference)
    stream, paths = list_files(options.production)
    labels = LabelIndex(options.labels)
    rule = options.chunk
    result = MonitorResult(
        stream=stream, slug=stream_slug(stream), chunking=rule.label,
        reference=str(options.reference), reference_sha256=reference.sha256,
        methods=options.methods, level=options.level, run_id=run_id, files=len(paths),
    )
    fitted = fit_methods(reference, options.methods, options.level, FitCache(fit_cache_dir()))
    calibration = calibration_digest()
    for fm in fitted:
        result.warnings += fm.warnings
        result.fits_from_cache[fm.method] = fm.from_cache
        result.references[fm.method] = (fm.reference_accuracy, fm.reference_band)

    need_ts = rule.kind == "period"
    files, plans = _plan_stream(paths, reference.n_classes, rule, now_ns, result)

    reader = _Reader(files, reference.n_classes, need_ts)
    sources: dict[int, tuple[str, Path] | None] = {}

    def source_of(index: int) -> tuple[str, Path] | None:
        if index not in sources:
            sources[index] = _label_source(files[index], labels)
        return sources[index]

    with connect() as con:
        known = stored_chunks(con, stream, rule.label)
        pairs = estimated_pairs(con, stream, rule.label)
        others = stream_references(con, stream) - {reference.sha256}
        if others and not any(p[1] in {fm.estimator_key for fm in fitted} for p in pairs):
            result.notes.append(
                f"the reference changed ({options.reference} is new to this stream): the "
                f"history under the old reference{'s' if len(others) > 1 else ''} is kept, and "
                "every chunk is estimated again under the new one, keyed apart")
        ctx = _Context(
            result=result, options=options, fitted=fitted, known=known, pairs=pairs,
            current_by_name={c.chunk_name: c.chunk_key for c in known.values()
                             if c.superseded_by is None},
            reader=reader, source_of=source_of, labels=labels,
            reference_sha256=reference.sha256, n_classes=reference.n_classes,
            calibration=calibration, con=con,
        )
        for plan in plans:
            _run_chunk(plan, ctx)
        keys = {fm.estimator_key for fm in fitted}
        rows = [r for r in read_history(con, stream=stream, chunking=rule.label,
                                        reference_sha256=reference.sha256)
                if r["estimator_key"] in keys]
        result.history = rows
        result.export = export_history(con, history_export_path())
    for fm in fitted:
        result.coverage[fm.method] = band_coverage(rows, fm.method, options.level)
    if rows:
        result.figure = _draw(result, options, plot)
    elif plot is not None:
        result.notes.append(f"--plot {plot}: nothing to draw yet (no chunk estimated)")
    return result


@dataclass
class _Context:
    """What every chunk of one run shares."""

    result: MonitorResult
    options: MonitorOptions
    fitted: list[FittedMethod]
    known: dict[str, Any]
    pairs: set[tuple[str, str]]
    current_by_name: dict[str, str]
    reader: _Reader
    source_of: Callable[[int], tuple[str, Path] | None]
    labels: LabelIndex
    reference_sha256: str
    n_classes: int
    calibration: str | None
    con: Any


def _run_chunk(plan: ChunkPlan, ctx: _Context) -> None:
    """Estimate, label and store one planned chunk (what it lacks only)."""
    result, options, rule = ctx.result, ctx.options, ctx.options.chunk
    reader, source_of, n_classes = ctx.reader, ctx.source_of, ctx.n_classes
    key = chunk_key(result.stream, rule.label, plan.content)
    stored = ctx.known.get(key)
    missing = [fm for fm in ctx.fitted if (key, fm.estimator_key) not in ctx.pairs]
    want_realized = (stored is None or stored.realized_accuracy is None) and all(
        source_of(i) is not None for i in plan.files) and plan.n_rows > 0
    start, end = plan.period()
    chunk = MonitorChunk(
        chunk_key=key, stream=result.stream, chunking=rule.label, chunk_name=plan.name,
        source=", ".join(reader.files[i].name for i in plan.files) or plan.name,
        period_start=start, period_end=end, n_rows=plan.n_rows, n_classes=n_classes,
        content_sha256=plan.content,
    )
    shown = plan.name if stored is None else stored.chunk_name  # duplicates: the stored name
    previous = ctx.current_by_name.get(plan.name)
    if previous is not None and previous != key:
        result.notes.append(f"{plan.name}: its content changed (a rewritten file or late rows): "
                            "estimated as a new chunk that supersedes the old one, which is "
                            "kept in the history")
    ctx.current_by_name[plan.name] = key
    if not missing and not want_realized:
        if stored is not None and stored.superseded_by is not None:
            mark_current(ctx.con, chunk)
        return
    try:
        logits, chunk_labels, label_paths = _gather(plan, reader, source_of, ctx.labels,
                                                    n_classes, rule, want_realized,
                                                    result.refused)
    except BatchError as exc:
        result.refused.append(str(exc))
        return
    estimates: list[MonitorEstimate] = []
    for fm in missing:
        estimate = (estimate_chunk(fm, logits, options.level, plan.name) if plan.n_rows
                    else empty_estimate(fm, options.level, plan.name))
        result.warnings += list(estimate.warnings)
        if not estimate.has_shift_band and plan.n_rows:
            note = (f"[{fm.method}] the calibration has no shift band for this method: the "
                    "sampling interval stands in for it (it does not cover shift)")
            if note not in result.notes:
                result.notes.append(note)
        alerts = check_alerts(estimate.accuracy, estimate.band, fm.reference_accuracy,
                              alert_below=options.alert_below, alert_drop=options.alert_drop)
        for alert in alerts:
            result.alerts.append(AlertRecord(result.stream, key, plan.name, fm.method,
                                             _iso(start), alert,
                                             describe(alert, plan.name, fm.method)))
        estimates.append(_record(fm, key, estimate, alerts, ctx.reference_sha256,
                                 ctx.calibration, result.run_id))
    realized = None
    if chunk_labels is not None:
        realized = Realized(realized_accuracy(logits, chunk_labels), int(chunk_labels.shape[0]),
                            ", ".join(str(p) for p in label_paths))
        result.realized_joined.append(shown)
    inserted = write_chunk(ctx.con, chunk, estimates, realized)
    result.new_estimates += inserted
    if inserted:
        result.new_chunks.append(shown)
    logger.info("monitor %s: chunk %s: %d estimate(s)%s", result.slug, plan.name, inserted,
                "" if realized is None else f", realized accuracy {realized.accuracy:.4f}")


def _gather(
    plan: ChunkPlan, reader: _Reader, source_of: Callable[[int], tuple[str, Path] | None],
    labels: LabelIndex, n_classes: int, rule: Any, want_labels: bool, refused: list[str],
) -> tuple[NDArray[np.float64], NDArray[np.int64] | None, list[Path]]:
    """The chunk's logits, and its labels when wanted and all there, one file at a time.

    A label file that does not fit is refused (a line in ``refused``): the chunk is still
    estimated, without a realized accuracy.
    """
    blocks: list[NDArray[np.float64]] = []
    label_blocks: list[NDArray[np.int64]] | None = [] if want_labels else None
    used: list[Path] = []
    for part in plan.parts:
        batch = reader.batch(part.file)
        rows = part_rows(part, batch, rule)
        blocks.append(batch.logits[rows])
        if label_blocks is None:
            continue
        source = source_of(part.file)
        assert source is not None
        try:
            file_labels = _file_labels(reader.files[part.file], source, batch, labels,
                                       n_classes)
        except BatchError as exc:
            refused.append(str(exc))
            label_blocks = None
            continue
        label_blocks.append(file_labels[rows])
        if source[1] not in used:
            used.append(source[1])
    logits = np.concatenate(blocks) if blocks else np.zeros((0, n_classes))
    chunk_labels = np.concatenate(label_blocks) if label_blocks else None
    return logits, chunk_labels, used


def _draw(result: MonitorResult, options: MonitorOptions, plot: Path | None) -> Path:
    """Render the history once; save it to the reports folder and to ``plot``."""
    from tasks.monitor.figure import render, save_figure

    started = time.perf_counter()
    fig = render(
        result.history,
        title=f"alsa-bench monitor: {result.stream} (chunk {result.chunking}, reference "
              f"{Path(result.reference).name})",
        references=result.references, alert_below=options.alert_below,
        alert_drop=options.alert_drop,
        coverage={m: (f"band held the realized accuracy in {c.covered}/{c.n_chunks} labelled "
                      f"chunks ({100 * c.rate:.0f} %, nominal {100 * c.level:.0f} %)"
                      if c.n_chunks else "no labelled chunk yet")
                  for m, c in result.coverage.items()},
    )
    try:
        target = save_figure(fig, figure_path(result.slug))
        if plot is not None:
            save_figure(fig, plot)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    logger.info("monitor %s: figure in %.2f s", result.slug, time.perf_counter() - started)
    return target
