"""ScoreMap and leave_one_group_out (estimators/maths/score_map.py), and score estimators with a map."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from estimators import ScoreMap, get_estimator, leave_one_group_out

pytestmark = pytest.mark.filterwarnings(
    "ignore::estimators.core.exceptions.DegenerateValidationWarning")


@pytest.mark.parametrize("method", ["ols", "theil-sen"])
def test_exact_linear_data_is_recovered(method):
    s = np.array([0.1, 0.25, 0.3, 0.55, 0.8])
    a = 0.9 * s + 0.05
    m = ScoreMap(method).fit(s, a)
    assert m.slope_ == pytest.approx(0.9, abs=1e-12)
    assert m.intercept_ == pytest.approx(0.05, abs=1e-12)
    assert m.r2_ == pytest.approx(1.0, abs=1e-12)
    assert m.predict(0.5) == pytest.approx(0.5, abs=1e-12)
    assert m.predict(5.0) == 1.0 and m.predict(-5.0) == 0.0  # clipped
    assert m.predict_raw(5.0) == pytest.approx(4.55)


def test_ols_matches_scipy_linregress_and_r2():
    rng = np.random.default_rng(0)
    s = rng.random(40)
    a = 0.6 * s + 0.2 + rng.normal(0, 0.05, 40)
    m = ScoreMap().fit(s, a)
    ref = stats.linregress(s, a)
    assert m.slope_ == pytest.approx(ref.slope, rel=1e-12)
    assert m.intercept_ == pytest.approx(ref.intercept, rel=1e-12)
    assert m.r2_ == pytest.approx(ref.rvalue ** 2, rel=1e-10)


def test_theil_sen_ignores_an_outlier():
    s = np.linspace(0, 1, 11)
    a = 0.5 * s + 0.3
    a[3] = 0.0
    robust = ScoreMap("theil-sen").fit(s, a)
    assert robust.slope_ == pytest.approx(0.5, abs=1e-12)
    assert abs(ScoreMap().fit(s, a).slope_ - 0.5) > 0.01


def test_prediction_interval_is_the_textbook_one_and_covers():
    rng = np.random.default_rng(1)
    s = rng.random(30)
    a = 0.5 * s + 0.2 + rng.normal(0, 0.02, 30)
    m = ScoreMap().fit(s, a)
    x0 = 0.4
    resid = a - (m.slope_ * s + m.intercept_)
    se = math.sqrt(resid @ resid / 28 * (1 + 1 / 30 + (x0 - s.mean()) ** 2
                                          / np.sum((s - s.mean()) ** 2)))
    half = stats.t.ppf(0.95, 28) * se
    lo, hi = m.prediction_interval(x0, 0.9)
    assert (lo, hi) == pytest.approx((m.predict_raw(x0) - half, m.predict_raw(x0) + half))
    # coverage of fresh points, roughly the level
    fresh_s = rng.random(2000)
    fresh_a = 0.5 * fresh_s + 0.2 + rng.normal(0, 0.02, 2000)
    inside = [lo <= y <= hi for x, y in zip(fresh_s, fresh_a)
              for lo, hi in [m.prediction_interval(x, 0.9)]]
    assert 0.85 <= np.mean(inside) <= 0.95
    assert all(np.isnan(ScoreMap("theil-sen").fit(s, a).prediction_interval(0.4)))
    assert all(np.isnan(ScoreMap().fit([0, 1], [0, 1]).prediction_interval(0.4)))
    assert all(np.isnan(ScoreMap.from_line(1.0, 0.0).prediction_interval(0.4)))


def test_leave_one_group_out_equals_refits_by_hand():
    rng = np.random.default_rng(2)
    s = rng.random(24)
    a = np.clip(0.7 * s + 0.1 + rng.normal(0, 0.05, 24), 0, 1)
    groups = np.repeat(["blur", "noise", "digital", "weather"], 6)
    got = leave_one_group_out(s, a, groups)
    for g in np.unique(groups):
        held = groups == g
        slope, intercept = np.polyfit(s[~held], a[~held], 1)
        np.testing.assert_allclose(got[held], np.clip(slope * s[held] + intercept, 0, 1),
                                   atol=1e-12)


def test_leave_one_group_out_on_exact_data_is_exact_and_errors():
    s = np.arange(6.0) / 10
    a = 0.5 * s + 0.4
    np.testing.assert_allclose(leave_one_group_out(s, a, [0, 0, 1, 1, 2, 2]), a, atol=1e-12)
    with pytest.raises(ValueError, match="at least 2 distinct groups"):
        leave_one_group_out(s, a, [0] * 6)
    with pytest.raises(ValueError, match="groups must be 1-D with one label per point"):
        leave_one_group_out(s, a, [0, 1])
    with pytest.raises(ValueError, match="leaving out group 'b'.*scores must not all be equal"):
        leave_one_group_out([0.1, 0.1, 0.2, 0.3], [0.5, 0.6, 0.7, 0.8], ["a", "a", "b", "b"])


@pytest.mark.parametrize("scores, accs, message", [
    ([0.1], [0.5], "needs at least 2 .* points; got 1"),
    ([], [], "needs at least 2"),
    ([0.3, 0.3, 0.3], [0.1, 0.2, 0.3], "scores must not all be equal"),
    ([0.1, np.nan], [0.2, 0.3], "scores must be finite"),
    ([0.1, 0.2], [0.2, np.inf], "accuracies must be finite"),
    ([0.1, 0.2, 0.3], [0.2, 0.3], "same length; got 3 scores and 2 accuracies"),
    ([[0.1, 0.2]], [[0.2, 0.3]], "scores must be a 1-D array"),
    (["a", "b"], [0.1, 0.2], "scores must be a 1-D array of numbers"),
])
def test_fit_errors_are_clear(scores, accs, message):
    with pytest.raises(ValueError, match=message):
        ScoreMap().fit(scores, accs)


def test_constructor_and_unfitted_errors():
    with pytest.raises(ValueError, match="'method' parameter of ScoreMap must be one of"):
        ScoreMap("lasso")
    with pytest.raises(ValueError, match="not fitted yet"):
        ScoreMap().predict(0.5)
    with pytest.raises(ValueError, match="slope must be a finite number"):
        ScoreMap.from_line(np.nan, 0.0)
    with pytest.raises(ValueError, match="The 'level' parameter"):
        ScoreMap().fit([0, 1, 2], [0, 1, 1]).prediction_interval(0.5, level=90)


@pytest.mark.parametrize("key", ["mano", "nuclear-norm"])
def test_estimator_with_a_fitted_map_gives_its_prediction_and_interval(key):
    rng = np.random.default_rng(3)
    z = rng.normal(size=(500, 5)) * 2
    m = ScoreMap().fit([0.2, 0.4, 0.5, 0.7], [0.3, 0.52, 0.6, 0.79])
    res = get_estimator(key, score_map=m).fit(z, z.argmax(1)).estimate(z, level=0.8)
    score = res.diagnostics["score"]
    assert res.accuracy == pytest.approx(m.predict(score), abs=1e-15)
    assert res.interval == m.prediction_interval(score, 0.8) and res.level == 0.8
    assert res.interval[0] <= res.accuracy <= res.interval[1]
    pair = get_estimator(key, score_map=(m.slope_, m.intercept_)).fit(z, z.argmax(1)).estimate(z)
    assert pair.accuracy == pytest.approx(res.accuracy, abs=1e-15)
    assert all(np.isnan(pair.interval))
    with pytest.raises(ValueError, match="not fitted yet"):
        get_estimator(key, score_map=ScoreMap()).fit(z, z.argmax(1))


def test_benchmark_estimate_stage_runs_the_score_methods_by_default():
    from estimators import available_estimators
    from tasks.methods import all_method_names, resolve_methods

    names, _ = resolve_methods(None, None)
    assert "mano" in names and "nuclear-norm" in names
    assert set(available_estimators(include_scores=True)) <= set(names) <= set(all_method_names())
    names, params = resolve_methods(["ac", "mano"], {"mano": {"form": "code"}})
    assert names == ["ac", "mano"] and params == {"mano": {"form": "code"}}
