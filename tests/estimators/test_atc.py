"""ATC: METHODS §13 ATC items 1-5, with ATC_code's find_ATC_threshold re-implemented here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax as sp_softmax

from estimators import get_estimator
from estimators.methods.atc import ATC, ATCMC, ATCNE, atc_accuracy, fit_atc_threshold


def find_atc_threshold_reference(scores, correct):
    """ATC_code's find_ATC_threshold, re-implemented from its description (METHODS §5).

    Sort ascending; fp starts at the number of wrong points and fn at 0; each wrong point
    decrements fp, each correct one increments fn; keep the first index where |fp - fn| reaches a
    strict new minimum. The initial threshold is 0.0.
    """
    order = np.argsort(scores, kind="stable")
    s, c = np.asarray(scores)[order], np.asarray(correct)[order]
    fp, fn = float(np.sum(~c)), 0.0
    best, thres = abs(fp - fn), 0.0
    for i in range(len(s)):
        if not c[i]:
            fp -= 1
        else:
            fn += 1
        if abs(fp - fn) < best:
            best, thres = abs(fp - fn), s[i]
    return best, thres


def get_atc_acc_reference(thres, scores):
    """ATC_code's get_ATC_acc, converted from percent to a fraction."""
    return np.mean(np.asarray(scores) >= thres) * 100.0 / 100.0


def make_data(rng, n=400, c=5, acc=0.7):
    z = rng.normal(size=(n, c)) * 2
    y = np.where(rng.random(n) < acc, z.argmax(axis=1), rng.integers(0, c, n))
    return z, y


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 60), st.integers(0, 2**32 - 1))
def test_exact_threshold_reproduces_validation_error(n, seed):
    rng = np.random.default_rng(seed)
    scores = rng.permutation(n).astype(float) + rng.random(n) * 0.5  # distinct
    correct = rng.random(n) < rng.random()
    t = fit_atc_threshold(scores, correct)
    assert np.mean(scores >= t) == np.mean(correct)
    assert np.mean(scores < t) == np.mean(~correct)
    assert atc_accuracy(scores, t) == np.mean(correct)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 60), st.integers(0, 2**32 - 1))
def test_reference_rule_matches_find_atc_threshold(n, seed):
    rng = np.random.default_rng(seed)
    scores = rng.random(n)
    correct = rng.random(n) < 0.6
    if correct.all():
        correct[0] = False  # the zero-error case is the documented bug, tested below
    _, ref_t = find_atc_threshold_reference(scores, correct)
    t = fit_atc_threshold(scores, correct, rule="reference")
    assert t == ref_t
    assert atc_accuracy(scores, t) == pytest.approx(get_atc_acc_reference(ref_t, scores), abs=1e-12)
    if len(np.unique(scores)) == n:
        assert atc_accuracy(scores, t) == pytest.approx(np.mean(correct) + 1 / n)


def test_estimator_on_validation_gives_acc_and_acc_plus_one_over_n(rng):
    z, y = make_data(rng)
    for cls in (ATCMC, ATCNE):
        exact = cls().fit(z, y)
        ref = cls(rule="reference").fit(z, y)
        assert exact.estimate(z).accuracy == pytest.approx(exact.val_accuracy_, abs=1e-15)
        assert ref.estimate(z).accuracy == pytest.approx(ref.val_accuracy_ + 1 / len(y))
        assert exact.estimate(z).diagnostics["val_fraction_at_or_above"] == exact.val_accuracy_


def test_estimator_threshold_matches_reference_pipeline(rng):
    # Post-T MC with the reference rule = find_ATC_threshold on softmax(z / T) scores.
    z, y = make_data(rng)
    target = rng.normal(size=(300, 5)) * 1.5
    est = ATCMC(rule="reference").fit(z, y)
    t = est.temperature_
    val_scores = sp_softmax(z / t, axis=1).max(axis=1)
    _, ref_t = find_atc_threshold_reference(val_scores, z.argmax(axis=1) == y)
    np.testing.assert_allclose(est.threshold_, ref_t, rtol=1e-12)
    tgt_scores = sp_softmax(target / t, axis=1).max(axis=1)
    res = est.estimate(target)
    assert abs(res.accuracy - get_atc_acc_reference(ref_t, tgt_scores)) <= 1 / 300
    np.testing.assert_array_equal(res.per_sample, (tgt_scores >= est.threshold_) * 1.0)


