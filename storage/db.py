"""Opening the benchmark's DuckDB file: one writer at a time, lock errors retried, then explained.

DuckDB lets **one process** open a database file read-write, or many processes open it
read-only while nobody writes. A second process that tries anyway gets
``IO Error: Could not set lock on file ...``. :func:`connect` retries that with exponential
backoff and then raises :class:`~storage.errors.StorageLockedError`; :func:`is_lock_error` is the
predicate a Prefect ``retry_condition_fn`` needs.

A file that exists but is not a readable DuckDB database (random bytes, a truncated copy, an
empty file, a block whose checksum fails) raises :class:`~storage.errors.StorageCorruptError`:
one line naming the file and the remedy (move it aside and rerun; the pipeline rebuilds the
database from its cached checkpoints and results). The file is never deleted or overwritten.

Inside one process, DuckDB shares one database instance between connections to the same file;
mixing ``read_only=True`` and ``read_only=False`` connections to one file in one process is
refused by DuckDB, so pipeline stages use writable connections and keep them short, and
``read_only=True`` is for reports and outside readers::

    from storage import connect

    with connect() as con:                       # .alsa-bench/bench.duckdb, schema created
        con.sql("SELECT count(*) FROM runs").fetchall()
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import duckdb

from . import paths
from .errors import StorageCorruptError, StorageError, StorageLockedError
from .schema import check_schema_version, ensure_schema

logger = logging.getLogger(__name__)

_LOCK_MESSAGE = "Could not set lock"
_CONFIG_MESSAGE = "different configuration"
#: Fragments of DuckDB's messages for a file that is not (or no longer) a readable database.
_CORRUPT_MESSAGES: tuple[str, ...] = (
    "not a valid DuckDB database file",
    "Could not read enough bytes",
    "Corrupt database file",
    "does not match stored checksum",
    "Failed to read database header",
)


def is_lock_error(exc: BaseException) -> bool:
    """Whether ``exc`` means another process holds the database file's lock.

    True for :class:`~storage.errors.StorageLockedError` and for DuckDB's own
    ``IOException: Could not set lock on file ...``, also when either is the cause or context of
    ``exc``; usable in a Prefect ``retry_condition_fn``.

    Parameters
    ----------
    exc : BaseException
        The exception to classify.

    Returns
    -------
    bool
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, StorageLockedError):
            return True
        if isinstance(current, duckdb.IOException) and _LOCK_MESSAGE in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def corruption_reason(exc: BaseException, path: str | Path | None = None) -> str | None:
    """DuckDB's message when ``exc`` (or its cause/context) says the file is damaged, else None.

    Parameters
    ----------
    exc : BaseException
        The exception to classify.
    path : str or Path, optional
        The database file. When given, a message counts only if it names this file or a
        database (a short read of a Parquet file read through the same connection is not
        damage of the database).

    Returns
    -------
    str or None
        The first line of DuckDB's message, or None for any other error.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, duckdb.Error):
            text = str(current)
            if any(fragment in text for fragment in _CORRUPT_MESSAGES) and (
                path is None or str(path) in text or "database" in text
            ):
                return text.strip().splitlines()[0] if text.strip() else text
        current = current.__cause__ or current.__context__
    return None


def corrupt_error(path: str | Path, reason: str) -> StorageCorruptError:
    """The one-line :class:`StorageCorruptError` for damaged database file ``path``.

    Parameters
    ----------
    path : str or Path
        The database file.
    reason : str
        What DuckDB said (one line).

    Returns
    -------
    StorageCorruptError
    """
    name = str(path)
    return StorageCorruptError(
        f"{name} is damaged and cannot be read as a DuckDB database ({reason}); "
        f"move it aside: mv {name} {name}.damaged, then rerun — the pipeline rebuilds it from "
        "cached checkpoints/results; `alsa-bench doctor` says more"
    )


def _open(path: Path, read_only: bool, retries: int, backoff_s: float) -> duckdb.DuckDBPyConnection:
    """Open ``path``, retrying lock conflicts ``retries`` times with doubling waits."""
    attempt = 0
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if not is_lock_error(exc):
                reason = corruption_reason(exc)
                if reason is not None:
                    raise corrupt_error(path, reason) from None
                raise
            if attempt >= retries:
                mode = "read-only" if read_only else "read-write"
                raise StorageLockedError(
                    f"Could not open {str(path)!r} {mode}: another process holds its lock "
                    f"(tried {attempt + 1} times over about "
                    f"{_total_wait(attempt, backoff_s):.1f} s). "
                    "DuckDB allows one writer at a time, or many readers while nobody writes; "
                    "wait for the other run to finish (or stop it) and retry. "
                    f"DuckDB said: {exc}"
                ) from exc
            wait = backoff_s * (2**attempt)
            logger.info(
                "Database %s is locked by another process; retry %d/%d in %.2f s",
                path,
                attempt + 1,
                retries,
                wait,
            )
            time.sleep(wait)
            attempt += 1
        except duckdb.ConnectionException as exc:
            if _CONFIG_MESSAGE not in str(exc):
                raise
            raise StorageError(
                f"{str(path)!r} is already open in this process with "
                f"read_only={not read_only}; DuckDB refuses a second connection to the same file "
                f"with read_only={read_only}. Close the other connection first, or open this one "
                "with the same read_only setting."
            ) from exc


def _total_wait(attempts: int, backoff_s: float) -> float:
    return cast(float, sum(backoff_s * (2**i) for i in range(attempts)))


@contextmanager
def connect(
    path: str | Path | None = None,
    *,
    read_only: bool = False,
    retries: int = 5,
    backoff_s: float = 0.5,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the benchmark's DuckDB file for the duration of a ``with`` block.

    A writable connection creates the parent folder and the schema (idempotently); a read-only
    one only checks that the file's schema version is one this code reads. The connection is
    closed, and the file's lock released, when the block ends.

    Parameters
    ----------
    path : str or Path, optional
        Database file; default :func:`storage.paths.db_path` (``$ALSA_BENCH_HOME/bench.duckdb``).
    read_only : bool, default False
        Open read-only (reports, outside readers). The file must exist.
    retries : int, default 5
        How many times to retry when another process holds the lock.
    backoff_s : float, default 0.5
        First wait between retries in seconds; each further wait doubles (0.5, 1, 2, 4, 8 s).

    Yields
    ------
    duckdb.DuckDBPyConnection

    Raises
    ------
    StorageLockedError
        If the lock is still held after every retry.
    StorageCorruptError
        If the file exists but is not a readable DuckDB database, when it is opened or when a
        statement inside the block meets a damaged block (the file is left as it is).
    FileNotFoundError
        If ``read_only`` and the file does not exist.
    SchemaVersionError
        If the file was written by another schema version.
    ValueError
        If ``retries`` or ``backoff_s`` is negative.
    """
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an integer >= 0; got {retries!r}.")
    if not backoff_s >= 0:
        raise ValueError(f"backoff_s must be a number >= 0; got {backoff_s!r}.")
    db = Path(path) if path is not None else paths.db_path()
    if read_only:
        if not db.exists():
            raise FileNotFoundError(
                f"No benchmark database at {str(db)!r}; run a pipeline stage first, or point "
                "ALSA_BENCH_HOME at the state folder that holds bench.duckdb."
            )
    else:
        db.parent.mkdir(parents=True, exist_ok=True)
    con = _open(db, read_only, retries, backoff_s)
    try:
        if read_only:
            check_schema_version(con)
        else:
            ensure_schema(con)
        yield con
    except duckdb.Error as exc:
        reason = corruption_reason(exc, db)
        if reason is None:
            raise
        raise corrupt_error(db, reason) from None
    finally:
        try:
            con.close()
        except duckdb.Error as exc:  # closing a damaged file may fail too: keep the first error
            logger.warning("closing %s failed: %s", db, exc)


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Run the block in one transaction: COMMIT when it ends, ROLLBACK if it raises.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Connection with no transaction open (DuckDB has no nested transactions).

    Yields
    ------
    duckdb.DuckDBPyConnection
        The same connection.
    """
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error as rollback_exc:  # the original error is the one worth raising
            logger.warning("ROLLBACK failed after an error: %s", rollback_exc)
        raise
    con.execute("COMMIT")


def _quoted(name: str) -> str:
    """An identifier read from DuckDB's catalog, double-quoted for SQL."""
    return '"' + name.replace('"', '""') + '"'


