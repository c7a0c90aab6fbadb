"""Temperature scaling: METHODS §13 items 1-5, with a scipy L-BFGS-B reference written here."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax as sp_log_softmax

from estimators import NotFittedError
from estimators.maths.temperature import (
    TemperatureBoundWarning,
    TemperatureScaling,
    fit_temperature,
    temperature_nll,
)


def calibrated_logits(rng: np.random.Generator, n: int, c: int, scale: float = 2.0):
    """Logits z and labels drawn from softmax(z): a perfectly calibrated model (T* = 1)."""
    z = rng.normal(size=(n, c)) * scale
    p = np.exp(sp_log_softmax(z, axis=1))
    u = rng.random(n)[:, None]
    labels = (p.cumsum(axis=1) < u).sum(axis=1)
    return z, np.minimum(labels, c - 1)


def reference_lbfgsb_temperature(z: np.ndarray, y: np.ndarray) -> float:
    """What kundajelab/abstention's TempScaling does: L-BFGS-B on T from 1.0, analytic gradient."""
    true_logit = z[np.arange(len(y)), y]

    def nll_and_grad(t_arr):
        t = t_arr[0]
        lp = sp_log_softmax(z / t, axis=1)
        nll = -lp[np.arange(len(y)), y].mean()
        p = np.exp(lp)
        # d/dT [lse(z/T) - z_y/T] = -(E_p[z] - z_y) / T^2
        grad = -np.mean((p * z).sum(axis=1) - true_logit) / t**2
        return nll, np.array([grad])

    res = minimize(nll_and_grad, x0=[1.0], jac=True, method="L-BFGS-B",
                   bounds=[(1e-3, None)], tol=1e-12)
    return float(res.x[0])


def test_argmax_is_unchanged(rng):
    z, y = calibrated_logits(rng, 500, 6)
    ts = TemperatureScaling().fit(3.0 * z, y)
    np.testing.assert_array_equal(ts.transform(3.0 * z).argmax(axis=1), z.argmax(axis=1))


def test_first_order_condition_and_nll_not_worse_than_identity(rng):
    z, y = calibrated_logits(rng, 2000, 5)
    z = 2.5 * z + rng.normal(size=z.shape) * 0.3
    t = fit_temperature(z, y)
    p = np.exp(sp_log_softmax(z / t, axis=1))
    expected_logit = np.mean((p * z).sum(axis=1))
    true_logit = np.mean(z[np.arange(len(y)), y])
    np.testing.assert_allclose(expected_logit, true_logit, atol=1e-9)
    assert temperature_nll(z, y, t) <= temperature_nll(z, y, 1.0)
    for other in (0.9 * t, 1.1 * t):
        assert temperature_nll(z, y, t) <= temperature_nll(z, y, other)


@pytest.mark.parametrize("beta_star", [0.5, 3.0])
def test_recovers_known_temperature(beta_star):
    z, y = calibrated_logits(np.random.default_rng(1), 10_000, 10)
    t = fit_temperature(beta_star * z, y)
    assert abs(t - beta_star) / beta_star < 0.02


def test_separable_validation_hits_lower_bound_with_warning():
    z = np.array([[5.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0], [9.0, 1.0, 0.0]])
    y = np.array([0, 1, 2, 0])
    with pytest.warns(TemperatureBoundWarning, match="lower bound T = 0.05"):
        t = fit_temperature(z, y)
    assert t == 0.05
    assert np.isfinite(temperature_nll(z, y, t))
    # Huge margins underflow the softmax completely: still the bound, still no NaN.
    with pytest.warns(TemperatureBoundWarning):
        assert fit_temperature(1e4 * z, y, bounds=(0.01, 10.0)) == 0.01


def test_anti_informative_logits_hit_upper_bound_with_warning():
    z = np.array([[5.0, 0.0], [0.0, 5.0], [4.0, 1.0]])
    y = np.array([1, 0, 1])  # every true class gets the lowest logit
    with pytest.warns(TemperatureBoundWarning, match="upper bound T = 100"):
        assert fit_temperature(z, y) == 100.0