def test_zero_validation_errors_gives_one_for_both_scores():
    z = np.array([[3.0, 0.0, 0.0], [0.0, 2.0, 1.0], [0.0, 0.5, 4.0], [1.0, 0.0, 0.2]])
    y = z.argmax(axis=1)
    ne_scores = np.sum(sp_softmax(z, axis=1) * np.log(sp_softmax(z, axis=1)), axis=1)
    # The official code keeps thres = 0.0: NE scores are < 0, so it predicts 0% accuracy.
    _, official_t = find_atc_threshold_reference(ne_scores, np.ones(4, bool))
    assert official_t == 0.0 and get_atc_acc_reference(official_t, ne_scores) == 0.0
    for rule in ("exact", "reference"):
        for cls in (ATCMC, ATCNE):
            est = cls(rule=rule, temperature_scaling=False)
            with pytest.warns(UserWarning, match="degenerate"):
                est.fit(z, y)
            assert est.estimate(z).accuracy == 1.0


def test_all_wrong_validation_gives_zero_in_exact_mode():
    z = np.array([[3.0, 0.0], [0.0, 2.0], [1.0, 0.5]])
    y = 1 - z.argmax(axis=1)
    with pytest.warns(UserWarning, match="degenerate"):
        est = ATCNE(temperature_scaling=False).fit(z, y)
    assert est.threshold_ == np.inf
    assert est.estimate(z).accuracy == 0.0
    assert fit_atc_threshold([0.2, 0.9], [0, 0], rule="reference") == 0.9  # official: s_(n)


def test_negative_entropy_has_no_nan_for_saturated_probabilities():
    z = np.array([[800.0, 0.0, -800.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.2], [5.0, 0.0, 0.0]])
    y = np.array([0, 0, 2, 1])
    est = ATCNE(temperature_scaling=False).fit(z, y)
    assert np.isfinite(est.threshold_)
    res = est.estimate(np.array([[1000.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    assert np.isfinite(res.accuracy) and res.per_sample.tolist() == [1.0, 0.0]


def test_binary_mc_equals_ne_and_temperature_does_not_matter(rng):
    z, y = make_data(rng, n=300, c=2, acc=0.8)
    target = rng.normal(size=(200, 2)) * 3
    values = {
        (cls.__name__, ts): cls(temperature_scaling=ts).fit(z, y).estimate(target).accuracy
        for cls in (ATCMC, ATCNE) for ts in (False, True)
    }
    assert len(set(values.values())) == 1, values


def test_monotone_in_target_confidence(rng):
    z, y = make_data(rng)
    target = rng.normal(size=(250, 5))
    for key in ("atc-mc", "atc-ne"):
        est = get_estimator(key).fit(z, y)
        values = [est.estimate(beta * target).accuracy for beta in (0.5, 1.0, 2.0, 4.0)]
        assert values == sorted(values)
    scores = rng.random(100)
    t = fit_atc_threshold(rng.random(50), rng.random(50) < 0.5)
    assert atc_accuracy(scores + 0.1, t) >= atc_accuracy(scores, t)


def test_ties_at_the_threshold_count_as_correct():
    scores = np.array([0.2, 0.5, 0.5, 0.5, 0.9])
    correct = np.array([False, False, True, True, True])
    t = fit_atc_threshold(scores, correct)
    assert t == 0.5
    assert atc_accuracy(scores, t) == 0.8  # > acc_S = 0.6: no threshold reproduces it


def test_parameters_and_names(rng):
    assert ATCMC().score == "max_confidence" and ATCNE().score == "negative_entropy"
    assert ATCMC.name == "atc-mc" and ATCNE.name == "atc-ne" and ATC.name == "atc"
    z, y = make_data(rng, n=50)
    with pytest.raises(ValueError, match="'score' parameter of ATCMC must be one of"):
        ATCMC(score="entropy").fit(z, y)
    with pytest.raises(ValueError, match="'rule' parameter of ATCNE must be one of"):
        ATCNE(rule="official").fit(z, y)
    with pytest.raises(ValueError, match="'rule' parameter of fit_atc_threshold"):
        fit_atc_threshold([0.1], [1], rule="bogus")
    with pytest.raises(ValueError, match="threshold must be a number"):
        atc_accuracy([0.1], float("nan"))
