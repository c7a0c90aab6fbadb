"""From small real benchmark databases to trust rows, the sealed split, the protocol's model
comparison and ``alsa-bench calibrate --db A --db B``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from estimators.trust.calibration_artifact import AUTO_MEMBER_SETS, load_calibration
from estimators.trust.sealed import is_sealed
from flows.cli import app
from tasks.report.trust_protocol import model_table
from tasks.report.trust_rows import read_trust_rows, split_development

METHODS = AUTO_MEMBER_SETS[0]
#: (dataset, n_classes, families): registry names, so that source groups and concept flags
#: come from the specs. fmnist + fmnist-binary are one group; aids-status and chile-vote are
#: sealed by the rule; tabular "temporal" is a declared concept shift.
RUNS = (("fmnist", 10, ("clean", "synthetic")), ("fmnist-binary", 2, ("clean", "synthetic")),
        ("titanic", 2, ("clean", "synthetic")), ("smoke-ban", 2, ("clean", "synthetic")),
        ("oj-purchase", 2, ("clean", "synthetic")),
        ("arrests", 2, ("clean", "synthetic", "temporal")),
        ("aids-status", 2, ("clean", "synthetic")), ("chile-vote", 3, ("clean", "temporal")))


def _fill(path, runs, rng: np.random.Generator) -> dict[tuple[str, str], float]:
    from storage import EstimateRow, RunInfo, SplitInfo, connect, upsert_run, write_estimates
    from storage import write_split

    def split(n: int, c: int, acc: float) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, c, size=n)
        logits = rng.normal(size=(n, c)).astype(np.float32)
        top = np.where(rng.random(n) < acc, labels, (labels + 1) % c)
        logits[np.arange(n), top] += 3.0
        return logits, labels

    truth = {}
    with connect(path) as con:
        for dataset, c, families in runs:
            run_key = f"{dataset}.mlp.s0"
            upsert_run(con, RunInfo(run_key, "toy", dataset, "mlp", 0, c))
            write_split(con, run_key, SplitInfo("val", "val", None, None, None),
                        *split(300, c, 0.85))
            rows = []
            for i, family in enumerate(families):
                for k in range(2):
                    name = f"{family}-{k}"
                    info = write_split(con, run_key, SplitInfo(name, "target", family, name, None),
                                       *split(200, c, 0.85 - 0.1 * i - 0.05 * k))
                    truth[(run_key, name)] = info.true_accuracy
                    for j, method in enumerate(METHODS):
                        est = float(np.clip(info.true_accuracy + 0.01 * (j - 3)
                                            + rng.normal(scale=0.01), 0, 1))
                        rows.append(EstimateRow(run_key, name, method, "{}", est,
                                                info.true_accuracy,
                                                abs(est - info.true_accuracy), 0.1, 0.01))
                    # a score method without a map: a row without an accuracy
                    rows.append(EstimateRow(run_key, name, "mano", "{}", float("nan"),
                                            info.true_accuracy, float("nan"), 0.1, 0.01))
            write_estimates(con, run_key, rows)
    return truth


@pytest.fixture()
def two_dbs(tmp_path):
    rng = np.random.default_rng(0)
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    truth = _fill(a, RUNS[:4], rng)
    truth |= _fill(b, RUNS[4:], rng)
    return a, b, truth


def test_rows_carry_source_groups_concept_flags_and_the_stored_truth(two_dbs) -> None:
    a, b, truth = two_dbs
    rows = read_trust_rows([a, b])
    assert len(rows) == len(truth)
    keys = rows.keys
    assert set(keys.group[keys.dataset.isin(["fmnist", "fmnist-binary"])]) == {"fashion-mnist"}
    assert set(keys.group) == {"fashion-mnist", "titanic", "smoke-ban", "oj-purchase", "arrests",
                               "aids-status", "chile-vote"}
    np.testing.assert_array_equal(rows.concept, (keys.shift_family == "temporal").to_numpy())
    expected = [truth[(r, s)] for r, s in zip(keys.run_key, keys.split)]
    np.testing.assert_allclose(rows.table.truth, expected)
    assert set(rows.table.estimates) == set(METHODS) | {"mano"}
    assert np.isnan(rows.table.estimates["mano"]).all()


def test_development_rows_hold_no_sealed_group_and_sealed_labels_only_score(two_dbs) -> None:
    a, b, truth = two_dbs
    rows = read_trust_rows([a, b])
    dev, sealed = split_development(rows)
    assert {"aids-status", "chile-vote"} == set(sealed.inputs.group_names())
    assert not any(is_sealed(g) for g in dev.group_names())
    assert np.isnan(sealed.inputs.table.truth).all()
    est = sealed.inputs.table.estimates["alsa-e"]
    scored = sealed.score({"alsa-e": est})
    keys = sealed.inputs.keys
    expected = [abs(e - truth[(r, s)]) * 100 for e, r, s in zip(est, keys.run_key, keys.split)]
    np.testing.assert_allclose(scored.abs_error_pp, expected)
    with pytest.raises(ValueError, match="one per sealed row"):
        sealed.score({"short": est[:2]})


def test_model_table_shows_validation_beside_sealed_for_every_class(two_dbs) -> None:
    a, b, _ = two_dbs
    dev, sealed = split_development(read_trust_rows([a, b]))
    table, _ = model_table(dev, sealed)
    assert set(table.rows) == {"all rows", "without concept shifts"}
    alone = table[(table["model class"] == "alsa-e alone") & (table.rows == "all rows")].iloc[0]
    # alsa-e is the 8th member: estimate = truth + 0.04 + noise(0.01) -> about 4 pp
    assert 3.0 < alone["validation group-mean MAE (pp)"] < 5.0
    assert 3.0 < alone["sealed group-mean MAE (pp)"] < 5.0
    assert np.isfinite(table.filter(like="MAE").to_numpy()).all()


def test_calibrate_reads_several_databases_and_fits_development_groups_only(two_dbs,
                                                                            tmp_path) -> None:
    a, b, _ = two_dbs
    out = tmp_path / "cal.json"
    result = CliRunner().invoke(app, ["calibrate", "--db", str(a), "--db", str(b), "--out",
                                      str(out), "--no-evaluate"])
    assert result.exit_code == 0, result.output
    cal = load_calibration(out)
    assert set(cal.source["rows_per_group"]) == {"fashion-mnist", "titanic", "smoke-ban",
                                                 "oj-purchase", "arrests"}
    assert cal.source["sealed_groups_left_out"] == ["aids-status", "chile-vote"]
    assert cal.source["excluded_concept_shifts"] == ["arrests/temporal"]
    assert cal.source["databases"] == ["a.duckdb", "b.duckdb"]
    assert "alsa-e" in cal.bands and cal.source["auto_model"]["class"]
    json.dumps(cal.to_dict())


def test_calibrate_says_in_one_line_when_a_database_has_too_few_groups(tmp_path) -> None:
    db = tmp_path / "small.duckdb"
    _fill(db, (RUNS[0], RUNS[2], RUNS[6]), np.random.default_rng(1))
    result = CliRunner().invoke(app, ["calibrate", "--db", str(db), "--out",
                                      str(tmp_path / "c.json")])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "2 development group(s)" in lines[0]
    assert "at least 3" in lines[0] and not (tmp_path / "c.json").exists()


def test_the_reports_open_connection_gives_the_trust_section(tmp_path) -> None:
    from storage import connect
    from tasks.report.trust_calibration import calibration_table, trust_tables

    db = tmp_path / "bench.duckdb"
    _fill(db, RUNS[:6], np.random.default_rng(2))
    with connect(db) as con:  # the report holds a read-write connection to the same file
        table, keys = calibration_table(con)
    assert set(table.groups) == {"fashion-mnist", "titanic", "smoke-ban", "oj-purchase",
                                 "arrests"}
    tables = trust_tables(table, concept=keys["concept"].to_numpy(dtype=bool))
    assert "arrests (concept shift)" in set(tables["auto"].dataset)
    auto = tables["band"][tables["band"].method == "auto"]
    assert len(auto) and auto.coverage.between(0, 1).all()
    with pytest.raises(ValueError, match="one flag per row"):
        trust_tables(table, concept=np.zeros(2, bool))


def test_a_reports_trust_rows_are_the_databases_rows_of_its_runs(tmp_path) -> None:
    """``run_keys`` reads the same rows, signals and order as the whole database's rows of those
    runs; ``signals=False`` the same rows without signals; no run, no row."""
    from storage import connect
    from tasks.report.trust_calibration import calibration_table
    from tasks.report.trust_rows import trust_rows_of

    db = tmp_path / "bench.duckdb"
    _fill(db, RUNS[:6], np.random.default_rng(3))
    mine = ["titanic.mlp.s0", "fmnist.mlp.s0", "arrests.mlp.s0"]
    with connect(db) as con:
        whole = trust_rows_of(con)
        part = trust_rows_of(con, run_keys=mine)
        bare = trust_rows_of(con, run_keys=mine, signals=False)
        table, keys = calibration_table(con, run_keys=mine)
        with pytest.raises(ValueError, match="no target split with an estimate"):
            trust_rows_of(con, run_keys=[])
    expected = whole.subset(whole.keys.run_key.isin(mine).to_numpy())
    pd.testing.assert_frame_equal(part.keys, expected.keys)
    assert part.table.signals and set(part.table.signals) == set(expected.table.signals)
    for name, values in expected.table.signals.items():
        np.testing.assert_array_equal(part.table.signals[name], values)
    for name, values in expected.table.estimates.items():
        np.testing.assert_array_equal(part.table.estimates[name], values)
    np.testing.assert_array_equal(part.table.truth, expected.table.truth)
    pd.testing.assert_frame_equal(bare.keys, expected.keys)
    assert bare.table.signals == {}
    np.testing.assert_array_equal(bare.table.truth, expected.table.truth)
    assert set(keys.run_key) == set(mine) and len(table) == len(keys)


def test_band_table_and_learning_curve_score_only_fits_on_development_groups(two_dbs) -> None:
    from tasks.report.trust_protocol import BAND_FORMS, band_table, learning_curve

    a, b, _ = two_dbs
    dev, sealed = split_development(read_trust_rows([a, b]))
    est = {"alsa-e": (dev.table.estimates["alsa-e"], sealed.inputs.table.estimates["alsa-e"])}
    table, rows = band_table(dev, sealed, est, levels=(0.8, 0.95))
    assert set(table.form) == set(BAND_FORMS) and set(table.level) == {0.8, 0.95}
    shares = table.filter(like="groups with coverage").to_numpy()
    assert ((shares >= 0) & (shares <= 1)).all()
    # every sealed row is scored once per form and level, by a band fit on development rows
    assert len(rows) == len(sealed.inputs) * len(BAND_FORMS) * 2
    wide = rows[(rows.form == "one conformal band")].groupby("level").width_pp.mean()
    assert wide[0.95] >= wide[0.8]
    curve = learning_curve(dev, sealed, "stacking (ridge correction of alsa-e)", [3, 5], draws=2)
    assert list(curve["training groups"]) == [3, 3, 5]
    assert np.isfinite(curve["sealed group-mean MAE (pp)"]).all()


def test_the_reports_auto_is_the_model_calibrate_ships_scored_out_of_group(two_dbs) -> None:
    # the report's "auto" row must be what a user's auto runs (the shrinkage model calibrate
    # records), each group's estimates from a model fit on the other groups only
    from estimators.trust.calibration_artifact import auto_key
    from tasks.report.trust_calibration import (
        AUTO_MODEL_CLASS, CALIBRATED_METHODS, _complete, calibrate_rows, trust_tables,
    )
    from tasks.report.trust_protocol import fit_model

    a, b, _ = two_dbs
    dev, _ = split_development(read_trust_rows([a, b]))
    table, keys = _complete(dev, CALIBRATED_METHODS)
    concept = keys.concept.to_numpy(dtype=bool)
    tables = trust_tables(table, concept=concept, keys=keys)
    shipped = calibrate_rows(dev.subset(np.ones(len(dev), bool)))
    assert shipped.stack_for(CALIBRATED_METHODS).to_dict()["kind"] == "shrink"
    auto = tables["auto"].set_index("dataset")["auto MAE"]
    for group in sorted(set(table.groups.tolist())):
        held = table.groups == group
        others = dev.subset(~held & ~concept)
        model = fit_model(AUTO_MODEL_CLASS, others)  # an independent refit of the same class
        held_rows = held & ~concept
        est = np.clip(model.predict({}, {m: table.estimates[m][held_rows]
                                         for m in CALIBRATED_METHODS}), 0, 1)
        expected = float(np.mean(np.abs(est - table.truth[held_rows])) * 100)
        assert auto[group] == pytest.approx(expected, abs=1e-9), group
    # and the ridge stack, which the report used to score as "auto", gives other numbers
    ridge = trust_tables(table, concept=concept)["auto"].set_index("dataset")["auto MAE"]
    assert not np.allclose(ridge.to_numpy(), auto.reindex(ridge.index).to_numpy())
    assert auto_key(CALIBRATED_METHODS) in shipped.bands


def _brute_widths(errors: np.ndarray, share: float) -> tuple[float, float]:
    """The narrowest symmetric and any-centre bands holding ``share`` of ``errors``, by trying
    every candidate edge (an independent search, not the sorted-order formula)."""
    need = share * len(errors) - 1e-9
    symmetric = min(2 * h for h in np.abs(errors) if np.sum(np.abs(errors) <= h) >= need)
    shortest = min(hi - lo for lo in errors for hi in errors
                   if hi >= lo and np.sum((errors >= lo) & (errors <= hi)) >= need)
    return float(symmetric), float(shortest)


def test_ceilings_are_the_labelled_best_selector_and_narrowest_bands(two_dbs) -> None:
    from tasks.report.trust_protocol import MEMBERS, ceilings

    a, b, _ = two_dbs
    dev, sealed = split_development(read_trust_rows([a, b]))
    auto = (dev.table.estimates["alsa-e"], sealed.inputs.table.estimates["alsa-e"])
    limits = ceilings(dev, sealed, auto).set_index(["side", "rows"])
    sym = next(c for c in limits.columns if c.startswith("symmetric band"))
    short = next(c for c in limits.columns if c.startswith("shortest band"))
    # each side recomputed from its own labels (the sealed ones read here, in the test only)
    for side, truth, table in (("validation", dev.table.truth, dev.table),
                               ("sealed", sealed._truth, sealed.inputs.table)):
        row = limits.loc[(side, "all rows")]
        groups = table.groups
        errors = (table.estimates["alsa-e"] - truth) * 100
        per = pd.DataFrame({m: np.abs(table.estimates[m] - truth) * 100 for m in MEMBERS}
                           ).groupby(groups).mean()
        assert row["best single method (pp)"] == pytest.approx(per.mean().min())
        assert row["each group's best method, with labels (pp)"] == pytest.approx(
            per.min(axis=1).mean())
        assert row["a per-group selector's headroom (pp)"] == pytest.approx(
            per.mean().min() - per.min(axis=1).mean())
        assert (row["each split's best method, with labels (pp)"]
                <= row["each group's best method, with labels (pp)"] + 1e-12)
        mae = np.mean([np.abs(errors[groups == g]).mean() for g in np.unique(groups)])
        widths = np.array([_brute_widths(errors[groups == g], 0.85) for g in np.unique(groups)])
        assert row["auto (pp)"] == pytest.approx(mae)
        assert row[sym] == pytest.approx(widths[:, 0].mean() / mae)
        assert row[short] == pytest.approx(widths[:, 1].mean() / mae)
        assert row[short] <= row[sym] + 1e-12
    # the rows without concept shifts leave the declared ones out (arrests/chile-vote temporal)
    assert (limits.loc[("validation", "without concept shifts"), "groups"]
            <= limits.loc[("validation", "all rows"), "groups"])
    keep = ~dev.concept
    assert dev.concept.any() and keep.any()
    kept = pd.DataFrame({m: np.abs(dev.table.estimates[m] - dev.table.truth)[keep] * 100
                         for m in MEMBERS}).groupby(dev.table.groups[keep]).mean()
    without = limits.loc[("validation", "without concept shifts")]
    assert without["best single method (pp)"] == pytest.approx(kept.mean().min())
    assert without["each group's best method, with labels (pp)"] == pytest.approx(
        kept.min(axis=1).mean())


def test_ceilings_name_a_bad_coverage_or_a_misshapen_auto(two_dbs) -> None:
    from tasks.report.trust_protocol import ceilings

    a, b, _ = two_dbs
    dev, sealed = split_development(read_trust_rows([a, b]))
    auto = (dev.table.estimates["alsa-e"], sealed.inputs.table.estimates["alsa-e"])
    with pytest.raises(ValueError, match=r"'coverage' argument .* \(0, 1\]; got 85"):
        ceilings(dev, sealed, auto, coverage=85)
    with pytest.raises(ValueError, match=r"'auto' argument .* one estimate per sealed row"):
        ceilings(dev, sealed, (auto[0], auto[1][:-1]))
    with pytest.raises(ValueError, match=r"one estimate per development row"):
        ceilings(dev, sealed, (auto[0][:3], auto[1]))
