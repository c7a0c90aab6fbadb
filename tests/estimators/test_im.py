"""IM: METHODS §13 IM items 1-5: closed form against the weighted-mean definition."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import softmax as sp_softmax

from estimators.methods.im import (
    IM,
    ImportanceWeightingWarning,
    confidence_bins,
    importance_weighted_accuracy,
)


def weighted_mean_reference(val_conf, val_correct, target_conf, n_bins=10):
    """Mandoline with one slice: per-point density-ratio weights, self-normalised mean.

    Bins are found here with a plain loop over edges (left-closed, last bin closed).
    """
    edges = [b / n_bins for b in range(n_bins + 1)]

    def bin_of(x):
        for b in range(n_bins - 1):
            if x < edges[b + 1]:
                return b
        return n_bins - 1

    vb = np.array([bin_of(x) for x in val_conf])
    tb = np.array([bin_of(x) for x in target_conf])
    f_s = np.array([np.mean(vb == b) for b in range(n_bins)])
    f_t = np.array([np.mean(tb == b) for b in range(n_bins)])
    w = f_t[vb] / f_s[vb]
    w = w / w.mean()
    return float(np.mean(w * np.asarray(val_correct, dtype=float)))


def atc_code_histogram_im(val_conf, val_correct, target_conf):
    """ATC_code's HistogramDensity/get_im_estimate as METHODS §4 describes it (edge mismatch)."""
    edges = np.linspace(0, 1, 11)
    src, _ = np.histogram(val_conf, bins=edges, density=True)
    tgt, _ = np.histogram(target_conf, bins=edges, density=True)
    idx = np.digitize(val_conf, edges, right=True) - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        w = tgt[idx] / src[idx]
        w = w / w.mean()
        return float(np.mean(w * val_correct))


@pytest.mark.parametrize("seed", range(5))
def test_closed_form_equals_weighted_mean(seed):
    rng = np.random.default_rng(seed)
    val_conf = rng.beta(5, 2, 500)
    target_conf = rng.beta(2, 2, 300)
    correct = rng.random(500) < val_conf
    target_conf = target_conf[target_conf > 0.3]  # keep all target mass in occupied bins
    val_conf = np.concatenate([val_conf, np.linspace(0.3, 1.0, 8)])  # occupy every bin >= 0.3
    correct = np.concatenate([correct, np.ones(8, bool)])
    ours = importance_weighted_accuracy(val_conf, correct, target_conf)
    ref = weighted_mean_reference(val_conf, correct, target_conf)
    assert abs(ours - ref) <= 1e-12


@pytest.mark.parametrize("n_bins", [5, 10, 50])
def test_estimator_matches_reference_on_logits(rng, n_bins):
    val = rng.normal(size=(600, 4)) * 2
    val_y = np.where(rng.random(600) < 0.7, val.argmax(axis=1), rng.integers(0, 4, 600))
    target = rng.normal(size=(400, 4)) * 1.5
    est = IM(n_bins=n_bins, temperature_scaling=False).fit(val, val_y)
    res = est.estimate(target)
    vc = sp_softmax(val, axis=1).max(axis=1)
    tc = sp_softmax(target, axis=1).max(axis=1)
    corr = val.argmax(axis=1) == val_y
    if res.diagnostics["dropped_target_mass"] == 0.0:
        ref = weighted_mean_reference(vc, corr, tc, n_bins)
        assert abs(res.accuracy - ref) <= 1e-12
    np.testing.assert_allclose(
        importance_weighted_accuracy(vc, corr, tc, n_bins=n_bins), res.accuracy, rtol=1e-13)
    assert res.per_sample is None
    assert res.params["n_bins"] == n_bins


def test_target_equal_to_source_gives_val_accuracy(rng):
    val = rng.normal(size=(500, 3)) * 2
    val_y = np.where(rng.random(500) < 0.5, val.argmax(axis=1), rng.integers(0, 3, 500))
    est = IM().fit(val, val_y)
    assert est.estimate(val).accuracy == pytest.approx(est.val_accuracy_, abs=1e-12)


