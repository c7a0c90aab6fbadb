"""AC: METHODS §13 AC items 1-3, against a naive reference written here."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax as sp_softmax

from estimators import get_estimator
from estimators.methods.ac import AC, average_confidence


def sample_calibrated(rng: np.random.Generator, n: int, c: int, scale: float = 2.0):
    """Logits and labels drawn from softmax(logits): a perfectly calibrated classifier."""
    z = rng.normal(size=(n, c)) * scale
    p = sp_softmax(z, axis=1)
    labels = (p.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1)
    return z, np.minimum(labels, c - 1)


def test_equals_mean_max_softmax_and_lies_in_range(rng):
    z = rng.normal(size=(300, 6)) * 3
    ref = float(np.mean([max(row) for row in sp_softmax(z, axis=1)]))
    est = AC(temperature_scaling=False).fit(z[:50], rng.integers(0, 6, 50))
    res = est.estimate(z)
    np.testing.assert_allclose(res.accuracy, ref, rtol=1e-13)
    np.testing.assert_allclose(average_confidence(sp_softmax(z, axis=1)), ref, rtol=1e-13)
    assert 1 / 6 <= res.accuracy <= 1.0
    np.testing.assert_allclose(res.per_sample, sp_softmax(z, axis=1).max(axis=1), rtol=1e-13)
    assert res.params == {"temperature_scaling": False, "temperature": 1.0}


def test_invariant_to_row_constant_shifts(rng):
    z = rng.normal(size=(200, 4))
    y = rng.integers(0, 4, 200)
    shift = rng.normal(size=(200, 1)) * 100
    a = AC().fit(z, y).estimate(z).accuracy
    b = AC().fit(z + shift, y).estimate(z + shift).accuracy
    np.testing.assert_allclose(a, b, rtol=1e-9)


def test_calibrated_model_is_estimated_within_sampling_error():
    rng = np.random.default_rng(3)
    val, val_y = sample_calibrated(rng, 4000, 5)
    target, target_y = sample_calibrated(rng, 20_000, 5, scale=1.0)  # covariate shift
    true_acc = float(np.mean(target.argmax(axis=1) == target_y))
    se = np.sqrt(true_acc * (1 - true_acc) / target.shape[0])
    raw = AC(temperature_scaling=False).fit(val, val_y).estimate(target)
    assert abs(raw.accuracy - true_acc) < 4 * se
    ts = AC().fit(val, val_y)  # T is close to 1 for a calibrated model
    assert abs(ts.temperature_ - 1.0) < 0.1
    assert abs(ts.estimate(target).accuracy - true_acc) < 4 * se + 0.01


def test_temperature_scaling_reduces_overconfidence():
    rng = np.random.default_rng(4)
    val, val_y = sample_calibrated(rng, 3000, 10)
    target, target_y = sample_calibrated(rng, 3000, 10)
    true_acc = float(np.mean(target.argmax(axis=1) == target_y))
    pre = AC(temperature_scaling=False).fit(4 * val, val_y).estimate(4 * target).accuracy
    post = get_estimator("ac").fit(4 * val, val_y).estimate(4 * target).accuracy
    assert abs(post - true_acc) < abs(pre - true_acc)
    assert pre > true_acc + 0.1


def test_function_rejects_logits():
    with pytest.raises(ValueError, match=r"probs must hold probabilities in \[0, 1\]"):
        average_confidence([[3.0, -1.0]])
    with pytest.raises(ValueError, match="probs must be a 2-D array"):
        average_confidence([0.5, 0.5])
