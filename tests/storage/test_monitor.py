"""The monitor's history in DuckDB: one transaction per chunk, estimates made once, supersession,
realized accuracy joined in, the view, the Parquet export, migration and the doctor."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from storage.db import connect
from storage.monitor import (
    HISTORY_COLUMNS,
    MonitorChunk,
    MonitorEstimate,
    Realized,
    estimated_pairs,
    export_history,
    mark_current,
    read_history,
    stored_chunks,
    stream_references,
    write_chunk,
    write_realized,
)
from storage.schema import SCHEMA_VERSION, read_schema_version

V1_FIXTURE = Path(__file__).parent / "fixtures" / "bench_v1.duckdb"


def chunk(key: str = "k1", name: str = "day-1.npz", n_rows: int = 100,
          stream: str = "/prod", chunking: str = "file") -> MonitorChunk:
    return MonitorChunk(key, stream, chunking, name, name, datetime(2026, 3, 1),
                        datetime(2026, 3, 1, 23), n_rows, 3, "c" * 64)


def estimate(key: str = "k1", est: str = "e1", acc: float = 0.8, alert: bool = False,
             reference: str = "r1") -> MonitorEstimate:
    return MonitorEstimate(key, est, "ac", reference, "{}", "cal", acc, acc - 0.05,
                           acc + 0.05, acc - 0.02, acc + 0.02, 0.9, 0.85, '{"s": 1}', None,
                           alert, '[{"kind": "below"}]' if alert else None, "run-1", 0.01)


@pytest.fixture
def con(tmp_path):
    with connect(tmp_path / "bench.duckdb") as c:
        yield c


def test_schema_has_the_monitor_tables_and_view(con):
    assert read_schema_version(con) == SCHEMA_VERSION == 7
    names = {r[0] for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert {"monitor_chunks", "monitor_estimates"} <= names
    view = [c[0] for c in con.sql("DESCRIBE monitor_history").fetchall()]
    assert view == list(HISTORY_COLUMNS)


def test_chunk_and_estimates_are_written_together_and_read_back(con):
    assert write_chunk(con, chunk(), [estimate()]) == 1
    [row] = read_history(con, stream="/prod")
    assert row["chunk_name"] == "day-1.npz" and row["estimated_accuracy"] == 0.8
    assert row["shift_low"] == pytest.approx(0.75) and row["is_current"]
    assert row["realized_accuracy"] is None and row["band_covers_realized"] is None
    assert stored_chunks(con, "/prod", "file")["k1"].realized_accuracy is None
    assert estimated_pairs(con, "/prod", "file") == {("k1", "e1")}
    assert stream_references(con, "/prod") == {"r1"}


def test_an_estimate_is_made_once_never_overwritten(con):
    write_chunk(con, chunk(), [estimate(acc=0.8)])
    assert write_chunk(con, chunk(), [estimate(acc=0.1)]) == 0
    [row] = read_history(con)
    assert row["estimated_accuracy"] == 0.8


def test_a_failed_write_leaves_nothing(con):
    bad = estimate()
    bad = MonitorEstimate(**{**bad.__dict__, "params_json": None})  # NOT NULL violated
    with pytest.raises(duckdb.Error):
        write_chunk(con, chunk(), [estimate(est="e0"), bad])
    assert con.execute("SELECT count(*) FROM monitor_chunks").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM monitor_estimates").fetchone() == (0,)


def test_estimates_of_another_chunk_are_refused(con):
    with pytest.raises(ValueError, match="must belong to chunk 'k1'"):
        write_chunk(con, chunk(), [estimate(key="k2")])


def test_new_content_of_a_name_supersedes_the_old_which_is_kept(con):
    write_chunk(con, chunk("k1"), [estimate("k1")])
    write_chunk(con, chunk("k2"), [estimate("k2", acc=0.6)])
    current = read_history(con)
    assert [r["chunk_key"] for r in current] == ["k2"]
    every = read_history(con, current_only=False)
    assert {r["chunk_key"]: r["superseded_by"] for r in every} == {"k1": "k2", "k2": None}
    mark_current(con, chunk("k1"))  # the old file came back
    assert [r["chunk_key"] for r in read_history(con)] == ["k1"]


def test_realized_accuracy_reaches_the_chunk_and_every_estimate(con):
    write_chunk(con, chunk(), [estimate(est="e1", acc=0.8), estimate(est="e2", acc=0.9)])
    write_realized(con, "k1", Realized(0.82, 100, "labels/day-1.npz"))
    rows = read_history(con)
    assert [r["realized_accuracy"] for r in rows] == [0.82, 0.82]
    assert {r["estimator_key"]: r["band_covers_realized"] for r in rows} == {"e1": True,
                                                                            "e2": False}
    assert rows[0]["realized_minus_estimate"] == pytest.approx(0.02)
    # an estimate added later (a new method) gets the realized accuracy at once
    write_chunk(con, chunk(), [estimate(est="e3", acc=0.7)])
    assert {r["estimator_key"]: r["realized_accuracy"] for r in read_history(con)}["e3"] == 0.82


def test_realized_accuracy_is_checked(con):
    write_chunk(con, chunk(), [estimate()])
    with pytest.raises(ValueError, match="fraction in"):
        write_realized(con, "k1", Realized(1.2, 10, "x"))
    with pytest.raises(KeyError, match="no monitor chunk"):
        write_realized(con, "nope", Realized(0.5, 10, "x"))


def test_non_finite_values_are_stored_as_null(con):
    empty = MonitorEstimate(**{**estimate().__dict__, "estimated_accuracy": math.nan})
    write_chunk(con, chunk(n_rows=0), [empty])
    [row] = read_history(con)
    assert row["estimated_accuracy"] is None and row["n_rows"] == 0


def test_history_filters_and_order(con):
    write_chunk(con, MonitorChunk("b", "/prod", "file", "b", "b", datetime(2026, 3, 2), None,
                                  5, 3, "x"), [estimate("b")])
    write_chunk(con, MonitorChunk("a", "/prod", "file", "a", "a", datetime(2026, 3, 1), None,
                                  5, 3, "y"), [estimate("a", reference="r2")])
    write_chunk(con, chunk("c", stream="/other"), [estimate("c")])
    assert [r["chunk_key"] for r in read_history(con, stream="/prod")] == ["a", "b"]
    assert [r["chunk_key"] for r in read_history(con, reference_sha256="r2")] == ["a"]
    assert stream_references(con, "/prod") == {"r1", "r2"}


def test_timezone_aware_periods_are_stored_as_utc(con):
    aware = MonitorChunk("k1", "/prod", "file", "n", "n",
                         datetime(2026, 3, 1, 12, tzinfo=UTC), None, 1, 3, "z")
    write_chunk(con, aware, [estimate()])
    assert read_history(con)[0]["period_start"] == datetime(2026, 3, 1, 12)


def test_export_is_atomic_and_readable(con, tmp_path):
    write_chunk(con, chunk(), [estimate(alert=True)])
    target = export_history(con, tmp_path / "out" / "history.parquet")
    table = pq.read_table(target)
    assert table.column_names == list(HISTORY_COLUMNS)
    assert table.column("alert").to_pylist() == [True]
    assert [p.name for p in target.parent.iterdir()] == ["history.parquet"]  # no temp left


def test_a_v1_database_migrates_to_the_monitor_schema(tmp_path):
    db = tmp_path / "bench.duckdb"
    db.write_bytes(V1_FIXTURE.read_bytes())
    with connect(db) as con:
        assert read_schema_version(con) == SCHEMA_VERSION
        write_chunk(con, chunk(), [estimate()])
        assert len(read_history(con)) == 1


def test_doctor_accepts_a_state_folder_with_monitor_history(tmp_path):
    from storage.doctor import examine

    with connect(tmp_path / "bench.duckdb") as con:
        write_chunk(con, chunk(), [estimate()])
        write_realized(con, "k1", Realized(0.8, 100, "x"))
    report = examine(tmp_path)
    assert report.healthy, [f.problem for f in report.findings]
    assert report.checked["schema_version"] == SCHEMA_VERSION
