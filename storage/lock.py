"""One owner per state folder: an exclusive ``flock`` on ``<state>/.lock`` for a whole command.

DuckDB already allows one writing process per file, but a second ``alsa-bench run`` on the same
folder would still race on Prefect's cache records, checkpoints and reports, and would learn
about the first only from a traceback. :func:`state_lock` makes the rule explicit: a command
takes ``fcntl.flock(LOCK_EX)`` on ``<folder>/.lock`` before it touches anything and holds it to
the end; after locking it writes an *owner record* (JSON: pid, host, command, purpose, start
time) into the file so that a second command can say who holds the folder::

    from storage.lock import state_lock

    with state_lock(state_dir(), wait=0, purpose="run"):
        ...                                   # the whole command

A second holder gets :class:`~storage.errors.StateBusyError` with one line (``wait=0``), or
waits with one "waiting for <pid> on <folder>…" line (``wait > 0`` seconds, ``None`` forever).

The operating system releases an ``flock`` when its process dies, SIGKILL included, so a lock
is never left behind. The owner record may be: a record in the file while nobody holds the lock
is *stale* (its process was killed before it could clear it). It is reported
(:attr:`StateLock.stale`, :func:`stale_lock_record`) and overwritten, never waited on.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import StateBusyError

__all__ = [
    "LOCK_FILE",
    "LockRecord",
    "StateLock",
    "clear_stale_lock_record",
    "lock_path",
    "read_lock_record",
    "stale_lock_record",
    "state_lock",
]

logger = logging.getLogger(__name__)

#: Name of the lock file inside the state folder.
LOCK_FILE = ".lock"
#: Seconds between two attempts while waiting for the lock.
POLL_SECONDS = 0.1
_COMMAND_CHARS = 60


@dataclass(frozen=True)
class LockRecord:
    """Who holds (or held) a state folder: the JSON written into ``<state>/.lock``.

    Attributes
    ----------
    pid : int
        Process id of the holder.
    host : str
        Host name of the holder (a folder on shared storage may be locked from elsewhere).
    command : str
        The holder's command line, e.g. ``alsa-bench run --suite fmnist``.
    purpose : str
        What the holder does with the folder (``run``, ``report``, ``doctor``...).
    started_at : float
        When it took the lock, seconds since the epoch.
    """

    pid: int
    host: str
    command: str
    purpose: str
    started_at: float

    @property
    def since(self) -> str:
        """Local wall-clock time the lock was taken, ``HH:MM:SS``."""
        return time.strftime("%H:%M:%S", time.localtime(self.started_at))

    def describe(self) -> str:
        """``pid N (`command`, since HH:MM:SS)``, the part of a message naming the holder."""
        return f"pid {self.pid} (`{self.command}`, since {self.since})"


@dataclass(frozen=True)
class StateLock:
    """The lock held by :func:`state_lock`.

    Attributes
    ----------
    path : Path
        The lock file.
    record : LockRecord
        This process's owner record, as written into the file.
    stale : LockRecord or None
        The record found in the file when the lock was taken: a previous holder that died
        (killed) before clearing it; None when the file was clean.
    """

    path: Path
    record: LockRecord
    stale: LockRecord | None


def lock_path(folder: str | os.PathLike[str]) -> Path:
    """The lock file of state folder ``folder``: ``<folder>/.lock``."""
    return Path(folder) / LOCK_FILE


def _command_line() -> str:
    argv = list(sys.argv) or ["python"]
    argv[0] = Path(argv[0]).name or argv[0]
    text = " ".join(argv)
    return text if len(text) <= _COMMAND_CHARS else text[: _COMMAND_CHARS - 1] + "…"


def _parse_record(text: str) -> LockRecord | None:
    """An owner record from the lock file's text; None for an empty or unreadable file."""
    if not text.strip():
        return None
    try:
        data = json.loads(text)
        return LockRecord(
            pid=int(data["pid"]), host=str(data["host"]), command=str(data["command"]),
            purpose=str(data["purpose"]), started_at=float(data["started_at"]),
        )
    except (ValueError, TypeError, KeyError):
        return None


