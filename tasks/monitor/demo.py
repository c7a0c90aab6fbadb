"""The offline demo of ``alsa-bench monitor --demo``: 30 days of a deployed Fashion-MNIST model.

The stream is made from the benchmark's own splits of ``fmnist`` (no download, no prior
``make bench``):

* **reference** = the validation split ``val`` (5,000 images, with labels);
* **day d** = 1,000 rows drawn from the split of that day's severity: ``clean`` (the 10,000
  test images) on days 1-6, then the benchmark's ``zoom_blur-1`` ... ``zoom_blur-5`` (a camera
  drifting out of focus: zoom blur of rising strength over its 2,000 base test images,
  ``tasks/data/shifts/synthetic.py``): severity 1 on days 7-11, 2 on days 12-16, 3 on 17-21, 4
  on 22-26, 5 on 27-30;
* **label shift in the middle**: on days 14-17 the rows are drawn with class priors that favour
  the four upper-body garments (T-shirt/top, Pullover, Coat, Shirt: weight 4 against 1), the
  classes the model confuses most (:func:`tasks.data.shifts.label_shift.prior_counts`, the
  benchmark's own rounding);
* every file has a ``timestamp`` column (the day, from 2026-03-01, rows spread over it); labels
  arrive with a lag of 3 days: ``labels/day-XX.npz`` exists for days 1-27.

Where the logits come from: the benchmark's database when it holds an ``fmnist`` run with the
splits ``val``, ``clean`` and ``zoom_blur-1..5`` (the run of ``make bench``, backbone ``lenet``,
``mlp`` or ``resnet``, seed 0); otherwise the ``mlp`` backbone is trained here for 2 epochs on
the benchmark's ``fmnist`` training split (about 25 s on 2 cores) and predicts the splits.
Either way the files are built once, into ``<state>/monitor-demo/``, and reused.

The demo's alert rules are ``--alert-below 0.8`` and ``--alert-drop 10``; :func:`demo_summary`
compares the days each rule alerted on with the days it should have (true accuracy below 0.8;
true accuracy more than 10 points below the reference's true accuracy), and the band's realized
coverage with its nominal level.

Why zoom blur: on the demo's mlp, ``auto``'s band held the true accuracy at every severity of
zoom blur (and of pixelation, JPEG, shot noise), but at 1 of 5 severities of ``fog`` and none of
``contrast``, which shrink the logits (the model loses confidence much faster than accuracy): a
30-day ``fog`` stream built the same way gave estimates 7.5 to 19.2 points too low and a band
that held the realized accuracy on 8 of 27 labelled days (docs/MONITOR.md, "When the band
fails"). The realized coverage the monitor reports is what shows such a failure in production.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ALERT_BELOW",
    "ALERT_DROP",
    "DemoDay",
    "DemoStream",
    "build_demo",
    "demo_schedule",
    "demo_summary",
]

logger = logging.getLogger(__name__)

#: Days of the stream, rows per day, the lag of the labels.
DAYS: Final[int] = 30
ROWS_PER_DAY: Final[int] = 1000
LABEL_LAG_DAYS: Final[int] = 3
#: The corruption whose severity rises (a benchmark split family ``fog-1`` ... ``fog-5``).
CORRUPTION: Final[str] = "zoom_blur"
#: First day of severity 1, 2, 3, 4, 5.
SEVERITY_STARTS: Final[tuple[int, ...]] = (7, 12, 17, 22, 27)
#: Days with the label shift, and the classes it favours (weight 4 against 1).
LABEL_SHIFT_DAYS: Final[tuple[int, ...]] = (14, 15, 16, 17)
HARD_CLASSES: Final[tuple[int, ...]] = (0, 2, 4, 6)
HARD_WEIGHT: Final[float] = 4.0
#: The demo's alert rules.
ALERT_BELOW: Final[float] = 0.8
ALERT_DROP: Final[float] = 10.0
START: Final[datetime] = datetime(2026, 3, 1, tzinfo=UTC)
#: Backbones whose stored benchmark logits the demo reuses, in order of preference.
STORED_BACKBONES: Final[tuple[str, ...]] = ("lenet", "mlp", "resnet")
#: The benchmark splits the demo needs.
SPLITS: Final[tuple[str, ...]] = ("clean",) + tuple(f"{CORRUPTION}-{s}" for s in range(1, 6))
_MARKER: Final[str] = "stream.json"
_FORMAT: Final[str] = "alsa-bench-monitor-demo/2"


@dataclass(frozen=True)
class DemoDay:
    """One day of the demo stream: its number (1-30), date, severity (0 = clean), label shift."""

    day: int
    date: str
    severity: int
    label_shift: bool

    @property
    def split(self) -> str:
        """The benchmark split the day's rows come from."""
        return "clean" if self.severity == 0 else f"{CORRUPTION}-{self.severity}"

    @property
    def file(self) -> str:
        return f"day-{self.day:02d}.npz"


