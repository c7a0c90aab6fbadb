r"""``auto``: the label-free methods combined by a model learned from a benchmark's shifts.

No single method is safe to pick: on this project's benchmark the best method changes from
dataset to dataset, and where the methods disagree the error is larger. ``auto`` runs the
label-free methods the active calibration's combination uses (``methods``; by default the
members the artifact names, :meth:`~estimators.trust.calibration_artifact.Calibration.auto_members`:
no list in this module decides them), measures the label-free signals of
:mod:`estimators.trust.shift_signals`, and returns the combination of :mod:`estimators.trust.stacking`
learned on the benchmark: a ridge correction of ALSA-E that only moves from it as far as the
signals justify. Its ``shift_interval`` is its own band, fit on its out-of-fold errors.

The combination and the bands live in the active calibration
(:func:`~estimators.trust.calibration_artifact.active_calibration`): the shipped one, fit from ``make bench``'s
database, or the user's own (``alsa-bench calibrate --db PATH``). ``auto`` is judged
leave-one-dataset-out (``docs/BENCHMARK.md``, "Which estimate to trust"); its estimate on a
split of the very benchmark it was fit on is in-sample, which is why the benchmark's method
list leaves it out (``opt_in``) and the report measures it out of fold.

Nothing is silent. A member's warning (ALSA-E's ``ConvergenceWarning`` matters most: ALSA-E is
most of the answer) is raised again by ``auto``, prefixed with the member's key, and kept in
``diagnostics["member_warnings"]``. A signal that is NaN (:attr:`SignalValues.problems
<estimators.trust.shift_signals.SignalValues.problems>`) is never filled in: ``auto`` then
returns its base member's estimate uncorrected (the correction needs every signal), says so in
a :class:`~estimators.core.exceptions.SignalWarning` and in ``diagnostics["signal_problems"]``;
where the band reads that signal, the band is [0, 1].

Python uses the calibration that :func:`~estimators.trust.calibration_artifact.active_calibration`
finds: ``use_calibration(PATH)``, else ``ALSA_BENCH_CALIBRATION``, else the shipped one. The
CLI points it at the state folder's ``calibration.json`` when ``alsa-bench calibrate`` wrote one;
in Python, after ``alsa-bench calibrate``, call
``use_calibration(".alsa-bench/calibration.json")`` (or set the variable) to get the same
``auto``. ``diagnostics["calibration"]`` names the file used.

Cost: the members' fits and estimates plus the signals (a temperature fit, five softmax
estimates and an EM label marginal), ``docs/PERFORMANCE.md``.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core._validation import check_val_inputs
from ..core.base import DEFAULT_LEVEL, AccuracyEstimate, Estimator, sampling_interval
from ..core.params import Param, inert_parameters
from ..core.registry import ESTIMATORS, available_estimators, get_estimator, register
from .attach_band import fitted_signals, warn_missing_signals
from .calibration_artifact import (
    Calibration,
    active_calibration,
    active_calibration_path,
    auto_key,
)
from .shift_signals import SignalValues

__all__ = ["Auto", "auto_default_members", "auto_from_estimates"]


def _check_methods(value: Any, owner: str) -> None:
    if value is None:
        return
    keys = available_estimators()
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ValueError(
            f"The 'methods' parameter of {owner} must be a list of registry keys among "
            f"{', '.join(keys)} (or None for the calibration's default); got {value!r}."
        )
    unknown = [v for v in value if v not in keys]
    if unknown or len(set(value)) != len(value) or not value:
        raise ValueError(
            f"The 'methods' parameter of {owner} must list distinct keys among "
            f"{', '.join(keys)}; got {list(value)!r}."
        )


def _calibration() -> Calibration:
    calibration = active_calibration()
    if calibration is None:
        raise ValueError(
            "Auto needs a calibration and none is installed: the package's "
            "estimators/trust/data/calibration.json is missing; fit one with `alsa-bench "
            "calibrate --db PATH` and name it in ALSA_BENCH_CALIBRATION."
        )
    return calibration


def auto_default_members() -> tuple[str, ...] | None:
    """The members ``auto`` runs by default under the active calibration (None: no calibration
    or no combination in it)."""
    calibration = active_calibration()
    if calibration is None or not calibration.stacks:
        return None
    return calibration.auto_members()


@contextmanager
def _relayed(member: str, into: dict[str, list[str]]) -> Iterator[None]:
    """Catch a member's warnings, then raise each again once, prefixed with ``member``, and
    record its text in ``into[member]``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    seen: set[tuple[type[Warning], str]] = set()
    for w in caught:
        text = str(w.message)
        if (w.category, text) in seen:
            continue
        seen.add((w.category, text))
        into.setdefault(member, []).append(f"{w.category.__name__}: {text}")
        warnings.warn(f"auto's member {member}: {text}", w.category,
                      stacklevel=_caller_level())


#: Frames of these files are the library's own: a relayed warning points past them.
_INTERNAL = (str(Path(__file__).resolve().parents[1]) + os.sep,
             str(Path(contextlib.__file__).resolve()))


