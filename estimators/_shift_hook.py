"""How :class:`~estimators.base.Estimator` reaches the shift-aware band without importing it.

The band (:mod:`estimators.calibration`) needs estimators (the signal panel), and every
estimator needs the base class: the base class therefore calls whatever provider
:mod:`estimators.calibration` installs here when it is imported (``import estimators`` does),
and leaves ``shift_interval`` at ``(nan, nan)`` when none is installed.
"""

from __future__ import annotations

from typing import Any, Protocol

from numpy.typing import NDArray
import numpy as np


class ShiftBandProvider(Protocol):
    """What the base class asks of the band."""

    def fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> Any:
        """Fit the label-free signals on the validation set; returns opaque state."""

    def interval(self, state: Any, key: str, target_logits: NDArray[np.float64],
                 accuracy: float, level: float) -> tuple[float, float]:
        """The band of the estimator registered as ``key`` around ``accuracy``."""


PROVIDER: list[ShiftBandProvider] = []


def install(provider: ShiftBandProvider) -> None:
    """Install the band provider (the last one installed wins)."""
    PROVIDER[:] = [provider]


def provider() -> ShiftBandProvider | None:
    """The installed provider, or None."""
    return PROVIDER[0] if PROVIDER else None
