"""What every stage task shares: the cross-run cache policy and the retry rule.

* **Caching across runs** with ``INPUTS + TASK_SOURCE`` (never Prefect's default policy, which
  includes the flow-run id and so never hits across runs). Every task takes a ``code_version``
  input (:func:`tasks.stages.versions.stage_code_version`) because ``TASK_SOURCE`` sees only the
  wrapper's own source. Every location (data root, checkpoint folder, database file, report
  folder, the paths inside references) is an input too, but hashed **relative to the state
  folder** (:class:`StateRelativeInputs`, :func:`tasks.runtime.refs.portable`): a copied or
  moved state folder hits every record, and the records themselves rebuild their references
  in the current folder (:mod:`tasks.runtime.refs`). A location outside the state folder stays
  absolute in the key.
* **No record of a failure** (:func:`forget_failure_record`): Prefect persists the exception of
  a failed task run to the result folder when persistence is on (it is, for caching); the hook
  every stage task carries deletes that file, so nothing pickled from a failed run stays in
  ``prefect-results/``.
* **Retries on DuckDB lock errors only** (:func:`retry_on_lock`): another process writing the
  file is worth waiting for; any other error fails fast. No stage task sets plain ``retries``:
  a deterministic failure (a ``ValueError``, a ``TypeError``, a user's mistake) would fail the
  same way again.
* **A failure said once, by alsa-bench** (:func:`log_task_failure`): the ``on_failure`` hook of
  every stage task logs the task's first exception in one ``ERROR`` line of the
  ``tasks.stages`` logger (shown on the terminal and in the Prefect UI), also where the flow
  goes on to heal it (:func:`tasks.stages.healing.settle`).
* **Pinned threads** (:mod:`tasks.runtime.threads`): each task runs with ``threads`` torch/BLAS
  threads, the same in every layout; ``threads`` is left out of the cache key
  (:data:`PINNED_STAGE_CACHE`).

Each stage module (``download.py``, ``train.py``, ``extract.py``, ``estimate.py``, ``report.py``)
holds its plain function and its thin ``@task`` wrapper; :mod:`tasks.stages.healing` decides
whether a cached result can be trusted.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from dataclasses import dataclass, field, replace
from pathlib import Path

from prefect.cache_policies import TASK_SOURCE, CachePolicy, Inputs

from storage.db import is_lock_error
from tasks.runtime.refs import portable

__all__ = [
    "LOCK_RETRY_DELAYS", "PINNED_STAGE_CACHE", "STAGE_CACHE", "StateRelativeInputs",
    "failure_line", "forget_failure_record", "log_task_failure", "retry_on_lock",
]


@dataclass
class StateRelativeInputs(CachePolicy):
    """Prefect's ``INPUTS`` policy with every state-folder path hashed relative to the folder.

    Each input goes through :func:`tasks.runtime.refs.portable` before Prefect's own hashing
    (:class:`prefect.cache_policies.Inputs`), so ``/a/.alsa-bench/checkpoints`` and
    ``/b/copy/checkpoints`` (each the ``checkpoints`` folder of the state folder in use) give
    the same key; ``- "name"`` leaves an input out, as with ``INPUTS``. Not a subclass of
    ``Inputs``: Prefect's compound policy would merge it back into a plain one.
    """

    exclude: list[str] = field(default_factory=list)

    def compute_key(
        self, task_ctx: Any, inputs: dict[str, Any], flow_parameters: dict[str, Any],
        **kwargs: Any,
    ) -> str | None:
        """The key of ``inputs`` with their paths made portable (see the class)."""
        relative = {k: portable(v) for k, v in (inputs or {}).items()}
        return Inputs(exclude=list(self.exclude)).compute_key(
            task_ctx, relative, flow_parameters, **kwargs
        )

    def __sub__(self, other: str) -> CachePolicy:
        if not isinstance(other, str):
            raise TypeError(f"other must be an input name (str); got {type(other).__name__}.")
        return replace(self, exclude=[*self.exclude, other])


#: Cross-run, code-aware, relocatable cache policy of every stage task.
STAGE_CACHE: Final = StateRelativeInputs() + TASK_SOURCE


#: The same for tasks that take a ``threads`` pin: the pin is not part of the key, so the
#: sequential and the distributed layouts share one cache.
PINNED_STAGE_CACHE: Final = (StateRelativeInputs() - "threads") + TASK_SOURCE


def forget_failure_record(task: Any, task_run: Any, state: Any) -> None:
    """Prefect ``on_failure`` hook (tasks and flows): delete the failed run's pickled exception.

    With result persistence on (every cached task), Prefect writes the exception of a failed
    run to the result folder under a random key (``exception_to_failed_state(...,
    write_result=True)``). It never serves as a cache hit, but it is a pickle of whatever the
    task raised (a DuckDB error holds native objects that do not even unpickle) left beside the
    cache records. Only a file inside the configured result folder is deleted.

    Parameters
    ----------
    task, task_run : object
        The task (or flow) and its run.
    state : prefect.State
        The Failed state; its ``data`` is the result record Prefect wrote.
    """
    from prefect.settings import get_current_settings

    metadata = getattr(getattr(state, "data", None), "metadata", None)
    key = getattr(metadata, "storage_key", None)
    if not isinstance(key, str) or not key:
        return
    base = Path(get_current_settings().results.local_storage_path).expanduser().resolve()
    storage = getattr(task, "result_storage", None)
    folder = getattr(storage, "basepath", None)
    bases = {base} | ({Path(folder).expanduser().resolve()} if folder else set())
    path = Path(key) if Path(key).is_absolute() else base / key
    if any(b in path.resolve().parents for b in bases):
        path.unlink(missing_ok=True)
        logger.debug("deleted the record of failed task run %s: %s", task_run, path)


logger = logging.getLogger("tasks.stages.common")
#: The logger of task failures (one line each).
failure_logger = logging.getLogger("tasks.stages")


def failure_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (and its notes: which split, which method)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    notes = "; ".join(getattr(exc, "__notes__", None) or ())
    line = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return f"{line} ({notes})" if notes else line


def log_task_failure(task: Any, task_run: Any, state: Any) -> None:
    """Prefect ``on_failure`` hook: log the failed task run's exception in one ERROR line.

    Runs where the task ran (the flow process or a Dask worker), once per failed task run,
    before any healing: the first exception of a stage is always said by alsa-bench, not only
    by Prefect's own traceback.

    Parameters
    ----------
    task, task_run : object
        The task and its run (its name says which stage, run and method).
    state : prefect.State
        The Failed state; its ``result()`` re-raises the task's exception.
    """
    try:
        state.result()
    except Exception as exc:  # the state's own exception, re-raised
        reason = failure_line(exc)
    else:
        reason = str(getattr(state, "message", "") or "failed")
    name = getattr(task_run, "name", None) or getattr(task, "name", "task")
    failure_logger.error("%s failed: %s", name, reason)


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
        if is_lock_error(exc):
            logger.warning("%s: another process holds the database's lock; retrying the task "
                           "(%s).", getattr(task_run, "name", None) or getattr(task, "name", ""),
                           failure_line(exc))
            return True
        return False
    return False

