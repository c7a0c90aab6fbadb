"""A damaged DuckDB file is reported in one line naming it and the remedy, and never touched."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from storage import RunInfo, SplitInfo, connect, read_target_logits, upsert_run, write_split
from storage.db import corruption_reason
from storage.errors import StorageCorruptError, StorageError

RUN = "damaged.mlp.s0"


def _real_database(path) -> bytes:
    """A real benchmark database with about 2 MB of logits; returns its bytes."""
    rng = np.random.default_rng(0)
    with connect(path) as con:
        upsert_run(con, RunInfo(RUN, "damaged", "damaged", "mlp", 0, 10))
        write_split(con, RUN, SplitInfo("clean", "target", "clean", "clean", None),
                    rng.normal(size=(50_000, 10)).astype(np.float32),
                    rng.integers(0, 10, size=50_000))
        con.execute("CHECKPOINT")
    return path.read_bytes()


def _random_bytes(path) -> None:
    path.write_bytes(np.random.default_rng(1).integers(0, 256, size=100_000, dtype=np.uint8)
                     .tobytes())


def _truncated(path) -> None:
    data = _real_database(path)
    path.write_bytes(data[: len(data) // 2])


def _empty(path) -> None:
    path.write_bytes(b"")


def _flipped_block(path) -> None:
    """A real database with a run of bytes inverted in the middle of a data block."""
    data = bytearray(_real_database(path))
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_random_bytes, _truncated, _empty, _flipped_block])
@pytest.mark.parametrize("read_only", [False, True])
def test_damaged_file_is_one_line_with_the_remedy_and_left_untouched(
    tmp_path, damage, read_only
) -> None:
    path = tmp_path / "bench.duckdb"
    damage(path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StorageCorruptError) as info:
        with connect(path, read_only=read_only, retries=0) as con:
            read_target_logits(con, RUN, "clean")  # a damaged block may only show when read
    message = str(info.value)
    assert isinstance(info.value, StorageError)
    assert "\n" not in message
    assert message.startswith(f"{path} is damaged and cannot be read as a DuckDB database (")
    assert f"move it aside: mv {path} {path}.damaged, then rerun" in message
    assert "rebuilds it from cached checkpoints/results" in message
    assert "`alsa-bench doctor` says more" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.duckdb"]  # no WAL, no copy


def test_a_healthy_database_still_reads_and_other_errors_are_not_called_damage(tmp_path) -> None:
    import duckdb

    path = tmp_path / "bench.duckdb"
    _real_database(path)
    with connect(path, read_only=True) as con:
        assert read_target_logits(con, RUN, "clean").shape == (50_000, 10)
        with pytest.raises(duckdb.CatalogException):
            con.execute("SELECT * FROM no_such_table")
    assert corruption_reason(duckdb.CatalogException("Table x does not exist")) is None
    assert corruption_reason(ValueError("Could not read enough bytes")) is None


def test_a_short_read_of_another_file_is_not_called_damage_of_the_database(tmp_path) -> None:
    import duckdb

    other = tmp_path / "results.parquet"
    other.write_bytes(b"PAR1" + b"\0" * 100)
    error = duckdb.IOException(f'IO Error: Could not read enough bytes from file "{other}"')
    assert corruption_reason(error, tmp_path / "bench.duckdb") is None
    assert corruption_reason(error) is not None  # no file given: the message alone decides
