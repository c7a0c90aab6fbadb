"""The report stage: tables against numpy/scipy references, and the files write_report leaves."""

from __future__ import annotations

import json

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tasks.report import write_report
from tasks.report.alsa_figure import simplex_plane_basis
from tasks.report.markdown import format_mae_text, render_markdown
from tasks.report.names import ALL_FAMILIES, parse_variant
from tasks.report.stats import pearson, r2_identity
from tasks.report.tables import build_report_tables

METHODS = ("ac", "atc-mc", "alsa-g")


def _report_rows(rng: np.random.Generator) -> pd.DataFrame:
    """Two backbones x three seeds x (clean + 3 synthetic splits) x three methods."""
    records = []
    noise = {"ac": 0.06, "atc-mc": 0.03, "alsa-g": 0.01}
    for backbone in ("mlp", "lenet"):
        for seed in (0, 1, 2):
            for family, splits in (("clean", ["clean"]), ("synthetic", ["a-1", "a-3", "b-2"])):
                for split in splits:
                    true = rng.uniform(0.4, 0.95)
                    for method in METHODS:
                        est = true + rng.normal(0.0, noise[method])
                        records.append(dict(
                            suite="toy", dataset="toy", backbone=backbone, seed=seed,
                            shift_family=family, shift=split, severity=None, n_target=100,
                            method=method, estimated_accuracy=est, true_accuracy=true,
                            abs_error=abs(est - true), run_key=f"toy.{backbone}.s{seed}",
                            split=split,
                        ))
    return pd.DataFrame.from_records(records)


@pytest.fixture
def rows(rng: np.random.Generator) -> pd.DataFrame:
    return _report_rows(rng)


def test_mae_is_mean_and_std_over_seeds_of_per_seed_mae(rows: pd.DataFrame) -> None:
    tables = build_report_tables(rows)
    mae = tables["mae"].set_index(["shift_family", "backbone", "method"])
    for family in ("clean", "synthetic", ALL_FAMILIES):
        sel = rows if family == ALL_FAMILIES else rows[rows["shift_family"] == family]
        for backbone in ("mlp", "lenet"):
            for method in METHODS:
                sub = sel[(sel["backbone"] == backbone) & (sel["method"] == method)]
                per_seed = [
                    100 * np.mean(np.abs(g["estimated_accuracy"] - g["true_accuracy"]))
                    for _, g in sub.groupby("seed")
                ]
                got = mae.loc[(family, backbone, method)]
                np.testing.assert_allclose(got["mae_mean"], np.mean(per_seed), rtol=1e-12)
                np.testing.assert_allclose(got["mae_std"], np.std(per_seed, ddof=1), rtol=1e-12)
                assert got["n_seeds"] == 3
                n_splits = {"clean": 1, "synthetic": 3, ALL_FAMILIES: 4}[family]
                assert got["n_splits"] == n_splits


def test_best_method_is_marked_per_row_in_long_and_wide_tables(rows: pd.DataFrame) -> None:
    tables = build_report_tables(rows)
    mae = tables["mae"]
    for _, group in mae.groupby(["shift_family", "backbone"]):
        best = group.loc[group["mae_mean"].idxmin(), "method"]
        assert group.loc[group["best"], "method"].tolist() == [best]
    wide = tables["mae_table"]
    assert list(wide.columns) == list(METHODS)
    for idx, row in wide.iterrows():
        marked = [m for m in METHODS if row[m].startswith("**")]
        _, _, family, backbone = idx
        in_row = (mae["shift_family"] == family) & (mae["backbone"] == backbone)
        expected = mae[in_row & mae["best"]]
        assert marked == expected["method"].tolist()
        assert " ± " in row[marked[0]]


def test_single_seed_shows_no_std(rows: pd.DataFrame) -> None:
    tables = build_report_tables(rows[rows["seed"] == 0])
    assert tables["mae"]["mae_std"].isna().all()
    assert not any(" ± " in cell for cell in tables["mae_table"].to_numpy().ravel())


