"""The meta-set map of the score methods: leave-one-corruption-type-out, checked against polyfit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tasks.report.scores import map_scores, read_score_rows, score_correlations


def _rows(run: str = "d.b.s0", method: str = "mano", seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    records = []
    for c, corruption in enumerate(["blur", "noise", "fog", "snow"]):
        for sev in range(1, 4):
            s = 0.9 - 0.1 * sev - 0.03 * c
            records.append(("synthetic", corruption, f"{corruption}-{sev}", s,
                            0.1 + 0.8 * s + rng.normal(0, 0.02)))
    records.append(("label_shift", "dirichlet", "ls-1", 0.55, 0.6))
    records.append(("natural", "v2", "v2", math.nan, 0.5))  # a score that failed
    return pd.DataFrame([
        {"run_key": run, "dataset": "d", "backbone": "b", "seed": seed, "split": split,
         "shift_family": fam, "shift": shift, "method": method, "score": score,
         "true_accuracy": acc}
        for fam, shift, split, score, acc in records
    ])


def test_leave_one_type_out_and_whole_meta_set_match_polyfit():
    rows = _rows()
    out = map_scores(rows)
    meta = rows[rows.shift_family == "synthetic"]
    for _, r in out[out.shift_family == "synthetic"].iterrows():
        rest = meta[meta["shift"] != r["shift"]]
        slope, icpt = np.polyfit(rest.score, rest.true_accuracy, 1)
        assert r["estimated_accuracy"] == pytest.approx(np.clip(slope * r.score + icpt, 0, 1),
                                                        abs=1e-12)
        assert r["map"] == f"leave-{r['shift']}-out"
    slope, icpt = np.polyfit(meta.score, meta.true_accuracy, 1)
    ls = out[out.split == "ls-1"].iloc[0]
    assert ls["estimated_accuracy"] == pytest.approx(slope * 0.55 + icpt, abs=1e-12)
    assert ls["map"] == "all-synthetic"
    assert ls["abs_error"] == pytest.approx(abs(ls["estimated_accuracy"] - 0.6))
    nan_row = out[out.split == "v2"].iloc[0]
    assert math.isnan(nan_row["estimated_accuracy"]) and nan_row["map"] == "no meta-set"


def test_runs_and_methods_are_mapped_apart():
    a, b = _rows("d.b.s0", "mano", 0), _rows("d.b.s1", "mano", 1)
    b["true_accuracy"] = 1.0 - b["true_accuracy"]  # an opposite relation in the other run
    both = map_scores(pd.concat([a, b], ignore_index=True))
    alone = map_scores(a)
    pd.testing.assert_series_equal(
        both[both.run_key == "d.b.s0"]["estimated_accuracy"].reset_index(drop=True),
        alone["estimated_accuracy"].reset_index(drop=True),
    )


def test_without_enough_corruption_types_nothing_is_invented():
    rows = _rows()
    rows = rows[~rows["shift"].isin(["fog", "snow"])]
    out = map_scores(rows)
    assert out["estimated_accuracy"].isna().all()
    assert set(out["map"]) == {"no meta-set"}
    graph = rows.assign(shift_family="temporal")
    assert map_scores(graph)["estimated_accuracy"].isna().all()


def test_correlations_against_scipy():
    from scipy.stats import pearsonr, spearmanr

    out = map_scores(_rows())
    table = score_correlations(out)
    assert len(table) == 1
    row = table.iloc[0]
    ok = out.dropna(subset=["estimated_accuracy"])
    assert row["n_splits"] == len(ok) == 13
    assert row["mae_pp"] == pytest.approx(100 * ok["abs_error"].mean())
    assert row["pearson"] == pytest.approx(
        pearsonr(ok.estimated_accuracy, ok.true_accuracy).statistic)
    resid = ok.true_accuracy - ok.estimated_accuracy
    r2 = 1 - (resid**2).sum() / ((ok.true_accuracy - ok.true_accuracy.mean()) ** 2).sum()
    assert row["r2"] == pytest.approx(r2)
    scored = out.dropna(subset=["score"])
    assert row["spearman_score"] == pytest.approx(
        spearmanr(scored.score, scored.true_accuracy).statistic)


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="rows must be a pandas DataFrame"):
        map_scores([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"missing \['score'\]"):
        map_scores(_rows().drop(columns="score"))
    with pytest.raises(ValueError, match="min_types must be an integer >= 2"):
        map_scores(_rows(), min_types=1)


def test_read_score_rows_reads_the_score_from_diagnostics():
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.execute("CREATE TABLE estimates (run_key VARCHAR, split VARCHAR, method VARCHAR, "
                "diagnostics_json VARCHAR)")
    con.execute("CREATE TABLE report_rows (run_key VARCHAR, dataset VARCHAR, backbone VARCHAR, "
                "seed INTEGER, split VARCHAR, shift_family VARCHAR, shift VARCHAR, "
                "method VARCHAR, true_accuracy DOUBLE)")
    con.execute("INSERT INTO estimates VALUES ('r', 'a-1', 'mano', '{\"score\": 0.25}'), "
                "('r', 'a-2', 'mano', 'not json'), ('r', 'a-1', 'ac', '{}')")
    con.execute("INSERT INTO report_rows VALUES ('r', 'd', 'b', 0, 'a-1', 'synthetic', 'a', "
                "'mano', 0.7), ('r', 'd', 'b', 0, 'a-2', 'synthetic', 'a', 'mano', 0.6), "
                "('r', 'd', 'b', 0, 'a-1', 'synthetic', 'a', 'ac', 0.7)")
    df = read_score_rows(con, ["mano"])
    assert list(df["split"]) == ["a-1", "a-2"]
    assert df["score"].iloc[0] == 0.25 and math.isnan(df["score"].iloc[1])
    assert read_score_rows(con, []).empty
    assert read_score_rows(con, ["mano"], run_keys=["other"]).empty