def _caller_level() -> int:
    """The ``stacklevel`` at which ``warnings.warn``, called by this function's caller, names
    the first frame outside the estimators package (and :mod:`contextlib`, through which
    :func:`_relayed` resumes): the user's line that called ``fit`` or ``estimate``."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(
            _INTERNAL):
        frame = frame.f_back
        level += 1
    return level


def _combine(stack: Any, measured: SignalValues,
             estimates: Mapping[str, float]) -> tuple[float, dict[str, Any]]:
    """The combination's estimate, or its base member's where a signal it reads is NaN (a
    model that reads no signal, :class:`~estimators.trust.selector.ShrinkModel`, never falls
    back). A NaN signal is recorded in ``diagnostics["signal_problems"]`` either way (with the
    reason), never filled in; a warning comes where it changes the answer (here, or the band's
    ``[0, 1]`` in :func:`~estimators.trust.attach_band.shift_band`)."""
    signals = measured.to_record()
    diagnostics: dict[str, Any] = {
        "members": dict(estimates), "base": getattr(stack, "base", None), "signals": signals,
        "penalty": getattr(stack, "penalty", None),
        "model": type(stack).__name__, "weight": getattr(stack, "weight", None)}
    base = getattr(stack, "base", None)
    reads_signals = getattr(stack, "reads_signals", True)
    if measured.problems:
        diagnostics["signal_problems"] = dict(measured.problems)
    if reads_signals and measured.problems and isinstance(base, str) and base in estimates:
        warn_missing_signals(measured.problems, f"auto returns its base member {base}'s "
                             "estimate uncorrected (its correction needs every signal)")
        return float(estimates[base]), diagnostics
    return float(stack.predict(signals, estimates)[0]), diagnostics


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
              "calibration was fit for; None for the members the calibration names "
              "(Calibration.auto_members).", check=_check_methods,
              accepts="list of registry keys or `None`"),
        Param("seed", "int", 0, "Seed of the members that draw at random (ALSA's anchors).",
              low=0),
    )

    def members(self) -> tuple[str, ...]:
        """The member keys, in the calibration's order (read from the active calibration)."""
        calibration = _calibration()
        if self.methods is None:
            return calibration.auto_members()
        return tuple(calibration.stack_for(self.methods).members)

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
        calibration = _calibration()
        self.calibration_file_ = str(active_calibration_path())
        self.stack_ = calibration.stack_for(self.members())
        n = int(val_logits.shape[0])
        self.fit_warnings_: dict[str, list[str]] = {}
        self.members_ = {}
        for m in self.stack_.members:
            with _relayed(m, self.fit_warnings_):
                self.members_[m] = self._member(m, n).fit(val_logits, val_labels)
        self.signals_ = fitted_signals(val_logits, val_labels)

    def _estimate(
        self, target_logits: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        estimates: dict[str, float] = {}
        caught: dict[str, list[str]] = {k: list(v) for k, v in self.fit_warnings_.items()}
        for name, member in self.members_.items():
            logits: Any = (target_logits.astype(np.float32) if member.accepts_float32
                           else target_logits)
            with _relayed(name, caught):
                estimates[name] = float(member._estimate(logits)[0])
        measured = self.signals_.transform(target_logits, estimates=estimates)
        accuracy, diagnostics = _combine(self.stack_, measured, estimates)
        diagnostics["member_warnings"] = caught
        diagnostics["calibration"] = self.calibration_file_
        return accuracy, None, diagnostics

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
    the first member set of :meth:`Calibration.auto_member_sets
    <estimators.trust.calibration_artifact.Calibration.auto_member_sets>` (the default, then
    the others by size) that ``results`` covers with finite estimates, or None when there is
    none. ``diagnostics["left_out"]`` names each default member it had to leave out; the
    caller says why (the CLI: a ``--param`` on it, or no estimate).

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
    calibration = active_calibration()
    if calibration is None or not calibration.stacks:
        return None
    have = {k for k, r in results.items() if math.isfinite(r.accuracy)}
    sets = calibration.auto_member_sets()
    members = next((s for s in sets if set(s) <= have), None)
    if members is None:
        return None
    stack = calibration.stack_for(members)
    estimates = {m: float(results[m].accuracy) for m in stack.members}
    val_x, val_y = check_val_inputs(val_logits, val_labels)
    measured = fitted_signals(val_x, val_y).transform(target_logits, estimates=estimates)
    accuracy, diagnostics = _combine(stack, measured, estimates)
    diagnostics["left_out"] = [m for m in sets[0] if m not in stack.members]
    diagnostics["calibration"] = str(active_calibration_path())
    base = results[stack.base]
    # auto's own sampling interval, as Estimator.estimate computes it for Auto (around auto's
    # accuracy, not its base member's: a model that moves the base would else widen the band)
    val_accuracy = float(np.mean(np.argmax(val_x, axis=1) == val_y))
    interval = sampling_interval(accuracy, base.n_target, val_accuracy=val_accuracy,
                                 n_val=len(val_y), level=level)
    band = calibration.bands.get(auto_key(stack.members))
    shift = (math.nan, math.nan)
    if band is not None:
        low, high = band.interval(measured.to_record(), accuracy, level)
        if np.isfinite(low[0]) and np.isfinite(high[0]):
            shift = (min(float(low[0]), interval[0]), max(float(high[0]), interval[1]))
        else:  # a signal the band reads is NaN (attach_band.shift_band does the same)
            warn_missing_signals(measured.problems, "the shift band is [0, 1]: without that "
                                 "signal nothing narrower is known to hold")
            shift = (0.0, 1.0)
    return AccuracyEstimate(
        method="auto", accuracy=accuracy, n_target=base.n_target,
        params={"methods": list(stack.members)}, diagnostics=diagnostics,
        interval=interval, level=level, shift_interval=shift,
    )
