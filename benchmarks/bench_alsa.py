"""Speed and memory of ALSA on the issue's reference sizes (a benchmark script, not a test).

Prints, for the Gaussian-like and exponential kernels:

* fit seconds and epochs at n_val = 10,000, c = 10, k = 1,000 with the default parameters
  (targets: <= 10 s on 2 CPU cores), and seconds per epoch with closed-form gradients versus
  torch autograd;
* estimate seconds on 100,000 target rows (target: <= 1 s);
* the shift band's seconds when the result's ``shift_interval`` is then read (cold memos: the
  signal fit on the validation set and the target's signals); the budgets above are measured
  without it, since a caller that does not read the band does not pay for it;
* the working memory of one row block and the growth of the process's peak RSS;
* with ``--million``, a chunked estimate on 1,000,000 rows;
* with ``--cot``, COT's fit and estimate on the same logits (POT's network simplex: CPU only,
  whatever ``--device`` says).

``--classes`` and ``--n-val`` change the problem size (the GPU comparison of issue 23 runs
``--n-val 100000 --classes 100``; the margin grows with the class count so the logits stay about
as accurate).

The logits are synthetic (10 Gaussian classes with a margin, about 85% accurate); no dataset is
read. Run::

    python benchmarks/bench_alsa.py --threads 2 [--million] [--device cpu|cuda|auto]
    python benchmarks/bench_alsa.py --device cuda --n-val 100000 --classes 100 --cot
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's estimators

from estimators import get_estimator
from estimators.methods.alsa import _auto_chunk, fit_alsa_anchors
from estimators.core.exceptions import ConvergenceWarning
from estimators.trust.attach_band import forget_signals


def synthetic_logits(
    n: int, c: int, seed: int, margin: float = 2.2
) -> tuple[np.ndarray, np.ndarray]:
    """Logits ``N(0, I) + margin * e_y`` with random classes (about 85% accurate for c = 10)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    z = rng.normal(size=(n, c))
    z[np.arange(n), y] += margin
    return z, y


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--million", action="store_true", help="also estimate on 1,000,000 rows")
    parser.add_argument("--n-val", type=int, default=10_000)
    parser.add_argument("--anchors", type=int, default=1_000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--cot", action="store_true", help="also time COT (CPU)")
    parser.add_argument(
        "--epoch-probe", type=int, default=10, help="epochs timed per gradient mode"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    c = args.classes
    boost = 0.5 * float(np.log(c / 10)) if c > 10 else 0.0  # accuracy near c = 10
    z_val, y_val = synthetic_logits(args.n_val, c, seed=0, margin=2.2 + boost)
    z_t, _ = synthetic_logits(100_000, c, seed=1, margin=1.6 + boost)
    print(
        f"# load average {' '.join(open('/proc/loadavg').read().split()[:3])} (CPU seconds are "
        "the process's, all threads; on a busy machine they stay near the idle wall time of one "
        "thread)\n"
        f"# torch {torch.__version__}, threads={torch.get_num_threads()}, device={args.device}, "
        f"n_val={args.n_val}, c={c}, k={args.anchors}, "
        f"val acc={np.mean(z_val.argmax(1) == y_val):.3f}"
    )
    rss0 = peak_rss_mib()
    for name in ("alsa-g", "alsa-e"):
        est = get_estimator(name, n_anchors=args.anchors, device=args.device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            t0, c0 = time.perf_counter(), time.process_time()
            est.fit(z_val, y_val)
            fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
        warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
        est.estimate(z_t[:1000])  # warm-up
        t0, c0 = time.perf_counter(), time.process_time()
        res = est.estimate(z_t)
        est_s, est_cpu = time.perf_counter() - t0, time.process_time() - c0
        forget_signals()
        t0, c0 = time.perf_counter(), time.process_time()
        res.shift_interval  # noqa: B018  (the band, computed on this first read)
        band_s, band_cpu = time.perf_counter() - t0, time.process_time() - c0
        print(
            f"{name}: fit {fit_s:.2f} s (CPU {fit_cpu:.2f} s), {est.n_epochs_} epochs "
            f"({est.stop_reason_}"
            f"{', ConvergenceWarning' if warned else ''}, gap {est.train_gap_:.1e}), "
            f"{1000 * fit_s / max(est.n_epochs_, 1):.1f} ms/epoch; "
            f"estimate 100,000 rows {est_s:.3f} s (CPU {est_cpu:.3f} s; acc {res.accuracy:.3f}, "
            f"rectified {res.diagnostics['rectified_fraction']:.3f}); the band when read "
            f"{band_s:.3f} s (CPU {band_cpu:.3f} s)"
        )
        per_mode = {}
        for mode in ("analytic", "autograd"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                fit = fit_alsa_anchors(
                    z_val,
                    y_val,
                    kernel=est.kernel,
                    n_anchors=args.anchors,
                    max_epochs=args.epoch_probe,
                    tol=1e-12,
                    gradient=mode,
                    device=args.device,
                )
            per_mode[mode] = 1000 * fit.seconds / (fit.n_epochs + 1)
        print(
            f"{name}: ms per epoch, closed-form {per_mode['analytic']:.1f} vs autograd "
            f"{per_mode['autograd']:.1f} ({per_mode['autograd'] / per_mode['analytic']:.1f}x)"
        )
        if args.million:
            z_m, _ = synthetic_logits(1_000_000, c, seed=2, margin=1.6)
            before = peak_rss_mib()
            t0 = time.perf_counter()
            res_m = est.estimate(z_m)
            print(
                f"{name}: estimate 1,000,000 rows {time.perf_counter() - t0:.2f} s "
                f"(acc {res_m.accuracy:.3f}); peak RSS grew {peak_rss_mib() - before:.0f} MiB "
                f"(the input alone is {z_m.nbytes / 2**20:.0f} MiB float64)"
            )
            del z_m
    if args.cot:
        cot = get_estimator("cot")
        t0 = time.perf_counter()
        cot.fit(z_val, y_val)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = cot.estimate(z_t)
        print(f"cot: fit {fit_s:.2f} s; estimate 100,000 rows x {c} classes "
              f"{time.perf_counter() - t0:.2f} s (acc {res.accuracy:.3f}; POT network simplex "
              "on the CPU)")
    chunk = _auto_chunk(args.anchors, None, "cuda" if args.device.startswith("cuda") else "cpu")
    block_mib = 3 * chunk * args.anchors * 4 / 2**20
    print(
        f"# row block: {chunk} rows x {args.anchors} anchors, about 3 float32 buffers = "
        f"{block_mib:.1f} MiB of working memory whatever the row count (never n x k x c); "
        f"peak RSS of the run {peak_rss_mib():.0f} MiB "
        f"(+{peak_rss_mib() - rss0:.0f} MiB after setup)"
    )


if __name__ == "__main__":
    main()
