"""Registry of estimators by key: ``get_estimator("atc-ne")``, ``available_estimators()``."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from .base import Estimator

E = TypeVar("E", bound=type[Estimator])

ESTIMATORS: dict[str, type[Estimator]] = {}


def register(name: str) -> Callable[[E], E]:
    """Class decorator registering an estimator under ``name`` (refuses duplicates).

    The same class may be registered under several keys with different defaults by
    subclassing it (``atc-mc`` / ``atc-ne``).
    """

    def deco(cls: E) -> E:
        if name in ESTIMATORS:
            raise ValueError(f"Estimator name {name!r} is already registered to {ESTIMATORS[name]}.")
        cls.name = name
        ESTIMATORS[name] = cls
        return cls

    return deco


def available_estimators() -> list[str]:
    """Registry keys of every estimator, in registration order."""
    return list(ESTIMATORS)


def get_estimator(name: str, **params: Any) -> Estimator:
    """Instantiate the estimator registered as ``name`` with keyword hyper-parameters.

    Raises
    ------
    ValueError
        If ``name`` is unknown (the message lists the valid keys) or a parameter is unknown.
    """
    try:
        cls = ESTIMATORS[name]
    except KeyError:
        raise ValueError(
            f"Unknown estimator {name!r}; available: {', '.join(available_estimators())}."
        ) from None
    try:
        return cls(**params)
    except TypeError as exc:
        raise ValueError(
            f"Invalid parameters for estimator {name!r}: {exc}. "
            f"Valid parameters: {cls._param_names()}."
        ) from None
