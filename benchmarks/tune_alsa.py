"""Choose ALSA's open defaults on tuning problems independent of the benchmark's target labels.

The ALSA paper (Liu et al., BMVC 2025, arXiv:2508.19613) leaves the optimiser, learning rates,
the number of anchors, the variance initialisation, alpha, the rectification reading, the stop
check and more unspecified. This script measures those choices on two self-contained problems
whose target accuracies are known, without touching any dataset of the benchmark suite:

* ``digits``: scikit-learn's 8x8 ``load_digits`` images (shipped with scikit-learn), a one-hidden
  layer MLP trained on 500 of them; every split holds each image in five versions (original and
  four one-pixel translations); the other images are halved into a validation split (2,000 rows
  kept) and a target pool. Targets: the clean pool; Gaussian noise, blur, occlusion and contrast
  loss at several severities; class-prior shifts.
* ``blobs``: a 10-class Gaussian mixture in 16 dimensions with a multinomial logistic regression;
  2,000 validation rows; targets: clean, growing feature noise, shrinkage towards the origin, a
  mean drift and class-prior shifts.

For each configuration (one change at a time from the library defaults), ALSA-G and ALSA-E are
fitted with ``--seeds`` anchor seeds; the table reports the mean absolute error (percentage
points) over all target sets of a problem, their mean and its standard deviation over seeds, the
median and maximum number of epochs, the fraction of fits whose stopping rule (eq. 10) held
before ``max_epochs``, and the mean fit seconds. Alpha and the rectification reading act at
inference only and reuse the base fits. Target labels serve only to score the estimates.

Run (the table in ``docs/ALSA.md``; 6-8 minutes with three seeds on one core of a machine shared
with other jobs, two thirds of that with the default two seeds)::

    OMP_NUM_THREADS=1 python benchmarks/tune_alsa.py --threads 1 --seeds 3

``--quick`` fits only the base configuration with one seed (a smoke test).
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from scipy.ndimage import gaussian_filter
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from estimators.methods.alsa import alsa_predict, fit_alsa_anchors
from estimators.core.exceptions import ConvergenceWarning


@dataclass
class Problem:
    """Validation logits/labels and labelled target sets (labels used only for the error)."""

    name: str
    val_logits: NDArray[np.float64]
    val_labels: NDArray[np.int64]
    targets: dict[str, tuple[NDArray[np.float64], float]]


# ----------------------------------------------------------------------------- problems
_SHIFTS = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))


def _translate(img: NDArray[np.float64], dx: int, dy: int) -> NDArray[np.float64]:
    out = np.roll(img, (dy, dx), axis=(1, 2))
    if dy > 0:
        out[:, :dy, :] = 0
    elif dy < 0:
        out[:, dy:, :] = 0
    if dx > 0:
        out[:, :, :dx] = 0
    elif dx < 0:
        out[:, :, dx:] = 0
    return out


def _augment(
    img: NDArray[np.float64], y: NDArray[np.int64]
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    imgs = np.concatenate([_translate(img, dx, dy) for dx, dy in _SHIFTS])
    return imgs, np.tile(y, len(_SHIFTS))


def _prior_resample(
    y: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
) -> NDArray[np.int64]:
    """Row indices drawn with replacement so that class frequencies follow ``prior``."""
    n = y.shape[0]
    counts = rng.multinomial(n, prior)
    idx = [
        rng.choice(np.flatnonzero(y == c), size=int(m), replace=True)
        for c, m in enumerate(counts)
        if m
    ]
    return np.concatenate(idx)


def digits_problem(seed: int = 0, n_val: int = 2000, binary: bool = False) -> Problem:
    """The ``digits`` tuning problem (MLP on 8x8 images, image-space shifts).

    ``binary=True`` relabels the digits 0-4 / 5-9 as classes 0 / 1 (``digits2``): a two-class
    MLP whose logits are given to ALSA as ``(n, 2)``.
    """
    X, y = load_digits(return_X_y=True)
    if binary:
        y = (y >= 5).astype(np.int64)
    img = (X / 16.0).reshape(-1, 8, 8)
    rng = np.random.default_rng(seed)
    idx_train, idx_rest = train_test_split(
        np.arange(len(y)), train_size=500, stratify=y, random_state=seed
    )
    idx_val, idx_pool = train_test_split(
        idx_rest, test_size=0.5, stratify=y[idx_rest], random_state=seed
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = MLPClassifier(hidden_layer_sizes=(32,), alpha=1e-2, max_iter=300, random_state=seed)
        train_img, train_y = _augment(img[idx_train], y[idx_train])
        clf.fit(train_img.reshape(len(train_img), -1), train_y)
    W1, W2 = clf.coefs_
    b1, b2 = clf.intercepts_

    def logits(images: NDArray[np.float64]) -> NDArray[np.float64]:
        h = np.maximum(images.reshape(len(images), -1) @ W1 + b1, 0.0)
        out = h @ W2 + b2
        if out.shape[1] == 1:  # a 2-class MLP has one output unit: positive-class logits s
            out = np.concatenate([np.zeros_like(out), out], axis=1)  # [0, s]
        return out

    val_img, val_y = _augment(img[idx_val], y[idx_val])
    pool_img, pool_y = _augment(img[idx_pool], y[idx_pool])
    targets: dict[str, tuple[NDArray[np.float64], float]] = {}

    def add(name: str, images: NDArray[np.float64], labels: NDArray[np.int64]) -> None:
        z = logits(images)
        targets[name] = (z, float(np.mean(z.argmax(1) == labels)))

    add("clean", pool_img, pool_y)
    for s, sigma in enumerate((0.1, 0.2, 0.3, 0.45, 0.6), 1):
        add(f"noise-{s}", np.clip(pool_img + rng.normal(0, sigma, pool_img.shape), 0, 1), pool_y)
    for s, sigma in enumerate((0.4, 0.6, 0.8, 1.0, 1.3), 1):
        add(f"blur-{s}", gaussian_filter(pool_img, sigma=(0, sigma, sigma)), pool_y)
    for s, size in enumerate((2, 3, 4, 5), 1):
        occ = pool_img.copy()
        for i in range(len(occ)):
            r, c = rng.integers(0, 9 - size, 2)
            occ[i, r : r + size, c : c + size] = 0.0
        add(f"occlusion-{s}", occ, pool_y)
    for s, f in enumerate((0.6, 0.4, 0.25, 0.15), 1):
        m = pool_img.mean(axis=(1, 2), keepdims=True)
        add(f"contrast-{s}", m + (pool_img - m) * f, pool_y)
    for s in range(1, 4):
        prior = rng.dirichlet(np.full(int(y.max()) + 1, 0.5))
        ii = _prior_resample(pool_y, prior, rng)
        add(f"prior-{s}", pool_img[ii], pool_y[ii])
    n_cls = int(y.max()) + 1
    ramp = np.linspace(1, n_cls, n_cls)
    ii = _prior_resample(pool_y, ramp / ramp.sum(), rng)
    noisy = np.clip(pool_img + rng.normal(0, 0.3, pool_img.shape), 0, 1)
    add("prior+noise", noisy[ii], pool_y[ii])
    keep = np.sort(rng.choice(len(val_y), size=min(n_val, len(val_y)), replace=False))
    z_val = logits(val_img[keep])
    name = "digits2" if binary else "digits"
    return Problem(name, z_val, val_y[keep].astype(np.int64), targets)


def blobs_problem(seed: int = 0, n_per_class: int = 400) -> Problem:
    """The ``blobs`` tuning problem (logistic regression on a Gaussian mixture, feature shifts)."""
    rng = np.random.default_rng(seed + 100)
    c, dim = 10, 16
    means = rng.normal(0, 1.0, (c, dim)) * 1.1

    def sample(n: int, noise: float = 1.0, prior: NDArray[np.float64] | None = None,
               shrink: float = 1.0, drift: NDArray[np.float64] | None = None):
        counts = rng.multinomial(n * c, np.full(c, 1.0 / c) if prior is None else prior)
        yy = np.repeat(np.arange(c), counts)
        xx = means[yy] * shrink + rng.normal(0, noise, (len(yy), dim))
        if drift is not None:
            xx = xx + drift
        return xx, yy

    X_tr, y_tr = sample(300)
    clf = LogisticRegression(C=1.0, max_iter=1000).fit(X_tr, y_tr)
    X_val, y_val = sample(n_per_class // 2)
    targets: dict[str, tuple[NDArray[np.float64], float]] = {}

    def add(name: str, X: NDArray[np.float64], y: NDArray[np.int64]) -> None:
        z = clf.decision_function(X)
        targets[name] = (z, float(np.mean(z.argmax(1) == y)))

    add("clean", *sample(n_per_class // 2))
    for s, noise in enumerate((1.25, 1.5, 2.0, 2.5, 3.0), 1):
        add(f"noise-{s}", *sample(n_per_class // 2, noise=noise))
    for s, shrink in enumerate((0.8, 0.6, 0.45), 1):
        add(f"shrink-{s}", *sample(n_per_class // 2, shrink=shrink))
    for s, scale in enumerate((0.5, 1.0), 1):
        add(f"drift-{s}", *sample(n_per_class // 2, drift=rng.normal(0, scale, dim)))
    for s in range(1, 4):
        add(f"prior-{s}", *sample(n_per_class // 2, prior=rng.dirichlet(np.full(c, 0.5))))
    return Problem("blobs", clf.decision_function(X_val), y_val.astype(np.int64), targets)


# ----------------------------------------------------------------------------- grid
#: The configuration every row of the table changes one thing of: the library defaults
#: (``check_base_matches_library`` fails loudly if they drift apart).
BASE: dict[str, Any] = dict(
    n_anchors="auto",
    variance_std_ratio=0.1,
    optimizer="adam",
    lr_positions=0.01,
    lr_peaks=0.1,
    lr_variances=0.1,
    max_epochs=500,
    min_epochs=100,
    space="augmented",
    stop_rule="fixed",
    anchor_sampling="stratified",
    peak=6.0,
)
#: Kernel-specific base values (the variance scale means different widths for d**2 and d).
BASE_KERNEL: dict[str, dict[str, Any]] = {
    "gaussian": dict(variance_mean=10.0),
    "exponential": dict(variance_mean=5.0),
}
PREDICT_BASE: dict[str, Any] = dict(alpha=0.95, rectify="per-anchor")

Over = dict[str, Any]


def fit_variants(quick: bool = False) -> list[tuple[str, Over, Over]]:
    """(label, ALSA-G overrides, ALSA-E overrides) of every configuration with its own fit."""
    both = lambda label, over: (label, over, over)  # noqa: E731
    v: list[tuple[str, Over, Over]] = [both("base", {})]
    if quick:
        return v
    v += [both(f"n_anchors={k}", {"n_anchors": k}) for k in (100, 1000)]
    v += [
        ("variance_mean=x0.5", {"variance_mean": 5.0}, {"variance_mean": 2.5}),
        ("variance_mean=x2", {"variance_mean": 20.0}, {"variance_mean": 10.0}),
        both("variance_mean=auto", {"variance_mean": "auto"}),
        both("variance_std=0", {"variance_std_ratio": 0.0}),
        both("variance_std=0.2*mean", {"variance_std_ratio": 0.2}),
    ]
    v += [
        both(f"lr_peaks,variances={lr:g}", {"lr_peaks": lr, "lr_variances": lr})
        for lr in (0.01, 0.03, 0.3)
    ]
    v += [both("lr_positions=0.1", {"lr_positions": 0.1})]
    v += [both(f"max_epochs={m}", {"max_epochs": m}) for m in (100, 300, 2000)]
    v += [both(f"min_epochs={m}", {"min_epochs": m}) for m in (0, 50)]
    v += [both(f"optimizer={o}", {"optimizer": o}) for o in ("rmsprop", "sgd")]
    v += [both(f"space={sp}", {"space": sp}) for sp in ("raw", "centered", "logprob")]
    v += [both("stop_rule=paper", {"stop_rule": "paper"})]
    v += [both("anchor_sampling=uniform", {"anchor_sampling": "uniform"})]
    v += [both(f"freeze={f}", {"freeze": (f,)}) for f in ("positions", "peaks", "variances")]
    v += [both("freeze=peaks+variances", {"freeze": ("peaks", "variances")})]
    return v


def check_base_matches_library() -> None:
    """Fail if BASE is not what ``get_estimator("alsa-g" / "alsa-e")`` uses by default."""
    from estimators.methods.alsa import ALSAE, ALSAG

    for cls, kernel in ((ALSAG, "gaussian"), (ALSAE, "exponential")):
        params = cls().get_params()
        for name, value in fit_kwargs(kernel, {}).items():
            if params[name] != value:
                raise SystemExit(
                    f"BASE {name}={value!r} differs from {cls.__name__}'s default {params[name]!r}"
                )
        for name, value in PREDICT_BASE.items():
            if params[name] != value:
                raise SystemExit(
                    f"PREDICT_BASE {name}={value!r} differs from {cls.__name__}'s {params[name]!r}"
                )


def fit_kwargs(kernel: str, over: Over) -> dict[str, Any]:
    """Keyword arguments of :func:`fit_alsa_anchors` for a kernel and a row's overrides."""
    kw = {**BASE, **BASE_KERNEL[kernel], **over}
    ratio = kw.pop("variance_std_ratio")
    mean = kw["variance_mean"]
    kw["variance_std"] = ratio * (BASE_KERNEL[kernel]["variance_mean"] if mean == "auto" else mean)
    return kw


