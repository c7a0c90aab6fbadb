r"""From a label-free score to an accuracy: the linear map fitted on a labelled meta-set.

Scores such as MaNo (:mod:`estimators.scores.mano`) and the normalised nuclear norm
(:mod:`estimators.scores.nuclear_norm`) are *correlated* with a classifier's accuracy on a shifted set,
but are not accuracies. Deng & Zheng (CVPR 2021) turn such a score into an accuracy by a
regression fitted on a **meta-set**: many shifted copies of labelled source data, each giving a
pair (score :math:`s_j`, true accuracy :math:`a_j`). Here the regression is linear,

.. math:: \hat a(s) = \operatorname{clip}_{[0, 1]}(\alpha s + \beta),

fitted by ordinary least squares (default) or by the Theil–Sen estimator (median of pairwise
slopes, robust to a few outlying meta-sets). :func:`leave_one_group_out` gives honest
out-of-group predictions (fit on every group but one, predict the held-out group), e.g. "within
the corruption family, leave one corruption type out".

This module also holds :class:`ScoreEstimator`, the small base class of the score estimators:
they report the score in ``diagnostics["score"]`` and an accuracy only when a map is given.

References
----------
.. [1] Deng, W. and Zheng, L. "Are Labels Always Necessary for Classifier Accuracy
   Evaluation?", CVPR 2021 (linear regression from a dataset-level statistic to accuracy,
   fitted on a meta-dataset of synthetic shifts).
.. [2] Deng, W., Suh, Y., Gould, S. and Zheng, L. "Confidence and Dispersity Speak:
   Characterising Prediction Matrix for Unsupervised Accuracy Estimation", ICML 2023.
.. [3] Xie, R. et al. "MaNo: Exploiting Matrix Norm for Unsupervised Accuracy Estimation Under
   Distribution Shifts", NeurIPS 2024.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any, ClassVar, Literal, Mapping

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..core.base import DEFAULT_LEVEL, AccuracyEstimate, Estimator, check_level
from ..core._validation import check_in_choices
from ..core.params import Param

__all__ = ["ScoreEstimator", "ScoreMap", "leave_one_group_out"]

MapMethod = Literal["ols", "theil-sen"]


def _check_pairs(scores: Any, accuracies: Any, owner: str) -> tuple[NDArray[np.float64], ...]:
    """Validate a meta-set: two finite 1-D float arrays of one length, at least two points,
    scores not all equal."""
    out = []
    for name, value in (("scores", scores), ("accuracies", accuracies)):
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{owner}: {name} must be a 1-D array of numbers; got {value!r} "
                             f"({exc}).") from None
        if arr.ndim != 1:
            raise ValueError(f"{owner}: {name} must be a 1-D array; got shape {arr.shape}.")
        if not np.all(np.isfinite(arr)):
            bad = np.flatnonzero(~np.isfinite(arr))
            raise ValueError(f"{owner}: {name} must be finite; got NaN or inf at positions "
                             f"{bad[:5].tolist()}.")
        out.append(arr)
    s, a = out
    if s.shape != a.shape:
        raise ValueError(f"{owner}: scores and accuracies must have the same length; got "
                         f"{s.size} scores and {a.size} accuracies.")
    if s.size < 2:
        raise ValueError(f"{owner}: needs at least 2 (score, accuracy) points; got {s.size}.")
    if np.all(s == s[0]):
        raise ValueError(f"{owner}: scores must not all be equal (a line through one score is "
                         f"undetermined); got {s.size} copies of {s[0]!r}.")
    return s, a


class ScoreMap:
    r"""Linear map from a label-free score to accuracy, fitted on a labelled meta-set.

    .. math:: \hat a(s) = \operatorname{clip}_{[0,1]}(\alpha s + \beta)

    Parameters
    ----------
    method : {"ols", "theil-sen"}, default "ols"
        ``"ols"``: least squares, :math:`\alpha = S_{xy}/S_{xx}`,
        :math:`\beta = \bar a - \alpha \bar s`. ``"theil-sen"``: :math:`\alpha` the median of
        the pairwise slopes :math:`(a_j - a_i)/(s_j - s_i)`, :math:`\beta` the median of
        :math:`a_j - \alpha s_j` (:func:`scipy.stats.theilslopes`); robust to outlying
        meta-sets, :math:`O(m^2)` in the meta-set size :math:`m`.

    Attributes
    ----------
    slope_, intercept_ : float
        :math:`\alpha`, :math:`\beta`.
    r2_ : float
        Coefficient of determination of the fit on the meta-set,
        :math:`R^2 = 1 - \sum_j (a_j - \alpha s_j - \beta)^2 / \sum_j (a_j - \bar a)^2` (unclipped
        line; 1.0 when every accuracy is equal and the line fits them exactly).
    n_points_ : int
        Meta-set size :math:`m`.

    Examples
    --------
    >>> m = ScoreMap().fit([0.1, 0.2, 0.3], [0.5, 0.6, 0.7])
    >>> round(m.slope_, 6), round(m.intercept_, 6), round(m.predict(0.25), 6)
    (1.0, 0.4, 0.65)
    """

    def __init__(self, method: MapMethod = "ols") -> None:
        check_in_choices(method, "method", "ScoreMap", ("ols", "theil-sen"))
        self.method = method

    @classmethod
    def from_line(cls, slope: float, intercept: float) -> "ScoreMap":
        """A map with a given line (no meta-set: ``r2_`` NaN, no prediction interval)."""
        for name, v in (("slope", slope), ("intercept", intercept)):
            ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            if not ok or not math.isfinite(float(v)):
                raise ValueError(f"ScoreMap.from_line: {name} must be a finite number; got {v!r}.")
        m = cls()
        m.slope_, m.intercept_ = float(slope), float(intercept)
        m.r2_, m.n_points_ = math.nan, 0
        return m

    def fit(self, scores: ArrayLike, accuracies: ArrayLike) -> "ScoreMap":
        """Fit the line on a meta-set of (score, accuracy) pairs.

        Parameters
        ----------
        scores, accuracies : array-like of shape (m,)
            One pair per labelled shifted set; ``m >= 2`` and the scores not all equal.

        Raises
        ------
        ValueError
            For fewer than 2 points, constant scores, NaN/inf, lengths that differ, non-1-D input.
        """
        s, a = _check_pairs(scores, accuracies, "ScoreMap.fit")
        if self.method == "ols":
            ds = s - s.mean()
            slope = float(np.dot(ds, a - a.mean()) / np.dot(ds, ds))
            intercept = float(a.mean() - slope * s.mean())
        else:
            from scipy.stats import theilslopes

            res = theilslopes(a, s)
            slope, intercept = float(res[0]), float(res[1])
        resid = a - (slope * s + intercept)
        sst = float(np.sum((a - a.mean()) ** 2))
        sse = float(np.sum(resid**2))
        self.slope_, self.intercept_ = slope, intercept
        self.r2_ = (1.0 if sse <= 1e-30 else 0.0) if sst == 0.0 else 1.0 - sse / sst
        self.n_points_ = int(s.size)
        self._s_mean, self._sxx = float(s.mean()), float(np.sum((s - s.mean()) ** 2))
        self._sigma2 = sse / (s.size - 2) if s.size > 2 else math.nan
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "slope_"):
            raise ValueError("This ScoreMap is not fitted yet; call fit(scores, accuracies) or "
                             "use ScoreMap.from_line(slope, intercept).")

    def predict_raw(self, score: float) -> float:
        r"""The unclipped line :math:`\alpha s + \beta`."""
        self._check_fitted()
        return self.slope_ * float(score) + self.intercept_

    def predict(self, score: float) -> float:
        r"""Accuracy for a score, :math:`\operatorname{clip}_{[0,1]}(\alpha s + \beta)`; NaN for a
        non-finite score."""
        value = self.predict_raw(score)
        return min(max(value, 0.0), 1.0) if math.isfinite(value) else math.nan

    def prediction_interval(
        self, score: float, level: float = DEFAULT_LEVEL
    ) -> tuple[float, float]:
        r"""Classical OLS prediction interval for the accuracy of a new set with this score.

        .. math:: \alpha s + \beta \pm t_{m-2,(1+\ell)/2}\,\hat\sigma
                  \sqrt{1 + \tfrac1m + \tfrac{(s - \bar s)^2}{S_{ss}}},
                  \qquad \hat\sigma^2 = \tfrac{1}{m-2}\sum_j r_j^2,

        clipped to [0, 1]. It assumes the new set is exchangeable with the meta-set (the same
        kind of shift) and Gaussian residuals. ``(nan, nan)`` for the Theil–Sen fit, a map from
        :meth:`from_line`, fewer than 3 points, or a non-finite score.
        """
        from scipy.stats import t as student_t

        self._check_fitted()
        level = check_level(level, "ScoreMap.prediction_interval")
        if self.method != "ols" or self.n_points_ < 3 or not math.isfinite(float(score)):
            return (math.nan, math.nan)
        m = self.n_points_
        half = float(student_t.ppf(0.5 + level / 2.0, m - 2)) * math.sqrt(
            self._sigma2 * (1.0 + 1.0 / m + (float(score) - self._s_mean) ** 2 / self._sxx)
        )
        centre = self.predict_raw(score)
        return (min(max(centre - half, 0.0), 1.0), min(max(centre + half, 0.0), 1.0))

    def __repr__(self) -> str:
        if not hasattr(self, "slope_"):
            return f"ScoreMap(method={self.method!r})"
        return (f"ScoreMap(method={self.method!r}, slope={self.slope_:.6g}, "
                f"intercept={self.intercept_:.6g}, r2={self.r2_:.4g}, n={self.n_points_})")


def leave_one_group_out(
    scores: ArrayLike, accuracies: ArrayLike, groups: ArrayLike, *, method: MapMethod = "ols"
) -> NDArray[np.float64]:
    r"""Out-of-group predictions: each point predicted by a map fitted on the other groups.

    For every group :math:`g`, a :class:`ScoreMap` is fitted on the points not in :math:`g` and
    predicts (clipped) the points in :math:`g`, e.g. "within the corruption family, leave one
    corruption type out".

    Parameters
    ----------
    scores, accuracies : array-like of shape (m,)
    groups : array-like of shape (m,)
        Group label of each point (any hashable values; at least 2 distinct).
    method : {"ols", "theil-sen"}, default "ols"

    Returns
    -------
    ndarray of shape (m,)
        Prediction for each point, in input order.

    Raises
    ------
    ValueError
        As :meth:`ScoreMap.fit`; also for ``groups`` of another length or with a single group,
        or when the points left for one fold do not determine a line (the message names the
        group).
    """
    s, a = _check_pairs(scores, accuracies, "leave_one_group_out")
    g = np.asarray(groups)
    if g.ndim != 1 or g.shape[0] != s.size:
        raise ValueError(f"leave_one_group_out: groups must be 1-D with one label per point "
                         f"({s.size}); got shape {g.shape}.")
    labels = list(dict.fromkeys(g.tolist()))
    if len(labels) < 2:
        raise ValueError(f"leave_one_group_out: needs at least 2 distinct groups; got "
                         f"{len(labels)} ({labels!r}).")
    out = np.empty(s.size, dtype=np.float64)
    for label in labels:
        held = g == label
        try:
            fold = ScoreMap(method).fit(s[~held], a[~held])
        except ValueError as exc:
            raise ValueError(f"leave_one_group_out: leaving out group {label!r}: {exc}") from None
        out[held] = [fold.predict(v) for v in s[held]]
    return out


def _as_score_map(value: Any, owner: str) -> ScoreMap | None:
    """``score_map`` parameter → a fitted :class:`ScoreMap` or None (validated)."""
    if value is None:
        return None
    if isinstance(value, ScoreMap):
        value._check_fitted()
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2:
        try:
            return ScoreMap.from_line(value[0], value[1])
        except ValueError:
            pass
    raise ValueError(f"The 'score_map' parameter of {owner} must be None, a fitted ScoreMap or "
                     f"a (slope, intercept) pair of finite numbers; got {value!r}.")


def _check_score_map(value: Any, owner: str) -> None:
    _as_score_map(value, owner)


#: The ``score_map`` parameter every score estimator declares.
SCORE_MAP = Param(
    "score_map", "any", None, "Map from the score to accuracy: a fitted `ScoreMap` or a "
    "(slope, intercept) pair; None: `accuracy` is NaN.", check=_check_score_map,
    accepts="`ScoreMap` or (slope, intercept) or `None`",
)


class ScoreEstimator(Estimator):
    r"""Base of estimators that compute a label-free *score*, not an accuracy.

    ``estimate()`` always returns the score in ``diagnostics["score"]``. ``accuracy`` is
    ``score_map.predict(score)`` (clipped to [0, 1]) when the ``score_map`` parameter is given
    (a fitted :class:`ScoreMap` or a ``(slope, intercept)`` pair) and NaN otherwise. The interval
    is the map's OLS prediction interval (:meth:`ScoreMap.prediction_interval`) where it has one,
    else ``(nan, nan)``. ``fit`` only validates and records the class count; the validation set
    is not used by the score (the map carries all that is learnt from labels).

    Code that runs "every estimator" skips these by default
    (:func:`estimators.available_estimators` lists them only with ``include_scores=True``).
    """

    #: A score needs a map to become an accuracy; registries skip it by default.
    needs_score_map: ClassVar[bool] = True
    has_per_sample: ClassVar[bool] = False

    score_map: Any

    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        self.map_ = _as_score_map(self.score_map, type(self).__name__)

    def _estimate(
        self, target_logits: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        score, extra = self._score(target_logits)
        accuracy = math.nan if self.map_ is None else self.map_.predict(score)
        return accuracy, None, {"score": float(score), **extra}

    def _interval(self, accuracy: float, per_sample: Any, n_target: int,
                  level: float) -> tuple[float, float]:
        # The sampling interval of the base class does not apply to a score; with a map,
        # estimate() puts the map's prediction interval in place of this.
        return (math.nan, math.nan)

    def estimate(
        self,
        target_logits: Any,
        *,
        target_features: Any = None,
        peer_target_logits: Any = None,
        level: float = DEFAULT_LEVEL,
        band: bool = False,
    ) -> AccuracyEstimate:
        """Score the target set (see the class docstring); ``accuracy`` needs ``score_map``."""
        result = super().estimate(target_logits, target_features=target_features,
                                  peer_target_logits=peer_target_logits, level=level)
        if self.map_ is not None:
            interval = self.map_.prediction_interval(result.diagnostics["score"], result.level)
            result = result.replace(interval=interval)  # a pending band stays pending
        if band:
            result.shift_interval  # noqa: B018  (computed now, kept by the result)
        return result

    def _residual_variance(self, logits: NDArray[np.float64], labels: NDArray[np.int64]) -> float:
        return math.nan

    @abstractmethod
    def _score(self, logits: NDArray[np.float64]) -> tuple[float, dict[str, Any]]:
        """Return ``(score, extra diagnostics)`` for validated logits."""
