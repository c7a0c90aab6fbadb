r"""Label-free signals of how far a target set is from the validation set.

Every user has the same raw material: the validation logits with their labels, the target logits
without, and the estimates of the methods they ran. :class:`ShiftSignals` turns these into a few
numbers that say how much the target differs from validation, the inputs of the shift-aware
band (:mod:`estimators.trust.shift_band`) and of the ``auto`` estimator (:mod:`estimators.trust.auto`):

* ``confidence_drop`` :math:`\bar c_S - \bar c_T`, the fall of the mean temperature-scaled
  maximum softmax probability (Guillory et al. 2021, the DoC signal);
* ``entropy_rise`` :math:`\bar H_T - \bar H_S`, the rise of the mean entropy normalised by
  :math:`\log c`;
* ``prediction_shift``, the total-variation distance
  :math:`\frac12 \sum_k |\hat\pi_{T,k} - \hat\pi_{S,k}|` between the predicted-class rates;
* ``label_shift_z``, the z-score of the label-shift test
  (:func:`~estimators.maths.label_shift.label_shift_test`) at the EM label marginal, clipped to
  :data:`Z_CLIP`: about 0 when the target is the validation set up to a change of the class
  proportions, large under any other shift;
* ``panel_spread`` and ``panel_std``, the range and standard deviation of the estimates of a
  fixed cheap panel (:data:`PANEL`: AC, DoC, ATC-MC, ATC-NE, IM, all with the defaults) — the
  methods disagree more where the error is larger;
* ``val_accuracy``, ``n_val``, ``n_target`` and ``n_classes``.

The panel is fixed (not "whichever methods the user ran") so that a signal means the same
thing in a single estimator's band, in the CLI and in the benchmark that calibrates it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from ..maths.confidence import _log_softmax
from ..core._validation import check_logits, check_val_inputs
from ..core.exceptions import NotFittedError
from ..maths.label_shift import class_conditional_stats, em_label_marginal, label_shift_test
from ..maths.temperature import DEFAULT_BOUNDS, _fit_temperature

__all__ = ["PANEL", "SIGNAL_NAMES", "Z_CLIP", "ShiftSignals", "SignalValues"]

#: The cheap, deterministic methods whose estimates every signal set carries.
PANEL: tuple[str, ...] = ("ac", "doc", "atc-mc", "atc-ne", "im")
#: Bound of the label-shift z-score kept as a signal (larger values say nothing more).
Z_CLIP = 1000.0
#: EM iterations for the label marginal behind ``label_shift_z`` (bounds its cost on large
#: targets with many classes; the z-score needs the marginal only roughly).
EM_ITERATIONS = 100
#: Names of the scalar signals, in the order of :meth:`SignalValues.vector`.
SIGNAL_NAMES: tuple[str, ...] = (
    "val_accuracy", "n_val", "n_target", "n_classes", "confidence_drop", "entropy_rise",
    "prediction_shift", "label_shift_z", "panel_spread", "panel_std",
)


@dataclass(frozen=True)
class SignalValues:
    """The signals of one target set (:class:`ShiftSignals`).

    Attributes
    ----------
    values : Mapping[str, float]
        One number per name of :data:`SIGNAL_NAMES`.
    panel : Mapping[str, float]
        The estimate of each method of :data:`PANEL`.
    """

    values: Mapping[str, float]
    panel: Mapping[str, float]

    def __getitem__(self, name: str) -> float:
        return float(self.values[name])

    def to_record(self) -> dict[str, float]:
        """Flat mapping: the signals, then ``panel_<method>`` for each panel estimate."""
        out = {k: float(v) for k, v in self.values.items()}
        out.update({f"panel_{k}": float(v) for k, v in self.panel.items()})
        return out


def _probs_stats(log_probs: NDArray[np.float64]) -> tuple[float, float, NDArray[np.float64]]:
    """Mean max probability, mean normalised entropy, predicted-class rates."""
    probs = np.exp(log_probs)
    c = probs.shape[1]
    conf = float(np.mean(probs.max(axis=1)))
    ent = -np.sum(probs * np.where(probs > 0, log_probs, 0.0), axis=1)
    entropy = float(np.mean(ent)) / math.log(c) if c > 1 else 0.0
    rates = np.bincount(probs.argmax(axis=1), minlength=c).astype(np.float64) / probs.shape[0]
    return conf, entropy, rates


class ShiftSignals:
    """Fit on labelled validation logits; measure how a target differs from them.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 600)
    >>> logits = rng.normal(size=(600, 3)) + 3.0 * np.eye(3)[labels]
    >>> signals = ShiftSignals().fit(logits, labels)
    >>> same = signals.transform(logits[:300])
    >>> noisy = signals.transform(logits[:300] + rng.normal(scale=3.0, size=(300, 3)))
    >>> same["confidence_drop"] < 0.02 < noisy["confidence_drop"]
    True
    """

    def fit(self, val_logits: Any, val_labels: Any) -> Self:
        """Fit the temperature, the panel and the validation statistics.

        Parameters
        ----------
        val_logits : array-like of shape (n, c)
        val_labels : array-like of shape (n,)

        Returns
        -------
        self
        """
        from ..core.registry import get_estimator

        logits, labels = check_val_inputs(val_logits, val_labels)
        self.temperature_ = _fit_temperature(logits, labels, DEFAULT_BOUNDS)
        log_probs = _log_softmax(logits / self.temperature_)
        self.val_confidence_, self.val_entropy_, self.val_rates_ = _probs_stats(log_probs)
        self.stats_ = class_conditional_stats(np.exp(log_probs), labels)
        self.val_accuracy_ = float(np.mean(logits.argmax(axis=1) == labels))
        self.n_classes_ = int(logits.shape[1])
        self.n_val_ = int(logits.shape[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.panel_ = {}
            for name in PANEL:
                self.panel_[name] = get_estimator(name).fit(logits, labels)
        return self

    def transform(
        self, target_logits: Any, *, estimates: Mapping[str, float] | None = None
    ) -> SignalValues:
        """Signals of a target set.

        Parameters
        ----------
        target_logits : array-like of shape (m, c)
        estimates : Mapping[str, float], optional
            Estimates already computed for this target by methods of :data:`PANEL` (reused
            instead of recomputed; others are ignored).

        Returns
        -------
        SignalValues
        """
        if not hasattr(self, "panel_"):
            raise NotFittedError(
                "This ShiftSignals instance is not fitted yet; call fit(val_logits, val_labels)."
            )
        logits = check_logits(target_logits, "target_logits", n_classes=self.n_classes_)
        log_probs = _log_softmax(logits / self.temperature_)
        conf, entropy, rates = _probs_stats(log_probs)
        probs = np.exp(log_probs)
        known = dict(estimates or {})
        panel: dict[str, float] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, est in self.panel_.items():
                value = known.get(name)
                panel[name] = float(value) if value is not None and math.isfinite(value) \
                    else float(est._estimate(logits)[0])
            q, _ = em_label_marginal(probs, self.stats_.prior, max_iter=EM_ITERATIONS)
            z = float(label_shift_test(probs, q, self.stats_).z)
        z = float(np.clip(z if math.isfinite(z) else Z_CLIP, -Z_CLIP, Z_CLIP))
        values = np.array(list(panel.values()), dtype=np.float64)
        return SignalValues(
            values={
                "val_accuracy": self.val_accuracy_,
                "n_val": float(self.n_val_),
                "n_target": float(logits.shape[0]),
                "n_classes": float(self.n_classes_),
                "confidence_drop": self.val_confidence_ - conf,
                "entropy_rise": entropy - self.val_entropy_,
                "prediction_shift": 0.5 * float(np.abs(rates - self.val_rates_).sum()),
                "label_shift_z": z,
                "panel_spread": float(values.max() - values.min()),
                "panel_std": float(values.std()),
            },
            panel=panel,
        )
