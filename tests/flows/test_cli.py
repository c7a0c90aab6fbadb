"""The ``alsa-bench`` command line: help texts, and one clear line for user mistakes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from flows.cli import app


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.mark.parametrize("command", [[], ["run"], ["report"], ["estimate"]])
def test_help_of_every_command(runner: CliRunner, command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_run_help_lists_the_refresh_stages(runner: CliRunner) -> None:
    result = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "240"})
    assert "download|train|extract|estimate|report|all" in result.output


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return lines[0]


def test_bad_refresh_stage_is_one_clear_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["run", "--refresh", "estimate", "--refresh", "fit"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "refresh must name stages from download, train, extract, estimate, report, all" in line
    assert "'fit'" in line


def test_unknown_backbone_is_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["run", "--backbone", "lenet", "--backbone", "vgg"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert ("backbone must be one of alexnet, bow-linear, cnn3, distilbert, efficientnet_b0, "
            "gat, gcn, gin, lenet, minilm-ft, minilm-mlp, mlp, mobilenet_v2, resnet, resnet18, "
            "sage") in line
    assert "'vgg'" in line


def test_backbone_of_another_modality_is_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["run", "--suite", "graph", "--backbone", "lenet"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "'lenet' takes image inputs" in line and "graph" in line
    assert "gat, gcn, gin, sage" in line
    assert not (state_home / "bench.duckdb").exists()


def test_backbones_pick_their_suites(state_home) -> None:
    from tasks.plan import make_plans

    plans = make_plans(None, backbones=["gat"], seeds=1)
    assert [(p.suite, p.backbones) for p in plans] == [("graph", ("gat",))]
    plans = make_plans(None, backbones=["lenet", "gcn"], seeds=2)
    assert [(p.suite, p.backbones) for p in plans] == [("fmnist", ("lenet",)), ("graph", ("gcn",))]
    defaults = make_plans(None, seeds=1)
    assert [p.suite for p in defaults] == ["fmnist", "graph", "text"]
    assert defaults[1].backbones == ("gat", "gcn", "gin", "sage")
    assert defaults[2].backbones == ("bow-linear", "minilm-ft", "minilm-mlp")
    with pytest.raises(ValueError, match="suite 'fmnist' is image, and none of the backbones gcn"):
        make_plans(["fmnist", "graph"], backbones=["gcn"])


def test_datasets_keep_only_the_backbones_that_apply(state_home) -> None:
    from tasks.plan import make_plan

    plan = make_plan("text", seeds=2)
    keys = plan.run_keys
    assert "rt-reviews.minilm-ft.s1" in keys and "sotu-party.minilm-mlp.s0" in keys
    assert not [k for k in keys if k.startswith("sotu-party.minilm-ft")]
    assert len(keys) == (3 + 2) * 2
    assert plan.backbones_of("sotu-party") == ("bow-linear", "minilm-mlp")
    with pytest.raises(ValueError, match="backbone 'minilm-ft' does not apply to dataset"):
        make_plan("text", datasets=["sotu-party"], backbones=["minilm-ft"])


def test_missing_online_dataset_fails_fast_without_writing(
    runner: CliRunner, state_home
) -> None:
    import time

    start = time.perf_counter()
    result = runner.invoke(app, ["run", "--suite", "ogbn-arxiv", "-b", "gcn"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "ogbn_arxiv" in line and "PygNodePropPredDataset" in line
    assert time.perf_counter() - start < 10
    assert not (state_home / "bench.duckdb").exists()


def test_unknown_suite_and_method_are_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["run", "--suite", "cifar-42"])
    assert result.exit_code == 2
    assert "suite must be one of" in _one_error_line(result)
    result = runner.invoke(app, ["run", "--method", "magic"])
    assert result.exit_code == 2
    assert "method must be one of" in _one_error_line(result)


def test_seed_and_seeds_together_are_refused(runner: CliRunner) -> None:
    result = runner.invoke(app, ["run", "--seed", "1", "--seeds", "2"])
    assert result.exit_code == 2
    assert "either --seed" in _one_error_line(result)


def test_report_without_a_database_is_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["report", "--no-artifacts"])
    assert result.exit_code == 2
    assert "No benchmark database" in _one_error_line(result)


def test_to_docs_writes_benchmark_md_with_provenance(tmp_path, state_home) -> None:
    from storage.paths import db_path
    from tasks.report import write_report
    from tasks.report.benchmark_doc import write_benchmark_doc
    from tests.tasks.test_report import _fill_db

    _fill_db(db_path(), np.random.default_rng(0))
    ref = write_report(out_dir=tmp_path / "reports", publish_artifacts=False, anchor_plots=False)
    target = write_benchmark_doc(Path(ref.folder), tmp_path / "docs")
    text = target.read_text()
    assert text.startswith("# Benchmark results\n")
    assert "do not edit by hand" in text
    for field in ("| commit |", "| seeds | 0 |", "| machine |", "CPUs"):
        assert field in text
    assert "](benchmark/scatter-toy.png)" in text
    assert (tmp_path / "docs" / "benchmark" / "scatter-toy.png").is_file()
    with pytest.raises(FileNotFoundError, match="report.md"):
        write_benchmark_doc(tmp_path, tmp_path / "docs")


def test_bad_param_of_run_is_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["run", "--suite", "graph", "--param", "alsa-g.alpha=2"])
    assert result.exit_code == 2
    assert "--param alsa-g.alpha" in _one_error_line(result)
    assert not (state_home / "bench.duckdb").exists()


def test_model_aware_method_on_an_image_suite_fails_before_any_work(
    runner: CliRunner, state_home
) -> None:
    result = runner.invoke(app, ["run", "--suite", "fmnist", "--method", "gnnevaluator"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "none of the methods gnnevaluator applies to suite 'fmnist'" in line
    assert not (state_home / "bench.duckdb").exists()


def test_model_aware_methods_are_kept_only_where_they_apply(state_home) -> None:
    from tasks.plan import make_plans, plan_methods

    fm, gr, tx = make_plans(None, seeds=1)
    assert plan_methods(fm, ["alsa-g", "gnnevaluator"]) == ["alsa-g"]
    assert plan_methods(gr, ["alsa-g", "gnnevaluator"]) == ["alsa-g", "gnnevaluator"]
    assert plan_methods(tx, ["alsa-g", "gnnevaluator"]) == ["alsa-g"]
    assert plan_methods(fm, None) is None


def test_requested_datasets_and_suites_are_never_dropped_silently(state_home) -> None:
    from tasks.plan import make_plans

    with pytest.raises(ValueError, match="suite 'fmnist' is image, and none of the backbones gat"):
        make_plans(None, datasets=["fmnist", "arxiv-sim"], backbones=["gat"])
    with pytest.raises(ValueError, match="suite 'fmnist' was chosen, but none of the datasets"):
        make_plans(["fmnist", "graph"], datasets=["arxiv-sim"])


def test_missing_distilbert_weights_fail_fast_without_writing(
    runner: CliRunner, state_home, tmp_path, monkeypatch
) -> None:
    from storage.paths import data_dir
    from tests.tasks._wilds_fake import write_fake_amazon

    write_fake_amazon(data_dir())
    monkeypatch.setenv("ALSA_BENCH_DISTILBERT", str(tmp_path / "no-model-here"))
    result = runner.invoke(app, ["run", "--suite", "amazon-wilds"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "no-model-here" in line and "ALSA_BENCH_DISTILBERT" in line
    assert not (state_home / "bench.duckdb").exists()
