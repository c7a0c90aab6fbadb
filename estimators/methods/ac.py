"""AC: Average Confidence, the simplest label-free accuracy estimate.

.. math:: \\widehat{\\mathrm{acc}}_{AC} = \\frac{1}{m} \\sum_{i=1}^{m} \\max_k P^T_{ik}

It is exact when the classifier is argmax-calibrated on the target, and optimistic under shift
because networks stay over-confident. The ATC paper uses it as the normalising baseline.

References
----------
.. [1] Hendrycks, D. and Gimpel, K. "A Baseline for Detecting Misclassified and Out-of-Distribution
   Examples in Neural Networks", ICLR 2017 (max-softmax confidence).
.. [2] Garg, S. et al. "Leveraging Unlabeled Data to Predict Out-of-Distribution Performance",
   ICLR 2022, App. E (AC as a baseline; exact under calibration).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..maths._softmax import TEMPERATURE_SCALING, SoftmaxEstimator
from ..core.registry import register
from ..maths.confidence import _max_confidence_from_log_probs, check_probs

__all__ = ["AC", "average_confidence"]


def average_confidence(probs: ArrayLike) -> float:
    """Mean max-softmax probability of a set of predictions.

    .. math:: \\mathrm{AC} = \\frac{1}{m} \\sum_i \\max_k P_{ik} \\in [1/c, 1]

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Softmax probabilities (temperature-scaled if the caller wants the "Post T" variant).

    Returns
    -------
    float
        The estimated accuracy, a fraction in ``[1/c, 1]``.

    Raises
    ------
    ValueError
        If ``probs`` is not a 2-D array of row-stochastic probabilities.

    Examples
    --------
    >>> average_confidence([[0.9, 0.1], [0.6, 0.4]])
    0.75
    """
    arr = check_probs(probs, "probs")
    return float(arr.max(axis=1).mean())


@register("ac")
class AC(SoftmaxEstimator):
    """Average Confidence: target accuracy = mean max-softmax probability.

    .. math:: \\widehat{\\mathrm{acc}}_{AC} = \\frac{1}{m} \\sum_i \\max_k
              \\operatorname{softmax}(Z^T_i / T)_k

    The validation set is used only to fit the temperature ``T``.

    Parameters
    ----------
    temperature_scaling : bool, default=True
        Fit a temperature on the validation set and apply it to the target logits.

    Attributes
    ----------
    temperature_ : float
        Fitted temperature (1.0 if ``temperature_scaling=False``).
    n_classes_ : int
        Class count seen at ``fit``.

    Notes
    -----
    ``per_sample`` is the max confidence of each target row (its probability of being correct
    under calibration). Reference codes return error (COT, ``1 - mean(conf)``) or percent
    (ATC_code, ``calib_avg_conf``); this returns accuracy as a fraction.

    References
    ----------
    .. [1] Garg, S. et al. "Leveraging Unlabeled Data to Predict Out-of-Distribution
       Performance", ICLR 2022.

    Examples
    --------
    >>> import numpy as np
    >>> est = AC(temperature_scaling=False).fit([[2.0, 0.0], [0.0, 2.0]], [0, 0])
    >>> round(est.estimate([[0.0, 0.0]]).accuracy, 3)
    0.5
    """

    PARAMS = (TEMPERATURE_SCALING,)

    def _fit_log_probs(
        self,
        val_log_probs: NDArray[np.float64],
        val_labels: NDArray[np.int64],
        val_correct: NDArray[np.bool_],
    ) -> None:
        self.val_average_confidence_ = float(
            _max_confidence_from_log_probs(val_log_probs).mean()
        )

    def _estimate_log_probs(
        self, target_log_probs: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, dict[str, Any]]:
        confidence = _max_confidence_from_log_probs(target_log_probs)
        accuracy = float(confidence.mean())
        return accuracy, confidence, {"val_average_confidence": self.val_average_confidence_}
