"""The report stage: MAE and correlation tables, plots, and Prefect artifacts from ``report_rows``.

Two plain functions do the work. :func:`build_report_tables` turns the rows of the
``report_rows`` view (one per run × target split × method) into the tables of the paper:

* **MAE** (Tables 1–2): per (suite, dataset, shift family, backbone, method) the mean absolute
  error in percentage points over the family's target splits, as mean ± std over seeds, with
  the best method of each row marked; an ``all`` family averages every target split of a dataset.
* **Correlation** (Table 3): per (suite, dataset, backbone, method), over every target split and
  seed, the coefficient of determination against the identity line,
  :math:`R^2 = 1 - \\sum (\\hat a - a)^2 / \\sum (a - \\bar a)^2`, and Pearson's :math:`\\rho`.

:func:`write_report` reads the rows from DuckDB, writes ``<state>/reports/<run>/`` (``report.md``, CSVs,
PNGs: predicted-vs-true scatter per method as in the paper's Fig. 7–8; for 3-class runs the
fitted ALSA anchors and its probability surface as in Fig. 4 and Fig. 1d/5d) and, inside a
Prefect run, publishes the tables and the markdown as artifacts.
"""

from __future__ import annotations

import base64
import io
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pandas as pd

from storage.paths import reports_dir
from tasks.refs import ReportRef

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
#: The shift family whose splits are test years (graph suites).
TEMPORAL_FAMILY: Final[str] = "temporal"

#: Name of the pseudo shift family that pools every target split of a dataset.
ALL_FAMILIES: Final[str] = "all"
#: Preferred display order of methods; others follow alphabetically.
METHOD_ORDER: Final[tuple[str, ...]] = (
    "ac", "doc", "im", "atc-mc", "atc-ne", "cot", "gnnevaluator", "alsa-e", "alsa-g",
)
#: Preferred display order of shift families; others follow alphabetically, ``all`` comes last.
FAMILY_ORDER: Final[tuple[str, ...]] = (
    "clean", "natural", "synthetic", "label_shift", "domain", "subpopulation", "temporal",
    "structural",
)
#: File in a report folder naming what the report covers (see :func:`read_fingerprint`).
FINGERPRINT_FILE: Final[str] = ".fingerprint"
_KEY_RE: Final = re.compile(r"[^a-z0-9]+")
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
             mae_std=lambda s: float(s.std(ddof=1)) if len(s) > 1 else math.nan)
        .reset_index()
    )
    avg = (
        mae.groupby(["suite", "dataset", "method"], sort=False)["mae_mean"].mean()
        .rename("mae_mean").reset_index().assign(backbone="AVG.", mae_std=math.nan)
    )
    both = pd.concat([mae, avg], ignore_index=True)
    both["best"] = _mark_best(both, _ROW_CORR, "mae_mean", lowest=True)
    methods = _methods_in_order(both["method"].tolist())
    both["cell"] = [_fmt_mae(m, s, b) for m, s, b in
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
    rows["_m"] = rows["method"].map(_method_rank)
    rows["_f"] = rows["shift_family"].map(_family_rank)
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
        mean_rank="mean", std=lambda v: float(v.std(ddof=1)) if len(v) > 1 else math.nan
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
    out["best"] = _mark_best(out, _ROW_CORR, "worst_mae", lowest=True)
    return _sort(out.reset_index(drop=True), _ROW_CORR)


def _rank_wide(ranks: pd.DataFrame) -> pd.DataFrame:
    mean = ranks.groupby(_ROW_MAE + ["method"], sort=False)["mae"].mean().rename("mae")
    mean = mean.reset_index()
    mean["rank"] = mean.groupby(_ROW_MAE, sort=False)["mae"].rank(method="min")
    mean["cell"] = [f"**{int(r)}**" if r == 1 else str(int(r)) for r in mean["rank"]]
    methods = _methods_in_order(mean["method"].tolist())
    wide = mean.pivot(index=_ROW_MAE, columns="method", values="cell").reindex(columns=methods)
    order = _sort(mean.drop_duplicates(_ROW_MAE).assign(method=""), _ROW_MAE)[_ROW_MAE]
    wide = wide.reindex(pd.MultiIndex.from_frame(order)).fillna("–")
    wide.columns.name = None
    return wide


def _worst_family_wide(worst: pd.DataFrame) -> pd.DataFrame:
    cells = worst.assign(cell=[
        _fmt_num(m, b) + f" ({f})" for m, b, f in
        zip(worst["worst_mae"], worst["best"], worst["worst_family"])
    ])
    methods = _methods_in_order(cells["method"].tolist())
    wide = cells.pivot(index=_ROW_CORR, columns="method", values="cell").reindex(columns=methods)
    order = worst[_ROW_CORR].drop_duplicates().apply(tuple, axis=1).tolist()
    wide = wide.reindex(pd.MultiIndex.from_tuples(order, names=_ROW_CORR)).fillna("–")
    wide.columns.name = None
    return wide


def _mean_rank_markdown(table: pd.DataFrame) -> str:
    view = pd.DataFrame({
        "method": table.index,
        "mean rank": [f"{m:.2f}" if math.isnan(s) else f"{m:.2f} ± {s:.2f}"
                      for m, s in zip(table["mean_rank"], table["std"])],
        "rows": table["rows"].to_numpy(),
        "first places (all seeds)": table["wins"].to_numpy(),
    })
    return view.to_markdown(index=False)


def _method_rank(method: str) -> tuple[int, str]:
    base = method.split("[", 1)[0]
    rank = METHOD_ORDER.index(base) if base in METHOD_ORDER else len(METHOD_ORDER)
    return (rank, method)


def _family_rank(family: str) -> tuple[int, str]:
    if family == ALL_FAMILIES:
        return (len(FAMILY_ORDER) + 1, family)
    rank = FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER)
    return (rank, family)


def _mae_long(rows: pd.DataFrame) -> pd.DataFrame:
    pooled = rows.assign(shift_family=ALL_FAMILIES)
    both = pd.concat([rows, pooled], ignore_index=True)
    per_seed = (
        both.groupby(_GROUP_MAE + ["seed"], sort=False)["abs_error_pp"]
        .agg(mae="mean", n_splits="size")
        .reset_index()
    )
    mae = (
        per_seed.groupby(_GROUP_MAE, sort=False)
        .agg(
            mae_mean=("mae", "mean"),
            mae_std=("mae", lambda s: float(s.std(ddof=1)) if len(s) > 1 else math.nan),
            n_seeds=("seed", "nunique"),
            n_splits=("n_splits", "max"),
        )
        .reset_index()
    )
    mae["best"] = _mark_best(mae, _ROW_MAE, "mae_mean", lowest=True)
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
    out["_m"] = out["method"].map(_method_rank)
    out["_f"] = out["shift_family"].map(_family_rank)
    out = out.sort_values(["suite", "dataset", "_f", "_m"]).drop(columns=["_m", "_f"])
    return out[cols].reset_index(drop=True)


