"""The report's tables, computed from the rows of the ``report_rows`` view.

:func:`build_report_tables` turns the rows of the ``report_rows`` view (one per run × target
split × method) into the tables of the paper:

* **MAE** (Tables 1–2): per (suite, dataset, shift family, backbone, method) the mean absolute
  error in percentage points over the family's target splits, as mean ± std over seeds, with
  the best method of each row marked; an ``all`` family averages every target split of a dataset.
* **Correlation** (Table 3): per (suite, dataset, backbone, method), over every target split and
  seed, the coefficient of determination against the identity line,
  :math:`R^2 = 1 - \\sum (\\hat a - a)^2 / \\sum (a - \\bar a)^2`, and Pearson's :math:`\\rho`.
* ranks, the worst family, interval coverage and the temporal layout of Table 2.

Long tables hold numbers; wide tables (``*_table``) hold the cells people read, methods and
families in the order of :mod:`tasks.report.names`.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import pandas as pd

from tasks.report.names import (
    ALL_FAMILIES,
    TEMPORAL_FAMILY,
    family_rank,
    method_rank,
    methods_in_order,
)
from tasks.report.stats import fmt_mae, fmt_num, mark_best, pearson, r2_identity, std_or_nan

__all__ = [
    "REQUIRED_COLUMNS",
    "build_report_tables",
    "coverage_long",
    "mae_per_seed",
    "mean_rank",
    "rank_long",
    "temporal_mae_table",
    "worst_family_long",
]

#: Columns :func:`build_report_tables` needs (the ``report_rows`` view has a few more).
REQUIRED_COLUMNS: Final[tuple[str, ...]] = (
    "suite",
    "dataset",
    "backbone",
    "seed",
    "shift_family",
    "split",
    "method",
    "estimated_accuracy",
    "true_accuracy",
)

_GROUP_MAE: Final = ["suite", "dataset", "shift_family", "backbone", "method"]
_GROUP_CORR: Final = ["suite", "dataset", "backbone", "method"]
_ROW_MAE: Final = ["suite", "dataset", "shift_family", "backbone"]
_ROW_CORR: Final = ["suite", "dataset", "backbone"]


# --------------------------------------------------------------------------------------- tables
def build_report_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Compute the MAE and correlation tables of a benchmark from its ``report_rows``.

    Parameters
    ----------
    df : DataFrame
        Rows of the ``report_rows`` view, at least the columns of :data:`REQUIRED_COLUMNS`,
        accuracies as fractions. Rows of the validation split (``split == "val"``) and rows
        without an estimate are left out.

    Returns
    -------
    dict of str to DataFrame
        ``"mae"``
            Long form, one row per (suite, dataset, shift_family, backbone, method):
            ``mae_mean`` and ``mae_std`` (percentage points; std over seeds with ``ddof=1``,
            NaN for one seed), ``n_seeds``, ``n_splits`` (target splits per seed) and ``best``
            (lowest ``mae_mean`` of its row; ties are all marked). ``shift_family == "all"``
            pools every target split of the dataset.
        ``"mae_table"``
            Wide form for people: index (suite, dataset, shift_family, backbone), one column per
            method, cells ``"1.23 ± 0.45"`` (``"1.23"`` for one seed), the best in ``**bold**``.
        ``"correlation"``
            Long form, one row per (suite, dataset, backbone, method) over every target split
            and seed: ``r2`` (against y = x), ``pearson_r``, ``n_points``, ``best_r2``,
            ``best_pearson_r``. Both are NaN with fewer than two points or constant accuracies.
        ``"correlation_table"``
            Wide form: index (suite, dataset, backbone), columns ``"<method> R²"`` and
            ``"<method> ρ"``, the best of each in ``**bold**``.
        ``"rows"``
            The target rows used, with ``abs_error_pp`` added, sorted.
        ``"ranks"``, ``"rank_table"``
            Per row (suite, dataset, shift family, backbone; not ``all``) and seed, each method's
            rank by its MAE (1 = lowest; ties share the mean rank, :func:`rank_long`); the wide
            form shows the rank of the mean-over-seeds MAE per row.
        ``"mean_rank"``
            Per method the mean rank over every row, mean ± std over seeds
            (:func:`mean_rank`), a critical-difference style summary.
        ``"worst_family"``, ``"worst_family_table"``
            Per (suite, dataset, backbone, method) the largest family MAE and its family
            (:func:`worst_family_long`): what a user who does not know the shift risks.
        ``"coverage"``, ``"coverage_table"``
            Where ``df`` has the interval columns and some row has an interval
            (:func:`coverage_long`): per (suite, dataset, shift_family, method) the fraction of
            target splits whose true accuracy lies in the stored interval and its mean width.

    Raises
    ------
    ValueError
        If a required column is missing, or no target row has an estimate.
    """
    rows = _target_rows(df)
    mae = _mae_long(rows)
    corr = _correlation_long(rows)
    out = {
        "mae": mae,
        "mae_table": _mae_wide(mae),
        "correlation": corr,
        "correlation_table": _correlation_wide(corr),
        "rows": rows,
    }
    if {"interval_low", "interval_high"} <= set(rows.columns):
        coverage = coverage_long(rows)
        if not coverage.empty:
            out["coverage"] = coverage
            out["coverage_table"] = _coverage_wide(coverage)
    ranks = rank_long(rows)
    out["ranks"] = ranks
    out["rank_table"] = _rank_wide(ranks)
    out["mean_rank"] = mean_rank(ranks)
    out["worst_family"] = worst_family_long(mae)
    out["worst_family_table"] = _worst_family_wide(out["worst_family"])
    temporal = rows[rows["shift_family"] == TEMPORAL_FAMILY]
    if not temporal.empty:
        out["temporal_mae_table"] = temporal_mae_table(temporal)
        out["temporal_correlation_table"] = _correlation_wide(_correlation_long(temporal))
    return out


