"""The Entropy score (Wang et al. 2020; issue 32): the mean prediction entropy of the target.

Checked against scipy's ``entropy`` of the softmax rows (an independent computation), with and
without the validation temperature (fitted here with scipy's bounded minimiser of the NLL), on
its closed forms (uniform rows: log c; one-hot rows: 0), and through a score map.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax
from scipy.stats import entropy

from estimators import ScoreMap, get_estimator
from estimators.scores.entropy import Entropy, mean_entropy


def data(seed: int = 0, n: int = 400, c: int = 5):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    val = rng.normal(size=(n, c)) * 1.5 + 3.0 * np.eye(c)[y]
    target = rng.normal(size=(300, c)) * 2.0 + 1.0 * np.eye(c)[rng.integers(0, c, 300)]
    return val, y, target


def scipy_mean_entropy(logits: np.ndarray, temperature: float = 1.0) -> float:
    return float(np.mean(entropy(softmax(logits / temperature, axis=1), axis=1)))


def scipy_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    def nll(t: float) -> float:
        return -float(np.mean(log_softmax(logits / t, axis=1)[np.arange(len(labels)), labels]))

    return float(minimize_scalar(nll, bounds=(0.05, 20.0), method="bounded",
                                 options={"xatol": 1e-8}).x)


def test_score_is_scipys_mean_entropy_without_temperature():
    val, y, target = data()
    res = Entropy(temperature_scaling=False).fit(val, y).estimate(target)
    assert res.diagnostics["score"] == pytest.approx(scipy_mean_entropy(target), rel=1e-12)
    assert res.diagnostics["normalized_entropy"] == pytest.approx(
        scipy_mean_entropy(target) / math.log(5), rel=1e-12)
    assert res.diagnostics["val_entropy"] == pytest.approx(scipy_mean_entropy(val), rel=1e-12)
    assert math.isnan(res.accuracy) and res.params["temperature"] == 1.0


def test_score_with_the_validation_temperature():
    val, y, target = data(1)
    est = get_estimator("entropy").fit(val, y)
    t = scipy_temperature(val, y)
    assert est.temperature_ == pytest.approx(t, rel=1e-3)
    res = est.estimate(target)
    assert res.diagnostics["score"] == pytest.approx(scipy_mean_entropy(target, t), rel=2e-3)
    assert res.params["temperature"] == est.temperature_


def test_closed_forms_and_saturated_rows():
    assert mean_entropy(np.zeros((7, 4))) == pytest.approx(math.log(4), rel=1e-15)
    assert mean_entropy(np.array([[0.0, 1e4, -1e4], [5e3, 0.0, 0.0]])) == 0.0
    # sharper logits, lower entropy
    _, _, target = data(2)
    assert mean_entropy(2.0 * target) < mean_entropy(target) < mean_entropy(0.5 * target)


def test_per_row_constants_and_float32_change_nothing():
    val, y, target = data(3)
    ref = Entropy().fit(val, y).estimate(target).diagnostics["score"]
    shifted = Entropy().fit(val + 7.0, y).estimate(target - 3.0 * np.arange(300)[:, None])
    assert shifted.diagnostics["score"] == pytest.approx(ref, rel=1e-9)
    f32 = Entropy().fit(val.astype(np.float32), y).estimate(target.astype(np.float32))
    assert f32.diagnostics["score"] == pytest.approx(ref, rel=1e-5)


def test_a_score_map_turns_entropy_into_an_accuracy():
    val, y, target = data(4)
    line = ScoreMap().fit([0.2, 0.6, 1.0], [0.9, 0.7, 0.5])  # higher entropy, lower accuracy
    res = Entropy(score_map=line).fit(val, y).estimate(target)
    s = res.diagnostics["score"]
    assert res.accuracy == pytest.approx(min(max(1.0 - 0.5 * s, 0.0), 1.0), rel=1e-12)
    assert line.slope_ == pytest.approx(-0.5)
