"""Schema creation: idempotent, version recorded, other versions refused, contract names kept."""

from __future__ import annotations

import duckdb
import pytest

from storage import (
    SCHEMA_VERSION,
    SchemaVersionError,
    connect,
    ensure_schema,
    read_schema_version,
)
from storage.schema import TABLES, VIEWS

CONTRACT_COLUMNS = {
    "schema_meta": ["key", "value"],
    "runs": [
        "run_key", "suite", "dataset", "backbone", "seed", "n_classes", "checkpoint_sha256",
        "code_version", "train_seconds", "created_at",
    ],
    "splits": [
        "run_key", "split", "role", "shift_family", "shift", "severity", "n_samples",
        "true_accuracy",
    ],
    "logits": ["run_key", "split", "sample_index", "label", "logits"],
    "estimates": [
        "run_key", "split", "method", "params_json", "estimated_accuracy", "true_accuracy",
        "abs_error", "fit_seconds", "estimate_seconds", "diagnostics_json", "code_version",
        "created_at",
    ],
    "anchors": ["run_key", "method", "anchor_index", "position", "peak", "variance"],
    "report_rows": [
        "suite", "dataset", "backbone", "seed", "shift_family", "shift", "severity", "n_target",
        "method", "estimated_accuracy", "true_accuracy", "abs_error", "run_key", "split",
    ],
}


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    rows = con.sql(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position",
        params=[table],
    ).fetchall()
    return [name for (name,) in rows]


def test_connect_creates_folder_schema_and_version(tmp_path):
    db = tmp_path / "nested" / "bench.duckdb"
    with connect(db) as con:
        assert read_schema_version(con) == SCHEMA_VERSION
        for name, columns in CONTRACT_COLUMNS.items():
            assert _columns(con, name) == columns, name
    assert db.is_file()


def test_default_path_follows_state_home(state_home):
    with connect() as con:
        con.sql("SELECT count(*) FROM runs").fetchall()
    assert (state_home / "bench.duckdb").is_file()


def test_ensure_schema_is_idempotent_and_keeps_data(tmp_path):
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        con.execute("INSERT INTO schema_meta VALUES ('note', 'kept')")
        ensure_schema(con)
        ensure_schema(con)
    with connect(db) as con:
        ensure_schema(con)
        assert con.sql("SELECT value FROM schema_meta WHERE key = 'note'").fetchall() == [("kept",)]
        versions = con.sql("SELECT count(*) FROM schema_meta WHERE key = 'schema_version'")
        assert versions.fetchall() == [(1,)]
        objects = {
            name
            for (name,) in con.sql(
                "SELECT table_name FROM duckdb_tables() UNION ALL "
                "SELECT view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        }
        assert set(TABLES + VIEWS) <= objects


def test_missing_object_is_recreated(tmp_path):
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        con.execute("DROP VIEW report_rows")
    with connect(db) as con:
        assert _columns(con, "report_rows") == CONTRACT_COLUMNS["report_rows"]


@pytest.mark.parametrize("read_only", [False, True])
def test_newer_schema_version_is_refused(tmp_path, read_only):
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        con.execute(
            "UPDATE schema_meta SET value = ? WHERE key = 'schema_version'",
            [str(SCHEMA_VERSION + 1)],
        )
    message = rf"version {SCHEMA_VERSION + 1}.*newer.*{SCHEMA_VERSION}"
    with pytest.raises(SchemaVersionError, match=message):
        with connect(db, read_only=read_only):
            pass


def test_garbled_schema_version_is_refused(tmp_path):
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        con.execute("UPDATE schema_meta SET value = 'two' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="must be an integer; got 'two'"):
        with connect(db):
            pass


def test_in_memory_connection_gets_schema():
    con = duckdb.connect(":memory:")
    assert read_schema_version(con) is None
    ensure_schema(con)
    assert read_schema_version(con) == SCHEMA_VERSION
    con.close()


def test_read_only_missing_file_is_explained(tmp_path):
    with pytest.raises(FileNotFoundError, match="No benchmark database"):
        with connect(tmp_path / "absent.duckdb", read_only=True):
            pass


@pytest.mark.parametrize("kwargs", [{"retries": -1}, {"retries": 1.5}, {"backoff_s": -0.1}])
def test_connect_rejects_bad_retry_settings(tmp_path, kwargs):
    with pytest.raises(ValueError, match="retries|backoff_s"):
        with connect(tmp_path / "x.duckdb", **kwargs):
            pass
