"""Prefect task wrappers of the pipeline stages, and the helpers flows use to run them.

Each task body is one call into the plain stage function (``tasks/download.py``, ``train.py``,
``extract.py``, ``estimate.py``, ``report.py``); tests call those functions directly. What this
module adds is orchestration policy:

* **Caching across runs** with ``INPUTS + TASK_SOURCE`` (never Prefect's default policy, which
  includes the flow-run id and so never hits across runs). Every task takes a ``code_version``
  input (:func:`tasks.versions.stage_code_version`) because ``TASK_SOURCE`` sees only the
  wrapper's own source, and every location (data root, checkpoint folder, database file, report
  folder) is an input too, so a cache record never answers for another state folder.
* **Retries on DuckDB lock errors only** (:func:`retry_on_lock`): another process writing the
  file is worth waiting for; any other error fails fast.
* **Refresh and self-healing** (:func:`run_stage`, :func:`output_exists`): ``refresh`` re-runs
  a stage and everything downstream of it; a cached result whose output has gone or changed
  (checkpoint deleted or overwritten, database reset, report folder re-written for another
  selection) is recomputed instead of trusted.

* **Compute anywhere, write once**: the extract and estimate tasks never open the database;
  they publish content-addressed Parquet files (:mod:`storage.results`) and the flow process
  ingests them (:func:`ingest_result`), so the tasks can run on Dask workers.
* **Pinned threads** (:mod:`tasks.threads`): each task runs with ``threads`` torch/BLAS
  threads, the same in every layout; ``threads`` is left out of the cache key.
* **Damaged cache records** (:func:`discard_damaged_record`): a garbage record in Prefect's
  result folder is removed and the stage recomputed, with one log line saying so.

Stages pass the small frozen references of :mod:`tasks.refs`, never arrays. The ablation flow's
labelled estimator variants (:func:`estimate_variants`, :func:`ablation_task`) live here too:
the estimate stage stores results under registry keys, the ablations under labels such as
``alsa-g[freeze=positions]``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from prefect import task
from prefect.cache_policies import INPUTS, NO_CACHE, TASK_SOURCE

from storage.db import is_lock_error
from tasks.refs import CheckpointRef, DatasetRef, EstimatesRef, LogitsRef, ReportRef
from tasks.threads import pinned_threads
from tasks.versions import REFRESH_ALL, STAGES, parse_refresh

__all__ = [
    "REFRESH_ALL",
    "STAGES",
    "STAGE_CACHE",
    "StageOutcome",
    "ablation_task",
    "discard_damaged_record",
    "download_task",
    "estimate_task",
    "estimate_variants",
    "extract_task",
    "ingest_result",
    "output_exists",
    "parse_refresh",
    "prepare_splits_task",
    "report_fingerprint",
    "report_task",
    "result_intact",
    "retry_on_lock",
    "run_stage",
    "seeds_list",
    "train_task",
    "variant_label",
]

#: Cross-run, code-aware cache policy of every stage task.
STAGE_CACHE: Final = INPUTS + TASK_SOURCE
#: The same for tasks that take a ``threads`` pin: the pin is not part of the key, so the
#: sequential and the distributed layouts share one cache.
PINNED_STAGE_CACHE: Final = (INPUTS - "threads") + TASK_SOURCE

logger = logging.getLogger("tasks.stages")
#: Waits between retries of a task that met a DuckDB lock (seconds).
LOCK_RETRY_DELAYS: Final[list[float]] = [5.0, 20.0, 60.0]


def retry_on_lock(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry only when the failure is a DuckDB lock conflict.

    A plain ``def`` on purpose: Prefect checks ``inspect.isfunction`` and treats anything else
    (a ``functools.partial``) as "never retry".

    Parameters
    ----------
    task, task_run : object
        The task and its run (unused).
    state : prefect.State
        The failed state; its ``result()`` re-raises the task's exception.

    Returns
    -------
    bool
        True if the exception (or its cause) is a lock error per :func:`storage.db.is_lock_error`.
    """
    try:
        state.result()
    except Exception as exc:  # the state's own exception, re-raised
        return is_lock_error(exc)
    return False