def test_correlation_matches_numpy_and_scipy(rows: pd.DataFrame) -> None:
    corr = build_report_tables(rows)["correlation"].set_index(["backbone", "method"])
    for backbone in ("mlp", "lenet"):
        for method in METHODS:
            sub = rows[(rows["backbone"] == backbone) & (rows["method"] == method)]
            est = sub["estimated_accuracy"].to_numpy()
            true = sub["true_accuracy"].to_numpy()
            r2 = 1 - np.sum((est - true) ** 2) / np.sum((true - true.mean()) ** 2)
            got = corr.loc[(backbone, method)]
            np.testing.assert_allclose(got["r2"], r2, rtol=1e-12)
            np.testing.assert_allclose(got["pearson_r"], stats.pearsonr(est, true)[0], rtol=1e-10)
            assert got["n_points"] == len(sub)
    for backbone in ("mlp", "lenet"):
        sub = corr.loc[backbone]
        assert sub.index[sub["best_r2"]].tolist() == [sub["r2"].idxmax()]
        assert sub.index[sub["best_pearson_r"]].tolist() == [sub["pearson_r"].idxmax()]


def test_r2_and_pearson_edge_cases() -> None:
    assert r2_identity([0.5, 0.7], [0.5, 0.7]) == 1.0
    assert r2_identity([0.6, 0.8], [0.5, 0.7]) < 1.0
    assert math.isnan(r2_identity([0.5], [0.5]))
    assert math.isnan(r2_identity([0.4, 0.6], [0.5, 0.5]))
    assert math.isnan(pearson([0.5, 0.5], [0.4, 0.6]))
    # A constant offset keeps rho at 1 but costs R^2 against y = x.
    true = np.array([0.5, 0.6, 0.7])
    assert pearson(true + 0.2, true) == pytest.approx(1.0)
    assert r2_identity(true + 0.2, true) == pytest.approx(1 - 3 * 0.04 / 0.02)


def test_validation_rows_and_missing_estimates_are_left_out(rows: pd.DataFrame) -> None:
    extra = rows.iloc[:2].copy()
    extra["split"] = "val"
    nan_row = rows.iloc[:1].copy()
    nan_row["estimated_accuracy"] = np.nan
    tables = build_report_tables(pd.concat([rows, extra, nan_row], ignore_index=True))
    assert len(tables["rows"]) == len(rows)


def test_missing_columns_and_empty_input_are_rejected(rows: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="missing \\['true_accuracy'\\]"):
        build_report_tables(rows.drop(columns=["true_accuracy"]))
    with pytest.raises(ValueError, match="at least one target-split row"):
        build_report_tables(rows.iloc[:0])


def test_text_and_markdown_render_every_method(rows: pd.DataFrame) -> None:
    tables = build_report_tables(rows)
    text = format_mae_text(tables)
    assert "*" in text and "**" not in text
    md = render_markdown(tables, title="T", images=[("scatter", "scatter.png")])
    assert md.startswith("# T\n")
    assert "![scatter](scatter.png)" in md
    for method in METHODS:
        assert f"| {method}" in md or f" {method} " in md


def test_parse_variant() -> None:
    assert parse_variant("alsa-g[alpha=0.5]") == ("alsa-g", {"alpha": "0.5"})
    assert parse_variant("alsa-g[default]") == ("alsa-g", {})
    assert parse_variant("cot") == ("cot", {})


def test_simplex_plane_basis_is_orthonormal_and_ignores_shifts() -> None:
    basis = simplex_plane_basis()
    np.testing.assert_allclose(basis @ basis.T, np.eye(2), atol=1e-12)
    z = np.array([[1.0, 2.0, 3.0]])
    np.testing.assert_allclose((z + 5.0) @ basis.T, z @ basis.T, atol=1e-12)


