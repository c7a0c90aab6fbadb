"""Label-free accuracy estimators: ALSA and the baselines it is judged against.

>>> from estimators import get_estimator, available_estimators
>>> available_estimators()[:3], "alsa-g" in available_estimators()
(['ac', 'doc', 'im'], True)

Every estimator takes raw logits: ``fit(val_logits, val_labels)`` then
``estimate(target_logits)`` returns an :class:`AccuracyEstimate` whose ``accuracy`` is a fraction.
Softmax probabilities are refused (every row non-negative and summing to 1, or a binary column
inside [0, 1]); :func:`logits_from_probabilities` turns them into logits.

The score estimators ``mano``, ``nuclear-norm`` and ``entropy`` return a score in
``diagnostics["score"]`` and
an accuracy only through a ``score_map`` (:class:`ScoreMap`); they are listed with
``available_estimators(include_scores=True)``. The shift gate (``shift-gate``) runs only when
named: ``available_estimators(include_opt_in=True)`` lists it (``docs/SHIFT_GATE.md``).

The feature methods ``distcs``, ``aline-s``, ``aline-d`` and the score ``dispersion`` also read
the classifier's penultimate-layer features (``fit(..., val_features=..., train_features=...,
train_labels=...)``, ``estimate(..., target_features=...)``) and refuse a call without them;
``available_estimators(include_features=True)`` lists them (:func:`feature_estimators`).

GDE (``gde``) needs a second model of the same architecture trained with another seed (a
*peer*): ``fit(..., peer_val_logits=...)``, ``estimate(..., peer_target_logits=...)``; it refuses
a call without them, and ``available_estimators(include_peers=True)`` lists it
(:func:`peer_estimators`). ALine-S and ALine-D add given peers to their family of models.

A result's ``shift_interval`` (the shift-aware band, :mod:`estimators.trust`) is computed after
the estimate, on its first read or with ``estimate(..., band=True)``; a method that is only
asked for its estimate pays for no band.

Estimators of other distributions register through the entry-point group
``alsa_bench.estimators`` (:mod:`estimators.core.plugins`; :func:`plugin_estimators` lists
them), after the ones of this package.

The package is a house of layers; a module imports only from its own layer and the ones below
(``tests/test_layers.py`` enforces it):

``trust/`` (shift signals, the band, stacking, ``auto``, the calibration artifact)
> ``methods/`` | ``scores/`` | ``features/`` (the estimators, siblings that never import each
other) > ``maths/`` (shared maths and the softmax / score method bases) > ``core/`` (the
contract, parameters, registry, input checks, threads).
"""

from .core.base import AccuracyEstimate, Estimator
from .core._validation import logits_from_probabilities
from .core.band_slot import install_band_function
from .core.exceptions import (
    CalibrationWarning,
    ConvergenceWarning,
    DegenerateValidationWarning,
    FeatureFallbackWarning,
    InertParameterWarning,
    NotFittedError,
    SmallSampleWarning,
)
from .core.registry import (
    ESTIMATORS,
    available_estimators,
    check_estimator_params,
    estimator_params,
    feature_estimators,
    get_estimator,
    peer_estimators,
    register,
    score_estimators,
)
from .core.params import Param
from .core.plugins import load_estimator_plugins, plugin_estimators
from .maths.score_map import ScoreEstimator, ScoreMap, leave_one_group_out

# Importing the method modules registers them, in the order of the contract's key list.
from .methods import baselines as _baselines  # noqa: E402,F401  (ac, doc, im, atc-mc, atc-ne, cot)
from .methods import alsa as _alsa  # noqa: E402,F401  (alsa-g, alsa-e)
from .scores import mano as _mano  # noqa: E402,F401  (mano, a score)
from .scores import nuclear_norm as _nuclear_norm  # noqa: E402,F401  (nuclear-norm, a score)
from .scores import entropy as _entropy  # noqa: E402,F401  (entropy, a score)
from .methods import shift_gate as _shift_gate  # noqa: E402,F401  (shift-gate, opt-in)
from .trust import auto as _auto  # noqa: E402,F401  (auto, opt-in)
from .features import distcs as _distcs  # noqa: E402,F401  (distcs, needs features)
from .features import aline as _aline  # noqa: E402,F401  (aline-s, aline-d, need features)
from .features import dispersion as _dispersion  # noqa: E402,F401  (a score on features)
from .methods import gde as _gde  # noqa: E402,F401  (gde, needs a peer model)
from .trust.attach_band import shift_band

# The one place the trust layer meets the core: a result's shift_interval, when first read (or
# estimate(..., band=True)), is computed by the trust layer's shift_band (core/band_slot.py).
install_band_function(shift_band)

# Estimators of other distributions (entry points), after every method of this package, so that
# a plugin never takes a built-in key; a broken one is named in one warning line and skipped.
load_estimator_plugins()

__all__ = [
    "AccuracyEstimate",
    "CalibrationWarning",
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
    "peer_estimators",
    "plugin_estimators",
    "register",
    "score_estimators",
]
