r"""``cq-bin``: the target accuracy from quantile bins of the validation confidence.

Histogram-binning calibration (Zadrozny & Elkan, 2001) with equal-mass bins (the
equal-frequency binning of Naeini et al., 2015) turned into an accuracy estimate. The
validation set's maximum softmax probabilities :math:`c_i` are cut at their quantiles
:math:`q_b = Q(b/B)`, :math:`b = 1..B-1`, into :math:`B` bins of (about) equal mass; bin
:math:`b` keeps its validation accuracy :math:`a_b`. A target row whose confidence falls in bin
:math:`b` is correct with probability :math:`a_b`, so

.. math:: \widehat{\mathrm{acc}} = \sum_{b=1}^{B} f_{T,b}\, a_b,

with :math:`f_{T,b}` the fraction of target rows in bin :math:`b`. Unlike IM's equal-width bins,
quantile bins are never empty on the validation set, so no target mass is dropped; unlike ATC
(one threshold), the estimate follows the whole shape of the confidence distribution.

It uses nothing but alsa-bench's public API (:class:`estimators.Estimator`,
:class:`estimators.Param`) and numpy.

References
----------
.. [1] Zadrozny, B. and Elkan, C. "Obtaining calibrated probability estimates from decision
   trees and naive Bayesian classifiers", ICML 2001.
.. [2] Naeini, M. P., Cooper, G. F. and Hauskrecht, M. "Obtaining Well Calibrated Probabilities
   Using Bayesian Binning", AAAI 2015.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from estimators import Estimator, Param

__all__ = ["ConfidenceQuantile", "max_softmax"]


def max_softmax(logits: NDArray[np.float64]) -> NDArray[np.float64]:
    """The maximum softmax probability of each row, :math:`1 / \\sum_j e^{z_j - \\max_k z_k}`.

    >>> max_softmax(np.array([[0.0, 0.0], [2.0, 2.0 - np.log(3.0)]])).round(3).tolist()
    [0.5, 0.75]
    """
    z = logits - logits.max(axis=1, keepdims=True)
    return 1.0 / np.exp(z).sum(axis=1)


class ConfidenceQuantile(Estimator):
    """Quantile-binned confidence: validation accuracy per equal-mass confidence bin.

    Parameters
    ----------
    n_bins : int, default 10
        Number of equal-mass bins of the validation confidence.

    Attributes
    ----------
    edges_ : ndarray of shape (n_bins - 1,)
        The inner bin edges: quantiles of the validation confidence.
    bin_accuracy_ : ndarray of shape (n_bins,)
        Validation accuracy in each bin.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 3000)
    >>> logits = rng.normal(size=(3000, 3)) + 2.0 * np.eye(3)[labels]
    >>> est = ConfidenceQuantile(n_bins=5).fit(logits[:2000], labels[:2000])
    >>> truth = np.mean(logits[2000:].argmax(1) == labels[2000:])
    >>> bool(abs(est.estimate(logits[2000:]).accuracy - truth) < 0.03)
    True
    """

    #: Its key (alsa-bench registers it under the entry point's name, the same one).
    name = "cq-bin"
    PARAMS = (
        Param("n_bins", "int", 10, "Equal-mass bins of the validation confidence.", low=1),
    )

    def _bins(self, confidence: NDArray[np.float64]) -> NDArray[np.int64]:
        # bin b holds the confidences in (q_b, q_{b+1}]: the same rule for validation and target
        return np.searchsorted(self.edges_, confidence, side="left").astype(np.int64)

    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        confidence = max_softmax(val_logits)
        correct = (val_logits.argmax(axis=1) == val_labels).astype(np.float64)
        n_bins = int(min(self.n_bins, confidence.size))
        self.edges_ = np.quantile(confidence, np.arange(1, n_bins) / n_bins)
        bins = self._bins(confidence)
        counts = np.bincount(bins, minlength=n_bins)
        hits = np.bincount(bins, weights=correct, minlength=n_bins)
        # tied confidences can leave a bin empty: it takes the overall validation accuracy
        self.bin_accuracy_ = np.where(counts > 0, hits / np.maximum(counts, 1), correct.mean())

    def _estimate(
        self, target_logits: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        per_sample = self.bin_accuracy_[self._bins(max_softmax(target_logits))]
        return float(per_sample.mean()), per_sample, {"n_bins": int(self.bin_accuracy_.size)}