def _read_fd(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def read_lock_record(folder: str | os.PathLike[str]) -> LockRecord | None:
    """The owner record in ``<folder>/.lock`` (held or stale), or None when there is none.

    Parameters
    ----------
    folder : str or path-like
        A state folder.

    Returns
    -------
    LockRecord or None
    """
    path = lock_path(folder)
    try:
        return _parse_record(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return None


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def stale_lock_record(folder: str | os.PathLike[str]) -> LockRecord | None:
    """The record of a holder that died without clearing it, or None.

    A record is stale when the file holds one but nobody holds the lock (the OS released it
    when the holder died). A folder whose lock is held, or whose file holds no record, has no
    stale record. Calling this from a process that itself holds the lock returns None.

    Parameters
    ----------
    folder : str or path-like
        A state folder.

    Returns
    -------
    LockRecord or None
    """
    path = lock_path(folder)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        if not _try_lock(fd):
            return None
        try:
            return _parse_record(_read_fd(fd))
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def clear_stale_lock_record(folder: str | os.PathLike[str]) -> LockRecord | None:
    """Empty ``<folder>/.lock`` if it holds a stale record; return the record cleared.

    The file itself stays (removing a lock file while another process may be opening it would
    let two processes lock two different files). A held lock is never touched.

    Parameters
    ----------
    folder : str or path-like
        A state folder.

    Returns
    -------
    LockRecord or None
        The stale record that was cleared; None when there was none.
    """
    path = lock_path(folder)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        if not _try_lock(fd):
            return None
        try:
            record = _parse_record(_read_fd(fd))
            if record is not None:
                os.ftruncate(fd, 0)
                os.fsync(fd)
            return record
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _busy_message(folder: Path, holder: LockRecord | None, waited: float | None) -> str:
    who = f"by {holder.describe()}" if holder is not None else "by another process"
    after = f" (waited {waited:g} s)" if waited else ""
    return (
        f"state folder {folder} is in use {who}{after}; wait for it with --wait SECONDS, "
        "or use another ALSA_BENCH_HOME"
    )


def _check_wait(wait: float | None) -> float | None:
    if wait is None:
        return None
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0:
        raise ValueError(f"wait must be a number of seconds >= 0 or None; got {wait!r}.")
    return float(wait)


@contextmanager
def state_lock(
    folder: str | os.PathLike[str],
    *,
    wait: float | None = 0,
    purpose: str,
    on_wait: Callable[[str], object] = print,
) -> Iterator[StateLock]:
    """Hold the state folder exclusively for the duration of a ``with`` block.

    Takes ``fcntl.flock(LOCK_EX)`` on ``<folder>/.lock`` (creating the folder and the file),
    then writes this process's :class:`LockRecord` into it; on exit clears the record and
    releases the lock. A process killed inside the block loses the lock at once (the OS
    releases it) and leaves a stale record, which the next holder reports and overwrites.

    Parameters
    ----------
    folder : str or path-like
        The state folder (:func:`storage.paths.state_dir`).
    wait : float or None, default 0
        Seconds to wait for another holder: 0 fails at once, ``None`` waits forever.
    purpose : str
        What this command does with the folder (``run``, ``report``, ``doctor``), recorded.
    on_wait : callable, default print
        Called once with ``"waiting for <pid> on <folder>…"`` when the lock is held by another
        process and ``wait`` is not 0.

    Yields
    ------
    StateLock
        The lock file, this process's record, and the stale record found (if any).

    Raises
    ------
    StateBusyError
        If another process holds the lock and ``wait`` seconds passed (at once for 0), with one
        line naming the folder, the holder (pid, command, start time) and what to do.
    ValueError
        If ``wait`` is negative or not a number, or ``purpose`` is empty.
    """
    limit = _check_wait(wait)
    if not isinstance(purpose, str) or not purpose.strip():
        raise ValueError(f"purpose must be a non-empty string; got {purpose!r}.")
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    path = lock_path(root)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _try_lock(fd):
            holder = _parse_record(_read_fd(fd))
            if limit == 0:
                raise StateBusyError(_busy_message(root, holder, None))
            pid = holder.pid if holder is not None else "another process"
            on_wait(f"waiting for {pid} on {root}…")
            start = time.monotonic()
            while not _try_lock(fd):
                if limit is not None and time.monotonic() - start >= limit:
                    raise StateBusyError(_busy_message(root, _parse_record(_read_fd(fd)), limit))
                time.sleep(POLL_SECONDS)
        stale = _parse_record(_read_fd(fd))
        if stale is not None:
            # info, not warning: the caller reports it (StateLock.stale) in its own words, and
            # an unconfigured logging's last-resort handler would print it a second time
            logger.info(
                "state folder %s: stale lock record of %s (it died without releasing); "
                "taking the folder over", root, stale.describe(),
            )
        record = LockRecord(
            pid=os.getpid(), host=socket.gethostname(), command=_command_line(),
            purpose=purpose, started_at=time.time(),
        )
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(asdict(record)).encode("utf-8"))
        os.fsync(fd)
        try:
            yield StateLock(path=path, record=record, stale=stale)
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
