"""A parameter-free feature-aware rule on the benchmark: the mean of ALSA-E and DistCS.

Issue 25, item 4 asks whether features help ``auto``. As ridge members they did not
(``benchmarks/auto_with_features.py``). This script measures the simplest rule that uses them,
one with nothing fitted, so its error on each dataset is already held-out evidence: the plain
mean of ALSA-E's and DistCS's estimates, next to both and to ATC-MC and COT, on every split of
the database where both exist. MAE in percentage points, per dataset and pooled::

    PYTHONPATH=. python benchmarks/feature_mean_rule.py [--db .alsa-bench/bench.duckdb]
"""

from __future__ import annotations

import argparse

import duckdb

QUERY = """
with w as (
  select split_part(run_key, '.', 1) as dataset, run_key, split, max(true_accuracy) as t,
    max(case when method = 'alsa-e' then estimated_accuracy end) as ae,
    max(case when method = 'distcs' then estimated_accuracy end) as dc,
    max(case when method = 'atc-mc' then estimated_accuracy end) as atc,
    max(case when method = 'cot' then estimated_accuracy end) as cot
  from estimates group by all
)
select {group} as dataset, count(*) as splits,
  100 * avg(abs(ae - t)), 100 * avg(abs(dc - t)), 100 * avg(abs((ae + dc) / 2 - t)),
  100 * avg(abs(atc - t)), 100 * avg(abs(cot - t))
from w where ae is not null and dc is not null and t is not null
{tail}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=".alsa-bench/bench.duckdb")
    args = ap.parse_args()
    con = duckdb.connect(args.db, read_only=True)
    try:
        rows = con.sql(QUERY.format(group="dataset",
                                    tail="group by dataset order by dataset")).fetchall()
        rows += con.sql(QUERY.format(group="'pooled'", tail="")).fetchall()
    finally:
        con.close()
    print("| dataset | splits | ALSA-E | DistCS | mean of the two | ATC-MC | COT |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for dataset, n, *maes in rows:
        print(f"| {dataset} | {n:,} | " + " | ".join(f"{m:.2f}" for m in maes) + " |")


if __name__ == "__main__":
    main()
