"""Timing figures for the softmax baselines and for COT's exact and official constructions.

Not a test: it prints wall-clock seconds on synthetic logits. Run from the repository root::

    .venv/bin/python benchmarks/bench_baselines.py            # all figures
    .venv/bin/python benchmarks/bench_baselines.py --quick    # smaller sizes, for a smoke run

Figures printed:

1. every baseline (``ac``, ``doc``, ``im``, ``atc-mc``, ``atc-ne``, ``cot``), ALSA (``alsa-g``,
   ``alsa-e``) and the shift gate (with COT, and with AC to isolate its own cost) fitted on
   ``n_val = 10,000`` and estimating ``100,000`` target rows of ``c = 100`` classes (fit seconds,
   estimate seconds without the shift band, the band's seconds when it is then read with cold
   memos: the signal fit on the validation set plus the target's signals, estimate);
2. exact COT (n x c transport) at ``n = 50,000``, ``c = 100`` (budget: <= 5 s on 2 cores);
3. the official sampled one-hot n x n COT (``mode="sampled"``) at ``n = 5,000`` beside the exact
   one on the same probabilities (seconds and values);
4. the COT budget: the ``cot`` estimator's estimate of ``n = 50,000`` target rows of ``c = 100``
   classes against POT's own ``ot.emd`` solve of the same transport problem in the same run
   (budget: <= 1.5x the solve, measured without the band), and the band's cost on top.

The band is computed only when read (``result.shift_interval``, or ``estimate(...,
band=True)``): a method's estimate alone pays nothing for it, and estimators fitted on one
validation set share one signal fit (``estimators/trust/attach_band.py``).
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
from estimators.methods.cot import cot_accuracy  # noqa: E402
from estimators.maths.confidence import softmax  # noqa: E402
from estimators.trust.attach_band import forget_signals  # noqa: E402

BASELINES = ("ac", "doc", "im", "atc-mc", "atc-ne", "cot", "alsa-g", "alsa-e")
#: The shift gate (opt-in): with COT as its covariate method (the default), and with AC, which
#: isolates the gate's own cost (temperature, EM marginal, label-shift test).
GATES = (("shift-gate", {}), ("gate/ac", {"covariate": "ac"}))


def make_logits(
    rng: np.random.Generator, n: int, c: int, *, accuracy: float, noise: float
) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic over-confident logits: a boosted predicted class among Gaussian noise.

    A fraction ``accuracy`` of the rows predict their label; the others predict a random wrong
    class. ``noise`` scales the Gaussian part (larger = a shifted, noisier target).
    """
    labels = rng.integers(0, c, n)
    correct = rng.random(n) < accuracy
    predicted = np.where(correct, labels, (labels + rng.integers(1, c, n)) % c)
    logits = rng.normal(size=(n, c)) * noise
    logits[np.arange(n), predicted] += 2.0 + rng.gamma(2.0, 1.5, n)
    return 2.0 * logits, labels


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def timed_cpu(fn, *args, **kwargs):
    """``(result, wall seconds, CPU seconds of the process)``."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start, time.process_time() - cpu


def bench_baselines(n_val: int, n_target: int, c: int) -> None:
    rng = np.random.default_rng(0)
    val, val_y = make_logits(rng, n_val, c, accuracy=0.75, noise=1.0)
    target, target_y = make_logits(rng, n_target, c, accuracy=0.6, noise=1.3)
    true_acc = float(np.mean(target.argmax(axis=1) == target_y))
    print(f"\n[1] baselines: fit on {n_val:,} x {c}, estimate {n_target:,} x {c} "
          f"(val acc {np.mean(val.argmax(1) == val_y):.4f}, target acc {true_acc:.4f})")
    print(f"    {'method':<10} {'fit s':>8} {'estimate s':>11} {'band s':>7} {'estimate':>9}"
          f" {'|err|':>7} {'T':>6}")
    runs = [(key, key, {}) for key in BASELINES]
    runs += [(label, "shift-gate", params) for label, params in GATES]
    for label, key, params in runs:
        est = get_estimator(key, **params)
        _, fit_s = timed(est.fit, val, val_y)
        res, est_s = timed(est.estimate, target)
        forget_signals()  # the band alone, as a caller reading it first pays for it
        _, band_s = timed(lambda: res.shift_interval)
        extra = ""
        if key == "shift-gate":
            extra = (f"  (z {res.diagnostics['z']:.0f}, weight {res.diagnostics['weight']:.2f},"
                     f" EM passes {res.diagnostics['em_iterations']})")
        temperature = res.params.get("temperature", float("nan"))
        print(f"    {label:<10} {fit_s:8.3f} {est_s:11.3f} {band_s:7.3f} {res.accuracy:9.4f} "
              f"{abs(res.accuracy - true_acc):7.4f} {temperature:6.3f}{extra}")


def bench_cot_exact(n: int, c: int) -> None:
    rng = np.random.default_rng(1)
    logits, _ = make_logits(rng, n, c, accuracy=0.6, noise=1.3)
    probs = softmax(logits)
    pi = np.full(c, 1.0 / c)
    acc, seconds = timed(cot_accuracy, probs, pi)
    print(f"\n[2] exact COT (n x c transport), n = {n:,}, c = {c}: {seconds:.2f} s "
          f"(budget 5 s); accuracy {acc:.6f}; AC {probs.max(axis=1).mean():.6f}")


def bench_cot_sampled(n: int, c: int) -> None:
    rng = np.random.default_rng(2)
    logits, _ = make_logits(rng, n, c, accuracy=0.6, noise=1.3)
    probs = softmax(logits)
    pi = np.full(c, 1.0 / c)
    exact, exact_s = timed(cot_accuracy, probs, pi)
    sampled, sampled_s = timed(cot_accuracy, probs, pi, mode="sampled", seed=0)
    print(f"\n[3] COT at n = {n:,}, c = {c} (uniform label marginal)")
    print(f"    exact n x c      : {exact_s:8.3f} s   accuracy {exact:.6f}")
    print(f"    official n x n   : {sampled_s:8.3f} s   accuracy {sampled:.6f} "
          f"(sampled one-hot labels, seed 0; n*pi_k integral, so equal up to rounding)")
    print(f"    |difference| {abs(exact - sampled):.2e}, speed-up x{sampled_s / exact_s:,.0f}")


def bench_cot_budget(n_val: int, n: int, c: int) -> None:
    import ot

    from estimators.methods.cot import NUM_ITER_MAX

    rng = np.random.default_rng(3)
    val, val_y = make_logits(rng, n_val, c, accuracy=0.75, noise=1.0)
    target, _ = make_logits(rng, n, c, accuracy=0.6, noise=1.3)
    est, fit_s = timed(get_estimator("cot").fit, val, val_y)
    res, est_s, est_cpu = timed_cpu(est.estimate, target)
    # POT's own solve of the same problem: the temperature-scaled target probabilities against
    # the validation label marginal, cost 1 - P (what COT hands to ot.emd)
    probs = softmax(target / est.temperature_)
    a, b, cost = np.full(n, 1.0 / n), est.label_marginal_, 1.0 - probs
    _, pot_s, pot_cpu = timed_cpu(ot.emd, a, b, cost, numItermax=NUM_ITER_MAX)
    forget_signals()
    _, band_s, band_cpu = timed_cpu(lambda: res.shift_interval)
    print(f"\n[4] COT budget, n = {n:,}, c = {c} (fit on {n_val:,}): POT's ot.emd alone "
          f"{pot_s:.2f} s; cot estimate {est_s:.2f} s = {est_s / pot_s:.2f}x the solve "
          f"(budget 1.5x, without the band); fit {fit_s:.2f} s; the band when read "
          f"{band_s:.2f} s (estimate + band = {(est_s + band_s) / pot_s:.2f}x)\n"
          f"    CPU seconds: ot.emd {pot_cpu:.2f}, estimate {est_cpu:.2f} "
          f"({est_cpu / pot_cpu:.2f}x), band {band_cpu:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    scale = 10 if args.quick else 1
    print(f"python {platform.python_version()}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs visible, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    bench_baselines(10_000 // scale, 100_000 // scale, 100)
    bench_cot_exact(50_000 // scale, 100)
    bench_cot_sampled(5_000 // scale, 100)
    bench_cot_budget(10_000 // scale, 50_000 // scale, 100)


if __name__ == "__main__":
    main()
