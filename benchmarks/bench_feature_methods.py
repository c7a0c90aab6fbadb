"""Cost of the feature methods (issue 25): fit and estimate times, and the IVF index at 1M rows.

Part 1 times every feature-aware estimator (``estimators.feature_estimators()``) with its
defaults on ``--target`` target rows x ``--dim`` features (float32) with ``--val`` validation
and ``--train`` training rows, ``--classes`` classes: class-clustered features (30 % of the
target rows noisier, off the training support), logits from a linear head on them. Part 2
builds :class:`estimators.maths._knn.IVFIndex` on ``--index-rows`` reference rows and measures, on ``--queries`` query rows, the recall of the ``k = 25`` nearest
neighbours against the exact blocked search, the relative error of the mean k-NN distance
(DistCS's statistic) and the times.

    PYTHONPATH=. flock /tmp/heavy.lock python benchmarks/bench_feature_methods.py
    PYTHONPATH=. python benchmarks/bench_feature_methods.py --target 20000 --index-rows 100000

Results: docs/PERFORMANCE.md ("Feature methods").
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import warnings

import numpy as np


def world(n_val: int, n_train: int, n_target: int, d: int, c: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((c, d), dtype=np.float32) * np.float32(0.1)
    head = means.T / np.float32(0.01 * d)

    def draw(n, far=0.0):
        # a fraction ``far`` of the rows is noisier (off the training support)
        y = rng.integers(0, c, n)
        scale = np.where(rng.random(n) < far, 1.6, 1.0).astype(np.float32)[:, None]
        x = means[y] + rng.standard_normal((n, d), dtype=np.float32) * np.float32(0.8) * scale
        z = (x @ head) * 2.0
        return x, z.astype(np.float64), y

    xv, zv, yv = draw(n_val)
    xtr, _, ytr = draw(n_train)
    xt, zt, yt = draw(n_target, far=0.3)
    return xv, zv, yv, xtr, ytr, xt, zt, yt


def bench_methods(args) -> None:
    from estimators import feature_estimators, get_estimator

    xv, zv, yv, xtr, ytr, xt, zt, yt = world(args.val, args.train, args.target, args.dim,
                                             args.classes)
    truth = float(np.mean(zt.argmax(1) == yt))
    print(f"## methods: val {args.val}, train {args.train}, target {args.target} rows x "
          f"{args.dim}-d float32 features, {args.classes} classes, {os.cpu_count()} cores; "
          f"true target accuracy {truth:.4f}")
    print("| method | fit s | estimate s | estimate | notes |")
    print("|---|---:|---:|---:|---|")
    runs = [(key, {}) for key in feature_estimators()] + [("distcs", {"index": "ivf"})]
    for key, params in runs:
        est = get_estimator(key, **params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            est.fit(zv, yv, val_features=xv, train_features=xtr, train_labels=ytr)
            t1 = time.perf_counter()
            res = est.estimate(zt, target_features=xt)
            t2 = time.perf_counter()
        d = res.diagnostics
        note = {"distcs": lambda: f"index {d['index']}, kept {d['kept_fraction']:.3f}",
                "dispersion": lambda: f"score {d['score']:.4f} (no map: accuracy NaN)"}.get(
            key, lambda: f"slope {d['slope']:.3f}, r2 {d['r2']:.3f}")()
        label = key + "".join(f" {k}={v}" for k, v in params.items())
        print(f"| {label} | {t1 - t0:.2f} | {t2 - t1:.2f} | {res.accuracy:.4f} | {note} |",
              flush=True)


def bench_index(args) -> None:
    from estimators.maths._knn import IVFIndex, smallest_k

    rng = np.random.default_rng(1)
    c, d, n = 100, args.dim, args.index_rows
    means = rng.normal(size=(c, d)).astype(np.float32)
    ref = np.empty((n, d), dtype=np.float32)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        ref[s:s + m] = means[rng.integers(0, c, m)] + rng.standard_normal((m, d),
                                                                          dtype=np.float32)
    q = means[rng.integers(0, c, args.queries)] + rng.standard_normal(
        (args.queries, d), dtype=np.float32) * np.float32(1.1)
    k = 25
    print(f"\n## IVF index: {n} reference rows x {d}-d (100 Gaussian clusters), "
          f"{args.queries} queries, k = {k}")
    t0 = time.perf_counter()
    exact_d2 = np.empty((args.queries, k), dtype=np.float32)
    ref_sq = np.einsum("ij,ij->i", ref, ref)
    step = max(1, (64 * 2**20) // (4 * n))
    for s in range(0, args.queries, step):
        qq = q[s:s + step]
        d2 = qq @ ref.T
        d2 *= -2.0
        d2 += ref_sq[None, :]
        d2 += np.einsum("ij,ij->i", qq, qq)[:, None]
        exact_d2[s:s + step] = smallest_k(d2, k, sort=True)
    t_exact = time.perf_counter() - t0
    exact_mean = np.sqrt(np.maximum(exact_d2, 0).astype(np.float64)).mean(1)
    print(f"exact blocked search: {t_exact:.1f} s ({t_exact / args.queries * 1e3:.2f} ms/query)")
    print("| n_probe | build s | search s | ms/query | recall@25 | mean-distance rel. error |")
    print("|---:|---:|---:|---:|---:|---:|")
    t0 = time.perf_counter()
    index = IVFIndex(n_probe=16).fit(ref)
    t_build = time.perf_counter() - t0
    for probe in (4, 16, 64):
        index.n_probe = probe
        t0 = time.perf_counter()
        approx = index.search_squared(q, k)
        t_search = time.perf_counter() - t0
        # recall: the share of the exact k-th-nearest radius' members found (by distance)
        radius = exact_d2[:, -1:] * (1 + 1e-5) + 1e-6
        recall = float(np.mean(np.sum(approx <= radius, axis=1) / k))
        rel = float(np.mean(np.sqrt(np.maximum(approx, 0).astype(np.float64)).mean(1)
                            / exact_mean - 1.0))
        print(f"| {probe} | {t_build:.1f} | {t_search:.2f} | "
              f"{t_search / args.queries * 1e3:.3f} | {recall:.4f} | {rel:.2e} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--val", type=int, default=10_000)
    ap.add_argument("--train", type=int, default=10_000)
    ap.add_argument("--target", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--index-rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=5_000)
    ap.add_argument("--skip-index", action="store_true")
    ap.add_argument("--skip-methods", action="store_true")
    args = ap.parse_args()
    if not args.skip_methods:
        bench_methods(args)
    if not args.skip_index:
        bench_index(args)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\npeak resident memory of the process: {peak:.1f} GiB")


if __name__ == "__main__":
    main()
