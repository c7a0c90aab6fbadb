"""The ``splits`` and ``logits`` tables: per-sample logits and labels of every split of a run.

A run has one validation split (role ``"val"``, labelled, what estimators fit on) and any number
of target splits (role ``"target"``). Estimators get target data only through
:func:`read_target_logits`, which returns no labels; :func:`read_target_labels` exists for
evaluation (true accuracy, absolute error) and nothing else.

Writes replace a whole split (its ``splits`` row and every ``logits`` row) inside one
transaction, so a re-run never duplicates rows and a crash never leaves half a split.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from typing import Any, cast

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from .db import checkpoint, transaction
from .errors import NotFoundError, StorageError

ROLES: tuple[str, ...] = ("val", "target")
"""Valid values of ``SplitInfo.role``."""

_BATCH = "alsa_bench_logits_batch"  # name of the registered Arrow table inside write_split


@dataclass(frozen=True)
class SplitInfo:
    """One row of the ``splits`` table: what a split is and how big it is.

    Attributes
    ----------
    split : str
        Name, unique inside a run: ``"val"``, ``"clean"``, ``"gaussian_noise-3"``, ...
    role : str
        ``"val"`` (labelled, estimators fit on it) or ``"target"`` (estimated, labels hidden).
    shift_family : str or None
        ``"clean"``, ``"synthetic"``, ``"label_shift"``, ``"domain"``, ``"subpopulation"``, ...
    shift : str or None
        Shift name inside the family (``"gaussian_noise"``); None for the validation split.
    severity : int or None
        Shift severity where the family has one (1–5 for corruptions), else None.
    n_samples : int
        Number of samples; :func:`write_split` computes it.
    true_accuracy : float
        Accuracy of the classifier's argmax on the split's labels, a fraction;
        :func:`write_split` computes it.
    """

    split: str
    role: str
    shift_family: str | None
    shift: str | None
    severity: int | None
    n_samples: int = 0
    true_accuracy: float = math.nan


def _check_info(info: SplitInfo) -> None:
    if not isinstance(info, SplitInfo):
        raise TypeError(f"info must be a SplitInfo; got {type(info).__name__}.")
    if not isinstance(info.split, str) or not info.split:
        raise ValueError(f"SplitInfo.split must be a non-empty string; got {info.split!r}.")
    if info.role not in ROLES:
        raise ValueError(f"SplitInfo.role must be one of {list(ROLES)}; got {info.role!r}.")
    for name in ("shift_family", "shift"):
        value = getattr(info, name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"SplitInfo.{name} must be a string or None; got {value!r}.")
    sev = info.severity
    if sev is not None and (isinstance(sev, bool) or not isinstance(sev, (int, np.integer))):
        raise ValueError(f"SplitInfo.severity must be an integer or None; got {sev!r}.")


def _check_arrays(logits: Any, labels: Any) -> tuple[NDArray[np.float32], NDArray[np.int32]]:
    arr = np.asarray(logits)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"logits must be a numeric array; got dtype {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"logits must be real-valued; got dtype {arr.dtype}.")
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        raise ValueError(
            "logits must be a 2-D array of shape (n_samples >= 1, n_classes >= 2); "
            f"got shape {arr.shape}."
        )
    with np.errstate(over="ignore"):  # values beyond float32's range become inf, reported below
        flt = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(flt).all():
        bad = int(np.count_nonzero(~np.isfinite(flt)))
        raise ValueError(
            f"logits must be finite (as float32); got {bad} NaN/inf value(s) "
            f"in an array of shape {arr.shape}."
        )
    lab = np.asarray(labels)
    if lab.ndim != 1 or lab.shape[0] != arr.shape[0]:
        raise ValueError(
            f"labels must be a 1-D array of length {arr.shape[0]} (one per logits row); "
            f"got shape {lab.shape}."
        )
    if not (np.issubdtype(lab.dtype, np.integer) or lab.dtype == bool):
        if not np.issubdtype(lab.dtype, np.floating) or not np.all(np.mod(lab, 1) == 0):
            raise ValueError(f"labels must be integers; got dtype {lab.dtype}.")
    n_classes = arr.shape[1]
    lab64 = lab.astype(np.int64)
    low, high = int(lab64.min()), int(lab64.max())
    if low < 0 or high >= n_classes:
        raise ValueError(
            f"labels must lie in [0, {n_classes}) for logits with {n_classes} classes; "
            f"got values in [{low}, {high}]."
        )
    return flt, lab64.astype(np.int32)


def _expected_width(
    con: duckdb.DuckDBPyConnection, run_key: str, split: str
) -> tuple[int, str] | None:
    """Class count the run already fixes (runs.n_classes, else another stored split)."""
    rows = con.sql("SELECT n_classes FROM runs WHERE run_key = ?", params=[run_key]).fetchall()
    if rows:
        return int(rows[0][0]), "runs.n_classes"
    rows = con.sql(
        "SELECT split, len(logits) FROM logits WHERE run_key = ? AND split <> ? LIMIT 1",
        params=[run_key, split],
    ).fetchall()
    if rows:
        return int(rows[0][1]), f"stored split {rows[0][0]!r}"
    return None


def write_split(
    con: duckdb.DuckDBPyConnection,
    run_key: str,
    info: SplitInfo,
    logits: NDArray[np.floating[Any]],
    labels: NDArray[np.integer[Any]],
) -> SplitInfo:
    """Store one split of a run, replacing whatever was stored under its name.

    The ``splits`` row and every ``logits`` row of ``(run_key, info.split)`` are deleted and
    re-inserted inside one transaction (rolled back on any error), then the database is
    checkpointed. ``n_samples`` and ``true_accuracy`` are computed here from the arrays; the
    values in ``info`` are ignored.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Writable connection with no transaction open.
    run_key : str
        Run the split belongs to.
    info : SplitInfo
        Name, role and shift description of the split.
    logits : ndarray of shape (n_samples, n_classes)
        Finite raw logits; stored as float32 (rows keep their order as ``sample_index``).
    labels : ndarray of shape (n_samples,)
        Integer class labels in ``[0, n_classes)``.

    Returns
    -------
    SplitInfo
        ``info`` with ``n_samples`` and ``true_accuracy`` filled in, as stored.

    Raises
    ------
    ValueError
        If the arrays are malformed, the class count differs from the run's, or a validation
        split is written under a second name (a run has one validation split).
    """
    if not isinstance(run_key, str) or not run_key:
        raise ValueError(f"run_key must be a non-empty string; got {run_key!r}.")
    _check_info(info)
    flt, lab = _check_arrays(logits, labels)
    n, c = flt.shape
    expected = _expected_width(con, run_key, info.split)
    if expected is not None and expected[0] != c:
        raise ValueError(
            f"logits of split {info.split!r} have {c} classes but run {run_key!r} has "
            f"{expected[0]} ({expected[1]})."
        )
    if info.role == "val":
        other = con.sql(
            "SELECT split FROM splits WHERE run_key = ? AND role = 'val' AND split <> ?",
            params=[run_key, info.split],
        ).fetchall()
        if other:
            raise ValueError(
                f"run {run_key!r} already has validation split {other[0][0]!r}; a run has one "
                f"validation split, so {info.split!r} cannot be written with role 'val'."
            )
    true_accuracy = float(np.mean(flt.argmax(axis=1) == lab))
    stored = replace(
        info,
        severity=None if info.severity is None else int(info.severity),
        n_samples=int(n),
        true_accuracy=true_accuracy,
    )
    batch = pa.table(
        {
            "sample_index": pa.array(np.arange(n, dtype=np.int64)),
            "label": pa.array(lab),
            "logits": pa.FixedSizeListArray.from_arrays(pa.array(flt.reshape(-1)), c),
        }
    )
    con.register(_BATCH, batch)
    try:
        with transaction(con):
            con.execute(
                "DELETE FROM logits WHERE run_key = ? AND split = ?", [run_key, stored.split]
            )
            con.execute(
                "DELETE FROM splits WHERE run_key = ? AND split = ?", [run_key, stored.split]
            )
            con.execute(
                "INSERT INTO splits (run_key, split, role, shift_family, shift, severity, "
                "n_samples, true_accuracy) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    run_key,
                    stored.split,
                    stored.role,
                    stored.shift_family,
                    stored.shift,
                    stored.severity,
                    stored.n_samples,
                    stored.true_accuracy,
                ],
            )
            con.execute(
                "INSERT INTO logits (run_key, split, sample_index, label, logits) "
                "SELECT ?, ?, sample_index, label, logits::FLOAT[] FROM alsa_bench_logits_batch",
                [run_key, stored.split],
            )
    finally:
        con.unregister(_BATCH)
    checkpoint(con)
    return stored


def _split_row(con: duckdb.DuckDBPyConnection, run_key: str, split: str) -> SplitInfo:
    rows = con.sql(
        "SELECT split, role, shift_family, shift, severity, n_samples, true_accuracy "
        "FROM splits WHERE run_key = ? AND split = ?",
        params=[run_key, split],
    ).fetchall()
    if not rows:
        names = [s.split for s in list_splits(con, run_key)]
        raise NotFoundError(
            f"Split {split!r} of run {run_key!r} is not stored; stored splits: "
            f"{names if names else 'none (run the extract stage first)'}."
        )
    return _as_split_info(rows[0])


def _as_split_info(row: tuple[Any, ...]) -> SplitInfo:
    split, role, family, shift, severity, n_samples, true_accuracy = row
    return SplitInfo(
        split=split,
        role=role,
        shift_family=family,
        shift=shift,
        severity=severity,
        n_samples=int(n_samples),
        true_accuracy=math.nan if true_accuracy is None else float(true_accuracy),
    )


def _logits_matrix(table: pa.Table, info: SplitInfo, run_key: str) -> NDArray[np.float32]:
    """Turn the Arrow ``logits`` list column into an ``(n, c)`` float32 array, checking widths."""
    n = table.num_rows
    if n != info.n_samples:
        raise StorageError(
            f"Split {info.split!r} of run {run_key!r} has {n} logits rows but its splits row says "
            f"{info.n_samples}; the database is inconsistent. Re-run the extract stage for it."
        )
    col = table.column("logits").combine_chunks()
    lengths = pc.list_value_length(col)
    c_min, c_max = pc.min(lengths).as_py(), pc.max(lengths).as_py()
    if c_min != c_max:
        raise StorageError(
            f"Split {info.split!r} of run {run_key!r} has logit vectors of {c_min} to {c_max} "
            "classes; every row must have the run's class count."
        )
    flat = col.flatten().to_numpy(zero_copy_only=False)
    return np.array(flat, dtype=np.float32).reshape(n, int(c_max))


def _read(
    con: duckdb.DuckDBPyConnection, run_key: str, info: SplitInfo, with_labels: bool
) -> tuple[NDArray[np.float32], NDArray[np.int64] | None]:
    if with_labels:
        table = con.sql(
            "SELECT label, logits FROM logits WHERE run_key = ? AND split = ? "
            "ORDER BY sample_index",
            params=[run_key, info.split],
        ).to_arrow_table()
        labels = table.column("label").to_numpy().astype(np.int64)
    else:
        table = con.sql(
            "SELECT logits FROM logits WHERE run_key = ? AND split = ? ORDER BY sample_index",
            params=[run_key, info.split],
        ).to_arrow_table()
        labels = None
    return _logits_matrix(table, info, run_key), labels


def read_val(
    con: duckdb.DuckDBPyConnection, run_key: str
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """Logits and labels of the run's validation split (what estimators fit on).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Run whose validation split to read.

    Returns
    -------
    logits : ndarray of shape (n_val, n_classes), float32
    labels : ndarray of shape (n_val,), int64

    Raises
    ------
    NotFoundError
        If the run has no validation split.
    """
    vals = list_splits(con, run_key, role="val")
    if not vals:
        raise NotFoundError(
            f"Run {run_key!r} has no validation split (role 'val') stored; run the extract "
            "stage first."
        )
    logits, labels = _read(con, run_key, vals[0], with_labels=True)
    return logits, cast(NDArray[np.int64], labels)


def _target_info(con: duckdb.DuckDBPyConnection, run_key: str, split: str) -> SplitInfo:
    info = _split_row(con, run_key, split)
    if info.role != "target":
        raise ValueError(
            f"split must name a target split of run {run_key!r}; {split!r} has role "
            f"{info.role!r} (read it with read_val)."
        )
    return info


def read_target_logits(
    con: duckdb.DuckDBPyConnection, run_key: str, split: str
) -> NDArray[np.float32]:
    """Logits of one target split, without labels: what an estimator may see.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Run the split belongs to.
    split : str
        Name of a split with role ``"target"``.

    Returns
    -------
    ndarray of shape (n_target, n_classes), float32

    Raises
    ------
    NotFoundError
        If the split is not stored.
    ValueError
        If the split is the validation split.
    """
    logits, _ = _read(con, run_key, _target_info(con, run_key, split), with_labels=False)
    return logits


def read_target_labels(
    con: duckdb.DuckDBPyConnection, run_key: str, split: str
) -> NDArray[np.int64]:
    """Labels of one target split, for **evaluation only** (never pass them to an estimator).

    The estimate stage does not need them either: ``splits.true_accuracy`` holds the accuracy
    computed at write time. This exists for analyses such as per-class errors.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Run the split belongs to.
    split : str
        Name of a split with role ``"target"``.

    Returns
    -------
    ndarray of shape (n_target,), int64

    Raises
    ------
    NotFoundError
        If the split is not stored.
    ValueError
        If the split is the validation split.
    """
    info = _target_info(con, run_key, split)
    table = con.sql(
        "SELECT label FROM logits WHERE run_key = ? AND split = ? ORDER BY sample_index",
        params=[run_key, info.split],
    ).to_arrow_table()
    if table.num_rows != info.n_samples:
        raise StorageError(
            f"Split {split!r} of run {run_key!r} has {table.num_rows} logits rows but its splits "
            f"row says {info.n_samples}; the database is inconsistent."
        )
    return cast("NDArray[np.int64]", table.column("label").to_numpy().astype(np.int64))


def read_run_targets(
    con: duckdb.DuckDBPyConnection, run_key: str, *, with_labels: bool = False
) -> dict[str, tuple[NDArray[np.float32], NDArray[np.int64] | None]]:
    """Logits of every target split of a run in one query (and their labels, for evaluation).

    What :func:`read_target_logits` and :func:`read_target_labels` return split by split, read
    in one pass over the run's rows: a report that reads every split of a run (the trust rows,
    the per-class errors) pays one query per run instead of two per split.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Run whose target splits to read.
    with_labels : bool, default False
        Also return the labels (**evaluation only**: never pass them to an estimator).

    Returns
    -------
    dict
        ``{split: (logits, labels)}`` over the run's target splits (empty when it has none);
        ``logits`` of shape ``(n, n_classes)`` float32, ``labels`` of shape ``(n,)`` int64, or
        None without ``with_labels``.

    Raises
    ------
    StorageError
        If a split's rows disagree with its ``splits`` row (count or class count).
    """
    infos = sorted(list_splits(con, run_key, role="target"), key=lambda s: s.split.encode())
    if not infos:
        return {}
    table = con.sql(
        f"SELECT l.split{', l.label' if with_labels else ''}, l.logits FROM logits l "
        "JOIN splits s ON s.run_key = l.run_key AND s.split = l.split "
        "WHERE l.run_key = ? AND s.role = 'target' ORDER BY l.split, l.sample_index",
        params=[run_key],
    ).to_arrow_table()
    if table.num_rows != sum(s.n_samples for s in infos):
        raise StorageError(
            f"Run {run_key!r} has {table.num_rows} target logits rows but its splits rows say "
            f"{sum(s.n_samples for s in infos)}; the database is inconsistent. Re-run the "
            "extract stage for it."
        )
    out: dict[str, tuple[NDArray[np.float32], NDArray[np.int64] | None]] = {}
    start = 0
    for info in infos:  # the rows come in split order (bytes), as ``infos`` is sorted
        part = table.slice(start, info.n_samples)
        start += info.n_samples
        if info.n_samples and not pc.all(pc.equal(part.column("split"), info.split)).as_py():
            raise StorageError(
                f"Split {info.split!r} of run {run_key!r} has another number of logits rows "
                f"than its splits row says ({info.n_samples}); the database is inconsistent."
            )
        labels = (part.column("label").to_numpy().astype(np.int64) if with_labels else None)
        out[info.split] = (_logits_matrix(part, info, run_key), labels)
    return out


def list_splits(
    con: duckdb.DuckDBPyConnection, run_key: str, role: str | None = None
) -> list[SplitInfo]:
    """Stored splits of a run: the validation split first, then targets by family, shift, severity.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Run whose splits to list.
    role : {"val", "target"}, optional
        Only splits of this role.

    Returns
    -------
    list of SplitInfo
        Empty where the run has no (matching) splits.

    Raises
    ------
    ValueError
        If ``role`` is not None, ``"val"`` or ``"target"``.
    """
    if role is not None and role not in ROLES:
        raise ValueError(f"role must be None or one of {list(ROLES)}; got {role!r}.")
    rows = con.sql(
        "SELECT split, role, shift_family, shift, severity, n_samples, true_accuracy "
        "FROM splits WHERE run_key = $run_key AND ($role::VARCHAR IS NULL OR role = $role) "
        "ORDER BY role <> 'val', shift_family NULLS FIRST, shift NULLS FIRST, "
        "severity NULLS FIRST, split",
        params={"run_key": run_key, "role": role},
    ).fetchall()
    return [_as_split_info(row) for row in rows]


def run_digest(con: duckdb.DuckDBPyConnection, run_key: str) -> str:
    """A stable digest of everything stored for a run's splits (rows of ``splits`` and ``logits``).

    Computed inside DuckDB without reading the arrays out: per split, its ``splits`` row, the
    number of ``logits`` rows and the sum of DuckDB's ``hash(sample_index, label, logits)``.
    Equal contents give equal digests across processes and connections (with the same DuckDB
    version, whose ``hash`` it relies on); any changed value, label, row count or split
    description changes it. Used as a Prefect cache input of the estimate stage.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Run to digest; a run with nothing stored gets the digest of an empty list.

    Returns
    -------
    str
        64 hexadecimal characters (SHA-256).
    """
    rows = con.sql(
        "WITH agg AS ("
        "  SELECT split, count(*) AS n_rows, sum(hash(sample_index, label, logits)) AS checksum "
        "  FROM logits WHERE run_key = $run_key GROUP BY split"
        ") "
        "SELECT s.split, s.role, s.shift_family, s.shift, s.severity, s.n_samples, "
        "       s.true_accuracy, coalesce(a.n_rows, 0), coalesce(a.checksum, 0)::VARCHAR "
        "FROM splits AS s LEFT JOIN agg AS a ON a.split = s.split "
        "WHERE s.run_key = $run_key ORDER BY s.split",
        params={"run_key": run_key},
    ).fetchall()
    payload = json.dumps(
        {"run_key": run_key, "splits": [[*row[:6], repr(row[6]), *row[7:]] for row in rows]},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
