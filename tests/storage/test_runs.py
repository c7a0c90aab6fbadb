"""The runs table: upsert replaces, lookups, suite filter, validation."""

from __future__ import annotations

from datetime import datetime

import pytest

from storage import RunInfo, connect, get_run, list_runs, upsert_run


@pytest.fixture
def con(tmp_path):
    with connect(tmp_path / "bench.duckdb") as con:
        yield con


def test_upsert_get_and_replace(con):
    stored = upsert_run(con, RunInfo("a.mlp.s0", "toy", "a", "mlp", 0, 3, "abc", "v1", 1.5))
    assert isinstance(stored.created_at, datetime)
    assert get_run(con, "a.mlp.s0") == stored
    again = upsert_run(con, RunInfo("a.mlp.s0", "toy", "a", "mlp", 0, 3, "def", "v2"))
    assert get_run(con, "a.mlp.s0") == again
    assert again.checkpoint_sha256 == "def" and again.train_seconds is None
    assert con.sql("SELECT count(*) FROM runs").fetchall() == [(1,)]


def test_get_missing_is_none(con):
    assert get_run(con, "nope") is None


def test_list_runs_by_suite(con):
    for key, suite in (("b.x.s1", "one"), ("a.x.s0", "one"), ("c.x.s0", "two")):
        upsert_run(con, RunInfo(key, suite, key[0], "x", int(key[-1]), 2))
    assert [r.run_key for r in list_runs(con)] == ["a.x.s0", "b.x.s1", "c.x.s0"]
    assert [r.run_key for r in list_runs(con, "one")] == ["a.x.s0", "b.x.s1"]
    assert list_runs(con, "three") == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"run_key": ""}, "RunInfo.run_key must be a non-empty string"),
        ({"seed": 1.5}, "RunInfo.seed must be an integer"),
        ({"n_classes": 1}, r"RunInfo.n_classes must be an integer >= 2; got 1"),
        ({"train_seconds": float("nan")}, "RunInfo.train_seconds must be a finite number"),
    ],
)
def test_upsert_validates(con, change, message):
    fields = dict(run_key="a.mlp.s0", suite="toy", dataset="a", backbone="mlp", seed=0, n_classes=3)
    fields.update(change)
    with pytest.raises(ValueError, match=message):
        upsert_run(con, RunInfo(**fields))
