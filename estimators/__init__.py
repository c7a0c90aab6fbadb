"""Label-free accuracy estimators: ALSA and the baselines it is judged against.

>>> from estimators import get_estimator, available_estimators
>>> available_estimators()
['ac', 'doc', 'im', 'atc-mc', 'atc-ne', 'cot', 'alsa-g', 'alsa-e']

Every estimator takes raw logits: ``fit(val_logits, val_labels)`` then
``estimate(target_logits)`` returns an :class:`AccuracyEstimate` whose ``accuracy`` is a fraction.
"""

from .base import AccuracyEstimate, Estimator
from .exceptions import ConvergenceWarning, DegenerateValidationWarning, NotFittedError
from .registry import ESTIMATORS, available_estimators, get_estimator, register

# Importing the method modules registers them, in the order of the contract's key list.
from . import baselines as _baselines  # noqa: E402,F401  (ac, doc, im, atc-mc, atc-ne, cot)
from . import alsa as _alsa  # noqa: E402,F401  (alsa-g, alsa-e)

__all__ = [
    "AccuracyEstimate",
    "ConvergenceWarning",
    "DegenerateValidationWarning",
    "ESTIMATORS",
    "Estimator",
    "NotFittedError",
    "available_estimators",
    "get_estimator",
    "register",
]
