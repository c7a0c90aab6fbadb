"""The estimator contract shared by every method, and its result object.

An estimator learns what it needs from a labelled in-distribution validation set
(``fit(val_logits, val_labels)``) and then predicts the classifier's accuracy on an unlabelled
target set from its logits alone (``estimate(target_logits)``). The pattern is scikit-learn's
(keyword-only hyper-parameters stored verbatim, validated at ``fit``, fitted state in attributes
ending with ``_``) combined with NannyML's template method (the public methods validate, the
private ``_fit`` / ``_estimate`` compute).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from ._features import (
    FeatureArray,
    FitFeatures,
    check_fit_features,
    check_target_features,
    require_features,
)
from ._peers import PeerPredictions, check_peer_logits, require_peer
from ._validation import check_logits, check_val_inputs, warn_small_target
from .band_slot import BandRequest
from .exceptions import InertParameterWarning, NotFittedError
from .params import Param, inert_parameters, make_init, validate_params

#: Default nominal coverage of :attr:`AccuracyEstimate.interval`.
DEFAULT_LEVEL = 0.90
#: Validation rows (a seeded random subset above this) that measure the residual variance.
RESIDUAL_ROWS = 20_000


def check_level(level: Any, owner: str = "estimate") -> float:
    """Validate an interval level: a number strictly between 0 and 1.

    Raises
    ------
    ValueError
        Naming the argument, what it expects and what it got, e.g. ``The 'level' parameter of
        estimate must be a number in (0, 1) (e.g. 0.9 for a 90 % interval); got 90``.
    """
    ok = isinstance(level, (int, float, np.integer, np.floating)) and not isinstance(level, bool)
    if not ok or not (0.0 < float(level) < 1.0):
        raise ValueError(
            f"The 'level' parameter of {owner} must be a number in (0, 1) (e.g. 0.9 for a 90 % "
            f"interval); got {level!r}."
        )
    return float(level)


def sampling_interval(
    accuracy: float,
    n_target: int,
    *,
    per_sample: NDArray[np.float64] | None = None,
    val_accuracy: float | None = None,
    n_val: int | None = None,
    level: float = DEFAULT_LEVEL,
    extra_variance: float = 0.0,
    residual_variance: float = 0.0,
) -> tuple[float, float]:
    r"""Normal interval for the target accuracy from the two sampling-noise terms.

    With :math:`\hat a` the estimate, the interval is
    :math:`\hat a \pm z_{(1+\ell)/2}\sqrt{V_T + V_S + V_x}`, clipped to [0, 1], where

    * :math:`V_T` is the variance of the realised accuracy of the ``n_target`` rows around the
      expected one: the Poisson-binomial variance
      :math:`\frac{1}{n_T^2}\sum_i p_i (1 - p_i)` where the method gives per-sample
      probabilities :math:`p_i`, else (no per-sample values, or 0/1 indicators as ATC's) the
      binomial :math:`\hat a (1 - \hat a) / n_T`, which bounds the Poisson-binomial one from
      above;
    * :math:`V_S = a_S (1 - a_S) / n_S` is the first-order (delta-method, unit sensitivity)
      variance that the validation sample passes on: every method here is pinned to the
      validation accuracy :math:`a_S` (ATC's threshold, DoC's offset, ALSA's calibration offset,
      AC's temperature) whose binomial standard error this is;
    * :math:`V_x` is ``extra_variance`` (e.g. a meta-model's residual variance).

    With ``residual_variance`` :math:`\sigma^2 > 0` (the per-row variance of the error measured
    on the validation set, :meth:`Estimator._residual_variance`), the per-row variances of both
    terms are raised to at least :math:`\sigma^2`: :math:`V_T \ge \sigma^2/n_T`,
    :math:`V_S \ge \sigma^2/n_S`.

    It does **not** cover the estimator's bias under a distribution shift.

    Parameters
    ----------
    accuracy : float
        The estimate :math:`\hat a`.
    n_target : int
        Target rows.
    per_sample : ndarray of shape (n_target,), optional
        Per-sample probabilities of a correct prediction.
    val_accuracy, n_val : float and int, optional
        :math:`a_S` and :math:`n_S`; :math:`V_S = 0` when not given.
    level : float in (0, 1), default 0.90
    extra_variance : float, default 0.0
        :math:`V_x`, added as it is.
    residual_variance : float, default 0.0
        :math:`\sigma^2`, the floor of both per-row variances.

    Returns
    -------
    tuple of float
        ``(low, high)``; ``(nan, nan)`` for a non-finite estimate.

    Examples
    --------
    >>> lo, hi = sampling_interval(0.8, 400, level=0.95)
    >>> round(lo, 4), round(hi, 4)
    (0.7608, 0.8392)
    """
    from scipy.stats import norm

    level = check_level(level, "sampling_interval")
    a = float(accuracy)
    if not math.isfinite(a) or n_target <= 0:
        return (math.nan, math.nan)
    ps = None if per_sample is None else np.clip(np.asarray(per_sample, np.float64), 0.0, 1.0)
    if ps is not None and len(ps) == n_target and not np.all((ps == 0.0) | (ps == 1.0)):
        var_t = float(np.sum(ps * (1.0 - ps))) / float(n_target) ** 2
    else:
        ac = min(max(a, 0.0), 1.0)
        var_t = ac * (1.0 - ac) / float(n_target)
    var_t = max(var_t, float(residual_variance) / float(n_target))
    var_s = 0.0
    if val_accuracy is not None and n_val:
        var_s = float(val_accuracy) * (1.0 - float(val_accuracy)) / float(n_val)
        var_s = max(var_s, float(residual_variance) / float(n_val))
    half = float(norm.ppf(0.5 + level / 2.0)) * math.sqrt(var_t + var_s + max(extra_variance, 0.0))
    return (max(0.0, a - half), min(1.0, a + half))


#: A band, or what computes it on the first read (a :class:`~estimators.core.band_slot.BandRequest`).
BandOrRequest = tuple[float, float] | Callable[[], tuple[float, float]]


class _ShiftBandField:
    """``AccuracyEstimate.shift_interval``: a ``(low, high)`` pair, or a zero-argument callable
    (a :class:`~estimators.core.band_slot.BandRequest`) called on the first read, whose result
    replaces it (the request and the arrays it references are then let go)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}_value"

    def __get__(self, obj: object | None, owner: Any = None) -> tuple[float, float]:
        if obj is None:  # the dataclass's default
            return (math.nan, math.nan)
        value = obj.__dict__[self.slot]
        if callable(value):
            low, high = value()
            value = (float(low), float(high))
            obj.__dict__[self.slot] = value
        return (float(value[0]), float(value[1]))

    def __set__(self, obj: object, value: BandOrRequest) -> None:
        if not callable(value):
            value = tuple(value)  # type: ignore[assignment]
        obj.__dict__[self.slot] = value


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
    interval : tuple of float
        ``(low, high)``: an interval for the target's accuracy at ``level`` that covers the
        *sampling noise* of the finite target and validation sets (:func:`sampling_interval`),
        not the error a distribution shift causes; ``(nan, nan)`` where a method cannot say.
    level : float
        Nominal coverage of ``interval`` and ``shift_interval`` (default 0.90).
    shift_interval : tuple of float
        ``(low, high)``: the shift-aware band at ``level``, meant to contain the *true* accuracy
        under a distribution shift (:mod:`estimators.trust.shift_band`): conformal, calibrated on a
        benchmark's shifts, narrow when the target looks like validation and wide when it does
        not, and never narrower than ``interval``. Its coverage on a new kind of shift is
        measured (``docs/BENCHMARK.md``), not guaranteed; a concept shift is invisible to it.
        ``(nan, nan)`` where the active calibration has no band for the method.

        The band costs a signal fit (a temperature and five softmax methods on the validation
        set) and the target's signals, so :meth:`Estimator.estimate` does not compute it: the
        trust layer (:mod:`estimators.trust.attach_band`) does, on the first read of this
        attribute or at once with ``estimate(..., band=True)`` (what the CLI and the pipeline
        ask for), and the result keeps it. The constructor takes a pair or a zero-argument
        callable that returns one (read once, then replaced by its value).
    """

    method: str
    accuracy: float
    n_target: int
    per_sample: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    params: Mapping[str, Any] = field(default_factory=dict)
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    per_class: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    interval: tuple[float, float] = (math.nan, math.nan)
    level: float = DEFAULT_LEVEL
    shift_interval: _ShiftBandField = _ShiftBandField()

    @property
    def band_pending(self) -> bool:
        """Whether ``shift_interval`` is still to be computed (it is on the first read)."""
        return callable(self.__dict__.get("_shift_interval_value"))

    def replace(self, **changes: Any) -> AccuracyEstimate:
        """A copy with ``changes`` (as :func:`dataclasses.replace`), a pending band left pending
        unless ``shift_interval`` is among the changes."""
        if "shift_interval" not in changes:
            changes["shift_interval"] = self.__dict__["_shift_interval_value"]
        return dataclasses.replace(self, **changes)

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
            "interval": _json_safe(list(self.interval)),
            "level": float(self.level),
            "shift_interval": _json_safe(list(self.shift_interval)),
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


def _band_reference(given: Any, checked: NDArray[Any]) -> NDArray[Any]:
    """The array a shift band reads later: the caller's own float32 array where validation made
    a float64 copy of it (so no copy of every validation set stays alive with every fitted
    estimator; float32 -> float64 is exact, so the band's numbers are the same), else the
    validated array itself."""
    if (isinstance(given, np.ndarray) and given.dtype == np.float32
            and given.shape == checked.shape):
        return given
    return checked


def params_json(params: Mapping[str, Any]) -> str:
    """Canonical JSON of a parameter mapping (sorted keys), used as provenance in storage."""
    return json.dumps(_json_safe(dict(params)), sort_keys=True)


class Estimator(ABC):
    """Base class: predict a classifier's accuracy on an unlabelled target set.

    Subclasses set ``name`` (the registry key), declare their hyper-parameters once in
    ``PARAMS`` (a tuple of :class:`~estimators.core.params.Param`) and implement ``_fit`` and
    ``_estimate``. A class that declares ``PARAMS`` and writes no ``__init__`` gets a keyword-only
    one that stores each value under its name; every declared value is validated at ``fit``
    (:meth:`_validate_params`, which a subclass extends for checks between parameters).
    """

    name: ClassVar[str]
    #: The hyper-parameters, in ``__init__`` order (:mod:`estimators.core.params`).
    PARAMS: ClassVar[tuple[Param, ...]] = ()
    #: Whether ``_estimate`` returns per-sample probabilities; False skips the validation pass
    #: of :meth:`_residual_variance` (DoC, IM, COT), whose residuals would be None anyway.
    has_per_sample: ClassVar[bool] = True
    #: Whether ``_fit`` / ``_estimate`` take float32 logits as they are (ALSA, whose kernels are
    #: float32 and which converts the rows it uses); saves a float64 copy of large inputs.
    accepts_float32: ClassVar[bool] = False
    #: Whether the estimator runs only when named (left out of ``available_estimators()`` and so
    #: of the benchmark's default methods); the shift gate, which misses its benchmark goal.
    opt_in: ClassVar[bool] = False
    #: Whether the estimator reads feature arrays (``val_features`` at ``fit``,
    #: ``target_features`` at ``estimate``; :mod:`estimators.core._features`) and refuses a call
    #: without them; left out of ``available_estimators()`` unless ``include_features=True``.
    needs_features: ClassVar[bool] = False
    #: Whether the estimator needs a peer model's logits (``peer_val_logits`` at ``fit``,
    #: ``peer_target_logits`` at ``estimate``; :mod:`estimators.core._peers`) and refuses a call
    #: without them (GDE); left out of ``available_estimators()`` unless ``include_peers=True``.
    needs_peer: ClassVar[bool] = False
    #: Whether the estimator reads peer models when they are given, without needing them
    #: (agreement-on-the-line adds them to its family of models).
    reads_peers: ClassVar[bool] = False

    if TYPE_CHECKING:
        # Hyper-parameters are attributes that the synthesised ``__init__`` sets from ``PARAMS``;
        # to the type checker they are ``Any`` (their declaration, not an annotation, is checked).
        def __getattr__(self, name: str) -> Any: ...

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "PARAMS" in cls.__dict__ and "__init__" not in cls.__dict__:
            setattr(cls, "__init__", make_init(cls.PARAMS))  # noqa: B010  (mypy: no method assignment)
        if (cls.needs_peer or cls.reads_peers) and \
                cls._estimate_with_peers is Estimator._estimate_with_peers:
            raise TypeError(
                f"{cls.__name__} declares needs_peer or reads_peers, so it must implement "
                "_estimate_with_peers(target_logits, target_features, target_peers).")

    # ----------------------------------------------------------------- parameters
    @classmethod
    def _param_names(cls) -> list[str]:
        if cls.PARAMS:
            return [p.name for p in cls.PARAMS]
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
        """Check every declared hyper-parameter; called at the start of ``fit``.

        Override (calling ``super()._validate_params()`` first) to add checks between
        parameters that a single declaration cannot express.
        """
        validate_params(self.PARAMS, self.get_params(), type(self).__name__)

    def _warn_inert_params(self, n_val: int) -> None:
        """Warn (:class:`~estimators.core.exceptions.InertParameterWarning`) for every parameter set
        away from its default that the configuration ignores (its ``Param.active`` is false),
        naming the condition under which it acts and what decides instead."""
        owner = type(self).__name__
        for p in inert_parameters(self.PARAMS, self.get_params(), n_val):
            warnings.warn(p.inert_message(owner, getattr(self, p.name)), InertParameterWarning,
                          stacklevel=3)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def used_estimators(self) -> tuple[str, ...]:
        """Registry keys of the estimators this configuration builds at run time.

        None by default; ``auto`` builds its members, DistCS its base method, the shift gate
        its covariate method. Their code is part of what this estimator's results depend on,
        so a benchmark's cache key of this method covers their modules too
        (:func:`tasks.stages.versions.method_code_version`).

        Returns
        -------
        tuple of str
        """
        return ()

    # ----------------------------------------------------------------- public API
    def fit(
        self,
        val_logits: Any,
        val_labels: Any,
        *,
        val_features: Any = None,
        train_features: Any = None,
        train_labels: Any = None,
        peer_val_logits: Any = None,
    ) -> Self:
        """Learn from labelled in-distribution validation logits (and, optionally, features).

        Parameters
        ----------
        val_logits : array-like of shape (n_samples, n_classes)
            Raw logits of the validation set, never softmax probabilities: an array whose rows
            are all non-negative and sum to 1 (or a binary column inside [0, 1]) is refused;
            pass ``np.log(p)`` or :func:`~estimators.logits_from_probabilities`.
        val_labels : array-like of shape (n_samples,)
            Integer class labels in ``[0, n_classes)``.
        val_features : array-like of shape (n_samples, d), optional
            Penultimate-layer features of the validation rows; read only by the methods with
            ``needs_features = True`` (which require it), validated for every method.
        train_features : array-like of shape (n_train, d), optional
            Features of (a sample of) the training set; needs ``val_features``.
        train_labels : array-like of shape (n_train,), optional
            Labels of the ``train_features`` rows.
        peer_val_logits : array-like, optional
            A peer model's logits on the validation rows (same architecture, same training
            data, another seed), shape ``(n_samples, n_classes)``; several peers as a 3-D array
            ``(n_peers, n_samples, n_classes)`` or a list of arrays
            (:mod:`estimators.core._peers`). Required by the methods with ``needs_peer = True``
            (``gde``), read by those with ``reads_peers = True`` (``aline-s``, ``aline-d``),
            validated for every method.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Malformed logits, labels, features (:mod:`estimators.core._features`) or peer
            logits (:mod:`estimators.core._peers`); a feature method called without
            ``val_features``; a peer method called without ``peer_val_logits``.

        Warns
        -----
        DegenerateValidationWarning
            All correct, all wrong, or labels all of one class.
        InertParameterWarning
            A parameter set away from its default that this configuration ignores.
        """
        self._validate_params()
        logits, labels = check_val_inputs(
            val_logits, val_labels, keep_float32=self.accepts_float32
        )
        features = check_fit_features(
            val_features, train_features, train_labels,
            n_val=int(logits.shape[0]), n_classes=int(logits.shape[1]),
        )
        if self.needs_features and features is None:
            raise require_features(type(self).__name__, self.name, "val_features", "fit")
        self.fit_features_: FitFeatures | None = features if self.needs_features else None
        self.feature_dim_: int | None = None if features is None else features.dim
        peers = None if peer_val_logits is None else check_peer_logits(
            peer_val_logits, "peer_val_logits", n_rows=int(logits.shape[0]),
            rows_of="val_logits", n_classes=int(logits.shape[1]))
        if self.needs_peer and peers is None:
            raise require_peer(type(self).__name__, self.name, "peer_val_logits", "fit")
        self.fit_peers_: PeerPredictions | None = (
            peers if (self.needs_peer or self.reads_peers) else None)
        self.n_peers_: int | None = None if peers is None else peers.n_peers
        self._warn_inert_params(int(logits.shape[0]))
        self._fit(logits, labels)
        self.n_classes_ = int(logits.shape[1])
        self.val_accuracy_ = float(np.mean(logits.argmax(axis=1) == labels))
        self.n_val_ = int(logits.shape[0])
        self.residual_variance_ = self._residual_variance(logits, labels)
        # what a shift band reads later (estimators.core.band_slot): references, not copies
        self.val_logits_ = _band_reference(val_logits, logits)
        self.val_labels_ = labels
        return self

    def _residual_variance(
        self, logits: NDArray[np.float64], labels: NDArray[np.int64]
    ) -> float:
        r"""Per-row variance of the estimate's error, measured on the validation set.

        :math:`\sigma^2 = \max\big(\frac1m\sum_i (p_i - \delta_i)^2,\ a_S(1-a_S)\big)` over
        (at most :data:`RESIDUAL_ROWS`, a seeded random subset of) the validation rows, with
        :math:`p_i` the per-sample probability of correctness and :math:`\delta_i` the
        correctness; :math:`a_S(1-a_S)` alone for methods without per-sample values. The
        estimate minus the truth is, to first order, the mean residual over the target rows
        minus the one over the validation rows the method is pinned to, hence the variance
        :math:`\sigma^2 (1/n_T + 1/n_S)` (:func:`sampling_interval`); the binomial floor keeps
        it honest where the residuals on the fitted rows are optimistic (ALSA's anchors sit on
        validation rows).
        """
        a = float(np.mean(logits.argmax(axis=1) == labels))
        floor = a * (1.0 - a)
        if not self.has_per_sample:
            return floor
        n = logits.shape[0]
        rows = np.arange(n)
        if n > RESIDUAL_ROWS:
            rows = np.sort(np.random.default_rng(0).choice(n, RESIDUAL_ROWS, replace=False))
        _, per_sample, _ = self._estimate(logits[rows])
        if per_sample is None:
            return floor
        correct = (logits[rows].argmax(axis=1) == labels[rows]).astype(np.float64)
        resid = float(np.mean((np.asarray(per_sample, dtype=np.float64) - correct) ** 2))
        return max(resid, floor)

    def estimate(
        self,
        target_logits: Any,
        *,
        target_features: Any = None,
        peer_target_logits: Any = None,
        level: float = DEFAULT_LEVEL,
        band: bool = False,
    ) -> AccuracyEstimate:
        """Estimate accuracy on an unlabelled target set.

        Parameters
        ----------
        target_logits : array-like of shape (n_target, n_classes)
            Raw logits of the target set, same class count as at ``fit``.
        target_features : array-like of shape (n_target, d), optional
            Features of the target rows (the dimension given at ``fit``); required by the
            methods with ``needs_features = True``, validated for every method.
        peer_target_logits : array-like, optional
            The peers' logits on the target rows, as many peers as ``peer_val_logits`` held
            at ``fit`` (:mod:`estimators.core._peers`); required by the methods with
            ``needs_peer = True``, read by those with ``reads_peers = True`` when ``fit`` had
            peers too, validated for every method.
        level : float in (0, 1), default 0.90
            Nominal coverage of the result's ``interval`` (:func:`sampling_interval`) and
            ``shift_interval``.
        band : bool, default False
            Compute the shift-aware band (``shift_interval``, :mod:`estimators.trust`) now.
            Otherwise it is computed on the first read of ``result.shift_interval`` (or
            ``to_record()``), and a caller that never reads it never pays for it.

        Returns
        -------
        AccuracyEstimate

        Raises
        ------
        ValueError
            If ``level`` is not a number in (0, 1), the logits are malformed (including
            probabilities passed as logits), or a peer method gets no ``peer_target_logits``
            (or another number of peers than at ``fit``).

        Warns
        -----
        CalibrationWarning
            Only when the band is computed (``band=True`` or on reading it) and the calibration
            file named by ``ALSA_BENCH_CALIBRATION`` is missing or damaged: the shipped
            calibration is used instead (:mod:`estimators.trust.calibration_artifact`).

        Warns
        -----
        SmallSampleWarning
            Below :data:`~estimators.core._validation.MIN_TARGET_ROWS` (30) target rows, whose own
            sampling noise then dominates.
        """
        level = check_level(level, "estimate")
        self._check_is_fitted()
        logits = check_logits(
            target_logits, "target_logits", n_classes=self.n_classes_,
            keep_float32=self.accepts_float32,
        )
        features = check_target_features(
            target_features, n_target=int(logits.shape[0]),
            dim=getattr(self, "feature_dim_", None),
        )
        peers = None if peer_target_logits is None else check_peer_logits(
            peer_target_logits, "peer_target_logits", n_rows=int(logits.shape[0]),
            rows_of="target_logits", n_classes=self.n_classes_,
            n_peers=getattr(self, "n_peers_", None))
        warn_small_target(int(logits.shape[0]), "target_logits", stacklevel=3)
        if self.needs_features and features is None:
            raise require_features(type(self).__name__, self.name, "target_features",
                                   "estimate")
        if self.needs_peer and peers is None:
            raise require_peer(type(self).__name__, self.name, "peer_target_logits",
                               "estimate")
        if self.reads_peers and (peers is None) != (getattr(self, "fit_peers_", None) is None):
            given, missing = (("fit", "estimate") if peers is None else ("estimate", "fit"))
            raise ValueError(
                f"{type(self).__name__} ({self.name!r}) got peer logits at {given} but not at "
                f"{missing}: pass peer_val_logits to fit and peer_target_logits to estimate "
                "(the same peers), or neither.")
        if self.needs_peer or (self.reads_peers and peers is not None):
            accuracy, per_sample, diagnostics = self._estimate_with_peers(logits, features,
                                                                          peers)
        elif features is not None and self.needs_features:
            accuracy, per_sample, diagnostics = self._estimate_with_features(logits, features)
        else:
            accuracy, per_sample, diagnostics = self._estimate(logits)
        samples = None if per_sample is None else np.asarray(per_sample, dtype=np.float64)
        interval = self._interval(float(accuracy), samples, int(logits.shape[0]), level)
        request = BandRequest(
            key=self._shift_key(), val_logits=self.val_logits_, val_labels=self.val_labels_,
            target_logits=_band_reference(target_logits, logits), accuracy=float(accuracy),
            level=level, interval=interval,
        )
        result = AccuracyEstimate(
            method=self.name,
            accuracy=float(accuracy),
            n_target=int(logits.shape[0]),
            per_sample=samples,
            params={**self.get_params(), **self._fitted_params()},
            diagnostics=dict(diagnostics),
            per_class=per_class_accuracy(samples, logits) if samples is not None else None,
            interval=interval,
            level=level,
            shift_interval=request,
        )
        if band:
            result.shift_interval  # noqa: B018  (computed now, kept by the result)
        return result

    def _shift_key(self) -> str:
        """The key of this estimator's band in the calibration (its registry key)."""
        return self.name

    def _interval(
        self,
        accuracy: float,
        per_sample: NDArray[np.float64] | None,
        n_target: int,
        level: float,
    ) -> tuple[float, float]:
        """The estimate's interval; default :func:`sampling_interval` with the validation term
        from ``val_accuracy_`` and :meth:`_reference_size` rows. Override to change it."""
        sigma2 = float(getattr(self, "residual_variance_", 0.0))
        return sampling_interval(
            accuracy,
            n_target,
            per_sample=per_sample,
            val_accuracy=self.val_accuracy_,
            n_val=self._reference_size(),
            level=level,
            residual_variance=sigma2,
        )

    def _reference_size(self) -> int:
        """Validation rows the fitted state is pinned to (all of them by default)."""
        return int(self.n_val_)

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

    def _estimate_with_features(
        self, target_logits: NDArray[np.float64], target_features: FeatureArray
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        """``_estimate`` of the methods with ``needs_features``: validated target logits and
        features (the fitted ones are ``self.fit_features_``). Default: ignore the features."""
        return self._estimate(target_logits)

    def _estimate_with_peers(
        self, target_logits: NDArray[np.float64], target_features: FeatureArray | None,
        target_peers: PeerPredictions | None,
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        """``_estimate`` of the methods with ``needs_peer`` (always) or ``reads_peers`` (when
        peers were given): validated target logits, features (or None) and the peers'
        predictions (the fitted ones are ``self.fit_peers_``). Only called for those methods,
        which must override it (checked when the class is defined); the default, for any other
        caller, ignores the peers."""
        return self._estimate_with_features(target_logits, target_features) \
            if target_features is not None else self._estimate(target_logits)
