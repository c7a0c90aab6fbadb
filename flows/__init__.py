"""Prefect flows of the benchmark and the ``alsa-bench`` CLI.

Importing this package sets, where they are not set already, the environment Prefect reads when
it is imported: task-cache records go to ``$ALSA_BENCH_HOME/prefect-results`` (absolute, so the
cache lives and dies with the DuckDB file beside it), telemetry is off (the machines this runs
on are offline), and the ephemeral API server gets 120 s instead of Prefect's 20 s to start:
on a busy 2-core machine (a benchmark training beside it) it can take longer than 20 s, and
Prefect then fails the whole run with "Timed out while attempting to connect to ephemeral
Prefect API server".

It also puts the reproducible mode's variables in the environment
(:func:`tasks.runtime.reproducible.apply_environment`, unless ``ALSA_BENCH_REPRODUCIBLE=0``)
before it imports anything else: ATen, oneDNN, MKL, OpenBLAS and numpy read them once per
process, and this package is the first code of every process the pipeline starts (the
``alsa-bench`` command, ``python -m flows...``, a Prefect deployment's flow run).

A run started by a Prefect worker imports Prefect *before* this package (``python -m
prefect.engine`` loads the flow's entrypoint), so Prefect has read its settings already, with
``prefect.toml``'s relative ``.alsa-bench/prefect-results``, and ``ALSA_BENCH_HOME`` would not
reach the result cache. :func:`configure_environment` therefore also updates Prefect's live
settings when Prefect is already imported, and gives the loggers named in
``PREFECT_LOGGING_EXTRA_LOGGERS`` (the deployments set ``tasks,storage``) a level: Prefect
attaches its API handler to them but leaves them at the root's ``WARNING``, which would drop
every ``INFO`` line of the stages.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

# The compute mode's variables first, before this package imports numpy (through storage): the
# libraries read them once, when they load or first compute (tasks/runtime/reproducible.py).
from tasks.runtime.reproducible import apply_environment as _apply_compute_environment

try:
    _apply_compute_environment()
except ValueError:  # a bad $ALSA_BENCH_REPRODUCIBLE: `alsa-bench run` says so in one line
    pass

from storage.paths import calibration_path, prefect_results_dir  # noqa: E402

#: The calibration variable's value when this module set it (to the state folder's file).
_OURS: list[str] = [""]
CALIBRATION_ENV = "ALSA_BENCH_CALIBRATION"
#: The same path, set beside it (``estimators.trust.calibration_artifact.STATE_CALIBRATION_ENV``:
#: flows does not import the trust layer before Prefect's settings are made).
STATE_CALIBRATION_ENV = "ALSA_BENCH_STATE_CALIBRATION"

__all__ = ["configure_environment", "extra_logger_names"]

#: Prefect's environment variable for the folder of result and cache records.
RESULTS_PATH_ENV = "PREFECT_RESULTS_LOCAL_STORAGE_PATH"
#: Prefect's environment variable naming the standard-library loggers shown in the UI.
EXTRA_LOGGERS_ENV = "PREFECT_LOGGING_EXTRA_LOGGERS"


def configure_environment() -> None:
    """Point Prefect's result cache at the state folder, turn telemetry off, show stage logs.

    Explicit settings win: a ``PREFECT_RESULTS_LOCAL_STORAGE_PATH`` (or any other of the
    variables below) already in the environment is kept. Otherwise the cache goes to
    ``$ALSA_BENCH_HOME/prefect-results`` (absolute), also when Prefect was imported before this
    package (a worker-started run): then its live settings are updated in place.

    The loggers named in ``PREFECT_LOGGING_EXTRA_LOGGERS`` that have no level of their own get
    the level of Prefect's ``prefect.extra`` logger (``PREFECT_LOGGING_LEVEL``, ``INFO`` by
    default), so their ``INFO`` lines reach the terminal and Prefect's API (the UI).
    """
    os.environ.setdefault(RESULTS_PATH_ENV, str(prefect_results_dir().resolve()))
    # a calibration refit from the user's own benchmark (alsa-bench calibrate) wins over the
    # shipped one, here and in every process the pipeline starts
    own = calibration_path()
    if own.is_file() and os.environ.get(CALIBRATION_ENV, _OURS[0]) == _OURS[0]:
        _OURS[0] = os.environ[CALIBRATION_ENV] = str(own.resolve())
        os.environ[STATE_CALIBRATION_ENV] = _OURS[0]  # a warning then names the state folder
    elif not own.is_file() and _OURS[0] and os.environ.get(CALIBRATION_ENV) == _OURS[0]:
        del os.environ[CALIBRATION_ENV]  # set for another state folder by this process
        os.environ.pop(STATE_CALIBRATION_ENV, None)
        _OURS[0] = ""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    if "prefect.context" in sys.modules:
        _update_live_results_path(Path(os.environ[RESULTS_PATH_ENV]))
    _give_extra_loggers_a_level()


def extra_logger_names() -> list[str]:
    """The standard-library loggers Prefect forwards to its API, as configured now.

    Returns
    -------
    list of str
        Prefect's ``logging.extra_loggers`` setting when Prefect is imported, else the
        comma-separated ``PREFECT_LOGGING_EXTRA_LOGGERS`` variable; empty when neither is set.
    """
    if "prefect.context" in sys.modules:
        from prefect.settings import get_current_settings

        configured = get_current_settings().logging.extra_loggers
    else:
        configured = os.environ.get(EXTRA_LOGGERS_ENV)
    if configured is None:
        return []
    names = configured.split(",") if isinstance(configured, str) else list(configured)
    return [name.strip() for name in names if name.strip()]


def _update_live_results_path(path: Path) -> None:
    """Make Prefect's already-loaded settings use ``path`` for result and cache records.

    Prefect reads its settings once, when it is imported, into a process-wide settings context;
    a worker-started run imports Prefect before this package, so the environment variable set
    above came too late. The process-wide context is replaced by a copy with the new path (the
    same thing ``prefect.context.refresh_global_settings_context`` does for the whole
    environment). A settings context entered explicitly (``temporary_settings`` in a test) is
    left alone: whoever entered it chose its settings.
    """
    import prefect.context as prefect_context
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH

    root = prefect_context.GLOBAL_SETTINGS_CONTEXT
    if prefect_context.SettingsContext.get() is not root:
        return
    if Path(root.settings.results.local_storage_path) == path:
        return
    settings = root.settings.copy_with_update(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: path})
    prefect_context.GLOBAL_SETTINGS_CONTEXT = prefect_context.SettingsContext(
        profile=root.profile, settings=settings
    )


def _give_extra_loggers_a_level() -> None:
    """Set the level of each extra logger that has none to ``prefect.extra``'s level."""
    names = extra_logger_names()
    if not names:
        return
    level = logging.getLogger("prefect.extra").level
    if level == logging.NOTSET:  # Prefect's logging is not set up yet: use what it will use
        level = logging.getLevelName(os.environ.get("PREFECT_LOGGING_LEVEL", "INFO").upper())
        if not isinstance(level, int):
            level = logging.INFO
    for name in names:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(level)


configure_environment()
