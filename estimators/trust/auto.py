r"""``auto``: the label-free methods combined by a model learned from a benchmark's shifts.

No single method is safe to pick: on this project's benchmark the best method changes from
dataset to dataset, and where the methods disagree the error is larger. ``auto`` runs the
label-free methods (``methods``; all eight by default), measures the label-free signals of
:mod:`estimators.trust.shift_signals`, and returns the combination of :mod:`estimators.trust.stacking`
learned on the benchmark: a ridge correction of ALSA-E that only moves from it as far as the
signals justify. Its ``shift_interval`` is its own band, fit on its out-of-fold errors.

The combination and the bands live in the active calibration
(:func:`~estimators.trust.calibration_artifact.active_calibration`): the shipped one, fit from ``make bench``'s
database, or the user's own (``alsa-bench calibrate --db PATH``). ``auto`` is judged
leave-one-dataset-out (``docs/BENCHMARK.md``, "Which estimate to trust"); its estimate on a
split of the very benchmark it was fit on is in-sample, which is why the benchmark's method
list leaves it out (``opt_in``) and the report measures it out of fold.

Cost: the members' fits and estimates plus the signals (a temperature fit, five softmax
estimates and an EM label marginal), ``docs/PERFORMANCE.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core._validation import check_val_inputs
from ..core.base import DEFAULT_LEVEL, AccuracyEstimate, Estimator
from .calibration_artifact import AUTO_MEMBER_SETS, active_calibration, auto_key
from ..core.params import Param, inert_parameters
from ..core.registry import ESTIMATORS, get_estimator, register
from .attach_band import fitted_signals

__all__ = ["AUTO_METHODS", "Auto", "auto_from_estimates"]

#: The label-free methods ``auto`` may combine.
AUTO_METHODS: tuple[str, ...] = AUTO_MEMBER_SETS[0]


def _check_methods(value: Any, owner: str) -> None:
    if value is None:
        return
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ValueError(
            f"The 'methods' parameter of {owner} must be a list of registry keys among "
            f"{', '.join(AUTO_METHODS)} (or None for all); got {value!r}."
        )
    unknown = [v for v in value if v not in AUTO_METHODS]
    if unknown or len(set(value)) != len(value) or not value:
        raise ValueError(
            f"The 'methods' parameter of {owner} must list distinct keys among "
            f"{', '.join(AUTO_METHODS)}; got {list(value)!r}."
        )


@register("auto")
class Auto(Estimator):
    """Stacked label-free methods with a shift-aware band (:mod:`estimators.trust.stacking`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 4, 2000)
    >>> logits = rng.normal(size=(2000, 4)) + 2.5 * np.eye(4)[labels]
    >>> est = Auto(methods=["ac", "doc", "atc-mc", "atc-ne", "im"]).fit(logits, labels)
    >>> result = est.estimate(logits[:500] + rng.normal(scale=1.5, size=(500, 4)))
    >>> 0.0 <= result.accuracy <= 1.0, result.shift_interval[0] <= result.accuracy
    (True, True)
    """

    has_per_sample = False
    #: Left out of the benchmark's methods: on the benchmark it was fit on, its estimate is
    #: in-sample; the report measures it leave-one-dataset-out instead.
    opt_in = True

    PARAMS = (
        Param("methods", "any", None, "Members to run and combine: a member set the active "
              "calibration was fit for (all eight label-free methods, the seven without COT, "
              "or the five softmax ones); None for all eight.", check=_check_methods,
              accepts="list of registry keys or `None`"),
        Param("seed", "int", 0, "Seed of the members that draw at random (ALSA's anchors).",
              low=0),
    )

    def members(self) -> tuple[str, ...]:
        """The member keys, in the calibration's order."""
        if self.methods is None:
            return AUTO_METHODS
        chosen = set(self.methods)
        return tuple(m for m in AUTO_METHODS if m in chosen)

    def used_estimators(self) -> tuple[str, ...]:
        """The members (:meth:`members`)."""
        return self.members()

    def _member(self, name: str, n_val: int) -> Estimator:
        cls = ESTIMATORS[name]
        params: dict[str, Any] = {}
        if any(p.name == "seed" for p in cls.PARAMS):
            values = {p.name: p.default for p in cls.PARAMS} | {"seed": int(self.seed)}
            if not inert_parameters(cls.PARAMS, values, n_val):
                params["seed"] = int(self.seed)
        return get_estimator(name, **params)

    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        calibration = active_calibration()
        if calibration is None:
            raise ValueError(
                "Auto needs a calibration and none is installed: the package's "
                "estimators/trust/data/calibration.json is missing; fit one with `alsa-bench "
                "calibrate --db PATH` and name it in ALSA_BENCH_CALIBRATION."
            )
        self.stack_ = calibration.stack_for(self.members())
        n = int(val_logits.shape[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.members_ = {m: self._member(m, n).fit(val_logits, val_labels)
                             for m in self.members()}
        self.signals_ = fitted_signals(val_logits, val_labels)

    def _estimate(
        self, target_logits: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        estimates: dict[str, float] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, member in self.members_.items():
                logits: Any = (target_logits.astype(np.float32) if member.accepts_float32
                               else target_logits)
                estimates[name] = float(member._estimate(logits)[0])
        signals = self.signals_.transform(target_logits, estimates=estimates).to_record()
        accuracy = float(self.stack_.predict(signals, estimates)[0])
        return accuracy, None, {
            "members": estimates,
            "base": self.stack_.base,
            "signals": signals,
            "penalty": self.stack_.penalty,
        }

    def _shift_key(self) -> str:
        return auto_key(self.stack_.members)


def auto_from_estimates(
    results: Mapping[str, AccuracyEstimate],
    val_logits: Any,
    val_labels: Any,
    target_logits: Any,
    *,
    level: float = DEFAULT_LEVEL,
) -> AccuracyEstimate | None:
    """``auto``'s estimate from member estimates a caller already has (no member is rerun).

    The CLI runs every method anyway; this gives the same number as ``Auto(methods=...)`` over
    the largest calibrated member set that ``results`` covers (with default parameters), or
    None when the calibration has no such set.

    Parameters
    ----------
    results : Mapping[str, AccuracyEstimate]
        Estimates by registry key, from estimators with default parameters.
    val_logits, val_labels, target_logits : array-like
    level : float, default 0.90

    Returns
    -------
    AccuracyEstimate or None
    """
    import math

    calibration = active_calibration()
    if calibration is None:
        return None
    have = {k for k, r in results.items() if math.isfinite(r.accuracy)}
    members = next((tuple(s) for s in AUTO_MEMBER_SETS
                    if set(s) <= have and auto_key(s) in calibration.stacks), None)
    if members is None:
        return None
    stack = calibration.stack_for(members)
    estimates = {m: float(results[m].accuracy) for m in members}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        val_x, val_y = check_val_inputs(val_logits, val_labels)
        signals = fitted_signals(val_x, val_y).transform(
            target_logits, estimates=estimates).to_record()
    accuracy = float(stack.predict(signals, estimates)[0])
    base = results[stack.base]
    band = calibration.bands.get(auto_key(members))
    shift = (math.nan, math.nan)
    if band is not None:
        low, high = band.interval(signals, accuracy, level)
        shift = (min(float(low[0]), base.interval[0]), max(float(high[0]), base.interval[1]))
    return AccuracyEstimate(
        method="auto", accuracy=accuracy, n_target=base.n_target,
        params={"methods": list(members)},
        diagnostics={"members": estimates, "base": stack.base, "signals": signals,
                     "penalty": stack.penalty},
        interval=base.interval, level=level, shift_interval=shift,
    )