def demo_schedule() -> list[DemoDay]:
    """The 30 days: severity rising, the label shift in the middle.

    Examples
    --------
    >>> [(d.day, d.severity, d.label_shift) for d in demo_schedule()[12:17]]
    [(13, 2, False), (14, 2, True), (15, 2, True), (16, 2, True), (17, 3, True)]
    """
    out = []
    for day in range(1, DAYS + 1):
        severity = sum(day >= start for start in SEVERITY_STARTS)
        date = (START + timedelta(days=day - 1)).strftime("%Y-%m-%d")
        out.append(DemoDay(day, date, severity, day in LABEL_SHIFT_DAYS))
    return out


@dataclass(frozen=True)
class DemoStream:
    """The built demo: its files, where its logits came from, each day's true accuracy (by
    file name) and the reference's true accuracy."""

    folder: Path
    reference: Path
    production: Path
    labels: Path
    source: str
    truth: dict[str, float]
    reference_accuracy: float

    @property
    def days(self) -> list[DemoDay]:
        return demo_schedule()


def _pools_from_database(log: Callable[[str], None]) -> tuple[str, dict[str, Any]] | None:
    """``val`` and :data:`SPLITS` of a stored ``fmnist`` run, or None when there is none."""
    from storage.db import connect
    from storage.logits import list_splits, read_target_labels, read_target_logits, read_val
    from storage.paths import db_path
    from storage.runs import list_runs

    if not db_path().exists():
        return None
    with connect() as con:
        runs = {r.run_key: r for r in list_runs(con) if r.dataset == "fmnist" and r.seed == 0}
        for backbone in STORED_BACKBONES:
            key = f"fmnist.{backbone}.s0"
            if key not in runs:
                continue
            have = {info.split for info in list_splits(con, key)}
            if not {"val", *SPLITS} <= have:
                continue
            log(f"demo: using the benchmark's stored logits of run {key}")
            pools: dict[str, Any] = {"val": read_val(con, key)}
            for split in SPLITS:
                pools[split] = (read_target_logits(con, key, split),
                                read_target_labels(con, key, split))
            return f"the benchmark database (run {key})", pools
    return None


def _pools_from_training(log: Callable[[str], None]) -> tuple[str, dict[str, Any]]:
    """Train ``mlp`` on the benchmark's ``fmnist`` source split and predict the splits."""
    import torch

    from storage.paths import data_dir
    from tasks.data.datasets import get_dataset_spec
    from tasks.data.targets import generate_split, get_target_split
    from tasks.models.backbones import get_backbone_spec
    from tasks.models.modalities.image import ADAPTER

    spec = get_dataset_spec("fmnist")
    spec.stage(data_dir())
    source = spec.load_source(data_dir())
    pool = spec.load_target_pool(data_dir())
    recipe = get_backbone_spec("mlp")
    torch.manual_seed(0)
    model = recipe.build(spec.n_classes, spec.input_shape)
    device = torch.device("cpu")
    log("demo: no stored fmnist logits in the benchmark database; training the mlp backbone "
        "for 2 epochs on the benchmark's fmnist training split (about 25 s on 2 cores)")
    ADAPTER.fit(model, recipe, spec, (source.train_x, source.train_y),
                (source.val_x, source.val_y), epochs=2, seed=0, device=device, progress=False,
                key="monitor-demo")

    def predict(samples: NDArray[Any]) -> NDArray[np.float32]:
        return np.asarray(ADAPTER.predict(model, spec, samples, device, 1024), np.float32)

    pools: dict[str, Any] = {"val": (predict(source.val_x), np.asarray(source.val_y))}
    for split in SPLITS:
        images, labels = generate_split("fmnist", get_target_split("fmnist", split), pool)
        pools[split] = (predict(images), np.asarray(labels, dtype=np.int64))
    return "an mlp trained here for 2 epochs on the benchmark's fmnist training split", pools


def _draw_day(day: DemoDay, logits: NDArray[Any], labels: NDArray[np.int64],
              n_classes: int) -> NDArray[np.int64]:
    """Row indices of one day: uniform, or by the label-shift priors."""
    from tasks.data.shifts.label_shift import prior_counts

    rng = np.random.default_rng([0, zlib.crc32(f"monitor-demo/{day.day}".encode())])
    if not day.label_shift:
        return np.sort(rng.choice(labels.shape[0], size=ROWS_PER_DAY, replace=False))
    weights = np.ones(n_classes)
    weights[list(HARD_CLASSES)] = HARD_WEIGHT
    available = np.bincount(labels, minlength=n_classes)
    counts = prior_counts(weights / weights.sum(), available, ROWS_PER_DAY)
    parts = [rng.choice(np.flatnonzero(labels == c), size=int(k), replace=False)
             for c, k in enumerate(counts) if k > 0]
    return np.sort(np.concatenate(parts))


