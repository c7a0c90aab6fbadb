"""ALSA at any validation size: fit time and in-distribution error for n x c (issue 11).

Synthetic logits as in issue 11: ``z = N(0, 1) + 3 * onehot(y) * U(0.2, 1.5)``, ``c`` classes,
a validation set of ``n`` rows and an in-distribution target of ``--n-target`` rows drawn from
the same distribution. For each (c, n) and method the script fits the estimator on the
validation rows, estimates the target and prints:

* ``fit_s``: wall-clock ``fit`` time (includes input checks, training, the reference pass),
  the fastest of ``--repeats`` fits;
* ``x10k``: ``fit_s`` over the same method's ``fit_s`` at n = 10,000 (same c);
* ``err_pp``: estimate minus the target's true accuracy, in percentage points;
* ``sd_pp``: the binomial standard deviation of that error when the estimator is exact up to
  sampling noise, :math:`\\sqrt{a(1-a)(1/n_{ref} + 1/n_t)}` with ``a`` the true accuracy and
  ``n_ref`` the rows the estimator calibrates on (all ``n``, or up to 100,000 held-out);
* ``z``: ``err_pp / sd_pp``;
* ``rect``: fraction of target rows rectified; ``n_fit`` / ``n_ref``: rows trained on and
  rows that set the cut-off and offset; ``stop``: the stop reason; ``warn``: number of
  ``ConvergenceWarning``s over all repeats; ``t``: the rectification cut-off; at the end the
  process's peak RSS.

The drift tables of ``docs/ALSA.md`` ("ALSA at any validation size")::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_alsa_size.py --classes 10 \
        --sizes 1000,10000,20000,40000,100000 --dtype float64 [--rule paper]

and, for the code before the fix, the same with ``PYTHONPATH`` pointing at a copy of
``estimators/`` from commit 8bc5cff (``git archive 8bc5cff estimators | tar -x -C /tmp/old``).

Run (one thread, about four minutes per repeat; ``docs/PERFORMANCE.md`` records
``--repeats 3``, split by class count to keep each run short)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_alsa_size.py [--repeats 3] [--classes 2,10]
"""

from __future__ import annotations

import argparse
import resource
import time
import warnings

import numpy as np
import torch

from estimators import get_estimator
from estimators.core.exceptions import ConvergenceWarning


def make(
    n: int, c: int, rng: np.random.Generator, dtype: str = "float32"
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of issue 11's synthetic logits and their labels.

    ``float32`` (default) draws in single precision (the 1M x 100 input stays 381 MiB);
    ``float64`` is the issue's own recipe, ``rng.normal`` in double precision (the numbers of
    the drift tables in ``docs/ALSA.md``).
    """
    y = rng.integers(0, c, n)
    if dtype == "float64":
        z64 = rng.normal(size=(n, c))
        z64[np.arange(n), y] += 3.0 * rng.uniform(0.2, 1.5, n)
        return z64, y
    z = rng.standard_normal((n, c), dtype=np.float32)
    z[np.arange(n), y] += (3.0 * rng.uniform(0.2, 1.5, n)).astype(np.float32)
    return z, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--classes", default="2,10,100")
    ap.add_argument("--methods", default="alsa-g,alsa-e")
    ap.add_argument("--rule", default="quantile", choices=("quantile", "paper"))
    ap.add_argument("--n-target", type=int, default=50_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument(
        "--repeats", type=int, default=1,
        help="fit this many times and report the fastest (the machine may be shared)",
    )
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(
        f"# torch {torch.__version__}, threads={args.threads}, device=cpu, "
        f"threshold_rule={args.rule}, n_target={args.n_target}, seed={args.seed}, "
        f"dtype={args.dtype}, repeats={args.repeats}"
    )
    print(
        f"{'c':>4} {'n':>8} {'method':>7} {'fit_s':>7} {'x10k':>5} {'err_pp':>7} {'sd_pp':>6} "
        f"{'z':>5} {'rect':>6} {'n_fit':>6} {'n_ref':>7} {'stop':>6} {'warn':>4} {'t':>6}"
    )
    for c in [int(x) for x in args.classes.split(",")]:
        base: dict[str, float] = {}
        for n in sizes:
            rng = np.random.default_rng(args.seed)
            z, y = make(n, c, rng, args.dtype)
            zt, yt = make(args.n_target, c, rng, args.dtype)
            true = float(np.mean(zt.argmax(axis=1) == yt))
            for method in args.methods.split(","):
                params: dict[str, object] = {"device": "cpu", "n_threads": args.threads}
                if "threshold_rule" in get_estimator(method).get_params():  # older code has none
                    params["threshold_rule"] = args.rule
                fit_s = float("inf")
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    for _ in range(max(1, args.repeats)):
                        est = get_estimator(method, **params)
                        t0 = time.perf_counter()
                        est.fit(z, y)
                        fit_s = min(fit_s, time.perf_counter() - t0)
                    res = est.estimate(zt)
                n_warn = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
                d = res.diagnostics
                if n == 10_000:
                    base[method] = fit_s
                ratio = fit_s / base[method] if method in base else float("nan")
                n_ref = int(d.get("n_reference_rows", n))
                sd = np.sqrt(true * (1 - true) * (1 / n_ref + 1 / args.n_target)) * 100
                err = (res.accuracy - true) * 100
                print(
                    f"{c:>4} {n:>8} {method:>7} {fit_s:>7.2f} {ratio:>5.2f} {err:>+7.2f} "
                    f"{sd:>6.2f} {err / sd:>+5.1f} {d['rectified_fraction']:>6.3f} "
                    f"{d.get('n_fit_rows', n):>6} {n_ref:>7} {d['stop_reason']:>6} {n_warn:>4} "
                    f"{d['threshold']:>6.3f}",
                    flush=True,
                )
            del z, y, zt, yt
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n_max, c_max = max(sizes), max(int(x) for x in args.classes.split(","))
    size = n_max * c_max * np.dtype(args.dtype).itemsize / 2**20
    print(
        f"# peak RSS {peak:.0f} MiB (the largest input alone: {n_max:,} x {c_max} {args.dtype} "
        f"= {size:.0f} MiB, held by this script; ALSA does not copy float32 input)"
    )

if __name__ == "__main__":
    main()