def scan_every_block(con: duckdb.DuckDBPyConnection) -> int:
    """Read every stored value of every table once, so DuckDB checks every data block.

    DuckDB verifies a block's checksum when it reads the block; opening a file, ``CHECKPOINT``
    and ``PRAGMA storage_info`` read only the header and metadata and miss a damaged data block
    (measured: 256 KB of random bytes written into the middle of the file pass all three).
    ``max(hash(column))`` of every column forces every value to be read and cannot be answered
    from statistics.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection (read-only is enough).

    Returns
    -------
    int
        How many tables were read.

    Raises
    ------
    duckdb.Error
        DuckDB's own error on a block whose checksum fails (``Corrupt database file: computed
        checksum ... does not match stored checksum ...``).
    """
    tables = con.sql(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "ORDER BY table_name"
    ).fetchall()
    for (table,) in tables:
        columns = [name for (name,) in con.sql(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
            "AND table_name = ? ORDER BY column_index", params=[table],
        ).fetchall()]
        if not columns:
            continue
        # identifiers come from DuckDB's own catalog, quoted; no value is formatted into SQL
        reads = ", ".join(f"max(hash({_quoted(c)}))" for c in columns)
        con.execute(f"SELECT count(*), {reads} FROM {_quoted(table)}").fetchall()
    return len(tables)


