"""End to end on a tiny dataset: the real stage functions under Prefect, cached, refreshed."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.flow

METHODS = ["ac", "atc-mc", "alsa-g"]
PARAMS = {"alsa-g": {"n_anchors": 20, "max_epochs": 30}}


@pytest.fixture(autouse=True)
def _records_in_the_state_folder(state_home, monkeypatch):
    """Prefect's cache records inside this test's state folder, as ``alsa-bench`` keeps them:
    cache keys are relative to the state folder, so one records folder shared by every test
    would serve one test's records to the next."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    records = state_home / "prefect-results"
    monkeypatch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(records))
    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(records)}):
        yield records


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

    _assert_output_checks(first)
    _assert_artifacts_published("tiny")

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
    assert report_outcome.healed and (report / "report.md").is_file(), healed.outcomes
    assert all(o.cached for o in healed.outcomes if o.stage != "report")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_new_or_edited_method_recomputes_its_own_estimates_only(
    prefect_server, tiny_suite, state_home, monkeypatch
) -> None:
    """The estimate stage's unit is one run and one method: a method added to the run computes
    its rows only, and a method whose code version moves (what editing its module does,
    tests/tasks/test_versions.py) re-runs alone; the report follows both."""
    import flows.benchmark as benchmark_module
    from storage import connect, read_report_rows

    first = _run(run_name="tiny-methods", publish_artifacts=False)
    with connect(read_only=True) as con:
        before = read_report_rows(con, suite="tiny")

    added = _run(run_name="tiny-methods", publish_artifacts=False, methods=[*METHODS, "doc"])
    ran = {o.key.split()[-1] for o in added.outcomes if o.stage == "estimate" and not o.cached}
    assert ran == {"doc"}
    assert all(o.cached for o in added.outcomes if o.stage in ("download", "train", "extract"))
    assert [o.state for o in added.outcomes if o.stage == "report"] == ["Completed"]
    with connect(read_only=True) as con:
        now = read_report_rows(con, suite="tiny")
    # the earlier methods' rows are the very rows of the first run
    kept = now[now["method"] != "doc"].sort_values(["split", "method"])
    assert kept["estimated_accuracy"].tolist() == \
        before.sort_values(["split", "method"])["estimated_accuracy"].tolist()
    assert set(now["method"]) == {*METHODS, "doc"}

    real = benchmark_module.method_code_version
    monkeypatch.setattr(benchmark_module, "method_code_version",
                        lambda m, **kw: real(m, **kw) + ("-edited" if m == "atc-mc" else ""))
    edited = _run(run_name="tiny-methods", publish_artifacts=False)
    ran = {o.key.split()[-1] for o in edited.outcomes if o.stage == "estimate" and not o.cached}
    assert ran == {"atc-mc"}
    assert [e.method for e in edited.estimates] == [e.method for e in first.estimates]


def _assert_artifacts_published(name: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    keys = [f"{name}-mae", f"{name}-correlation", f"{name}-report"]
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys))
        )
    by_key = {a.key: a for a in found}
    assert set(by_key) == set(keys)
    assert by_key[f"{name}-report"].type == "markdown"
    assert "data:image/png;base64," in by_key[f"{name}-report"].data
    assert by_key[f"{name}-mae"].type == "table"


