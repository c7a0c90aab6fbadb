"""Start ``tests.storage._db_worker`` in a subprocess and wait for its stdout markers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start_worker(*args: str) -> subprocess.Popen[str]:
    """Launch the worker with the repository root importable and one thread per library."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.storage._db_worker", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(proc: subprocess.Popen[str], marker: str, timeout: float = 60.0) -> float:
    """Read lines until one equals ``marker``; return the time it arrived."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == marker:
            return time.monotonic()
        if not line and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"worker exited ({proc.returncode}) before {marker!r}: {err}")
    raise AssertionError(f"worker did not print {marker!r} within {timeout} s")


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill the worker if it still runs and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
