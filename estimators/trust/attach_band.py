"""The shift-aware band of one estimate, computed after the estimate and only when asked for.

:meth:`Estimator.estimate <estimators.core.base.Estimator.estimate>` leaves in each result a
:class:`~estimators.core.band_slot.BandRequest`; :func:`shift_band` turns it into the band:
the active calibration's band model for the estimator's key
(:func:`~estimators.trust.calibration_artifact.active_calibration`), fed with the label-free
signals (:class:`~estimators.trust.shift_signals.ShiftSignals`) of the validation and target
sets, widened to contain the estimate's sampling interval. ``estimators/__init__.py`` installs
it in the core's slot (:func:`~estimators.core.band_slot.install_band_function`), so a result
computes it on the first read of ``shift_interval`` or at ``estimate(..., band=True)`` (the CLI
and the pipeline); a caller who never reads the band never fits a signal or opens a file.

Cost: the signal fit (a temperature and the five panel methods of
:data:`~estimators.trust.shift_signals.PANEL`) once per validation set, shared by every
estimator fitted on it (:func:`fitted_signals`), and the target's signals once per target set,
shared by every estimator estimating it; ``docs/PERFORMANCE.md`` gives each method's cost with
and without its band.
"""

from __future__ import annotations

import hashlib
import math
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core.band_slot import BandRequest
from ..core.exceptions import SignalWarning
from .calibration_artifact import active_calibration
from .shift_signals import ShiftSignals, SignalValues

__all__ = ["fitted_signals", "forget_signals", "shift_band", "warn_missing_signals"]


def _digest(*arrays: NDArray[Any]) -> tuple[Any, ...]:
    parts: list[Any] = []
    for a in arrays:
        parts.append(a.shape)
        parts.append(hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).digest())
    return tuple(parts)


class _Memo:
    """A few recent results by key (oldest dropped first)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: dict[tuple[Any, ...], Any] = {}

    def get(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        if key not in self.items:
            if len(self.items) >= self.size:
                self.items.pop(next(iter(self.items)))
            self.items[key] = make()
        return self.items[key]


#: Signal fits by the content of the validation set: the estimators of one run share one
#: (each holds a float64 copy of its validation logits, so only the last two are kept).
_FITS = _Memo(2)
#: Target signals by (validation content, target content): the methods estimating one target
#: share them. The pipeline runs one method at a time over all of a run's targets (up to ~100
#: splits), so the memo holds several runs' targets (an entry is a few floats): with 8 entries
#: every method recomputed every target's signals, 0.35 s of each accuracy method's 0.44 s
#: estimate task on an fmnist run.
_TARGETS = _Memo(1024)
#: Content digests by array identity (a weak reference checks that the array is still the
#: same one): a band per method and target hashes each array once, not once per method.
_DIGESTS = _Memo(32)


def _content(array: NDArray[Any]) -> tuple[Any, ...]:
    key = (id(array), array.shape, array.dtype.str)
    held = _DIGESTS.items.get(key)
    if held is not None and held[0]() is array:
        digest: tuple[Any, ...] = held[1]
        return digest
    _DIGESTS.items.pop(key, None)
    entry = _DIGESTS.get(key, lambda: (weakref.ref(array),
                                       _digest(np.asarray(array, dtype=np.float64))))
    digest = entry[1]
    return digest


def forget_signals() -> None:
    """Empty the memos of signal fits and target signals (a benchmark times a cold band)."""
    for memo in (_FITS, _TARGETS, _DIGESTS):
        memo.items.clear()


def _fit_key(val_logits: NDArray[Any], val_labels: NDArray[np.int64]) -> tuple[Any, ...]:
    return (*_content(val_logits), *_content(val_labels))


def fitted_signals(val_logits: NDArray[Any], val_labels: NDArray[np.int64]) -> ShiftSignals:
    """The :class:`ShiftSignals` fitted on a validation set, fitted once per content.

    Parameters
    ----------
    val_logits : ndarray of shape (n, c)
        Validated logits (float32 or float64; the signals are fit on their float64 values).
    val_labels : ndarray of shape (n,)
    """
    signals: ShiftSignals = _FITS.get(_fit_key(val_logits, val_labels), lambda: ShiftSignals(
    ).fit(np.asarray(val_logits, dtype=np.float64), val_labels))
    return signals


def warn_missing_signals(problems: Mapping[str, str], consequence: str) -> None:
    """Warn (:class:`~estimators.core.exceptions.SignalWarning`) that signals are NaN, why, and
    what follows for the caller (``consequence``)."""
    reasons = "; ".join(f"{name}: {why}" for name, why in problems.items())
    warnings.warn(f"A label-free signal is NaN ({reasons}); {consequence}.", SignalWarning,
                  stacklevel=3)


def shift_band(request: BandRequest) -> tuple[float, float]:
    """The shift-aware band of one estimate (what ``result.shift_interval`` reads).

    Returns
    -------
    tuple of float
        ``(low, high)`` at ``request.level``, widened to contain ``request.interval``;
        ``(nan, nan)`` where the active calibration has no band for ``request.key`` or the
        estimate is not finite (a score without a map). No signal is computed then.
        ``(0, 1)`` where a signal the band reads is NaN (never filled in by a number), with a
        :class:`~estimators.core.exceptions.SignalWarning` naming it.

    Warns
    -----
    CalibrationWarning
        Once per file, when the calibration named by ``ALSA_BENCH_CALIBRATION`` is missing or
        damaged (the shipped one is used).
    """
    if not math.isfinite(request.accuracy):
        return (math.nan, math.nan)
    calibration = active_calibration()
    model = None if calibration is None else calibration.bands.get(request.key)
    if model is None:
        return (math.nan, math.nan)
    signals = fitted_signals(request.val_logits, request.val_labels)
    target = request.target_logits
    key = (*_fit_key(request.val_logits, request.val_labels), *_content(target))
    measured: SignalValues = _TARGETS.get(key, lambda: signals.transform(
        np.asarray(target, dtype=np.float64)))
    low_arr, high_arr = model.interval(measured.to_record(), request.accuracy, request.level)
    low, high = float(low_arr[0]), float(high_arr[0])
    if not (math.isfinite(low) and math.isfinite(high)):
        if not measured.problems:
            return (math.nan, math.nan)
        warn_missing_signals(measured.problems, "the shift band is [0, 1]: without that "
                             "signal nothing narrower is known to hold")
        return (0.0, 1.0)
    interval = request.interval
    if math.isfinite(interval[0]) and math.isfinite(interval[1]):
        low, high = min(low, interval[0]), max(high, interval[1])
    return (float(low), float(high))
