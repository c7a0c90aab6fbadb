"""Schema creation: idempotent, version recorded, other versions refused, contract names kept."""

from __future__ import annotations

import math

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
        "code_version", "train_seconds", "created_at", "compute_mode", "compute_settings",
        "cpu_model", "cpu_flags",
    ],
    "splits": [
        "run_key", "split", "role", "shift_family", "shift", "severity", "n_samples",
        "true_accuracy",
    ],
    "logits": ["run_key", "split", "sample_index", "label", "logits"],
    "estimates": [
        "run_key", "split", "method", "params_json", "estimated_accuracy", "true_accuracy",
        "abs_error", "fit_seconds", "estimate_seconds", "diagnostics_json", "code_version",
        "created_at", "interval_low", "interval_high", "interval_level", "per_class_json",
        "shift_low", "shift_high",
    ],
    "anchors": ["run_key", "method", "anchor_index", "position", "peak", "variance"],
    "report_rows": [
        "suite", "dataset", "backbone", "seed", "shift_family", "shift", "severity", "n_target",
        "method", "estimated_accuracy", "true_accuracy", "abs_error", "run_key", "split",
        "interval_low", "interval_high", "interval_level", "shift_low", "shift_high",
    ],
}

#: The version-1 ``estimates`` table and view, verbatim (before issue 11's interval columns).
V1_DDL = (
    """CREATE TABLE estimates (
        run_key VARCHAR NOT NULL, split VARCHAR NOT NULL, method VARCHAR NOT NULL,
        params_json VARCHAR, estimated_accuracy DOUBLE, true_accuracy DOUBLE, abs_error DOUBLE,
        fit_seconds DOUBLE, estimate_seconds DOUBLE, diagnostics_json VARCHAR,
        code_version VARCHAR, created_at TIMESTAMP, PRIMARY KEY (run_key, split, method))""",
    """CREATE TABLE schema_meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)""",
    """INSERT INTO schema_meta VALUES ('schema_version', '1')""",
    """INSERT INTO estimates VALUES ('r', 'clean', 'ac', '{}', 0.7, 0.75, 0.05, 1.0, 0.1, '{}',
        'v1', NULL)""",
)


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


def test_old_schema_database_is_migrated_and_keeps_its_rows(tmp_path):
    from storage.estimates import EstimateRow, read_estimates, write_estimates

    db = tmp_path / "bench.duckdb"
    con = duckdb.connect(str(db))
    for statement in V1_DDL:
        con.execute(statement)
    con.close()
    # read-only: refused with a message that says how to migrate
    with pytest.raises(SchemaVersionError, match=rf"version 1.*expects {SCHEMA_VERSION}.*writable"):
        with connect(db, read_only=True):
            pass
    with connect(db) as con:  # writable: migrated in place
        assert read_schema_version(con) == SCHEMA_VERSION == 7
        assert "chunk_key" in _columns(con, "monitor_chunks")  # schema 6: the monitor's history
        assert "estimator_key" in _columns(con, "monitor_estimates")
        assert _columns(con, "ingested") == ["sha256", "kind", "run_key", "ingested_at"]
        assert _columns(con, "feature_files") == ["run_key", "split", "role", "sha256",
                                                  "labels_sha256", "n_rows", "dim"]
        for name, columns in CONTRACT_COLUMNS.items():
            assert _columns(con, name) == columns, name
        (old,) = read_estimates(con, "r")
        assert old.estimated_accuracy == 0.7 and old.code_version == "v1"
        assert math.isnan(old.interval_low) and old.per_class_json is None
        write_estimates(con, "r", [EstimateRow(
            "r", "noise", "ac", "{}", 0.6, 0.62, 0.02, 1.0, 0.1, "{}", "v2",
            interval_low=0.55, interval_high=0.65, interval_level=0.9,
            per_class_json='{"estimated": [0.6], "true": [0.62], "count": [3]}',
        )])
        new = [r for r in read_estimates(con, "r") if r.split == "noise"][0]
        assert (new.interval_low, new.interval_high, new.interval_level) == (0.55, 0.65, 0.9)
    with connect(db, read_only=True) as con:  # now current
        assert read_schema_version(con) == SCHEMA_VERSION
