"""COT: METHODS §13 COT items 1-5; the official m x m construction is built here with POT."""

from __future__ import annotations

import math

import numpy as np
import ot
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist
from scipy.special import softmax as sp_softmax

from estimators import get_estimator
from estimators.methods.ac import AC
from estimators.methods.cot import (
    COT,
    cot_accuracy,
    cot_cost_matrix,
    cot_transport,
    sample_expected_labels,
)


def random_probs(rng, m, c, scale=2.0):
    return sp_softmax(rng.normal(size=(m, c)) * scale, axis=1)


def official_cot_error(target_probs, labels, c):
    """luyuzhe111/COT's construction: one-hots of sampled labels vs target softmax rows, L1
    cdist, halved, uniform weights, ot.emd2 (no batching)."""
    onehots = np.eye(c)[labels]
    cost = cdist(onehots, target_probs, metric="cityblock") / 2
    return float(ot.emd2([], [], cost, numItermax=int(1e8)))


@pytest.mark.parametrize("m,c,seed", [(300, 10, 0), (500, 4, 1), (1000, 20, 2)])
def test_nxc_equals_official_sampled_one_hot_emd(m, c, seed):
    rng = np.random.default_rng(seed)
    probs = random_probs(rng, m, c)
    pi = rng.dirichlet(np.ones(c) * 2)
    labels = sample_expected_labels(pi, m, rng)
    official_acc = 1 - official_cot_error(probs, labels, c)
    counts = np.bincount(labels, minlength=c)
    assert abs(cot_accuracy(probs, counts / m) - official_acc) <= 1e-9
    # The sampled mode draws its labels the same way from the same seeded generator.
    labels0 = sample_expected_labels(pi, m, np.random.default_rng(7))
    sampled = cot_accuracy(probs, pi, mode="sampled", seed=7)
    assert abs(sampled - (1 - official_cot_error(probs, labels0, c))) <= 1e-9