def _coverage_wide(cov: pd.DataFrame) -> pd.DataFrame:
    """Index (suite, dataset, shift_family), one column per method: ``"0.91 (4.2)"`` =
    coverage (mean width in percentage points)."""
    cov = cov.assign(cell=[f"{c:.2f} ({w:.1f})" for c, w in zip(cov["coverage"], cov["width_pp"])])
    wide = cov.pivot(index=["suite", "dataset", "shift_family"], columns="method", values="cell")
    wide = wide[_methods_in_order(list(wide.columns))]
    order = sorted(wide.index, key=lambda k: (k[0], k[1], _family_rank(k[2])))
    wide = wide.loc[order]
    wide.columns.name = None
    return wide.fillna("")


def per_class_mae(con: Any, rows: pd.DataFrame) -> pd.DataFrame:
    r"""Per-class MAE of ALSA and of the best baseline with per-sample probabilities.

    For a target split, method and predicted class ``k`` with at least one row, the error is
    :math:`|\hat a_k - a_k|` with :math:`\hat a_k` the stored estimate
    (``estimates.per_class_json``) and :math:`a_k` the true accuracy among the rows predicted
    as ``k`` (from the split's logits and labels, read here: the estimate stage never reads
    target labels). ``per_class_mae_pp`` is the mean over classes, then over splits, in
    percentage points, per (suite, dataset, shift_family, method); ``all`` pools families.
    Reported methods: every ``alsa-*`` one and, per dataset, the baseline with per-class
    estimates whose pooled accuracy MAE is lowest (``role`` ``"alsa"`` / ``"best baseline"``).

    Parameters
    ----------
    con : duckdb connection
    rows : DataFrame
        The report's target rows (:func:`build_report_tables` ``"rows"``).

    Returns
    -------
    DataFrame
        Columns ``suite, dataset, shift_family, method, role, per_class_mae_pp, n_splits``;
        empty where no stored row has per-class estimates.
    """
    import json

    from storage.logits import read_target_labels, read_target_logits

    cols = ["suite", "dataset", "shift_family", "method", "role", "per_class_mae_pp", "n_splits"]
    stored = con.sql(
        "SELECT run_key, split, method, per_class_json FROM estimates "
        "WHERE per_class_json IS NOT NULL"
    ).df()
    if stored.empty:
        return pd.DataFrame(columns=cols)
    merged = rows.merge(stored, on=["run_key", "split", "method"], how="inner")
    if merged.empty:
        return pd.DataFrame(columns=cols)
    chosen: list[pd.DataFrame] = []
    for (suite, dataset), grp in merged.groupby(["suite", "dataset"], sort=True):
        alsa = grp[grp["method"].astype(str).str.startswith("alsa")]
        base = grp[~grp["method"].astype(str).str.startswith("alsa")]
        if not alsa.empty:
            chosen.append(alsa.assign(role="alsa"))
        if not base.empty:
            best = base.groupby("method")["abs_error_pp"].mean().idxmin()
            chosen.append(base[base["method"] == best].assign(role="best baseline"))
    if not chosen:
        return pd.DataFrame(columns=cols)
    picked = pd.concat(chosen, ignore_index=True)
    errors: list[float] = []
    truth_cache: dict[tuple[str, str], np.ndarray] = {}
    for run_key, split, text in zip(picked["run_key"], picked["split"], picked["per_class_json"]):
        key = (str(run_key), str(split))
        if key not in truth_cache:
            z = np.asarray(read_target_logits(con, *key))
            y = np.asarray(read_target_labels(con, *key))
            pred = (z.reshape(-1) > 0).astype(int) if z.ndim == 1 or z.shape[1] == 1 else (
                z.argmax(axis=1))
            c = max(int(pred.max()) + 1, z.shape[1] if z.ndim == 2 else 2)
            counts = np.bincount(pred, minlength=c).astype(float)
            hits = np.bincount(pred, weights=(pred == y).astype(float), minlength=c)
            with np.errstate(invalid="ignore", divide="ignore"):
                truth_cache[key] = np.where(counts > 0, hits / np.maximum(counts, 1.0), np.nan)
        true = truth_cache[key]
        est = np.array([np.nan if v is None else v for v in json.loads(text)["estimated"]],
                       dtype=float)
        m = min(len(est), len(true))
        diff = np.abs(est[:m] - true[:m])
        diff = diff[np.isfinite(diff)]
        errors.append(100.0 * float(diff.mean()) if diff.size else math.nan)
    picked["_e"] = errors
    both = pd.concat([picked, picked.assign(shift_family=ALL_FAMILIES)], ignore_index=True)
    out = (
        both.groupby(["suite", "dataset", "shift_family", "method", "role"], sort=False)
        .agg(per_class_mae_pp=("_e", "mean"), n_splits=("_e", "size"))
        .reset_index()
    )
    out["_m"] = out["method"].map(_method_rank)
    out["_f"] = out["shift_family"].map(_family_rank)
    out = out.sort_values(["suite", "dataset", "_f", "_m"]).drop(columns=["_m", "_f"])
    return out[cols].reset_index(drop=True)


def _per_class_wide(pc: pd.DataFrame) -> pd.DataFrame:
    """Index (suite, dataset, shift_family), one column per method (``"<method> (best
    baseline)"`` for the baseline), cells in percentage points."""
    label = [m if r == "alsa" else f"{m} (best baseline)" for m, r in zip(pc["method"], pc["role"])]
    pc = pc.assign(col=label, cell=[f"{v:.2f}" for v in pc["per_class_mae_pp"]])
    wide = pc.pivot(index=["suite", "dataset", "shift_family"], columns="col", values="cell")
    order = sorted(wide.index, key=lambda k: (k[0], k[1], _family_rank(k[2])))
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
    corr["best_r2"] = _mark_best(corr, _ROW_CORR, "r2", lowest=False)
    corr["best_pearson_r"] = _mark_best(corr, _ROW_CORR, "pearson_r", lowest=False)
    return _sort(corr, _ROW_CORR)


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


