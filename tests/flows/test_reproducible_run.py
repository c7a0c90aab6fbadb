"""The reproducible mode through the real pipeline on the tiny suite: the run row records it,
the report header shows it, and the mode is part of the cache key (``--fast`` retrains)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tasks.runtime import reproducible as rep

pytestmark = [pytest.mark.flow,
              pytest.mark.skipif(not {"avx", "avx2", "fma"} <= rep.cpu_flags(),
                                 reason="the pinned kernels need AVX2 and FMA")]


@pytest.fixture(autouse=True)
def _records_and_environment(state_home, monkeypatch):
    """Prefect's records in the test's state folder; the process environment given back (a fast
    run takes the mode's variables out of it)."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    before = dict(os.environ)
    records = state_home / "prefect-results"
    monkeypatch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(records))
    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(records)}):
        yield
    os.environ.clear()
    os.environ.update(before)


def _run(**overrides):
    from flows.benchmark import benchmark

    kwargs = dict(suite="tiny", backbones=["lenet"], seeds=1, epochs=1, max_train_samples=120,
                  device="cpu", methods=["ac", "alsa-g"],
                  method_params={"alsa-g": {"n_anchors": 10, "max_epochs": 10}},
                  publish_artifacts=False)
    kwargs.update(overrides)
    return benchmark(**kwargs)


def _states(result) -> dict[str, str]:
    return {o.stage: o.state for o in result.outcomes}


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_mode_is_recorded_shown_and_keyed(prefect_server, tiny_suite, state_home) -> None:
    from storage import connect, get_run

    first = _run()
    with connect(read_only=True) as con:
        row = get_run(con, "tiny.lenet.s0")
    assert row.compute_mode == "reproducible"
    settings = json.loads(row.compute_settings)
    assert settings["aten_cpu_capability"] == "avx2" and settings["mkl_cbwr"] == "COMPATIBLE"
    assert settings["openblas_cores"] == ["Haswell"]
    assert settings["convolutions"] == "openblas-patches"
    assert settings["deterministic_algorithms"] is True and settings["threads"] >= 1
    assert row.cpu_model == rep.cpu_model() and "avx2" in row.cpu_flags.split()
    folder = Path(first.report.folder)
    md = (folder / "report.md").read_text()
    assert "computed in the reproducible mode (ATen avx2, oneDNN AVX2, MKL COMPATIBLE" in md
    assert f"on {rep.cpu_model()}" in md
    assert (folder / "runs.csv").is_file()

    # the fast mode is another cache key: the classifier is trained again, not served
    fast = _run(fast=True)
    assert _states(fast)["train"] == "Completed" and _states(fast)["extract"] == "Completed"
    with connect(read_only=True) as con:
        assert get_run(con, "tiny.lenet.s0").compute_mode == "fast"
    # and back: the next run in this process follows the user's choice (reproducible), not
    # the fast run's ALSA_BENCH_REPRODUCIBLE=0; the fast run replaced the run's checkpoint
    # file, so the cached entry is healed by training again, and the same bytes come out
    again = _run()
    with connect(read_only=True) as con:
        assert get_run(con, "tiny.lenet.s0").compute_mode == "reproducible"
    assert _states(again)["train"] == "Completed"
    assert again.checkpoints[0].sha256 == first.checkpoints[0].sha256
    assert _states(again)["extract"] == "Cached"  # the same checkpoint: its logits are served
    # the two modes trained different files (LeNet is fed contiguous batches where ATen's
    # convolutions compute, and its linear layers run on the pinned OpenBLAS)
    assert fast.checkpoints[0].sha256 != first.checkpoints[0].sha256
