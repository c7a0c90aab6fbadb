"""Registry of estimators by key: ``get_estimator("atc-ne")``, ``available_estimators()``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .base import Estimator
from .params import Param

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


def available_estimators(
    *, include_scores: bool = False, include_opt_in: bool = False, include_features: bool = False,
    include_peers: bool = False,
) -> list[str]:
    """Registry keys of the estimators, in registration order.

    Parameters
    ----------
    include_scores : bool, default False
        Also list the score estimators (``needs_score_map = True``: ``mano``,
        ``nuclear-norm``), whose ``accuracy`` is NaN unless a ``score_map`` is given. Off by
        default, so that code running "every estimator" (the benchmark, ``alsa-bench
        estimate``) keeps to the methods that return an accuracy on their own.
    include_opt_in : bool, default False
        Also list the estimators that run only when named (``opt_in = True``:
        ``shift-gate``, which misses its benchmark goal; ``docs/SHIFT_GATE.md``).
    include_features : bool, default False
        Also list the estimators that need feature arrays (``needs_features = True``:
        ``distcs``, ``aline-s``, ``aline-d``, and with ``include_scores`` the score
        ``dispersion``), which refuse a call without ``val_features`` / ``target_features``.
        Off by default, so that the default methods (the benchmark's, ``alsa-bench
        estimate``'s) stay the ones that need logits alone.
    include_peers : bool, default False
        Also list the estimators that need a peer model (``needs_peer = True``: ``gde``), which
        refuse a call without ``peer_val_logits`` / ``peer_target_logits``.

    Examples
    --------
    >>> with_features = available_estimators(include_features=True)
    >>> "distcs" in with_features, "distcs" in available_estimators()
    (True, False)
    """
    return [k for k, cls in ESTIMATORS.items()
            if (include_scores or not getattr(cls, "needs_score_map", False))
            and (include_opt_in or not getattr(cls, "opt_in", False))
            and (include_features or not getattr(cls, "needs_features", False))
            and (include_peers or not getattr(cls, "needs_peer", False))]


def peer_estimators() -> list[str]:
    """Registry keys of the estimators that need a peer model (``needs_peer = True``).

    >>> peer_estimators()
    ['gde']
    """
    return [k for k, cls in ESTIMATORS.items() if getattr(cls, "needs_peer", False)]


def score_estimators(*, include_features: bool = False) -> list[str]:
    """Registry keys of the score estimators (``needs_score_map = True``); with
    ``include_features`` also those that need features (``dispersion``)."""
    return [k for k, cls in ESTIMATORS.items() if getattr(cls, "needs_score_map", False)
            and (include_features or not getattr(cls, "needs_features", False))]


def feature_estimators(*, include_scores: bool = True) -> list[str]:
    """Registry keys of the estimators that need features (``needs_features = True``).

    >>> keys = feature_estimators()
    >>> {"distcs", "aline-s", "dispersion"} <= set(keys), "ac" in keys
    (True, False)
    """
    return [k for k, cls in ESTIMATORS.items() if getattr(cls, "needs_features", False)
            and (include_scores or not getattr(cls, "needs_score_map", False))]


def _estimator_class(name: str) -> type[Estimator]:
    try:
        return ESTIMATORS[name]
    except KeyError:
        every = available_estimators(include_scores=True, include_opt_in=True,
                                     include_features=True, include_peers=True)
        raise ValueError(f"Unknown estimator {name!r}; available: {', '.join(every)}.") from None


def estimator_params(name: str) -> tuple[Param, ...]:
    """The declared hyper-parameters of the estimator registered as ``name``, in ``__init__`` order.

    Examples
    --------
    >>> [(p.name, p.default) for p in estimator_params("im")]
    [('n_bins', 10), ('temperature_scaling', True)]
    """
    return _estimator_class(name).PARAMS


def check_estimator_params(name: str, values: Mapping[str, Any]) -> None:
    """Validate hyper-parameters for the estimator ``name`` without fitting anything.

    Runs the same checks as ``fit`` (every declared parameter, then the estimator's checks
    between parameters) on the defaults updated with ``values``.

    Raises
    ------
    ValueError
        If ``name`` is unknown, a key of ``values`` is not a parameter, or a value is refused;
        the message names the parameter.

    Examples
    --------
    >>> check_estimator_params("alsa-g", {"n_anchors": 50})
    >>> check_estimator_params("alsa-g", {"alpha": 1.5})
    Traceback (most recent call last):
    ...
    ValueError: The 'alpha' parameter of ALSAG must be in (0.0, 1.0); got 1.5.
    """
    get_estimator(name, **values)._validate_params()


def get_estimator(name: str, **params: Any) -> Estimator:
    """Instantiate the estimator registered as ``name`` with keyword hyper-parameters.

    Raises
    ------
    ValueError
        If ``name`` is unknown (the message lists the valid keys) or a parameter is unknown.
    """
    cls = _estimator_class(name)
    try:
        return cls(**params)
    except TypeError as exc:
        raise ValueError(
            f"Invalid parameters for estimator {name!r}: {exc}. "
            f"Valid parameters: {cls._param_names()}."
        ) from None
