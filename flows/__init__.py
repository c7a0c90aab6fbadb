"""Prefect flows of the benchmark and the ``alsa-bench`` CLI.

Importing this package sets, where they are not set already, the environment Prefect reads when
it is imported: task-cache records go to ``$ALSA_BENCH_HOME/prefect-results`` (absolute, so the
cache lives and dies with the DuckDB file beside it), telemetry is off (the machines this runs
on are offline), and the ephemeral API server gets 120 s instead of Prefect's 20 s to start:
on a busy 2-core machine (a benchmark training beside it) it can take longer than 20 s, and
Prefect then fails the whole run with "Timed out while attempting to connect to ephemeral
Prefect API server".
"""

from __future__ import annotations

import os

from storage.paths import prefect_results_dir


def configure_environment() -> None:
    """Default Prefect's result folder and telemetry switches; explicit settings win."""
    os.environ.setdefault(
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(prefect_results_dir().resolve())
    )
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


configure_environment()
