"""One owner per state folder: a second holder fails in one line or waits; SIGKILL frees it.

A subprocess takes :func:`storage.lock.state_lock` and prints ``locked``; it releases when it
reads a line on stdin. Every step is synchronised through those pipes, never by sleeping.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from storage.errors import StateBusyError, StorageError
from storage.lock import (
    clear_stale_lock_record,
    lock_path,
    read_lock_record,
    stale_lock_record,
    state_lock,
)

ROOT = Path(__file__).resolve().parents[2]

_HOLDER = """
import os
import sys
from storage.lock import state_lock
with state_lock(os.environ["LOCK_TEST_FOLDER"], wait=0, purpose="run"):
    print("locked", flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""


def _start_holder(folder: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, "run", "--suite", "fmnist"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "LOCK_TEST_FOLDER": str(folder)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()
    if line.strip() != "locked":
        proc.kill()
        raise AssertionError(f"holder did not lock: {line!r} {proc.stderr.read()}")
    return proc


def _release(proc: subprocess.Popen[str]) -> None:
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "released"
    proc.wait(timeout=30)


def _reap(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def holder(tmp_path):
    proc = _start_holder(tmp_path / "state")
    yield proc
    _reap(proc)


def test_the_holder_records_who_it_is(tmp_path, holder) -> None:
    record = read_lock_record(tmp_path / "state")
    assert record is not None
    assert record.pid == holder.pid and record.purpose == "run"
    assert record.command.endswith("run --suite fmnist")
    assert stale_lock_record(tmp_path / "state") is None  # held, so not stale


def test_second_holder_fails_at_once_with_one_line(tmp_path, holder) -> None:
    calls: list[str] = []
    with pytest.raises(StateBusyError) as info:
        with state_lock(tmp_path / "state", wait=0, purpose="report", on_wait=calls.append):
            pytest.fail("the lock was taken twice")
    message = str(info.value)
    assert isinstance(info.value, StorageError)
    assert "\n" not in message and calls == []
    assert message.startswith(f"state folder {tmp_path / 'state'} is in use by pid {holder.pid} (`")
    assert "run --suite fmnist`, since " in message
    assert message.endswith("; wait for it with --wait SECONDS, or use another ALSA_BENCH_HOME")


def test_a_bounded_wait_says_so_then_fails_with_the_same_line(tmp_path, holder) -> None:
    calls: list[str] = []
    with pytest.raises(StateBusyError, match=rf"in use by pid {holder.pid} .*\(waited 0.2 s\)"):
        with state_lock(tmp_path / "state", wait=0.2, purpose="run", on_wait=calls.append):
            pytest.fail("the lock was taken twice")
    assert calls == [f"waiting for {holder.pid} on {tmp_path / 'state'}…"]


def test_a_waiter_gets_the_lock_when_the_holder_releases(tmp_path, holder) -> None:
    waiting = threading.Event()
    got: list[int] = []

    def waiter() -> None:
        with state_lock(tmp_path / "state", wait=None, purpose="run",
                        on_wait=lambda line: waiting.set()) as lock:
            got.append(lock.record.pid)

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(timeout=60), "the waiter never said it was waiting"
    assert got == []  # still held by the subprocess
    _release(holder)
    thread.join(timeout=60)
    assert not thread.is_alive() and got == [os.getpid()]
    assert read_lock_record(tmp_path / "state") is None  # cleared on release


def test_a_sigkilled_holder_frees_the_lock_and_leaves_a_stale_record(tmp_path, holder) -> None:
    folder = tmp_path / "state"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    stale = stale_lock_record(folder)
    assert stale is not None and stale.pid == holder.pid
    with state_lock(folder, wait=0, purpose="doctor") as lock:  # not blocked by the record
        assert lock.stale == stale
        assert read_lock_record(folder).pid == os.getpid()
    assert stale_lock_record(folder) is None and read_lock_record(folder) is None


def test_clearing_a_stale_record_keeps_the_file_and_never_touches_a_held_lock(
    tmp_path, holder
) -> None:
    folder = tmp_path / "state"
    assert clear_stale_lock_record(folder) is None  # held: untouched
    assert read_lock_record(folder).pid == holder.pid
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    assert clear_stale_lock_record(folder).pid == holder.pid
    assert lock_path(folder).is_file() and lock_path(folder).read_bytes() == b""


def test_the_lock_is_released_when_the_block_raises(tmp_path) -> None:
    with pytest.raises(KeyError):
        with state_lock(tmp_path, purpose="run"):
            raise KeyError("boom")
    with state_lock(tmp_path, purpose="run") as lock:
        assert lock.stale is None


@pytest.mark.parametrize("wait", [-1, "5", float("nan"), True])
def test_bad_wait_is_refused(tmp_path, wait) -> None:
    with pytest.raises(ValueError, match="wait must be a number of seconds >= 0 or None; got"):
        with state_lock(tmp_path, wait=wait, purpose="run"):
            pass


def test_reports_live_in_the_state_folder_unless_moved(tmp_path, monkeypatch) -> None:
    from storage.paths import reports_dir

    monkeypatch.setenv("ALSA_BENCH_HOME", str(tmp_path / "a"))
    monkeypatch.delenv("ALSA_BENCH_REPORTS", raising=False)
    assert reports_dir() == tmp_path / "a" / "reports"
    monkeypatch.setenv("ALSA_BENCH_HOME", str(tmp_path / "b"))
    assert reports_dir() == tmp_path / "b" / "reports"  # two folders, two report trees
    monkeypatch.setenv("ALSA_BENCH_REPORTS", str(tmp_path / "elsewhere"))
    assert reports_dir() == tmp_path / "elsewhere"


def test_a_stale_record_is_left_for_the_caller_to_report(tmp_path, holder, caplog) -> None:
    """The record found is handed to the caller (``StateLock.stale``), which says it once in its
    own words; the lock itself logs it below WARNING, so an unconfigured ``logging`` (whose
    last-resort handler prints warnings to stderr) does not print it a second time."""
    import logging

    folder = tmp_path / "state"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    with (caplog.at_level(logging.DEBUG, logger="storage.lock"),
          state_lock(folder, wait=0, purpose="run") as lock):
        assert lock.stale is not None and lock.stale.pid == holder.pid
    records = [r for r in caplog.records if r.name == "storage.lock"]
    assert records and all(r.levelno < logging.WARNING for r in records)
    assert str(holder.pid) in records[0].getMessage()
