"""The estimator contract shared by every method, and its result object.

An estimator learns what it needs from a labelled in-distribution validation set
(``fit(val_logits, val_labels)``) and then predicts the classifier's accuracy on an unlabelled
target set from its logits alone (``estimate(target_logits)``). The pattern is scikit-learn's
(keyword-only hyper-parameters stored verbatim, validated at ``fit``, fitted state in attributes
ending with ``_``) combined with NannyML's template method (the public methods validate, the
private ``_fit`` / ``_estimate`` compute).
"""

from __future__ import annotations

import inspect
import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Self

import numpy as np
from numpy.typing import NDArray

from ._validation import check_logits, check_val_inputs
from .exceptions import NotFittedError


@dataclass(frozen=True)
class AccuracyEstimate:
    r"""What an estimator says about one target set.

    Attributes
    ----------
    method : str
        Registry key of the estimator that produced it (``"atc-mc"``, ``"alsa-g"``, ...).
    accuracy : float
        Estimated target accuracy as a fraction in [0, 1] (DoC with ``clip=False`` may leave it).
    n_target : int
        Number of target samples scored.
    per_sample : ndarray of shape (n_target,) or None
        Per-sample probabilities of correctness where the method defines them (AC, ATC, ALSA),
        else None.
    params : Mapping[str, object]
        The hyper-parameters used, for provenance (``get_params()`` at fit time plus fitted
        pre-processing such as the temperature).
    diagnostics : Mapping[str, object]
        Method-specific numbers: thresholds, epochs, rectified fraction, transport cost, ...
    per_class : ndarray of shape (n_classes,) or None
        Estimated accuracy among the target rows *predicted* as each class,
        :math:`\hat a_k = \frac{1}{|\{i: \hat y_i = k\}|} \sum_{i: \hat y_i = k} p_i` with
        :math:`\hat y_i = \arg\max_j z_{ij}` and :math:`p_i` the per-sample probability of a
        correct prediction; NaN for a class no row is predicted as; None when the method has no
        per-sample probabilities (DoC, IM, COT). Weighted by the predicted-class counts, it
        averages back to the mean of ``per_sample``.
    """

    method: str
    accuracy: float
    n_target: int
    per_sample: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    params: Mapping[str, Any] = field(default_factory=dict)
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    per_class: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)

    @property
    def error(self) -> float:
        """Estimated target error, ``1 - accuracy`` (the only place error is derived)."""
        return 1.0 - self.accuracy

    def to_record(self) -> dict[str, Any]:
        """Flat, JSON-safe row (no per-sample array) for storage and the CLI's ``--json``."""
        return {
            "method": self.method,
            "accuracy": float(self.accuracy),
            "n_target": int(self.n_target),
            "params": _json_safe(dict(self.params)),
            "diagnostics": _json_safe(dict(self.diagnostics)),
        }


def per_class_accuracy(
    per_sample: NDArray[np.float64], logits: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Mean per-sample probability of correctness among the rows predicted as each class.

    Parameters
    ----------
    per_sample : ndarray of shape (n,)
        Probability that each row's prediction is correct.
    logits : ndarray of shape (n, c)
        The rows' logits (their argmax is the predicted class).

    Returns
    -------
    ndarray of shape (c,)
        NaN for a class that no row is predicted as.

    Examples
    --------
    >>> per_class_accuracy(np.array([1.0, 0.5, 0.0]),
    ...                    np.array([[2.0, 0.0, 0.0], [3.0, 1.0, 0.0], [0.0, 1.0, 0.0]]))
    array([0.75, 0.  ,  nan])
    """
    predicted = np.asarray(logits).argmax(axis=1)
    c = np.asarray(logits).shape[1]
    counts = np.bincount(predicted, minlength=c).astype(np.float64)
    sums = np.bincount(predicted, weights=np.asarray(per_sample, dtype=np.float64), minlength=c)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1.0), np.nan)


def _json_safe(value: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into JSON-serialisable Python values."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return repr(value)


def params_json(params: Mapping[str, Any]) -> str:
    """Canonical JSON of a parameter mapping (sorted keys), used as provenance in storage."""
    return json.dumps(_json_safe(dict(params)), sort_keys=True)


class Estimator(ABC):
    """Base class: predict a classifier's accuracy on an unlabelled target set.

    Subclasses set ``name`` (the registry key), take keyword-only hyper-parameters in
    ``__init__`` stored under the same names, validate them in ``_validate_params`` and implement
    ``_fit`` and ``_estimate``.
    """

    name: ClassVar[str]

    # ----------------------------------------------------------------- parameters
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [
            p.name
            for p in sig.parameters.values()
            if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]

    def get_params(self) -> dict[str, Any]:
        """Hyper-parameters as passed to the constructor; ``type(self)(**get_params())`` clones."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Self:
        """Set hyper-parameters by name (validated at the next ``fit``)."""
        valid = set(self._param_names())
        for key, value in params.items():
            if key not in valid:
                raise ValueError(
                    f"Unknown parameter {key!r} for {type(self).__name__}; valid: {sorted(valid)}."
                )
            setattr(self, key, value)
        return self

    def _validate_params(self) -> None:
        """Check hyper-parameters; called at the start of ``fit``. Override to add checks."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ----------------------------------------------------------------- public API
    def fit(self, val_logits: Any, val_labels: Any) -> Self:
        """Learn from labelled in-distribution validation logits.

        Parameters
        ----------
        val_logits : array-like of shape (n_samples, n_classes)
            Raw logits of the validation set (never softmax probabilities).
        val_labels : array-like of shape (n_samples,)
            Integer class labels in ``[0, n_classes)``.

        Returns
        -------
        self
        """
        self._validate_params()
        logits, labels = check_val_inputs(val_logits, val_labels)
        self._fit(logits, labels)
        self.n_classes_ = int(logits.shape[1])
        self.val_accuracy_ = float(np.mean(logits.argmax(axis=1) == labels))
        self.n_val_ = int(logits.shape[0])
        return self

    def estimate(self, target_logits: Any) -> AccuracyEstimate:
        """Estimate accuracy on an unlabelled target set.

        Parameters
        ----------
        target_logits : array-like of shape (n_target, n_classes)
            Raw logits of the target set, same class count as at ``fit``.

        Returns
        -------
        AccuracyEstimate
        """
        self._check_is_fitted()
        logits = check_logits(target_logits, "target_logits", n_classes=self.n_classes_)
        accuracy, per_sample, diagnostics = self._estimate(logits)
        samples = None if per_sample is None else np.asarray(per_sample, dtype=np.float64)
        return AccuracyEstimate(
            method=self.name,
            accuracy=float(accuracy),
            n_target=int(logits.shape[0]),
            per_sample=samples,
            params={**self.get_params(), **self._fitted_params()},
            diagnostics=dict(diagnostics),
            per_class=per_class_accuracy(samples, logits) if samples is not None else None,
        )

    def _check_is_fitted(self) -> None:
        if not hasattr(self, "n_classes_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; "
                "call fit(val_logits, val_labels) first."
            )

    def _fitted_params(self) -> dict[str, Any]:
        """Fitted pre-processing worth recording with each estimate (e.g. ``temperature``)."""
        return {}

    # ----------------------------------------------------------------- subclass hooks
    @abstractmethod
    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        """Learn fitted state from validated inputs."""

    @abstractmethod
    def _estimate(
        self, target_logits: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        """Return ``(accuracy, per_sample or None, diagnostics)`` for validated target logits."""