def test_flat_objective_keeps_unit_temperature():
    z = np.ones((5, 3))
    y = np.array([0, 1, 2, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fit_temperature(z, y) == 1.0
        assert fit_temperature(z, y, bounds=(2.0, 3.0)) == 2.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_lbfgsb_reference(seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(800, 7)) * rng.uniform(0.5, 4.0)
    y = np.where(rng.random(800) < 0.7, z.argmax(axis=1), rng.integers(0, 7, 800))
    ours = fit_temperature(z, y)
    ref = reference_lbfgsb_temperature(z, y)
    np.testing.assert_allclose(ours, ref, rtol=1e-4)


def test_class_transform_and_errors(rng):
    z, y = calibrated_logits(rng, 300, 4)
    ts = TemperatureScaling(bounds=(0.1, 10.0))
    with pytest.raises(NotFittedError, match="not fitted yet"):
        ts.transform(z)
    out = ts.fit_transform(2.0 * z, y)
    np.testing.assert_allclose(out, 2.0 * z / ts.temperature_, rtol=1e-15)
    with pytest.raises(ValueError, match="logits has 3 classes but the estimator was fitted on 4"):
        ts.transform(z[:, :3])
    assert "TemperatureScaling(bounds=(0.1, 10.0))" == repr(ts)


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (2.0, 1.0), (1.0, np.inf), "ab", (1.0,)])
def test_bad_bounds_rejected(bounds, rng):
    z, y = calibrated_logits(rng, 20, 3)
    with pytest.raises(ValueError, match="bounds must"):
        fit_temperature(z, y, bounds=bounds)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="val_logits must be a 2-D array"):
        fit_temperature(np.zeros((3, 2, 2)), np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match=r"val_labels must hold class indices in \[0, 2\); got 1 value outside"):
        fit_temperature(np.zeros((2, 2)), [0, 2])
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        temperature_nll(np.zeros((2, 2)), [0, 1], -1.0)


def test_a_validation_set_is_solved_once_and_the_answer_is_the_same(monkeypatch) -> None:
    # the softmax methods and the shift signals all fit the same temperature on one validation
    # set: the second fit costs a hash, and gives exactly what solving again would
    from estimators.maths import temperature

    monkeypatch.setattr(temperature, "_SOLVED", type(temperature._SOLVED)())
    calls: list[int] = []
    solve = temperature._solve_temperature

    def counted(*args):
        calls.append(1)
        return solve(*args)

    monkeypatch.setattr(temperature, "_solve_temperature", counted)
    rng = np.random.default_rng(5)
    y = rng.integers(0, 4, 500)
    z = rng.normal(size=(500, 4)) + 2.0 * np.eye(4)[y]
    first = temperature._fit_temperature(z, y, temperature.DEFAULT_BOUNDS)
    again = temperature._fit_temperature(z.copy(), y.copy(), temperature.DEFAULT_BOUNDS)
    assert again == first and len(calls) == 1  # same bytes in new arrays: remembered
    assert again == solve(z, y, temperature.DEFAULT_BOUNDS)[0]
    z2 = z.copy()
    z2[0, 0] += 1e-9
    temperature._fit_temperature(z2, y, temperature.DEFAULT_BOUNDS)
    temperature._fit_temperature(z, y, (0.5, 2.0))
    assert len(calls) == 3  # other bytes, other bounds: solved
    for i in range(temperature._SOLVED_SIZE + 2):  # only the most recent sets are kept
        temperature._fit_temperature(z + i, y, temperature.DEFAULT_BOUNDS)
    assert len(temperature._SOLVED) == temperature._SOLVED_SIZE


def test_a_remembered_bound_still_warns(monkeypatch) -> None:
    from estimators.maths import temperature

    monkeypatch.setattr(temperature, "_SOLVED", type(temperature._SOLVED)())
    y = np.arange(60) % 3
    z = 50.0 * np.eye(3)[y]  # separable: the NLL keeps falling to the lower bound
    for _ in range(2):
        with pytest.warns(TemperatureBoundWarning, match="lower bound"):
            assert temperature._fit_temperature(z, y, (0.05, 100.0)) == 0.05
    assert len(temperature._SOLVED) == 1
