"""Label shift: the target label marginal by EM, the accuracy it implies, and a test of it.

Under *label shift* the class-conditional distributions stay those of the validation set,
:math:`p_T(x \\mid y) = p_S(x \\mid y)`, and only the label marginal moves from
:math:`\\pi` (validation) to :math:`q` (target). Three consequences make it the one shift a
label-free method can handle exactly:

1. :math:`q` is identified from unlabelled target data: the maximum-likelihood estimate is the
   fixed point of Saerens, Latinne & Decaestecker's EM (2002), which re-weights calibrated
   posteriors by :math:`q_k / \\pi_k` (:func:`em_label_marginal`).
2. The classifier's accuracy on the target is :math:`\\sum_k q_k\\, a_k`, with :math:`a_k` its
   accuracy on validation rows of class :math:`k` (:func:`label_shift_accuracy`).
3. The hypothesis is testable: any statistic :math:`f(x)` of the logits has target mean
   :math:`\\sum_k q_k\\, \\mathbb{E}_S[f \\mid y = k]`. :func:`label_shift_test` compares the
   target means of the per-class indicator and confidence of the predicted class with that
   mixture, standardised by their sampling variance (target and validation side), and reports
   the excess over its degrees of freedom as a z-score. Covariate shift (corruption, a new
   domain, a new sub-population) changes the class-conditionals, and the z-score grows with the
   target size.

References
----------
.. [1] Saerens, M., Latinne, P. and Decaestecker, C. "Adjusting the outputs of a classifier to
   new a priori probabilities: a simple procedure", Neural Computation 14(1), 2002.
.. [2] Lipton, Z., Wang, Y.-X. and Smola, A. "Detecting and correcting for label shift with
   black box predictors", ICML 2018 (the shift model and its accuracy).
.. [3] Alexandari, A., Kundaje, A. and Shrikumar, A. "Maximum likelihood with bias-corrected
   calibration is hard-to-beat at label shift adaptation", ICML 2020 (EM on calibrated
   probabilities).
.. [4] Varadhan, R. and Roland, C. "Simple and globally convergent methods for accelerating the
   convergence of any EM algorithm", Scandinavian Journal of Statistics 35(2), 2008 (SQUAREM).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..core._validation import check_number
from ..core.exceptions import ConvergenceWarning
from .confidence import check_probs

__all__ = [
    "ClassConditionalStats",
    "LabelShiftTest",
    "class_conditional_stats",
    "em_label_marginal",
    "label_shift_accuracy",
    "label_shift_test",
]

_TINY = 1e-300


def _check_prior(prior: Any, n_classes: int, name: str = "prior") -> NDArray[np.float64]:
    try:
        pi = np.asarray(prior, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a 1-D array of class probabilities; could not convert "
                         f"it: {exc}") from exc
    if pi.shape != (n_classes,):
        raise ValueError(f"{name} must have shape ({n_classes},), one probability per class; "
                         f"got shape {pi.shape}.")
    if not np.all(np.isfinite(pi)) or pi.min() < 0.0 or pi.sum() <= 0.0:
        raise ValueError(f"{name} must be finite, non-negative and not all zero; "
                         f"got {pi.tolist()[:10]}.")
    return cast("NDArray[np.float64]", pi / pi.sum())


def _em_step(probs: NDArray[np.float64], ratio_of: Any, q: NDArray[np.float64]) -> tuple[
        NDArray[np.float64], float]:
    """One EM update ``q -> mean_i normalise(p_i * q / pi)`` and the log-likelihood at ``q``."""
    w = ratio_of(q)
    mix = probs @ w
    ok = mix > _TINY
    loglik = float(np.log(mix[ok]).sum())
    inv = np.where(ok, 1.0 / np.where(ok, mix, 1.0), 0.0)
    new = w * (inv @ probs) / probs.shape[0]
    total = new.sum()
    return (new / total if total > 0 else q), loglik


def em_label_marginal(
    target_probs: ArrayLike,
    prior: ArrayLike,
    *,
    tol: float = 1e-8,
    max_iter: int = 1000,
) -> tuple[NDArray[np.float64], int]:
    """Maximum-likelihood target label marginal under label shift (Saerens et al., 2002).

    Iterates

    .. math:: q^{(t+1)}_k = \\frac1m \\sum_i
              \\frac{p_{ik}\\, q^{(t)}_k / \\pi_k}{\\sum_j p_{ij}\\, q^{(t)}_j / \\pi_j}

    from :math:`q^{(0)} = \\pi`, accelerated by SQUAREM (Varadhan & Roland, 2008) with a
    monotone fallback, until :math:`\\max_k |q^{(t+1)}_k - q^{(t)}_k| \\le` ``tol``. Each step
    costs one pass over the ``m x c`` matrix. Classes with :math:`\\pi_k = 0` keep
    :math:`q_k = 0`.

    Parameters
    ----------
    target_probs : array-like of shape (m, c)
        Calibrated target posteriors (temperature-scaled softmax of the model that saw
        :math:`\\pi`).
    prior : array-like of shape (c,)
        Validation label marginal :math:`\\pi` (normalised here).
    tol : float, default 1e-8
        Stop when no coordinate of :math:`q` moves more than this.
    max_iter : int, default 1000
        Cap on EM passes; reaching it warns (:class:`ConvergenceWarning`).

    Returns
    -------
    q : ndarray of shape (c,)
        The estimated target marginal (sums to 1).
    n_iter : int
        EM passes used.

    Examples
    --------
    >>> q, _ = em_label_marginal([[0.9, 0.1], [0.9, 0.1], [0.1, 0.9]], [0.5, 0.5])
    >>> q.round(4).tolist()          # the closed form: q_0 = 1.7 / 2.4
    [0.7083, 0.2917]
    """
    probs = check_probs(target_probs, "target_probs")
    pi = _check_prior(prior, probs.shape[1])
    check_number(tol, "tol", "em_label_marginal", low=0.0)
    check_number(max_iter, "max_iter", "em_label_marginal", low=1, integer=True)
    inv_pi = np.where(pi > 0, 1.0 / np.where(pi > 0, pi, 1.0), 0.0)

    def ratio_of(q: NDArray[np.float64]) -> NDArray[np.float64]:
        return q * inv_pi

    q = pi.copy()
    n_iter = 0
    while n_iter < max_iter:
        q1, ll0 = _em_step(probs, ratio_of, q)
        q2, _ = _em_step(probs, ratio_of, q1)
        n_iter += 2
        if np.abs(q2 - q1).max() <= tol or np.abs(q1 - q).max() <= tol:
            return q2, n_iter
        r = q1 - q
        v = q2 - q1 - r
        nv = float(np.linalg.norm(v))
        alpha = -float(np.linalg.norm(r)) / nv if nv > 0 else -1.0
        alpha = min(alpha, -1.0)
        jump = np.clip(q - 2.0 * alpha * r + alpha * alpha * v, 0.0, None) * (pi > 0)
        if jump.sum() <= 0:
            q = q2
            continue
        jump /= jump.sum()
        q3, ll3 = _em_step(probs, ratio_of, jump)
        n_iter += 1
        # Keep the extrapolation only if it did not lower the likelihood (monotone SQUAREM).
        q = q3 if ll3 >= ll0 else q2
    warnings.warn(
        f"em_label_marginal: EM did not converge to tol={tol:g} in max_iter={max_iter} passes; "
        "the marginal may be inexact.",
        ConvergenceWarning,
        stacklevel=2,
    )
    return q, n_iter


@dataclass(frozen=True)
class ClassConditionalStats:
    """Validation statistics per true class that the label-shift model mixes.

    Attributes
    ----------
    prior : ndarray of shape (c,)
        Validation label frequencies :math:`\\pi`.
    class_accuracy : ndarray of shape (c,)
        Accuracy :math:`a_k` on validation rows of class ``k`` (the overall validation accuracy
        for a class without rows; its weight :math:`q_k` is 0 then anyway).
    mean : ndarray of shape (c, 2c)
        :math:`\\mathbb{E}_S[f \\mid y = k]` of the features
        :math:`f = (\\mathbb{1}[\\hat y = j],\\ \\max_l p_l \\cdot \\mathbb{1}[\\hat y = j])_j`.
    second_moment : ndarray of shape (c, 2c)
        :math:`\\mathbb{E}_S[f^2 \\mid y = k]`.
    counts : ndarray of shape (c,)
        Validation rows per class.
    """

    prior: NDArray[np.float64]
    class_accuracy: NDArray[np.float64]
    mean: NDArray[np.float64]
    second_moment: NDArray[np.float64]
    counts: NDArray[np.int64]


def _features(probs: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    pred = probs.argmax(axis=1)
    return pred, probs[np.arange(probs.shape[0]), pred]


def _feature_moments(
    pred: NDArray[np.int64], conf: NDArray[np.float64], c: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Means and second moments of the 2c features over the given rows."""
    m = max(pred.shape[0], 1)
    hits = np.bincount(pred, minlength=c) / m
    conf_sum = np.bincount(pred, weights=conf, minlength=c) / m
    conf_sq = np.bincount(pred, weights=conf * conf, minlength=c) / m
    return np.concatenate([hits, conf_sum]), np.concatenate([hits, conf_sq])


