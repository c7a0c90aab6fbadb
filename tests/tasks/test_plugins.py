"""Plugins in the registries and in the cache keys (tasks.runtime.plugins, tasks.stages.versions).

The example plugin (``examples/alsa-bench-quantile``) is installed into a temporary site folder
as pip would (:mod:`tests.plugin_site`) and put on ``sys.path``; the registries' collectors are
called on it directly, and its entries are put into the live registries for the version checks
(undone after each test).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path

import pytest

from tasks.runtime.plugins import GROUPS, declared_entry_points, plugin_packages
from tasks.stages.versions import (
    PROJECT_ROOT,
    method_code_version,
    method_files,
    stage_code_version,
    stage_files,
)
from tests.plugin_site import install_distribution, install_example


@pytest.fixture
def site(tmp_path, monkeypatch):
    """The example plugin installed and importable; every cache of plugins forgotten after."""
    folder = install_example(tmp_path / "site")
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    plugin_packages.cache_clear()
    yield folder
    for name in [m for m in sys.modules if m.split(".")[0] == "alsa_bench_quantile"]:
        del sys.modules[name]
    plugin_packages.cache_clear()


@pytest.fixture
def registered(site, monkeypatch):
    """The plugin's estimator, dataset and backbone in the live registries."""
    from estimators import ESTIMATORS
    from tasks.data.datasets import DATASETS
    from tasks.models.backbones import BACKBONES

    estimator = importlib.import_module("alsa_bench_quantile.estimator")
    digits = importlib.import_module("alsa_bench_quantile.digits")
    linear = importlib.import_module("alsa_bench_quantile.linear")
    monkeypatch.setitem(ESTIMATORS, "cq-bin", estimator.ConfidenceQuantile)
    monkeypatch.setitem(DATASETS, "digits", digits.SPECS[0])
    monkeypatch.setitem(BACKBONES, "pixel-linear", linear.SPEC)
    return site


def test_entry_points_are_found_as_pip_installed_them(site) -> None:
    found = {kind: [ep.name for ep in declared_entry_points(kind)] for kind in GROUPS}
    assert "cq-bin" in found["estimators"] and "digits" in found["datasets"]
    assert "pixel-linear" in found["backbones"]
    assert "alsa_bench_quantile" in plugin_packages()
    with pytest.raises(ValueError, match="kind must be one of estimators, datasets, backbones"):
        declared_entry_points("shifts")


def test_the_registries_collect_plugins_after_their_own_members(site) -> None:
    from tasks.data import datasets
    from tasks.models import backbones

    found = datasets._collect()
    assert list(found)[-1] == "digits" and found["digits"].module == "alsa_bench_quantile.digits"
    bb = backbones._collect()
    assert bb["pixel-linear"].datasets == ("digits",)


def test_a_plugin_reusing_a_key_is_one_warning_and_skipped(tmp_path, monkeypatch, caplog):
    folder = install_distribution(
        tmp_path / "dup", "dup-plugin", "1.0",
        {"alsa_bench.datasets": {"again": "dup_data"}},
        files={"dup_data.py": "from tasks.data.datasets.fmnist import SPECS\n"},
    )
    monkeypatch.syspath_prepend(str(folder))
    from tasks.data import datasets

    with caplog.at_level(logging.WARNING, logger="tasks.runtime.plugins"):
        found = datasets._collect()
    assert "fmnist" in found and found["fmnist"].module == "tasks.data.datasets.fmnist"
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("alsa_bench.datasets plugin 'again' (dup_data, from dup-plugin)")
    assert line.endswith("reuses the dataset key 'fmnist'; skipped it.")
    sys.modules.pop("dup_data", None)


def _rel(paths: list[Path], base: Path) -> set[str]:
    return {p.relative_to(base).as_posix() for p in paths if p.is_relative_to(base)}


def test_a_plugin_method_is_keyed_on_its_own_files(registered) -> None:
    site = registered
    files = method_files("cq-bin")
    assert {site / "alsa_bench_quantile" / "estimator.py",
            site / "alsa_bench_quantile" / "__init__.py"} <= set(files)
    assert site / "alsa_bench_quantile" / "digits.py" not in files  # not imported by it
    assert "estimators/methods/ac.py" in _rel(files, PROJECT_ROOT)  # the band's panel
    before = {m: method_code_version(m) for m in ("cq-bin", "ac", "alsa-g")}
    source = site / "alsa_bench_quantile" / "estimator.py"
    source.write_text(source.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    after = {m: method_code_version(m) for m in ("cq-bin", "ac", "alsa-g")}
    assert after["cq-bin"] != before["cq-bin"]
    assert after["ac"] == before["ac"] and after["alsa-g"] == before["alsa-g"]


def test_a_plugin_dataset_and_backbone_are_keyed_on_their_own_files(registered) -> None:
    site = registered
    train = stage_files("train", dataset="digits", backbone="pixel-linear")
    assert {site / "alsa_bench_quantile" / "digits.py",
            site / "alsa_bench_quantile" / "linear.py"} <= set(train)
    mlp = stage_files("extract", dataset="digits", backbone="mlp")
    assert site / "alsa_bench_quantile" / "linear.py" not in mlp
    assert "tasks/models/backbones/image.py" in _rel(mlp, PROJECT_ROOT)
    # installing the plugin moved no key of the project's own runs
    fm = stage_files("train", dataset="fmnist", backbone="mlp")
    assert not any(p.is_relative_to(site) for p in fm)
    key = stage_code_version("train", dataset="digits", backbone="pixel-linear")
    mlp_key = stage_code_version("train", dataset="digits", backbone="mlp")
    linear = site / "alsa_bench_quantile" / "linear.py"
    linear.write_text(linear.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    os.utime(linear, ns=(linear.stat().st_atime_ns, linear.stat().st_mtime_ns + 10**9))
    assert stage_code_version("train", dataset="digits", backbone="pixel-linear") != key
    assert stage_code_version("train", dataset="digits", backbone="mlp") == mlp_key


def test_the_plan_and_the_catalog_give_a_plugin_backbone_its_datasets(registered) -> None:
    from tasks.catalog import dataset_status
    from tasks.plan import make_plan

    plan = make_plan("digits")
    assert plan.backbones == ("mlp", "pixel-linear")
    assert plan.run_keys == ["digits.mlp.s0", "digits.pixel-linear.s0"]
    assert dataset_status("digits").backbones == ("mlp", "pixel-linear")
    assert "pixel-linear" not in make_plan("fmnist").backbones
