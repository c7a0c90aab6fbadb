"""One writer at a time: lock conflicts are retried with backoff, then reported clearly."""

from __future__ import annotations

import time

import duckdb
import pytest

from storage import StorageError, StorageLockedError, connect, is_lock_error

from ._proc import start_worker, stop, wait_for


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "bench.duckdb"
    with connect(path) as con:
        con.execute("INSERT INTO schema_meta VALUES ('probe', 'here')")
    return path


def _probe(con) -> list[tuple[str]]:
    return con.sql("SELECT value FROM schema_meta WHERE key = 'probe'").fetchall()


def test_second_writer_is_retried_then_told_clearly(db):
    holder = start_worker("hold", str(db), "rw", "60")
    try:
        wait_for(holder, "ready")
        start = time.monotonic()
        with pytest.raises(StorageLockedError) as info:
            with connect(db, retries=2, backoff_s=0.1):
                pass
        elapsed = time.monotonic() - start
    finally:
        stop(holder)
    message = str(info.value)
    assert str(db) in message and "tried 3 times" in message
    assert "one writer at a time" in message and "Could not set lock" in message
    assert elapsed >= 0.3  # waited 0.1 + 0.2 s between the three attempts
    assert is_lock_error(info.value)
    assert is_lock_error(info.value.__cause__)


def test_writer_gets_in_once_the_holder_leaves(db):
    holder = start_worker("hold", str(db), "rw", "0.5")
    try:
        wait_for(holder, "ready")
        with connect(db, retries=8, backoff_s=0.1) as con:
            assert _probe(con) == [("here",)]
    finally:
        stop(holder)


def test_readers_share_the_file_and_block_writers(db):
    reader = start_worker("hold", str(db), "ro", "60")
    try:
        wait_for(reader, "ready")
        with connect(db, read_only=True, retries=0) as con:
            assert _probe(con) == [("here",)]
        with pytest.raises(StorageLockedError, match="read-write: another process holds its lock"):
            with connect(db, retries=0):
                pass
    finally:
        stop(reader)


def test_read_only_connection_cannot_write(db):
    with connect(db, read_only=True) as con:
        assert _probe(con) == [("here",)]
        with pytest.raises(duckdb.Error, match="read-only"):
            con.execute("DELETE FROM schema_meta")


def test_mixed_modes_in_one_process_are_explained(db):
    with connect(db):
        with pytest.raises(StorageError, match="already open in this process with read_only=False"):
            with connect(db, read_only=True):
                pass


def test_is_lock_error_classification():
    lock = duckdb.IOException('IO Error: Could not set lock on file "x.duckdb": Conflicting lock')
    assert is_lock_error(lock)
    assert not is_lock_error(duckdb.IOException("IO Error: disk full"))
    assert not is_lock_error(ValueError("Could not set lock"))
    try:
        try:
            raise lock
        except duckdb.IOException as exc:
            raise RuntimeError("task failed") from exc
    except RuntimeError as wrapped:
        assert is_lock_error(wrapped)