def _mark_best(df: pd.DataFrame, row: list[str], col: str, *, lowest: bool) -> pd.Series:
    if df.empty:
        return pd.Series([], dtype=bool)
    target = df.groupby(row, sort=False)[col].transform("min" if lowest else "max")
    return (df[col] == target) & df[col].notna()


def _sort(df: pd.DataFrame, row: list[str]) -> pd.DataFrame:
    keys = df.assign(_m=df["method"].map(_method_rank))
    order = row + ["_m"]
    if "shift_family" in row:
        keys["_f"] = keys["shift_family"].map(_family_rank)
        order = [("_f" if c == "shift_family" else c) for c in row] + ["_m"]
    return keys.sort_values(order).drop(columns=[c for c in ("_m", "_f") if c in keys]).reset_index(
        drop=True
    )


def _methods_in_order(methods: Sequence[str]) -> list[str]:
    return sorted(set(methods), key=_method_rank)


def _fmt_mae(mean: float, std: float, best: bool) -> str:
    text = f"{mean:.2f}" if math.isnan(std) else f"{mean:.2f} ± {std:.2f}"
    return f"**{text}**" if best else text


def _fmt_num(value: float, best: bool) -> str:
    if value is None or math.isnan(value):
        return "–"
    text = f"{value:.2f}"
    return f"**{text}**" if best else text


