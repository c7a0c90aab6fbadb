"""Fitting the estimators on the reference (once per reference, cached) and estimating chunks.

Only the estimators' public API is used: ``get_estimator(name)``, ``fit``, ``estimate`` and the
result's ``accuracy``, ``interval``, ``shift_interval`` (the shift-aware band, read once per
estimate, so a band computed lazily is computed here) and ``diagnostics``. The label-free
signals stored with each estimate are ``auto``'s own (``diagnostics["signals"]``), or, for
another method, the same signals the band is conditioned on
(:func:`estimators.trust.attach_band.fitted_signals` on the estimator's validation set).

Bands and their limits:

* ``shift_interval`` is the band alerts use. Where the active calibration has no band for a
  method, it is (nan, nan) and the sampling ``interval`` stands in (a note says so).
* A chunk under :data:`~tasks.monitor.options.MIN_ROWS` rows is estimated, with a warning that
  states how wide its band is; an empty chunk gets no estimate and the band [0, 1].
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from storage.logit_files import load_logit_file
from tasks.monitor.fit_cache import FitCache
from tasks.monitor.keys import estimator_key, fit_key, logits_digest
from tasks.monitor.options import MIN_ROWS

__all__ = [
    "ChunkEstimate",
    "FittedMethod",
    "Reference",
    "calibration_digest",
    "empty_estimate",
    "estimate_chunk",
    "estimators_code_version",
    "fit_methods",
    "load_reference",
]


@dataclass(frozen=True)
class Reference:
    """The labelled reference the estimators are fitted on.

    Attributes
    ----------
    path : Path
    logits : ndarray of shape (n, c), float64
    labels : ndarray of shape (n,), int64
    sha256 : str
        Digest of its logits and labels: part of every estimator key, so a changed reference
        keys its estimates apart.
    """

    path: Path
    logits: NDArray[np.float64]
    labels: NDArray[np.int64]
    sha256: str

    @property
    def n_classes(self) -> int:
        return int(self.logits.shape[1])

    @property
    def accuracy(self) -> float:
        """The classifier's accuracy on the reference itself."""
        return float(np.mean(self.logits.argmax(axis=1) == self.labels))


def load_reference(path: Path) -> Reference:
    """Read and check ``--reference``: logits with labels, finite, at least 2 classes.

    Raises
    ------
    ValueError
        One line naming ``--reference`` and the file: unreadable, no labels, probabilities,
        NaN/inf, labels outside the classes.
    """
    import hashlib

    hint = (" The monitor takes logits: store np.log(p) instead (for a binary model's "
            "positive-class probability p, np.log(p / (1 - p))).")
    try:
        logits, labels = load_logit_file(path, require_labels=True, probabilities_hint=hint)
    except ValueError as exc:
        raise ValueError(f"--reference: {' '.join(str(exc).split())}") from None
    assert labels is not None
    bad = ~np.isfinite(logits).all(axis=1)
    if bad.any():
        raise ValueError(f"--reference {path}: {int(bad.sum())} row(s) hold NaN or infinite "
                         f"logits (first: row {int(np.flatnonzero(bad)[0])}); the reference "
                         "must be finite.")
    c = int(logits.shape[1])
    if labels.min() < 0 or labels.max() >= c:
        raise ValueError(f"--reference {path}: labels must be class indices in 0..{c - 1} (the "
                         f"logits have {c} columns); got values from {int(labels.min())} to "
                         f"{int(labels.max())}.")
    digest = hashlib.sha256(logits_digest(logits).encode())
    digest.update(np.ascontiguousarray(labels, dtype="<i8").tobytes())
    return Reference(Path(path), logits, labels, digest.hexdigest())


def calibration_digest() -> str | None:
    """SHA-256 of the active calibration (bands and ``auto``'s combination), or None."""
    from estimators.trust.calibration_artifact import active_calibration

    calibration = active_calibration()
    return None if calibration is None else calibration.digest()