def predict_variants() -> list[tuple[str, dict[str, Any]]]:
    """(label, overrides of PREDICT_BASE) evaluated on the base fits."""
    v = [(f"alpha={a}", {"alpha": a}) for a in (0.8, 0.9, 0.99)]
    v += [(f"rectify={r}", {"rectify": r}) for r in ("total", "kernel", "none")]
    return v


def evaluate(problem: Problem, anchors: Any, predict_kw: dict[str, Any]) -> float:
    """MAE in percentage points over the problem's target sets."""
    errs = [
        abs(alsa_predict(z, anchors, device="cpu", **predict_kw).accuracy - acc)
        for z, acc in problem.targets.values()
    ]
    return 100.0 * float(np.mean(errs))


def average_confidence_mae(problem: Problem) -> float:
    """Reference: MAE of AC (mean max-softmax, no temperature scaling)."""
    errs = []
    for z, acc in problem.targets.values():
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        errs.append(abs(p.max(1).mean() - acc))
    return 100.0 * float(np.mean(errs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one seed, a reduced grid")
    parser.add_argument("--seeds", type=int, default=2, help="anchor seeds per configuration")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    args = parser.parse_args()
    seeds = [0] if args.quick else list(range(args.seeds))
    torch.set_num_threads(args.threads)
    check_base_matches_library()
    t_start = time.perf_counter()
    problems = [digits_problem(0), blobs_problem(0)]
    for pr in problems:
        accs = [a for _, a in pr.targets.values()]
        val_acc = float(np.mean(pr.val_logits.argmax(1) == pr.val_labels))
        print(
            f"# problem {pr.name}: n_val={len(pr.val_labels)}, val acc={val_acc:.3f}, "
            f"{len(pr.targets)} targets, true acc {min(accs):.3f}-{max(accs):.3f}, "
            f"AC MAE={average_confidence_mae(pr):.2f} pp"
        )
    variants = fit_variants(args.quick)
    kernels = ("gaussian", "exponential")
    base_fits: dict[tuple[str, str, int], Any] = {}
    print(HEADER)
    for label, over_g, over_e in variants:
        row: dict[str, Any] = {"config": label}
        epochs: list[int] = []
        converged: list[bool] = []
        secs: list[float] = []
        per_seed: list[list[float]] = []  # MAE per (kernel, problem), one entry per seed
        for kernel, over in zip(kernels, (over_g, over_e)):
            for pr in problems:
                maes = []
                for seed in seeds:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", ConvergenceWarning)
                        warnings.simplefilter("ignore", UserWarning)
                        fit = fit_alsa_anchors(
                            pr.val_logits,
                            pr.val_labels,
                            kernel=kernel,
                            seed=seed,
                            device="cpu",
                            **fit_kwargs(kernel, over),
                        )
                    epochs.append(fit.n_epochs)
                    converged.append(fit.stop_reason in ("converged", "crossed", "fixed"))
                    secs.append(fit.seconds)
                    maes.append(evaluate(pr, fit.anchors, PREDICT_BASE))
                    if label == "base":
                        base_fits[(kernel, pr.name, seed)] = fit
                row[f"{kernel[0].upper()}-{pr.name}"] = float(np.mean(maes))
                per_seed.append(maes)
        row["sd"] = float(np.std(np.mean(per_seed, axis=0)))
        row["epochs_med"] = int(np.median(epochs))
        row["epochs_max"] = int(np.max(epochs))
        row["conv"] = float(np.mean(converged))
        row["fit_s"] = float(np.mean(secs))
        print(_fmt_row(row), flush=True)
    if not args.quick:
        for label, over in predict_variants():
            row = {"config": label}
            per_seed = []
            for kernel in kernels:
                for pr in problems:
                    kw = {**PREDICT_BASE, **over}
                    fits = [base_fits[(kernel, pr.name, s)] for s in seeds]
                    maes = [evaluate(pr, fit.anchors, kw) for fit in fits]
                    row[f"{kernel[0].upper()}-{pr.name}"] = float(np.mean(maes))
                    per_seed.append(maes)
            row["sd"] = float(np.std(np.mean(per_seed, axis=0)))
            print(_fmt_row(row), flush=True)
    print(f"# total {time.perf_counter() - t_start:.0f} s")


HEADER = (
    "| configuration                | G-digits | G-blobs | E-digits | E-blobs |  mean |   sd | "
    "ep med | ep max | conv | fit s |\n"
    "| ---------------------------- | -------: | ------: | -------: | ------: | ----: | ---: | "
    "-----: | -----: | ---: | ----: |"
)


def _fmt_row(row: dict[str, Any]) -> str:
    cols = ["G-digits", "G-blobs", "E-digits", "E-blobs"]
    maes = [row[c] for c in cols]
    txt = f"| {row['config']:<28} | " + " | ".join(
        f"{m:{w}.2f}" for m, w in zip(maes, (8, 7, 8, 7))
    )
    txt += f" | {np.mean(maes):5.2f} | {row['sd']:4.2f}"
    if "epochs_med" in row:
        txt += (
            f" | {row['epochs_med']:6d} | {row['epochs_max']:6d} | {row['conv']:4.2f} "
            f"| {row['fit_s']:5.2f} |"
        )
    else:
        txt += " |      - |      - |    - |     - |"
    return txt


if __name__ == "__main__":
    main()
