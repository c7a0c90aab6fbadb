"""Do feature *signals* help ``auto``? Leave-one-dataset-out on the benchmark database.

``benchmarks/auto_with_features.py`` asked whether DistCS and ALine help ``auto`` as *members*
(ridge columns ``estimate - ALSA-E``): they did not. This script asks the other question of
issue 25, item 4: do the feature methods' label-free *signals* help, as extra columns of the
ridge correction (:mod:`estimators.trust.stacking`)? The signals, read from the stored estimates'
diagnostics (no estimator is rerun):

* ``far``: the fraction of target rows DistCS flags as off the training support
  (``1 - kept_fraction``; its thresholds are the validation rows' 0.99 quantiles, so ``far``
  is about 0.01 without shift);
* ``far x base``: the drop the distance check would apply to the base estimate,
  :math:`-\\mathrm{far}\\cdot\\hat a_b` (DistCS's :math:`\\hat a = (1-\\mathrm{far})\\,\\hat
  a_{kept}` with the kept rows' accuracy taken as the base's);
* ``aline r2``: how well the cheap heads' agreements fit a line (ALine's ``r2``).

Each variant is the shipped stack (same members, same inner leave-one-dataset-out choice of
the ridge penalty, same equal weight per dataset) with the extra columns appended; the outer
loop leaves each dataset out in turn. The sotu-party concept-shift rows are evaluated, never
fitted, and left out of the table. Parameter-free rules (the mean of ALSA-E and DistCS) are
shown for comparison.

    PYTHONPATH=. python benchmarks/auto_feature_signals.py [--db .alsa-bench/bench.duckdb]

Results: docs/PERFORMANCE.md ("Do feature signals help auto?").
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable, Mapping

import duckdb
import numpy as np
from numpy.typing import NDArray

from estimators.trust.calibration_artifact import AUTO_MEMBER_SETS
from estimators.trust.stacking import fit_correction, stack_features
from tasks.report.trust_calibration import CONCEPT_SHIFTS, calibration_table, concept_mask

MEMBERS = AUTO_MEMBER_SETS[0]
F64 = NDArray[np.float64]


def diagnostics(con: duckdb.DuckDBPyConnection, method: str, keys) -> list[dict]:
    rows = con.sql(
        "select run_key, split, diagnostics_json from estimates where method = ?",
        params=[method]).fetchall()
    by_key = {(r, s): json.loads(d or "{}") for r, s, d in rows}
    return [by_key[(r, s)] for r, s in zip(keys.run_key, keys.split)]


def fit_predict(z: F64, base: F64, y: F64, g: NDArray, fit: NDArray[np.bool_],
                est: Mapping[str, F64], members: tuple[str, ...]) -> F64:
    """The shipped correction (:func:`~estimators.trust.stacking.fit_correction`) fit on rows
    ``fit``, predicting every row."""
    coef, _ = fit_correction(z[fit], base[fit], y[fit], g[fit],
                             {m: v[fit] for m, v in est.items()}, members)
    return np.clip(base + z @ coef, 0.0, 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=".alsa-bench/bench.duckdb")
    args = ap.parse_args()
    con = duckdb.connect(args.db, read_only=True)
    try:
        table, keys = calibration_table(con, methods=(*MEMBERS, "distcs", "aline-s"))
        dist = diagnostics(con, "distcs", keys)
        aline = diagnostics(con, "aline-s", keys)
    finally:
        con.close()
    concept = concept_mask(table, CONCEPT_SHIFTS)
    y, g = table.truth, table.groups
    est = {m: table.estimates[m] for m in MEMBERS}
    z0, base = stack_features(table.signals, est, MEMBERS)
    far = np.array([1.0 - d["kept_fraction"] for d in dist])
    r2 = np.array([d.get("r2", np.nan) for d in aline], dtype=float)
    r2 = np.where(np.isfinite(r2), r2, 0.0)
    extra: dict[str, list[F64]] = {
        "auto (logits)": [],
        "+ far": [far],
        "+ far x base": [-far * base],
        "+ far, far x base": [far, -far * base],
        "+ far x base, aline r2": [-far * base, r2],
        "+ distcs member, far x base": [table.estimates["distcs"] - base, -far * base],
    }
    fixed: dict[str, Callable[[], F64]] = {
        "mean(alsa-e, distcs)": lambda: (est["alsa-e"] + table.estimates["distcs"]) / 2,
        "alsa-e": lambda: est["alsa-e"],
        "distcs": lambda: table.estimates["distcs"],
    }
    preds: dict[str, F64] = {name: np.full(len(y), np.nan) for name in extra}
    for name in np.unique(g):
        held = g == name
        fit = ~held & ~concept
        for variant, cols in extra.items():
            z = np.column_stack([z0, *cols]) if cols else z0
            preds[variant][held] = fit_predict(z, base, y, g, fit, est, MEMBERS)[held]
    for variant, rule in fixed.items():
        preds[variant] = rule()
    # a learned blend: one weight on DistCS, chosen on the other datasets (each weighted equally)
    grid = np.linspace(0.0, 1.0, 21)
    for variant, left in (("blend auto/distcs (LODO w)", preds["auto (logits)"]),
                          ("blend alsa-e/distcs (LODO w)", est["alsa-e"])):
        out = np.full(len(y), np.nan)
        for name in np.unique(g):
            held = g == name
            fit = ~held & ~concept
            cost = [np.mean([np.mean(np.abs((1 - w) * left[fit & (g == n)]
                                            + w * table.estimates["distcs"][fit & (g == n)]
                                            - y[fit & (g == n)]))
                             for n in np.unique(g[fit])]) for w in grid]
            w = float(grid[int(np.argmin(cost))])
            out[held] = (1 - w) * left[held] + w * table.estimates["distcs"][held]
            print(f"{variant}: without {name}, w = {w:.2f}")
        preds[variant] = out
    keep = ~concept
    names = list(preds)
    print(f"{int(keep.sum())} target splits with every method (+ {int(concept.sum())} "
          "concept-shift rows, not shown); MAE in points, leave one dataset out\n")
    print("| dataset | splits | " + " | ".join(names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    pooled: dict[str, list[float]] = defaultdict(list)
    for name in np.unique(g):
        rows = keep & (g == name)
        cells = []
        for v in names:
            e = np.abs(preds[v][rows] - y[rows]) * 100
            pooled[v] += e.tolist()
            cells.append(f"{e.mean():.2f}")
        print(f"| {name} | {int(rows.sum())} | " + " | ".join(cells) + " |")
    print(f"| pooled | {int(keep.sum())} | "
          + " | ".join(f"{np.mean(pooled[v]):.2f}" for v in names) + " |")
    per_ds = {v: [np.mean(np.abs(preds[v][keep & (g == n)] - y[keep & (g == n)]))
                  for n in np.unique(g)] for v in names}
    print("\nmean over datasets: " + ", ".join(f"{v} {100 * np.mean(per_ds[v]):.2f}"
                                                for v in names))


if __name__ == "__main__":
    main()
