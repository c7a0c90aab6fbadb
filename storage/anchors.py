"""The ``anchors`` table: fitted ALSA anchors (position in logit space, peak, variance) for plots.

One partition per (run, method); a write replaces the whole partition in one transaction.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from .db import transaction
from .errors import NotFoundError, StorageError


def _check_anchor_arrays(
    positions: Any, peaks: Any, variances: Any
) -> tuple[NDArray[np.float32], NDArray[np.float64], NDArray[np.float64]]:
    pos = np.asarray(positions)
    if pos.dtype == object or not np.issubdtype(pos.dtype, np.number) or pos.ndim != 2:
        raise ValueError(
            "positions must be a numeric 2-D array of shape (n_anchors, n_classes); "
            f"got dtype {pos.dtype}, shape {pos.shape}."
        )
    if pos.shape[0] == 0 or pos.shape[1] == 0:
        raise ValueError(
            "positions must hold at least one anchor of at least one dimension; "
            f"got shape {pos.shape}."
        )
    k = pos.shape[0]
    out: list[NDArray[np.float64]] = []
    for name, value in (("peaks", peaks), ("variances", variances)):
        arr = np.asarray(value)
        if arr.dtype == object or not np.issubdtype(arr.dtype, np.number) or arr.shape != (k,):
            raise ValueError(
                f"{name} must be a numeric array of shape ({k},), one value per anchor; "
                f"got dtype {arr.dtype}, shape {arr.shape}."
            )
        out.append(arr.astype(np.float64))
    pos32 = np.ascontiguousarray(pos, dtype=np.float32)
    for name, arr in (("positions", pos32), ("peaks", out[0]), ("variances", out[1])):
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} must be finite; got NaN/inf values.")
    return pos32, out[0], out[1]


def write_anchors(
    con: duckdb.DuckDBPyConnection,
    run_key: str,
    method: str,
    positions: NDArray[np.floating[Any]],
    peaks: NDArray[np.floating[Any]],
    variances: NDArray[np.floating[Any]],
) -> int:
    """Store the fitted anchors of one method on one run, replacing any stored for that pair.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Writable connection with no transaction open.
    run_key : str
        Run the estimator was fitted on.
    method : str
        Estimator registry key (``"alsa-g"``, ``"alsa-e"``).
    positions : ndarray of shape (n_anchors, n_classes)
        Anchor positions in logit space (stored as float32).
    peaks : ndarray of shape (n_anchors,)
        Signed anchor peaks.
    variances : ndarray of shape (n_anchors,)
        Anchor "variances" (inverse widths).

    Returns
    -------
    int
        Number of anchors written.

    Raises
    ------
    ValueError
        If the arrays disagree in length, are empty, not numeric or not finite, or a key is empty.
    """
    for name, value in (("run_key", run_key), ("method", method)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be a non-empty string; got {value!r}.")
    pos, peak, var = _check_anchor_arrays(positions, peaks, variances)
    k, c = pos.shape
    batch = pa.table(
        {
            "anchor_index": pa.array(np.arange(k, dtype=np.int32)),
            "position": pa.FixedSizeListArray.from_arrays(pa.array(pos.reshape(-1)), c),
            "peak": pa.array(peak),
            "variance": pa.array(var),
        }
    )
    con.register("alsa_bench_anchors_batch", batch)
    try:
        with transaction(con):
            con.execute("DELETE FROM anchors WHERE run_key = ? AND method = ?", [run_key, method])
            con.execute(
                "INSERT INTO anchors (run_key, method, anchor_index, position, peak, variance) "
                "SELECT ?, ?, anchor_index, position::FLOAT[], peak, variance "
                "FROM alsa_bench_anchors_batch",
                [run_key, method],
            )
    finally:
        con.unregister("alsa_bench_anchors_batch")
    return int(k)


def read_anchors(
    con: duckdb.DuckDBPyConnection, run_key: str, method: str
) -> tuple[NDArray[np.float32], NDArray[np.float64], NDArray[np.float64]]:
    """Fitted anchors of one method on one run, in anchor order.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Run the estimator was fitted on.
    method : str
        Estimator registry key.

    Returns
    -------
    positions : ndarray of shape (n_anchors, n_classes), float32
    peaks : ndarray of shape (n_anchors,), float64
    variances : ndarray of shape (n_anchors,), float64

    Raises
    ------
    NotFoundError
        If no anchors are stored for the pair.
    """
    table = con.sql(
        "SELECT position, peak, variance FROM anchors WHERE run_key = ? AND method = ? "
        "ORDER BY anchor_index",
        params=[run_key, method],
    ).to_arrow_table()
    k = table.num_rows
    if k == 0:
        stored = con.sql(
            "SELECT DISTINCT method FROM anchors WHERE run_key = ? ORDER BY method",
            params=[run_key],
        ).fetchall()
        raise NotFoundError(
            f"No anchors stored for method {method!r} on run {run_key!r}; methods with anchors "
            f"on this run: {[m for (m,) in stored] or 'none'}."
        )
    col = table.column("position").combine_chunks()
    lengths = pc.list_value_length(col)
    c_min, c_max = pc.min(lengths).as_py(), pc.max(lengths).as_py()
    if c_min != c_max:
        raise StorageError(
            f"Anchors of method {method!r} on run {run_key!r} have positions of {c_min} to "
            f"{c_max} dimensions; the stored partition is inconsistent."
        )
    positions = np.array(col.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
    return (
        positions.reshape(k, int(c_max)),
        table.column("peak").to_numpy().astype(np.float64),
        table.column("variance").to_numpy().astype(np.float64),
    )
