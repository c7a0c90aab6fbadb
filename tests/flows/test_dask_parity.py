"""The sequential and the Dask layouts of the benchmark compute the same numbers.

One backbone, two seeds, the tiny suite's shifts: run sequentially into one state folder and on a
2-worker ``LocalCluster`` into another, then compare ``report_rows`` row for row. No timing is
asserted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.flow

METHODS = ["ac", "atc-mc", "alsa-g", "gde"]  # gde: the peers step, after both layouts' runs
PARAMS = {"alsa-g": {"n_anchors": 20, "max_epochs": 30}}
KEYS = ["run_key", "split", "method"]


def _run(home: Path, monkeypatch: pytest.MonkeyPatch, **layout):
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    from flows.benchmark import benchmark

    # each state folder keeps its own cache records, as `alsa-bench run` does (keys hold no
    # absolute path, so one shared records folder would serve the first run's records)
    records = str(home / "prefect-results")
    monkeypatch.setenv("ALSA_BENCH_HOME", str(home))
    monkeypatch.setenv("ALSA_BENCH_REPORTS", str(home / "reports"))
    monkeypatch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", records)
    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: records}):
        return benchmark(
            suite="tiny", backbones=["mlp"], seeds=2, epochs=1, max_train_samples=200,
            device="cpu", methods=METHODS, method_params=PARAMS, publish_artifacts=False,
            threads_per_task=1, **layout,
        )


def _report_rows(home: Path):
    from storage import connect, read_report_rows

    with connect(home / "bench.duckdb", read_only=True) as con:
        rows = read_report_rows(con, suite="tiny")
    return rows.sort_values(KEYS).reset_index(drop=True)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_sequential_and_two_dask_workers_give_identical_report_rows(
    prefect_server, tiny_suite, tmp_path, monkeypatch
) -> None:
    import dask
    import distributed  # noqa: F401  (its config defaults exist before dask.config.set below,
    # so leaving the block restores them instead of dropping the whole "distributed" section)

    sequential = _run(tmp_path / "sequential", monkeypatch)
    with dask.config.set({"distributed.worker.preload": ["tests.flows._tiny_worker"]}):
        distributed = _run(tmp_path / "dask", monkeypatch, workers=2)

    assert [o.state for o in distributed.outcomes if o.stage != "download"].count("Completed") \
        == 2 * (2 + len(METHODS) - 1) + 2 + 1  # two runs x (train, extract, one estimate per
    # method but gde), two peers steps (gde), then the report
    assert [(e.run_key, e.method) for e in distributed.estimates] == \
        [(e.run_key, e.method) for e in sequential.estimates]
    seq, dist = _report_rows(tmp_path / "sequential"), _report_rows(tmp_path / "dask")
    assert len(seq) == 2 * 2 * len(METHODS)  # 2 seeds x 2 target splits x methods
    text = [c for c in seq.columns if seq[c].dtype == object]
    assert seq[text].equals(dist[text])
    for column in ("estimated_accuracy", "true_accuracy", "abs_error"):
        np.testing.assert_allclose(dist[column], seq[column], rtol=0, atol=1e-12)
    # Same logits, bit for bit (the files differ only in the run row's training time).
    from storage.results import read_logits_file

    assert all(Path(r.path).is_relative_to(tmp_path / "dask") for r in distributed.logits)
    for seq_ref, dist_ref in zip(sequential.logits, distributed.logits, strict=True):
        a, b = read_logits_file(seq_ref.path), read_logits_file(dist_ref.path)
        assert a.splits == b.splits
        for split, (logits, labels) in a.arrays.items():
            np.testing.assert_array_equal(b.arrays[split][0], logits)
            np.testing.assert_array_equal(b.arrays[split][1], labels)


def test_task_runner_layouts() -> None:
    from flows.dask_runner import build_task_runner, check_layout

    assert build_task_runner(0) is None
    local = build_task_runner(2, gpu=True)
    assert local.cluster_kwargs == {
        "n_workers": 2, "threads_per_worker": 1, "processes": True, "dashboard_address": None,
        "resources": {"GPU": 1},
    }
    assert "resources" not in build_task_runner(3).cluster_kwargs
    assert build_task_runner(dask_address="tcp://10.0.0.1:8786").address == "tcp://10.0.0.1:8786"
    for workers, address, message in [
        (-1, None, "workers must be an integer >= 0"),
        (2, "tcp://h:8786", "not both"),
        (0, "h:8786", "scheduler address"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_layout(workers, address)


def test_pinned_threads_sets_and_restores(monkeypatch) -> None:
    import os

    import torch

    from tasks.runtime.threads import default_threads_per_task, pinned_threads

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = torch.get_num_threads()
    with pinned_threads(2) as n:
        assert n == 2 and torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
    assert torch.get_num_threads() == before and os.environ["OMP_NUM_THREADS"] == "1"
    with pytest.raises(ValueError, match="threads_per_task must be an integer >= 1"):
        with pinned_threads(0):
            pass
    assert default_threads_per_task(2) == 1  # capped by OMP_NUM_THREADS=1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert default_threads_per_task(0) == max(1, os.cpu_count() or 1)
    assert default_threads_per_task(10 * (os.cpu_count() or 1)) == 1


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_dask_layout_retrains_a_cached_checkpoint_whose_file_is_gone(
    prefect_server, tiny_suite, tmp_path, monkeypatch
) -> None:
    """The distributed layout checks a cached checkpoint as the sequential one does: its file
    deleted, the train stage runs again (healed) and the numbers come out the same."""
    import dask
    import distributed  # noqa: F401  (its config defaults, before dask.config.set below)

    dask.config.refresh()  # defaults back, whatever an earlier dask.config.set block dropped
    home = tmp_path / "dask"
    preload = {"distributed.worker.preload": ["tests.flows._tiny_worker"]}
    with dask.config.set(preload):
        _run(home, monkeypatch, workers=2)
    before = _report_rows(home)
    for checkpoint in (home / "checkpoints").glob("*.pt"):
        checkpoint.unlink()
    with dask.config.set(preload):
        again = _run(home, monkeypatch, workers=2)
    healed = {o.key for o in again.outcomes if o.stage == "train" and o.healed}
    assert healed == {"tiny.mlp.s0", "tiny.mlp.s1"}
    assert all((home / "checkpoints" / f"{key}.pt").is_file() for key in healed)
    after = _report_rows(home)
    for column in ("estimated_accuracy", "true_accuracy", "abs_error"):
        np.testing.assert_allclose(after[column], before[column], rtol=0, atol=1e-12)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_dask_layout_raises_a_deterministic_failure_without_running_it_again(
    prefect_server, tiny_suite, tmp_path, monkeypatch
) -> None:
    """A task that fails with a ValueError on a worker is not re-run by the flow's healing
    (only a missing or damaged input file is): the failing fit runs once, and its error is what
    the flow raises."""
    import dask
    import distributed  # noqa: F401  (its config defaults, before dask.config.set below)

    from estimators import ESTIMATORS
    from tests.flows import _failing_estimator

    dask.config.refresh()
    count = tmp_path / "fits.txt"
    monkeypatch.setenv(_failing_estimator.COUNT_ENV, str(count))
    monkeypatch.setitem(ESTIMATORS, "always-fails", _failing_estimator.AlwaysFails)
    preload = {"distributed.worker.preload": ["tests.flows._tiny_worker",
                                              "tests.flows._failing_estimator"]}
    from flows.benchmark import benchmark
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    home = tmp_path / "dask"
    records = str(home / "prefect-results")
    monkeypatch.setenv("ALSA_BENCH_HOME", str(home))
    monkeypatch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", records)
    with dask.config.set(preload), \
            temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: records}):
        with pytest.raises(ValueError, match="always-fails refuses every validation set"):
            benchmark(suite="tiny", backbones=["mlp"], seeds=1, epochs=1, max_train_samples=200,
                      device="cpu", methods=["always-fails"], publish_artifacts=False,
                      threads_per_task=1, workers=1)
    assert count.read_text().splitlines() == ["fit"]
