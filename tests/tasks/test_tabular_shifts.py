"""Tabular shift families: which rows each selects, severities that only get worse, label-shift
priors, group shares, natural splits, all on a pool built here."""

from __future__ import annotations

import types

import numpy as np
import pytest

from tasks.data.datasets import DATASETS
from tasks.data.families import split_rng
from tasks.data.shifts.label_shift import dirichlet_priors
from tasks.data.shifts.tabular import (
    MISSING_RATES,
    NOISE_SCALES,
    SWAP_RATES,
    corrupt_missing,
    corrupt_noise,
    kmeans_labels,
    quantile_rows,
    subpop_rows,
)
from tasks.data.spec import TargetPool
from tasks.data.tables import Table
from tasks.data.targets import generate_split, target_splits

LEVELS = (("f", "m"), ("n", "s", "e", "w"))


def _pool(n_clean: int = 900, n_natural: int = 200) -> TargetPool:
    rng = np.random.default_rng(0)
    n = n_clean + n_natural
    num = np.column_stack([rng.normal(40, 10, n), rng.exponential(1000, n), rng.normal(size=n)])
    cat = np.column_stack([rng.integers(0, 2, n), rng.integers(0, 4, n)]).astype(np.int64)
    labels = (num[:, 0] + 5 * rng.normal(size=n) > 40).astype(np.int64) + (cat[:, 1] == 3)
    groups = np.r_[np.zeros(n_clean, np.int64), np.ones(n_natural // 2, np.int64),
                   np.full(n_natural - n_natural // 2, 2, np.int64)]
    table = Table(num, cat, ("age", "income", "z"), ("sex", "region"), LEVELS)
    return TargetPool(table, labels, 3, groups, (0,), (1, 2))


@pytest.fixture
def tiny_tabular(monkeypatch: pytest.MonkeyPatch) -> str:
    from tasks.data.spec import DatasetSpec

    spec = DatasetSpec(
        name="tiny-tab", suite="tiny-tab", description="test", modality="tabular", n_classes=3,
        class_names=("a", "b", "c"), input_shape=(9,),
        target_families=("clean", "synthetic", "label_shift", "subpopulation", "temporal",
                         "covariate"),
        stage=lambda root: [], raw_files=lambda root: [], load_source=lambda root: None,
        load_target_pool=lambda root: _pool(),
        natural_targets=(("year-2001", "2001", 1), ("year-2002", "2002", 2)),
        shift_params={"covariate_columns": ("age",), "subpop_column": "sex",
                      "subpop_levels": ("m",)},
    )
    monkeypatch.setitem(DATASETS, "tiny-tab", spec)
    return "tiny-tab"


def _split(dataset: str, name: str):
    split = next(s for s in target_splits(dataset) if s.name == name)
    return generate_split(dataset, split, _pool())


def test_the_splits_of_a_tabular_dataset(tiny_tabular: str) -> None:
    names = [s.name for s in target_splits(tiny_tabular)]
    assert names[:7] == ["clean", "noise-1", "noise-2", "noise-3", "missing-1", "missing-2",
                         "missing-3"]
    assert {"subpop-sex=m-75", "subpop-sex=m-100", "year-2001", "year-2002",
            "cov-age-top50", "cov-age-top25", "cov-age-bottom25", "cluster-1", "cluster-2",
            "cluster-3", "label_shift-a0.3-d1", "label_shift-a5-d2"} <= set(names)
    x, y = _split(tiny_tabular, "clean")
    assert len(x) == 900 and np.array_equal(y, _pool().labels[:900])


def test_covariate_splits_select_by_the_columns_quantile(tiny_tabular: str) -> None:
    age = _pool().samples.numeric[:900, 0]
    for name, keep in (("cov-age-top50", age >= np.quantile(age, 0.5)),
                       ("cov-age-top25", age >= np.quantile(age, 0.75)),
                       ("cov-age-bottom25", age <= np.quantile(age, 0.25))):
        x, _ = _split(tiny_tabular, name)
        assert np.array_equal(np.sort(x.numeric[:, 0]), np.sort(age[keep])), name
    values = np.array([3.0, np.nan, 1.0, 2.0])
    assert quantile_rows(values, "bottom", 0.0).tolist() == [2]
    with pytest.raises(ValueError, match="every value is missing"):
        quantile_rows(np.array([np.nan]), "top", 0.5)


def test_clusters_partition_the_clean_pool(tiny_tabular: str) -> None:
    parts = [_split(tiny_tabular, f"cluster-{k}")[0] for k in (1, 2, 3)]
    sizes = [len(p) for p in parts]
    assert sum(sizes) == 900 and sizes == sorted(sizes, reverse=True) and min(sizes) > 50
    two_blobs = np.r_[np.zeros((30, 2)), np.full((10, 2), 5.0)]
    labels = kmeans_labels(two_blobs, 2, np.random.default_rng(1))
    assert labels.tolist() == [0] * 30 + [1] * 10  # the larger cluster is 0


def test_noise_and_missing_values_grow_with_the_severity() -> None:
    table = _pool().samples.take(np.arange(900))
    changed, missing = [], []
    for s in (1, 2, 3):
        noisy = corrupt_noise(table, s, np.random.default_rng(7))
        diff = noisy.numeric - table.numeric
        ratio = np.std(diff, axis=0) / np.std(table.numeric, axis=0)
        np.testing.assert_allclose(ratio, NOISE_SCALES[s - 1], rtol=0.1)
        swapped = noisy.categorical != table.categorical
        changed.append(swapped)
        holes = corrupt_missing(table, s, np.random.default_rng(7))
        cells = np.r_[np.isnan(holes.numeric).ravel(), (holes.categorical < 0).ravel()]
        assert abs(cells.mean() - MISSING_RATES[s - 1]) < 0.02
        missing.append(cells)
        # a swap draws a uniform level, so a quarter of the region swaps keep their level
        assert swapped[:, 1].mean() == pytest.approx(SWAP_RATES[s - 1] * 3 / 4, abs=0.03)
    for lo, hi in zip(changed, changed[1:]):
        assert not (lo & ~hi).any()  # nested: a cell changed at s is changed at s + 1
    for lo, hi in zip(missing, missing[1:]):
        assert not (lo & ~hi).any()
    with pytest.raises(ValueError, match="severity must be an integer in 1..3"):
        corrupt_noise(table, 4, np.random.default_rng(0))


def test_synthetic_splits_keep_rows_and_labels(tiny_tabular: str) -> None:
    clean, y = _split(tiny_tabular, "clean")
    for name in ("noise-2", "missing-3"):
        x, labels = _split(tiny_tabular, name)
        assert len(x) == len(clean) and np.array_equal(labels, y)
    assert _split(tiny_tabular, "missing-3")[0].missing_fraction() > 0.45


def test_label_shift_honours_the_dirichlet_priors(tiny_tabular: str) -> None:
    split = next(s for s in target_splits(tiny_tabular) if s.name == "label_shift-a1-d2")
    x, y = generate_split(tiny_tabular, split, _pool())
    priors = dirichlet_priors(3, 1.0, split_rng(tiny_tabular, split.name))
    share = np.bincount(y, minlength=3) / y.size
    np.testing.assert_allclose(share, priors, atol=1.5 / y.size + 1e-9)
    assert len(x) == y.size <= 1000


def test_subpopulation_splits_have_the_declared_share(tiny_tabular: str) -> None:
    male = LEVELS[0].index("m")
    for name, share in (("subpop-sex=m-75", 0.75), ("subpop-sex=m-100", 1.0)):
        x, _ = _split(tiny_tabular, name)
        got = float(np.mean(x.categorical[:, 0] == male))
        assert got == pytest.approx(share, abs=1.0 / len(x)), name
    rows = subpop_rows(np.r_[np.ones(10, bool), np.zeros(90, bool)], 0.5, np.random.default_rng(0))
    assert rows.size == 20 and (rows < 10).sum() == 10
    with pytest.raises(ValueError, match="share must be in"):
        subpop_rows(np.ones(3, bool), 0.0, np.random.default_rng(0))


def test_natural_splits_are_the_rows_of_their_period(tiny_tabular: str) -> None:
    pool = _pool()
    for name, group in (("year-2001", 1), ("year-2002", 2)):
        x, y = _split(tiny_tabular, name)
        idx = np.flatnonzero(pool.subgroups == group)
        assert np.array_equal(x.numeric, pool.samples.numeric[idx])
        assert np.array_equal(y, pool.labels[idx])


def test_a_family_without_its_parameters_says_which(monkeypatch: pytest.MonkeyPatch,
                                                    tiny_tabular: str) -> None:
    import dataclasses

    spec = dataclasses.replace(DATASETS[tiny_tabular], shift_params={})
    monkeypatch.setitem(DATASETS, tiny_tabular, spec)
    with pytest.raises(ValueError,
                       match=r"needs shift_params\['subpop_column'\]; its shift_params have \[\]"):
        target_splits(tiny_tabular)
    bad = types.SimpleNamespace(samples=np.zeros((3, 2)))
    from tasks.data.shifts.tabular import _table

    with pytest.raises(ValueError, match="needs a tabular target pool"):
        _table(bad, "clean")
