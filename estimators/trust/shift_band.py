r"""The shift-aware band: an interval meant to contain the *true* accuracy under a shift.

The sampling interval of an estimate (:func:`~estimators.core.base.sampling_interval`) covers the
noise of finite sets, not the bias a distribution shift causes, and on shifted data it covers
the truth a fraction of the time. The band here is a normalised split-conformal interval
(Lei et al. 2018, §5.2; Angelopoulos & Bates, "A Gentle Introduction to Conformal Prediction",
2021, §2.3) whose scale grows with label-free evidence of a shift:

.. math::

    e = a - \hat a, \qquad
    \sigma_\pm(x) = \sqrt{s^2 + (\beta_\pm^\top f(x))^2}, \qquad
    s^2 = \tilde a (1 - \tilde a)\Big(\frac{1}{n_T} + \frac{1}{n_S}\Big)

with :math:`a` the true and :math:`\hat a` the estimated target accuracy,
:math:`\tilde a = \mathrm{clip}(\hat a, 0.01, 0.99)`, and :math:`f(x) \ge 0` the features of
:data:`BAND_FEATURES` (:func:`band_features`). :math:`\beta_-, \beta_+ \ge 0` come from
non-negative least squares of the over- and under-estimates :math:`\max(-e, 0)` and
:math:`\max(e, 0)` on :math:`f`, every calibration dataset weighted equally. The conformal
scores are the one-sided normalised errors :math:`r_- = \max(-e, 0)/\sigma_-` and
:math:`r_+ = \max(e, 0)/\sigma_+`, each computed out of fold (the scale fitted without the
score's dataset, as in cross-conformal prediction, Vovk 2015), and the band at level
:math:`\ell` is

.. math:: [\hat a - q_-\,\sigma_-(x),\ \hat a + q_+\,\sigma_+(x)] \cap [0, 1]

with :math:`q_\pm` the :math:`(1 + \ell)/2` weighted quantiles of :math:`r_\pm` (two one-sided
bands of miscoverage :math:`(1-\ell)/2` each). The band always contains the sampling
interval.

Under exchangeability of the calibration splits and the new one the band covers at level
:math:`\ell`; a new *kind* of shift is not exchangeable with the calibration's, so there the
coverage is measured (``docs/BENCHMARK.md``, leave-one-dataset-out), not guaranteed. A concept
shift (the meaning of the labels changes) leaves no trace in the logits: no label-free band sees
it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

from .shift_signals import PANEL

__all__ = [
    "BAND_FEATURES", "QUANTILE_GRID", "BandModel", "band_features", "fit_band",
    "weighted_quantile",
]

#: Label-free features of the band's scale (all non-negative, 0 when target = validation):
#: ``|confidence_drop|``, ``max(entropy_rise, 0)``, ``prediction_shift``, ``panel_spread``,
#: ``|estimate - panel median|``, ``max(val_accuracy - panel median, 0)`` and
#: ``max(val_accuracy - estimate, 0)``.
BAND_FEATURES: tuple[str, ...] = (
    "confidence_drop", "entropy_rise", "prediction_shift", "panel_spread", "panel_gap",
    "panel_drop", "own_drop",
)
#: Probabilities at which the calibration stores the score quantiles (any level in
#: [0.5, 0.99] is read off by linear interpolation).
QUANTILE_GRID: tuple[float, ...] = tuple(round(0.5 + 0.005 * i, 3) for i in range(100)) + (
    0.9975, 0.999)


def _column(signals: Mapping[str, Any], name: str) -> NDArray[np.float64]:
    return np.atleast_1d(np.asarray(signals[name], dtype=np.float64))


def band_features(
    signals: Mapping[str, Any], estimate: Any
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""The band's features :math:`f(x)` and sampling scale :math:`s` for one or many rows.

    Parameters
    ----------
    signals : Mapping[str, float or array]
        :meth:`~estimators.trust.shift_signals.SignalValues.to_record` of each row (scalars or one
        array per key): the signals and ``panel_<method>`` for each method of
        :data:`~estimators.trust.shift_signals.PANEL`.
    estimate : float or array
        The estimate :math:`\hat a` the band is around.

    Returns
    -------
    features : ndarray of shape (n, len(BAND_FEATURES))
    sampling : ndarray of shape (n,)

    Examples
    --------
    >>> sig = {"confidence_drop": -0.02, "entropy_rise": 0.1, "prediction_shift": 0.05,
    ...        "panel_spread": 0.04, "val_accuracy": 0.9, "n_val": 1000, "n_target": 500,
    ...        **{f"panel_{m}": 0.8 for m in ("ac", "doc", "atc-mc", "atc-ne", "im")}}
    >>> f, s = band_features(sig, 0.75)
    >>> np.round(f, 3).tolist(), round(float(s[0]), 4)
    ([[0.02, 0.1, 0.05, 0.04, 0.05, 0.1, 0.15]], 0.0237)
    """
    est = np.atleast_1d(np.asarray(estimate, dtype=np.float64))
    panel = np.column_stack([_column(signals, f"panel_{m}") for m in PANEL])
    median = np.median(panel, axis=1)
    val = _column(signals, "val_accuracy")
    features = np.column_stack([
        np.abs(_column(signals, "confidence_drop")),
        np.clip(_column(signals, "entropy_rise"), 0.0, None),
        _column(signals, "prediction_shift"),
        _column(signals, "panel_spread"),
        np.abs(est - median),
        np.clip(val - median, 0.0, None),
        np.clip(val - est, 0.0, None),
    ])
    a = np.clip(est, 0.01, 0.99)
    inv = 1.0 / np.maximum(_column(signals, "n_target"), 1.0) + 1.0 / np.maximum(
        _column(signals, "n_val"), 1.0)
    sampling = np.sqrt(a * (1.0 - a) * inv)
    features = np.where(np.isfinite(features), features, 0.0)
    return features, sampling


