"""``auto``: the stacked estimator, its member sets, its equivalence with the CLI's path, and
the ridge combination's penalty choice."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from estimators import available_estimators, get_estimator
from estimators.trust.auto import Auto, auto_from_estimates
from estimators.trust.calibration_artifact import PANEL
from estimators.trust.stacking import LAMBDAS, fit_stack, stack_features


def _data(c: int, n: int = 2000, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    x = rng.normal(size=(n, c)) + 2.5 * np.eye(c)[y]
    return x, y, x[: n // 2] + rng.normal(scale=1.0, size=(n // 2, c))


@pytest.mark.parametrize("c", [2, 3, 100])
def test_auto_on_binary_three_and_hundred_class_heads(c: int) -> None:
    x, y, t = _data(c, n=3000 if c == 100 else 1500)
    result = Auto(methods=list(PANEL)).fit(x, y).estimate(t)
    assert 0.0 <= result.accuracy <= 1.0
    low, high = result.shift_interval
    assert low <= result.accuracy <= high
    assert set(result.diagnostics["members"]) == set(PANEL)


def test_auto_on_30_rows_falls_back_to_a_band_at_least_the_sampling_interval() -> None:
    x, y, t = _data(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = Auto(methods=list(PANEL)).fit(x, y).estimate(t[:30])
    assert r.shift_interval[0] <= r.interval[0] and r.shift_interval[1] >= r.interval[1]
    assert r.shift_interval[1] - r.shift_interval[0] >= 0.15  # 30 rows: sampling dominates


def test_auto_equals_its_combination_from_precomputed_estimates() -> None:
    x, y, t = _data(4)
    auto = Auto(methods=list(PANEL)).fit(x, y).estimate(t)
    members = {m: get_estimator(m).fit(x, y).estimate(t) for m in PANEL}
    combined = auto_from_estimates(members, x, y, t)
    assert combined is not None
    assert combined.accuracy == pytest.approx(auto.accuracy, abs=1e-12)
    assert combined.diagnostics["members"] == pytest.approx(auto.diagnostics["members"])


@pytest.mark.parametrize("methods, match", [
    (["ac", "nope"], "distinct keys among"),
    ("ac", "list of registry keys"),
    (["ac", "ac"], "distinct keys among"),
    (["ac", "doc"], "member set the calibration was fit for"),
])
def test_auto_refuses_bad_member_lists(methods, match) -> None:
    x, y, _ = _data(3, n=300)
    with pytest.raises(ValueError, match=match):
        Auto(methods=methods).fit(x, y)


def test_auto_is_opt_in() -> None:
    assert "auto" not in available_estimators()
    assert "auto" in available_estimators(include_opt_in=True)


def test_fit_stack_chooses_the_penalty_without_the_rows_it_is_scored_on() -> None:
    rng = np.random.default_rng(0)
    n, members = 300, ("ac", "doc", "alsa-e")
    sig = {"confidence_drop": rng.uniform(0, 0.2, n), "panel_spread": rng.uniform(0, .05, n),
           "val_accuracy": np.full(n, .9), "entropy_rise": rng.uniform(0, .2, n),
           "prediction_shift": rng.uniform(0, .1, n), "label_shift_z": rng.uniform(0, 50, n),
           "n_target": np.full(n, 1000.0)}
    est = {m: 0.9 - sig["confidence_drop"] * k for m, k in zip(members, (1.0, 1.1, 1.3))}
    truth = 0.9 - 1.3 * sig["confidence_drop"] + rng.normal(0, .005, n)
    g = np.repeat(["a", "b", "c"], 100)
    model = fit_stack(sig, est, truth, g, members)
    assert model.base == "alsa-e" and model.penalty in LAMBDAS
    z, base = stack_features(sig, est, members)
    assert z.shape == (n, 2 + 7)
    pred = model.predict(sig, est)
    assert np.mean(np.abs(pred - truth)) <= np.mean(np.abs(base - truth)) + 0.002
    with pytest.raises(ValueError, match="at least 2 datasets"):
        fit_stack(sig, est, truth, np.full(n, "a"), members)
