"""``alsa-bench report --compare``: identical databases, host noise, a real difference, and a
generated BENCHMARK.md (its block, and a page without it read from its MAE table).

Each database holds one dataset, backbone ``mlp``, seeds 0, 1, 2, two methods; every estimate is
its split's true accuracy plus a fixed offset per (method, seed), so the MAE of a cell for one
seed is ``100 * |offset|`` and the seeds' spread is the standard deviation of those: the
expected numbers are written here from the offsets, not taken from the code under test.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.report.compare import (
    BLOCK_START,
    CELL as _CELL,
    Reference,
    compare,
    format_comparison,
    load_reference,
    reference_from_database,
)

SEEDS = (0, 1, 2)
#: offset of the estimate from the truth, by method and seed (accuracy fractions)
OFFSETS = {"ac": (0.05, 0.03, 0.04), "atc-mc": (-0.02, 0.01, -0.03)}
SETTINGS = {"mode": "reproducible", "aten_cpu_capability": "avx2", "onednn_max_cpu_isa": "AVX2",
            "mkl_cbwr": "COMPATIBLE", "openblas_cores": ["Haswell"], "threads": 2,
            "deterministic_algorithms": True, "convolutions": "aten", "torch": "2.14.1"}


def _fill(path: Path, offsets=OFFSETS, *, checkpoint: str = "c0", settings=SETTINGS,
          cpu: str = "AMD EPYC") -> None:
    from storage import (
        EstimateRow, RunInfo, SplitInfo, connect, upsert_run, write_estimates, write_split,
    )

    rng = np.random.default_rng(7)  # the same splits in every database
    with connect(path) as con:
        for seed in SEEDS:
            run_key = f"toy.mlp.s{seed}"
            upsert_run(con, RunInfo(run_key, "toy", "toy", "mlp", seed, 3,
                                    checkpoint_sha256=f"{checkpoint}-{seed}", code_version="v1",
                                    compute_mode=settings["mode"],
                                    compute_settings=json.dumps(settings), cpu_model=cpu,
                                    cpu_flags="sse4_2 avx avx2 fma"))
            labels = rng.integers(0, 3, 100)
            logits = np.eye(3, dtype=np.float32)[labels] * 4
            write_split(con, run_key, SplitInfo("val", "val", None, None, None), logits, labels)
            rows = []
            for name, family in (("clean", "clean"), ("noise-1", "synthetic")):
                info = write_split(con, run_key, SplitInfo(name, "target", family, name, None),
                                   logits, labels)
                for method, by_seed in offsets.items():
                    est = info.true_accuracy - 0.2 + by_seed[seed]  # truth 1.0: stay inside
                    rows.append(EstimateRow(run_key, name, method, "{}", est, info.true_accuracy,
                                            abs(est - info.true_accuracy), 0.1, 0.01))
            write_estimates(con, run_key, rows)


def _cell(offsets, method):
    """The expected cell of one method (every family the same here): mean, std over seeds."""
    values = [100 * abs(-0.2 + o) for o in offsets[method]]
    return statistics.mean(values), statistics.stdev(values)


@pytest.fixture
def reference(tmp_path) -> Path:
    path = tmp_path / "reference.duckdb"
    _fill(path)
    return path


def test_identical_databases_are_the_same_numbers(tmp_path, reference) -> None:
    own = tmp_path / "own.duckdb"
    _fill(own)
    result = compare(reference_from_database(own), load_reference(reference))
    assert result.verdict.startswith("the same numbers: all 6 cells equal to the digit "
                                     "(every value bit-identical)")
    assert set(result.runs["status"]) == {"identical"}
    mean, std = _cell(OFFSETS, "ac")
    row = result.cells[(result.cells["method"] == "ac")
                       & (result.cells["shift_family"] == "clean")].iloc[0]
    assert math.isclose(row["ref"], mean) and math.isclose(row["spread"], std)
    text = format_comparison(result)
    assert text.splitlines()[-1] == f"Verdict: {result.verdict}"
    assert len(text.splitlines()) < 25


def test_host_noise_is_named_with_its_runs_and_reason(tmp_path, reference) -> None:
    # another CPU in fast mode: other models, numbers moved by less than the seeds' spread
    noisy = {"ac": (0.051, 0.03, 0.04), "atc-mc": (-0.02, 0.011, -0.03)}
    own = tmp_path / "own.duckdb"
    _fill(own, noisy, checkpoint="c1", cpu="Intel Xeon",
          settings={**SETTINGS, "mode": "fast", "aten_cpu_capability": "avx512",
                    "mkl_cbwr": "BRANCH_OFF"})
    result = compare(reference_from_database(own), load_reference(reference))
    assert result.verdict.startswith("host noise: ")
    assert "all within the seeds' spread" in result.verdict
    # the three runs differ (seed 2's checkpoint too): all named, compactly
    assert result.verdict.endswith("runs that differ (3): toy.mlp.s0-2")
    ac = result.cells[(result.cells["method"] == "ac") & (result.cells["shift_family"] == "all")]
    expected = (statistics.mean(100 * abs(-0.2 + o) for o in noisy["ac"])
                - _cell(OFFSETS, "ac")[0])
    assert math.isclose(float(ac["delta"].iloc[0]), expected, abs_tol=1e-9)
    assert bool(ac["within"].iloc[0]) is True
    runs = result.runs.set_index("run_key")
    # seed 2's numbers did not move, but its checkpoint is another: a different model all the same
    assert runs.loc["toy.mlp.s2", "status"] == "different model"
    assert runs.loc["toy.mlp.s2", "methods"] == []
    reason = runs.loc["toy.mlp.s0", "reason"]
    assert runs.loc["toy.mlp.s0", "status"] == "different model"
    for part in ("mode fast vs reproducible", "ATen avx512 vs avx2", "MKL BRANCH_OFF vs "
                 "COMPATIBLE", "CPU Intel Xeon vs AMD EPYC"):
        assert part in reason
    assert "different model" in format_comparison(result)


def test_a_real_difference_names_the_cell_beyond_the_spread(tmp_path, reference) -> None:
    broken = {"ac": (0.05, 0.03, 0.04), "atc-mc": (-0.02, 0.01, 0.09)}
    own = tmp_path / "own.duckdb"
    _fill(own, broken)  # the same checkpoints and settings: the estimator itself changed
    result = compare(reference_from_database(own), load_reference(reference))
    # a 4 pp move is within 3 seeds' spread (t = 0.8), but on the same model with the same
    # settings no host explains any move: the estimator changed
    assert result.verdict.startswith("a real difference: the estimates of 1 run(s) moved on "
                                     "the same model with the same recorded settings")
    assert "atc-mc" in result.verdict and "toy.mlp.s2" in result.verdict
    delta = statistics.mean(100 * abs(-0.2 + o) for o in broken["atc-mc"]) \
        - _cell(OFFSETS, "atc-mc")[0]
    assert f"{delta:+.2f} pp" in result.verdict
    runs = result.runs.set_index("run_key")
    assert runs.loc["toy.mlp.s2", "status"] == "same model"
    assert runs.loc["toy.mlp.s2", "methods"] == ["atc-mc"]
    assert "not explained by the host" in runs.loc["toy.mlp.s2", "reason"]


def test_a_subset_of_seeds_is_compared_on_the_seeds_both_hold(tmp_path, reference) -> None:
    from storage import connect

    own = tmp_path / "own.duckdb"
    _fill(own)
    with connect(own) as con:  # the user ran seed 0 only
        for table in ("estimates", "splits", "logits", "runs"):
            con.execute(f"DELETE FROM {table} WHERE run_key <> 'toy.mlp.s0'")
    result = compare(reference_from_database(own), load_reference(reference))
    assert result.verdict.startswith("the same numbers")
    assert set(result.cells["seeds"]) == {1}


def _page(tmp_path: Path, db: Path) -> Path:
    from tasks.report import write_report
    from tasks.report.benchmark_doc import write_benchmark_doc

    ref = write_report(db=db, out_dir=tmp_path / "reports", publish_artifacts=False,
                       anchor_plots=False)
    return write_benchmark_doc(Path(ref.folder), tmp_path / "docs")


def test_a_generated_page_carries_the_block_and_compares_to_the_digit(tmp_path, state_home,
                                                                       reference) -> None:
    page = _page(tmp_path, reference)
    text = page.read_text()
    assert text.count(BLOCK_START) == 1
    assert "| compute | the reproducible mode (ATen avx2, oneDNN AVX2, MKL COMPATIBLE" in text
    assert "on AMD EPYC (sse4_2 avx avx2 fma): 3 runs |" in text
    own = reference_from_database(reference)
    from_page = load_reference(page)
    assert from_page.kind == "page" and from_page.seeds == SEEDS
    result = compare(own, from_page)
    assert result.verdict.startswith("the same numbers: all 6 cells equal to the digit "
                                     "(every value bit-identical)")
    assert set(result.runs["status"]) == {"identical"}
    # a page without the block (generated before it existed): read from its MAE table
    stripped = tmp_path / "old.md"
    stripped.write_text("\n".join(line for line in text.splitlines()
                                  if not line.startswith(BLOCK_START)))
    old = load_reference(stripped)
    assert old.kind == "page table" and old.per_seed is None
    mean, std = _cell(OFFSETS, "ac")
    cell = old.summary[(old.summary["method"] == "ac") & (old.summary["shift_family"] == "all")]
    assert float(cell["mae_mean"].iloc[0]) == round(mean, 2)
    assert float(cell["mae_std"].iloc[0]) == round(std, 2)
    assert compare(own, old).verdict.startswith("the same numbers: all 6 cells")


def test_the_page_of_a_different_run_shows_host_noise(tmp_path, state_home, reference) -> None:
    page = _page(tmp_path, reference)
    own = tmp_path / "own.duckdb"
    _fill(own, {"ac": (0.051, 0.03, 0.04), "atc-mc": (-0.02, 0.011, -0.03)}, checkpoint="c1",
          settings={**SETTINGS, "aten_cpu_capability": "avx512"})
    result = compare(reference_from_database(own), load_reference(page))
    assert result.verdict.startswith("host noise")
    assert "ATen avx512 vs avx2" in format_comparison(result)


def test_unreadable_references_are_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="REFERENCE must be a generated BENCHMARK.md"):
        load_reference(tmp_path / "missing.md")
    with pytest.raises(ValueError, match="must be a file"):
        load_reference(tmp_path)
    notes = tmp_path / "notes.md"
    notes.write_text("# Some notes\n\nno table here\n")
    with pytest.raises(ValueError, match="not a generated BENCHMARK.md"):
        load_reference(notes)
    damaged = tmp_path / "damaged.md"
    damaged.write_text(f"# Benchmark results\n\n{BLOCK_START}{{not json -->\n")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_reference(damaged)


def test_the_cli_prints_the_verdict_and_never_fails_the_bench(tmp_path, state_home,
                                                              reference) -> None:
    from typer.testing import CliRunner

    from flows.cli import app
    from storage.paths import db_path

    _fill(db_path(), {"ac": (0.05, 0.03, 0.04), "atc-mc": (-0.02, 0.01, 0.09)})
    runner = CliRunner()
    result = runner.invoke(app, ["report", "--compare", str(reference)])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1].startswith("Verdict: a real difference")
    missing = runner.invoke(app, ["report", "--compare", str(tmp_path / "nope.md")])
    assert missing.exit_code == 2
    assert missing.output.strip().startswith("error: REFERENCE must be a generated")


def _draws(rng: np.random.Generator, cells: int, shift: float = 0.0, seeds: int = 3):
    """A reference of ``cells`` cells, ``seeds`` seeds each (MAE ~ N(5 + shift, 1) pp)."""
    import pandas as pd

    from tasks.report.compare import CELL, Reference

    rows = [("toy", f"d{i}", "synthetic", "mlp", "ac", seed, 5.0 + shift + rng.normal())
            for i in range(cells) for seed in range(seeds)]
    per_seed = pd.DataFrame(rows, columns=CELL + ["seed", "mae"])
    summary = per_seed.groupby(CELL, as_index=False).agg(
        mae_mean=("mae", "mean"), mae_std=("mae", "std"), n_seeds=("seed", "nunique"))
    runs = pd.DataFrame(columns=["run_key"])
    return Reference("toy", "database", per_seed, summary, runs, tuple(range(seeds)))


def test_independent_draws_are_host_noise_where_one_std_would_cry_wolf() -> None:
    # two hosts = two independent draws of 3 seeds: about 29 % of the cells differ by more
    # than the seeds' pooled std by chance (P(|t_4| > sqrt(3/2))), which is not a difference
    rng = np.random.default_rng(3)
    own, ref = _draws(rng, 400), _draws(rng, 400)
    result = compare(own, ref)
    naive = (result.cells["delta"].abs() > result.cells["spread"]).mean()
    assert 0.2 < naive < 0.4
    assert result.verdict.startswith("host noise: ")
    assert "all within the seeds' spread" in result.verdict
    assert result.cells["p"].between(0, 1).all()
    # a real shift of 3 seeds' std in one cell of 400 is found and named
    shifted = _draws(np.random.default_rng(4), 400)
    shifted.per_seed.loc[shifted.per_seed["dataset"] == "d7", "mae"] += 6.0
    shifted = type(shifted)(shifted.source, shifted.kind, shifted.per_seed,
                            shifted.per_seed.groupby(_CELL, as_index=False).agg(
                                mae_mean=("mae", "mean"), mae_std=("mae", "std"),
                                n_seeds=("seed", "nunique")),
                            shifted.runs, shifted.seeds)
    found = compare(shifted, ref)
    assert found.verdict.startswith("a real difference: ")
    assert "largest d7/synthetic/mlp ac +" in found.verdict
    beyond = found.cells[found.cells["within"] == False]  # noqa: E712
    # the shifted cell, and at most the false discoveries a 5 % rate allows
    assert "d7" in beyond["dataset"].tolist() and len(beyond) <= 3


def test_methods_that_pool_the_seeds_models_are_listed_not_judged() -> None:
    # ALine's three seeds share one line through the seeds' models: their spread (0.1 pp) says
    # nothing about a new draw of models, which moves the line by pp
    rng = np.random.default_rng(5)
    own, ref = _draws(rng, 30), _draws(rng, 30)
    for side, value in ((own, 14.0), (ref, 3.0)):
        extra = pd.DataFrame([("toy", "d0", "synthetic", "mlp", "aline-s", seed,
                               value + 0.05 * seed) for seed in range(3)],
                             columns=_CELL + ["seed", "mae"])
        per_seed = pd.concat([side.per_seed, extra], ignore_index=True)
        object.__setattr__(side, "per_seed", per_seed)
        object.__setattr__(side, "summary", per_seed.groupby(_CELL, as_index=False).agg(
            mae_mean=("mae", "mean"), mae_std=("mae", "std"), n_seeds=("seed", "nunique")))
    result = compare(own, ref)
    aline = result.cells[result.cells["method"] == "aline-s"].iloc[0]
    assert bool(aline["pooled"]) and aline["within"] is None and math.isnan(aline["p"])
    assert result.verdict.startswith("host noise: 30 of 31 cells differ")
    assert "1 cells of methods that pool the seeds' models not judged (aline-s)" in result.verdict
    assert "1 of methods that pool the seeds' models (not judged)" in format_comparison(result)


def test_the_pages_commit_ignores_what_the_page_itself_writes(tmp_path, monkeypatch) -> None:
    import subprocess

    from tasks.report.benchmark_doc import PAGE_OUTPUTS, _git_commit

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "docs" / "benchmark").mkdir(parents=True)
    for name in ("code.py", "docs/BENCHMARK.md", "docs/benchmark/fig.png"):
        (tmp_path / name).write_text("v1\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    monkeypatch.chdir(tmp_path / "docs")  # from a subfolder too
    (tmp_path / "docs" / "BENCHMARK.md").write_text("v2\n")
    (tmp_path / "docs" / "benchmark" / "fig.png").write_text("v2\n")
    assert "uncommitted" not in _git_commit(PAGE_OUTPUTS)
    assert _git_commit().endswith("+ uncommitted changes")
    (tmp_path / "code.py").write_text("v2\n")
    assert _git_commit(PAGE_OUTPUTS).endswith("+ uncommitted changes")


def test_only_seed_pooling_cells_moved_is_the_same_numbers() -> None:
    # one seed run against a 3-seed page: ALine ran without peers, everything else equal
    rng = np.random.default_rng(6)
    ref = _draws(rng, 5)
    own = Reference("toy", "database", ref.per_seed.copy(), ref.summary.copy(), ref.runs,
                    ref.seeds)
    for side, value in ((own, 14.0), (ref, 3.0)):
        extra = pd.DataFrame([("toy", "d0", "synthetic", "mlp", "aline-d", seed, value)
                              for seed in range(3)], columns=_CELL + ["seed", "mae"])
        per_seed = pd.concat([side.per_seed, extra], ignore_index=True)
        object.__setattr__(side, "per_seed", per_seed)
        object.__setattr__(side, "summary", per_seed.groupby(_CELL, as_index=False).agg(
            mae_mean=("mae", "mean"), mae_std=("mae", "std"), n_seeds=("seed", "nunique")))
    result = compare(own, ref)
    assert result.verdict.startswith("the same numbers: all 5 judged cells equal to the digit")
    assert "1 cells of methods that pool the seeds' models not judged (aline-d)" in result.verdict


def test_a_run_whose_seed_pooling_methods_alone_moved_is_not_blamed_on_the_estimators() -> None:
    # a one-seed run against a three-seed page: the same checkpoint, ALine without peers
    import pandas as pd

    from tasks.report.compare import _run_table

    runs = pd.DataFrame([{"run_key": "d0.mlp.s0", "checkpoint_sha256": "ab" * 32}])
    side = Reference("toy", "database", pd.DataFrame(), pd.DataFrame(), runs, (0,))
    joined = pd.DataFrame([("d0", "mlp", 0, "aline-d", 14.0, 3.0),
                           ("d0", "mlp", 0, "ac", 5.0, 5.0)],
                          columns=["dataset", "backbone", "seed", "method", "mae_own", "mae_ref"])
    row = _run_table(side, side, joined).iloc[0]
    assert row["status"] == "same model" and row["methods"] == ["aline-d"]
    assert row["reason"].startswith("only methods that pool the seeds' models moved (aline-d)")
    assert "not explained by the host" not in row["reason"]
    # a non-pooling method moving on the same model is still the estimators' fit
    joined.loc[1, "mae_own"] = 5.5
    row = _run_table(side, side, joined).iloc[0]
    assert row["reason"].startswith("the estimators' fit moved: ")

