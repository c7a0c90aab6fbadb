r"""Two more model classes for ``auto``: a gated selector and shrinkage toward a robust default.

Both are compared with the ridge correction of :mod:`estimators.trust.stacking` and with ALSA-E
alone by grouped cross-validation on the development groups (``benchmarks/trust_protocol.py``,
``docs/BENCHMARK.md``); neither sees a sealed group (:mod:`estimators.trust.sealed`).

**Gated selector** (algorithm selection, Rice 1976; per-instance selection by predicted
performance, as in SATzilla, Xu et al. 2008). For every candidate method :math:`m` a ridge
regression predicts its absolute error from label-free meta-features :math:`x`
(:data:`META_FEATURES`, standardised):

.. math:: \widehat{|e_m|}(x) = w_m^\top [1, x], \qquad
          w_m = \arg\min_w \sum_i \omega_i (|e_{m,i}| - w^\top [1, x_i])^2 + \alpha \|w_{1:}\|^2

with :math:`\omega_i` one over the size of the row's group (every group weighs the same). The
selector keeps the base method :math:`b` (ALSA-E) unless another candidate's predicted error is
lower by more than a margin :math:`\mu`:

.. math:: \hat m(x) = \begin{cases} m^* & \widehat{|e_b|}(x) - \widehat{|e_{m^*}|}(x) > \mu \\
          b & \text{otherwise} \end{cases}, \qquad m^* = \arg\min_m \widehat{|e_m|}(x).

:math:`\alpha` and :math:`\mu` are chosen by leave-one-group-out inside the rows it is fit on.
The meta-features read only the signals (:class:`~estimators.trust.shift_signals.ShiftSignals`,
whose panel is AC, DoC, ATC-MC, ATC-NE and IM), so at estimate time ``auto`` runs the signals,
then *only the method selected*.

**Shrinkage toward a robust default**: the base estimate moved toward the members' median by a
weight :math:`w \in [0, 1]` chosen by leave-one-group-out,

.. math:: \hat a = \hat a_b + w\,(\mathrm{median}_m \hat a_m - \hat a_b).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from .shift_band import group_weights

__all__ = ["ALPHAS", "MARGINS", "META_FEATURES", "SHRINK_WEIGHTS", "SelectorModel",
           "ShrinkModel", "auto_model_from_dict", "fit_selector", "fit_shrink", "meta_features"]

#: The selector's label-free meta-features: ``log(n_classes)``, validation accuracy and
#: over-confidence, ``log(n_target)``, confidence drop, entropy rise, prediction shift,
#: ``log1p(max(label_shift_z, 0))``, the panel's spread and standard deviation, and the panel's
#: median predicted drop ``val_accuracy - median(panel)``.
META_FEATURES: tuple[str, ...] = (
    "log_classes", "val_accuracy", "val_overconfidence", "log_target", "confidence_drop",
    "entropy_rise", "prediction_shift", "label_shift_z", "panel_spread", "panel_std",
    "panel_drop",
)
#: Ridge penalties the selector tries (on standardised features, relative to the total weight).
ALPHAS: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)
#: Margins (accuracy, not pp) by which another method must beat the base to be selected.
MARGINS: tuple[float, ...] = (0.0, 0.0025, 0.005, 0.01, 0.02, 0.04, float("inf"))
#: Shrinkage weights tried.
SHRINK_WEIGHTS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))
PANEL_KEYS: tuple[str, ...] = ("panel_ac", "panel_doc", "panel_atc-mc", "panel_atc-ne",
                               "panel_im")


def _col(signals: Mapping[str, Any], name: str) -> NDArray[np.float64]:
    return np.atleast_1d(np.asarray(signals[name], dtype=np.float64))


def meta_features(signals: Mapping[str, Any]) -> NDArray[np.float64]:
    """The :data:`META_FEATURES` of one or many rows (NaN where a signal is NaN or missing).

    Parameters
    ----------
    signals : Mapping[str, float or array]
        :meth:`~estimators.trust.shift_signals.SignalValues.to_record` keys, plus
        ``val_overconfidence`` (mean maximum softmax probability minus accuracy on validation).

    Returns
    -------
    ndarray of shape (n, len(META_FEATURES))
    """
    n = len(_col(signals, "val_accuracy"))

    def get(name: str) -> NDArray[np.float64]:
        return _col(signals, name) if name in signals else np.full(n, np.nan)

    panel = np.column_stack([get(k) for k in PANEL_KEYS])
    with np.errstate(invalid="ignore", divide="ignore"):
        median = np.median(panel, axis=1)
        z = np.clip(get("label_shift_z"), 0.0, None)
        out = np.column_stack([
            np.log(np.maximum(get("n_classes"), 2.0)),
            get("val_accuracy"),
            get("val_overconfidence"),
            np.log(np.maximum(get("n_target"), 1.0)),
            get("confidence_drop"),
            get("entropy_rise"),
            get("prediction_shift"),
            np.log1p(z),
            get("panel_spread"),
            get("panel_std"),
            get("val_accuracy") - median,
        ])
    return out


def _weighted_ridge(x: NDArray[np.float64], y: NDArray[np.float64], w: NDArray[np.float64],
                    alpha: float) -> NDArray[np.float64]:
    """Ridge of ``y`` on ``[1, x]`` with row weights ``w`` (the intercept not penalised)."""
    design = np.column_stack([np.ones(len(x)), x])
    pen = alpha * float(w.sum()) * np.eye(design.shape[1])
    pen[0, 0] = 0.0
    gram = (design.T * w) @ design + pen
    coef: NDArray[np.float64] = np.asarray(np.linalg.solve(gram, (design.T * w) @ y),
                                           dtype=np.float64)
    return coef


def _group_mae(pred: NDArray[np.float64], truth: NDArray[np.float64],
               groups: NDArray[Any]) -> float:
    """Mean over groups of the group's mean absolute error."""
    err = np.abs(pred - truth)
    return float(np.mean([err[groups == g].mean() for g in np.unique(groups)]))


