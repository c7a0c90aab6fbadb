"""Damage inside the DuckDB file (not only a bad header) is found by reading every block.

The damage is the one found by hand: 256 KB of random bytes written into the middle of
``bench.duckdb`` (``dd if=/dev/urandom of=bench.duckdb bs=4096 seek=$((size/8192)) count=64
conv=notrunc``). Opening the file, ``CHECKPOINT`` and ``PRAGMA storage_info`` all miss it;
:func:`storage.db.verify_database` and ``alsa-bench doctor`` must not.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from storage import RunInfo, SplitInfo, connect, upsert_run, write_split
from storage.db import verify_database
from storage.doctor import examine
from storage.errors import StorageCorruptError

RUN = "fmnist.mlp.s0"


def _database(path: Path, rows: int = 20_000) -> Path:
    """A database whose middle is data blocks: ``rows`` logits of 100 classes."""
    rng = np.random.default_rng(0)
    with connect(path) as con:
        upsert_run(con, RunInfo(RUN, "fmnist", "fmnist", "mlp", 0, 100))
        for name, role in (("val", "val"), ("clean", "target")):
            write_split(con, RUN, SplitInfo(name, role, "clean", "clean", None),
                        rng.normal(size=(rows // 2, 100)).astype(np.float32),
                        rng.integers(0, 100, rows // 2))
    return path


def _dd_damage(path: Path) -> None:
    """What ``dd ... bs=4096 seek=$((size/8192)) count=64 conv=notrunc`` does."""
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek((size // 8192) * 4096)
        f.write(os.urandom(64 * 4096))


def test_a_healthy_database_passes_and_a_missing_one_is_not_damage(tmp_path) -> None:
    db = _database(tmp_path / "bench.duckdb")
    assert verify_database(db) is None
    assert verify_database(tmp_path / "absent.duckdb") is None


def test_random_bytes_in_the_middle_are_one_line_with_the_remedy(tmp_path) -> None:
    db = _database(tmp_path / "bench.duckdb")
    _dd_damage(db)
    before = db.read_bytes()
    with connect(db, read_only=True) as con:  # opening alone does not notice
        con.sql("SELECT count(*) FROM runs").fetchall()
    with pytest.raises(StorageCorruptError) as info:
        verify_database(db)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{db} is damaged and cannot be read as a DuckDB database (")
    assert "checksum" in message
    assert f"move it aside: mv {db} {db}.damaged, then rerun" in message
    assert db.read_bytes() == before  # never written


def test_doctor_finds_internal_damage_and_repair_moves_the_file_aside(tmp_path) -> None:
    home = tmp_path / "state"
    db = _database(home / "bench.duckdb")
    _dd_damage(db)
    before = db.read_bytes()
    report = examine(home)
    assert not report.healthy
    [finding] = report.findings
    assert finding.check == "database" and finding.repairable
    assert "checksum" in finding.problem
    assert "re-ingests the results under results/" in finding.remedy
    assert db.read_bytes() == before

    repaired = examine(home, repair=True)
    assert repaired.healthy and not db.exists()
    [moved] = (home / "quarantine").iterdir()
    assert moved.read_bytes() == before
    assert examine(home).healthy and examine(home).checked["quarantined"] == 1


@pytest.mark.parametrize("bad", [0, -1.5, b"bench.duckdb"])
def test_verify_database_refuses_a_path_that_is_not_a_path(bad) -> None:
    with pytest.raises(TypeError, match=r"^path must be a str or Path"):
        verify_database(bad)