def estimators_code_version() -> str:
    """Digest of the estimators' source files: a cached fit is refit after an upgrade."""
    import estimators
    from tasks.stages.versions import files_version

    root = Path(estimators.__file__).resolve().parent
    return files_version(sorted(root.rglob("*.py")), "monitor-fit", root.parent)


@dataclass
class FittedMethod:
    """One estimator fitted on the reference, with the reference's own estimate.

    Attributes
    ----------
    method : str
    params : dict
        ``get_params()``, defaults included.
    params_json : str
    estimator_key : str
        :func:`tasks.monitor.keys.estimator_key`.
    estimator : Estimator
    reference_accuracy : float
        The fitted estimator's estimate of the reference itself: the baseline of
        ``--alert-drop`` and the centre of the reference range in the figure.
    reference_band : tuple of float
        Its band (``shift_interval``, or ``interval`` where there is none): the reference
        range.
    from_cache : bool
        Whether the fit was read from the cache (no refit).
    warnings : list of str
    """

    method: str
    params: dict[str, Any]
    params_json: str
    estimator_key: str
    estimator: Any
    reference_accuracy: float
    reference_band: tuple[float, float]
    from_cache: bool
    warnings: list[str] = field(default_factory=list)


def _band(result: Any) -> tuple[tuple[float, float], bool]:
    """``shift_interval`` (read once), or the sampling ``interval`` where the band is NaN;
    the flag says whether the shift band was there."""
    low, high = (float(v) for v in result.shift_interval)
    if math.isfinite(low) and math.isfinite(high):
        return (low, high), True
    ilow, ihigh = (float(v) for v in result.interval)
    return (ilow, ihigh), False


def _messages(caught: list[warnings.WarningMessage], prefix: str,
              leave_out: tuple[type[Warning], ...] = ()) -> list[str]:
    seen: dict[str, None] = {}
    for w in caught:
        if not issubclass(w.category, leave_out):
            seen.setdefault(f"{prefix}: {' '.join(str(w.message).split())}", None)
    return list(seen)


def fit_methods(
    reference: Reference, methods: tuple[str, ...], level: float, cache: FitCache | None,
) -> list[FittedMethod]:
    """Fit each method on the reference, or load its fit from the cache.

    Parameters
    ----------
    reference : Reference
    methods : tuple of str
        Registry keys.
    level : float
        Nominal coverage of the bands.
    cache : FitCache or None
        Where fitted estimators are kept per reference (None: always fit).

    Returns
    -------
    list of FittedMethod

    Raises
    ------
    ValueError
        When an estimator refuses the reference (``-m METHOD: ...``).
    """
    from estimators import get_estimator

    calibration = calibration_digest()
    code = estimators_code_version()
    fitted = []
    for method in methods:
        estimator = get_estimator(method)
        params = estimator.get_params()
        key = estimator_key(reference.sha256, method, params, calibration, level)
        fkey = fit_key(key, code)
        stored = cache.load(fkey) if cache is not None else None
        notes: list[str] = []
        if stored is not None:
            estimator = stored["estimator"]
            ref_acc, ref_band = stored["reference_accuracy"], tuple(stored["reference_band"])
        else:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    estimator.fit(reference.logits, reference.labels)
                    own = estimator.estimate(reference.logits, level=level)
                except ValueError as exc:
                    raise ValueError(f"-m {method}: the reference {reference.path} is refused: "
                                     f"{' '.join(str(exc).split())}") from None
            notes = _messages(caught, f"{method} on the reference")
            (low, high), _ = _band(own)
            ref_acc, ref_band = float(own.accuracy), (low, high)
            if cache is not None:
                cache.store(fkey, {"estimator": estimator, "reference_accuracy": ref_acc,
                                   "reference_band": ref_band})
        fitted.append(FittedMethod(
            method=method, params=dict(params),
            params_json=json.dumps(params, sort_keys=True, default=repr),
            estimator_key=key, estimator=estimator, reference_accuracy=float(ref_acc),
            reference_band=(float(ref_band[0]), float(ref_band[1])),
            from_cache=stored is not None, warnings=notes,
        ))
    return fitted


