"""Where alsa-bench keeps its state: one folder, ``ALSA_BENCH_HOME`` (default ``.alsa-bench``).

Everything a run produces lives under it, so deleting the folder resets the benchmark::

    .alsa-bench/
        bench.duckdb        runs, splits, logits, estimates, anchors (storage/schema.py)
        data/               staged datasets (e.g. data/FashionMNIST/raw/*-ubyte)
        checkpoints/        trained classifiers, one file per run, named by run key
        prefect-results/    Prefect's task cache records
        reports/            human-readable reports, one folder per run name
        results/            content-addressed Parquet results (storage/results.py)
        quarantine/         damaged files moved aside by a run or `doctor --repair`
        .lock               the state lock and its owner record (storage/lock.py)

Reports go to ``<state>/reports/<run>/``, so two state folders used from one working directory
never overwrite each other's reports; ``ALSA_BENCH_REPORTS`` points them elsewhere.

All functions read the environment at call time, so tests can point them at a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOME = ".alsa-bench"


def state_dir() -> Path:
    """The state folder: ``$ALSA_BENCH_HOME`` or ``./.alsa-bench``."""
    return Path(os.environ.get("ALSA_BENCH_HOME", DEFAULT_HOME))


def db_path() -> Path:
    """The DuckDB file holding every table of the benchmark."""
    return state_dir() / "bench.duckdb"


def data_dir() -> Path:
    """Root under which datasets are staged (torchvision layouts)."""
    return state_dir() / "data"


def checkpoint_dir() -> Path:
    """Folder of trained classifier checkpoints."""
    return state_dir() / "checkpoints"


def prefect_results_dir() -> Path:
    """Folder of Prefect's task-cache records (kept beside the DuckDB file on purpose)."""
    return state_dir() / "prefect-results"


def reports_dir() -> Path:
    """Folder of human-readable reports: ``$ALSA_BENCH_REPORTS`` or ``<state>/reports``."""
    override = os.environ.get("ALSA_BENCH_REPORTS")
    return Path(override) if override else state_dir() / "reports"


def calibration_path() -> Path:
    """The state folder's calibration (``alsa-bench calibrate`` writes it; used when present)."""
    return state_dir() / "calibration.json"