# --------------------------------------------------------------------------- write_report on a DB
def _fill_db(path, rng: np.random.Generator) -> None:
    from estimators import get_estimator
    from estimators.core.exceptions import ConvergenceWarning
    from storage import (
        EstimateRow, RunInfo, SplitInfo, connect, upsert_run, write_anchors, write_estimates,
        write_split,
    )

    def split(n: int, c: int, acc: float) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, c, size=n)
        logits = rng.normal(size=(n, c)).astype(np.float32)
        top = np.where(rng.random(n) < acc, labels, (labels + 1) % c)
        logits[np.arange(n), top] += 3.0
        return logits, labels

    with connect(path) as con:
        for dataset, c in (("toy", 4), ("toy-coarse", 3)):
            run_key = f"{dataset}.mlp.s0"
            upsert_run(con, RunInfo(run_key, "toy", dataset, "mlp", 0, c))
            val = split(300, c, 0.8)
            write_split(con, run_key, SplitInfo("val", "val", None, None, None), *val)
            rows = []
            with warnings.catch_warnings():  # a short fit need not meet the stopping rule
                warnings.simplefilter("ignore", ConvergenceWarning)
                alsa = get_estimator("alsa-g", n_anchors=20, max_epochs=20).fit(*val)
            # the parameters the estimate stage stores with every row (space, tau, bias, ...)
            alsa_params = json.dumps(alsa.estimate(val[0]).to_record()["params"], sort_keys=True)
            for name, family, acc in (("clean", "clean", 0.8), ("noise-1", "synthetic", 0.6),
                                      ("noise-2", "synthetic", 0.4)):
                info = write_split(con, run_key, SplitInfo(name, "target", family, name, None),
                                   *split(200, c, acc))
                for method, est in (("ac", info.true_accuracy + 0.05),
                                    ("alsa-g", info.true_accuracy - 0.01)):
                    rows.append(EstimateRow(
                        run_key, name, method,
                        alsa_params if method == "alsa-g" else "{}",
                        est, info.true_accuracy, abs(est - info.true_accuracy), 0.1, 0.01,
                    ))
            write_estimates(con, run_key, rows)
            write_anchors(con, run_key, "alsa-g", alsa.positions_, alsa.peaks_, alsa.variances_)


def test_write_report_writes_markdown_csv_and_png(tmp_path, state_home, rng) -> None:
    from storage.paths import db_path

    _fill_db(db_path(), rng)
    ref = write_report(out_dir=tmp_path / "reports", publish_artifacts=False)
    folder = tmp_path / "reports" / "toy"
    assert ref.name == "toy" and ref.folder == str(folder.resolve())
    names = {p.name for p in folder.iterdir()}
    assert {"report.md", "mae.txt", "mae.csv", "mae_table.csv", "correlation.csv",
            "correlation_table.csv", "estimates.csv", "scatter-toy.png",
            "scatter-toy-coarse.png", "alsa-toy-coarse-mlp-s0.png"} <= names
    # 4-class runs get no anchor picture (it needs 3 classes).
    assert "alsa-toy-mlp-s0.png" not in names
    md = (folder / "report.md").read_text()
    assert "![" in md and "scatter-toy.png" in md and "**" in md
    mae = pd.read_csv(folder / "mae.csv")
    assert set(mae["method"]) == {"ac", "alsa-g"}
    ac = mae[(mae["dataset"] == "toy") & (mae["shift_family"] == ALL_FAMILIES)
             & (mae["method"] == "ac")]
    np.testing.assert_allclose(ac["mae_mean"], 5.0, rtol=1e-9)
    for png in folder.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_write_report_selects_runs_and_methods(tmp_path, state_home, rng) -> None:
    from storage.paths import db_path

    _fill_db(db_path(), rng)
    write_report(out_dir=tmp_path, run_name="only", publish_artifacts=False,
                 run_keys=["toy.mlp.s0"], methods=["ac"], anchor_plots=False)
    mae = pd.read_csv(tmp_path / "only" / "mae.csv")
    assert set(mae["method"]) == {"ac"} and set(mae["dataset"]) == {"toy"}
    with pytest.raises(ValueError, match="run_keys must name runs with estimates"):
        write_report(out_dir=tmp_path, publish_artifacts=False, run_keys=["nope.mlp.s0"])
    with pytest.raises(ValueError, match="methods must name methods with estimates"):
        write_report(out_dir=tmp_path, publish_artifacts=False, methods=["cot"])


