r"""Score methods in the benchmark: the meta-set map from score to accuracy.

MaNo (Xie et al., NeurIPS 2024), the nuclear norm (Deng et al., ICML 2023), Entropy (Wang et
al. 2020) and ProjNorm (Yu et al., ICML 2022; a model-aware method) return a label-free
*score*, not an accuracy (:mod:`estimators.maths.score_map`). Their papers turn a score
into an accuracy with a regression fitted on a labelled *meta-set*: shifted copies of the source
data whose accuracies are known (Deng & Zheng, CVPR 2021). The benchmark does the same, honestly,
within each run (one dataset × backbone × seed):

* the meta-set is the run's **corruption family** (``shift_family == "synthetic"``): every
  corrupted copy of the in-distribution test pool, with its true accuracy;
* a split of **another family** (label shift, sub-population, domain, natural, temporal, ...)
  is scored with the line :math:`\hat a = \operatorname{clip}_{[0,1]}(\alpha s + \beta)` fitted by
  least squares on the whole meta-set (:class:`estimators.maths.score_map.ScoreMap`);
* a split **of the corruption family** is scored with the line fitted on the other corruption
  *types* only (leave one corruption type out: every severity of ``gaussian_noise`` is held out
  together), so no split is ever scored by a map that saw it or a milder copy of it;
* a run without a corruption family, or with fewer than :data:`MIN_META_TYPES` corruption types
  (the graph suite, ``sotu-party``), has no meta-set: its score rows get no accuracy, and the
  report says so instead of inventing a map.

Only the evaluation side reads target labels, as everywhere in the benchmark: the estimators
returned scores from logits alone, and this module (called by the report) pairs them with the
meta-set's true accuracies. Besides the mapped accuracies' MAE the report gives, per backbone,
:math:`R^2` against :math:`y = x` and Pearson :math:`\rho` of mapped against true accuracy, and
the Spearman :math:`\rho` of the raw score against true accuracy (how well the score ranks
shifts before any map, the number the score papers themselves report).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import pandas as pd

from estimators import ScoreMap
from tasks.report.stats import fmt_mae, pearson, r2_identity

__all__ = [
    "META_FAMILY",
    "MIN_META_TYPES",
    "map_scores",
    "read_score_rows",
    "score_correlations",
    "score_methods",
    "score_tables",
]

#: The shift family whose splits form a run's labelled meta-set.
META_FAMILY: Final[str] = "synthetic"
#: Fewest corruption types a meta-set needs (leave-one-type-out must still leave two).
MIN_META_TYPES: Final[int] = 3

_COLUMNS: Final[tuple[str, ...]] = (
    "run_key", "dataset", "backbone", "seed", "split", "shift_family", "shift", "method",
    "score", "true_accuracy",
)


def _check(rows: pd.DataFrame) -> None:
    if not isinstance(rows, pd.DataFrame):
        raise TypeError(f"rows must be a pandas DataFrame; got {type(rows).__name__}.")
    missing = [c for c in _COLUMNS if c not in rows.columns]
    if missing:
        raise ValueError(
            f"rows must have the columns {list(_COLUMNS)}; missing {missing} (got "
            f"{list(rows.columns)})."
        )


def map_scores(rows: pd.DataFrame, *, min_types: int = MIN_META_TYPES) -> pd.DataFrame:
    """Accuracy of every score row through its run's meta-set map (module docstring).

    Parameters
    ----------
    rows : pandas.DataFrame
        One row per run × target split × score method with the columns ``run_key``,
        ``dataset``, ``backbone``, ``seed``, ``split``, ``shift_family``, ``shift``, ``method``,
        ``score`` and ``true_accuracy`` (:func:`read_score_rows`).
    min_types : int, default 3
        Fewest corruption types a run's meta-set must hold.

    Returns
    -------
    pandas.DataFrame
        ``rows`` with ``estimated_accuracy``, ``abs_error`` (NaN where the run has no meta-set)
        and ``map`` (``"all-synthetic"``, ``"leave-<type>-out"`` or ``"no meta-set"``) added.

    Raises
    ------
    TypeError, ValueError
        If ``rows`` is not a DataFrame with those columns, or ``min_types < 2``.

    Examples
    --------
    >>> rows = pd.DataFrame({
    ...     "run_key": "d.b.s0", "dataset": "d", "backbone": "b", "seed": 0,
    ...     "split": ["a-1", "b-1", "c-1", "ls"],
    ...     "shift_family": ["synthetic"] * 3 + ["label_shift"],
    ...     "shift": ["a", "b", "c", "dirichlet"], "method": "mano",
    ...     "score": [0.2, 0.4, 0.6, 0.5], "true_accuracy": [0.3, 0.5, 0.7, 0.6]})
    >>> map_scores(rows)["estimated_accuracy"].round(6).tolist()
    [0.3, 0.5, 0.7, 0.6]
    """
    _check(rows)
    if isinstance(min_types, bool) or not isinstance(min_types, int) or min_types < 2:
        raise ValueError(f"min_types must be an integer >= 2; got {min_types!r}.")
    out = rows.copy()
    estimated = np.full(len(out), np.nan)
    how = np.array(["no meta-set"] * len(out), dtype=object)
    for _, group in out.groupby(["run_key", "method"], sort=False):
        meta = group[(group["shift_family"] == META_FAMILY)
                     & np.isfinite(group["score"].astype(float))]
        types = sorted(meta["shift"].unique())
        if len(types) < min_types:
            continue
        whole = _fit(meta)
        for pos, row in zip(group.index, group.itertuples(index=False), strict=True):
            i = out.index.get_loc(pos)
            if not math.isfinite(float(row.score)):
                continue
            if row.shift_family == META_FAMILY:
                rest = meta[meta["shift"] != row.shift]
                line = _fit(rest)
                how[i] = f"leave-{row.shift}-out"
            else:
                line = whole
                how[i] = "all-synthetic"
            if line is not None:
                estimated[i] = line.predict(float(row.score))
            else:
                how[i] = "no meta-set"
    out["estimated_accuracy"] = estimated
    out["abs_error"] = np.abs(estimated - out["true_accuracy"].astype(float).to_numpy())
    out["map"] = how
    return out


def _fit(meta: pd.DataFrame) -> ScoreMap | None:
    """The least-squares line on a meta-set, or None when its scores cannot define one."""
    s = meta["score"].astype(float).to_numpy()
    a = meta["true_accuracy"].astype(float).to_numpy()
    if s.size < 2 or np.ptp(s) == 0.0:
        return None
    return ScoreMap("ols").fit(s, a)


def score_correlations(mapped: pd.DataFrame) -> pd.DataFrame:
    r"""Per dataset × backbone × method: MAE, :math:`R^2` and :math:`\rho` of the map, and the
    raw score's rank correlation.

    Parameters
    ----------
    mapped : pandas.DataFrame
        Output of :func:`map_scores`.

    Returns
    -------
    pandas.DataFrame
        Columns ``dataset``, ``backbone``, ``method``, ``n_splits`` (splits with a mapped
        accuracy), ``mae_pp`` (mean absolute error in percentage points), ``r2`` (against
        :math:`y = x`, :func:`tasks.report.stats.r2_identity`), ``pearson`` (mapped vs true),
        ``spearman_score`` (raw score vs true accuracy over every split with a score).
    """
    from scipy.stats import spearmanr

    records: list[dict[str, Any]] = []
    for (dataset, backbone, method), g in mapped.groupby(
        ["dataset", "backbone", "method"], sort=True
    ):
        ok = g[np.isfinite(g["estimated_accuracy"].astype(float))]
        scored = g[np.isfinite(g["score"].astype(float))]
        rho = math.nan
        if len(scored) >= 3 and scored["score"].nunique() > 1 and scored["true_accuracy"].nunique() > 1:
            rho = float(spearmanr(scored["score"], scored["true_accuracy"]).statistic)
        records.append({
            "dataset": dataset, "backbone": backbone, "method": method,
            "n_splits": int(len(ok)),
            "mae_pp": float(100 * ok["abs_error"].mean()) if len(ok) else math.nan,
            "r2": r2_identity(ok["estimated_accuracy"], ok["true_accuracy"]) if len(ok) >= 2
            else math.nan,
            "pearson": pearson(ok["estimated_accuracy"], ok["true_accuracy"]) if len(ok) >= 2
            else math.nan,
            "spearman_score": rho,
        })
    return pd.DataFrame.from_records(
        records, columns=["dataset", "backbone", "method", "n_splits", "mae_pp", "r2", "pearson",
                          "spearman_score"],
    )


def read_score_rows(con: Any, methods: Sequence[str], run_keys: Sequence[str] | None = None
                    ) -> pd.DataFrame:
    """The score rows of the benchmark: one per run × target split × score method.

    Reads the score from each estimate's ``diagnostics_json`` (``"score"``), joined with the
    split's family, shift and true accuracy from the ``report_rows`` view.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection to the benchmark database.
    methods : sequence of str
        Score methods to read (``mano``, ``nuclear-norm``).
    run_keys : sequence of str, optional
        Only these runs.

    Returns
    -------
    pandas.DataFrame
        The columns :func:`map_scores` needs; empty when no such estimate is stored.
    """
    if not methods:
        return pd.DataFrame(columns=list(_COLUMNS))
    marks = ", ".join("?" for _ in methods)
    sql = (
        "SELECT e.run_key, r.dataset, r.backbone, r.seed, e.split, r.shift_family, r.shift, "
        "e.method, e.diagnostics_json, r.true_accuracy "
        "FROM estimates e JOIN report_rows r ON r.run_key = e.run_key AND r.split = e.split "
        f"AND r.method = e.method WHERE e.method IN ({marks})"
    )
    params: list[Any] = list(methods)
    if run_keys:
        sql += f" AND e.run_key IN ({', '.join('?' for _ in run_keys)})"
        params += list(run_keys)
    df = con.execute(sql + " ORDER BY e.run_key, e.method, e.split", params).df()

    def score_of(text: Any) -> float:
        try:
            value = json.loads(text or "{}").get("score")
        except (TypeError, ValueError):
            return math.nan
        return float(value) if isinstance(value, (int, float)) else math.nan

    df["score"] = [score_of(t) for t in df.pop("diagnostics_json")]
    return df[list(_COLUMNS)]


def score_methods(df: pd.DataFrame) -> list[str]:
    """The score methods among the rows' methods: the score estimators (``needs_score_map``:
    MaNo, nuclear norm, Entropy) and the model-aware scores (ProjNorm)."""
    from estimators import score_estimators
    from tasks.methods import MODEL_AWARE_SCORES

    present = set(df["method"].astype(str))
    return [m for m in (*score_estimators(), *MODEL_AWARE_SCORES) if m in present]


def score_tables(con: Any, methods: Sequence[str], run_keys: Sequence[str]) -> dict[str, Any]:
    """The report's section of the score methods: mapped accuracies (``score_mapped``), their
    correlations (``score_correlation``) and the wide ``score_mae_table`` and
    ``score_correlation_table``; empty when no split gets a mapped accuracy."""
    mapped = map_scores(read_score_rows(con, methods, run_keys))
    ok = mapped.dropna(subset=["estimated_accuracy"])
    if ok.empty:
        return {}
    per_seed = (ok.groupby(["dataset", "shift_family", "backbone", "method", "seed"])["abs_error"]
                .mean().mul(100).reset_index())
    agg = (per_seed.groupby(["dataset", "shift_family", "backbone", "method"])["abs_error"]
           .agg(["mean", "std"]).reset_index())
    agg["cell"] = [fmt_mae(m, sd, False)
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
