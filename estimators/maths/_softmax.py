"""Shared base of the softmax baselines (AC, DoC, IM, ATC, COT): optional temperature scaling.

Every softmax baseline in the ATC and COT papers is evaluated on temperature-scaled probabilities
("Post T"). The temperature is fitted on the same validation set the estimator learns from, applied
to validation and target logits alike, and recorded with every estimate as ``params["temperature"]``
(1.0 when ``temperature_scaling=False``, the papers' "Pre T").
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core.base import Estimator
from ..core.params import Param
from .confidence import _log_softmax
from .temperature import DEFAULT_BOUNDS, _fit_temperature

#: The ``temperature_scaling`` parameter every softmax baseline declares (last, by convention).
TEMPERATURE_SCALING = Param(
    "temperature_scaling", "bool", True,
    "Fit a temperature on the validation set and apply it to validation and target logits "
    '(the papers\' "Post T"; False: "Pre T").',
)


class SoftmaxEstimator(Estimator):
    """Base class of estimators that read temperature-scaled softmax probabilities.

    Subclasses declare :data:`TEMPERATURE_SCALING` in their ``PARAMS`` and implement ``_fit_log_probs`` / ``_estimate_log_probs``, which receive row-wise
    log-probabilities of ``softmax(logits / temperature_)``.

    Attributes
    ----------
    temperature_ : float
        Fitted temperature (1.0 when temperature scaling is off).
    """

    temperature_scaling: bool

    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        if self.temperature_scaling:
            self.temperature_ = _fit_temperature(val_logits, val_labels, DEFAULT_BOUNDS)
        else:
            self.temperature_ = 1.0
        val_log_probs = self._log_probs(val_logits)
        correct = val_logits.argmax(axis=1) == val_labels
        self._fit_log_probs(val_log_probs, val_labels, correct)

    def _estimate(
        self, target_logits: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, dict[str, Any]]:
        return self._estimate_log_probs(self._log_probs(target_logits))

    def _log_probs(self, logits: NDArray[np.float64]) -> NDArray[np.float64]:
        """Log-probabilities of ``softmax(logits / temperature_)``."""
        if self.temperature_ == 1.0:
            return _log_softmax(logits)
        return _log_softmax(logits / self.temperature_)

    def _fitted_params(self) -> dict[str, Any]:
        return {"temperature": float(self.temperature_)}

    @abstractmethod
    def _fit_log_probs(
        self,
        val_log_probs: NDArray[np.float64],
        val_labels: NDArray[np.int64],
        val_correct: NDArray[np.bool_],
    ) -> None:
        """Learn fitted state from validation log-probabilities, labels and correctness."""

    @abstractmethod
    def _estimate_log_probs(
        self, target_log_probs: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, dict[str, Any]]:
        """Return ``(accuracy, per_sample or None, diagnostics)`` from target log-probabilities."""