def temporal_mae_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 2 layout: MAE over the test years per backbone × method, plus AVG.

    Parameters
    ----------
    rows : DataFrame
        Target rows of the ``temporal`` family (one or more datasets).

    Returns
    -------
    DataFrame
        Index (suite, dataset, backbone) with a last ``AVG.`` row per dataset (the mean over
        backbones of the per-backbone means, as in the paper); one column per method, cells
        ``mean ± std`` over seeds, the best of each row in bold.
    """
    per_seed = (
        rows.groupby(_ROW_CORR + ["method", "seed"], sort=False)["abs_error_pp"].mean()
        .rename("mae").reset_index()
    )
    mae = (
        per_seed.groupby(_ROW_CORR + ["method"], sort=False)["mae"]
        .agg(mae_mean="mean",
             mae_std=std_or_nan)
        .reset_index()
    )
    avg = (
        mae.groupby(["suite", "dataset", "method"], sort=False)["mae_mean"].mean()
        .rename("mae_mean").reset_index().assign(backbone="AVG.", mae_std=math.nan)
    )
    both = pd.concat([mae, avg], ignore_index=True)
    both["best"] = mark_best(both, _ROW_CORR, "mae_mean", lowest=True)
    methods = methods_in_order(both["method"].tolist())
    both["cell"] = [fmt_mae(m, s, b) for m, s, b in
                    zip(both["mae_mean"], both["mae_std"], both["best"])]
    wide = both.pivot(index=_ROW_CORR, columns="method", values="cell").reindex(columns=methods)
    order = sorted(wide.index, key=lambda k: (k[0], k[1], k[2] == "AVG.", k[2]))
    wide = wide.reindex(pd.MultiIndex.from_tuples(order, names=_ROW_CORR)).fillna("–")
    wide.columns.name = None
    return wide


def _target_rows(df: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"df must have the report_rows columns {list(REQUIRED_COLUMNS)}; "
            f"got columns {list(df.columns)} (missing {missing})."
        )
    rows = df.loc[df["split"].astype(str) != "val"].copy()
    rows = rows.dropna(subset=["estimated_accuracy", "true_accuracy"])
    if rows.empty:
        raise ValueError(
            f"df must hold at least one target-split row with an estimate; got {len(df)} rows, "
            "none of them usable."
        )
    rows["shift_family"] = rows["shift_family"].fillna("unknown").astype(str)
    rows["seed"] = rows["seed"].astype(int)
    rows["estimated_accuracy"] = rows["estimated_accuracy"].astype(float)
    rows["true_accuracy"] = rows["true_accuracy"].astype(float)
    rows["abs_error_pp"] = 100.0 * (rows["estimated_accuracy"] - rows["true_accuracy"]).abs()
    rows["_m"] = rows["method"].map(method_rank)
    rows["_f"] = rows["shift_family"].map(family_rank)
    rows = rows.sort_values(["suite", "dataset", "backbone", "seed", "_f", "split", "_m"])
    return rows.drop(columns=["_m", "_f"]).reset_index(drop=True)


def rank_long(rows: pd.DataFrame) -> pd.DataFrame:
    """Rank the methods of every row of every seed by their MAE.

    Parameters
    ----------
    rows : DataFrame
        Target rows (``build_report_tables(...)["rows"]``).

    Returns
    -------
    DataFrame
        One row per (suite, dataset, shift_family, backbone, seed, method): ``mae`` (points,
        over the family's splits of that seed) and ``rank`` among the methods of that row and
        seed (1 = lowest MAE, ties averaged, as in Demšar 2006). Methods that do not run on a
        row (GNNEvaluator off graphs) are ranked among those that do.
    """
    per_seed = (
        rows.groupby(_ROW_MAE + ["seed", "method"], sort=False, observed=True)["abs_error_pp"]
        .mean().rename("mae").reset_index()
    )
    per_seed["rank"] = per_seed.groupby(_ROW_MAE + ["seed"], sort=False, observed=True)[
        "mae"].rank(method="average", ascending=True)
    return per_seed


def mean_rank(ranks: pd.DataFrame) -> pd.DataFrame:
    """Mean rank of every method over all rows: mean ± std over seeds (Demšar 2006 style).

    Parameters
    ----------
    ranks : DataFrame
        From :func:`rank_long`.

    Returns
    -------
    DataFrame
        Index ``method`` (display order), columns ``mean_rank`` (mean over seeds of the
        per-seed mean rank over rows), ``std`` (over seeds, ``ddof=1``; NaN for one seed),
        ``rows`` (rows the method was ranked on) and ``wins`` (rows, summed over seeds, where
        it ranked first), sorted by ``mean_rank``.
    """
    per_seed = ranks.groupby(["method", "seed"], sort=False)["rank"].mean().rename("r")
    out = per_seed.reset_index().groupby("method", sort=False)["r"].agg(
        mean_rank="mean", std=std_or_nan
    )
    counts = ranks.groupby("method", sort=False).agg(
        rows=("rank", "size"), wins=("rank", lambda r: int((r == 1).sum()))
    )
    out = out.join(counts)
    out["rows"] = (out["rows"] / ranks.groupby("method")["seed"].nunique()).astype(int)
    return out.sort_values("mean_rank")


def worst_family_long(mae: pd.DataFrame) -> pd.DataFrame:
    """Each method's largest family MAE per (suite, dataset, backbone), and which family.

    Parameters
    ----------
    mae : DataFrame
        Long MAE table (``build_report_tables(...)["mae"]``).

    Returns
    -------
    DataFrame
        Columns suite, dataset, backbone, method, ``worst_mae`` (the largest ``mae_mean`` over
        the shift families other than ``all``), ``worst_family`` and ``best`` (lowest
        ``worst_mae`` of its row).
    """
    fam = mae[mae["shift_family"] != ALL_FAMILIES]
    idx = fam.groupby(_GROUP_CORR, sort=False)["mae_mean"].idxmax()
    out = fam.loc[idx, _GROUP_CORR + ["mae_mean", "shift_family"]].rename(
        columns={"mae_mean": "worst_mae", "shift_family": "worst_family"}
    )
    out["best"] = mark_best(out, _ROW_CORR, "worst_mae", lowest=True)
    return _sort(out.reset_index(drop=True), _ROW_CORR)


def _rank_wide(ranks: pd.DataFrame) -> pd.DataFrame:
    mean = ranks.groupby(_ROW_MAE + ["method"], sort=False)["mae"].mean().rename("mae")
    mean = mean.reset_index()
    mean["rank"] = mean.groupby(_ROW_MAE, sort=False)["mae"].rank(method="min")
    mean["cell"] = [f"**{int(r)}**" if r == 1 else str(int(r)) for r in mean["rank"]]
    methods = methods_in_order(mean["method"].tolist())
    wide = mean.pivot(index=_ROW_MAE, columns="method", values="cell").reindex(columns=methods)
    order = _sort(mean.drop_duplicates(_ROW_MAE).assign(method=""), _ROW_MAE)[_ROW_MAE]
    wide = wide.reindex(pd.MultiIndex.from_frame(order)).fillna("–")
    wide.columns.name = None
    return wide


def _worst_family_wide(worst: pd.DataFrame) -> pd.DataFrame:
    cells = worst.assign(cell=[
        fmt_num(m, b) + f" ({f})" for m, b, f in
        zip(worst["worst_mae"], worst["best"], worst["worst_family"])
    ])
    methods = methods_in_order(cells["method"].tolist())
    wide = cells.pivot(index=_ROW_CORR, columns="method", values="cell").reindex(columns=methods)
    order = worst[_ROW_CORR].drop_duplicates().apply(tuple, axis=1).tolist()
    wide = wide.reindex(pd.MultiIndex.from_tuples(order, names=_ROW_CORR)).fillna("–")
    wide.columns.name = None
    return wide


def mae_per_seed(rows: pd.DataFrame) -> pd.DataFrame:
    """The MAE table's cells before the mean over seeds: one row per (suite, dataset,
    shift_family, backbone, method, seed) with ``mae`` (percentage points, the mean of
    ``abs_error_pp`` over the family's target splits; ``shift_family == "all"`` pools them) and
    ``n_splits``. What ``alsa-bench report --compare`` holds side by side."""
    pooled = rows.assign(shift_family=ALL_FAMILIES)
    both = pd.concat([rows, pooled], ignore_index=True)
    return (
        both.groupby(_GROUP_MAE + ["seed"], sort=False)["abs_error_pp"]
        .agg(mae="mean", n_splits="size")
        .reset_index()
    )


def _mae_long(rows: pd.DataFrame) -> pd.DataFrame:
    per_seed = mae_per_seed(rows)
    mae = (
        per_seed.groupby(_GROUP_MAE, sort=False)
        .agg(
            mae_mean=("mae", "mean"),
            mae_std=("mae", std_or_nan),
            n_seeds=("seed", "nunique"),
            n_splits=("n_splits", "max"),
        )
        .reset_index()
    )
    mae["best"] = mark_best(mae, _ROW_MAE, "mae_mean", lowest=True)
    return _sort(mae, _ROW_MAE)


def coverage_long(rows: pd.DataFrame) -> pd.DataFrame:
    r"""Empirical coverage and mean width of the stored intervals.

    For each (suite, dataset, shift_family, method), over every target split, backbone and seed
    whose row has a finite interval :math:`[\ell_i, h_i]` at level :math:`\lambda`:
    ``coverage`` :math:`= \frac1m\sum_i \mathbb 1(\ell_i \le a_i \le h_i)` with
    :math:`a_i` the split's true accuracy, ``width_pp`` :math:`= \frac{100}{m}\sum_i (h_i -
    \ell_i)`, ``level`` (the median stated level), ``n`` :math:`= m` and ``coverage_se``, the
    binomial standard error :math:`\sqrt{\lambda(1-\lambda)/m}` of a coverage that meets the
    level. ``shift_family == "all"`` pools the families. The intervals cover sampling noise,
    not shift: a coverage far below the level under a shift measures the estimator's bias.

    Parameters
    ----------
    rows : DataFrame
        Target rows with ``interval_low``, ``interval_high``, ``true_accuracy`` (and
        optionally ``interval_level``).

    Returns
    -------
    DataFrame
        Empty (with the columns) where no row has an interval.
    """
    cols = ["suite", "dataset", "shift_family", "method", "level", "coverage", "coverage_se",
            "width_pp", "n"]
    lo = pd.to_numeric(rows["interval_low"], errors="coerce")
    hi = pd.to_numeric(rows["interval_high"], errors="coerce")
    keep = rows[np.isfinite(lo) & np.isfinite(hi)].copy()
    if keep.empty:
        return pd.DataFrame(columns=cols)
    keep["_in"] = (
        (keep["interval_low"].astype(float) <= keep["true_accuracy"])
        & (keep["true_accuracy"] <= keep["interval_high"].astype(float))
    ).astype(float)
    keep["_w"] = 100.0 * (keep["interval_high"].astype(float) - keep["interval_low"].astype(float))
    if "interval_level" not in keep:
        keep["interval_level"] = math.nan
    both = pd.concat([keep, keep.assign(shift_family=ALL_FAMILIES)], ignore_index=True)
    out = (
        both.groupby(["suite", "dataset", "shift_family", "method"], sort=False)
        .agg(level=("interval_level", "median"), coverage=("_in", "mean"),
             width_pp=("_w", "mean"), n=("_in", "size"))
        .reset_index()
    )
    out["coverage_se"] = np.sqrt(out["level"] * (1.0 - out["level"]) / out["n"])
    out["_m"] = out["method"].map(method_rank)
    out["_f"] = out["shift_family"].map(family_rank)
    out = out.sort_values(["suite", "dataset", "_f", "_m"]).drop(columns=["_m", "_f"])
    return out[cols].reset_index(drop=True)


def _coverage_wide(cov: pd.DataFrame) -> pd.DataFrame:
    """Index (suite, dataset, shift_family), one column per method: ``"0.91 (4.2)"`` =
    coverage (mean width in percentage points)."""
    cov = cov.assign(cell=[f"{c:.2f} ({w:.1f})" for c, w in zip(cov["coverage"], cov["width_pp"])])
    wide = cov.pivot(index=["suite", "dataset", "shift_family"], columns="method", values="cell")
    wide = wide[methods_in_order(list(wide.columns))]
    order = sorted(wide.index, key=lambda k: (k[0], k[1], family_rank(k[2])))
    wide = wide.loc[order]
    wide.columns.name = None
    return wide.fillna("")


def _correlation_long(rows: pd.DataFrame) -> pd.DataFrame:
    records = []
    for key, grp in rows.groupby(_GROUP_CORR, sort=False):
        est = grp["estimated_accuracy"].to_numpy(dtype=float)
        true = grp["true_accuracy"].to_numpy(dtype=float)
        records.append(
            dict(zip(_GROUP_CORR, key), r2=r2_identity(est, true), pearson_r=pearson(est, true),
                 n_points=int(len(grp)))
        )
    corr = pd.DataFrame.from_records(records, columns=_GROUP_CORR + ["r2", "pearson_r", "n_points"])
    corr["best_r2"] = mark_best(corr, _ROW_CORR, "r2", lowest=False)
    corr["best_pearson_r"] = mark_best(corr, _ROW_CORR, "pearson_r", lowest=False)
    return _sort(corr, _ROW_CORR)


def _sort(df: pd.DataFrame, row: list[str]) -> pd.DataFrame:
    keys = df.assign(_m=df["method"].map(method_rank))
    order = row + ["_m"]
    if "shift_family" in row:
        keys["_f"] = keys["shift_family"].map(family_rank)
        order = [("_f" if c == "shift_family" else c) for c in row] + ["_m"]
    return keys.sort_values(order).drop(columns=[c for c in ("_m", "_f") if c in keys]).reset_index(
        drop=True
    )


def _mae_wide(mae: pd.DataFrame) -> pd.DataFrame:
    methods = methods_in_order(mae["method"].tolist())
    cells = mae.assign(cell=[
        fmt_mae(m, s, b) for m, s, b in zip(mae["mae_mean"], mae["mae_std"], mae["best"])
    ])
    wide = cells.pivot(index=_ROW_MAE, columns="method", values="cell")
    wide = wide.reindex(columns=methods).fillna("–")
    order = (
        mae[_ROW_MAE].drop_duplicates().apply(tuple, axis=1).tolist()
    )
    wide = wide.reindex(pd.MultiIndex.from_tuples(order, names=_ROW_MAE))
    wide.columns.name = None
    return wide


def _correlation_wide(corr: pd.DataFrame) -> pd.DataFrame:
    methods = methods_in_order(corr["method"].tolist())
    out: dict[str, pd.Series] = {}
    indexed = corr.set_index(_ROW_CORR + ["method"])
    rows = corr[_ROW_CORR].drop_duplicates().apply(tuple, axis=1).tolist()
    index = pd.MultiIndex.from_tuples(rows, names=_ROW_CORR)
    for method in methods:
        for col, label in (("r2", "R²"), ("pearson_r", "ρ")):
            values = []
            for row in rows:
                key = (*row, method)
                if key in indexed.index:
                    rec = indexed.loc[key]
                    values.append(fmt_num(float(rec[col]), bool(rec[f"best_{col}"])))
                else:
                    values.append("–")
            out[f"{method} {label}"] = pd.Series(values, index=index)
    return pd.DataFrame(out, index=index)
