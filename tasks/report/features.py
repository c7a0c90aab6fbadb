"""Feature-aware against logit-only estimators: the report's section on what features buy.

The feature-aware methods (``distcs``, ``aline-s``, ``aline-d``; :mod:`estimators.features.distcs`,
:mod:`estimators.features.aline`) read the classifier's penultimate features besides its logits
(:mod:`storage.features`). Whether that helps is a property of the model and the shift (DistCS
flags rows far from the training features, so it sees covariate shift that moves features and
is blind where features stay put), so the section compares them **on the same rows** with the
logit-only estimators, per dataset, per shift family and per backbone:

* ``mae`` of each feature method, of the best logit-only method of that group (and its name),
  and of ALSA-E, in accuracy points, over the (run, split) pairs where every one of them has an
  estimate;
* ``gain``: best logit-only MAE minus the best feature method's MAE (positive: features help).

Score methods (``dispersion``) have no accuracy of their own; the score section maps them.
Model-aware methods (GNNEvaluator, ...) are neither: they are left out of both sides.

Examples
--------
>>> import pandas as pd
>>> rows = pd.DataFrame({
...     "dataset": ["d"] * 4, "shift_family": ["f"] * 4, "backbone": ["b"] * 4,
...     "run_key": ["r"] * 4, "split": ["s1", "s1", "s2", "s2"],
...     "method": ["ac", "distcs", "ac", "distcs"], "abs_error": [0.1, 0.02, 0.3, 0.1]})
>>> feature_comparison(rows)["dataset"][["dataset", "method", "mae", "best_logit_only",
...                                      "best_logit_only_mae", "gain"]].to_dict("records")
[{'dataset': 'd', 'method': 'distcs', 'mae': 6.0, 'best_logit_only': 'ac', 'best_logit_only_mae': 20.0, 'gain': 14.0}]
"""

from __future__ import annotations

from typing import Final

import pandas as pd

__all__ = ["GROUPINGS", "feature_comparison", "feature_markdown"]

#: The groupings of the section, each a list of ``report_rows`` columns.
GROUPINGS: Final[dict[str, list[str]]] = {
    "dataset": ["dataset"],
    "family": ["dataset", "shift_family"],
    "backbone": ["dataset", "backbone"],
}
#: The logit-only method always shown beside the best one.
REFERENCE: Final[str] = "alsa-e"


def _method_sets(methods: set[str]) -> tuple[list[str], list[str]]:
    from tasks.methods import MODEL_AWARE_METHODS, estimator_names, feature_method_names

    feature = [m for m in feature_method_names() if m in methods]
    logit_only = [m for m in estimator_names(features=False)
                  if m in methods and m not in MODEL_AWARE_METHODS]
    return feature, logit_only


def feature_comparison(rows: pd.DataFrame) -> dict[str, pd.DataFrame] | None:
    """The comparison tables by :data:`GROUPINGS`, or None when no feature method has rows.

    Parameters
    ----------
    rows : pandas.DataFrame
        Target rows of ``report_rows`` (``dataset``, ``shift_family``, ``backbone``,
        ``run_key``, ``split``, ``method``, ``abs_error`` as a fraction).

    Returns
    -------
    dict of str to pandas.DataFrame or None
        One long table per grouping: the grouping's columns, ``method`` (a feature method),
        ``mae``, ``best_logit_only``, ``best_logit_only_mae``, ``alsa_e_mae`` (NaN when ALSA-E
        did not run), ``gain`` (best logit-only MAE minus this method's, in points) and
        ``n`` (the (run, split) pairs compared).
    """
    rows = rows[rows["abs_error"].notna()]
    feature, logit_only = _method_sets(set(rows["method"]))
    if not feature or not logit_only:
        return None
    wide = rows.pivot_table(index=["dataset", "shift_family", "backbone", "run_key", "split"],
                            columns="method", values="abs_error", aggfunc="first")
    wide = wide[[m for m in (*feature, *logit_only) if m in wide.columns]].dropna()
    if wide.empty:
        return None
    out: dict[str, pd.DataFrame] = {}
    for name, keys in GROUPINGS.items():
        mae = wide.groupby(level=keys, observed=True).mean() * 100
        n = wide.groupby(level=keys, observed=True).size()
        records = []
        for key, values in mae.iterrows():
            key = key if isinstance(key, tuple) else (key,)
            best = min(logit_only, key=lambda m: values[m])
            for method in feature:
                records.append({
                    **dict(zip(keys, key)), "method": method, "mae": round(values[method], 2),
                    "best_logit_only": best, "best_logit_only_mae": round(values[best], 2),
                    "alsa_e_mae": (round(values[REFERENCE], 2) if REFERENCE in values
                                   else float("nan")),
                    "gain": round(values[best] - values[method], 2),
                    "n": int(n[key if len(key) > 1 else key[0]]),
                })
        out[name] = pd.DataFrame.from_records(records)
    return out


def feature_markdown(tables: dict[str, pd.DataFrame]) -> str:
    """The report section: per dataset in full, then where a family or a backbone turns the
    verdict (a feature method best in a group although not in its dataset, or the reverse)."""
    by_dataset = tables["dataset"]
    lines = [
        "## Feature-aware vs logit-only",
        "",
        "MAE in accuracy points on the same (run, split) pairs. *gain* = best logit-only MAE − "
        "the feature method's (positive: the features help). Feature methods read the "
        "classifier's penultimate features (stored by the extract stage); the logit-only "
        "methods read logits only.",
        "",
    ]
    methods = list(dict.fromkeys(by_dataset["method"]))
    header = ["dataset", *methods, "best logit-only", "ALSA-E", "best gain"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for dataset, sub in by_dataset.groupby("dataset", sort=True):
        by = sub.set_index("method")
        first = sub.iloc[0]
        gain = sub["gain"].max()
        cells = [str(dataset), *(f"{by.loc[m, 'mae']:.2f}" for m in methods),
                 f"{first['best_logit_only']} {first['best_logit_only_mae']:.2f}",
                 "–" if pd.isna(first["alsa_e_mae"]) else f"{first['alsa_e_mae']:.2f}",
                 f"**{gain:+.2f}**" if gain > 0 else f"{gain:+.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    for name, column in (("family", "shift_family"), ("backbone", "backbone")):
        table = tables[name]
        best = table.groupby(["dataset", column], sort=True)["gain"].max().reset_index()
        lines += ["", f"Best gain by {name} (points; positive: a feature method beats every "
                      f"logit-only method there):", "",
                  f"| dataset | {name} | best feature method | gain |", "|---|---|---|---|"]
        for _, row in best.iterrows():
            sub = table[(table["dataset"] == row["dataset"]) & (table[column] == row[column])]
            top = sub.loc[sub["gain"].idxmax()]
            lines.append(f"| {row['dataset']} | {row[column]} | {top['method']} "
                         f"({top['mae']:.2f} vs {top['best_logit_only']} "
                         f"{top['best_logit_only_mae']:.2f}) | {row['gain']:+.2f} |")
    return "\n".join(lines) + "\n"