# ------------------------------------------------------------------------------------ the tasks
@task(
    name="download",
    cache_policy=STAGE_CACHE,
    task_run_name="download-{name}",
)
def download_task(name: str, root: str, code_version: str) -> DatasetRef:
    """Stage a dataset under ``root`` (:func:`tasks.download.stage_dataset`)."""
    from tasks.download import stage_dataset

    return stage_dataset(name, Path(root))


@task(
    name="train",
    cache_policy=PINNED_STAGE_CACHE,
    task_run_name="train-{dataset.name}-{backbone}-s{seed}",
)
def train_task(
    dataset: DatasetRef,
    backbone: str,
    seed: int,
    epochs: int | None,
    max_train_samples: int | None,
    device: str,
    checkpoint_dir: str,
    code_version: str,
    threads: int = 1,
) -> CheckpointRef:
    """Train one classifier (:func:`tasks.train.train_classifier`) on ``threads`` threads."""
    from tasks.train import train_classifier

    with pinned_threads(threads):
        return train_classifier(
            dataset, backbone, seed, epochs=epochs, device=device,
            checkpoint_dir=Path(checkpoint_dir), max_train_samples=max_train_samples,
            progress=False,
        )


@task(
    name="prepare-splits",
    cache_policy=NO_CACHE,
    task_run_name="prepare-splits-{dataset.name}",
)
def prepare_splits_task(dataset: DatasetRef, threads: int = 1) -> str:
    """Generate a dataset's uncached target splits once, before its extracts fan out.

    On Dask workers, the extracts of several runs of one dataset would otherwise each generate
    the same missing splits at the same time (measured: the duplicate generation and writing
    took 44 % of two workers' time in a cold fmnist run). Idempotent and cheap when the cache is
    complete (:func:`tasks.shifts.cache.prepare_target_splits` only checks the files), so it is
    not cached itself. The thread pin is the extracts', so both layouts generate the same bytes.
    """
    from tasks.shifts.cache import prepare_target_splits

    with pinned_threads(threads):
        return str(prepare_target_splits(dataset))


@task(
    name="extract",
    cache_policy=PINNED_STAGE_CACHE,
    task_run_name="extract-{checkpoint.run_key}",
)
def extract_task(
    checkpoint: CheckpointRef,
    suite: str,
    db: str,
    device: str,
    batch_size: int,
    code_version: str,
    results: str = "",
    threads: int = 1,
) -> LogitsRef:
    """Publish the logits of every split of one run (:func:`tasks.extract.compute_logits`).

    Never opens the database ``db`` (it only names where the flow ingests): the returned
    reference points at a Parquet file under ``results`` for :func:`ingest_result`.
    """
    from tasks.extract import compute_logits

    with pinned_threads(threads):
        return compute_logits(
            checkpoint, suite=suite, db=db, device=device, batch_size=batch_size,
            code_version=code_version, results=results or None,
        )


@task(
    name="estimate",
    cache_policy=PINNED_STAGE_CACHE,
    task_run_name="estimate-{logits.run_key}",
)
def estimate_task(
    logits: LogitsRef,
    methods: list[str] | None,
    method_params: dict[str, dict[str, Any]] | None,
    code_version: str,
    checkpoint: CheckpointRef | None = None,
    threads: int = 1,
) -> EstimatesRef:
    """Fit and score every method on one run (:func:`tasks.estimate.compute_estimates`).

    Takes the :class:`~tasks.refs.LogitsRef` (its file and hash, not only the run key) so
    that new logits invalidate the cached estimates, and reads the logits from that file, not
    from the database; the :class:`~tasks.refs.CheckpointRef` lets model-aware methods
    (GNNEvaluator on graph runs) load the trained model.
    """
    from tasks.estimate import compute_estimates

    with pinned_threads(threads):
        return compute_estimates(
            logits, methods=methods, method_params=method_params, code_version=code_version,
            checkpoint=checkpoint,
        )


@task(
    name="report",
    cache_policy=STAGE_CACHE,
    retries=len(LOCK_RETRY_DELAYS),
    retry_delay_seconds=LOCK_RETRY_DELAYS,
    retry_condition_fn=retry_on_lock,
    task_run_name="report-{run_name}",
)
def report_task(
    fingerprint: str,
    run_keys: list[str] | None,
    db: str,
    out_dir: str,
    run_name: str,
    methods: list[str] | None,
    publish_artifacts: bool,
    code_version: str,
) -> ReportRef:
    """Write ``<out_dir>/<run_name>/`` and the artifacts (:func:`tasks.report.write_report`).

    ``fingerprint`` (:func:`report_fingerprint`) identifies what is reported, so an unchanged
    benchmark keeps its cached report; ``run_keys`` selects the runs (None: every run in the
    database).
    """
    from tasks.report import write_report

    return write_report(
        db, out_dir, run_name, publish_artifacts, run_keys=run_keys, methods=methods,
        fingerprint=fingerprint,
    )