def test_write_report_without_database_names_the_file(tmp_path, state_home) -> None:
    with pytest.raises(FileNotFoundError, match="bench.duckdb"):
        write_report(out_dir=tmp_path, publish_artifacts=False)


# --------------------------------------------------------------------------- issue 11 tables
def test_coverage_table_counts_truth_inside_the_interval(rows: pd.DataFrame) -> None:
    half = {"ac": 0.02, "atc-mc": 0.05, "alsa-g": 0.03}
    rows = rows.assign(
        interval_low=rows["estimated_accuracy"] - rows["method"].map(half),
        interval_high=rows["estimated_accuracy"] + rows["method"].map(half),
        interval_level=0.9,
    )
    rows.loc[rows.index[:3], ["interval_low", "interval_high"]] = np.nan  # no interval: left out
    tables = build_report_tables(rows)
    cov = tables["coverage"]
    usable = rows.dropna(subset=["interval_low"])
    for (family, method), grp in [
        *usable.groupby(["shift_family", "method"]),
        *((("all", m), g) for m, g in usable.groupby("method")),
    ]:
        inside = ((grp["interval_low"] <= grp["true_accuracy"])
                  & (grp["true_accuracy"] <= grp["interval_high"])).mean()
        got = cov[(cov["shift_family"] == family) & (cov["method"] == method)].iloc[0]
        assert got["coverage"] == pytest.approx(inside)
        assert got["n"] == len(grp)
        assert got["width_pp"] == pytest.approx(200 * half[method])
        assert got["coverage_se"] == pytest.approx(math.sqrt(0.09 / len(grp)))
    wide = tables["coverage_table"]
    assert list(wide.columns) == ["ac", "atc-mc", "alsa-g"]
    md = render_markdown(tables, title="t")
    assert "## Interval coverage" in md and "90% interval" in md


def test_report_without_interval_columns_has_no_coverage_table(rows: pd.DataFrame) -> None:
    assert "coverage" not in build_report_tables(rows)


def test_write_report_adds_coverage_and_per_class_mae(tmp_path, state_home, rng) -> None:
    from storage import connect
    from storage.logits import read_target_labels, read_target_logits
    from storage.paths import db_path

    _fill_db(db_path(), rng)
    est_by_method = {"ac": 0.5, "alsa-g": 0.9}
    expected: dict[tuple[str, str], list[float]] = {}
    with connect(db_path()) as con:
        for run_key, split, method in con.sql(
            "SELECT run_key, split, method FROM estimates").fetchall():
            z = read_target_logits(con, run_key, split)
            y = read_target_labels(con, run_key, split)
            c = z.shape[1]
            pred = z.argmax(1)
            estimated = [est_by_method[method] if np.any(pred == k) else None for k in range(c)]
            errs = [abs(est_by_method[method] - np.mean(y[pred == k] == k))
                    for k in range(c) if np.any(pred == k)]
            expected.setdefault((run_key.split(".")[0], method), []).append(100 * np.mean(errs))
            con.execute(
                "UPDATE estimates SET per_class_json = ?, interval_low = estimated_accuracy - 0.1,"
                " interval_high = estimated_accuracy + 0.1, interval_level = 0.9 "
                "WHERE run_key = ? AND split = ? AND method = ?",
                [json.dumps({"estimated": estimated, "count": [0] * c}), run_key, split, method],
            )
    write_report(out_dir=tmp_path / "reports", publish_artifacts=False, anchor_plots=False)
    folder = tmp_path / "reports" / "toy"
    pc = pd.read_csv(folder / "per_class_mae.csv")
    for (dataset, method), errs in expected.items():
        got = pc[(pc["dataset"] == dataset) & (pc["method"] == method)
                 & (pc["shift_family"] == ALL_FAMILIES)].iloc[0]
        assert got["per_class_mae_pp"] == pytest.approx(np.mean(errs))
        assert got["role"] == ("alsa" if method == "alsa-g" else "best baseline")
    cov = pd.read_csv(folder / "coverage.csv")
    # ac is off by +0.05 and alsa-g by -0.01, both inside +-0.1
    assert (cov["coverage"] == 1.0).all() and cov["width_pp"].to_numpy() == pytest.approx(20.0)
    md = (folder / "report.md").read_text()
    assert "## Interval coverage" in md and "## Per-class MAE" in md
    assert "ac (best baseline)" in md


