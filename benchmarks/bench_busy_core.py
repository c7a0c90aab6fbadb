"""ALSA's fit with one core of the machine busy, against its idle fit (a benchmark, not a test).

Issue 24: with torch's default of one thread per core, a second process computing on one of the
2 cores slowed ALSA-G's fit at n = 10,000, c = 10, k = 1,000 from 5.9 s to 16.5 s (46-107 s under
heavier sharing). The estimators now pick their thread count for the work size and the idle cores
(:mod:`estimators.core.threads`); the budget (``docs/ARCHITECTURE.md``, DESIGN "Budgets") is a
busy fit of at most 1.5x the idle fit.

The script fits ALSA-G on synthetic logits (10 Gaussian classes, about 85 % accurate) with

* ``n_threads=None`` (the automatic choice), ``1`` and ``2`` (torch's old default on 2 cores),
* idle, then with one busy process it starts itself (a Python loop spinning on one core),

and prints the seconds (best of ``--repeats``), the thread count the automatic choice made, the
busy/idle ratios and the largest difference between the estimates made with 1 and 2 threads.
Run from the repository root::

    python benchmarks/bench_busy_core.py [--n 10000] [--classes 10] [--anchors 1000] [--repeats 2]

"Idle" means idle apart from this script: on a shared machine the figures include whatever else
runs (the script prints the running-task count it saw).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
import warnings

import numpy as np


def synthetic_logits(n: int, c: int, seed: int, margin: float = 2.2) -> tuple[np.ndarray,
                                                                                   np.ndarray]:
    """Logits ``N(0, I) + margin * e_y`` with random classes (about 85 % accurate for c = 10)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    z = rng.normal(size=(n, c))
    z[np.arange(n), y] += margin
    return z, y


def _spin(stop: mp.synchronize.Event) -> None:  # pragma: no cover - runs in a child process
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def _fit(z: np.ndarray, y: np.ndarray, target: np.ndarray, anchors: int,
         n_threads: int | None, repeats: int) -> tuple[float, float, int]:
    """Best fit seconds, the estimate, and the threads the fit used."""
    from estimators import get_estimator
    from estimators.core.threads import auto_threads

    best = np.inf
    accuracy = np.nan
    for _ in range(repeats):
        est = get_estimator("alsa-g", n_anchors=anchors, device="cpu", n_threads=n_threads)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(z, y)
        best = min(best, time.perf_counter() - t0)
        accuracy = est.estimate(target).accuracy
    n_member = (2 * z.shape[0]) // 3  # one cross-fitted member's rows
    used = n_threads if n_threads is not None else auto_threads(n_member * anchors)
    return best, accuracy, used


def main() -> None:
    """Measure and print (see the module docstring)."""
    import torch

    from estimators.core.threads import busy_cores, usable_cores

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--anchors", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    z, y = synthetic_logits(args.n, args.classes, seed=0)
    target, _ = synthetic_logits(20_000, args.classes, seed=1, margin=1.6)
    print(f"ALSA-G fit, n = {args.n:,}, c = {args.classes}, k = {args.anchors:,}; "
          f"usable cores {usable_cores()}, torch threads {torch.get_num_threads()}, "
          f"other running tasks now {busy_cores()}")
    settings: list[int | None] = [None, 1, 2]
    results: dict[tuple[str, int | None], tuple[float, float, int]] = {}
    for state in ("idle", "busy"):
        stop = mp.Event()
        spinner = None
        if state == "busy":
            spinner = mp.Process(target=_spin, args=(stop,), daemon=True)
            spinner.start()
            time.sleep(0.5)
        try:
            for threads in settings:
                results[state, threads] = _fit(z, y, target, args.anchors, threads, args.repeats)
                secs, acc, used = results[state, threads]
                label = "auto" if threads is None else str(threads)
                print(f"  {state:4s} n_threads={label:4s} (used {used}): fit {secs:6.2f} s, "
                      f"estimate {acc:.6f}")
        finally:
            stop.set()
            if spinner is not None:
                spinner.join(timeout=5)
    for threads in settings:
        label = "auto" if threads is None else str(threads)
        ratio = results["busy", threads][0] / results["idle", threads][0]
        print(f"busy / idle, n_threads={label}: {ratio:.2f}x")
    auto_vs_old = results["idle", None][0] / results["idle", 2][0]
    print(f"idle auto / idle 2 threads (the old default): {auto_vs_old:.2f}x")
    diff = abs(results["idle", 1][1] - results["idle", 2][1])
    print(f"|estimate(1 thread) - estimate(2 threads)| = {diff:.2e} ({100 * diff:.4f} pp)")


if __name__ == "__main__":
    main()