def test_equal_size_uniform_case_is_a_linear_assignment(rng):
    m, c = 60, 3
    probs = random_probs(rng, m, c)
    labels = np.repeat(np.arange(c), m // c)
    cost = 1 - probs[:, labels]  # rows: target samples, columns: one-hot atoms
    r, k = linear_sum_assignment(cost)
    assert abs(cot_accuracy(probs, np.full(c, 1 / c)) - (1 - cost[r, k].mean())) <= 1e-12


def test_half_l1_to_a_vertex_is_one_minus_p(rng):
    probs = random_probs(rng, 50, 6)
    for k in range(6):
        l1 = np.abs(probs - np.eye(6)[k]).sum(axis=1)
        np.testing.assert_allclose(l1, 2 * (1 - probs[:, k]), atol=1e-14)
        np.testing.assert_allclose(cot_cost_matrix(probs)[:, k], l1 / 2, atol=1e-14)


@pytest.mark.parametrize("seed", range(4))
def test_cot_never_exceeds_average_confidence(seed):
    rng = np.random.default_rng(seed)
    probs = random_probs(rng, 400, 5, scale=rng.uniform(0.5, 3))
    pi = rng.dirichlet(np.ones(5))
    assert cot_accuracy(probs, pi) <= probs.max(axis=1).mean() + 1e-12


def test_equality_when_predicted_histogram_equals_marginal(rng):
    m, c = 300, 3
    probs = random_probs(rng, m, c)
    pred_hist = np.bincount(probs.argmax(axis=1), minlength=c) / m
    np.testing.assert_allclose(cot_accuracy(probs, pred_hist), probs.max(axis=1).mean(),
                               atol=1e-12)


def test_invariant_to_target_row_permutation(rng):
    probs = random_probs(rng, 500, 7)
    pi = rng.dirichlet(np.ones(7))
    perm = rng.permutation(500)
    assert abs(cot_accuracy(probs, pi) - cot_accuracy(probs[perm], pi)) <= 1e-12


def test_integral_margins_give_an_integral_plan(rng):
    m, c = 200, 4
    probs = random_probs(rng, m, c)
    pi = np.array([50, 30, 70, 50]) / m
    res = cot_transport(probs, pi)
    scaled = res.plan * m
    assert np.all(np.isclose(scaled, 0) | np.isclose(scaled, 1))
    np.testing.assert_allclose(res.plan.sum(axis=1), 1 / m)
    np.testing.assert_allclose(res.plan.sum(axis=0), pi)
    np.testing.assert_allclose(res.accuracy, 1 - res.cost, atol=1e-15)
    np.testing.assert_allclose(res.cost, np.sum(res.plan * (1 - probs)), atol=1e-12)


def test_zero_mass_classes_are_allowed(rng):
    probs = random_probs(rng, 100, 4)
    res = cot_transport(probs, [0.5, 0.0, 0.5, 0.0])
    assert np.all(res.plan[:, [1, 3]] == 0)
    np.testing.assert_allclose(res.plan.sum(axis=0), [0.5, 0, 0.5, 0])


def test_sampled_batches_approach_the_exact_value(rng):
    probs = random_probs(rng, 3000, 3, scale=1.5)
    pi = np.array([0.3, 0.3, 0.4])
    exact = cot_accuracy(probs, pi)
    est = COT(mode="sampled", batch_size=600, label_marginal=pi, temperature_scaling=False)
    val = np.log(probs[:60])
    est.fit(val, np.arange(60) % 3)
    res = est.estimate(np.log(probs))
    assert res.diagnostics["n_batches"] == math.ceil(3000 / 600)
    assert abs(res.accuracy - exact) < 0.02
    again = est.estimate(np.log(probs))
    assert again.accuracy == res.accuracy  # seeded


def test_label_shift_biases_cot_downward():
    # A calibrated model evaluated on a target whose class prior moved away from pi.
    rng = np.random.default_rng(5)
    c, m = 3, 3000
    means = np.eye(c) * 2.5

    def sample(prior, n):
        y = rng.choice(c, size=n, p=prior)
        x = means[y] + rng.normal(size=(n, c))
        logits = 2.5 * x  # Bayes-optimal logits of this Gaussian model (up to a constant)
        logits += np.log(prior)
        return logits, y

    val, val_y = sample(np.full(c, 1 / c), m)
    target, target_y = sample(np.array([0.8, 0.1, 0.1]), m)
    true_acc = np.mean(target.argmax(axis=1) == target_y)
    cot = COT(temperature_scaling=False).fit(val, val_y).estimate(target).accuracy
    ac = AC(temperature_scaling=False).fit(val, val_y).estimate(target).accuracy
    assert cot < true_acc - 0.03
    assert abs(ac - true_acc) < abs(cot - true_acc)


def test_estimator_marginals_and_diagnostics(rng):
    val = rng.normal(size=(400, 4)) * 2
    val_y = np.where(rng.random(400) < 0.7, val.argmax(axis=1), rng.integers(0, 4, 400))
    target = rng.normal(size=(300, 4)) * 2
    est = get_estimator("cot").fit(val, val_y)
    np.testing.assert_allclose(est.label_marginal_, np.bincount(val_y, minlength=4) / 400)
    res = est.estimate(target)
    probs = sp_softmax(target / est.temperature_, axis=1)
    np.testing.assert_allclose(res.accuracy, cot_accuracy(probs, est.label_marginal_), atol=1e-12)
    assert res.diagnostics["transport_cost"] == pytest.approx(1 - res.accuracy)
    assert res.per_sample is None and res.params["temperature"] == est.temperature_
    uni = COT(label_marginal="uniform").fit(val, val_y)
    np.testing.assert_allclose(uni.label_marginal_, 0.25)
    explicit = COT(label_marginal=[0.1, 0.2, 0.3, 0.4]).fit(val, val_y)
    np.testing.assert_allclose(explicit.label_marginal_, [0.1, 0.2, 0.3, 0.4])


def test_bad_parameters_name_themselves(rng):
    val = rng.normal(size=(20, 3))
    y = np.arange(20) % 3
    with pytest.raises(ValueError, match="label_marginal must have shape \\(3,\\)"):
        COT(label_marginal=[0.5, 0.5]).fit(val, y)
    with pytest.raises(ValueError, match="label_marginal must sum to 1"):
        COT(label_marginal=[0.5, 0.5, 0.5]).fit(val, y)
    with pytest.raises(ValueError, match="label_marginal must be finite and non-negative"):
        COT(label_marginal=[1.5, -0.5, 0.0]).fit(val, y)
    with pytest.raises(ValueError, match="'label_marginal' parameter of COT must be one of"):
        COT(label_marginal="target").fit(val, y)
    with pytest.raises(ValueError, match="'mode' parameter of COT must be one of"):
        COT(mode="fast").fit(val, y)
    with pytest.raises(ValueError, match="'batch_size' parameter of COT must be in"):
        COT(batch_size=0).fit(val, y)
    with pytest.raises(ValueError, match=r"target_probs must hold probabilities"):
        cot_accuracy(val, [1 / 3] * 3)


@pytest.mark.parametrize("m,c", [(500, 100), (300, 3), (200, 10)])
def test_sampled_equals_exact_when_marginal_counts_are_integral(m, c):
    # 1/c as floats does not sum to exactly 1 and 0.01 * 500 is 5 only up to rounding: the
    # official int(pi_k * m) gives m / c copies of each class and no random remainder.
    probs = random_probs(np.random.default_rng(m), m, c)
    pi = np.full(c, 1 / c)
    labels = sample_expected_labels(pi, m, np.random.default_rng(0))
    np.testing.assert_array_equal(np.bincount(labels, minlength=c), m // c)
    exact = cot_accuracy(probs, pi)
    assert abs(cot_accuracy(probs, pi, mode="sampled", seed=123) - exact) <= 1e-9
    assert abs((1 - official_cot_error(probs, labels, c)) - exact) <= 1e-9


def test_sample_expected_labels_follows_the_official_recipe():
    labels = sample_expected_labels([0.5, 0.3, 0.2], 7, np.random.default_rng(0))
    # floor(3.5), floor(2.1), floor(1.4) = 3, 2, 1 copies in class order, then 1 random label.
    np.testing.assert_array_equal(labels[:6], [0, 0, 0, 1, 1, 2])
    assert len(labels) == 7 and 0 <= labels[6] < 3 and labels.dtype == np.int64
