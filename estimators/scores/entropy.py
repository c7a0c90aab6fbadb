r"""Entropy: the mean prediction entropy of the target set, a label-free score (Wang et al. 2020).

With :math:`P = \operatorname{softmax}(Z / T)` the target's (temperature-scaled) predictions,

.. math:: S = \frac1m \sum_{i=1}^{m} H(P_i) = -\frac1m \sum_{i=1}^{m}\sum_{k=1}^{c}
          P_{ik} \log P_{ik} \in [0, \log c] \quad (\text{nats}, \ 0 \log 0 := 0).

Wang et al. (Tent, 2020) show that the entropy of a network's predictions rises with its error
under corruptions, along a line; the COT paper (Lu et al. 2023, Tables 1-2) reports its
:math:`R^2` and Spearman :math:`\rho` against the true error and no MAE, since the score is not
an error. Here, as for the other score methods (:mod:`estimators.scores.mano`,
:mod:`estimators.scores.nuclear_norm`), an accuracy comes only through a ``score_map``
(:class:`~estimators.maths.score_map.ScoreMap`, fitted on a labelled meta-set): its slope is
negative, higher entropy meaning lower accuracy.

Temperature scaling is on by default, as in the COT paper's protocol (every model is
temperature-scaled on its validation set before any method reads it; the temperature is fitted
by validation NLL and recorded as ``params["temperature"]``). The entropy is computed from
``log_softmax`` (no epsilon), so saturated rows give exactly 0 and never NaN. Adding a constant
to a row of logits, or rounding them to float32, changes nothing (the softmax does not move).

References
----------
.. [1] Wang, D., Shelhamer, E., Liu, S., Olshausen, B. and Darrell, T. "Tent: Fully Test-time
   Adaptation by Entropy Minimization", ICLR 2021 (arXiv 2006.10726, 2020), Fig. 1: entropy
   against error on CIFAR-100-C.
.. [2] Lu, Y. et al. "Predicting Out-of-Distribution Error with Confidence Optimal Transport"
   (Entropy as a baseline, Tables 1-2).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..core._validation import check_logits
from ..core.params import Param
from ..core.registry import register
from ..maths._softmax import TEMPERATURE_SCALING
from ..maths.confidence import _log_softmax, _negative_entropy_from_log_probs
from ..maths.score_map import SCORE_MAP, ScoreEstimator
from ..maths.temperature import DEFAULT_BOUNDS, _fit_temperature

__all__ = ["Entropy", "mean_entropy"]


def mean_entropy(logits: ArrayLike) -> float:
    r"""Mean Shannon entropy (nats) of the softmax of a set of logits, in :math:`[0, \log c]`.

    Parameters
    ----------
    logits : array-like of shape (m, c)
        Raw logits (binary ``(m,)`` / ``(m, 1)`` become ``[0, s]``).

    Examples
    --------
    >>> round(mean_entropy([[0.0, 0.0], [0.0, 0.0]]), 6) == round(math.log(2), 6)   # uniform
    True
    >>> mean_entropy([[0.0, 1e4]])                               # saturated: exactly 0
    0.0
    """
    z = check_logits(logits, "logits")
    return _entropy(z)


def _entropy(z: NDArray[np.float64]) -> float:
    """``-mean(negative entropy)``; ``+ 0.0`` turns the ``-0.0`` of saturated rows into 0."""
    return float(-np.mean(_negative_entropy_from_log_probs(_log_softmax(z)))) + 0.0


@register("entropy")
class Entropy(ScoreEstimator):
    r"""Mean prediction entropy (Wang et al. 2020); an accuracy only through ``score_map``.

    ``diagnostics``: ``score`` (:math:`S`, nats), ``normalized_entropy`` (:math:`S / \log c`,
    in [0, 1]) and ``val_entropy`` (the same score on the validation set, for reference).

    Parameters
    ----------
    temperature_scaling : bool, default True
        Fit a temperature on the validation set by NLL and apply it to the target logits (the
        COT paper's protocol).
    score_map : ScoreMap or (slope, intercept) or None, default None
        Map from the score to accuracy; without it ``accuracy`` is NaN.

    Examples
    --------
    >>> est = Entropy(temperature_scaling=False).fit([[2.0, 0.0], [0.0, 2.0]], [0, 1])
    >>> res = est.estimate([[0.0, 0.0], [0.0, 0.0]])
    >>> round(res.diagnostics["score"], 6) == round(math.log(2), 6), res.accuracy
    (True, nan)
    """

    PARAMS: ClassVar[tuple[Param, ...]] = (TEMPERATURE_SCALING, SCORE_MAP)

    temperature_scaling: bool

    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        super()._fit(val_logits, val_labels)
        self.temperature_ = (_fit_temperature(val_logits, val_labels, DEFAULT_BOUNDS)
                             if self.temperature_scaling else 1.0)
        self.val_entropy_ = self._score(val_logits)[0]

    def _score(self, logits: NDArray[np.float64]) -> tuple[float, dict[str, Any]]:
        scaled = logits if self.temperature_ == 1.0 else logits / self.temperature_
        s = _entropy(scaled)
        extra: dict[str, Any] = {"normalized_entropy": s / math.log(logits.shape[1])}
        if hasattr(self, "val_entropy_"):
            extra["val_entropy"] = self.val_entropy_
        return s, extra

    def _fitted_params(self) -> dict[str, Any]:
        return {"temperature": float(self.temperature_)}
