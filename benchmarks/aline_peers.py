"""ALine-S/-D with the seeds' independently trained models against today's cheap heads.

Agreement-on-the-line (Baek et al., NeurIPS 2022; ``estimators/features/aline.py``) fits its
line on the agreements of a *family of models*. The authors' recipe (``kebaek/agreement-on-the-
line``) trains the family independently; the benchmark's default family is the backbone plus ten
cheap logistic-regression heads on its penultimate features. Where a dataset × backbone has
several seeds, the other seeds are independently trained models of the same architecture on the
same rows (``tasks/stages/peers.py``), so the family can hold them. For every run of the
database whose dataset × backbone has at least two seeds, this script estimates every target
split three ways, from the stored logits and features (no model is run):

* ``heads``: today's family (backbone + 10 heads), the benchmark's ``aline-s`` / ``aline-d``;
* ``peers + heads``: the backbone, every other seed of its dataset × backbone, the 10 heads;
* ``peers``: the backbone and the other seeds alone (``n_heads=0``), the authors' recipe on the
  models at hand;

and prints the MAE (percentage points) per dataset and pooled.

    PYTHONPATH=. python benchmarks/aline_peers.py [--db .alsa-bench/bench.duckdb]

Results: docs/PERFORMANCE.md ("ALine with the seeds as peers").
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections import defaultdict

import duckdb
import numpy as np

from estimators import get_estimator
from storage.results import current_file, read_logits_file, results_root
from tasks.stages.peers import peer_runs

VARIANTS = {"heads": {}, "peers + heads": {}, "peers": {"n_heads": 0}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=".alsa-bench/bench.duckdb")
    args = ap.parse_args()
    con = duckdb.connect(args.db, read_only=True)
    try:
        run_keys = [r[0] for r in con.sql("SELECT run_key FROM runs ORDER BY run_key").fetchall()]
        root = results_root(db=args.db)
        files = {k: root / "logits" / f"{current_file(con, 'logits', k)}.parquet"
                 for k in run_keys}
    finally:
        con.close()
    errors: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    runs_of: dict[str, int] = defaultdict(int)
    started = time.perf_counter()
    for key, peers in sorted(peer_runs(run_keys).items()):
        content = read_logits_file(files[key])
        if content.features is None:
            print(f"{key}: no stored features, skipped")
            continue
        others = [read_logits_file(files[p]) for p in peers]
        [val] = [s.split for s in content.splits if s.role == "val"]
        val_logits, val_labels = content.val()
        train = content.features.train()
        fit = {"val_features": content.features.split(val),
               "train_features": None if train is None else train[0],
               "train_labels": None if train is None else train[1]}
        peer_val = [o.val()[0] for o in others]
        runs_of[content.run.dataset] += 1
        for variant, params in VARIANTS.items():
            for method in ("aline-s", "aline-d"):
                est = get_estimator(method, seed=content.run.seed, **params)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if variant == "heads":
                        est.fit(val_logits, val_labels, **fit)
                    else:
                        est.fit(val_logits, val_labels, peer_val_logits=peer_val, **fit)
                    for info in content.targets():
                        z = content.target_logits(info.split)
                        f = content.features.split(info.split)
                        peer_t = ({} if variant == "heads" else {"peer_target_logits": [
                            o.target_logits(info.split) for o in others]})
                        a = est.estimate(z, target_features=f, **peer_t).accuracy
                        errors[(content.run.dataset, method, variant)].append(
                            100.0 * abs(a - info.true_accuracy))
        print(f"{key}: {len(peers)} peer(s), {len(content.targets())} target splits "
              f"({time.perf_counter() - started:.0f} s so far)")
    datasets = sorted(runs_of)
    header = [f"{m} {v}" for m in ("aline-s", "aline-d") for v in VARIANTS]
    print("\nMAE (percentage points) over every target split of the runs with peers\n")
    print("| dataset | runs | " + " | ".join(header) + " |")
    print("|---|---:|" + "---:|" * len(header))
    pooled: dict[str, list[float]] = defaultdict(list)
    for d in datasets:
        cells = []
        for m in ("aline-s", "aline-d"):
            for v in VARIANTS:
                e = errors[(d, m, v)]
                pooled[f"{m} {v}"] += e
                cells.append(f"{np.mean(e):.2f}")
        print(f"| {d} | {runs_of[d]} | " + " | ".join(cells) + " |")
    print(f"| pooled | {sum(runs_of.values())} | "
          + " | ".join(f"{np.mean(pooled[h]):.2f}" for h in header) + " |")


if __name__ == "__main__":
    main()
