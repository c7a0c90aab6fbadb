"""Test-wide isolation: every test process gets its own state and Prefect folders.

The environment is set before anything imports Prefect (settings are read at import time), so no
test reads or writes the developer's ``.alsa-bench/`` or ``~/.prefect``; the reproducible
mode's variables before numpy and torch load.
"""

from __future__ import annotations

import os
import tempfile

# The reproducible mode's variables before numpy or torch load (the libraries read them once per
# process), as `import flows` does in every pipeline process: the stage tasks the tests run
# in-process check that their process computes with them (tasks/runtime/reproducible.py).
from tasks.runtime.reproducible import apply_environment

apply_environment(True)

_root = tempfile.mkdtemp(prefix="alsa-bench-tests-")
os.environ["ALSA_BENCH_HOME"] = os.path.join(_root, "state")
os.environ["ALSA_BENCH_REPORTS"] = os.path.join(_root, "reports")
os.environ["PREFECT_HOME"] = os.path.join(_root, "prefect-home")
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = os.path.join(_root, "state", "prefect-results")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.pop("PREFECT_API_URL", None)

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# ``--doctest-modules`` (pyproject) imports every module it collects: the helper modules of the
# tests (fakes, tiny suites, fixture writers) have no examples, and some register a dataset when
# imported, which must happen only in the subprocesses that ask for it.
collect_ignore_glob = ["*/_[a-z]*.py", "*/fixtures/*.py"]


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator; tests that need other seeds make their own."""
    return np.random.default_rng(0)


@pytest.fixture
def state_home(tmp_path, monkeypatch):
    """A fresh, empty ``ALSA_BENCH_HOME`` for one test, with Prefect's result records inside it.

    Cache keys hold no absolute path (a state folder can move), so two tests' folders would
    share records in one session-wide records folder: each test gets its own.
    """
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    home = tmp_path / "state"
    records = home / "prefect-results"
    monkeypatch.setenv("ALSA_BENCH_HOME", str(home))
    monkeypatch.setenv("ALSA_BENCH_REPORTS", str(tmp_path / "reports"))
    monkeypatch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(records))
    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(records)}):
        yield home
