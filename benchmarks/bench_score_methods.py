"""Timing of the score estimators MaNo and the nuclear norm (issue 12; budget <= 1 s each).

Not a test: it prints wall-clock seconds on synthetic float32 logits. Run from the repository
root with the thread count of the budget::

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_score_methods.py
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_score_methods.py --quick   # smoke run

For each method (``mano`` in the paper and the code form, ``nuclear-norm``) it times
``estimate()`` on ``n = 100,000`` target rows of ``c = 100`` classes (the best of ``--repeats``
runs; input validation and the float64 conversion of the float32 input included), after a fit
on 1,000 validation rows, and prints the score.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from estimators import get_estimator  # noqa: E402

CASES: tuple[tuple[str, dict[str, object]], ...] = (
    ("mano", {}),
    ("mano", {"form": "code"}),
    ("nuclear-norm", {}),
)


def make_logits(rng: np.random.Generator, n: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 logits with a class signal (about 70 % accuracy) and their labels."""
    y = rng.integers(0, c, n)
    z = rng.normal(size=(n, c)).astype(np.float32) * 1.5
    z[np.arange(n), y] += 3.5
    flip = rng.random(n) < 0.2
    y[flip] = rng.integers(0, c, int(flip.sum()))
    return z, y


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 rows instead of 100,000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    n, c = (10_000 if args.quick else 100_000), 100
    rng = np.random.default_rng(0)
    val, val_y = make_logits(rng, 1_000, c)
    target, _ = make_logits(rng, n, c)
    print(f"# python {platform.python_version()}, numpy {np.__version__}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"target {n:,} x {c} float32, best of {args.repeats}")
    print(f"{'method':<14} {'params':<16} {'seconds':>8} {'score':>10}")
    for key, params in CASES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = get_estimator(key, **params).fit(val, val_y)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            res = est.estimate(target)
            times.append(time.perf_counter() - t0)
        label = ",".join(f"{k}={v}" for k, v in params.items()) or "-"
        print(f"{key:<14} {label:<16} {min(times):8.3f} {res.diagnostics['score']:10.6f}")


if __name__ == "__main__":
    main()
