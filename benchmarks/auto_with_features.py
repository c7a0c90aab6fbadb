"""Would the feature methods help ``auto``? Leave-one-dataset-out on the benchmark database.

``auto`` (:mod:`estimators.trust.auto`) is a ridge correction of ALSA-E from its members'
differences and label-free signals, calibrated on ``make bench``'s database. With the pipeline
storing penultimate features (issue 25), DistCS and ALine-S/-D estimates exist for every run whose
backbone has a linear output layer, so they can join the member set. This script answers the
question the only honest way: on the rows where every method has an estimate, it refits the
calibration leaving one dataset out at a time (the sotu-party concept-shift rows are evaluated,
never fitted) and prints each variant's MAE per dataset next to the best single method.

    PYTHONPATH=. python benchmarks/auto_with_features.py [--db .alsa-bench/bench.duckdb]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import duckdb
import numpy as np

from estimators.trust.calibration_artifact import AUTO_MEMBER_SETS, auto_key, leave_one_dataset_out
from tasks.report.trust_calibration import CONCEPT_SHIFTS, calibration_table, concept_mask

LOGIT_MEMBERS = AUTO_MEMBER_SETS[0]
VARIANTS = {
    "auto (logits)": LOGIT_MEMBERS,
    "auto + distcs": (*LOGIT_MEMBERS, "distcs"),
    "auto + distcs + aline": (*LOGIT_MEMBERS, "distcs", "aline-s", "aline-d"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=".alsa-bench/bench.duckdb")
    args = ap.parse_args()
    methods = tuple(dict.fromkeys(m for members in VARIANTS.values() for m in members))
    con = duckdb.connect(args.db, read_only=True)
    try:
        table, _ = calibration_table(con, methods=methods)
    finally:
        con.close()
    concept = concept_mask(table, CONCEPT_SHIFTS)
    records = leave_one_dataset_out(table, member_sets=list(VARIANTS.values()),
                                    evaluate_only=concept)
    keys = {auto_key(m): name for name, m in VARIANTS.items()}
    err: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if concept[r["row"]]:
            continue
        name = keys.get(r["method"], r["method"])
        err[(r["dataset"], name)].append(abs(r["estimate"] - r["truth"]) * 100)
    datasets = sorted({d for d, _ in err})
    singles = [m for m in methods]
    print(f"{len(table)} rows with every method ({int(concept.sum())} concept-shift rows "
          "evaluated only); MAE in points, leave-one-dataset-out")
    shown = ("alsa-e", "distcs", "aline-s", "aline-d")
    header = ["dataset", *VARIANTS, *shown, "best single"]
    print(" | ".join(header))
    pooled: dict[str, list[float]] = defaultdict(list)
    for d in datasets:
        cells = []
        for name in VARIANTS:
            e = err[(d, name)]
            pooled[name] += e
            cells.append(f"{np.mean(e):.2f}")
        cells += [f"{np.mean(err[(d, m)]):.2f}" for m in shown]
        best = min(singles, key=lambda m: np.mean(err[(d, m)]))
        for m in singles:
            pooled[m] += err[(d, m)]
        cells.append(f"{best} {np.mean(err[(d, best)]):.2f}")
        print(" | ".join([d, *cells]))
    best = min(singles, key=lambda m: np.mean(pooled[m]))
    print(" | ".join(["pooled", *(f"{np.mean(pooled[n]):.2f}" for n in VARIANTS),
                      *(f"{np.mean(pooled[m]):.2f}" for m in shown),
                      f"{best} {np.mean(pooled[best]):.2f}"]))


if __name__ == "__main__":
    main()
