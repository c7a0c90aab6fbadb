"""The history of ``alsa-bench monitor``: chunks of production logits and their estimates.

Two tables and a view (schema 6, :mod:`storage.schema`; every column is described for BI tools
in ``docs/MONITOR.md``):

``monitor_chunks``
    One row per chunk of a production stream: ``chunk_key`` (primary key), ``stream`` (the
    production folder or glob, absolute), ``chunking`` (``file``, a row count, ``1d`` or
    ``1w``), ``chunk_name`` (the file, ``rows A-B`` or the period), ``source`` (the files its
    rows came from), ``period_start`` / ``period_end`` (UTC, from the timestamp column; NULL
    without one), ``n_rows``, ``n_classes``, ``content_sha256``, ``first_seen_at``,
    ``superseded_by`` (the chunk that replaced it: a file rewritten, a period that received late
    rows), and the realized accuracy once labels arrived: ``realized_accuracy``,
    ``n_labelled``, ``labels_source``, ``labelled_at``.
``monitor_estimates``
    One row per chunk and estimator: primary key ``(chunk_key, estimator_key)``, where the
    estimator key covers the reference's content, the method, its parameters and the
    calibration, so a changed reference keys its estimates apart and keeps the old ones. The
    estimate, the shift-aware band ``shift_low``/``shift_high``, the sampling interval
    ``interval_low``/``interval_high`` at ``interval_level``, the reference's own estimate, the
    label-free signals and the diagnostics as JSON, ``alert`` with the alerts as JSON, the
    ``realized_accuracy`` (copied from the chunk), the ``run_id`` that estimated it, seconds
    and time.
``monitor_history``
    The two joined, one row per estimate, with ``is_current`` (not superseded),
    ``band_covers_realized`` and ``realized_minus_estimate``.

Every write is one transaction: a chunk row and its estimates land together or not at all, and
a key already stored is never overwritten (an estimate is made once). :func:`export_history`
writes the view to a Parquet file (atomically) for readers that must not hold DuckDB's lock
while a monitor run writes.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from .db import transaction

__all__ = [
    "HISTORY_COLUMNS",
    "MonitorChunk",
    "MonitorEstimate",
    "Realized",
    "StoredChunk",
    "estimated_pairs",
    "export_history",
    "mark_current",
    "read_history",
    "stored_chunks",
    "stream_references",
    "write_chunk",
    "write_realized",
]

#: Columns of :func:`read_history`'s rows (the ``monitor_history`` view's, in its order).
HISTORY_COLUMNS: tuple[str, ...] = (
    "stream", "chunking", "chunk_name", "source", "period_start", "period_end", "n_rows",
    "is_current", "method", "estimated_accuracy", "shift_low", "shift_high", "interval_low",
    "interval_high", "interval_level", "reference_accuracy", "alert", "alerts_json",
    "realized_accuracy", "n_labelled", "band_covers_realized", "realized_minus_estimate",
    "signals_json", "chunk_key", "estimator_key", "reference_sha256", "calibration_sha256",
    "params_json", "content_sha256", "superseded_by", "run_id", "estimated_at", "first_seen_at",
)


@dataclass(frozen=True)
class MonitorChunk:
    """One chunk of production logits (a row of ``monitor_chunks`` without its labels).

    Attributes
    ----------
    chunk_key : str
        Identity of the chunk: a digest of its stream, its chunking and its content.
    stream : str
        The production folder or glob, absolute.
    chunking : str
        ``"file"``, a row count such as ``"10000"``, ``"1d"`` or ``"1w"``.
    chunk_name : str
        The file name, ``"rows 0-9999"``, or the period (``"2026-03-05"``, ``"2026-W10"``).
    source : str
        The files the rows came from, comma-separated.
    period_start, period_end : datetime or None
        UTC, naive; the period (``1d``/``1w``) or the rows' first and last timestamp; None
        without a timestamp column.
    n_rows : int
        Rows of the chunk (0 for an empty file).
    n_classes : int
        Classes of the logits.
    content_sha256 : str
        SHA-256 of the chunk's logits (see ``tasks.monitor.keys``).
    """

    chunk_key: str
    stream: str
    chunking: str
    chunk_name: str
    source: str
    period_start: datetime | None
    period_end: datetime | None
    n_rows: int
    n_classes: int
    content_sha256: str


@dataclass(frozen=True)
class MonitorEstimate:
    """One estimator's estimate of one chunk (a row of ``monitor_estimates``).

    Non-finite floats (an empty chunk's estimate) are stored as NULL.
    """

    chunk_key: str
    estimator_key: str
    method: str
    reference_sha256: str
    params_json: str
    calibration_sha256: str | None
    estimated_accuracy: float
    shift_low: float
    shift_high: float
    interval_low: float
    interval_high: float
    interval_level: float
    reference_accuracy: float
    signals_json: str | None
    diagnostics_json: str | None
    alert: bool
    alerts_json: str | None
    run_id: str | None
    estimate_seconds: float | None


@dataclass(frozen=True)
class Realized:
    """The accuracy a chunk really had, once its labels arrived.

    Attributes
    ----------
    accuracy : float
        Fraction of the chunk's rows whose predicted class (argmax of the logits) is the label.
    n_labelled : int
        Rows with a label (every row of the chunk).
    source : str
        Where the labels came from (files, comma-separated).
    """

    accuracy: float
    n_labelled: int
    source: str


@dataclass(frozen=True)
class StoredChunk:
    """What the history knows of a chunk: its name, whether it is current, its realized
    accuracy (None until labels arrived)."""

    chunk_key: str
    chunk_name: str
    superseded_by: str | None
    realized_accuracy: float | None


def _nullable(value: float | None) -> float | None:
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def _naive_utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def stored_chunks(
    con: duckdb.DuckDBPyConnection, stream: str, chunking: str
) -> dict[str, StoredChunk]:
    """The chunks of ``stream`` under ``chunking`` already in the history, by chunk key.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection (read-only is fine).
    stream, chunking : str
        As in :class:`MonitorChunk`.

    Returns
    -------
    dict of str to StoredChunk
    """
    rows = con.execute(
        "SELECT chunk_key, chunk_name, superseded_by, realized_accuracy FROM monitor_chunks "
        "WHERE stream = ? AND chunking = ?", [stream, chunking],
    ).fetchall()
    return {key: StoredChunk(key, name, sup, acc) for key, name, sup, acc in rows}


def estimated_pairs(
    con: duckdb.DuckDBPyConnection, stream: str, chunking: str
) -> set[tuple[str, str]]:
    """Every ``(chunk_key, estimator_key)`` of ``stream`` under ``chunking`` already estimated.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
    stream, chunking : str

    Returns
    -------
    set of (str, str)
    """
    rows = con.execute(
        "SELECT e.chunk_key, e.estimator_key FROM monitor_estimates AS e "
        "JOIN monitor_chunks AS c ON c.chunk_key = e.chunk_key "
        "WHERE c.stream = ? AND c.chunking = ?", [stream, chunking],
    ).fetchall()
    return {(str(a), str(b)) for a, b in rows}


def stream_references(con: duckdb.DuckDBPyConnection, stream: str) -> set[str]:
    """The reference contents (SHA-256) that estimates of ``stream`` were made under."""
    rows = con.execute(
        "SELECT DISTINCT e.reference_sha256 FROM monitor_estimates AS e "
        "JOIN monitor_chunks AS c ON c.chunk_key = e.chunk_key WHERE c.stream = ?", [stream],
    ).fetchall()
    return {str(r) for (r,) in rows}


def _supersede_others(con: duckdb.DuckDBPyConnection, chunk: MonitorChunk) -> None:
    """``chunk`` is now the content of its name: every other chunk of that name is replaced."""
    con.execute(
        "UPDATE monitor_chunks SET superseded_by = ? WHERE stream = ? AND chunking = ? "
        "AND chunk_name = ? AND chunk_key <> ? AND superseded_by IS NULL",
        [chunk.chunk_key, chunk.stream, chunk.chunking, chunk.chunk_name, chunk.chunk_key],
    )
    con.execute("UPDATE monitor_chunks SET superseded_by = NULL WHERE chunk_key = ?",
                [chunk.chunk_key])


def _check_chunk(chunk: MonitorChunk) -> None:
    if not chunk.chunk_key or not chunk.stream or not chunk.chunk_name:
        raise ValueError(f"chunk_key, stream and chunk_name must be non-empty; got {chunk!r}.")
    if chunk.n_rows < 0 or chunk.n_classes < 1:
        raise ValueError(f"n_rows must be >= 0 and n_classes >= 1; got {chunk.n_rows} rows, "
                         f"{chunk.n_classes} classes.")


def write_chunk(
    con: duckdb.DuckDBPyConnection,
    chunk: MonitorChunk,
    estimates: Sequence[MonitorEstimate],
    realized: Realized | None = None,
    *,
    now: datetime | None = None,
) -> int:
    """Store a chunk (if new), its new estimates and its realized accuracy in one transaction.

    The chunk becomes the current content of its name (an older chunk of the same stream,
    chunking and name gets ``superseded_by``). Estimates whose key is already stored are left
    as they are (an estimate is made once); each new one gets the chunk's realized accuracy.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Writable connection with no transaction open.
    chunk : MonitorChunk
    estimates : sequence of MonitorEstimate
        Estimates of this chunk (their ``chunk_key`` must be the chunk's).
    realized : Realized, optional
        The chunk's realized accuracy, when its labels are known.
    now : datetime, optional
        Time stamp of the rows (UTC); default now.

    Returns
    -------
    int
        How many estimate rows were inserted.

    Raises
    ------
    ValueError
        If an estimate belongs to another chunk, or the chunk's fields are malformed.
    """
    _check_chunk(chunk)
    stamp = _naive_utc(now) or _now()
    wrong = [e.chunk_key for e in estimates if e.chunk_key != chunk.chunk_key]
    if wrong:
        raise ValueError(f"estimates must belong to chunk {chunk.chunk_key!r}; got estimates "
                         f"of {sorted(set(wrong))}.")
    inserted = 0
    with transaction(con):
        con.execute(
            "INSERT INTO monitor_chunks (chunk_key, stream, chunking, chunk_name, source, "
            "period_start, period_end, n_rows, n_classes, content_sha256, first_seen_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (chunk_key) DO NOTHING",
            [chunk.chunk_key, chunk.stream, chunk.chunking, chunk.chunk_name, chunk.source,
             _naive_utc(chunk.period_start), _naive_utc(chunk.period_end), int(chunk.n_rows),
             int(chunk.n_classes), chunk.content_sha256, stamp],
        )
        _supersede_others(con, chunk)
        for e in estimates:
            before = _count(con, e.chunk_key, e.estimator_key)
            con.execute(
                "INSERT INTO monitor_estimates (chunk_key, estimator_key, method, "
                "reference_sha256, params_json, calibration_sha256, estimated_accuracy, "
                "shift_low, shift_high, interval_low, interval_high, interval_level, "
                "reference_accuracy, signals_json, diagnostics_json, alert, alerts_json, "
                "run_id, estimate_seconds, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (chunk_key, estimator_key) DO NOTHING",
                [e.chunk_key, e.estimator_key, e.method, e.reference_sha256, e.params_json,
                 e.calibration_sha256, _nullable(e.estimated_accuracy), _nullable(e.shift_low),
                 _nullable(e.shift_high), _nullable(e.interval_low), _nullable(e.interval_high),
                 _nullable(e.interval_level), _nullable(e.reference_accuracy), e.signals_json,
                 e.diagnostics_json, bool(e.alert), e.alerts_json, e.run_id,
                 _nullable(e.estimate_seconds), stamp],
            )
            inserted += _count(con, e.chunk_key, e.estimator_key) - before
        if realized is not None:
            _set_realized(con, chunk.chunk_key, realized, stamp)
        else:  # labels that arrived before this estimate
            con.execute(
                "UPDATE monitor_estimates SET realized_accuracy = (SELECT realized_accuracy "
                "FROM monitor_chunks WHERE chunk_key = ?) WHERE chunk_key = ?",
                [chunk.chunk_key, chunk.chunk_key],
            )
    return inserted


def _count(con: duckdb.DuckDBPyConnection, chunk_key: str, estimator_key: str) -> int:
    row = con.execute(
        "SELECT count(*) FROM monitor_estimates WHERE chunk_key = ? AND estimator_key = ?",
        [chunk_key, estimator_key],
    ).fetchone()
    return int(row[0]) if row else 0


def _check_realized(realized: Realized) -> None:
    acc = float(realized.accuracy)
    if not (math.isfinite(acc) and 0.0 <= acc <= 1.0) or realized.n_labelled < 1:
        raise ValueError(f"realized accuracy must be a fraction in [0, 1] over at least one "
                         f"labelled row; got {realized!r}.")


def _set_realized(
    con: duckdb.DuckDBPyConnection, chunk_key: str, realized: Realized, stamp: datetime
) -> None:
    _check_realized(realized)
    con.execute(
        "UPDATE monitor_chunks SET realized_accuracy = ?, n_labelled = ?, labels_source = ?, "
        "labelled_at = ? WHERE chunk_key = ?",
        [float(realized.accuracy), int(realized.n_labelled), realized.source, stamp, chunk_key],
    )
    con.execute("UPDATE monitor_estimates SET realized_accuracy = ? WHERE chunk_key = ?",
                [float(realized.accuracy), chunk_key])


def write_realized(
    con: duckdb.DuckDBPyConnection, chunk_key: str, realized: Realized,
    *, now: datetime | None = None,
) -> None:
    """Join a stored chunk's realized accuracy in (the chunk and all its estimates).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Writable connection with no transaction open.
    chunk_key : str
        A chunk of ``monitor_chunks``.
    realized : Realized
    now : datetime, optional

    Raises
    ------
    KeyError
        If no chunk has this key.
    ValueError
        If the accuracy is not a fraction or no row is labelled.
    """
    _check_realized(realized)
    exists = con.execute("SELECT count(*) FROM monitor_chunks WHERE chunk_key = ?",
                         [chunk_key]).fetchone()
    if not exists or not exists[0]:
        raise KeyError(f"no monitor chunk with key {chunk_key!r}.")
    with transaction(con):
        _set_realized(con, chunk_key, realized, _naive_utc(now) or _now())


def mark_current(con: duckdb.DuckDBPyConnection, chunk: MonitorChunk) -> None:
    """Make a stored chunk the current content of its name again (a restored file).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Writable connection with no transaction open.
    chunk : MonitorChunk
        A chunk already in ``monitor_chunks``.
    """
    with transaction(con):
        _supersede_others(con, chunk)


def read_history(
    con: duckdb.DuckDBPyConnection,
    *,
    stream: str | None = None,
    chunking: str | None = None,
    reference_sha256: str | None = None,
    current_only: bool = True,
) -> list[dict[str, Any]]:
    """Rows of ``monitor_history``, oldest chunk first, as dicts of :data:`HISTORY_COLUMNS`.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection (read-only is fine).
    stream, chunking, reference_sha256 : str, optional
        Only rows of this stream, chunking, reference.
    current_only : bool, default True
        Leave out superseded chunks.

    Returns
    -------
    list of dict
        Ordered by period start (NULLs last), first sight, chunk name and method.
    """
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("stream", stream), ("chunking", chunking),
                          ("reference_sha256", reference_sha256)):
        if value is not None:
            where.append(f"{column} = ?")  # column names come from this constant tuple
            params.append(value)
    if current_only:
        where.append("is_current")
    clause = (" WHERE " + " AND ".join(where)) if where else ""
    cursor = con.execute(
        f"SELECT {', '.join(HISTORY_COLUMNS)} FROM monitor_history{clause} "
        "ORDER BY period_start NULLS LAST, first_seen_at, chunk_name, method", params,
    )
    return [dict(zip(HISTORY_COLUMNS, row, strict=True)) for row in cursor.fetchall()]


def export_history(con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str]) -> Path:
    """Write the whole ``monitor_history`` view (superseded chunks included) to Parquet.

    The file is written under a temporary name in the same folder and renamed over ``path``,
    so a reader (a dashboard, a notebook) never sees half a file.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    path : str or path-like
        The Parquet file to write (its folder is created).

    Returns
    -------
    Path
        ``path``.
    """
    import pyarrow.parquet as pq

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    table = con.sql(
        f"SELECT {', '.join(HISTORY_COLUMNS)} FROM monitor_history "
        "ORDER BY stream, period_start NULLS LAST, first_seen_at, chunk_name, method"
    ).to_arrow_table()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        pq.write_table(table, tmp)
        os.chmod(tmp, 0o644)  # mkstemp made it private; dashboards read it
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
