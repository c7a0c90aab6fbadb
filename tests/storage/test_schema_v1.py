"""A database written by schema version 1 is migrated in place and read back unchanged.

``fixtures/bench_v1.duckdb`` was written with the version-1 DDL (``fixtures/make_v1_fixture.py``);
the expected rows come from the generator's seeds, not from today's code. Newer files, and files
without a version marker, are refused with a message that says what to do.
"""

from __future__ import annotations

import math
import shutil

import duckdb
import numpy as np
import pytest

from storage import (
    SCHEMA_VERSION,
    SchemaVersionError,
    connect,
    get_run,
    list_splits,
    read_anchors,
    read_estimates,
    read_report_rows,
    read_schema_version,
    read_target_labels,
    read_target_logits,
    read_val,
)

from .fixtures.make_v1_fixture import FIXTURE, RUN_KEY, expected


@pytest.fixture
def v1_copy(tmp_path):
    path = tmp_path / "bench.duckdb"
    shutil.copyfile(FIXTURE, path)
    return path


def _columns(path, table: str) -> list[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return [row[0] for row in con.sql(f"DESCRIBE {table}").fetchall()]
    finally:
        con.close()


def test_the_fixture_is_schema_version_1() -> None:
    con = duckdb.connect(str(FIXTURE), read_only=True)
    try:
        assert read_schema_version(con) == 1
    finally:
        con.close()
    assert "interval_low" not in _columns(FIXTURE, "estimates")


def test_read_only_open_of_v1_is_refused_with_how_to_migrate(v1_copy) -> None:
    before = v1_copy.read_bytes()
    with pytest.raises(SchemaVersionError, match=r"schema version 1; this alsa-bench expects "
                       rf"{SCHEMA_VERSION}\. It migrates the file when it opens it writable"):
        with connect(v1_copy, read_only=True):
            pass
    assert v1_copy.read_bytes() == before  # refused, not half-migrated


def test_v1_is_migrated_in_place_and_reads_the_same_rows(v1_copy) -> None:
    want = expected()
    with connect(v1_copy) as con:  # writable: runs every migration from 1 up
        assert read_schema_version(con) == SCHEMA_VERSION
        run = get_run(con, RUN_KEY)
        splits = {s.split: s for s in list_splits(con, RUN_KEY)}
        val_logits, val_labels = read_val(con, RUN_KEY)
        targets = {name: (read_target_logits(con, RUN_KEY, name),
                          read_target_labels(con, RUN_KEY, name))
                   for name, info in want["splits"].items() if info["role"] == "target"}
        estimates = read_estimates(con, RUN_KEY)
        anchors = read_anchors(con, RUN_KEY, "alsa-g")
        report = read_report_rows(con)

    run_want = want["run"]
    assert (run.suite, run.dataset, run.backbone, run.seed, run.n_classes) == tuple(
        run_want[k] for k in ("suite", "dataset", "backbone", "seed", "n_classes"))
    assert run.checkpoint_sha256 == run_want["checkpoint_sha256"]
    assert set(splits) == set(want["splits"])
    for name, info in want["splits"].items():
        got = splits[name]
        assert (got.role, got.shift_family, got.severity, got.n_samples) == (
            info["role"], info["shift_family"], info["severity"], info["n_samples"])
        assert got.true_accuracy == info["true_accuracy"]
    val = want["splits"]["val"]
    np.testing.assert_array_equal(val_logits, val["logits"])
    np.testing.assert_array_equal(val_labels, val["labels"])
    for name, (logits, labels) in targets.items():
        np.testing.assert_array_equal(logits, want["splits"][name]["logits"])
        np.testing.assert_array_equal(labels, want["splits"][name]["labels"])

    by_key = {(e["split"], e["method"]): e for e in want["estimates"]}
    assert {(e.split, e.method) for e in estimates} == set(by_key)
    for row in estimates:
        ref = by_key[(row.split, row.method)]
        assert row.estimated_accuracy == ref["estimated_accuracy"]
        assert row.true_accuracy == ref["true_accuracy"] and row.abs_error == ref["abs_error"]
        assert row.params_json == ref["params_json"]
        # columns that schema 1 did not have read as "none"
        assert math.isnan(row.interval_low) and math.isnan(row.interval_high)
        assert math.isnan(row.interval_level) and row.per_class_json is None

    positions, peaks, variances = anchors
    np.testing.assert_array_equal(positions, np.stack([a["position"] for a in want["anchors"]]))
    np.testing.assert_array_equal(peaks, [a["peak"] for a in want["anchors"]])
    np.testing.assert_array_equal(variances, [a["variance"] for a in want["anchors"]])

    assert len(report) == len(by_key)
    assert report["interval_low"].isna().all()
    assert sorted(zip(report["split"], report["method"])) == sorted(by_key)

    # migrated in place: the file now carries today's version and columns, opens read-only
    assert {"interval_low", "interval_high", "interval_level", "per_class_json"} <= set(
        _columns(v1_copy, "estimates"))
    with connect(v1_copy, read_only=True) as con:
        assert read_schema_version(con) == SCHEMA_VERSION


def test_migrating_twice_changes_nothing(v1_copy) -> None:
    with connect(v1_copy):
        pass
    with connect(v1_copy) as con:
        first = con.sql("SELECT * FROM estimates ORDER BY split, method").fetchall()
    with connect(v1_copy) as con:
        assert con.sql("SELECT * FROM estimates ORDER BY split, method").fetchall() == first
        assert read_schema_version(con) == SCHEMA_VERSION


@pytest.mark.parametrize("read_only", [False, True])
def test_a_newer_database_is_refused_with_what_to_do(v1_copy, read_only) -> None:
    con = duckdb.connect(str(v1_copy))
    con.execute("UPDATE schema_meta SET value = ? WHERE key = 'schema_version'",
                [str(SCHEMA_VERSION + 1)])
    con.close()
    before = v1_copy.read_bytes()
    with pytest.raises(SchemaVersionError, match=(
        rf"written with schema version {SCHEMA_VERSION + 1}, newer than this alsa-bench's "
        rf"version {SCHEMA_VERSION}\. Upgrade alsa-bench, or point ALSA_BENCH_HOME at another")):
        with connect(v1_copy, read_only=read_only):
            pass
    assert v1_copy.read_bytes() == before


@pytest.mark.parametrize("marker", ["missing-row", "missing-table"])
def test_a_database_without_a_version_marker_is_refused_never_guessed(v1_copy, marker) -> None:
    con = duckdb.connect(str(v1_copy))
    if marker == "missing-row":
        con.execute("DELETE FROM schema_meta WHERE key = 'schema_version'")
    else:
        con.execute("DROP TABLE schema_meta")
    con.close()
    before = v1_copy.read_bytes()
    for read_only in (False, True):
        with pytest.raises(SchemaVersionError, match=(
                r"holds tables or views \(.*runs.*\) but no alsa-bench schema version marker.*"
                r"Move it aside")):
            with connect(v1_copy, read_only=read_only):
                pass
    assert v1_copy.read_bytes() == before


def test_a_non_integer_marker_is_refused(v1_copy) -> None:
    con = duckdb.connect(str(v1_copy))
    con.execute("UPDATE schema_meta SET value = 'one' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(SchemaVersionError, match="schema_version must be an integer; got 'one'"):
        with connect(v1_copy):
            pass
