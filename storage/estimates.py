"""The ``estimates`` table and the ``report_rows`` view the report reads.

One row per (run, target split, method): the estimated accuracy, the true accuracy it is judged
against, the absolute error, timings and provenance (hyper-parameters and diagnostics as JSON).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb
import pandas as pd
import pyarrow as pa

from .db import transaction


@dataclass(frozen=True)
class EstimateRow:
    """One row of the ``estimates`` table (its ``created_at`` is set when written).

    Attributes
    ----------
    run_key : str
        Run the target split belongs to.
    split : str
        Target split name.
    method : str
        Estimator registry key (``"atc-mc"``, ``"alsa-g"``, ...).
    params_json : str
        Hyper-parameters (and fitted pre-processing such as the temperature) as canonical JSON.
    estimated_accuracy : float
        The method's accuracy estimate, a fraction.
    true_accuracy : float
        Accuracy measured with the split's labels, a fraction.
    abs_error : float
        ``abs(estimated_accuracy - true_accuracy)``, a fraction (×100 for percentage points).
    fit_seconds : float
        Wall time of fitting the method on the validation split (shared by the run's rows).
    estimate_seconds : float
        Wall time of estimating this split.
    diagnostics_json : str
        Method-specific diagnostics as JSON.
    code_version : str
        Version of the code that produced the row.
    interval_low, interval_high : float
        The estimate's sampling interval (:attr:`estimators.core.base.AccuracyEstimate.interval`);
        NaN (stored as NULL) where the method gives none.
    interval_level : float
        Its nominal coverage; NaN where there is no interval.
    shift_low, shift_high : float
        The estimate's shift-aware band at ``interval_level``
        (:attr:`estimators.core.base.AccuracyEstimate.shift_interval`); NaN (NULL) where none.
    per_class_json : str or None
        Per predicted class ``{"estimated": [...], "count": [...]}`` (JSON, NaN as null) for
        methods with per-sample probabilities; None otherwise.
    """

    run_key: str
    split: str
    method: str
    params_json: str
    estimated_accuracy: float
    true_accuracy: float
    abs_error: float
    fit_seconds: float
    estimate_seconds: float
    diagnostics_json: str = "{}"
    code_version: str = ""
    interval_low: float = math.nan
    interval_high: float = math.nan
    interval_level: float = math.nan
    per_class_json: str | None = None
    shift_low: float = math.nan
    shift_high: float = math.nan


_ARROW_SCHEMA = pa.schema(
    [
        ("split", pa.string()),
        ("method", pa.string()),
        ("params_json", pa.string()),
        ("estimated_accuracy", pa.float64()),
        ("true_accuracy", pa.float64()),
        ("abs_error", pa.float64()),
        ("fit_seconds", pa.float64()),
        ("estimate_seconds", pa.float64()),
        ("diagnostics_json", pa.string()),
        ("code_version", pa.string()),
        ("interval_low", pa.float64()),
        ("interval_high", pa.float64()),
        ("interval_level", pa.float64()),
        ("per_class_json", pa.string()),
        ("shift_low", pa.float64()),
        ("shift_high", pa.float64()),
    ]
)

#: Columns of ``estimates`` in :class:`EstimateRow` order (``created_at`` aside).
_COLUMNS = (
    "run_key, split, method, params_json, estimated_accuracy, true_accuracy, abs_error, "
    "fit_seconds, estimate_seconds, diagnostics_json, code_version, interval_low, "
    "interval_high, interval_level, per_class_json, shift_low, shift_high"
)


#: Numbers stored as NULL when not finite: a missing interval, and the accuracy (and so the error)
#: of a score method (MaNo, nuclear norm), which has no accuracy without a score-to-accuracy map.
_NULLABLE_NUMBERS: frozenset[str] = frozenset(
    {"interval_low", "interval_high", "interval_level", "estimated_accuracy", "abs_error",
     "shift_low", "shift_high"}
)


def _nullable(value: float) -> float | None:
    """NaN -> None, so a missing interval is stored as NULL."""
    return None if value is None or not math.isfinite(float(value)) else float(value)


def _check_rows(run_key: str, rows: Sequence[EstimateRow]) -> None:
    seen: set[tuple[str, str]] = set()
    for i, row in enumerate(rows):
        if not isinstance(row, EstimateRow):
            raise TypeError(f"rows[{i}] must be an EstimateRow; got {type(row).__name__}.")
        if row.run_key != run_key:
            raise ValueError(
                f"rows[{i}].run_key must equal run_key {run_key!r}; got {row.run_key!r}."
            )
        for name in ("split", "method"):
            value = getattr(row, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"rows[{i}].{name} must be a non-empty string; got {value!r}.")
        key = (row.split, row.method)
        if key in seen:
            raise ValueError(
                f"rows must hold one row per (split, method); ({row.split!r}, {row.method!r}) "
                "appears twice."
            )
        seen.add(key)
        for name in ("params_json", "diagnostics_json"):
            text = getattr(row, name)
            try:
                json.loads(text)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"rows[{i}].{name} must be a JSON string; got {text!r} ({exc})."
                ) from None
        if row.per_class_json is not None:
            try:
                json.loads(row.per_class_json)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"rows[{i}].per_class_json must be a JSON string or None; got "
                    f"{row.per_class_json!r} ({exc})."
                ) from None
        for name in (
            "estimated_accuracy",
            "true_accuracy",
            "abs_error",
            "fit_seconds",
            "estimate_seconds",
            "interval_low",
            "interval_high",
            "interval_level",
            "shift_low",
            "shift_high",
        ):
            value = getattr(row, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"rows[{i}].{name} must be a number; got {value!r}.")


def write_estimates(
    con: duckdb.DuckDBPyConnection, run_key: str, rows: Iterable[EstimateRow]
) -> int:
    """Store estimates of one run, replacing stored rows of the same (split, method) pairs.

    Rows of other (split, method) pairs of the run stay as they are. Delete and insert run in one
    transaction, rolled back on any error.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Writable connection with no transaction open.
    run_key : str
        Run the rows belong to; every row's ``run_key`` must equal it.
    rows : iterable of EstimateRow
        At most one row per (split, method).

    Returns
    -------
    int
        Number of rows written (0 for no rows, which changes nothing).

    Raises
    ------
    ValueError
        If a row belongs to another run, a (split, method) pair repeats, a JSON field does not
        parse or a number field is not a number.
    """
    if not isinstance(run_key, str) or not run_key:
        raise ValueError(f"run_key must be a non-empty string; got {run_key!r}.")
    rows = list(rows)
    _check_rows(run_key, rows)
    if not rows:
        return 0
    batch = pa.table(
        {
            name: pa.array(
                [
                    _nullable(getattr(row, name)) if name in _NULLABLE_NUMBERS
                    else getattr(row, name)
                    for row in rows
                ],
                type=_ARROW_SCHEMA.field(name).type,
            )
            for name in _ARROW_SCHEMA.names
        },
        schema=_ARROW_SCHEMA,
    )
    created = datetime.now(UTC).replace(tzinfo=None)
    con.register("alsa_bench_estimates_batch", batch)
    try:
        with transaction(con):
            con.execute(
                "DELETE FROM estimates WHERE run_key = ? AND EXISTS ("
                "  SELECT 1 FROM alsa_bench_estimates_batch AS b "
                "  WHERE b.split = estimates.split AND b.method = estimates.method)",
                [run_key],
            )
            con.execute(
                "INSERT INTO estimates (run_key, split, method, params_json, estimated_accuracy, "
                "true_accuracy, abs_error, fit_seconds, estimate_seconds, diagnostics_json, "
                "code_version, created_at, interval_low, interval_high, interval_level, "
                "per_class_json, shift_low, shift_high) "
                "SELECT ?, split, method, params_json, estimated_accuracy, true_accuracy, "
                "abs_error, fit_seconds, estimate_seconds, diagnostics_json, code_version, "
                "?::TIMESTAMP, interval_low, interval_high, interval_level, per_class_json, "
                "shift_low, shift_high FROM alsa_bench_estimates_batch",
                [run_key, created],
            )
    finally:
        con.unregister("alsa_bench_estimates_batch")
    return len(rows)


def read_estimates(con: duckdb.DuckDBPyConnection, run_key: str) -> list[EstimateRow]:
    """Stored estimates of one run, ordered by split then method.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Run whose rows to read.

    Returns
    -------
    list of EstimateRow
        Empty where the run has none.
    """
    rows = con.sql(
        f"SELECT {_COLUMNS} FROM estimates WHERE run_key = ? ORDER BY split, method",
        params=[run_key],
    ).fetchall()
    nan = math.nan
    return [
        EstimateRow(  # type: ignore[call-arg, misc]  # mypy cannot count the slices of a row
            *row[:4],
            nan if row[4] is None else row[4],
            row[5],
            nan if row[6] is None else row[6],
            *row[7:11],
            interval_low=nan if row[11] is None else row[11],
            interval_high=nan if row[12] is None else row[12],
            interval_level=nan if row[13] is None else row[13],
            per_class_json=row[14],
            shift_low=nan if row[15] is None else row[15],
            shift_high=nan if row[16] is None else row[16],
        )
        for row in rows
    ]


def has_estimates(con: duckdb.DuckDBPyConnection, run_key: str) -> bool:
    """Whether any estimate of the run is stored.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Run to look for.

    Returns
    -------
    bool
    """
    rows = con.sql(
        "SELECT EXISTS (SELECT 1 FROM estimates WHERE run_key = ?)", params=[run_key]
    ).fetchall()
    return bool(rows[0][0])


def estimates_digest(rows: Iterable[EstimateRow]) -> str:
    """A stable digest of estimate rows' results, independent of their order and timings.

    Covers run, split, method, parameters, estimated and true accuracy, absolute error, code
    version, the interval and the per-class estimates (so rows stored before schema version 2,
    without them, do not pass for current ones); leaves out the wall-clock timings and
    diagnostics, so re-running identical, seeded
    estimators gives the same digest (a downstream Prefect cache then stays valid).

    Parameters
    ----------
    rows : iterable of EstimateRow

    Returns
    -------
    str
        64 hexadecimal characters (SHA-256).
    """

    def number(value: float) -> str:
        return repr(float(value)) if math.isfinite(value) else str(value)

    payload = sorted(
        [
            row.run_key,
            row.split,
            row.method,
            row.params_json,
            number(row.estimated_accuracy),
            number(row.true_accuracy),
            number(row.abs_error),
            row.code_version,
            number(row.interval_low),
            number(row.interval_high),
            number(row.interval_level),
            row.per_class_json or "",
            number(row.shift_low),
            number(row.shift_high),
        ]
        for row in rows
    )
    return hashlib.sha256(json.dumps(payload).encode("utf-8")).hexdigest()


def read_report_rows(con: duckdb.DuckDBPyConnection, suite: str | None = None) -> pd.DataFrame:
    """Rows of the ``report_rows`` view (one per target split × method), optionally of one suite.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection (read-only is fine).
    suite : str, optional
        Only runs of this suite.

    Returns
    -------
    pandas.DataFrame
        Columns ``suite, dataset, backbone, seed, shift_family, shift, severity, n_target, method,
        estimated_accuracy, true_accuracy, abs_error, run_key, split, interval_low,
        interval_high, interval_level`` (the interval NaN where none is stored), ordered by
        suite, dataset, backbone, seed, shift family, shift, severity, split and method. Empty
        (with these columns) where nothing matches.
    """
    return con.sql(
        "SELECT suite, dataset, backbone, seed, shift_family, shift, severity, n_target, method, "
        "estimated_accuracy, true_accuracy, abs_error, run_key, split, interval_low, "
        "interval_high, interval_level FROM report_rows "
        "WHERE $suite::VARCHAR IS NULL OR suite = $suite "
        "ORDER BY suite, dataset, backbone, seed, shift_family, shift, severity NULLS FIRST, "
        "split, method",
        params={"suite": suite},
    ).df()
