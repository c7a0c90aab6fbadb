"""Estimators installed by other distributions: the ``alsa_bench.estimators`` entry points.

A distribution that declares::

    [project.entry-points."alsa_bench.estimators"]
    cq-bin = "alsa_bench_quantile.estimator:ConfidenceQuantile"

gets its class registered under the key ``cq-bin`` when :mod:`estimators` is imported (after
the estimators of this package, so a plugin never takes a built-in key):
``get_estimator("cq-bin")``, ``alsa-bench estimate -m cq-bin`` and ``alsa-bench run --method
cq-bin`` then work as for any built-in method. A plugin that does not import, is not an
:class:`~estimators.core.base.Estimator` subclass, cannot be built with its defaults, has a key
that is not lower-case letters, digits and ``-``, or reuses a key is named in one warning line
(logger ``estimators.plugins``) and skipped; every other estimator still works.

Examples
--------
>>> isinstance(plugin_estimators(), dict)
True
"""

from __future__ import annotations

import logging
import re
from importlib.metadata import EntryPoint, entry_points
from typing import Final

from .base import Estimator
from .registry import ESTIMATORS, register

__all__ = ["GROUP", "load_estimator_plugins", "plugin_estimators"]

#: The entry-point group of third-party estimators.
GROUP: Final[str] = "alsa_bench.estimators"
#: What a plugin's key may be (``--param KEY.NAME=VALUE`` splits at the first dot).
KEY_PATTERN: Final[re.Pattern[str]] = re.compile(r"^[a-z0-9][a-z0-9-]*$")

logger = logging.getLogger("estimators.plugins")

#: Key -> the distribution (or entry point) that installed it, for every loaded plugin.
_PLUGINS: dict[str, str] = {}


def _source(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return str(getattr(dist, "name", None) or ep.value)


def _skip(ep: EntryPoint, problem: str) -> None:
    logger.warning("%s plugin %r (%s, from %s) %s; skipped it.", GROUP, ep.name, ep.value,
                   _source(ep), problem)


def load_estimator_plugins() -> dict[str, str]:
    """Register the estimators of every ``alsa_bench.estimators`` entry point not yet loaded.

    Returns
    -------
    dict of str to str
        The plugin keys registered by this call, with the distribution each came from.
    """
    added: dict[str, str] = {}
    eps = {(ep.name, ep.value): ep for ep in entry_points(group=GROUP)}
    for _, ep in sorted(eps.items()):
        if ep.name in _PLUGINS:
            continue
        if not KEY_PATTERN.match(ep.name):
            _skip(ep, "has a key that is not lower-case letters, digits and '-'")
            continue
        try:
            cls = ep.load()
        except Exception as exc:  # a broken plugin must not break the package
            _skip(ep, f"does not import ({type(exc).__name__}: {exc})")
            continue
        if not (isinstance(cls, type) and issubclass(cls, Estimator)):
            _skip(ep, f"must name an Estimator subclass; got {type(cls).__name__} {cls!r}")
            continue
        if ep.name in ESTIMATORS and ESTIMATORS[ep.name] is not cls:
            _skip(ep, f"reuses the key of {ESTIMATORS[ep.name].__module__}."
                      f"{ESTIMATORS[ep.name].__qualname__}")
            continue
        try:
            cls()  # the registry builds it with its defaults: say now if it cannot
        except Exception as exc:
            _skip(ep, f"cannot be built with its defaults ({type(exc).__name__}: {exc})")
            continue
        if ep.name not in ESTIMATORS:
            register(ep.name)(cls)
        _PLUGINS[ep.name] = added[ep.name] = _source(ep)
    return added


def plugin_estimators() -> dict[str, str]:
    """The registry keys that plugins installed, with the distribution of each."""
    return dict(_PLUGINS)
