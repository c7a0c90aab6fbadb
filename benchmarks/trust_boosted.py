"""Boosted trees as ``auto``'s model class, by leave-one-group-out on the development groups.

An exploration beside the protocol of ``benchmarks/trust_protocol.py`` (issue 31, item 4), not
one of its model classes: is a non-linear learner on the same label-free inputs the lever the
linear ones (ridge stacking, shrinkage, the ridge-gated selector) were not? Two classes, each
scikit-learn's ``HistGradientBoostingRegressor`` (depth 3) with every development group
weighing the same (:func:`~estimators.trust.shift_band.group_weights`):

* **boosted correction**: ALSA-E plus ``shrink`` times the trees' prediction of its error
  ``truth - alsa-e``;
* **boosted selector**: one regressor per member predicts that member's absolute error; the
  member predicted best is returned (per split).

Inputs: the selector's meta-features (:func:`~estimators.trust.selector.meta_features`), each
member's estimate minus ALSA-E's, and ALSA-E's estimate. Every figure is a mean over the held-out
group of the group's mean (as in the protocol), with the model fit on the other development
groups' rows outside declared concept shifts. **Only development groups are read** (the sealed
groups of :mod:`estimators.trust.sealed` are split off first and never scored here).

    python benchmarks/trust_boosted.py --db zoo-tabular.duckdb --db zoo-other.duckdb \\
        --db tabular.duckdb --db fmnist.duckdb --rows-cache rows.parquet --configs all \\
        --out docs/trust/boosted.csv

What it measured is in ``docs/ESTIMATORS.md`` ("Boosted trees, measured outside the
protocol"); about 2 minutes per configuration on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: (learning rate, iterations, minimum rows per leaf, shrinkage of the correction).
CONFIGS: dict[str, tuple[float, int, int, float]] = {
    "a": (0.05, 100, 40, 1.0),
    "b": (0.05, 100, 40, 0.5),
    "c": (0.03, 200, 80, 0.5),
    "d": (0.1, 50, 20, 0.5),
}
DEFAULT_CONFIG = "c"


def _group_mean(err: np.ndarray, groups: np.ndarray) -> float:
    return float(np.mean([err[groups == g].mean() for g in np.unique(groups)]))


def boosted_logo(rows, members: tuple[str, ...], config: tuple[float, int, int, float]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-group-out predictions of the boosted correction and the boosted selector.

    Parameters
    ----------
    rows : TrustRows
        Development rows with every member's estimate finite.
    members : tuple of str
        ``auto``'s members (ALSA-E among them).
    config : tuple
        (learning rate, iterations, minimum rows per leaf, shrinkage of the correction).

    Returns
    -------
    correction, selection : ndarray of shape (n,)
    """
    from sklearn.ensemble import HistGradientBoostingRegressor

    from estimators.trust.selector import meta_features
    from estimators.trust.shift_band import group_weights

    lr, iters, leaf, shrink = config
    t = rows.table
    groups, concept = np.asarray(t.groups), np.asarray(rows.concept, dtype=bool)
    est = np.column_stack([t.estimates[m] for m in members])
    base = np.asarray(t.estimates["alsa-e"], dtype=np.float64)
    x = np.column_stack([meta_features(t.signals), est - base[:, None], base])
    abs_err = np.abs(est - t.truth[:, None])

    def model() -> HistGradientBoostingRegressor:
        return HistGradientBoostingRegressor(learning_rate=lr, max_iter=iters,
                                             min_samples_leaf=leaf, max_depth=3, random_state=0)

    correction, selection = np.full(len(base), np.nan), np.full(len(base), np.nan)
    for name in np.unique(groups):
        held = groups == name
        fit = ~held & ~concept
        w = group_weights(groups[fit])
        corr = model().fit(x[fit], (t.truth - base)[fit], sample_weight=w)
        correction[held] = np.clip(base[held] + shrink * corr.predict(x[held]), 0.0, 1.0)
        predicted = np.column_stack([model().fit(x[fit], abs_err[fit, j], sample_weight=w)
                                     .predict(x[held]) for j in range(len(members))])
        selection[held] = est[held, np.argmin(predicted, axis=1)]
    return correction, selection


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", action="append", required=True, help="benchmark database")
    parser.add_argument("--rows-cache", default=None,
                        help="parquet file of the rows (reused when it exists)")
    parser.add_argument("--out", default=None,
                        help="also write the table to this CSV file (docs/trust/boosted.csv)")
    parser.add_argument("--configs", default=DEFAULT_CONFIG,
                        help=f"comma-separated keys of {', '.join(CONFIGS)}, or all "
                             f"(default {DEFAULT_CONFIG})")
    args = parser.parse_args(argv)
    keys = list(CONFIGS) if args.configs == "all" else [
        k.strip() for k in args.configs.split(",") if k.strip()]
    bad = [k for k in keys if k not in CONFIGS]
    if bad or not keys:
        parser.error(f"--configs must name some of {', '.join(CONFIGS)} (or all); got "
                     f"{args.configs!r}.")
    warnings.simplefilter("ignore")
    from benchmarks.trust_protocol import cached_rows
    from tasks.report.trust_protocol import MEMBERS, grouped_cv
    from tasks.report.trust_rows import split_development

    rows = cached_rows(args.db, args.rows_cache)
    dev, _ = split_development(rows)  # the sealed groups are set aside unread
    ok = np.ones(len(dev), bool)
    for m in MEMBERS:
        ok &= np.isfinite(dev.table.estimates[m])
    dev = dev.subset(ok)
    t = dev.table
    groups, concept = np.asarray(t.groups), np.asarray(dev.concept, dtype=bool)
    shrink_name = "shrinkage toward the members' median"
    shipped = grouped_cv(dev, [shrink_name])[shrink_name]
    predictions = {f"{m} alone": np.asarray(t.estimates[m], np.float64) for m in MEMBERS}
    predictions[f"{shrink_name} (shipped)"] = shipped
    for key in keys:
        start = time.time()
        corr, sel = boosted_logo(dev, MEMBERS, CONFIGS[key])
        lr, iters, leaf, shrink = CONFIGS[key]
        tag = f"lr {lr}, {iters} trees, leaf {leaf}"
        predictions[f"boosted correction ({tag}, x{shrink})"] = corr
        predictions[f"boosted selector ({tag})"] = sel
        print(f"configuration {key}: {time.time() - start:.0f} s", flush=True)
    table = []
    for name, pred in predictions.items():
        err = np.abs(pred - t.truth) * 100
        table.append({"model": name, "all rows (pp)": _group_mean(err, groups),
                      "without concept shifts (pp)": _group_mean(err[~concept],
                                                                 groups[~concept])})
    frame = pd.DataFrame(table)
    single = frame[frame.model.str.endswith(" alone")]
    best = single.loc[single["all rows (pp)"].idxmin()]
    print(f"{len(np.unique(groups))} development groups, {len(t)} rows; leave-one-group-out "
          "group-mean MAE (sealed groups not read)")
    print(frame.sort_values("all rows (pp)").to_string(index=False, float_format="%.3f"))
    print(f"best single method: {best.model} ({best['all rows (pp)']:.3f} pp, all rows)")
    if args.out:
        frame.sort_values("all rows (pp)").to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
