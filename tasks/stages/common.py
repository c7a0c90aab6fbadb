"""What every stage task shares: the cross-run cache policy and the retry rule.

* **Caching across runs** with ``INPUTS + TASK_SOURCE`` (never Prefect's default policy, which
  includes the flow-run id and so never hits across runs). Every task takes a ``code_version``
  input (:func:`tasks.stages.versions.stage_code_version`) because ``TASK_SOURCE`` sees only the
  wrapper's own source, and every location (data root, checkpoint folder, database file, report
  folder) is an input too, so a cache record never answers for another state folder.
* **Retries on DuckDB lock errors only** (:func:`retry_on_lock`): another process writing the
  file is worth waiting for; any other error fails fast.
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

from prefect.cache_policies import INPUTS, TASK_SOURCE

from storage.db import is_lock_error

__all__ = ["LOCK_RETRY_DELAYS", "PINNED_STAGE_CACHE", "STAGE_CACHE", "retry_on_lock"]

#: Cross-run, code-aware cache policy of every stage task.
STAGE_CACHE: Final = INPUTS + TASK_SOURCE


#: The same for tasks that take a ``threads`` pin: the pin is not part of the key, so the
#: sequential and the distributed layouts share one cache.
PINNED_STAGE_CACHE: Final = (INPUTS - "threads") + TASK_SOURCE


logger = logging.getLogger("tasks.stages.common")


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