def class_conditional_stats(val_probs: ArrayLike, val_labels: ArrayLike) -> ClassConditionalStats:
    """Per-class validation statistics for :func:`label_shift_accuracy` and the test.

    Parameters
    ----------
    val_probs : array-like of shape (n, c)
        Calibrated validation posteriors.
    val_labels : array-like of shape (n,)
        True labels in ``[0, c)``.

    Returns
    -------
    ClassConditionalStats
    """
    probs = check_probs(val_probs, "val_probs")
    labels = np.asarray(val_labels)
    if labels.shape != (probs.shape[0],):
        raise ValueError(f"val_labels must have shape ({probs.shape[0]},), one label per row of "
                         f"val_probs; got shape {labels.shape}.")
    c = probs.shape[1]
    pred, conf = _features(probs)
    correct = pred == labels
    counts = np.bincount(labels, minlength=c).astype(np.int64)
    overall = float(correct.mean())
    acc = np.full(c, overall)
    mean = np.zeros((c, 2 * c))
    second = np.zeros((c, 2 * c))
    for k in np.flatnonzero(counts):
        rows = labels == k
        acc[k] = float(correct[rows].mean())
        mean[k], second[k] = _feature_moments(pred[rows], conf[rows], c)
    return ClassConditionalStats(prior=counts / counts.sum(), class_accuracy=acc, mean=mean,
                                 second_moment=second, counts=counts)


