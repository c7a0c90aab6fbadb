"""Exceptions raised by :mod:`estimators`."""

from __future__ import annotations


class NotFittedError(ValueError, AttributeError):
    """Raised when ``estimate`` is called before ``fit``.

    Subclasses both :class:`ValueError` and :class:`AttributeError`, as scikit-learn's
    ``NotFittedError`` does, so callers catching either keep working.
    """


class DegenerateValidationWarning(UserWarning):
    """The validation set is all correct or all wrong; estimates are finite but uninformative."""


class ConvergenceWarning(UserWarning):
    """An iterative fit stopped at its iteration cap before its stopping rule held."""


class SmallSampleWarning(UserWarning):
    """The target set is so small that its own sampling noise dominates the estimate."""


class InertParameterWarning(UserWarning):
    """A hyper-parameter was set to a non-default value that the chosen configuration ignores."""


class FeatureFallbackWarning(UserWarning):
    """A feature method lacked an optional input (training features) and used a fallback."""


class CalibrationWarning(UserWarning):
    """The calibration file that was named (``ALSA_BENCH_CALIBRATION``) is missing or damaged;
    the shift bands and ``auto`` use the shipped calibration instead."""
