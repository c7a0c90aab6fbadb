"""GDE, Entropy and ALine with peers per dataset of a benchmark database, as markdown.

Prints the appendix ``docs/benchmark-cot-baselines.md`` (issue 32, "Offline results"): for every
dataset of the database, the MAE (percentage points, mean over every target split of the runs
that have a peer, then mean and spread over seeds) of GDE beside the methods that estimate an
accuracy on the same splits, and the MAE of the Entropy score mapped to an accuracy on each
run's corruption family (leave one corruption type out, as MaNo's: ``tasks/report/scores.py``)
beside MaNo's; a dataset without a corruption family says so.

    PYTHONPATH=. python benchmarks/cot_baselines_table.py [--db .alsa-bench/bench.duckdb]
"""

from __future__ import annotations

import argparse
import math

import duckdb
import numpy as np
import pandas as pd

from storage.estimates import read_report_rows
from tasks.report.scores import map_scores, read_score_rows

ACCURACY_METHODS = ("ac", "atc-ne", "cot", "alsa-g", "aline-s", "gde")
SCORES = ("entropy", "mano")


def _cell(per_seed: pd.Series) -> str:
    if per_seed.empty:
        return "—"
    mean = float(per_seed.mean())
    std = float(per_seed.std(ddof=1)) if len(per_seed) > 1 else math.nan
    return f"{mean:.2f}" if math.isnan(std) else f"{mean:.2f} ± {std:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=".alsa-bench/bench.duckdb")
    args = ap.parse_args()
    con = duckdb.connect(args.db, read_only=True)
    try:
        rows = read_report_rows(con)
        scores = map_scores(read_score_rows(con, SCORES))
    finally:
        con.close()
    with_gde = rows.loc[rows["method"] == "gde", ["run_key", "split"]].drop_duplicates()
    paired = rows.merge(with_gde, on=["run_key", "split"])
    print("MAE (percentage points) on the target splits of the runs with a peer, mean ± std "
          "over seeds (per seed: the mean over the runs' splits)\n")
    print("| dataset | runs | splits | " + " | ".join(ACCURACY_METHODS) + " |")
    print("|---|---:|---:|" + "---:|" * len(ACCURACY_METHODS))
    for dataset, g in paired.groupby("dataset", sort=True):
        cells = []
        for m in ACCURACY_METHODS:
            sub = g[g["method"] == m]
            cells.append(_cell(100 * sub.groupby("seed")["abs_error"].mean()))
        n_splits = len(g[g["method"] == "gde"])
        print(f"| `{dataset}` | {g['run_key'].nunique()} | {n_splits} | " + " | ".join(cells)
              + " |")
    print("\nScores through the run's corruption family (leave one corruption type out), MAE "
          "(percentage points) of the mapped accuracy, mean ± std over seeds\n")
    print("| dataset | runs | splits mapped | " + " | ".join(SCORES) + " |")
    print("|---|---:|---:|" + "---:|" * len(SCORES))
    for dataset, g in scores.groupby("dataset", sort=True):
        ok = g[np.isfinite(g["estimated_accuracy"].astype(float))]
        if ok.empty:
            print(f"| `{dataset}` | {g['run_key'].nunique()} | 0 | " + " | ".join(
                "no corruption family: no meta-set to map a score" for _ in SCORES) + " |")
            continue
        cells = [_cell(100 * ok[ok["method"] == m].groupby("seed")["abs_error"].mean())
                 for m in SCORES]
        print(f"| `{dataset}` | {g['run_key'].nunique()} | "
              f"{len(ok[ok['method'] == 'entropy'])} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