def label_shift_accuracy(q: ArrayLike, stats: ClassConditionalStats) -> float:
    """Target accuracy under label shift: :math:`\\sum_k q_k\\, a_k`.

    Exact when only the label marginal moved (the accuracy of the fixed classifier on
    class :math:`k` is then the same on both sides).

    Examples
    --------
    >>> s = class_conditional_stats([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]],
    ...                             [0, 0, 1, 1])
    >>> label_shift_accuracy([0.25, 0.75], s)
    0.625
    """
    weights = _check_prior(q, stats.prior.shape[0], "q")
    return float(weights @ stats.class_accuracy)


@dataclass(frozen=True)
class LabelShiftTest:
    """Result of :func:`label_shift_test`.

    Attributes
    ----------
    statistic : float
        :math:`S = \\sum_j (\\bar f_{T,j} - \\mu_j(q))^2 / v_j`.
    dof : int
        Features with positive variance minus the :math:`c_+ - 1` free coordinates of
        :math:`q` (at least 1).
    z : float
        :math:`(S - \\mathrm{dof}) / \\sqrt{2\\,\\mathrm{dof}}`: about 0 under label shift,
        growing with the size of a covariate shift and with the target size.
    """

    statistic: float
    dof: int
    z: float


def label_shift_test(
    target_probs: ArrayLike, q: ArrayLike, stats: ClassConditionalStats
) -> LabelShiftTest:
    """How far the target is from the label-shift model with marginal ``q``.

    Features :math:`f = (\\mathbb{1}[\\hat y = j],\\ \\max_l p_l\\, \\mathbb{1}[\\hat y = j])_{j
    \\le c}`: how often each class is predicted, and with what confidence. Under label shift
    their target mean is :math:`\\mu(q) = \\sum_k q_k \\mathbb{E}_S[f \\mid y = k]`, with variance

    .. math:: v_j = \\frac{\\sum_k q_k \\mathbb{E}_S[f_j^2 \\mid k] - \\mu_j(q)^2}{m}
                  + \\sum_k q_k^2 \\frac{\\mathrm{Var}_S[f_j \\mid k]}{n_k}

    (target sampling plus the noise of the validation class means). The statistic is
    :math:`S = \\sum_{j: v_j > 0} (\\bar f_{T,j} - \\mu_j(q))^2 / v_j` and
    :math:`z = (S - \\mathrm{dof}) / \\sqrt{2\\,\\mathrm{dof}}`, a Wald-type excess over a
    :math:`\\chi^2` mean that ignores the correlation of the features (their expectation under
    the null is right, their spread only approximately).

    Parameters
    ----------
    target_probs : array-like of shape (m, c)
        Calibrated target posteriors.
    q : array-like of shape (c,)
        Target marginal under test (usually :func:`em_label_marginal`).
    stats : ClassConditionalStats
        From :func:`class_conditional_stats` on the validation set.

    Returns
    -------
    LabelShiftTest
    """
    probs = check_probs(target_probs, "target_probs", stats.prior.shape[0])
    c = probs.shape[1]
    weights = _check_prior(q, c, "q")
    m = probs.shape[0]
    pred, conf = _features(probs)
    observed, _ = _feature_moments(pred, conf, c)
    mu = weights @ stats.mean
    second = weights @ stats.second_moment
    target_var = np.clip(second - mu * mu, 0.0, None) / m
    class_var = np.clip(stats.second_moment - stats.mean ** 2, 0.0, None)
    n_k = np.maximum(stats.counts, 1)[:, None]
    val_var = (weights[:, None] ** 2 * class_var / n_k).sum(axis=0)
    var = target_var + val_var
    used = var > 1e-15
    statistic = float(np.sum((observed[used] - mu[used]) ** 2 / var[used]))
    free = int(np.count_nonzero(stats.prior > 0)) - 1
    dof = max(int(np.count_nonzero(used)) - free, 1)
    z = (statistic - dof) / math.sqrt(2.0 * dof)
    return LabelShiftTest(statistic=statistic, dof=dof, z=float(z))