@dataclass(frozen=True)
class ChunkEstimate:
    """One method's estimate of one chunk.

    Attributes
    ----------
    method : str
    accuracy : float
        NaN for an empty chunk.
    interval : tuple of float
        Sampling interval at ``level``.
    band : tuple of float
        The shift-aware band (``shift_interval``), or the interval where the calibration has
        none for the method (``has_shift_band`` False); [0, 1] for an empty chunk.
    has_shift_band : bool
    level : float
    signals : dict or None
        The label-free signals (confidence drop, entropy rise, label-shift z, ...).
    diagnostics : dict
    seconds : float
    warnings : tuple of str
    """

    method: str
    accuracy: float
    interval: tuple[float, float]
    band: tuple[float, float]
    has_shift_band: bool
    level: float
    signals: dict[str, Any] | None
    diagnostics: dict[str, Any]
    seconds: float
    warnings: tuple[str, ...] = ()


def _signals(
    fitted: FittedMethod, result: Any, logits: NDArray[np.float64]
) -> dict[str, Any] | None:
    own = result.diagnostics.get("signals")
    if isinstance(own, dict):
        return own
    estimator = fitted.estimator
    val_logits = getattr(estimator, "val_logits_", None)
    val_labels = getattr(estimator, "val_labels_", None)
    if val_logits is None or val_labels is None:
        return None
    from estimators.trust.attach_band import fitted_signals

    # the same signal model the band reads (fitted once per validation content)
    record = fitted_signals(val_logits, val_labels).transform(
        np.asarray(logits, dtype=np.float64)).to_record()
    return dict(record)


def estimate_chunk(
    fitted: FittedMethod, logits: NDArray[np.float64], level: float, name: str,
) -> ChunkEstimate:
    """Estimate one chunk with one fitted method.

    Parameters
    ----------
    fitted : FittedMethod
    logits : ndarray of shape (n, c), n >= 1
    level : float
    name : str
        The chunk's name (in warnings).

    Returns
    -------
    ChunkEstimate
        A chunk under :data:`MIN_ROWS` rows carries a warning stating its band's width.
    """
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fitted.estimator.estimate(logits, level=level)
        band, has_band = _band(result)
        signals = _signals(fitted, result, logits)
    seconds = time.perf_counter() - start
    n = int(logits.shape[0])
    from estimators import SmallSampleWarning

    # the estimators' own small-sample warning is replaced by one that states the band's width
    notes = _messages(caught, f"{name} [{fitted.method}]", (SmallSampleWarning,))
    if n < MIN_ROWS:
        notes.append(f"{name}: {n} row(s), under {MIN_ROWS}: its own sampling noise dominates; "
                     f"[{fitted.method}] band [{band[0]:.3f}, {band[1]:.3f}] is "
                     f"{100 * (band[1] - band[0]):.1f} points wide")
    record = result.to_record()
    return ChunkEstimate(
        method=fitted.method, accuracy=float(result.accuracy),
        interval=(float(result.interval[0]), float(result.interval[1])), band=band,
        has_shift_band=has_band, level=float(level), signals=signals,
        diagnostics=dict(record.get("diagnostics", {})), seconds=seconds, warnings=tuple(notes),
    )


def empty_estimate(fitted: FittedMethod, level: float, name: str) -> ChunkEstimate:
    """What an empty chunk gets: no estimate, the band [0, 1], and a warning saying so."""
    return ChunkEstimate(
        method=fitted.method, accuracy=math.nan, interval=(0.0, 1.0), band=(0.0, 1.0),
        has_shift_band=False, level=float(level), signals=None, diagnostics={}, seconds=0.0,
        warnings=(f"{name}: empty chunk (0 rows): no estimate; its band is [0, 1], 100 points "
                  "wide",),
    )
