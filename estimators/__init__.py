"""Label-free accuracy estimators: ALSA and the baselines it is judged against.

>>> from estimators import get_estimator, available_estimators
>>> available_estimators()
['ac', 'doc', 'im', 'atc-mc', 'atc-ne', 'cot', 'alsa-g', 'alsa-e']

Every estimator takes raw logits: ``fit(val_logits, val_labels)`` then
``estimate(target_logits)`` returns an :class:`AccuracyEstimate` whose ``accuracy`` is a fraction.
Softmax probabilities are refused (every row non-negative and summing to 1, or a binary column
inside [0, 1]); :func:`logits_from_probabilities` turns them into logits.

The score estimators ``mano`` and ``nuclear-norm`` return a score in ``diagnostics["score"]`` and
an accuracy only through a ``score_map`` (:class:`ScoreMap`); they are listed with
``available_estimators(include_scores=True)``. The shift gate (``shift-gate``) runs only when
named: ``available_estimators(include_opt_in=True)`` lists it (``docs/SHIFT_GATE.md``).

The feature methods ``distcs``, ``aline-s``, ``aline-d`` and the score ``dispersion`` also read
the classifier's penultimate-layer features (``fit(..., val_features=..., train_features=...,
train_labels=...)``, ``estimate(..., target_features=...)``) and refuse a call without them;
``available_estimators(include_features=True)`` lists them (:func:`feature_estimators`).
"""

from .base import AccuracyEstimate, Estimator
from ._validation import logits_from_probabilities
from .exceptions import (
    ConvergenceWarning,
    DegenerateValidationWarning,
    FeatureFallbackWarning,
    InertParameterWarning,
    NotFittedError,
    SmallSampleWarning,
)
from .registry import (
    ESTIMATORS,
    available_estimators,
    check_estimator_params,
    estimator_params,
    feature_estimators,
    get_estimator,
    register,
    score_estimators,
)
from .params import Param
from .score_map import ScoreEstimator, ScoreMap, leave_one_group_out

# Importing the method modules registers them, in the order of the contract's key list.
from . import baselines as _baselines  # noqa: E402,F401  (ac, doc, im, atc-mc, atc-ne, cot)
from . import alsa as _alsa  # noqa: E402,F401  (alsa-g, alsa-e)
from . import mano as _mano  # noqa: E402,F401  (mano, a score)
from . import nuclear_norm as _nuclear_norm  # noqa: E402,F401  (nuclear-norm, a score)
from . import shift_gate as _shift_gate  # noqa: E402,F401  (shift-gate, opt-in)
from . import calibration as _calibration  # noqa: E402,F401  (installs the shift-aware band)
from . import auto as _auto  # noqa: E402,F401  (auto, opt-in)
from . import distcs as _distcs  # noqa: E402,F401  (distcs, needs features)
from . import aline as _aline  # noqa: E402,F401  (aline-s, aline-d, need features)
from . import dispersion as _dispersion  # noqa: E402,F401  (dispersion, a score on features)

__all__ = [
    "AccuracyEstimate",
    "ConvergenceWarning",
    "DegenerateValidationWarning",
    "ESTIMATORS",
    "Estimator",
    "FeatureFallbackWarning",
    "InertParameterWarning",
    "NotFittedError",
    "Param",
    "ScoreEstimator",
    "ScoreMap",
    "SmallSampleWarning",
    "available_estimators",
    "check_estimator_params",
    "estimator_params",
    "feature_estimators",
    "get_estimator",
    "leave_one_group_out",
    "logits_from_probabilities",
    "register",
    "score_estimators",
]
