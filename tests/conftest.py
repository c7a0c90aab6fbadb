"""Fixtures shared by the tests (the isolation of the state and Prefect folders is set up by
the repository's root ``conftest.py``, for the doctests of the four packages too)."""

from __future__ import annotations

import numpy as np
import pytest

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