def report_fingerprint(
    estimates: Sequence[EstimatesRef], run_keys: Sequence[str] | None,
    methods: Sequence[str] | None,
) -> str:
    """Digest of what a report covers: the estimates' digests, the runs and the methods.

    Written into the report folder by :func:`tasks.report.write_report`, so a cached report
    whose folder was since re-written for another selection is recognised as stale.

    Returns
    -------
    str
        24 hexadecimal characters.
    """
    import hashlib
    import json

    payload = {
        "estimates": sorted([e.run_key, e.digest] for e in estimates),
        "run_keys": None if run_keys is None else sorted(run_keys),
        "methods": None if methods is None else sorted(methods),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


@task(
    name="ablate",
    cache_policy=STAGE_CACHE,
    retries=len(LOCK_RETRY_DELAYS),
    retry_delay_seconds=LOCK_RETRY_DELAYS,
    retry_condition_fn=retry_on_lock,
    task_run_name="ablate-{logits.run_key}",
)
def ablation_task(
    logits: LogitsRef,
    variants: dict[str, tuple[str, dict[str, Any]]],
    code_version: str,
) -> EstimatesRef:
    """Estimate every target split of one run with labelled estimator variants.

    See :func:`estimate_variants`.
    """
    return estimate_variants(
        logits.run_key, variants, db=logits.db_path, code_version=code_version
    )


def variant_label(method: str, **params: Any) -> str:
    """Name under which a variant's estimates are stored: ``method[key=value,...]``.

    Sequences are joined with ``+``; with no parameters the label is ``method[default]``.

    Examples
    --------
    >>> variant_label("alsa-g", freeze=("peaks", "variances"))
    'alsa-g[freeze=peaks+variances]'
    >>> variant_label("alsa-g", alpha=0.5)
    'alsa-g[alpha=0.5]'
    """
    if not params:
        return f"{method}[default]"

    def text(value: Any) -> str:
        if isinstance(value, (list, tuple)):
            return "+".join(map(str, value))
        return str(value)

    return f"{method}[{','.join(f'{k}={text(v)}' for k, v in sorted(params.items()))}]"


def estimate_variants(
    run_key: str,
    variants: dict[str, tuple[str, dict[str, Any]]],
    *,
    db: str | Path | None = None,
    code_version: str = "",
) -> EstimatesRef:
    """Fit labelled estimator variants on a run's validation split and estimate its targets.

    Like :func:`tasks.estimate.estimate_run`, but each result is stored under its label (e.g.
    ``alsa-g[freeze=positions]``) rather than the registry key, so ablations sit beside the
    main estimates without replacing them. Anchors of variants are not stored.

    Parameters
    ----------
    run_key : str
        Run whose logits the extract stage stored.
    variants : dict of str to (str, dict)
        ``label -> (registry key, hyper-parameters)``; labels should contain ``[`` so reports
        tell them from registry keys (:func:`variant_label`).
    db : str or Path, optional
        DuckDB file; default :func:`storage.paths.db_path`.
    code_version : str, default ""
        Stored with every row.

    Returns
    -------
    EstimatesRef
        Digest over the rows written.

    Raises
    ------
    ValueError
        If ``variants`` is empty, a label is a registry key, or a method or parameter is
        unknown.
    storage.errors.NotFoundError
        If the run or its splits are not stored.
    """
    import json

    from estimators import available_estimators
    from storage.db import connect
    from storage.errors import NotFoundError
    from storage.estimates import EstimateRow, estimates_digest, write_estimates
    from storage.logits import list_splits, read_target_logits, read_val
    from storage.paths import db_path
    from storage.runs import get_run
    from tasks.estimate import build_estimator

    if not variants:
        raise ValueError("variants must name at least one (label -> (method, params)); got none.")
    registered = available_estimators(include_scores=True, include_opt_in=True)
    clashes = [label for label in variants if label in registered]
    if clashes:
        raise ValueError(
            f"variant labels must differ from registry keys (they would replace the main "
            f"estimates); got {clashes}."
        )
    path = Path(db) if db is not None else db_path()
    with connect(path) as con:
        run = get_run(con, run_key)
        if run is None:
            raise NotFoundError(f"Run {run_key!r} is not stored in {str(path)!r}.")
        targets = list_splits(con, run_key, role="target")
        val_logits, val_labels = read_val(con, run_key)
        target_logits = {t.split: read_target_logits(con, run_key, t.split) for t in targets}

    rows: list[EstimateRow] = []
    for label, (method, params) in variants.items():
        estimator = build_estimator(method, params, run.seed)
        start = time.perf_counter()
        estimator.fit(val_logits, val_labels)
        fit_seconds = time.perf_counter() - start
        for info in targets:
            start = time.perf_counter()
            result = estimator.estimate(target_logits[info.split])
            record = result.to_record()
            rows.append(EstimateRow(
                run_key=run_key, split=info.split, method=label,
                params_json=json.dumps(record["params"], sort_keys=True),
                estimated_accuracy=float(result.accuracy),
                true_accuracy=float(info.true_accuracy),
                abs_error=abs(float(result.accuracy) - float(info.true_accuracy)),
                fit_seconds=fit_seconds, estimate_seconds=time.perf_counter() - start,
                diagnostics_json=json.dumps(record["diagnostics"], sort_keys=True),
                code_version=code_version,
                interval_low=float(result.interval[0]),
                interval_high=float(result.interval[1]),
                interval_level=float(result.level),
            ))
    with connect(path) as con:
        write_estimates(con, run_key, rows)
    return EstimatesRef(run_key=run_key, db_path=str(path), digest=estimates_digest(rows))


# ------------------------------------------------------------------------------------ running
@dataclass(frozen=True)
class StageOutcome:
    """How one stage task of a flow run ended.

    Attributes
    ----------
    stage : str
        Stage name (:data:`STAGES`).
    key : str
        What it worked on: dataset name, run key or report name.
    state : str
        Prefect state name: ``"Completed"`` (ran) or ``"Cached"``.
    seconds : float
        Wall-clock time in the flow, cache look-up included.
    healed : bool
        True if a cached result pointed at missing output and the stage was re-run.
    """

    stage: str
    key: str
    state: str
    seconds: float
    healed: bool = False

    @property
    def cached(self) -> bool:
        """Whether the result came from Prefect's cache."""
        return self.state == "Cached"


def run_stage(
    stage_task: Any,
    stage: str,
    refresh: frozenset[str],
    *args: Any,
    key: str,
    check: Callable[[Any], bool] | None = None,
    ingest: Callable[[Any], Any] | None = None,
    **kwargs: Any,
) -> tuple[Any, StageOutcome]:
    """Run a stage task, honouring ``refresh`` and re-running it if its cached output is gone.

    Parameters
    ----------
    stage_task : prefect.Task
        One of the tasks of this module.
    stage : str
        Its stage name (decides whether ``refresh`` applies).
    refresh : frozenset of str
        The output of :func:`parse_refresh`.
    *args, **kwargs
        The task's arguments.
    key : str
        Label of this call in the returned outcome.
    check : callable, optional
        ``check(result) -> bool``: whether the result's output still exists (e.g.
        :func:`output_exists`). When it says no, the task is run again with its cache refreshed.
    ingest : callable, optional
        ``ingest(result) -> result``: run in this process after the check (e.g.
        :func:`ingest_result`); its return value is the stage's result.

    Returns
    -------
    result : object
        The task's return value (after ``ingest``).
    outcome : StageOutcome

    Raises
    ------
    Exception
        Whatever the task raised (after its retries).
    RuntimeError
        If the output is still missing right after a fresh run.
    """
    from tasks.faults import kill_point

    kill_point(stage)
    start = time.perf_counter()
    fresh = stage in refresh
    if not fresh:
        discard_damaged_record(stage_task, args, kwargs, key=key)
    runner = stage_task.with_options(refresh_cache=True) if fresh else stage_task
    state = runner(*args, return_state=True, **kwargs)
    result = state.result()
    healed = False
    if check is not None and not check(result):
        healed = True
        state = stage_task.with_options(refresh_cache=True)(*args, return_state=True, **kwargs)
        result = state.result()
        if not check(result):
            raise RuntimeError(
                f"Stage {stage!r} ({key}) finished but its output is missing: {result!r}."
            )
    if ingest is not None:
        result = ingest(result)
    outcome = StageOutcome(
        stage=stage, key=key, state=str(state.name), seconds=time.perf_counter() - start,
        healed=healed,
    )
    kill_point(stage, "end")
    return result, outcome


def cache_record_path(stage_task: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Path:
    """Where Prefect keeps the cache record of ``stage_task(*args, **kwargs)``.

    The key is computed with the task's own cache policy, exactly as Prefect's task engine
    does; the folder is the task's result storage or ``PREFECT_RESULTS_LOCAL_STORAGE_PATH``.
    """
    from types import SimpleNamespace

    from prefect.settings import get_current_settings
    from prefect.utilities.callables import get_call_parameters

    params = get_call_parameters(stage_task.fn, tuple(args), dict(kwargs))
    cache_key = stage_task.cache_policy.compute_key(
        task_ctx=SimpleNamespace(task=stage_task), inputs=params, flow_parameters={}
    )
    storage = getattr(stage_task, "result_storage", None)
    base = getattr(storage, "basepath", None) or get_current_settings().results.local_storage_path
    return Path(base).expanduser() / str(cache_key)


def discard_damaged_record(
    stage_task: Any, args: Sequence[Any], kwargs: dict[str, Any], *, key: str = ""
) -> Path | None:
    """Remove the task's cache record if it is garbage, saying so in one log line.

    Prefect treats an unreadable record as a miss and silently recomputes; this makes it
    visible (and removes the file first, so nothing half-reads it). A healthy or missing
    record is left alone.

    Returns
    -------
    Path or None
        The removed record, or None.
    """
    from prefect.results import ResultRecord

    try:
        path = cache_record_path(stage_task, args, kwargs)
    except Exception:  # a key that cannot be computed: Prefect will not cache either
        return None
    if not path.is_file():
        return None
    try:
        record = ResultRecord.deserialize(path.read_bytes())
        _ = record.result
    except Exception as exc:
        path.unlink(missing_ok=True)
        logger.warning(
            "cached result of stage %r (%s) at %s is damaged (%s); recomputing the stage.",
            stage_task.name, key, path, type(exc).__name__,
        )
        return path
    return None


def ingest_result(ref: Any) -> Any:
    """Ingest a worker's published result into the database, in this (the flow's) process.

    ``LogitsRef`` → :func:`tasks.extract.ingest_logits` (returns the reference with the
    stored rows' digest); ``EstimatesRef`` → :func:`tasks.estimate.ingest_estimates`.

    Raises
    ------
    TypeError
        For any other reference.
    """
    if isinstance(ref, LogitsRef):
        from tasks.extract import ingest_logits

        return ingest_logits(ref)
    if isinstance(ref, EstimatesRef):
        from tasks.estimate import ingest_estimates

        return ingest_estimates(ref)
    raise TypeError(f"ref must be a LogitsRef or an EstimatesRef; got {type(ref).__name__}.")


def result_intact(ref: Any) -> bool:
    """Whether the result file a ``LogitsRef``/``EstimatesRef`` points at exists, unchanged.

    For an estimates file the anchors file it names is checked too.
    """
    from storage.results import ResultCorruptError, read_estimates_file, verify_file

    if not isinstance(ref, (LogitsRef, EstimatesRef)) or not ref.path:
        return False
    try:
        if isinstance(ref, LogitsRef):
            return verify_file(ref.path) == ref.sha256
        return verify_file(ref.path) == ref.sha256 and bool(read_estimates_file(ref.path).rows)
    except ResultCorruptError:
        return False


# ------------------------------------------------------------------------------------ outputs
def output_exists(
    ref: Any, *, methods: Sequence[str] | None = None, fingerprint: str | None = None
) -> bool:
    """Whether the output a stage reference points at is still there, unchanged.

    A cached stage result is only as good as the files and rows it describes; another run with
    other parameters may have replaced them (checkpoints, logits and estimates are stored by
    run key). This is the check :func:`run_stage` uses to decide to re-run a cached stage.

    Parameters
    ----------
    ref : DatasetRef, CheckpointRef, LogitsRef, EstimatesRef or ReportRef
        ``DatasetRef``: every raw file of the dataset exists under its root.
        ``CheckpointRef``: the file exists with the recorded SHA-256.
        ``LogitsRef``: the Parquet file is intact (:func:`result_intact`), it is the one the
        database holds for the run (``ingested``), and the run's splits have the recorded
        digest.
        ``EstimatesRef``: the file is intact and ingested (when the reference has one: ablation
        variants are written to the database directly), and the database holds the run's
        estimates of ``methods`` with the recorded digest.
        ``ReportRef``: ``report.md`` exists (and carries ``fingerprint`` when one is given).
    methods : sequence of str, optional
        For an ``EstimatesRef``: the method names the estimates were written under; default
        every registered estimator.
    fingerprint : str, optional
        For a ``ReportRef``: the :func:`report_fingerprint` it must carry.

    Returns
    -------
    bool

    Raises
    ------
    TypeError
        If ``ref`` is none of these.
    """
    if isinstance(ref, DatasetRef):
        return _dataset_staged(ref)
    if isinstance(ref, CheckpointRef):
        return _checkpoint_intact(ref)
    if isinstance(ref, ReportRef):
        from tasks.report import read_fingerprint

        folder = Path(ref.folder)
        return (folder / "report.md").is_file() and (
            fingerprint is None or read_fingerprint(folder) == fingerprint
        )
    if isinstance(ref, LogitsRef):
        return result_intact(ref) and _db_check(ref.db_path, lambda con: _logits_match(con, ref))
    if isinstance(ref, EstimatesRef):
        if not ref.path:  # written to the database directly (ablation variants)
            return _db_check(ref.db_path, lambda con: _estimates_match(con, ref, methods))
        return result_intact(ref) and _db_check(
            ref.db_path, lambda con: _estimates_match(con, ref, methods)
        )
    raise TypeError(
        f"ref must be a DatasetRef, CheckpointRef, LogitsRef, EstimatesRef or ReportRef; "
        f"got {type(ref).__name__}."
    )


def _dataset_staged(ref: DatasetRef) -> bool:
    from tasks.datasets import get_dataset_spec

    try:
        files = get_dataset_spec(ref.name).raw_files(Path(ref.root))
    except ValueError:  # the dataset is no longer registered: let the stage say so
        return False
    return bool(files) and all(Path(f).is_file() for f in files)


def _checkpoint_intact(ref: CheckpointRef) -> bool:
    import hashlib

    path = Path(ref.path)
    if not path.is_file():
        return False
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            h.update(chunk)
    return h.hexdigest() == ref.sha256


def _db_check(db: str, probe: Callable[[Any], bool]) -> bool:
    from storage.db import connect

    if not Path(db).is_file():
        return False
    with connect(db) as con:
        return bool(probe(con))


def _logits_match(con: Any, ref: LogitsRef) -> bool:
    from storage.logits import list_splits, run_digest
    from storage.results import current_file

    return (
        current_file(con, "logits", ref.run_key) == ref.sha256
        and bool(list_splits(con, ref.run_key))
        and run_digest(con, ref.run_key) == ref.digest
    )


def _estimates_match(con: Any, ref: EstimatesRef, methods: Sequence[str] | None) -> bool:
    from storage.estimates import estimates_digest, read_estimates
    from tasks.estimate import default_method_names

    from storage.results import current_file

    if ref.path and current_file(con, "estimates", ref.run_key) != ref.sha256:
        return False
    wanted = set(default_method_names() if methods is None else methods)
    rows = [r for r in read_estimates(con, ref.run_key) if r.method in wanted]
    return bool(rows) and estimates_digest(rows) == ref.digest


def seeds_list(seeds: int | Sequence[int]) -> list[int]:
    """Seeds from a count (``3`` → ``[0, 1, 2]``) or an explicit list.

    Raises
    ------
    ValueError
        If the count is below 1, the list is empty, or a seed is negative or repeated.
    """
    if isinstance(seeds, bool):
        raise ValueError(f"seeds must be a count >= 1 or a list of seeds; got {seeds!r}.")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"seeds must be a count >= 1 or a list of seeds; got {seeds}.")
        return list(range(seeds))
    out = [int(s) for s in seeds]
    if not out or any(s < 0 for s in out) or len(set(out)) != len(out):
        raise ValueError(
            f"seeds must be a non-empty list of distinct seeds >= 0; got {list(seeds)!r}."
        )
    return out