def weighted_quantile(
    values: NDArray[np.float64], weights: NDArray[np.float64], probs: Sequence[float]
) -> NDArray[np.float64]:
    r"""Conservative weighted quantiles: the smallest value whose weighted CDF reaches
    :math:`p\,(1 + 1/n_{eff})`, with :math:`n_{eff} = (\sum w)^2 / \sum w^2` Kish's effective
    sample size (the split-conformal finite-sample correction
    :math:`\lceil (n+1) p \rceil / n` for equal weights).

    Examples
    --------
    >>> weighted_quantile(np.arange(1.0, 11.0), np.ones(10), [0.5, 0.9]).tolist()
    [6.0, 10.0]
    """
    order = np.argsort(values)
    v = np.asarray(values, dtype=np.float64)[order]
    w = np.asarray(weights, dtype=np.float64)[order]
    cdf = np.cumsum(w) / w.sum()
    bump = 1.0 + float(np.sum(w * w)) / float(w.sum()) ** 2
    out = []
    for p in probs:
        i = int(np.searchsorted(cdf, min(p * bump, 1.0) - 1e-12))
        out.append(v[min(i, len(v) - 1)] if i < len(v) else math.inf)
    return np.asarray(out, dtype=np.float64)


def _scale(
    features: NDArray[np.float64], sampling: NDArray[np.float64], coef: NDArray[np.float64]
) -> NDArray[np.float64]:
    result: NDArray[np.float64] = np.sqrt(sampling ** 2 + (features @ coef) ** 2)
    return result


def _nnls(
    features: NDArray[np.float64], target: NDArray[np.float64], weights: NDArray[np.float64]
) -> NDArray[np.float64]:
    root = np.sqrt(weights)
    coef, _ = nnls(features * root[:, None], target * root)
    return np.asarray(coef, dtype=np.float64)


def group_weights(groups: NDArray[Any]) -> NDArray[np.float64]:
    """One over the size of each row's group: every group (dataset) weighs the same in total."""
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse].astype(np.float64)


