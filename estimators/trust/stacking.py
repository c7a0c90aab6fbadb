r"""The combination behind ``auto``: a ridge correction of a robust base method.

A free combination of the methods' estimates overfits the few datasets a benchmark has (on
this project's benchmark, ridge and boosting on the eight estimates were worse than the best
single method on five of six held-out datasets). The model here is shrunk toward one robust
method (the first of :data:`BASE_PREFERENCE` among the members, ALSA-E by default) and only
moves from it as far as the label-free signals justify:

.. math::

    \hat a_{auto} = \mathrm{clip}\big(\hat a_b + \beta^\top z,\ 0,\ 1\big), \qquad
    z = \big(\hat a_j - \hat a_b\big)_{j \ne b} \oplus g(x)

with :math:`\hat a_b` the base estimate, :math:`\hat a_j` the other members' and :math:`g(x)`
the signals of :data:`STACK_SIGNALS` (:mod:`estimators.trust.shift_signals`). :math:`\beta` is a
ridge regression of :math:`a - \hat a_b` on :math:`z`, every calibration dataset weighted
equally,

.. math:: \beta = (Z^\top W Z + \lambda\, \mathrm{tr}(W)\, I)^{-1} Z^\top W (a - \hat a_b),

and :math:`\lambda` is chosen from :data:`LAMBDAS` by leave-one-dataset-out *inside* the
calibration rows (the mean over the left-out datasets of how far the combination is above
that dataset's best member), so that the choice never sees a dataset it is evaluated on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .shift_band import group_weights

__all__ = ["BASE_PREFERENCE", "LAMBDAS", "STACK_SIGNALS", "StackModel", "fit_correction",
           "fit_stack",
           "stack_features"]

#: The base method: the first of these among the members.
BASE_PREFERENCE: tuple[str, ...] = ("alsa-e", "alsa-g", "atc-mc", "doc", "ac", "im", "atc-ne",
                                    "cot")
#: Signals the correction reads: ``confidence_drop``, ``panel_spread``, the base's predicted
#: drop ``val_accuracy - base``, ``entropy_rise``, ``prediction_shift``,
#: ``log1p(max(label_shift_z, 0)) / 10`` and ``1 / sqrt(n_target)``.
STACK_SIGNALS: tuple[str, ...] = ("confidence_drop", "panel_spread", "base_drop",
                                  "entropy_rise", "prediction_shift", "label_shift_z",
                                  "n_target")
#: Ridge penalties tried (relative to the total weight).
LAMBDAS: tuple[float, ...] = (1e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0, 10.0)


def base_method(members: Sequence[str]) -> str:
    """The first of :data:`BASE_PREFERENCE` among ``members`` (else the first member)."""
    for name in BASE_PREFERENCE:
        if name in members:
            return name
    return members[0]


def stack_features(
    signals: Mapping[str, Any], estimates: Mapping[str, Any], members: Sequence[str]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The correction's features :math:`z` and the base estimate, for one or many rows.

    Parameters
    ----------
    signals : Mapping[str, float or array]
        Signal values (:meth:`~estimators.trust.shift_signals.SignalValues.to_record` keys).
    estimates : Mapping[str, float or array]
        Each member's estimate.
    members : sequence of str
        The members, in a fixed order.

    Returns
    -------
    z : ndarray of shape (n, len(members) - 1 + len(STACK_SIGNALS))
    base : ndarray of shape (n,)
    """
    def col(value: Any) -> NDArray[np.float64]:
        return np.atleast_1d(np.asarray(value, dtype=np.float64))

    b = base_method(members)
    base = col(estimates[b])
    others = [col(estimates[m]) - base for m in members if m != b]
    z = np.clip(col(signals["label_shift_z"]), 0.0, None)
    columns = others + [
        col(signals["confidence_drop"]),
        col(signals["panel_spread"]),
        col(signals["val_accuracy"]) - base,
        col(signals["entropy_rise"]),
        col(signals["prediction_shift"]),
        np.log1p(z) / 10.0,
        1.0 / np.sqrt(np.maximum(col(signals["n_target"]), 1.0)),
    ]
    out = np.column_stack(columns)
    return np.where(np.isfinite(out), out, 0.0), base