def test_target_in_one_occupied_bin_gives_that_bin_accuracy():
    val_conf = np.array([0.95, 0.92, 0.91, 0.65, 0.62, 0.61, 0.6])
    correct = np.array([1, 1, 0, 1, 0, 0, 0])
    assert importance_weighted_accuracy(val_conf, correct, [0.63, 0.69, 0.6]) == 0.25
    assert importance_weighted_accuracy(val_conf, correct, [0.99, 1.0]) == pytest.approx(2 / 3)


def test_default_is_ten_equal_width_bins():
    assert IM().n_bins == 10
    np.testing.assert_array_equal(
        confidence_bins(np.array([0.0, 0.0999, 0.1, 0.3, 0.45, 0.5, 0.6, 0.7, 0.9999, 1.0])),
        [0, 0, 1, 3, 4, 5, 6, 7, 9, 9])


def test_confidence_on_a_bin_edge_is_handled_consistently():
    # Binary ties give confidence exactly 0.5 (an interior edge). No validation point lies in
    # [0.4, 0.5), so ATC_code's right-closed lookup divides by an empty bin's zero density.
    val_conf = np.array([0.5, 0.5, 0.7, 0.9])
    correct = np.array([1.0, 0.0, 1.0, 1.0])
    target_conf = np.array([0.5, 0.55, 0.9])
    ref = atc_code_histogram_im(val_conf, correct, target_conf)
    assert not np.isfinite(ref)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = importance_weighted_accuracy(val_conf, correct, target_conf)
    assert ours == pytest.approx((2 / 3) * 0.5 + (1 / 3) * 1.0)
    # Same through the estimator: a binary tie is logits [0, 0].
    val = np.array([[0.0, 0.0], [0.0, 0.0], [np.log(0.7 / 0.3), 0.0], [np.log(9.0), 0.0]])
    est = IM(temperature_scaling=False).fit(val, [0, 1, 0, 0])
    res = est.estimate(np.array([[0.0, 0.0]]))
    assert np.isfinite(res.accuracy) and res.accuracy == 0.5


def test_target_mass_in_empty_source_bins_is_dropped_and_renormalised():
    val_conf = np.array([0.95, 0.92, 0.65, 0.62])
    correct = np.array([1, 0, 1, 1])
    # Half of the target sits in [0.3, 0.4), where no validation point lies.
    acc = importance_weighted_accuracy(val_conf, correct, [0.35, 0.33, 0.93, 0.64])
    assert acc == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    val = np.log(np.array([[0.95, 0.05], [0.92, 0.08], [0.65, 0.35], [0.62, 0.38]]))
    res = IM(temperature_scaling=False).fit(val, [0, 1, 0, 0]).estimate(
        np.log(np.array([[0.55, 0.45], [0.93, 0.07]])))
    assert res.diagnostics["dropped_target_mass"] == 0.5
    assert res.accuracy == 0.5


def test_all_target_mass_in_empty_bins_falls_back_with_warning():
    with pytest.warns(ImportanceWeightingWarning, match="returning the validation accuracy"):
        acc = importance_weighted_accuracy([0.9, 0.95], [1, 0], [0.55])
    assert acc == 0.5
    val = np.log(np.array([[0.95, 0.05], [0.92, 0.08]]))
    est = IM(temperature_scaling=False).fit(val, [0, 1])
    with pytest.warns(ImportanceWeightingWarning):
        res = est.estimate(np.zeros((3, 2)))
    assert res.accuracy == 0.5 and res.diagnostics["fallback_to_val_accuracy"] is True


def test_bad_inputs():
    with pytest.raises(ValueError, match="'n_bins' parameter of IM must be in"):
        IM(n_bins=0).fit(np.eye(2), [0, 1])
    with pytest.raises(ValueError, match="'n_bins' parameter of IM must be an integer"):
        IM(n_bins=2.5).fit(np.eye(2), [0, 1])
    with pytest.raises(ValueError, match=r"target_confidence must lie in \[0, 1\]"):
        importance_weighted_accuracy([0.5], [1], [1.5])
    with pytest.raises(ValueError, match=r"confidence must lie in \[0, 1\]"):
        confidence_bins([-0.1])