@dataclass(frozen=True)
class SelectorModel:
    """A fitted gated selector (:func:`fit_selector`).

    Attributes
    ----------
    candidates : tuple of str
        Methods it may select; ``candidates[0]`` is the base.
    mean, scale : tuple of float
        Standardisation of :data:`META_FEATURES` (NaN features are set to the mean).
    coef : tuple of tuple of float
        Per candidate, the error model's ``[intercept, weights...]``.
    alpha, margin : float
    n_rows, n_groups : int
    """

    candidates: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[tuple[float, ...], ...]
    alpha: float
    margin: float
    n_rows: int
    n_groups: int

    @property
    def base(self) -> str:
        return self.candidates[0]

    def _design(self, signals: Mapping[str, Any]) -> NDArray[np.float64]:
        x = meta_features(signals)
        mean, scale = np.asarray(self.mean), np.asarray(self.scale)
        x = np.where(np.isfinite(x), x, mean)
        return np.column_stack([np.ones(len(x)), (x - mean) / scale])

    def predicted_errors(self, signals: Mapping[str, Any]) -> NDArray[np.float64]:
        """Predicted absolute error of every candidate, shape (n, len(candidates))."""
        design = self._design(signals)
        result: NDArray[np.float64] = design @ np.asarray(self.coef).T
        return result

    def choose(self, signals: Mapping[str, Any]) -> list[str]:
        """The method selected for each row (from the signals alone)."""
        err = self.predicted_errors(signals)
        best = err.argmin(axis=1)
        gain = err[:, 0] - err[np.arange(len(err)), best]
        pick = np.where(gain > self.margin, best, 0)
        return [self.candidates[i] for i in pick]

    def predict(self, signals: Mapping[str, Any],
                estimates: Mapping[str, Any]) -> NDArray[np.float64]:
        """The selected method's estimate for each row (``estimates`` must hold, for each row,
        at least the method chosen)."""
        chosen = self.choose(signals)
        out = np.empty(len(chosen))
        for i, name in enumerate(chosen):
            out[i] = float(np.atleast_1d(np.asarray(estimates[name], dtype=np.float64))[i])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "selector", "candidates": list(self.candidates),
                "mean": list(self.mean), "scale": list(self.scale),
                "coef": [list(c) for c in self.coef], "alpha": self.alpha,
                "margin": self.margin if np.isfinite(self.margin) else "inf",
                "meta_features": list(META_FEATURES), "n_rows": self.n_rows,
                "n_groups": self.n_groups}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SelectorModel:
        if list(data.get("meta_features", [])) != list(META_FEATURES):
            raise ValueError(f"selector model was fit on meta-features "
                             f"{data.get('meta_features')}; this code reads {list(META_FEATURES)}.")
        k = len(META_FEATURES) + 1
        coef = tuple(tuple(float(v) for v in row) for row in data["coef"])
        if any(len(r) != k for r in coef) or len(coef) != len(data["candidates"]):
            raise ValueError(f"selector model must hold {k} coefficients per candidate.")
        return cls(tuple(str(c) for c in data["candidates"]),
                   tuple(float(v) for v in data["mean"]), tuple(float(v) for v in data["scale"]),
                   coef, float(data["alpha"]), float(data["margin"]), int(data["n_rows"]),
                   int(data["n_groups"]))


