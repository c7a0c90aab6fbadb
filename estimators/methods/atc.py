"""ATC: Average Thresholded Confidence (Garg et al., ICLR 2022).

ATC learns a threshold :math:`t` on a confidence score such that the fraction of validation
scores *below* :math:`t` equals the validation error, then predicts target accuracy as the
fraction of target scores at or above it:

.. math:: \\frac{1}{n}\\sum_{i \\in S} \\mathbb{1}[s_i < t] = \\frac{1}{n}\\sum_{i \\in S}
          \\mathbb{1}[\\hat y_i \\ne y_i], \\qquad
          \\widehat{\\mathrm{acc}}_{ATC} = \\frac{1}{m}\\sum_{i \\in T} \\mathbb{1}[s_i \\ge t]

Scores (:mod:`estimators.maths.confidence`): MC, :math:`s = \\max_k P_k`, and NE,
:math:`s = \\sum_k P_k \\log P_k` (natural log, :math:`0 \\log 0 = 0`).

**Threshold rules.** Sort the validation scores :math:`s_{(1)} \\le \\dots \\le s_{(n)}` and let
:math:`n_w` be the number of validation errors.

* ``rule="exact"`` (default): :math:`t = s_{(n_w + 1)}`, and :math:`t = +\\infty` when every
  validation prediction is wrong. With distinct scores the estimate on the validation set itself
  is exactly :math:`\\mathrm{acc}_S`. With ties at the threshold, tied scores count as correct.
* ``rule="reference"``: :math:`t = s_{(n_w)}` with ``>=``, what ``ATC_code``'s
  ``find_ATC_threshold`` + ``get_ATC_acc`` and COT's ``compute_t`` compute; on the validation set
  it gives :math:`\\mathrm{acc}_S + 1/n`. Kept for parity with published numbers.

**Reference-code bug that is fixed in both rules.** With zero validation errors,
``find_ATC_threshold`` never replaces its initial ``thres = 0.0``: MC then gives 100% but NE (whose
scores are ``<= 0``) gives about 0%. COT's ``compute_t`` indexes ``sorted[-1]`` and predicts about
100% error. Here zero validation errors gives :math:`t = s_{(1)}` (exact) or :math:`t = -\\infty`
(reference), i.e. 100% accuracy on the validation data for either score.

References
----------
.. [1] Garg, S., Balakrishnan, S., Lipton, Z. C., Neyshabur, B. and Sedghi, H. "Leveraging
   Unlabeled Data to Predict Out-of-Distribution Performance", ICLR 2022.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..maths._softmax import TEMPERATURE_SCALING, SoftmaxEstimator
from ..core._validation import check_in_choices
from ..core.params import Param, with_defaults
from ..core.registry import register
from ..maths.confidence import check_correct, check_scores, compute_score

__all__ = ["ATC", "ATCMC", "ATCNE", "ThresholdRule", "atc_accuracy", "fit_atc_threshold"]

ThresholdRule = Literal["exact", "reference"]
_RULES = ("exact", "reference")
_SCORE_NAMES = ("max_confidence", "negative_entropy")


def _threshold(sorted_scores: NDArray[np.float64], n_wrong: int, rule: str) -> float:
    n = sorted_scores.size
    if rule == "exact":
        return float("inf") if n_wrong == n else float(sorted_scores[n_wrong])
    return float("-inf") if n_wrong == 0 else float(sorted_scores[n_wrong - 1])


def fit_atc_threshold(
    scores: ArrayLike, correct: ArrayLike, *, rule: ThresholdRule = "exact"
) -> float:
    """ATC threshold: the fraction of validation scores below it equals the validation error.

    With :math:`s_{(1)} \\le \\dots \\le s_{(n)}` the sorted scores and :math:`n_w` the number of
    incorrect predictions:

    .. math:: t_{\\text{exact}} = s_{(n_w + 1)} \\;(+\\infty \\text{ if } n_w = n), \\qquad
              t_{\\text{reference}} = s_{(n_w)} \\;(-\\infty \\text{ if } n_w = 0)

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Validation confidence scores, higher = more confident (MC or NE).
    correct : array-like of shape (n_samples,)
        Whether each validation prediction is correct (bool or 0/1).
    rule : {"exact", "reference"}, default="exact"
        ``"exact"`` makes ``mean(scores >= t) == mean(correct)`` when scores are distinct;
        ``"reference"`` reproduces ``ATC_code.find_ATC_threshold`` (``acc_S + 1/n`` on the
        validation set), except for its zero-error bug (see the module docstring).

    Returns
    -------
    float
        The threshold (``+inf`` or ``-inf`` at the edges described above).

    Raises
    ------
    ValueError
        If the arrays are not 1-D, differ in length, are empty, hold NaN/inf, or ``rule`` is
        unknown.

    Examples
    --------
    >>> fit_atc_threshold([0.9, 0.4, 0.8, 0.6], [True, False, True, False])
    0.8
    >>> fit_atc_threshold([0.9, 0.4, 0.8, 0.6], [True, False, True, False], rule="reference")
    0.6
    """
    check_in_choices(rule, "rule", "fit_atc_threshold", _RULES)
    s = check_scores(scores, "scores")
    corr = check_correct(correct, "correct", s.size)
    return _threshold(np.sort(s), int(s.size - corr.sum()), rule)


def atc_accuracy(target_scores: ArrayLike, threshold: float) -> float:
    """ATC accuracy estimate: the fraction of target scores at or above the threshold.

    .. math:: \\widehat{\\mathrm{acc}}_{ATC} = \\frac{1}{m}\\sum_i \\mathbb{1}[s_i \\ge t]

    Parameters
    ----------
    target_scores : array-like of shape (n_target,)
        Target confidence scores (same score and temperature as the threshold was fitted with).
    threshold : float
        Output of :func:`fit_atc_threshold` (may be ``+inf`` / ``-inf``).

    Returns
    -------
    float
        A fraction in ``[0, 1]``.

    Examples
    --------
    >>> atc_accuracy([0.9, 0.5, 0.85, 0.2], 0.8)
    0.5
    """
    s = check_scores(target_scores, "target_scores")
    t = float(threshold)
    if np.isnan(t):
        raise ValueError(f"threshold must be a number or +/-inf; got {threshold!r}.")
    return float(np.mean(s >= t))


class ATC(SoftmaxEstimator):
    """Average Thresholded Confidence, with a choice of score and threshold rule.

    .. math:: \\widehat{\\mathrm{acc}}_{ATC} = \\frac{1}{m}\\sum_{i \\in T} \\mathbb{1}[s_i \\ge t],
              \\qquad \\frac{1}{n}\\sum_{i \\in S} \\mathbb{1}[s_i < t] = \\mathrm{err}_S

    The registered variants are :class:`ATCMC` (``"atc-mc"``) and :class:`ATCNE` (``"atc-ne"``).

    Parameters
    ----------
    score : {"max_confidence", "negative_entropy"}, default="max_confidence"
        Confidence score (MC or NE; NE in natural log with ``0 log 0 = 0``).
    rule : {"exact", "reference"}, default="exact"
        Threshold rule; see :func:`fit_atc_threshold`.
    temperature_scaling : bool, default=True
        Fit a temperature on the validation set; apply it to validation and target logits (the
        paper's "Post T"; ``False`` gives "Pre T").

    Attributes
    ----------
    threshold_ : float
        Fitted score threshold.
    temperature_ : float
        Fitted temperature (1.0 if ``temperature_scaling=False``).

    Notes
    -----
    ``per_sample`` is the indicator :math:`\\mathbb{1}[s_i \\ge t]` as float.
    ``diagnostics["threshold"]`` is the threshold, ``diagnostics["val_fraction_at_or_above"]`` the
    fraction of validation scores ``>= t`` (equal to ``acc_S`` under the exact rule without
    ties). For binary tasks, MC and NE order samples identically and temperature scaling does not
    change the ordering, so all four variants agree.

    References
    ----------
    .. [1] Garg, S. et al. "Leveraging Unlabeled Data to Predict Out-of-Distribution
       Performance", ICLR 2022.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> val = rng.normal(size=(200, 3)) * 2
    >>> labels = rng.integers(0, 3, 200)
    >>> est = ATCMC(temperature_scaling=False).fit(val, labels)
    >>> est.estimate(val).accuracy == est.val_accuracy_
    True
    """

    name: ClassVar[str] = "atc"

    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("score", "choice", "max_confidence", "Confidence score: max softmax probability "
              "(MC) or negative entropy (NE, natural log).", choices=_SCORE_NAMES),
        Param("rule", "choice", "exact", "Threshold rule (`fit_atc_threshold`): exact "
              "validation error, or the reference codes' off-by-one.", choices=_RULES),
        TEMPERATURE_SCALING,
    )

    def _fit_log_probs(
        self,
        val_log_probs: NDArray[np.float64],
        val_labels: NDArray[np.int64],
        val_correct: NDArray[np.bool_],
    ) -> None:
        val_scores = np.sort(compute_score(val_log_probs, self.score))
        n_wrong = int(val_correct.size - val_correct.sum())
        self.threshold_ = _threshold(val_scores, n_wrong, self.rule)
        # Fraction of validation scores >= t (sorted, so one binary search).
        n_below = int(np.searchsorted(val_scores, self.threshold_, side="left"))
        self.val_fraction_at_or_above_ = float(1.0 - n_below / val_scores.size)

    def _estimate_log_probs(
        self, target_log_probs: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, dict[str, Any]]:
        above = (compute_score(target_log_probs, self.score) >= self.threshold_).astype(np.float64)
        return float(above.mean()), above, {
            "threshold": self.threshold_,
            "val_fraction_at_or_above": self.val_fraction_at_or_above_,
        }


@register("atc-mc")
class ATCMC(ATC):
    """ATC with the max-confidence score, :math:`s = \\max_k P_k` (registry key ``"atc-mc"``).

    Parameters
    ----------
    score : {"max_confidence", "negative_entropy"}, default="max_confidence"
    rule : {"exact", "reference"}, default="exact"
    temperature_scaling : bool, default=True

    See Also
    --------
    ATC : parameters, formula and references.
    """

    PARAMS = ATC.PARAMS


@register("atc-ne")
class ATCNE(ATC):
    """ATC with the negative-entropy score, :math:`s = \\sum_k P_k \\log P_k` (key ``"atc-ne"``).

    Parameters
    ----------
    score : {"max_confidence", "negative_entropy"}, default="negative_entropy"
    rule : {"exact", "reference"}, default="exact"
    temperature_scaling : bool, default=True

    See Also
    --------
    ATC : parameters, formula and references.
    """

    PARAMS = with_defaults(ATC.PARAMS, score="negative_entropy")
