"""Does GDE's disagreement rate help ``auto``? Leave-one-dataset-out on the benchmark database.

Where a run has a peer (another seed of the same dataset and backbone), the peers step stores
GDE (``tasks/stages/peers.py``): its estimate is the agreement of the two models, its
``disagreement`` a label-free signal of how far the target moved the two models apart. This
script asks whether ``auto``'s ridge correction (``estimators/trust/stacking.py``) gets better
when it reads that signal, as ``benchmarks/auto_feature_signals.py`` asked for the feature
signals. Variants, each the shipped stack (same members, the same inner leave-one-dataset-out
choice of the ridge penalty, the same equal weight per dataset) with extra columns:

* ``+ disagreement``: the disagreement rate :math:`d = 1 - \\hat a_{GDE}`;
* ``+ gde member``: GDE as one more member, :math:`\\hat a_{GDE} - \\hat a_b`;
* ``+ both``.

The outer loop leaves each dataset out in turn; only splits with every member and GDE count
(runs with a peer); the sotu-party concept-shift rows are evaluated, never fitted, and left out
of the table (as in the other scripts). GDE and ALSA-E alone are shown for comparison.

    PYTHONPATH=. python benchmarks/auto_peer_signal.py [--db .alsa-bench/bench.duckdb]

Results: docs/PERFORMANCE.md ("Does GDE's disagreement help auto?").
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import duckdb
import numpy as np
from numpy.typing import NDArray

from estimators.trust.calibration_artifact import AUTO_MEMBER_SETS
from estimators.trust.stacking import fit_correction, stack_features
from tasks.report.trust_calibration import CONCEPT_SHIFTS, calibration_table, concept_mask

MEMBERS = AUTO_MEMBER_SETS[0]
F64 = NDArray[np.float64]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=".alsa-bench/bench.duckdb")
    args = ap.parse_args()
    con = duckdb.connect(args.db, read_only=True)
    try:
        table, keys = calibration_table(con, methods=(*MEMBERS, "gde"))
    finally:
        con.close()
    concept = concept_mask(table, CONCEPT_SHIFTS)
    y, g = table.truth, table.groups
    est = {m: table.estimates[m] for m in MEMBERS}
    gde = table.estimates["gde"]
    z0, base = stack_features(table.signals, est, MEMBERS)
    variants: dict[str, list[F64]] = {
        "auto (shipped signals)": [],
        "+ disagreement": [1.0 - gde],
        "+ gde member": [gde - base],
        "+ both": [1.0 - gde, gde - base],
    }
    preds = {name: np.full(len(y), np.nan) for name in variants}
    for name in np.unique(g):
        held = g == name
        fit = ~held & ~concept
        for variant, cols in variants.items():
            z = np.column_stack([z0, *cols]) if cols else z0
            coef, penalty = fit_correction(z[fit], base[fit], y[fit], g[fit],
                                           {m: v[fit] for m, v in est.items()}, MEMBERS)
            preds[variant][held] = np.clip(base + z @ coef, 0.0, 1.0)[held]
            if cols:
                print(f"without {name}: {variant}: penalty {penalty:g}, coefficients of the "
                      f"added columns {np.round(coef[-len(cols):], 3).tolist()}")
    preds["gde alone"] = gde
    preds["alsa-e alone"] = est["alsa-e"]
    keep = ~concept
    names = list(preds)
    print(f"\n{int(keep.sum())} target splits with every member and GDE "
          f"({len(np.unique(keys['run_key']))} runs, {len(np.unique(g))} datasets; "
          f"+ {int(concept.sum())} concept-shift rows, not shown); MAE in points, leave one "
          "dataset out\n")
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