@dataclass(frozen=True)
class StackModel:
    """A fitted combination (:func:`fit_stack`).

    Attributes
    ----------
    members : tuple of str
    base : str
    coef : tuple of float
        :math:`\\beta` over :func:`stack_features`' columns.
    penalty : float
        The :math:`\\lambda` chosen.
    n_rows, n_groups : int
    """

    members: tuple[str, ...]
    base: str
    coef: tuple[float, ...]
    penalty: float
    n_rows: int
    n_groups: int

    def predict(
        self, signals: Mapping[str, Any], estimates: Mapping[str, Any]
    ) -> NDArray[np.float64]:
        """:math:`\\mathrm{clip}(\\hat a_b + \\beta^\\top z, 0, 1)` for each row."""
        z, base = stack_features(signals, estimates, self.members)
        out: NDArray[np.float64] = np.clip(base + z @ np.asarray(self.coef), 0.0, 1.0)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"members": list(self.members), "base": self.base, "coef": list(self.coef),
                "penalty": self.penalty, "n_rows": self.n_rows, "n_groups": self.n_groups}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StackModel:
        members = tuple(str(m) for m in data["members"])
        coef = tuple(float(c) for c in data["coef"])
        expected = len(members) - 1 + len(STACK_SIGNALS)
        if len(coef) != expected:
            raise ValueError(
                f"stack model for {members} must hold {expected} coefficients; got {len(coef)}."
            )
        return cls(members, str(data["base"]), coef, float(data["penalty"]),
                   int(data["n_rows"]), int(data["n_groups"]))


def _ridge(z: NDArray[np.float64], target: NDArray[np.float64], weights: NDArray[np.float64],
           penalty: float) -> NDArray[np.float64]:
    gram = (z.T * weights) @ z + penalty * float(weights.sum()) * np.eye(z.shape[1])
    coef: NDArray[np.float64] = np.asarray(np.linalg.solve(gram, (z.T * weights) @ target),
                                           dtype=np.float64)
    return coef


def _regret(pred: NDArray[np.float64], truth: NDArray[np.float64],
            estimates: Mapping[str, NDArray[np.float64]], members: Sequence[str]) -> float:
    """How far the combination's MAE is above the best member's on these rows (>= 0)."""
    best = min(float(np.mean(np.abs(estimates[m] - truth))) for m in members)
    return max(float(np.mean(np.abs(pred - truth))) - best, 0.0)


def fit_correction(
    z: NDArray[np.float64],
    base: NDArray[np.float64],
    truth: NDArray[np.float64],
    groups: NDArray[Any],
    estimates: Mapping[str, Any],
    members: Sequence[str],
    *,
    lambdas: Sequence[float] = LAMBDAS,
) -> tuple[NDArray[np.float64], float]:
    r""":math:`\beta` and :math:`\lambda` of the ridge correction for given features ``z``
    (:func:`fit_stack`'s core; ``benchmarks/auto_feature_signals.py`` appends columns to
    :func:`stack_features`' and calls it).

    :math:`\lambda` minimises the mean over the datasets of ``groups``, each left out in turn,
    of how far the corrected estimate's MAE is above the best member's; :math:`\beta` is then
    fit on every row.

    Returns
    -------
    coef : ndarray of shape (z.shape[1],)
    penalty : float
    """
    g = np.asarray(groups)
    est: dict[str, NDArray[np.float64]] = {
        m: np.atleast_1d(np.asarray(estimates[m], dtype=np.float64)) for m in members}
    weights = group_weights(g)
    target = truth - base
    scores = []
    for lam in lambdas:
        regrets = []
        for name in np.unique(g):
            held = g == name
            coef = _ridge(z[~held], target[~held], weights[~held], lam)
            pred = np.clip(base[held] + z[held] @ coef, 0.0, 1.0)
            regrets.append(_regret(pred, truth[held], {m: v[held] for m, v in est.items()},
                                   members))
        scores.append(float(np.mean(regrets)))
    penalty = float(lambdas[int(np.argmin(scores))])
    return _ridge(z, target, weights, penalty), penalty


def fit_stack(
    signals: Mapping[str, Any],
    estimates: Mapping[str, Any],
    truth: Any,
    groups: Any,
    members: Sequence[str],
    *,
    lambdas: Sequence[float] = LAMBDAS,
) -> StackModel:
    """Fit the combination on calibration rows, choosing :math:`\\lambda` by inner
    leave-one-dataset-out.

    Parameters
    ----------
    signals : Mapping[str, array]
    estimates : Mapping[str, array]
        Each member's estimates, rows aligned with ``signals``.
    truth : array of shape (n,)
    groups : array of shape (n,)
        Dataset of each row (at least 2).
    members : sequence of str
    lambdas : sequence of float, default :data:`LAMBDAS`

    Returns
    -------
    StackModel
    """
    members = tuple(members)
    y = np.asarray(truth, dtype=np.float64)
    g = np.asarray(groups)
    names = np.unique(g)
    if len(names) < 2:
        raise ValueError(
            f"The 'groups' argument of fit_stack must name at least 2 datasets (the penalty is "
            f"chosen leave-one-dataset-out); got {len(names)}."
        )
    z, base = stack_features(signals, estimates, members)
    coef, penalty = fit_correction(z, base, y, g, estimates, members, lambdas=lambdas)
    return StackModel(members, base_method(members), tuple(coef.tolist()), penalty, int(len(y)),
                      int(len(names)))
