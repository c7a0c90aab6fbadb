"""Whether a stage's cached result can be trusted, and running a stage so that it heals.

* **Refresh and self-healing**, one path for both layouts: :func:`stage_call` picks the task
  to call (cache refreshed when ``refresh`` names the stage, else after discarding a damaged
  record) and :func:`settle` trusts a (cached) result only if its output is still there
  (:func:`output_exists`, :func:`result_intact`), else recomputes it once: a checkpoint deleted
  or overwritten, a database reset, a report folder re-written for another selection, or (on
  Dask) a task that failed because its upstream file went missing (:func:`future_result`).
  :func:`run_stage` is the sequential composition; the distributed layout submits the task
  :func:`stage_call` gives and settles each future as it lands.
* **Compute anywhere, write once**: the extract and estimate tasks never open the database;
  they publish content-addressed Parquet files (:mod:`storage.results`) and the flow process
  ingests them (:func:`ingest_result`), so the tasks can run on Dask workers.
* **Damaged cache records** (:func:`discard_damaged_record`): a garbage record in Prefect's
  result folder is removed and the stage recomputed, with one log line saying so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.runtime.refs import CheckpointRef, DatasetRef, EstimatesRef, LogitsRef, ReportRef

logger = logging.getLogger("tasks.stages.healing")

__all__ = [
    "FAILED",
    "HEALABLE",
    "StageOutcome",
    "cache_record_path",
    "discard_damaged_record",
    "future_result",
    "ingest_result",
    "is_healable",
    "output_exists",
    "result_intact",
    "run_stage",
    "settle",
    "stage_call",
]


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


#: What :func:`future_result` gives for a task that failed: a result never trusted.
FAILED: Any = type("Failed", (), {"__repr__": lambda self: "FAILED"})()


def stage_call(
    stage_task: Any,
    stage: str,
    refresh: frozenset[str],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    *,
    key: str = "",
) -> Any:
    """The task to call (or ``.submit``) for one stage call, in either layout.

    With ``stage`` in ``refresh``: the task with its cache refreshed. Otherwise the task
    itself, after removing a damaged cache record of this very call
    (:func:`discard_damaged_record`); when an argument is a future (an upstream task submitted
    but not finished), the call's cache key is not known yet and no record is looked at.
    """
    if stage in refresh:
        return stage_task.with_options(refresh_cache=True)
    if not _has_futures(args, kwargs):
        discard_damaged_record(stage_task, args, kwargs, key=key)
    return stage_task


def settle(
    stage: str,
    key: str,
    result: Any,
    check: Callable[[Any], bool] | None,
    rerun: Callable[[], Any],
) -> tuple[Any, bool]:
    """Trust a stage's (possibly cached) result, or recompute it once; both layouts use this.

    A recomputation is said in one WARNING line (what was missing or damaged, and that the
    stage runs again), before it starts.

    Parameters
    ----------
    stage, key : str
        Stage name and what it worked on (for the error message).
    result : object
        The task's result, or :data:`FAILED` (a failed future: e.g. an estimate whose upstream
        logits file went missing).
    check : callable, optional
        ``check(result) -> bool``: whether the output still exists (:func:`output_exists`,
        :func:`result_intact`). None trusts any result that is not :data:`FAILED`.
    rerun : callable
        Runs the task again with its cache refreshed and returns its result (raising what the
        task raised).

    Returns
    -------
    result : object
    healed : bool
        True if the stage was recomputed.

    Raises
    ------
    RuntimeError
        If the output is still missing right after the fresh run.
    """
    if result is not FAILED and (check is None or check(result)):
        return result, False
    where = f" ({key})" if key else ""
    why = ("failed because a file it reads is missing or damaged" if result is FAILED
           else "has a cached result whose output is missing or damaged")
    logger.warning("Stage %r%s %s; recomputing it.", stage, where, why)
    result = rerun()
    if check is not None and not check(result):
        raise RuntimeError(
            f"Stage {stage!r}{where} finished but its output is missing: {result!r}."
        )
    return result, True


#: Failures a recomputation can heal: a file the task reads is missing or damaged (its
#: upstream result was deleted, or a cached reference names a file that is gone).
HEALABLE: tuple[type[BaseException], ...] = (FileNotFoundError,)


def is_healable(exc: BaseException) -> bool:
    """Whether a task's failure comes from a missing or damaged input file (worth one rerun
    on a healed upstream result); every other failure is deterministic and is raised at once.
    """
    from storage.results import ResultCorruptError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (*HEALABLE, ResultCorruptError)):
            return True
        current = current.__cause__ or current.__context__
    return False


def future_result(future: Any) -> Any:
    """A finished future's result, or :data:`FAILED` if its task failed on a missing or
    damaged input file (:func:`is_healable`; :func:`settle` then recomputes it once).

    Any other failure (a ``ValueError``, a ``TypeError``: a deterministic one) is raised: it
    would fail the same way again, and the task's own hook has logged it
    (:func:`tasks.stages.common.log_task_failure`). Waits for the result itself: the future's
    state as the API reports it may lag.

    Raises
    ------
    Exception
        The task's exception, when it is not healable.
    """
    try:
        return future.result()
    except Exception as exc:
        if is_healable(exc):
            return FAILED
        raise


def _has_futures(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    from prefect.futures import PrefectFuture

    return any(isinstance(v, PrefectFuture) for v in (*args, *kwargs.values()))


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
    """Run a stage task in this process: :func:`stage_call`, then :func:`settle`, then ingest.

    Parameters
    ----------
    stage_task : prefect.Task
        A stage's ``@task``.
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
    from tasks.runtime.faults import kill_point

    kill_point(stage)
    start = time.perf_counter()
    runner = stage_call(stage_task, stage, refresh, args, kwargs, key=key)
    states = [runner(*args, return_state=True, **kwargs)]

    def rerun() -> Any:
        refreshed = stage_task.with_options(refresh_cache=True)
        states.append(refreshed(*args, return_state=True, **kwargs))
        return states[-1].result()

    result, healed = settle(stage, key, states[0].result(), check, rerun)
    if ingest is not None:
        result = ingest(result)
    outcome = StageOutcome(
        stage=stage, key=key, state=str(states[-1].name), seconds=time.perf_counter() - start,
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
        from storage.doctor import quarantine
        from storage.paths import state_dir

        moved = quarantine(path, state_dir(), f"cache record of stage {stage_task.name!r} does "
                           f"not deserialize: {type(exc).__name__}")
        logger.warning(
            "cached result of stage %r (%s) at %s is damaged (%s); moved it to %s and "
            "recomputing the stage.", stage_task.name, key, path, type(exc).__name__, moved,
        )
        return path
    return None


def ingest_result(ref: Any) -> Any:
    """Ingest a worker's published result into the database, in this (the flow's) process.

    ``LogitsRef`` → :func:`tasks.stages.extract.ingest_logits` (returns the reference with the
    stored rows' digest); ``EstimatesRef`` → :func:`tasks.stages.estimate.ingest_estimates`.

    Raises
    ------
    TypeError
        For any other reference.
    """
    if isinstance(ref, LogitsRef):
        from tasks.stages.extract import ingest_logits

        return ingest_logits(ref)
    if isinstance(ref, EstimatesRef):
        from tasks.stages.estimate import ingest_estimates

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
        _quarantine_damaged_results(ref)
        return False


def _quarantine_damaged_results(ref: LogitsRef | EstimatesRef) -> None:
    """Move the damaged file(s) of a result out of the results folder, saying so in the log.

    Result files are content-addressed: one whose bytes no longer hash to its name, or that
    does not read, is damaged (never legitimately replaced). The file the reference names and,
    for estimates, the anchors file it names are checked; a missing file is left to the rerun.
    """
    from storage.doctor import quarantine
    from storage.paths import state_dir
    from storage.results import ResultCorruptError, verify_file

    files = [Path(ref.path)]
    if isinstance(ref, EstimatesRef):
        from storage.results import anchors_named

        named = anchors_named(Path(ref.path)) if Path(ref.path).is_file() else None
        if named:
            files.append(Path(ref.path).parent.parent / "anchors" / f"{named}.parquet")
    for path in files:
        if not path.is_file():
            continue
        try:
            verify_file(path)  # content-addressed: bytes that hash to the name are intact
            continue
        except ResultCorruptError as exc:
            reason = str(exc)
        quarantine(path, state_dir(), reason)  # logs the one line, naming both places


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
        ``EstimatesRef``: the file is intact, the database holds its rows
        (:func:`storage.results.holds_file`), and the run's estimates of ``methods`` have the
        recorded digest.
        ``ReportRef``: ``report.md`` exists (and carries ``fingerprint`` when one is given).
    methods : sequence of str, optional
        For an ``EstimatesRef``: the method names the estimates were written under; default
        the reference's own method, or every default method for a file of several.
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
        return result_intact(ref) and _db_check(
            ref.db_path, lambda con: _estimates_match(con, ref, methods)
        )
    raise TypeError(
        f"ref must be a DatasetRef, CheckpointRef, LogitsRef, EstimatesRef or ReportRef; "
        f"got {type(ref).__name__}."
    )


def _dataset_staged(ref: DatasetRef) -> bool:
    from tasks.data.datasets import get_dataset_spec

    try:
        files = get_dataset_spec(ref.name).raw_files(Path(ref.root))
    except ValueError:  # the dataset is no longer registered: let the stage say so
        return False
    return bool(files) and all(Path(f).is_file() for f in files)


def _checkpoint_intact(ref: CheckpointRef) -> bool:
    from storage.hashing import file_sha256

    path = Path(ref.path)
    return path.is_file() and file_sha256(path) == ref.sha256


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
    from storage.results import holds_file
    from tasks.methods import default_method_names, peer_method_names

    if not holds_file(con, ref.path):
        return False
    if methods is None:
        # by default, the estimate stage's methods (the peers step writes the peer methods' rows)
        methods = ([ref.method] if ref.method else
                   [m for m in default_method_names() if m not in set(peer_method_names())])
    wanted = set(methods)
    rows = [r for r in read_estimates(con, ref.run_key) if r.method in wanted]
    return bool(rows) and estimates_digest(rows) == ref.digest