def _mae_wide(mae: pd.DataFrame) -> pd.DataFrame:
    methods = _methods_in_order(mae["method"].tolist())
    cells = mae.assign(cell=[
        _fmt_mae(m, s, b) for m, s, b in zip(mae["mae_mean"], mae["mae_std"], mae["best"])
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
    methods = _methods_in_order(corr["method"].tolist())
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
                    values.append(_fmt_num(float(rec[col]), bool(rec[f"best_{col}"])))
                else:
                    values.append("–")
            out[f"{method} {label}"] = pd.Series(values, index=index)
    return pd.DataFrame(out, index=index)


# --------------------------------------------------------------------------------------- text
def format_mae_text(tables: Mapping[str, pd.DataFrame]) -> str:
    """The MAE table as plain text for a terminal: ``*`` marks the best method of each row.

    Parameters
    ----------
    tables : mapping
        The output of :func:`build_report_tables`.

    Returns
    -------
    str
        A fixed-width table with a title line.
    """
    from tabulate import tabulate

    wide = tables["mae_table"]
    body = wide.map(lambda s: f"{s.strip('*')} *" if s.startswith("**") else s)
    flat = body.reset_index()
    return (
        "MAE of the accuracy estimates, percentage points (mean ± std over seeds; * = best)\n"
        + tabulate(flat.values.tolist(), headers=list(flat.columns), tablefmt="simple",
                   disable_numparse=True)
    )


def _markdown_table(df: pd.DataFrame) -> str:
    return df.reset_index().to_markdown(index=False, disable_numparse=True)


def render_markdown(
    tables: Mapping[str, pd.DataFrame],
    *,
    title: str,
    images: Sequence[tuple[str, str]] = (),
    notes: Sequence[str] = (),
) -> str:
    """The report as markdown: header, run summary, MAE and correlation tables, images.

    Parameters
    ----------
    tables : mapping
        The output of :func:`build_report_tables`.
    title : str
        First heading.
    images : sequence of (caption, target)
        Images to show, ``target`` being a relative file name or a ``data:image/png;base64,``
        URI.
    notes : sequence of str
        Extra lines placed under the title (provenance).

    Returns
    -------
    str
        Markdown without leading indentation (as Prefect's markdown artifacts need).
    """
    rows = tables["rows"]
    lines = [f"# {title}", ""]
    lines += list(notes)
    if notes:
        lines.append("")
    runs = rows["run_key"].drop_duplicates().tolist() if "run_key" in rows else []
    split_cols = ["run_key", "split"] if runs else ["split"]
    n_splits = len(rows[split_cols].drop_duplicates())
    lines += [
        f"- suites: {', '.join(sorted(rows['suite'].astype(str).unique()))}",
        f"- datasets: {', '.join(sorted(rows['dataset'].astype(str).unique()))}",
        f"- backbones: {', '.join(sorted(rows['backbone'].astype(str).unique()))}",
        f"- seeds: {', '.join(str(s) for s in sorted(rows['seed'].unique()))}",
        f"- methods: {', '.join(_methods_in_order(rows['method'].tolist()))}",
        f"- runs: {len(runs)}; target splits: {n_splits}; estimates: {len(rows)}",
        "",
        "## MAE of the accuracy estimates (percentage points)",
        "",
        "Mean ± std over seeds of the mean absolute error over a shift family's target splits; "
        f"`{ALL_FAMILIES}` pools every target split of the dataset. Lower is better; **bold** is "
        "the best of each row.",
        "",
        _markdown_table(tables["mae_table"]),
        "",
        "## Correlation between estimated and true accuracy",
        "",
        "Over every target split and seed of a backbone: R² against the identity line y = x and "
        "Pearson ρ (paper Table 3). Higher is better; **bold** is the best of each row.",
        "",
        _markdown_table(tables["correlation_table"]),
        "",
    ]
    if "mean_rank" in tables:
        lines += [
            "## Ranks and the worst family",
            "",
            "A user who does not know which shift the target data went through gets, from one "
            "method, its error under whichever shift it is. Mean rank of each method over every "
            "(dataset, shift family, backbone) row (1 = lowest MAE of the row; ties share the "
            "mean rank; mean ± std over seeds of the per-seed mean rank, Demšar 2006 style). A "
            "method that runs on some rows only (GNNEvaluator: graphs) is ranked on those, "
            "among one more method:",
            "",
            _mean_rank_markdown(tables["mean_rank"]),
            "",
            "Worst-family MAE (percentage points): per dataset and backbone, each method's largest "
            "shift-family MAE, with that family; **bold** is the lowest of the row.",
            "",
            _markdown_table(tables["worst_family_table"]),
            "",
            "Rank of each method in every row of the MAE table above (by the mean over seeds):",
            "",
            _markdown_table(tables["rank_table"]),
            "",
        ]
    if "temporal_mae_table" in tables:
        lines += [
            "## Temporal shift (paper Table 2 and Table 3 layout)",
            "",
            "Graph datasets are trained on papers up to 2010 and validated on 2012-2014, with "
            "one target split per test year 2015-2020; `sotu-party` (text) is trained on "
            "speeches of 1853-1912, with one target split per later era. MAE (percentage "
            "points) over the years or eras, mean ± std over seeds, with the paper's `AVG.` "
            "over backbones:",
            "",
            _markdown_table(tables["temporal_mae_table"]),
            "",
            "R² against y = x and Pearson ρ of estimated vs true accuracy across the test years "
            "(and seeds):",
            "",
            _markdown_table(tables["temporal_correlation_table"]),
            "",
        ]
    if "coverage_table" in tables:
        level = tables["coverage"]["level"].median()
        lines += [
            "## Interval coverage",
            "",
            f"Fraction of target splits whose true accuracy lies inside the estimate's "
            f"{level:.0%} interval, with the mean interval width in percentage points in "
            "brackets, over every split, backbone and seed. The intervals cover the sampling "
            "noise of the finite validation and target sets (`docs/ESTIMATORS.md`), not the "
            "estimator's error under shift: coverage near the level on `clean` and far below it "
            "under a strong shift is what honest intervals look like.",
            "",
            _markdown_table(tables["coverage_table"]),
            "",
        ]
    if "per_class_table" in tables:
        lines += [
            "## Per-class MAE (percentage points)",
            "",
            "Mean over target splits of the mean over predicted classes of |estimated - true| "
            "accuracy among the rows predicted as that class; ALSA and, per dataset, the baseline "
            "with per-sample probabilities whose overall MAE is lowest.",
            "",
            _markdown_table(tables["per_class_table"]),
            "",
        ]
    if "score_mae_table" in tables:
        lines += [
            "## Score methods through a meta-set map (MaNo, nuclear norm)",
            "",
            "MaNo and the nuclear norm give a score, not an accuracy. As in their papers (Deng & "
            "Zheng 2021), a least-squares line from score to accuracy is fitted on a labelled "
            "meta-set: here the run's own corruption family (`synthetic`). Splits of other "
            "families are scored with the line fitted on every corruption split; a corruption "
            "split with the line fitted on the *other* corruption types (leave one type out). "
            "Runs without a corruption family (graphs, `sotu-party`) have no meta-set and are "
            "left out. These numbers use labelled shifted data that the other methods never "
            "see, so they are not ranked with them. MAE (percentage points), mean ± std over "
            "seeds:",
            "",
            _markdown_table(tables["score_mae_table"]),
            "",
            "Per backbone, over every mapped split and seed: R² against y = x and Pearson ρ of "
            "mapped vs true accuracy, and the Spearman ρ of the raw score vs true accuracy "
            "(how well the score alone orders the shifts):",
            "",
            _markdown_table(tables["score_correlation_table"]),
            "",
        ]
    if images:
        lines += ["## Figures", ""]
        for caption, target in images:
            lines += [f"**{caption}**", "", f"![{caption}]({target})", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------- plots
def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_scatter(rows: pd.DataFrame, *, title: str) -> "Figure":
    """Predicted vs true accuracy, one panel per method (paper Fig. 7–8).

    Parameters
    ----------
    rows : DataFrame
        Target rows (``tables["rows"]``) of one dataset.
    title : str
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        Points colored by shift family, marker by backbone, the identity line dashed, each
        panel titled with the method and its MAE in percentage points.
    """
    plt = _pyplot()
    methods = _methods_in_order(rows["method"].tolist())
    families = sorted(rows["shift_family"].unique(), key=_family_rank)
    backbones = sorted(rows["backbone"].astype(str).unique())
    ncols = min(4, len(methods))
    nrows = math.ceil(len(methods) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.0 * ncols, 3.1 * nrows + 0.8), squeeze=False, layout="constrained"
    )
    colors = plt.get_cmap("tab10")
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    lo = float(min(rows["true_accuracy"].min(), rows["estimated_accuracy"].min()))
    hi = float(max(rows["true_accuracy"].max(), rows["estimated_accuracy"].max()))
    pad = 0.05 * max(hi - lo, 0.05)
    lim = (max(0.0, lo - pad), min(1.0, hi + pad)) if lo >= 0.0 else (lo - pad, hi + pad)
    for ax, method in zip(axes.flat, methods):
        sub = rows[rows["method"] == method]
        for fi, family in enumerate(families):
            for bi, backbone in enumerate(backbones):
                mask = (sub["shift_family"] == family) & (sub["backbone"].astype(str) == backbone)
                pts = sub[mask]
                if pts.empty:
                    continue
                ax.scatter(
                    pts["true_accuracy"], pts["estimated_accuracy"], s=16, alpha=0.8,
                    zorder=3 if family == "clean" else 2,
                    color=colors(fi % 10), marker=markers[bi % len(markers)], linewidths=0,
                    label=f"{family} · {backbone}" if len(backbones) > 1 else family,
                )
        ax.plot(lim, lim, ls="--", lw=1, color="0.4")
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        ax.set_aspect("equal")
        ax.set_title(f"{method}  (MAE {sub['abs_error_pp'].mean():.2f})", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(methods):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("estimated accuracy", fontsize=8)
    for ax in axes[-1, :]:
        ax.set_xlabel("true accuracy", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(6, len(labels)), fontsize=7,
               frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def plot_temporal(rows: pd.DataFrame, *, title: str) -> "Figure":
    """True and estimated accuracy by test year, one panel per backbone (paper Fig. 8 style).

    Parameters
    ----------
    rows : DataFrame
        Target rows of the ``temporal`` family of one dataset (``shift`` holds the year, or an
        era ``"first-last"`` whose first year places it).
    title : str
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        Per backbone: the true accuracy (black, thick) and every method's estimate, each the
        mean over seeds, with the seeds' range of the true accuracy shaded.
    """
    plt = _pyplot()
    # a year ("2017", graphs) or an era "first-last" (text), plotted at its first year
    shifts = rows["shift"].astype(str)
    data = rows.assign(year=shifts.str.extract(r"(\d{4})", expand=False).astype(int))
    xlabel = "test year" if shifts.str.fullmatch(r"\d{4}").all() else "era (first year)"
    backbones = sorted(data["backbone"].astype(str).unique())
    methods = _methods_in_order(data["method"].tolist())
    ncols = min(4, len(backbones))
    nrows = math.ceil(len(backbones) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 3.0 * nrows + 0.8),
                             squeeze=False, sharey=True, layout="constrained")
    colors = plt.get_cmap("tab10")
    for ax, backbone in zip(axes.flat, backbones):
        sub = data[data["backbone"].astype(str) == backbone]
        truth = sub.drop_duplicates(["seed", "year"]).groupby("year")["true_accuracy"]
        years = truth.mean().index.to_numpy()
        ax.fill_between(years, truth.min(), truth.max(), color="0.85", zorder=1)
        ax.plot(years, truth.mean(), color="black", lw=2.4, label="true", zorder=4)
        for mi, method in enumerate(methods):
            est = sub[sub["method"] == method].groupby("year")["estimated_accuracy"].mean()
            ax.plot(est.index, est.values, marker="o", ms=3, lw=1.2, color=colors(mi % 10),
                    label=method, zorder=3)
        ax.set_title(backbone, fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.set_xlabel(xlabel, fontsize=8)
    for ax in axes.flat[len(backbones):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(6, len(labels)), fontsize=7,
               frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


_VARIANT_RE: Final = re.compile(r"^(?P<base>[^\[]+)\[(?P<spec>[^\]]*)\]$")


def parse_variant(method: str) -> tuple[str, dict[str, str]]:
    """Split a method label into its registry key and variant parameters.

    Examples
    --------
    >>> parse_variant("alsa-g[freeze=peaks+variances]")
    ('alsa-g', {'freeze': 'peaks+variances'})
    >>> parse_variant("alsa-g[default]"), parse_variant("atc-mc")
    (('alsa-g', {}), ('atc-mc', {}))
    """
    match = _VARIANT_RE.match(method)
    if not match:
        return method, {}
    params: dict[str, str] = {}
    for part in match["spec"].split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            params[key.strip()] = value.strip()
    return match["base"], params


def plot_ablations(rows: pd.DataFrame) -> list[tuple[str, str, "Figure"]]:
    """Figures of an ablation report: frozen groups (paper Fig. 3) and sweeps (Fig. 9–10).

    Parameters
    ----------
    rows : DataFrame
        Target rows (``tables["rows"]``) whose methods are variant labels
        (``alsa-g[freeze=peaks]``, ``alsa-g[alpha=0.5]``, ``alsa-g[default]``).

    Returns
    -------
    list of (file stem, caption, Figure)
        ``ablation-freeze`` when frozen variants exist, ``sweep-<param>`` for every numeric
        parameter with at least one variant; empty when the rows hold no variants. MAE is over
        every target split of a dataset, averaged over seeds, one line or bar group per
        dataset and backbone.
    """
    plt = _pyplot()
    parsed = {m: parse_variant(m) for m in rows["method"].unique()}
    if not any(p for _, p in parsed.values()) and not any(m.endswith("[default]") for m in parsed):
        return []
    per_seed = rows.groupby(["dataset", "backbone", "seed", "method"])["abs_error_pp"].mean()
    mae = per_seed.groupby(["dataset", "backbone", "method"]).mean().reset_index()
    mae["group"] = mae["dataset"].astype(str) + " · " + mae["backbone"].astype(str)
    groups = sorted(mae["group"].unique())
    figs: list[tuple[str, str, Figure]] = []

    freeze = [m for m, (_, p) in parsed.items() if "freeze" in p]
    defaults = [m for m in parsed if m.endswith("[default]")]
    if freeze:
        order = sorted(defaults) + sorted(freeze, key=lambda m: (len(parsed[m][1]["freeze"]), m))
        fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) * len(order) / 3), 3.6))
        width = 0.8 / len(order)
        x = np.arange(len(groups))
        for i, method in enumerate(order):
            label = "learn all" if method in defaults else "fix " + parsed[method][1]["freeze"]
            values = [
                float(mae[(mae["group"] == g) & (mae["method"] == method)]["abs_error_pp"].mean())
                for g in groups
            ]
            ax.bar(x + (i - (len(order) - 1) / 2) * width, values, width, label=label)
        ax.set_xticks(x, groups, fontsize=8, rotation=20, ha="right")
        ax.set_ylabel("MAE (percentage points)", fontsize=8)
        ax.legend(fontsize=7, ncol=len(order), frameon=False)
        ax.set_title("ALSA with parameter groups frozen at initialisation", fontsize=9)
        fig.tight_layout()
        figs.append(("ablation-freeze", "ALSA ablation: frozen parameter groups", fig))

    sweep_keys = sorted({k for _, p in parsed.values() for k in p if k != "freeze"})
    colors = plt.get_cmap("tab10")
    for key in sweep_keys:
        points: list[tuple[str, float]] = []
        for method, (_, params) in parsed.items():
            if set(params) == {key}:
                try:
                    points.append((method, float(params[key])))
                except ValueError:
                    continue
        if not points:
            continue
        fig, ax = plt.subplots(figsize=(6.0, 3.6))
        for gi, group in enumerate(groups):
            sub = mae[mae["group"] == group].set_index("method")["abs_error_pp"]
            xy = sorted((v, float(sub[m])) for m, v in points if m in sub.index)
            color = colors(gi % 10)
            if xy:
                ax.plot([p[0] for p in xy], [p[1] for p in xy], marker="o", color=color,
                        label=group)
            for method in defaults:
                if method in sub.index:
                    ax.axhline(float(sub[method]), color=color, ls="--", lw=1, alpha=0.7)
        if key == "n_anchors":
            ax.set_xscale("log")
        ax.set_xlabel(key, fontsize=8)
        ax.set_ylabel("MAE (percentage points)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, frameon=False)
        ax.set_title(f"MAE against {key} (dashed: the default setting)", fontsize=9)
        fig.tight_layout()
        figs.append((f"sweep-{artifact_key(key)}", f"ALSA sweep over {key}", fig))
    return figs


def simplex_plane_basis() -> np.ndarray:
    """Orthonormal basis (2, 3) of the plane orthogonal to (1, 1, 1) in 3-class logit space.

    Adding a constant to every logit moves a point along (1, 1, 1) and leaves the softmax
    unchanged, so this plane shows what a classifier's confidence sees.

    Examples
    --------
    >>> B = simplex_plane_basis()
    >>> np.allclose(B @ B.T, np.eye(2)), np.allclose(B @ np.ones(3), 0)
    (True, True)
    """
    return np.array(
        [[1.0, -1.0, 0.0], [1.0, 1.0, -2.0]], dtype=float
    ) / np.array([[math.sqrt(2.0)], [math.sqrt(6.0)]])


def plot_alsa_anchors(
    *,
    positions: np.ndarray,
    peaks: np.ndarray,
    variances: np.ndarray,
    val_logits: np.ndarray,
    val_labels: np.ndarray,
    surface: Any,
    title: str,
    grid_size: int = 160,
) -> "Figure":
    """ALSA's anchors (paper Fig. 4) and probability surface (Fig. 1d/5d) for a 3-class run.

    Parameters
    ----------
    positions : ndarray of shape (k, 3)
        Fitted anchor positions in logit space.
    peaks, variances : ndarray of shape (k,)
        Fitted peak influences (sign = pushes towards correct / incorrect) and variances (a
        smaller magnitude spreads the influence further).
    val_logits : ndarray of shape (n, 3)
        Validation logits the anchors were fitted on.
    val_labels : ndarray of shape (n,)
        Their labels (to color points correct / incorrect).
    surface : callable
        ``surface(logits (m, 3)) -> (m,)``: the fitted estimator's probability of a correct
        prediction, e.g. ``ALSA.predict_proba_correct``.
    title : str
        Figure title.
    grid_size : int, default=160
        Grid points per axis of the surface.

    Returns
    -------
    matplotlib.figure.Figure
        Left: anchors projected on the plane orthogonal to (1, 1, 1), colored by peak, sized by
        influence extent ``1/|v|``, over the validation logits. Right: the probability of a
        correct prediction over a grid on that plane (shifted to the validation logits' mean
        offset along (1, 1, 1)), with the validation logits colored by correctness.
    """
    plt = _pyplot()
    from matplotlib.colors import TwoSlopeNorm

    basis = simplex_plane_basis()
    val_xy = val_logits @ basis.T
    anc_xy = positions @ basis.T
    correct = val_logits.argmax(axis=1) == val_labels
    both = np.vstack([val_xy, anc_xy])
    lo, hi = np.percentile(both, 0.5, axis=0), np.percentile(both, 99.5, axis=0)
    span = np.maximum(hi - lo, 1e-6)
    lo, hi = lo - 0.08 * span, hi + 0.08 * span

    fig, (ax_a, ax_s) = plt.subplots(1, 2, figsize=(11, 4.8))
    ax_a.scatter(val_xy[:, 0], val_xy[:, 1], s=2, color="0.75", alpha=0.4, linewidths=0,
                 label="validation logits")
    vmax = float(np.max(np.abs(peaks))) or 1.0
    extent = 1.0 / np.maximum(np.abs(variances), 1e-12)
    sizes = 6 + 90 * (extent - extent.min()) / max(float(np.ptp(extent)), 1e-12)
    sc = ax_a.scatter(
        anc_xy[:, 0], anc_xy[:, 1], c=peaks, s=sizes, cmap="RdYlGn",
        norm=TwoSlopeNorm(vcenter=0.0, vmin=-vmax, vmax=vmax), edgecolors="k", linewidths=0.2,
    )
    fig.colorbar(sc, ax=ax_a, label="peak influence p")
    ax_a.set_title(f"{len(peaks)} anchors (size ∝ influence extent 1/|v|)", fontsize=9)

    offset = float(np.mean(val_logits.mean(axis=1)))
    gx = np.linspace(lo[0], hi[0], grid_size)
    gy = np.linspace(lo[1], hi[1], grid_size)
    xx, yy = np.meshgrid(gx, gy)
    plane = np.stack([xx.ravel(), yy.ravel()], axis=1) @ basis + offset
    q = np.asarray(surface(plane), dtype=float).reshape(xx.shape)
    im = ax_s.contourf(xx, yy, q, levels=np.linspace(0.0, 1.0, 21), cmap="RdYlGn")
    fig.colorbar(im, ax=ax_s, label="P(correct | z)")
    ax_s.scatter(val_xy[correct, 0], val_xy[correct, 1], s=2, color="tab:green", alpha=0.35,
                 linewidths=0, label="correct")
    ax_s.scatter(val_xy[~correct, 0], val_xy[~correct, 1], s=3, color="tab:red", alpha=0.6,
                 linewidths=0, label="incorrect")
    ax_s.set_title("probability of a correct prediction over the logit plane", fontsize=9)
    for ax in (ax_a, ax_s):
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_xlabel("(z₁ − z₂)/√2", fontsize=8)
        ax.set_ylabel("(z₁ + z₂ − 2z₃)/√6", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(loc="upper right", fontsize=7, markerscale=4)
    fig.suptitle(
        f"{title}\nlogits projected on the plane orthogonal to (1, 1, 1); influence decays with "
        "cosine distance, not the distance drawn",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def _save_png(fig: "Figure", path: Path, dpi: int = 110) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    _pyplot().close(fig)
    data = buf.getvalue()
    path.write_bytes(data)
    return data


# --------------------------------------------------------------------------------------- report
def artifact_key(text: str) -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) made from ``text``.

    Examples
    --------
    >>> artifact_key("fmnist_Ablations report")
    'fmnist-ablations-report'
    """
    key = _KEY_RE.sub("-", text.lower()).strip("-")
    return key or "report"


def is_variant(method: str) -> bool:
    """Whether a method name is an ablation variant such as ``alsa-g[freeze=positions]``."""
    return "[" in method


def write_report(
    db: str | Path | None = None,
    out_dir: str | Path | None = None,
    run_name: str | None = None,
    publish_artifacts: bool = True,
    *,
    run_keys: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    title: str | None = None,
    anchor_plots: bool = True,
    fingerprint: str | None = None,
) -> ReportRef:
    """Write ``<out_dir>/<run_name>/`` from the ``report_rows`` in DuckDB, optionally as artifacts.

    Parameters
    ----------
    db : str or Path, optional
        DuckDB file; default :func:`storage.paths.db_path`.
    out_dir : str or Path, optional
        Parent folder of the report; default :func:`storage.paths.reports_dir`
        (``<state>/reports/``).
    run_name : str, optional
        Report folder name; default the suite names joined by ``-`` (e.g. ``fmnist``).
    publish_artifacts : bool, default=True
        Also create Prefect artifacts: tables ``<run>-mae``, ``<run>-correlation`` and
        ``<run>-coverage`` (where intervals are stored) and the markdown ``<run>-report`` with
        the plots embedded. Needs a Prefect API (a flow run, or
        the ephemeral server).
    run_keys : sequence of str, optional
        Report only these runs; default every run in the database.
    methods : sequence of str, optional
        Report only these methods; default every method that is not an ablation variant
        (:func:`is_variant`).
    title : str, optional
        First heading of ``report.md``.
    anchor_plots : bool, default=True
        Draw ALSA's anchors and probability surface for runs with 3 classes.
    fingerprint : str, optional
        What the report covers (the pipeline's :func:`tasks.stages.report_fingerprint`),
        written to ``<folder>/.fingerprint`` for :func:`read_fingerprint`; None removes it.

    Returns
    -------
    ReportRef
        The report's name and folder. The folder holds ``report.md``, ``mae.txt`` (the terminal
        table), ``mae.csv``, ``mae_table.csv``, ``correlation.csv``, ``correlation_table.csv``,
        ``estimates.csv``, ``coverage.csv`` and ``coverage_table.csv`` (where intervals are
        stored), ``per_class_mae.csv`` (where per-class estimates are stored),
        ``scatter-<dataset>.png`` and ``alsa-<run_key>.png``.

    Raises
    ------
    ValueError
        If the selection holds no target estimates (names what was asked and what exists).
    """
    from storage.db import connect
    from storage.estimates import read_report_rows

    with connect(db, read_only=True) as con:
        df = read_report_rows(con)
        df = _select(df, run_keys=run_keys, methods=methods)
        scores = _score_methods(df)
        if scores:  # score methods have no accuracy of their own: a section of their own
            score_rows = _score_tables(con, scores, df["run_key"].unique().tolist())
            df = df[~df["method"].isin(scores)]
            if df.empty:
                raise ValueError(
                    f"methods must include a method that estimates accuracy; got only the score "
                    f"methods {scores}, which the report maps in a section of their own."
                )
        tables = build_report_tables(df)
        if scores:
            tables.update(score_rows)
        per_class = per_class_mae(con, tables["rows"])
        if not per_class.empty:
            tables["per_class_mae"] = per_class
            tables["per_class_table"] = _per_class_wide(per_class)
        anchor_figs = _anchor_figures(con, tables["rows"]) if anchor_plots else []

    name = run_name or "-".join(sorted(tables["rows"]["suite"].astype(str).unique()))
    folder = Path(out_dir) if out_dir is not None else reports_dir()
    folder = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():
        if stale.is_file() and stale.suffix in {".md", ".csv", ".png", ".txt"}:
            stale.unlink()

    tables["mae"].to_csv(folder / "mae.csv", index=False)
    tables["mae_table"].to_csv(folder / "mae_table.csv")
    tables["correlation"].to_csv(folder / "correlation.csv", index=False)
    tables["correlation_table"].to_csv(folder / "correlation_table.csv")
    tables["rows"].to_csv(folder / "estimates.csv", index=False)
    tables["ranks"].to_csv(folder / "ranks.csv", index=False)
    tables["mean_rank"].to_csv(folder / "mean_rank.csv")
    tables["worst_family"].to_csv(folder / "worst_family.csv", index=False)
    if "coverage" in tables:
        tables["coverage"].to_csv(folder / "coverage.csv", index=False)
        tables["coverage_table"].to_csv(folder / "coverage_table.csv")
    if "per_class_mae" in tables:
        tables["per_class_mae"].to_csv(folder / "per_class_mae.csv", index=False)
    if "score_mapped" in tables:
        tables["score_mapped"].to_csv(folder / "score_mapped.csv", index=False)
        tables["score_correlation"].to_csv(folder / "score_correlation.csv", index=False)
    (folder / "mae.txt").write_text(format_mae_text(tables) + "\n", encoding="utf-8")

    pngs: list[tuple[str, str, bytes]] = []
    rows = tables["rows"]
    for (suite, dataset), sub in rows.groupby(["suite", "dataset"], sort=True):
        file = f"scatter-{artifact_key(str(dataset))}.png"
        fig = plot_scatter(sub, title=f"{suite} / {dataset}: estimated vs true accuracy")
        pngs.append((f"Estimated vs true accuracy, {dataset}", file, _save_png(fig, folder / file)))
    for (suite, dataset), sub in rows[rows["shift_family"] == TEMPORAL_FAMILY].groupby(
        ["suite", "dataset"], sort=True
    ):
        file = f"temporal-{artifact_key(str(dataset))}.png"
        fig = plot_temporal(sub, title=f"{suite} / {dataset}: accuracy by test year")
        pngs.append((f"True and estimated accuracy by year, {dataset}", file,
                     _save_png(fig, folder / file)))
    for stem, caption, fig in plot_ablations(rows):
        pngs.append((caption, f"{stem}.png", _save_png(fig, folder / f"{stem}.png")))
    for run_key, fig in anchor_figs:
        file = f"alsa-{artifact_key(run_key)}.png"
        pngs.append((f"ALSA anchors and probability surface, {run_key}", file,
                     _save_png(fig, folder / file)))

    heading = title or f"alsa-bench report: {name}"
    notes = [f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} from `report_rows`."]
    md = render_markdown(tables, title=heading, images=[(c, f) for c, f, _ in pngs], notes=notes)
    (folder / "report.md").write_text(md, encoding="utf-8")
    marker = folder / FINGERPRINT_FILE
    if fingerprint is None:
        marker.unlink(missing_ok=True)
    else:
        marker.write_text(fingerprint + "\n", encoding="utf-8")

    if publish_artifacts:
        _publish(tables, name=name, title=heading, notes=notes, pngs=pngs)
    return ReportRef(name=name, folder=str(folder.resolve()))


def read_fingerprint(folder: str | Path) -> str | None:
    """The fingerprint :func:`write_report` left in a report folder, or None."""
    marker = Path(folder) / FINGERPRINT_FILE
    return marker.read_text(encoding="utf-8").strip() if marker.is_file() else None


def _score_methods(df: pd.DataFrame) -> list[str]:
    """The score methods (``needs_score_map``: MaNo, nuclear norm) among the rows' methods."""
    from estimators import score_estimators

    present = set(df["method"].astype(str))
    return [m for m in score_estimators() if m in present]


def _score_tables(con: Any, methods: Sequence[str], run_keys: Sequence[str]) -> dict[str, Any]:
    """The score methods' section: mapped accuracies, their MAE and correlations
    (:mod:`tasks.score_protocol`)."""
    from tasks.score_protocol import map_scores, read_score_rows, score_correlations

    mapped = map_scores(read_score_rows(con, methods, run_keys))
    ok = mapped.dropna(subset=["estimated_accuracy"])
    if ok.empty:
        return {}
    per_seed = (ok.groupby(["dataset", "shift_family", "backbone", "method", "seed"])["abs_error"]
                .mean().mul(100).reset_index())
    agg = (per_seed.groupby(["dataset", "shift_family", "backbone", "method"])["abs_error"]
           .agg(["mean", "std"]).reset_index())
    agg["cell"] = [_fmt_mae(m, sd, False)
                   for m, sd in zip(agg["mean"], agg["std"], strict=True)]
    mae_table = agg.pivot_table(index=["dataset", "shift_family", "backbone"], columns="method",
                                values="cell", aggfunc="first")
    corr = score_correlations(mapped)
    corr = corr[corr["n_splits"] > 0]
    corr_table = corr.assign(
        cell=[f"R² {r2:.3f} · ρ {rho:.3f} · score ρ {sp:.3f}" for r2, rho, sp in
              zip(corr["r2"], corr["pearson"], corr["spearman_score"], strict=True)]
    ).pivot_table(index=["dataset", "backbone"], columns="method", values="cell",
                  aggfunc="first")
    return {"score_mapped": mapped, "score_correlation": corr, "score_mae_table": mae_table,
            "score_correlation_table": corr_table}


def _select(
    df: pd.DataFrame, *, run_keys: Sequence[str] | None, methods: Sequence[str] | None
) -> pd.DataFrame:
    out = df
    if run_keys is not None:
        wanted = set(run_keys)
        out = out[out["run_key"].isin(wanted)]
        if out.empty:
            raise ValueError(
                f"run_keys must name runs with estimates; got {sorted(wanted)}, the database has "
                f"{sorted(df['run_key'].unique().tolist())}."
            )
    if methods is None:
        out = out[~out["method"].map(is_variant)]
    else:
        wanted_m = set(methods)
        out = out[out["method"].isin(wanted_m)]
        if out.empty:
            raise ValueError(
                f"methods must name methods with estimates; got {sorted(wanted_m)}, the database "
                f"has {sorted(df['method'].unique().tolist())}."
            )
    if out.empty:
        raise ValueError(
            "No estimates to report: the report_rows view is empty. Run `alsa-bench run` first."
        )
    return out


def _anchor_figures(con: Any, rows: pd.DataFrame) -> list[tuple[str, "Figure"]]:
    """Anchor/surface figures for the first seed of every 3-class (dataset, backbone)."""
    from storage.errors import NotFoundError
    from storage.logits import read_val

    figs: list[tuple[str, Figure]] = []
    alsa_methods = [
        m for m in _methods_in_order(rows["method"].tolist())
        if m.startswith("alsa") and not is_variant(m)
    ]
    if not alsa_methods:
        return figs
    method = "alsa-g" if "alsa-g" in alsa_methods else alsa_methods[0]
    firsts = (
        rows[rows["method"] == method]
        .sort_values("seed")
        .drop_duplicates(["dataset", "backbone"])["run_key"]
        .tolist()
    )
    for run_key in firsts:
        val_logits, val_labels = read_val(con, run_key)
        if val_logits.shape[1] != 3:
            continue
        try:
            surface, anchors = _fitted_alsa(con, run_key, method)
        except NotFoundError:
            continue
        figs.append((run_key, plot_alsa_anchors(
            # the logit coordinates (an augmented space adds its constant coordinate last)
            positions=np.asarray(anchors.positions, dtype=float)[:, : val_logits.shape[1]],
            peaks=np.asarray(anchors.peaks, dtype=float),
            variances=np.asarray(anchors.variances, dtype=float),
            val_logits=np.asarray(val_logits, dtype=float),
            val_labels=np.asarray(val_labels, dtype=int),
            surface=surface, title=f"{method} on {run_key}",
        )))
    return figs


def _fitted_alsa(con: Any, run_key: str, method: str) -> tuple[Any, Any]:
    """A run's stored ALSA anchors and its q(z) under the hyper-parameters it was fitted with."""
    import json

    from estimators.alsa import ALSAAnchors, alsa_predict
    from storage.anchors import read_anchors
    from storage.estimates import read_estimates

    positions, peaks, variances = read_anchors(con, run_key, method)
    stored = [r for r in read_estimates(con, run_key) if r.method == method]
    params = json.loads(stored[0].params_json) if stored else {}
    anchors = ALSAAnchors(
        positions=np.asarray(positions, dtype=np.float32),
        peaks=np.asarray(peaks, dtype=np.float32),
        variances=np.asarray(variances, dtype=np.float32),
        kernel=params.get("kernel", "gaussian"),
        center=bool(params.get("center", False)),
        space=params.get("space", "centered" if params.get("center") else "raw"),
        tau=float(params.get("space_tau", 1.0)),
        bias=float(params.get("bias", 0.0)),
        threshold=(
            None if params.get("rectify_threshold") is None
            else float(params["rectify_threshold"])
        ),
        rectify=params.get("rectify", "per-anchor"),
    )

    def surface(logits: np.ndarray) -> np.ndarray:
        return alsa_predict(
            logits, anchors, alpha=float(params.get("alpha", 0.95)),
            rectify=params.get("rectify", "per-anchor"), peak=float(params.get("peak", 6.0)),
            device="cpu",
        ).q

    return surface, anchors


def _publish(
    tables: Mapping[str, pd.DataFrame],
    *,
    name: str,
    title: str,
    notes: Sequence[str],
    pngs: Sequence[tuple[str, str, bytes]],
) -> None:
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    key = artifact_key(name)
    create_table_artifact(
        key=f"{key}-mae",
        table=_records(tables["mae"]),
        description=f"{title}: MAE (percentage points) per dataset, shift family, backbone, method",
    )
    create_table_artifact(
        key=f"{key}-correlation",
        table=_records(tables["correlation"]),
        description=f"{title}: R² against y = x and Pearson ρ per dataset, backbone, method",
    )
    if "coverage" in tables:
        create_table_artifact(
            key=f"{key}-coverage",
            table=_records(tables["coverage"]),
            description=f"{title}: interval coverage and mean width per dataset, shift family, "
            "method",
        )
    images = [
        (caption, "data:image/png;base64," + base64.b64encode(data).decode("ascii"))
        for caption, _, data in pngs
    ]
    create_markdown_artifact(
        key=f"{key}-report",
        markdown=render_markdown(tables, title=title, images=images, notes=notes),
        description=title,
    )


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of native Python values (NaN → None), as Prefect's table artifacts need."""
    out = []
    for rec in df.to_dict(orient="records"):
        out.append({str(k): _native(v) for k, v in rec.items()})
    return out


def _native(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
