"""The report's numbers: R² against y = x, Pearson's ρ, the best of a row, and their cells.

A leaf of :mod:`tasks.report`: numpy and pandas only, every other module of the package may
import it (the score section, :mod:`tasks.report.scores`, included).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["fmt_mae", "fmt_num", "mark_best", "pearson", "r2_identity", "std_or_nan"]


def r2_identity(estimated: Any, true: Any) -> float:
    """Coefficient of determination of ``estimated`` against the line y = x (paper Table 3).

    Parameters
    ----------
    estimated, true : array-like of shape (n,)
        Estimated and true accuracies of ``n`` target sets.

    Returns
    -------
    float
        :math:`1 - \\sum_i (\\hat a_i - a_i)^2 / \\sum_i (a_i - \\bar a)^2`; NaN when ``n < 2``
        or the true accuracies are all equal. Unbounded below: a method worse than predicting
        the mean true accuracy scores negative.

    Examples
    --------
    >>> r2_identity([0.9, 0.7], [0.9, 0.7])
    1.0
    """
    est = np.asarray(estimated, dtype=float)
    tru = np.asarray(true, dtype=float)
    if tru.size < 2:
        return math.nan
    ss_tot = float(np.sum((tru - tru.mean()) ** 2))
    if ss_tot == 0.0:
        return math.nan
    return 1.0 - float(np.sum((est - tru) ** 2)) / ss_tot


def pearson(estimated: Any, true: Any) -> float:
    """Pearson correlation of estimated and true accuracies; NaN if undefined (n < 2, constant).

    Examples
    --------
    >>> round(pearson([0.1, 0.2, 0.4], [0.5, 0.6, 0.8]), 6)
    1.0
    """
    est = np.asarray(estimated, dtype=float)
    tru = np.asarray(true, dtype=float)
    if tru.size < 2 or np.ptp(est) == 0.0 or np.ptp(tru) == 0.0:
        return math.nan
    return float(np.corrcoef(est, tru)[0, 1])


def std_or_nan(values: pd.Series) -> float:
    """Sample standard deviation (``ddof=1``) over seeds; NaN for one seed."""
    return float(values.std(ddof=1)) if len(values) > 1 else math.nan


def mark_best(df: pd.DataFrame, row: list[str], col: str, *, lowest: bool) -> pd.Series:
    """Whether each row of ``df`` holds the lowest (``lowest``) or highest ``col`` of its
    ``row`` group; ties are all marked, NaN never."""
    if df.empty:
        return pd.Series([], dtype=bool)
    target = df.groupby(row, sort=False)[col].transform("min" if lowest else "max")
    return (df[col] == target) & df[col].notna()


def fmt_mae(mean: float, std: float, best: bool) -> str:
    """An MAE cell: ``"1.23 ± 0.45"`` (``"1.23"`` without a std), ``**bold**`` if best."""
    text = f"{mean:.2f}" if math.isnan(std) else f"{mean:.2f} ± {std:.2f}"
    return f"**{text}**" if best else text


def fmt_num(value: float, best: bool) -> str:
    """A number cell with two decimals (``"–"`` for NaN), ``**bold**`` if best."""
    if value is None or math.isnan(value):
        return "–"
    text = f"{value:.2f}"
    return f"**{text}**" if best else text
