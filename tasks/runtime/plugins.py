"""Plugins: estimators, datasets and backbones installed by other distributions.

A distribution declares entry points in three groups (:data:`GROUPS`); ``pip install`` writes
them to its ``*.dist-info/entry_points.txt`` and :func:`importlib.metadata.entry_points` finds
them on ``sys.path``::

    [project.entry-points."alsa_bench.estimators"]
    cq-bin = "alsa_bench_quantile.estimator:ConfidenceQuantile"   # an Estimator subclass
    [project.entry-points."alsa_bench.datasets"]
    digits = "alsa_bench_quantile.digits"                         # a module with SPECS
    [project.entry-points."alsa_bench.backbones"]
    linear = "alsa_bench_quantile.linear:SPEC"                    # a BackboneSpec

The estimator registry loads its group itself (:mod:`estimators.core.plugins`, below this
package); the dataset and backbone registries call :func:`plugin_members` here. A plugin that
does not import, gives the wrong type or reuses a key is named in one warning line and skipped;
the rest of the tool works on. :func:`plugin_packages` gives the top-level packages of every
declared plugin, whose modules the cache keys hash (:mod:`tasks.stages.versions`).

Examples
--------
>>> sorted(GROUPS)
['backbones', 'datasets', 'estimators']
>>> plugin_packages() >= frozenset()
True
"""

from __future__ import annotations

import logging
import types
from collections.abc import Iterator
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Final

__all__ = ["GROUPS", "declared_entry_points", "plugin_members", "plugin_packages", "warn_plugin"]

#: What a plugin adds -> its entry-point group.
GROUPS: Final[dict[str, str]] = {
    "estimators": "alsa_bench.estimators",
    "datasets": "alsa_bench.datasets",
    "backbones": "alsa_bench.backbones",
}

logger = logging.getLogger("tasks.runtime.plugins")


def declared_entry_points(kind: str) -> list[EntryPoint]:
    """The entry points declared for ``kind`` (a key of :data:`GROUPS`), sorted by name.

    Raises
    ------
    ValueError
        If ``kind`` is not a key of :data:`GROUPS`.
    """
    if kind not in GROUPS:
        raise ValueError(f"kind must be one of {', '.join(GROUPS)}; got {kind!r}.")
    found = {(ep.name, ep.value): ep for ep in entry_points(group=GROUPS[kind])}
    return [found[k] for k in sorted(found)]


def _where(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", None) or getattr(getattr(dist, "metadata", None), "get",
                                                  lambda _k: None)("Name")
    return f"{ep.group} plugin {ep.name!r} ({ep.value}" + (f", from {name})" if name else ")")


def warn_plugin(ep: EntryPoint, problem: str) -> None:
    """Say in one warning line that a plugin is skipped, and why."""
    logger.warning("%s %s; skipped it.", _where(ep), problem)


def plugin_members(kind: str, member_type: type) -> Iterator[tuple[EntryPoint, list[Any]]]:
    """Load every plugin of ``kind`` and give the members of ``member_type`` each declares.

    An entry point may name a module (its ``SPECS`` tuple is read), one ``member_type``
    instance, or a tuple or list of them. A plugin that fails to import, or gives anything
    else, is reported by :func:`warn_plugin` and skipped. Keys are not checked here: the
    registry refuses a key it holds already.

    Parameters
    ----------
    kind : {"datasets", "backbones"}
    member_type : type
        :class:`~tasks.data.spec.DatasetSpec` or
        :class:`~tasks.models.backbones.base.BackboneSpec`.

    Yields
    ------
    (EntryPoint, list)
        A plugin and its members, in entry-point name order.
    """
    for ep in declared_entry_points(kind):
        try:
            loaded = ep.load()
        except Exception as exc:  # a broken plugin must not break the tool
            warn_plugin(ep, f"does not import ({type(exc).__name__}: {exc})")
            continue
        value = getattr(loaded, "SPECS", None) if isinstance(loaded, types.ModuleType) else loaded
        items = list(value) if isinstance(value, (tuple, list)) else [value]
        bad = [x for x in items if not isinstance(x, member_type)]
        if not items or bad:
            got = type(bad[0]).__name__ if bad else "nothing"
            warn_plugin(ep, f"must give a {member_type.__name__}, a tuple of them or a module "
                            f"with SPECS; got {got}")
            continue
        yield ep, items


@lru_cache(maxsize=1)
def plugin_packages() -> frozenset[str]:
    """Top-level packages (or modules) of every declared plugin, loaded or not.

    Read from the entry points' values (``"pkg.module:attr"`` → ``"pkg"``), without importing
    anything; cached for the process (a distribution installed later is seen by the next one).
    """
    return frozenset(ep.value.split(":")[0].split(".")[0].strip()
                     for kind in GROUPS for ep in declared_entry_points(kind))
