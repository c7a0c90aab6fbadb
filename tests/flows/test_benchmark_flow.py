"""End to end on a tiny dataset: the real stage functions under Prefect, cached, refreshed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.flow

METHODS = ["ac", "atc-mc", "alsa-g"]
PARAMS = {"alsa-g": {"n_anchors": 20, "max_epochs": 30}}


def _run(**overrides):
    from flows.benchmark import benchmark

    kwargs = dict(
        suite="tiny", backbones=["mlp"], seeds=1, epochs=1, max_train_samples=200, device="cpu",
        methods=METHODS, method_params=PARAMS, publish_artifacts=True,
    )
    kwargs.update(overrides)
    return benchmark(**kwargs)


def _states(result) -> dict[str, str]:
    return {o.stage: o.state for o in result.outcomes}


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_benchmark_runs_then_caches_then_refreshes_estimate(
    prefect_server, tiny_suite, state_home
) -> None:
    from storage import connect, read_report_rows

    first = _run()
    assert _states(first) == dict.fromkeys(
        ("download", "train", "extract", "estimate", "report"), "Completed"
    )
    with connect(read_only=True) as con:
        rows = read_report_rows(con, suite="tiny")
    assert set(rows["method"]) == set(METHODS)
    assert set(rows["split"]) == {"clean", "label_shift-a1-d1"}
    assert rows["estimated_accuracy"].between(0, 1).all()
    report = Path(first.report.folder)
    assert (report / "report.md").is_file() and (report / "scatter-tiny.png").is_file()
    assert (report / "alsa-tiny-mlp-s0.png").is_file()  # 3 classes: the anchor picture

    second = _run()
    assert all(o.cached for o in second.outcomes), _states(second)
    assert second.report == first.report

    third = _run(refresh=["estimate"])
    assert _states(third) == {
        "download": "Cached", "train": "Cached", "extract": "Cached",
        "estimate": "Completed", "report": "Completed",
    }

    # A cached stage whose output is gone is re-run rather than trusted.
    shutil.rmtree(report)
    healed = _run()
    report_outcome = [o for o in healed.outcomes if o.stage == "report"][0]
    assert report_outcome.healed and (report / "report.md").is_file()
    assert all(o.cached for o in healed.outcomes if o.stage != "report")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_stage_flows_reuse_the_benchmark_cache(prefect_server, tiny_suite, state_home) -> None:
    from flows.estimate import estimate
    from flows.report import report

    first = _run(run_name="tiny-stages", publish_artifacts=False)
    refs = estimate(
        suite="tiny", backbones=["mlp"], seeds=1, epochs=1, max_train_samples=200, device="cpu",
        methods=METHODS, method_params=PARAMS,
    )
    assert refs == first.estimates
    ref = report(run_name="tiny-standalone", publish_artifacts=False)
    assert (Path(ref.folder) / "mae.txt").read_text().startswith("MAE")