def test_ranks_follow_the_per_seed_mae_and_ties_share_the_mean_rank(rows: pd.DataFrame) -> None:
    tables = build_report_tables(rows)
    ranks = tables["ranks"]
    assert set(ranks["shift_family"]) == {"clean", "synthetic"}  # never the pooled "all"
    target = tables["rows"]
    for (backbone, family, seed), sub in target.groupby(["backbone", "shift_family", "seed"]):
        mae = sub.groupby("method")["abs_error_pp"].mean()
        expected = stats.rankdata(mae.to_numpy(), method="average")
        got = ranks[(ranks["backbone"] == backbone) & (ranks["shift_family"] == family)
                    & (ranks["seed"] == seed)].set_index("method").loc[mae.index, "rank"]
        np.testing.assert_allclose(got.to_numpy(), expected)
    tie = rows.copy()
    tie.loc[tie["method"] == "atc-mc", "estimated_accuracy"] = tie.loc[
        tie["method"] == "ac", "estimated_accuracy"].to_numpy()
    tied = build_report_tables(tie)["ranks"]
    pair = tied[tied["method"].isin(["ac", "atc-mc"])].groupby(
        ["backbone", "shift_family", "seed"])["rank"].agg(["min", "max"])
    assert (pair["min"] == pair["max"]).all() and (pair["min"] % 1 == 0.5).all()


def test_mean_rank_is_mean_over_rows_then_seeds(rows: pd.DataFrame) -> None:
    tables = build_report_tables(rows)
    ranks, summary = tables["ranks"], tables["mean_rank"]
    per_seed = ranks.groupby(["method", "seed"])["rank"].mean().unstack()
    np.testing.assert_allclose(summary.loc[per_seed.index, "mean_rank"], per_seed.mean(axis=1))
    np.testing.assert_allclose(summary.loc[per_seed.index, "std"], per_seed.std(axis=1, ddof=1))
    assert list(summary.index)[0] == "alsa-g"  # the least noisy method of the fixture
    assert (summary["rows"] == 4).all()  # 2 backbones x 2 families
    assert summary["wins"].sum() == 4 * 3  # one first place per row and seed (no ties here)
    assert "mean rank" in render_markdown(tables, title="toy")


def test_worst_family_is_the_largest_family_mae(rows: pd.DataFrame) -> None:
    tables = build_report_tables(rows)
    mae, worst = tables["mae"], tables["worst_family"]
    fam = mae[mae["shift_family"] != ALL_FAMILIES]
    for (backbone, method), sub in fam.groupby(["backbone", "method"]):
        row = worst[(worst["backbone"] == backbone) & (worst["method"] == method)].iloc[0]
        top = sub.loc[sub["mae_mean"].idxmax()]
        assert row["worst_mae"] == pytest.approx(top["mae_mean"])
        assert row["worst_family"] == top["shift_family"]
    wide = tables["worst_family_table"]
    assert wide.shape == (2, len(METHODS))
    assert all(cell.startswith("**") for cell in wide["alsa-g"])
