"""Which label-free base DistCS wraps best: a quick synthetic covariate-shift check.

Features are a Gaussian mixture (one component per class) in ``d`` dimensions, close enough
for about 85 % accuracy; the classifier is a multinomial logistic regression fitted on
training features; its logits are the "backbone". Target sets apply a mild shift of every row
(within the support: noisier features) and replace a fraction of the rows by rows off the
training support that keep their label but lose the class signal (large random features, on
which the linear head is confident and mostly wrong: the premise of the distance check), at
several severities and off-support fractions. For each candidate base, DistCS's absolute error
against the target's true accuracy is averaged over the sets.

    PYTHONPATH=. python benchmarks/distcs_base_check.py
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression

from estimators import get_estimator

BASES = ("atc-mc", "atc-ne", "ac", "doc", "cot", "alsa-e")


def world(seed: int, d: int = 32, c: int = 10):
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(c, d)) * 0.45

    def draw(n, shift=0.0, far=0.0):
        y = rng.integers(0, c, n)
        x = means[y] + rng.normal(size=(n, d)) * (1.0 + shift)
        if far:
            moved = rng.random(n) < far
            x[moved] = rng.normal(size=(int(moved.sum()), d)) * 3.0
        return x, y

    xtr, ytr = draw(4000)
    clf = LogisticRegression(max_iter=300).fit(xtr, ytr)
    return draw, clf, xtr, ytr


def main() -> None:
    errors: dict[str, list[float]] = {b: [] for b in BASES}
    plain: dict[str, list[float]] = {b: [] for b in BASES}
    for seed in range(3):
        draw, clf, xtr, ytr = world(seed)
        xv, yv = draw(2000)
        zv = clf.decision_function(xv)
        for shift, far in ((0.0, 0.2), (0.2, 0.3), (0.4, 0.1), (0.1, 0.5), (0.0, 0.0)):
            xt, yt = draw(3000, shift, far)
            zt = clf.decision_function(xt)
            truth = float(np.mean(zt.argmax(1) == yt))
            for base in BASES:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est = get_estimator("distcs", base=base).fit(
                        zv, yv, val_features=xv, train_features=xtr, train_labels=ytr)
                    acc = est.estimate(zt, target_features=xt).accuracy
                    b = get_estimator(base).fit(zv, yv).estimate(zt).accuracy
                errors[base].append(abs(acc - truth))
                plain[base].append(abs(b - truth))
    print(f"{'base':8s} {'DistCS MAE':>11s} {'base alone':>11s}  (percentage points, 15 sets)")
    for base in BASES:
        print(f"{base:8s} {100 * np.mean(errors[base]):11.2f} {100 * np.mean(plain[base]):11.2f}")


if __name__ == "__main__":
    main()