def verify_database(path: str | Path | None = None) -> None:
    """Check that a database file is readable to its last block; raise one line if not.

    Opens the file read-only and reads every value of every table (:func:`scan_every_block`),
    which makes DuckDB verify the checksum of every block in use. A missing file passes (the
    pipeline creates it). Costs a full read of the file: about 0.03 s for a small state folder;
    see ``docs/PERFORMANCE.md`` for a benchmark-size one.

    Parameters
    ----------
    path : str or Path, optional
        Database file; default :func:`storage.paths.db_path`.

    Raises
    ------
    StorageCorruptError
        If the file is not a DuckDB database or a block fails its checksum: one line naming
        the file, DuckDB's reason and the remedy (move it aside and rerun: the pipeline
        re-ingests its content-addressed results and recomputes what is missing).
    StorageLockedError
        If another process holds the file's lock (after a few retries).
    TypeError
        If ``path`` is neither a str nor a Path.
    """
    if path is not None and not isinstance(path, (str, Path)):
        raise TypeError(
            f"path must be a str or Path naming the database file; got {type(path).__name__} "
            f"{path!r}."
        )
    db = Path(path) if path is not None else paths.db_path()
    if not db.exists():
        return
    con = _open(db, True, 3, 0.2)
    try:
        scan_every_block(con)
    except duckdb.Error as exc:
        reason = corruption_reason(exc, db) or corruption_reason(exc)
        if reason is None:
            raise
        raise corrupt_error(db, reason) from None
    finally:
        try:
            con.close()
        except duckdb.Error as exc:  # closing a damaged file may fail too: keep the first error
            logger.warning("closing %s failed: %s", db, exc)


def checkpoint(con: duckdb.DuckDBPyConnection) -> None:
    """Fold the write-ahead log into the main file after a big write.

    The data is already durable once committed (the WAL is replayed on the next open), so a
    checkpoint that DuckDB refuses, e.g. while another connection of this process has a
    transaction open, is logged and skipped rather than raised.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Writable connection with no transaction open.
    """
    try:
        con.execute("CHECKPOINT")
    except duckdb.Error as exc:
        logger.warning("CHECKPOINT skipped (data is committed to the WAL): %s", exc)
