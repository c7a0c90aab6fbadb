"""IM: importance re-weighting of validation correctness over max-confidence bins.

The "IM" baseline of the ATC, COT and ALSA tables is Mandoline (Chen et al., 2021) with a single
slice: the classifier's max confidence, discretised into equal-width bins. Each validation point
gets the density-ratio weight of its bin, :math:`w_i = f_{T,b(i)} / f_{S,b(i)}`, and the estimate is
the self-normalised weighted mean of validation correctness. That weighted mean has an exact
closed form, which is what is computed here (O(n + m), no division by zero):

.. math:: \\widehat{\\mathrm{acc}}_{IM} = \\frac{\\sum_{b:\\, n_{S,b} > 0} f_{T,b}\\,
          \\mathrm{acc}_{S,b}}{\\sum_{b:\\, n_{S,b} > 0} f_{T,b}}

where :math:`f_{T,b}` is the fraction of target confidences in bin :math:`b` and
:math:`\\mathrm{acc}_{S,b}` the validation accuracy inside bin :math:`b`. Target mass falling
in bins without validation points is dropped and the rest renormalised (it is reported as
``diagnostics["dropped_target_mass"]``).

Bins are :math:`[b/B, (b+1)/B)` for :math:`b = 0..B-1`, the last one closed, with the *same* rule
for validation and target. The reference code (ATC_code ``HistogramDensity``, copied in COT's
``utils.py``) builds the histogram with left-closed bins but looks densities up with
``np.digitize(..., right=True)``, i.e. right-closed bins: a confidence exactly on an interior edge
(0.5 from a binary tie) is counted in one bin and looked up in the one below, which can give
inf/NaN. That mismatch is not reproduced. The edges are also the correctly rounded :math:`b/B`
(``np.linspace(0, 1, 11)[3]`` is ``0.30000000000000004``, which would put a confidence of exactly
0.3 in the bin below).

References
----------
.. [1] Chen, M., Goel, K., Sohoni, N., Poms, F., Fatahalian, K. and Ré, C. "Mandoline: Model
   Evaluation under Distribution Shift", ICML 2021.
.. [2] Garg, S. et al. "Leveraging Unlabeled Data to Predict Out-of-Distribution Performance",
   ICLR 2022, App. E (equal-width binning with 10 bins).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..maths._softmax import TEMPERATURE_SCALING, SoftmaxEstimator
from ..core._validation import check_number
from ..core.params import Param
from ..core.registry import register
from ..maths.confidence import _max_confidence_from_log_probs, check_correct, check_scores

__all__ = ["IM", "ImportanceWeightingWarning", "confidence_bins", "importance_weighted_accuracy"]


class ImportanceWeightingWarning(UserWarning):
    """No target confidence falls in a bin holding validation points; IM fell back to acc_S."""


def confidence_bins(confidence: ArrayLike, n_bins: int = 10) -> NDArray[np.int64]:
    """Equal-width bin index of each confidence in ``[0, 1]``.

    Bin ``b`` is ``[b / n_bins, (b + 1) / n_bins)`` (edges correctly rounded); the last bin is
    closed so that 1.0 falls in bin ``n_bins - 1`` (``np.histogram``'s convention).

    Parameters
    ----------
    confidence : array-like of shape (n_samples,)
        Values in ``[0, 1]``.
    n_bins : int, default=10

    Returns
    -------
    ndarray of shape (n_samples,), int64
        Bin indices in ``[0, n_bins)``.

    Examples
    --------
    >>> confidence_bins([0.0, 0.5, 0.55, 1.0], n_bins=10).tolist()
    [0, 5, 5, 9]
    """
    check_number(n_bins, "n_bins", "confidence_bins", low=1, integer=True)
    conf = check_scores(confidence, "confidence")
    if conf.min() < 0.0 or conf.max() > 1.0:
        raise ValueError(
            f"confidence must lie in [0, 1]; got values in [{conf.min():.6g}, {conf.max():.6g}]."
        )
    return _bin_index(conf, int(n_bins))


def _bin_index(conf: NDArray[np.float64], n_bins: int) -> NDArray[np.int64]:
    # b / n_bins, correctly rounded (linspace gives 0.30000000000000004 for 3/10, which would put
    # a confidence of exactly 0.3 in the bin below).
    edges = np.arange(n_bins + 1) / n_bins
    idx = np.searchsorted(edges, conf, side="right") - 1
    return np.clip(idx, 0, n_bins - 1).astype(np.int64)


def _closed_form(
    val_counts: NDArray[np.int64],
    val_correct_counts: NDArray[np.int64],
    target_counts: NDArray[np.int64],
) -> tuple[float | None, float]:
    """Return ``(accuracy or None if no usable target mass, dropped target mass fraction)``."""
    m = target_counts.sum()
    occupied = val_counts > 0
    kept = target_counts[occupied].sum()
    dropped = float((m - kept) / m)
    if kept == 0:
        return None, dropped
    bin_accuracy = val_correct_counts[occupied] / val_counts[occupied]
    accuracy = float(np.dot(target_counts[occupied], bin_accuracy) / kept)
    return accuracy, dropped


def _fallback_warning(val_accuracy: float) -> None:
    warnings.warn(
        "IM: no target confidence falls in a bin that holds validation points, so the density "
        f"ratio is undefined; returning the validation accuracy {val_accuracy:.4f} instead.",
        ImportanceWeightingWarning,
        stacklevel=4,
    )


def importance_weighted_accuracy(
    val_confidence: ArrayLike,
    val_correct: ArrayLike,
    target_confidence: ArrayLike,
    *,
    n_bins: int = 10,
) -> float:
    """IM estimate: validation accuracy re-weighted by the target/validation confidence histogram.

    .. math:: \\widehat{\\mathrm{acc}}_{IM} = \\frac{\\sum_{b:\\, n_{S,b} > 0} f_{T,b}\\,
              \\mathrm{acc}_{S,b}}{\\sum_{b:\\, n_{S,b} > 0} f_{T,b}}

    which equals the self-normalised weighted mean :math:`\\sum_i w_i \\mathrm{corr}_i /
    \\sum_i w_i` with :math:`w_i = f_{T,b(i)} / f_{S,b(i)}`.

    Parameters
    ----------
    val_confidence : array-like of shape (n_val,)
        Max-softmax confidences of the validation set, in ``[0, 1]``.
    val_correct : array-like of shape (n_val,)
        Whether each validation prediction is correct (bool or 0/1).
    target_confidence : array-like of shape (n_target,)
        Max-softmax confidences of the target set, in ``[0, 1]``.
    n_bins : int, default=10
        Number of equal-width bins on ``[0, 1]``.

    Returns
    -------
    float
        Estimated target accuracy in ``[0, 1]``. If no target confidence falls in a bin with
        validation points, the validation accuracy (with an :class:`ImportanceWeightingWarning`).

    Examples
    --------
    >>> importance_weighted_accuracy([0.95, 0.95, 0.55, 0.55], [1, 1, 1, 0], [0.55, 0.56])
    0.5
    """
    check_number(n_bins, "n_bins", "importance_weighted_accuracy", low=1, integer=True)
    val_conf = check_scores(val_confidence, "val_confidence")
    correct = check_correct(val_correct, "val_correct", val_conf.size)
    target_conf = check_scores(target_confidence, "target_confidence")
    for name, arr in (("val_confidence", val_conf), ("target_confidence", target_conf)):
        if arr.min() < 0.0 or arr.max() > 1.0:
            raise ValueError(
                f"{name} must lie in [0, 1]; got values in [{arr.min():.6g}, {arr.max():.6g}]."
            )
    n_bins = int(n_bins)
    val_bins = _bin_index(val_conf, n_bins)
    val_counts = np.bincount(val_bins, minlength=n_bins)
    val_correct_counts = np.bincount(val_bins, weights=correct, minlength=n_bins).astype(np.int64)
    target_counts = np.bincount(_bin_index(target_conf, n_bins), minlength=n_bins)
    accuracy, _ = _closed_form(val_counts, val_correct_counts, target_counts)
    if accuracy is None:
        val_accuracy = float(correct.mean())
        _fallback_warning(val_accuracy)
        return val_accuracy
    return accuracy


@register("im")
class IM(SoftmaxEstimator):
    """Importance re-weighting over max-confidence bins (Mandoline with one confidence slice).

    .. math:: \\widehat{\\mathrm{acc}}_{IM} = \\frac{\\sum_{b:\\, n_{S,b} > 0} f_{T,b}\\,
              \\mathrm{acc}_{S,b}}{\\sum_{b:\\, n_{S,b} > 0} f_{T,b}}

    Parameters
    ----------
    n_bins : int, default=10
        Number of equal-width confidence bins on ``[0, 1]`` (ATC paper App. E: 10 equal-width
        bins did best among 5/10/50 equal-width and uniform-mass binnings).
    temperature_scaling : bool, default=True
        Fit a temperature on the validation set; apply it to validation and target logits.

    Attributes
    ----------
    temperature_ : float
        Fitted temperature (1.0 if ``temperature_scaling=False``).
    val_bin_counts_ : ndarray of shape (n_bins,)
        Validation points per bin.
    val_bin_correct_ : ndarray of shape (n_bins,)
        Correctly classified validation points per bin.
    val_bin_accuracy_ : ndarray of shape (n_bins,)
        Validation accuracy per bin (NaN for empty bins).

    Notes
    -----
    ``diagnostics["dropped_target_mass"]`` is the fraction of target points whose bin holds no
    validation point. If it is 1, the estimate falls back to the validation accuracy with an
    :class:`ImportanceWeightingWarning`. ``per_sample`` is None.

    References
    ----------
    .. [1] Chen, M. et al. "Mandoline: Model Evaluation under Distribution Shift", ICML 2021.
    .. [2] Garg, S. et al. "Leveraging Unlabeled Data to Predict Out-of-Distribution
       Performance", ICLR 2022.

    Examples
    --------
    >>> est = IM(temperature_scaling=False).fit([[3.0, 0.0], [0.0, 3.0], [0.1, 0.0]], [0, 0, 0])
    >>> est.estimate([[0.0, 0.05]]).accuracy
    1.0
    """

    has_per_sample = False  # no per-sample probabilities (interval: binomial)

    PARAMS = (
        Param("n_bins", "int", 10, "Equal-width confidence bins over [0, 1].", low=1),
        TEMPERATURE_SCALING,
    )

    def _fit_log_probs(
        self,
        val_log_probs: NDArray[np.float64],
        val_labels: NDArray[np.int64],
        val_correct: NDArray[np.bool_],
    ) -> None:
        n_bins = int(self.n_bins)
        bins = _bin_index(_max_confidence_from_log_probs(val_log_probs), n_bins)
        self.val_bin_counts_ = np.bincount(bins, minlength=n_bins)
        self.val_bin_correct_ = np.bincount(bins, weights=val_correct, minlength=n_bins).astype(
            np.int64
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            self.val_bin_accuracy_ = self.val_bin_correct_ / self.val_bin_counts_

    def _estimate_log_probs(
        self, target_log_probs: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, dict[str, Any]]:
        n_bins = int(self.n_bins)
        target_bins = _bin_index(_max_confidence_from_log_probs(target_log_probs), n_bins)
        target_counts = np.bincount(target_bins, minlength=n_bins)
        accuracy, dropped = _closed_form(self.val_bin_counts_, self.val_bin_correct_, target_counts)
        fallback = accuracy is None
        if accuracy is None:
            accuracy = float(self.val_accuracy_)
            _fallback_warning(accuracy)
        return accuracy, None, {
            "dropped_target_mass": dropped,
            "occupied_bins": int((self.val_bin_counts_ > 0).sum()),
            "fallback_to_val_accuracy": fallback,
        }