def _save_npz(path: Path, **arrays: Any) -> None:
    """``np.savez`` to a temporary name, then a rename: never half a file under ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as handle:
        np.savez(handle, **arrays)
    os.replace(tmp, path)


def _load(folder: Path) -> DemoStream | None:
    marker = folder / _MARKER
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if data.get("format") != _FORMAT or data.get("corruption") != CORRUPTION:
        return None
    stream = DemoStream(folder, folder / "reference.npz", folder / "production",
                        folder / "labels", str(data["source"]),
                        {str(k): float(v) for k, v in data["truth"].items()},
                        float(data["reference_accuracy"]))
    wanted = [stream.reference] + [stream.production / d.file for d in demo_schedule()]
    return stream if all(p.is_file() for p in wanted) else None


def build_demo(folder: Path, log: Callable[[str], None] = logger.info) -> DemoStream:
    """Build the demo stream into ``folder`` (or reuse it when it is already there, whole).

    Parameters
    ----------
    folder : Path
        ``<state>/monitor-demo``.
    log : callable
        Progress lines.

    Returns
    -------
    DemoStream
    """
    existing = _load(folder)
    if existing is not None:
        log(f"demo: reusing the stream in {folder} (logits from {existing.source})")
        return existing
    found = _pools_from_database(log)
    source, pools = found if found is not None else _pools_from_training(log)
    ref_logits, ref_labels = pools["val"]
    n_classes = int(np.asarray(ref_logits).shape[1])
    for sub in ("production", "labels"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    _save_npz(folder / "reference.npz", logits=np.asarray(ref_logits, np.float32),
              labels=np.asarray(ref_labels, np.int64))
    truth: dict[str, float] = {}
    for day in demo_schedule():
        logits, labels = pools[day.split]
        rows = _draw_day(day, logits, np.asarray(labels), n_classes)
        z, y = np.asarray(logits)[rows], np.asarray(labels, np.int64)[rows]
        start = np.datetime64(day.date + "T00:00:00", "s")
        seconds = np.sort(np.random.default_rng(day.day).integers(0, 86_400, size=rows.size))
        stamps = start + seconds.astype("timedelta64[s]")
        _save_npz(folder / "production" / day.file, logits=z.astype(np.float32),
                  timestamp=stamps)
        if day.day <= DAYS - LABEL_LAG_DAYS:
            _save_npz(folder / "labels" / day.file, labels=y)
        truth[day.file] = float(np.mean(z.argmax(axis=1) == y))
    marker = folder / _MARKER
    tmp = marker.with_name(f".{marker.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"format": _FORMAT, "corruption": CORRUPTION, "source": source,
                               "reference_accuracy": float(np.mean(
                                   np.asarray(ref_logits).argmax(axis=1) == ref_labels)),
                               "truth": truth}, indent=1))
    os.replace(tmp, marker)
    return DemoStream(folder, folder / "reference.npz", folder / "production",
                      folder / "labels", source, truth,
                      float(np.mean(np.asarray(ref_logits).argmax(axis=1) == ref_labels)))


def demo_summary(
    stream: DemoStream, history: Sequence[Mapping[str, Any]], coverage: Mapping[str, Any],
) -> list[str]:
    """What the demo shows, per method: the days each alert rule fired on against the days it
    should have (true accuracy below :data:`ALERT_BELOW`; true accuracy more than
    :data:`ALERT_DROP` points below the reference's true accuracy), and the band's realized
    coverage next to its nominal level."""
    days = {d.file: d.day for d in demo_schedule()}

    def fmt(names: Sequence[str]) -> str:
        return ", ".join(str(days.get(n, n)) for n in sorted(names, key=lambda n: days.get(n, 0))
                         ) or "none"

    rules = {
        "below": (f"true accuracy below {ALERT_BELOW:g}",
                  {f for f, acc in stream.truth.items() if acc < ALERT_BELOW}),
        "drop": (f"true accuracy more than {ALERT_DROP:g} points below the reference's "
                 f"{stream.reference_accuracy:.3f}",
                 {f for f, acc in stream.truth.items()
                  if stream.reference_accuracy - acc > ALERT_DROP / 100}),
    }
    lines: list[str] = []
    for method in dict.fromkeys(r["method"] for r in history):
        rows = [r for r in history if r["method"] == method]
        for kind, (what, truly) in rules.items():
            fired = {r["chunk_name"] for r in rows if kind in _kinds(r)}
            lines.append(f"[{method}] --alert-{kind} fired on days {fmt(fired)}; {what} on days "
                         f"{fmt(truly)}: false alarms {fmt(fired - truly)}; missed "
                         f"{fmt(truly - fired)}")
        cov = coverage.get(method)
        if cov is not None:
            lines.append(f"[{method}] band coverage on the demo stream: {cov.line()}")
    return lines


def _kinds(row: Mapping[str, Any]) -> set[str]:
    """The alert kinds of a history row (``alerts`` list or ``alerts_json`` text)."""
    alerts = row.get("alerts")
    if alerts is None and row.get("alerts_json"):
        alerts = json.loads(row["alerts_json"])
    return {a["kind"] for a in alerts or []}
