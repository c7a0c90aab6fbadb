"""A separate process that writes to or holds a DuckDB file, for crash and lock tests.

Usage (the repository root on ``PYTHONPATH``)::

    python -m tests.storage._db_worker loop DB N C           # rewrite split 'big' forever
    python -m tests.storage._db_worker kill-at DB N C STMT   # SIGKILL itself as STMT starts
    python -m tests.storage._db_worker hold DB rw|ro SECONDS # hold a connection, then exit

Markers on stdout (flushed): ``begin V`` / ``done V`` around each write of version ``V``, and
``ready`` once a held connection is open.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import numpy as np

from storage import SplitInfo, connect, write_split

BIG = SplitInfo("big", "target", "synthetic", "noise", 1)


def version_arrays(n: int, c: int, version: int) -> tuple[np.ndarray, np.ndarray]:
    """The arrays of version ``version`` of split 'big': each version differs in every row."""
    base = np.random.default_rng(0).normal(size=(n, c)).astype(np.float32)
    return base + np.float32(version), (np.arange(n) + version) % c


def say(text: str) -> None:
    print(text, flush=True)


class KillAt:
    """Connection proxy that SIGKILLs the process when a statement starting with ``prefix`` runs."""

    def __init__(self, inner: Any, prefix: str) -> None:
        self.inner = inner
        self.prefix = prefix

    def execute(self, query: str, *args: Any) -> Any:
        if query.startswith(self.prefix):
            say(f"killing at {self.prefix}")
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner.execute(query, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def main(argv: list[str]) -> None:
    mode, db = argv[0], argv[1]
    if mode == "loop":
        n, c = int(argv[2]), int(argv[3])
        with connect(db) as con:
            for version in range(1, 10_000):
                logits, labels = version_arrays(n, c, version)
                say(f"begin {version}")
                write_split(con, "crash.run.s0", BIG, logits, labels)
                say(f"done {version}")
    elif mode == "kill-at":
        n, c, prefix = int(argv[2]), int(argv[3]), argv[4]
        with connect(db) as con:
            logits, labels = version_arrays(n, c, 1)
            say("begin 1")
            write_split(KillAt(con, prefix), "crash.run.s0", BIG, logits, labels)
            say("done 1")
    elif mode == "hold":
        read_only, seconds = argv[2] == "ro", float(argv[3])
        with connect(db, read_only=read_only, retries=0):
            say("ready")
            time.sleep(seconds)
    else:
        raise SystemExit(f"unknown mode {mode!r}; expected loop, kill-at or hold")


if __name__ == "__main__":
    main(sys.argv[1:])
