"""DoC: Difference of Confidences (Guillory et al., ICCV 2021), the version used as a baseline.

.. math:: \\widehat{\\mathrm{acc}}_{DoC} = \\mathrm{acc}_S - (\\mathrm{AC}_S - \\mathrm{AC}_T)
          = \\mathrm{acc}_S + \\frac{1}{m}\\sum_{i \\in T} s_i - \\frac{1}{n}\\sum_{i \\in S} s_i

with :math:`s_i = \\max_k P_{ik}`. This is what the ATC, COT and ALSA tables call DoC ("DOC-Feat"
in Guillory et al.); the regression variant fitted on several labelled shifts is not it.

References
----------
.. [1] Guillory, D., Shankar, V., Ebrahimi, S., Darrell, T. and Schmidt, L. "Predicting with
   Confidence on Unseen Distributions", ICCV 2021.
.. [2] Garg, S. et al. "Leveraging Unlabeled Data to Predict Out-of-Distribution Performance",
   ICLR 2022, Sec. 5 and App. E.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..maths._softmax import TEMPERATURE_SCALING, SoftmaxEstimator
from ..core.params import Param
from ..core.registry import register
from ..maths.confidence import _max_confidence_from_log_probs, check_correct, check_scores

__all__ = ["DoC", "difference_of_confidences"]


def difference_of_confidences(
    val_confidence: ArrayLike,
    val_correct: ArrayLike,
    target_confidence: ArrayLike,
    *,
    clip: bool = True,
) -> float:
    """DoC accuracy estimate from validation and target max-confidences.

    .. math:: \\widehat{\\mathrm{acc}}_{DoC} = \\overline{\\mathrm{corr}}_S
              + \\overline{s}_T - \\overline{s}_S

    Parameters
    ----------
    val_confidence : array-like of shape (n_val,)
        Max-softmax confidences of the validation set.
    val_correct : array-like of shape (n_val,)
        Whether each validation prediction is correct (bool or 0/1).
    target_confidence : array-like of shape (n_target,)
        Max-softmax confidences of the target set.
    clip : bool, default=True
        Clip the estimate to ``[0, 1]``. The reference codes (ATC_code ``get_doc``, COT
        ``metric == 'DoC'``) do not clip; ``clip=False`` reproduces them.

    Returns
    -------
    float
        The estimated target accuracy (a fraction; may leave ``[0, 1]`` only if ``clip=False``).

    Examples
    --------
    >>> round(difference_of_confidences([0.9, 0.7], [True, False], [0.6, 0.6]), 12)
    0.3
    """
    val_s = check_scores(val_confidence, "val_confidence")
    correct = check_correct(val_correct, "val_correct", val_s.size)
    target_s = check_scores(target_confidence, "target_confidence")
    value = float(correct.mean() + target_s.mean() - val_s.mean())
    return min(max(value, 0.0), 1.0) if clip else value


@register("doc")
class DoC(SoftmaxEstimator):
    """Difference of Confidences: validation accuracy shifted by the drop in average confidence.

    .. math:: \\widehat{\\mathrm{acc}}_{DoC} = \\mathrm{acc}_S - (\\mathrm{AC}_S - \\mathrm{AC}_T)

    Parameters
    ----------
    clip : bool, default=True
        Clip the estimate to ``[0, 1]``; the unclipped value is always in
        ``diagnostics["unclipped_accuracy"]``.
    temperature_scaling : bool, default=True
        Fit a temperature on the validation set; apply it to validation and target logits.

    Attributes
    ----------
    temperature_ : float
        Fitted temperature (1.0 if ``temperature_scaling=False``).
    val_average_confidence_ : float
        :math:`\\mathrm{AC}_S`, mean max-confidence on the validation set.
    val_accuracy_ : float
        :math:`\\mathrm{acc}_S`.

    Notes
    -----
    If temperature scaling makes :math:`\\mathrm{AC}_S = \\mathrm{acc}_S` exactly, DoC equals AC.
    DoC on the validation set itself returns :math:`\\mathrm{acc}_S` exactly. ``per_sample`` is
    None (DoC is a set-level correction, not a per-sample probability).

    References
    ----------
    .. [1] Guillory, D. et al. "Predicting with Confidence on Unseen Distributions", ICCV 2021.

    Examples
    --------
    >>> est = DoC(temperature_scaling=False).fit([[2.0, 0.0], [0.0, 2.0]], [0, 0])
    >>> res = est.estimate([[2.0, 0.0], [0.0, 2.0]])
    >>> round(res.accuracy, 6)
    0.5
    """

    has_per_sample = False  # no per-sample probabilities (interval: binomial)

    PARAMS = (
        Param("clip", "bool", True, "Clip the estimate to [0, 1] (False: the reference codes' "
              "unclipped value, which may leave [0, 1]).",
              acts="an unclipped estimate outside [0, 1] (data-dependent)"),
        TEMPERATURE_SCALING,
    )

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
        target_ac = float(_max_confidence_from_log_probs(target_log_probs).mean())
        unclipped = self.val_accuracy_ + target_ac - self.val_average_confidence_
        accuracy = min(max(unclipped, 0.0), 1.0) if self.clip else unclipped
        return accuracy, None, {
            "unclipped_accuracy": unclipped,
            "val_average_confidence": self.val_average_confidence_,
            "target_average_confidence": target_ac,
        }
