"""How a result reaches the shift-aware band without the core importing the trust layer.

The band (:mod:`estimators.trust`) is computed *after* an estimate, from the label-free
signals of the validation and target sets and the active calibration file; it needs estimators
(its signal panel) and files, so the core cannot import it. :meth:`Estimator.estimate
<estimators.core.base.Estimator.estimate>` therefore puts a :class:`BandRequest` into each
result: what the band needs (the estimator's band key, references to the validation and target
arrays, the estimate, its level and sampling interval), computed by nothing yet. The result
computes the band on the first read of its ``shift_interval`` (or at once with
``estimate(..., band=True)``) by calling the function installed here, and keeps it.

The package top (``estimators/__init__.py``, above every layer) installs the trust layer's
:func:`estimators.trust.attach_band.shift_band`; with nothing installed the band is
``(nan, nan)``. Installing is all the core knows of the trust layer: no fit, no file and no
signal is touched until a band is asked for.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["BandFunction", "BandRequest", "band_function", "install_band_function"]


@dataclass(frozen=True, eq=False)
class BandRequest:
    """What the shift-aware band of one estimate needs; calling it computes the band.

    The arrays are references, not copies: an array changed in place before the band is read
    changes the band.

    Attributes
    ----------
    key : str
        The estimator's key in the calibration (its registry key; ``auto[...]`` for ``auto``).
    val_logits : ndarray of shape (n, c)
        The validation logits the estimator was fitted on (float32 or float64).
    val_labels : ndarray of shape (n,)
        Their labels.
    target_logits : ndarray of shape (m, c)
        The target logits of this estimate (float32 or float64).
    accuracy : float
        The estimate.
    level : float
        The band's nominal coverage.
    interval : tuple of float
        The estimate's sampling interval; the band is widened to contain it.
    """

    key: str
    val_logits: NDArray[Any]
    val_labels: NDArray[np.int64]
    target_logits: NDArray[Any]
    accuracy: float
    level: float
    interval: tuple[float, float]

    def __call__(self) -> tuple[float, float]:
        """The band from the installed function; ``(nan, nan)`` when none is installed."""
        function = band_function()
        return (math.nan, math.nan) if function is None else function(self)


#: What computes a band: the trust layer's :func:`~estimators.trust.attach_band.shift_band`.
BandFunction = Callable[[BandRequest], tuple[float, float]]

_INSTALLED: list[BandFunction] = []


def install_band_function(function: BandFunction | None) -> None:
    """Install the function that computes bands (None: none; the last one installed wins)."""
    _INSTALLED[:] = [] if function is None else [function]


def band_function() -> BandFunction | None:
    """The installed band function, or None."""
    return _INSTALLED[0] if _INSTALLED else None
