"""A writer killed with SIGKILL mid-write leaves the previous data intact and readable.

A worker process (``tests/storage/_db_worker.py``) rewrites split ``big`` of a run; every version
differs in every row, so a half-written partition would show as a mix of versions or a wrong
row count. Split ``keep``, written before, must come back byte-identical.
"""

from __future__ import annotations

import signal
import sys
import time

import numpy as np
import pytest

from storage import (
    RunInfo,
    SplitInfo,
    connect,
    list_splits,
    read_target_labels,
    read_target_logits,
    upsert_run,
    write_split,
)

from ._db_worker import BIG, version_arrays
from ._proc import start_worker, stop, wait_for

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")

RUN = "crash.run.s0"
N, C = 120_000, 20  # about 10 MB of logits per version


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "bench.duckdb"
    with connect(path) as con:
        upsert_run(con, RunInfo(RUN, "crash", "crash", "mlp", 0, C))
        write_split(con, RUN, SplitInfo("keep", "target", "clean", "clean", None), *_keep())
        write_split(con, RUN, BIG, *version_arrays(N, C, 0))
    return path


def _keep() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(42)
    return rng.normal(size=(500, C)).astype(np.float32), rng.integers(0, C, size=500)


def _stored_version(db) -> int:
    """Check both splits are whole and consistent; return the stored version of 'big'."""
    with connect(db, read_only=True) as con:
        keep_logits, keep_labels = _keep()
        np.testing.assert_array_equal(read_target_logits(con, RUN, "keep"), keep_logits)
        np.testing.assert_array_equal(read_target_labels(con, RUN, "keep"), keep_labels)
        logits = read_target_logits(con, RUN, "big")  # also checks row count == splits.n_samples
        labels = read_target_labels(con, RUN, "big")
        info = {s.split: s for s in list_splits(con, RUN)}["big"]
        assert con.sql("SELECT count(*) FROM logits").fetchall() == [(N + 500,)]
    version = int(round(float(logits[0, 0] - version_arrays(1, C, 0)[0][0, 0])))
    expected_logits, expected_labels = version_arrays(N, C, version)
    np.testing.assert_array_equal(logits, expected_logits)
    np.testing.assert_array_equal(labels, expected_labels)
    assert info.n_samples == N
    assert info.true_accuracy == float(np.mean(expected_logits.argmax(1) == expected_labels))
    return version


def _still_writable(db) -> None:
    with connect(db) as con:
        write_split(con, RUN, SplitInfo("after", "target", "x", "x", None), *_keep())


@pytest.mark.parametrize(("statement", "expected"), [("COMMIT", 0), ("CHECKPOINT", 1)])
def test_kill_around_commit(db, statement, expected):
    """Killed after the INSERT but before COMMIT: old version; right after COMMIT: new version."""
    proc = start_worker("kill-at", str(db), str(N), str(C), statement)
    try:
        wait_for(proc, f"killing at {statement}")
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        stop(proc)
    assert _stored_version(db) == expected
    _still_writable(db)


@pytest.mark.parametrize("fraction", [0.3, 0.8])
def test_kill_during_a_write_loop(db, fraction):
    """SIGKILL at a point inside the third write: version 2, or 3 if its commit won the race."""
    proc = start_worker("loop", str(db), str(N), str(C))
    try:
        wait_for(proc, "begin 2")
        started = time.monotonic()
        wait_for(proc, "done 2")
        duration = time.monotonic() - started
        wait_for(proc, "begin 3")
        time.sleep(fraction * duration)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        stop(proc)
    assert _stored_version(db) in (2, 3)
    _still_writable(db)
