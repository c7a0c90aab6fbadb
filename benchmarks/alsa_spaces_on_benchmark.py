"""ALSA's paper form (raw logit space) vs the default (canonical space) on benchmark logits.

Issue 15 asks that the default space and stopping rule be checked on the benchmark suites. This
script reads the logits of finished benchmark runs (read-only; copy the DuckDB file first if a
writer may hold it), fits per run

* ``alsa-g`` / ``alsa-e`` with the current defaults (``space="augmented"``, fixed 100 updates,
  calibration, ``n_anchors="auto"``): rows ``alsa-g`` / ``alsa-e``;
* ``alsa-g`` / ``alsa-e`` in the paper's form, which reproduces the code before issue 15
  (``space="raw", stop_rule="paper", calibrate=False, min_epochs=0, n_anchors=300``): rows
  ``alsa-g-raw`` / ``alsa-e-raw``;
* ``atc-mc`` and ``cot`` for reference,

each seeded with the run's seed as the benchmark does (``tasks.stages.estimate.build_estimator``),
estimates every target split and prints the MAE in percentage points: per dataset x shift
family and pooled per dataset (mean over the runs' splits, i.e. over backbones and seeds), and,
for datasets with 2 classes, per backbone and per shifted row. ``--csv`` writes every estimate.

Run::

    OMP_NUM_THREADS=1 python benchmarks/alsa_spaces_on_benchmark.py /tmp/bench.duckdb \
        [--seeds 0 1 2] [--datasets fmnist fmnist-coarse] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from estimators import get_estimator  # noqa: E402
from storage.db import connect  # noqa: E402
from storage.logits import list_splits, read_target_logits, read_val  # noqa: E402

PAPER = {"space": "raw", "stop_rule": "paper", "calibrate": False, "min_epochs": 0,
         "n_anchors": 300}

METHODS: list[tuple[str, str, dict[str, Any]]] = [
    ("alsa-g", "alsa-g", {}),
    ("alsa-e", "alsa-e", {}),
    ("alsa-g-raw", "alsa-g", PAPER),
    ("alsa-e-raw", "alsa-e", PAPER),
    ("atc-mc", "atc-mc", {}),
    ("cot", "cot", {}),
]


def run_keys(con: Any, datasets: list[str] | None, seeds: list[int] | None) -> list[tuple]:
    rows = con.execute(
        "select run_key, dataset, backbone, seed from runs order by dataset, backbone, seed"
    ).fetchall()
    return [r for r in rows
            if (datasets is None or r[1] in datasets) and (seeds is None or r[3] in seeds)]


def evaluate(db: str, datasets: list[str] | None, seeds: list[int] | None,
             methods: list[str] | None, extra: dict[str, Any]) -> pd.DataFrame:
    records = []
    with connect(db, read_only=True) as con:
        keys = run_keys(con, datasets, seeds)
        for run_key, dataset, backbone, seed in keys:
            try:
                val_logits, val_labels = read_val(con, run_key)
            except Exception as exc:  # noqa: BLE001 - an unfinished run
                print(f"skip {run_key}: {exc}", file=sys.stderr)
                continue
            splits = list_splits(con, run_key, role="target")
            targets = [(s, read_target_logits(con, run_key, s.split)) for s in splits]
            c = val_logits.shape[1]
            for name, method, params in METHODS:
                if methods and name not in methods:
                    continue
                p = dict(params)
                if name.startswith("alsa") and not name.endswith("-raw"):
                    p.update(extra)
                est = get_estimator(method, **p)
                if "seed" in est.get_params() and "seed" not in p:
                    est.set_params(seed=int(seed))
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    est.fit(val_logits, val_labels)
                fit_s = time.perf_counter() - t0
                stop = getattr(est, "stop_reason_", "")
                epochs = getattr(est, "n_epochs_", -1)
                for info, logits in targets:
                    e = est.estimate(logits)
                    records.append(dict(
                        run_key=run_key, dataset=dataset, backbone=backbone, seed=seed,
                        n_classes=c, family=info.shift_family, split=info.split,
                        method=name, estimate=float(e.accuracy),
                        true=float(info.true_accuracy),
                        abs_err=100 * abs(float(e.accuracy) - float(info.true_accuracy)),
                        fit_s=fit_s, stop=stop, epochs=epochs, n_warn=len(caught)))
                print(f"{run_key:26s} {name:11s} fit {fit_s:6.1f}s ep {epochs:4d} {stop:10s} "
                      f"MAE {np.mean([r['abs_err'] for r in records[-len(targets):]]):6.2f}",
                      file=sys.stderr, flush=True)
    return pd.DataFrame.from_records(records)


def tables(df: pd.DataFrame) -> str:
    out = []
    order = [m for m, _, _ in METHODS if m in set(df.method)]
    fam = df.pivot_table(index=["dataset", "family"], columns="method", values="abs_err",
                         aggfunc="mean")[order]
    pooled = df.pivot_table(index="dataset", columns="method", values="abs_err",
                            aggfunc="mean")[order]
    pooled.index = pd.MultiIndex.from_tuples([(d, "all (pooled)") for d in pooled.index],
                                             names=["dataset", "family"])
    both = pd.concat([fam, pooled]).sort_index()
    out.append("MAE (pp) per dataset x family, pooled over backbones and seeds "
               f"(seeds {sorted(df.seed.unique().tolist())})\n")
    out.append(both.round(2).to_markdown())
    out.append("\n\nMAE (pp) per dataset x backbone (all target splits)\n")
    out.append(df.pivot_table(index=["dataset", "backbone"], columns="method", values="abs_err",
                              aggfunc="mean")[order].round(2).to_markdown())
    fits = df.drop_duplicates(["run_key", "method"])
    fits = fits[fits.method.str.startswith("alsa")]
    out.append("\n\nALSA fits: mean fit seconds, max epochs, fraction stopped by the rule\n")
    summary = fits.groupby(["dataset", "method"]).agg(
        fit_s=("fit_s", "mean"), ep_max=("epochs", "max"),
        rule_held=("stop", lambda s: float(np.mean([x in ("converged", "crossed", "fixed")
                                                     for x in s]))))
    out.append(summary.round(2).to_markdown())
    binary = df[df.n_classes == 2]
    if len(binary):
        shifted = binary[binary.family != "clean"]
        out.append("\n\nBinary datasets, shifted rows (every family but clean): MAE (pp) per "
                   "backbone and pooled\n")
        t = shifted.pivot_table(index=["dataset", "backbone"], columns="method",
                                values="abs_err", aggfunc="mean")[order]
        pooled_b = shifted.pivot_table(index="dataset", columns="method", values="abs_err",
                                       aggfunc="mean")[order]
        pooled_b.index = pd.MultiIndex.from_tuples([(d, "all") for d in pooled_b.index])
        out.append(pd.concat([t, pooled_b]).round(2).to_markdown())
        out.append("\n\nBinary datasets, per shifted row (split), mean over backbones and seeds, "
                   "MAE (pp)\n")
        out.append(shifted.pivot_table(index=["dataset", "family", "split"], columns="method",
                                       values="abs_err", aggfunc="mean")[order]
                   .round(2).to_markdown())
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--seeds", type=int, nargs="*")
    ap.add_argument("--datasets", nargs="*")
    ap.add_argument("--methods", nargs="*")
    ap.add_argument("--csv")
    ap.add_argument("--from-csv", action="store_true", help="db is a CSV written by --csv")
    ap.add_argument("--set", nargs="*", default=[],
                    help="extra key=value params for the default ALSA rows (tuning only)")
    args = ap.parse_args()
    extra: dict[str, Any] = {}
    for kv in args.set:
        k, v = kv.split("=", 1)
        try:
            extra[k] = int(v)
        except ValueError:
            try:
                extra[k] = float(v)
            except ValueError:
                extra[k] = {"True": True, "False": False}.get(v, v)
    if args.from_csv:
        df = pd.concat([pd.read_csv(p) for p in args.db.split(",")])
    else:
        df = evaluate(args.db, args.datasets, args.seeds, args.methods, extra)
    if args.csv:
        df.to_csv(args.csv, index=False)
    print(tables(df))


if __name__ == "__main__":
    main()
