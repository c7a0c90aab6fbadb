"""The report's feature-aware vs logit-only section, against a by-hand computation."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from tasks.report.features import feature_comparison, feature_markdown

METHODS = ("ac", "atc-mc", "alsa-e", "distcs", "aline-s")


def _rows(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    records = []
    for dataset, family, backbone, s, split in itertools.product(
            ("d1", "d2"), ("noise", "clean"), ("mlp", "cnn"), (0, 1), ("a", "b")):
        for method in METHODS:
            records.append({"dataset": dataset, "shift_family": family, "backbone": backbone,
                            "run_key": f"{dataset}.{backbone}.s{s}", "split": f"{family}-{split}",
                            "method": method, "abs_error": float(rng.uniform(0, 0.3))})
    return pd.DataFrame.from_records(records)


def test_each_grouping_matches_a_by_hand_computation():
    rows = _rows()
    tables = feature_comparison(rows)
    assert set(tables) == {"dataset", "family", "backbone"}
    for name, keys in (("dataset", ["dataset"]), ("family", ["dataset", "shift_family"]),
                       ("backbone", ["dataset", "backbone"])):
        table = tables[name]
        for _, got in table.iterrows():
            mask = np.logical_and.reduce([rows[k] == got[k] for k in keys])
            sub = rows[mask]
            mae = {m: 100 * sub.loc[sub["method"] == m, "abs_error"].mean() for m in METHODS}
            best = min(("ac", "atc-mc", "alsa-e"), key=mae.get)
            assert got["best_logit_only"] == best
            assert got["mae"] == pytest.approx(mae[got["method"]], abs=0.006)
            assert got["best_logit_only_mae"] == pytest.approx(mae[best], abs=0.006)
            assert got["alsa_e_mae"] == pytest.approx(mae["alsa-e"], abs=0.006)
            assert got["gain"] == pytest.approx(mae[best] - mae[got["method"]], abs=0.011)
            assert got["n"] == len(sub) // len(METHODS)
        assert sorted(table["method"].unique()) == ["aline-s", "distcs"]


def test_only_rows_every_method_estimated_are_compared():
    rows = _rows()
    # distcs skipped on one run (no features stored): that run's rows leave every column
    gone = (rows["method"] == "distcs") & (rows["run_key"] == "d1.mlp.s0")
    table = feature_comparison(rows[~gone])["dataset"]
    kept = rows[rows["run_key"] != "d1.mlp.s0"]
    d1 = kept[(kept["dataset"] == "d1") & (kept["method"] == "ac")]
    got = table[(table["dataset"] == "d1") & (table["method"] == "distcs")].iloc[0]
    assert got["n"] == len(d1)
    assert got["best_logit_only_mae"] <= 100 * d1["abs_error"].mean() + 0.006


def test_no_feature_method_or_no_logit_method_means_no_section():
    rows = _rows()
    assert feature_comparison(rows[~rows["method"].isin(["distcs", "aline-s"])]) is None
    assert feature_comparison(rows[rows["method"].isin(["distcs", "aline-s"])]) is None


def test_markdown_has_one_line_per_dataset_and_marks_gains():
    rows = _rows()
    rows.loc[rows["method"] == "distcs", "abs_error"] = 0.0  # features win everywhere
    md = feature_markdown(feature_comparison(rows))
    assert md.startswith("## Feature-aware vs logit-only")
    lines = [ln for ln in md.splitlines() if ln.startswith("| d1 |") or ln.startswith("| d2 |")]
    assert len(lines) == 2 + 4 + 4  # datasets, then dataset x family, dataset x backbone
    assert all("**+" in ln for ln in lines[:2])