def _fit_errors(x: NDArray[np.float64], abs_err: NDArray[np.float64], w: NDArray[np.float64],
                alpha: float) -> NDArray[np.float64]:
    return np.stack([_weighted_ridge(x, abs_err[:, j], w, alpha)
                     for j in range(abs_err.shape[1])])


def _standardise(x: NDArray[np.float64], w: NDArray[np.float64]
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    mean = np.array([np.average(c[np.isfinite(c)], weights=w[np.isfinite(c)])
                     if np.isfinite(c).any() else 0.0 for c in x.T])
    filled = np.where(np.isfinite(x), x, mean)
    scale = np.sqrt(np.average((filled - mean) ** 2, axis=0, weights=w))
    scale = np.where(scale > 1e-12, scale, 1.0)
    return (filled - mean) / scale, mean, scale


def _pick(err: NDArray[np.float64], margin: float) -> NDArray[np.int64]:
    best = err.argmin(axis=1)
    gain = err[:, 0] - err[np.arange(len(err)), best]
    out: NDArray[np.int64] = np.where(gain > margin, best, 0)
    return out


def fit_selector(
    signals: Mapping[str, Any],
    estimates: Mapping[str, Any],
    truth: Any,
    groups: Any,
    candidates: Sequence[str],
    *,
    alphas: Sequence[float] = ALPHAS,
    margins: Sequence[float] = MARGINS,
) -> SelectorModel:
    """Fit the gated selector; ``alpha`` and ``margin`` by inner leave-one-group-out.

    Parameters
    ----------
    signals : Mapping[str, array]
    estimates : Mapping[str, array]
        Each candidate's estimate, rows aligned with ``signals`` (finite).
    truth : array of shape (n,)
    groups : array of shape (n,)
        Source group of each row (at least 2).
    candidates : sequence of str
        The base first.

    Raises
    ------
    ValueError
        If fewer than 2 groups or a candidate has no estimates.
    """
    cands = tuple(candidates)
    y = np.asarray(truth, dtype=np.float64)
    g = np.asarray(groups)
    names = np.unique(g)
    if len(names) < 2:
        raise ValueError(f"The 'groups' argument of fit_selector must name at least 2 groups "
                         f"(alpha and margin are chosen leave-one-group-out); got {len(names)}.")
    missing = [c for c in cands if c not in estimates]
    if missing:
        raise ValueError(f"fit_selector: no estimates for candidate(s) {', '.join(missing)}.")
    est = np.column_stack([np.asarray(estimates[c], dtype=np.float64) for c in cands])
    abs_err = np.abs(est - y[:, None])
    w = group_weights(g)
    raw = meta_features(signals)
    scores = np.zeros((len(alphas), len(margins)))
    for a, alpha in enumerate(alphas):
        pred_err = np.empty_like(abs_err)
        for name in names:
            held = g == name
            x_fit, mean, scale = _standardise(raw[~held], w[~held])
            coef = _fit_errors(x_fit, abs_err[~held], w[~held], alpha)
            x_held = (np.where(np.isfinite(raw[held]), raw[held], mean) - mean) / scale
            pred_err[held] = np.column_stack([np.ones(held.sum()), x_held]) @ coef.T
        for b, margin in enumerate(margins):
            pick = _pick(pred_err, margin)
            scores[a, b] = _group_mae(est[np.arange(len(y)), pick], y, g)
    best_a, best_b = (int(i) for i in np.unravel_index(int(np.argmin(scores)), scores.shape))
    x_all, mean, scale = _standardise(raw, w)
    coef = _fit_errors(x_all, abs_err, w, float(alphas[best_a]))
    return SelectorModel(cands, tuple(mean.tolist()), tuple(scale.tolist()),
                         tuple(tuple(r) for r in coef.tolist()), float(alphas[best_a]),
                         float(margins[best_b]), int(len(y)), int(len(names)))


@dataclass(frozen=True)
class ShrinkModel:
    r"""The base moved toward the members' median by ``weight`` (:func:`fit_shrink`).

    .. math:: \hat a = \hat a_{base} + w\,(\operatorname{median}_m \hat a_m - \hat a_{base})

    It reads no signal (:attr:`reads_signals` is False): ``auto`` needs only its members.
    """

    reads_signals: ClassVar[bool] = False

    members: tuple[str, ...]
    base: str
    weight: float
    n_rows: int
    n_groups: int

    def predict(self, signals: Mapping[str, Any],
                estimates: Mapping[str, Any]) -> NDArray[np.float64]:
        est = np.column_stack([np.atleast_1d(np.asarray(estimates[m], dtype=np.float64))
                               for m in self.members])
        base = np.atleast_1d(np.asarray(estimates[self.base], dtype=np.float64))
        out: NDArray[np.float64] = base + self.weight * (np.median(est, axis=1) - base)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "shrink", "members": list(self.members), "base": self.base,
                "weight": self.weight, "n_rows": self.n_rows, "n_groups": self.n_groups}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShrinkModel:
        members = tuple(str(m) for m in data["members"])
        weight = float(data["weight"])
        if str(data["base"]) not in members or not 0.0 <= weight <= 1.0:
            raise ValueError(f"shrink model must name its base among its members and a weight "
                             f"in [0, 1]; got base {data['base']!r}, weight {weight}.")
        return cls(members, str(data["base"]), weight, int(data["n_rows"]),
                   int(data["n_groups"]))


