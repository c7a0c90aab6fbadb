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
        ({"compute_mode": "pinned"},
         r"RunInfo.compute_mode must be one of reproducible, fast or None; got 'pinned'"),
        ({"compute_settings": "[1, 2]"}, "RunInfo.compute_settings must be a JSON object"),
        ({"compute_settings": "{not json"}, "RunInfo.compute_settings must be a JSON object"),
        ({"cpu_model": 3}, "RunInfo.cpu_model must be a string or None; got 3"),
    ],
)
def test_upsert_validates(con, change, message):
    fields = dict(run_key="a.mlp.s0", suite="toy", dataset="a", backbone="mlp", seed=0, n_classes=3)
    fields.update(change)
    with pytest.raises(ValueError, match=message):
        upsert_run(con, RunInfo(**fields))


def test_the_row_keeps_how_and_where_the_run_was_computed(con):
    settings = '{"aten_cpu_capability": "avx2", "mkl_cbwr": "COMPATIBLE", "threads": 2}'
    stored = upsert_run(con, RunInfo(
        "a.mlp.s0", "toy", "a", "mlp", 0, 3, "abc", "v1", 1.5, compute_mode="reproducible",
        compute_settings=settings, cpu_model="AMD EPYC", cpu_flags="sse4_2 avx avx2 fma"))
    back = get_run(con, "a.mlp.s0")
    assert back == stored
    assert (back.compute_mode, back.compute_settings, back.cpu_model, back.cpu_flags) == (
        "reproducible", settings, "AMD EPYC", "sse4_2 avx avx2 fma")
    # a row without them (written before schema 7, or by a caller that has none) reads as None
    upsert_run(con, RunInfo("b.mlp.s0", "toy", "b", "mlp", 0, 3))
    old = get_run(con, "b.mlp.s0")
    assert (old.compute_mode, old.compute_settings, old.cpu_model, old.cpu_flags) == (None,) * 4
