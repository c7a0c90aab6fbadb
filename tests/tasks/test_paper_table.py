"""``tasks.report.paper_table``: the paper's published MAE and the "Reproducing the paper" section."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from estimators import available_estimators
from tasks.data.datasets import DATASETS
from tasks.report.paper_table import (
    COST,
    PAPER_DATASETS,
    PAPER_ROWS,
    ours_mae,
    paper_mae,
    reproduce_section,
)


def _row(label: str):
    [row] = [r for r in PAPER_ROWS if r.label == label]
    return row


def test_published_numbers_spot_checks_against_the_paper():
    # values read off the paper's Table 1 / Table 4 and Table 2 / Table 5 by hand
    assert _row("CIFAR10 / CIFAR-10.1").mae["alsa-g"] == "1.22"
    assert _row("CIFAR10 / CIFAR-10.1").std["alsa-g"] == "1.97"
    assert _row("CIFAR10 / CIFAR-10.2").mae["alsa-e"] == "0.61"
    assert _row("A-WILDS / Subpop2").mae["doc"] == "2.65"
    assert _row("Office-31 / domain").mae["atc-ne"] == "41.55"
    assert _row("Office-31 / domain").std["atc-ne"] == "33.25"
    assert _row("MNIST / MNIST-M").mae["im"] == "16.29"
    assert _row("ogbn-arxiv / GIN").mae["cot"] == "30.79"
    assert _row("ogbn-arxiv / GCN").mae["gnnevaluator"] == "10.59"
    assert _row("ogbn-arxiv / AVG.").std["cot"] == "10.1"
    long = paper_mae()
    assert len(long) == 10 * 7 + 5 * 8
    assert long.loc[(long["row"] == "ImageNet / ImageNetv2") & (long["method"] == "cot"),
                    "mae"].item() == pytest.approx(9.57)
    assert set(paper_mae("office31")["dataset"]) == {"office31"}


def test_every_column_is_one_of_our_estimators_in_the_paper_order():
    ours = set(available_estimators()) | {"gnnevaluator"}
    for row in PAPER_ROWS:
        assert set(row.methods) <= ours
        assert row.methods[-2:] == ("alsa-e", "alsa-g") and row.methods[3 + (
            row.table == "Table 2")] == "atc-ne"
    assert PAPER_DATASETS == ("cifar10", "cifar100", "amazon-wilds", "waterbirds", "imagenet",
                              "mnist", "office31", "ogbn-arxiv")
    assert set(PAPER_DATASETS) <= set(COST)


def _rows() -> pd.DataFrame:
    """cifar10 report rows for 2 seeds: two natural splits, one synthetic, one clean."""
    records = []
    errors = {  # (split, family) -> abs error of alsa-g for seed 0, seed 1
        ("cifar10.1", "natural"): (0.01, 0.03),
        ("cifar10.2", "natural"): (0.10, 0.20),
        ("gaussian_noise-3", "synthetic"): (0.04, 0.06),
        ("clean", "clean"): (0.50, 0.50),
    }
    for (split, family), per_seed in errors.items():
        for seed, err in enumerate(per_seed):
            for backbone in ("resnet18",):
                records.append({
                    "suite": "cifar10", "dataset": "cifar10", "backbone": backbone,
                    "seed": seed, "shift_family": family, "split": split, "shift": split,
                    "method": "alsa-g", "estimated_accuracy": 0.8 + err,
                    "true_accuracy": 0.8, "abs_error": err,
                })
    records.append({**records[0], "dataset": "cifar100", "abs_error": 0.9})  # other dataset
    return pd.DataFrame.from_records(records)


def test_ours_mae_pools_the_matching_splits_per_seed():
    rows = _rows()
    got = ours_mae(rows, _row("CIFAR10 / CIFAR-10.1"))
    mean, std, n = got["alsa-g"]
    # seed means 1.0 and 3.0 pp -> mean 2.0, sample std sqrt(2)
    assert (mean, n) == (pytest.approx(2.0), 2) and std == pytest.approx(math.sqrt(2.0))
    assert set(got) == {"alsa-g"}
    mean, _, _ = ours_mae(rows, _row("CIFAR10 / CIFAR-10C"))["alsa-g"]
    assert mean == pytest.approx(5.0)
    assert ours_mae(rows, _row("CIFAR100 / CIFAR-100C")) == {}  # cifar100 row is clean
    # without abs_error the error comes from the accuracies
    mean, _, _ = ours_mae(rows.drop(columns="abs_error"), _row("CIFAR10 / CIFAR-10.2"))["alsa-g"]
    assert mean == pytest.approx(15.0)
    one_seed = rows[rows["seed"] == 0]
    mean, std, n = ours_mae(one_seed, _row("CIFAR10 / CIFAR-10.2"))["alsa-g"]
    assert (mean, n) == (pytest.approx(10.0), 1) and math.isnan(std)


def test_ours_mae_filters_backbones_for_the_graph_rows():
    rows = pd.DataFrame.from_records([
        {"dataset": "ogbn-arxiv", "backbone": b, "seed": 0, "shift_family": "temporal",
         "split": f"year-{y}", "method": "alsa-g", "abs_error": e}
        for b, e in (("gcn", 0.01), ("gat", 0.03)) for y in (2015, 2016)
    ])
    assert ours_mae(rows, _row("ogbn-arxiv / GCN"))["alsa-g"][0] == pytest.approx(1.0)
    assert ours_mae(rows, _row("ogbn-arxiv / AVG."))["alsa-g"][0] == pytest.approx(2.0)
    assert ours_mae(rows, _row("ogbn-arxiv / SAGE")) == {}
    with pytest.raises(ValueError, match=r"missing \['seed'\]"):
        ours_mae(rows.drop(columns="seed"), _row("ogbn-arxiv / GCN"))


def test_section_without_rows_has_every_dataset_and_empty_ours():
    text = reproduce_section(None)
    assert text.startswith("## Reproducing the paper\n") and text.endswith("\n")
    for dataset in PAPER_DATASETS:
        assert f"### `{dataset}`" in text
        assert f"`alsa-bench run --suite {dataset}`" in text
    assert "| CIFAR-10.1 | paper | 4.82 (0.95) |" in text
    assert "| | ours | — | — | — | — | — | — | — |" in text
    assert "(estimate)" in text and "GNNEval" in text


def test_section_fills_ours_and_survives_unregistered_datasets(monkeypatch):
    for name in [n for n in ("cifar10", "cifar100") if n in DATASETS]:
        monkeypatch.delitem(DATASETS, name)
    text = reproduce_section(_rows())
    block = text.split("### `cifar10`")[1].split("### ")[0]
    assert "not registered in this build yet" in block
    assert "`alsa-bench fetch cifar10`" in block
    assert "| | ours (2 seeds) | — | — | — | — | — | — | 2.00 (1.41) |" in block
    assert "| | ours (2 seeds) | — | — | — | — | — | — | 15.00 (7.07) |" in block
    with pytest.raises(ValueError, match="rows must be a pandas DataFrame"):
        reproduce_section([1, 2])  # type: ignore[arg-type]


def test_section_lists_a_further_online_image_dataset(monkeypatch):
    spec = dataclasses.replace(DATASETS["fmnist"], name="newset", suite="newset", online=True)
    monkeypatch.setitem(DATASETS, "newset", spec)
    text = reproduce_section()
    assert "### `newset`" in text
    assert "The paper reports no row for this dataset." in text
    assert "expected cost: not estimated" in text


def test_cost_table_lists_every_online_suite_with_measured_or_not_run_stages() -> None:
    from tasks.data.datasets import DATASETS
    from tasks.report.paper_table import (
        DRY_RUNS,
        GPU_RUNS,
        PROTOCOL_RUNS_2CORES,
        cost_table,
        reproduce_section,
    )

    online_suites = {spec.suite for spec in DATASETS.values() if spec.online}
    assert {row[0] for row in DRY_RUNS} == online_suites
    for suite, _, stages, rss, _, _ in DRY_RUNS:
        if stages.startswith("not run"):
            assert rss == "—"
            continue
        seconds = [float(x) for x in stages.split(" / ")]
        assert len(seconds) == 5 and all(s >= 0 for s in seconds)
        assert rss.split()[1] == "GiB"
    table = "\n".join(cost_table())
    assert table.count("| not measured | not measured |") == len(
        [row for row in DRY_RUNS if row[0] not in PROTOCOL_RUNS_2CORES])
    for suite, cell in PROTOCOL_RUNS_2CORES.items():
        assert suite in online_suites and f"| {cell} | not measured |" in table
    for suite, (recipe, stages, rss) in GPU_RUNS.items():
        assert suite in online_suites
        seconds = [float(x) for x in stages.split(" / ")]
        assert len(seconds) == 5 and all(s >= 0 for s in seconds)
        assert f"| `{suite}` |" in table and f"| {recipe}, {stages}, {rss} |" in table
    assert table.count("| not run | not measured | not measured |") == len(
        [row for row in DRY_RUNS if row[0] not in GPU_RUNS and row[0] not in PROTOCOL_RUNS_2CORES])
    assert "### What the protocol costs" in reproduce_section()