def auto_model_from_dict(data: Mapping[str, Any]) -> ShrinkModel | SelectorModel:
    """The model of ``auto`` recorded in a calibration's ``source["auto_model"]``
    (``{"kind": "shrink" | "selector", ...}``, written by ``alsa-bench calibrate``).

    ``auto`` must run: a :class:`ShrinkModel`'s ``members`` (all of them, no signal needed for
    the estimate); a :class:`SelectorModel`'s signals, then only ``choose()``'s method.

    Raises
    ------
    ValueError
        If the kind is unknown or the record is damaged.
    """
    kind = data.get("kind") if isinstance(data, Mapping) else None
    try:
        if kind == "shrink":
            return ShrinkModel.from_dict(data)
        if kind == "selector":
            return SelectorModel.from_dict(data)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"auto's model record is damaged ({exc}); refit it with `alsa-bench "
                         f"calibrate --db PATH`.") from None
    raise ValueError(f"auto's model kind must be 'shrink' or 'selector'; got {kind!r}.")


def fit_shrink(
    estimates: Mapping[str, Any],
    truth: Any,
    groups: Any,
    members: Sequence[str],
    base: str,
    *,
    weights: Sequence[float] = SHRINK_WEIGHTS,
) -> ShrinkModel:
    """Fit the shrinkage weight: the one of ``weights`` with the lowest group-mean MAE on the
    rows given (a single parameter; the outer grouped cross-validation judges it on groups it
    has not seen).

    Raises
    ------
    ValueError
        If ``base`` is not among ``members``.
    """
    if base not in members:
        raise ValueError(f"fit_shrink: the base {base!r} must be one of the members "
                         f"{', '.join(members)}.")
    y = np.asarray(truth, dtype=np.float64)
    g = np.asarray(groups)
    probe = ShrinkModel(tuple(members), base, 0.0, int(len(y)), int(len(np.unique(g))))
    scores = [_group_mae(ShrinkModel(probe.members, base, float(wt), 0, 0).predict({}, estimates),
                         y, g) for wt in weights]
    return ShrinkModel(probe.members, base, float(weights[int(np.argmin(scores))]), probe.n_rows,
                       probe.n_groups)
