"""EM label marginal, label-shift accuracy and the label-shift test, against references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import softmax

from estimators.core.exceptions import ConvergenceWarning
from estimators.maths.label_shift import (
    class_conditional_stats,
    em_label_marginal,
    label_shift_accuracy,
    label_shift_test,
)


def plain_em(probs: np.ndarray, pi: np.ndarray, iters: int = 20000) -> np.ndarray:
    """Saerens et al. (2002) exactly as printed: no acceleration."""
    q = pi.copy()
    for _ in range(iters):
        adj = probs * (q / pi)
        adj /= adj.sum(axis=1, keepdims=True)
        q = adj.mean(axis=0)
    return q


def gaussian_task(rng, n, prior, means, noise=1.0):
    """Labels from ``prior``; features N(mean_y, noise^2 I); exact Bayes posteriors for a
    *uniform* training prior (the model that 'saw' pi = uniform), given as logits."""
    y = rng.choice(len(prior), size=n, p=prior)
    x = means[y] + rng.normal(0.0, noise, (n, means.shape[1]))
    logits = x @ means.T - 0.5 * (means ** 2).sum(axis=1)  # log N(x; mean_k) + const
    return logits, y


MEANS = np.array([[0.0, 0.0], [1.6, 0.0], [0.0, 1.6], [1.6, 1.6]])


def test_em_matches_the_binary_closed_form():
    # maximise 2 log(0.1 + 0.8 q) + log(0.9 - 0.8 q): q = 1.7 / 2.4
    q, _ = em_label_marginal([[0.9, 0.1], [0.9, 0.1], [0.1, 0.9]], [0.5, 0.5])
    assert q[0] == pytest.approx(1.7 / 2.4, abs=1e-7)


def test_em_matches_plain_em_and_the_likelihood_maximum():
    rng = np.random.default_rng(0)
    logits, _ = gaussian_task(rng, 3000, np.array([0.6, 0.2, 0.15, 0.05]), MEANS)
    probs = softmax(logits, axis=1)
    pi = np.full(4, 0.25)
    q, n_iter = em_label_marginal(probs, pi, tol=1e-12)
    np.testing.assert_allclose(q, plain_em(probs, pi), atol=1e-6)
    assert n_iter < 2000  # SQUAREM: far fewer passes than plain EM needs here
    # the binary slice through the optimum: no other q on the segment has a higher likelihood
    def nll(t):
        r = q + t * np.array([1.0, -1.0, 0.0, 0.0])
        return -np.log(probs @ (r / pi)).sum()
    best = minimize_scalar(nll, bounds=(-q[0] + 1e-9, q[1] - 1e-9), method="bounded")
    assert abs(best.x) < 1e-4


def test_em_recovers_a_label_shift_from_exact_posteriors():
    rng = np.random.default_rng(1)
    truth = np.array([0.1, 0.5, 0.3, 0.1])
    logits, _ = gaussian_task(rng, 20000, truth, MEANS)
    q, _ = em_label_marginal(softmax(logits, axis=1), np.full(4, 0.25))
    np.testing.assert_allclose(q, truth, atol=0.025)


def test_em_keeps_zero_prior_classes_at_zero():
    probs = softmax(np.random.default_rng(2).normal(size=(200, 3)), axis=1)
    q, _ = em_label_marginal(probs, [0.5, 0.5, 0.0])
    assert q[2] == 0.0 and q.sum() == pytest.approx(1.0)


def test_em_warns_when_it_stops_early():
    probs = softmax(np.random.default_rng(3).normal(size=(100, 3)) * 3, axis=1)
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        em_label_marginal(probs, [0.2, 0.3, 0.5], tol=0.0, max_iter=2)


@pytest.mark.parametrize(
    "prior, match",
    [([0.5, 0.5, 0.0, 0.0], r"prior must have shape \(3,\)"),
     ([0.5, -0.5, 1.0], "non-negative"),
     ([0.0, 0.0, 0.0], "not all zero"),
     ("abc", "could not convert")],
)
def test_em_refuses_a_bad_prior(prior, match):
    with pytest.raises(ValueError, match=match):
        em_label_marginal(np.full((4, 3), 1 / 3), prior)


def test_em_refuses_rows_that_are_not_probabilities():
    with pytest.raises(ValueError, match="target_probs"):
        em_label_marginal([[0.5, 0.6]], [0.5, 0.5])


def test_label_shift_accuracy_is_the_q_weighted_class_accuracy():
    rng = np.random.default_rng(4)
    logits, y = gaussian_task(rng, 4000, np.full(4, 0.25), MEANS)
    probs = softmax(logits, axis=1)
    stats = class_conditional_stats(probs, y)
    pred = probs.argmax(1)
    by_hand = np.array([np.mean(pred[y == k] == k) for k in range(4)])
    np.testing.assert_allclose(stats.class_accuracy, by_hand)
    q = np.array([0.7, 0.1, 0.1, 0.1])
    assert label_shift_accuracy(q, stats) == pytest.approx(q @ by_hand)


def test_label_shift_accuracy_predicts_a_shifted_target():
    rng = np.random.default_rng(5)
    val_logits, val_y = gaussian_task(rng, 40000, np.full(4, 0.25), MEANS)
    stats = class_conditional_stats(softmax(val_logits, axis=1), val_y)
    truth_prior = np.array([0.05, 0.05, 0.2, 0.7])
    t_logits, t_y = gaussian_task(rng, 20000, truth_prior, MEANS)
    t_probs = softmax(t_logits, axis=1)
    q, _ = em_label_marginal(t_probs, stats.prior)
    true_acc = np.mean(t_probs.argmax(1) == t_y)
    # sampling s.d. of the difference is about 0.006 here
    assert label_shift_accuracy(q, stats) == pytest.approx(true_acc, abs=0.015)


def reference_statistic(t_probs, q, v_probs, v_y):
    """The test statistic from explicit feature matrices (an independent re-implementation)."""
    c = v_probs.shape[1]

    def feats(p):
        onehot = np.eye(c)[p.argmax(1)]
        return np.concatenate([onehot, onehot * p.max(1, keepdims=True)], axis=1)

    ft, fv = feats(t_probs), feats(v_probs)
    mu_k = np.stack([fv[v_y == k].mean(0) for k in range(c)])
    var_k = np.stack([fv[v_y == k].var(0) for k in range(c)])
    n_k = np.array([(v_y == k).sum() for k in range(c)])
    mu = q @ mu_k
    second = q @ (var_k + mu_k ** 2)
    var = (second - mu ** 2) / len(t_probs) + (q[:, None] ** 2 * var_k / n_k[:, None]).sum(0)
    used = var > 1e-15
    return np.sum((ft.mean(0)[used] - mu[used]) ** 2 / var[used]), int(used.sum()) - (c - 1)


def test_label_shift_test_matches_the_explicit_computation():
    rng = np.random.default_rng(6)
    v_logits, v_y = gaussian_task(rng, 2000, np.full(4, 0.25), MEANS)
    t_logits, _ = gaussian_task(rng, 800, np.array([0.4, 0.3, 0.2, 0.1]), MEANS, noise=1.3)
    v_probs, t_probs = softmax(v_logits, axis=1), softmax(t_logits, axis=1)
    stats = class_conditional_stats(v_probs, v_y)
    q, _ = em_label_marginal(t_probs, stats.prior)
    res = label_shift_test(t_probs, q, stats)
    stat, dof = reference_statistic(t_probs, q, v_probs, v_y)
    assert res.statistic == pytest.approx(stat, rel=1e-9)
    assert res.dof == dof
    assert res.z == pytest.approx((stat - dof) / np.sqrt(2 * dof))


def test_label_shift_test_is_quiet_under_label_shift_and_loud_under_covariate_shift():
    rng = np.random.default_rng(7)
    v_logits, v_y = gaussian_task(rng, 4000, np.full(4, 0.25), MEANS)
    stats = class_conditional_stats(softmax(v_logits, axis=1), v_y)
    quiet, loud = [], []
    for _ in range(10):
        prior = rng.dirichlet(np.ones(4))
        t_logits, _ = gaussian_task(rng, 2000, prior, MEANS)
        p = softmax(t_logits, axis=1)
        quiet.append(label_shift_test(p, em_label_marginal(p, stats.prior)[0], stats).z)
        t_logits, _ = gaussian_task(rng, 2000, prior, MEANS, noise=2.0)  # covariate shift
        p = softmax(t_logits, axis=1)
        loud.append(label_shift_test(p, em_label_marginal(p, stats.prior)[0], stats).z)
    assert np.median(quiet) < 2.0 and max(quiet) < 6.0
    assert min(loud) > max(quiet) and np.median(loud) > 10.0


def test_class_conditional_stats_refuses_mismatched_labels():
    with pytest.raises(ValueError, match=r"val_labels must have shape \(3,\)"):
        class_conditional_stats(np.full((3, 2), 0.5), [0, 1])


def test_label_shift_test_refuses_a_wrong_class_count():
    stats = class_conditional_stats(np.full((4, 2), 0.5), [0, 1, 0, 1])
    with pytest.raises(ValueError, match="target_probs"):
        label_shift_test(np.full((3, 3), 1 / 3), [0.5, 0.5], stats)
    with pytest.raises(ValueError, match=r"q must have shape \(2,\)"):
        label_shift_test(np.full((3, 2), 0.5), [1.0], stats)