def _assert_output_checks(result) -> None:
    """output_exists accepts what a run wrote and refuses anything that no longer matches it."""
    from tasks.stages.healing import output_exists
    from tasks.stages.report import report_fingerprint

    [ds], [ckpt], [logits] = result.datasets, result.checkpoints, result.logits
    # one estimates file per method of the run, each held by the database beside the others
    assert [e.method for e in result.estimates] == METHODS
    assert len({e.path for e in result.estimates}) == len(METHODS)
    assert output_exists(ds) and output_exists(ckpt) and output_exists(logits)
    for est in result.estimates:
        assert output_exists(est) and output_exists(est, methods=[est.method])
        other = next(m for m in METHODS if m != est.method)
        assert not output_exists(est, methods=[other])  # other methods' rows: another digest
    fingerprint = report_fingerprint(result.estimates, [logits.run_key], METHODS)
    assert output_exists(result.report, fingerprint=fingerprint)
    assert not output_exists(result.report, fingerprint="another selection")
    path = Path(ckpt.path)
    original = path.read_bytes()
    path.write_bytes(original + b"\0")  # e.g. retrained with other epochs under the same key
    assert not output_exists(ckpt)
    path.write_bytes(original)
    assert not output_exists(replace(logits, digest="0" * 64))
    with pytest.raises(TypeError, match="ref must be a DatasetRef"):
        output_exists("fmnist")


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


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_ablations_store_variants_beside_the_main_estimates(
    prefect_server, tiny_suite, state_home
) -> None:
    from flows.ablations import ablations
    from storage import connect, read_report_rows

    ref = ablations(
        suite="tiny", backbones=["mlp"], seeds=1, epochs=1, max_train_samples=200, device="cpu",
        alphas=[0.5], anchor_counts=[10], base_params={"n_anchors": 20, "max_epochs": 20},
        publish_artifacts=False,
    )
    with connect(read_only=True) as con:
        methods = set(read_report_rows(con, suite="tiny")["method"])
    assert methods == {
        "alsa-g[default]", "alsa-g[freeze=positions]", "alsa-g[freeze=peaks]",
        "alsa-g[freeze=variances]", "alsa-g[freeze=peaks+variances]", "alsa-g[alpha=0.5]",
        "alsa-g[n_anchors=10]",
    }
    folder = Path(ref.folder)
    assert folder.name == "tiny-ablations"
    assert {"ablation-freeze.png", "sweep-alpha.png", "sweep-n-anchors.png"} <= {
        p.name for p in folder.iterdir()
    }
    assert "alsa-g[freeze=peaks+variances]" in (folder / "mae.txt").read_text()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_garbage_cached_results_are_recomputed_with_one_line_each(
    prefect_server, tiny_suite, state_home, caplog
) -> None:
    import logging
    import os

    from storage import connect, read_report_rows

    records = Path(os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"])
    before = set(records.iterdir()) if records.is_dir() else set()
    first = _run(run_name="tiny-garbage", publish_artifacts=False)
    with connect(read_only=True) as con:
        expected = read_report_rows(con, suite="tiny").sort_values(["split", "method"])
    written = sorted(set(records.iterdir()) - before)
    assert len(written) == len(first.outcomes)  # one record per stage task
    for path in written:
        path.write_text("garbage{", encoding="utf-8")

    with caplog.at_level(logging.WARNING, logger="tasks.stages.healing"):
        second = _run(run_name="tiny-garbage", publish_artifacts=False)
    lines = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert all("\n" not in line and "recomputing the stage" in line for line in lines)
    # Stages whose inputs came back identical met their damaged record; the estimate's input
    # (a logits file naming the new training time) changed, so its key is a new one.
    named = {line.split("'")[1] for line in lines}
    assert {"download", "train", "extract", "report"} <= named
    assert all(str(records) in line for line in lines)
    assert _states(second) == dict.fromkeys(
        ("download", "train", "extract", "estimate", "report"), "Completed"
    )
    with connect(read_only=True) as con:
        again = read_report_rows(con, suite="tiny").sort_values(["split", "method"])
    assert again["estimated_accuracy"].tolist() == expected["estimated_accuracy"].tolist()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_lost_database_is_refilled_from_results_and_lost_files_are_recomputed(
    prefect_server, tiny_suite, state_home
) -> None:
    from storage import connect, read_report_rows

    first = _run(run_name="tiny-heal", publish_artifacts=False)
    with connect(read_only=True) as con:
        expected = read_report_rows(con, suite="tiny").sort_values(["split", "method"])
    [logits], est = first.logits, first.estimates[0]
    assert Path(logits.path).parent == state_home / "results" / "logits"
    (state_home / "bench.duckdb").unlink()
    Path(est.path).unlink()

    second = _run(run_name="tiny-heal", publish_artifacts=False)
    by_key = {(o.stage, o.key): o for o in second.outcomes}
    extract = by_key["extract", logits.run_key]
    assert extract.cached and not extract.healed  # ingested again
    # the method whose file is gone is recomputed; the others are ingested again as they are
    healed = {o.key for o in second.outcomes if o.stage == "estimate" and o.healed}
    assert healed == {f"{logits.run_key} {est.method}"}
    assert all(Path(e.path).is_file() for e in second.estimates)
    assert second.logits == first.logits
    with connect(read_only=True) as con:
        again = read_report_rows(con, suite="tiny").sort_values(["split", "method"])
        assert con.sql("SELECT kind FROM ingested ORDER BY kind").fetchall() == [
            ("anchors",), *[("estimates",)] * len(METHODS), ("logits",)
        ]
    assert again["estimated_accuracy"].tolist() == expected["estimated_accuracy"].tolist()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_two_seeds_get_gde_from_the_peers_step_cached_per_pair(
    prefect_server, tiny_suite, state_home
) -> None:
    """Issue 32: every run of a dataset x backbone with two seeds is paired with the other seed;
    GDE's rows sit beside the estimate stage's, in the report, and a second run reuses them.
    ALine-S runs in the peers step with the other seed in its family, not in the estimate
    stage."""
    import json

    import numpy as np

    from storage import connect, read_report_rows
    from storage.estimates import read_estimates
    from storage.results import read_logits_file

    methods = ["ac", "gde", "aline-s"]
    first = _run(seeds=2, methods=methods, method_params=None)
    peers = [o for o in first.outcomes if o.stage == "peers"]
    # GDE and ALine per run (two seeds: the same peer for both)
    assert sorted(o.key for o in peers) == 2 * ["tiny.mlp.s0~tiny.mlp.s1"] + 2 * [
        "tiny.mlp.s1~tiny.mlp.s0"]
    assert all(o.state == "Completed" for o in peers)
    with connect(read_only=True) as con:
        rows = read_report_rows(con, suite="tiny")
        stored = read_estimates(con, "tiny.mlp.s0")
        gde = {r.split: r for r in stored if r.method == "gde"}
        aline = [r for r in stored if r.method == "aline-s"]
    assert set(rows["method"]) == {"ac", "gde", "aline-s"}
    from storage.results import read_estimates_file

    for ref in first.estimates:  # the estimate stage left ALine to the peers step
        assert {r.method for r in read_estimates_file(ref.path).rows} == {"ac"}
    assert aline and all(json.loads(r.params_json)["n_heads"] == 0
                         and json.loads(r.params_json)["peer_run"] == "tiny.mlp.s1"
                         and json.loads(r.diagnostics_json)["n_peers"] == 1 for r in aline)
    assert len(rows[rows["method"] == "gde"]) == 2 * len(gde)  # both runs, every split
    files = {ref.run_key: read_logits_file(ref.path) for ref in first.logits}
    for split, row in gde.items():
        za = files["tiny.mlp.s0"].target_logits(split)
        zb = files["tiny.mlp.s1"].target_logits(split)
        assert row.estimated_accuracy == pytest.approx(float(np.mean(za.argmax(1)
                                                                     == zb.argmax(1))))
        assert json.loads(row.params_json)["peer_run"] == "tiny.mlp.s1"
    report = (Path(first.report.folder) / "report.md").read_text(encoding="utf-8")
    assert "| gde |" in report or " gde " in report

    second = _run(seeds=2, methods=methods, method_params=None)
    assert all(o.cached for o in second.outcomes), _states(second)
    only_gde = _run(seeds=2, methods=["gde"], method_params=None)
    assert "estimate" not in _states(only_gde)  # nothing left for the estimate stage
    assert {o.stage for o in only_gde.outcomes if o.stage == "peers"} == {"peers"}
