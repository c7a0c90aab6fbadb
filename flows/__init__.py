"""Prefect flows of the benchmark and the ``alsa-bench`` CLI.

Importing this package sets, where they are not set already, the environment Prefect reads when
it is imported: task-cache records go to ``$ALSA_BENCH_HOME/prefect-results`` (absolute, so the
cache lives and dies with the DuckDB file beside it), and telemetry is off (the machines this
runs on are offline).
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


configure_environment()