@dataclass(frozen=True)
class BandModel:
    """A fitted band of one method (:func:`fit_band`).

    Attributes
    ----------
    coef_low, coef_high : tuple of float
        :math:`\\beta_-`, :math:`\\beta_+` over :data:`BAND_FEATURES`.
    score_low, score_high : tuple of float
        The out-of-fold score quantiles at :data:`QUANTILE_GRID`.
    n_rows, n_groups : int
        Calibration rows and datasets.
    """

    coef_low: tuple[float, ...]
    coef_high: tuple[float, ...]
    score_low: tuple[float, ...]
    score_high: tuple[float, ...]
    n_rows: int
    n_groups: int

    def quantiles(self, level: float) -> tuple[float, float]:
        """:math:`(q_-, q_+)` at ``level``, interpolated on :data:`QUANTILE_GRID`."""
        p = 0.5 + level / 2.0
        grid = np.asarray(QUANTILE_GRID)
        if not grid[0] <= p <= grid[-1]:
            return (math.inf, math.inf)
        return (float(np.interp(p, grid, self.score_low)),
                float(np.interp(p, grid, self.score_high)))

    def interval(
        self, signals: Mapping[str, Any], estimate: Any, level: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Band ``(low, high)`` arrays around ``estimate`` (one row per signal row)."""
        features, sampling = band_features(signals, estimate)
        est = np.atleast_1d(np.asarray(estimate, dtype=np.float64))
        q_low, q_high = self.quantiles(level)
        low = est - q_low * _scale(features, sampling, np.asarray(self.coef_low))
        high = est + q_high * _scale(features, sampling, np.asarray(self.coef_high))
        return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"coef_low": list(self.coef_low), "coef_high": list(self.coef_high),
                "score_low": list(self.score_low), "score_high": list(self.score_high),
                "n_rows": self.n_rows, "n_groups": self.n_groups}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BandModel:
        def floats(key: str, n: int) -> tuple[float, ...]:
            values = tuple(float(v) for v in data[key])
            if len(values) != n:
                raise ValueError(f"band field {key!r} must hold {n} numbers; got {len(values)}.")
            return values

        k, g = len(BAND_FEATURES), len(QUANTILE_GRID)
        return cls(floats("coef_low", k), floats("coef_high", k), floats("score_low", g),
                   floats("score_high", g), int(data["n_rows"]), int(data["n_groups"]))


def fit_band(
    signals: Mapping[str, Any],
    estimate: Any,
    truth: Any,
    groups: Any,
) -> BandModel:
    r"""Fit one method's band on calibration rows.

    Parameters
    ----------
    signals : Mapping[str, array]
        One array per signal (:meth:`~estimators.trust.shift_signals.SignalValues.to_record` keys).
    estimate, truth : array of shape (n,)
        The method's estimates and the true accuracies.
    groups : array of shape (n,)
        The dataset of each row: the unit of the out-of-fold scores and of the weights (each
        dataset weighs the same). At least two groups.

    Returns
    -------
    BandModel
    """
    est = np.asarray(estimate, dtype=np.float64)
    e = np.asarray(truth, dtype=np.float64) - est
    g = np.asarray(groups)
    names = np.unique(g)
    if len(names) < 2:
        raise ValueError(
            f"The 'groups' argument of fit_band must name at least 2 datasets (the scores are "
            f"computed out of fold); got {len(names)}."
        )
    features, sampling = band_features(signals, est)
    weights = group_weights(g)
    over, under = np.clip(-e, 0.0, None), np.clip(e, 0.0, None)
    score_low, score_high = np.empty(len(e)), np.empty(len(e))
    for name in names:
        held = g == name
        fit = ~held
        c_low = _nnls(features[fit], over[fit], weights[fit])
        c_high = _nnls(features[fit], under[fit], weights[fit])
        score_low[held] = over[held] / _scale(features[held], sampling[held], c_low)
        score_high[held] = under[held] / _scale(features[held], sampling[held], c_high)
    return BandModel(
        coef_low=tuple(_nnls(features, over, weights).tolist()),
        coef_high=tuple(_nnls(features, under, weights).tolist()),
        score_low=tuple(weighted_quantile(score_low, weights, QUANTILE_GRID).tolist()),
        score_high=tuple(weighted_quantile(score_high, weights, QUANTILE_GRID).tolist()),
        n_rows=int(len(e)),
        n_groups=int(len(names)),
    )
