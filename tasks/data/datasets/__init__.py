"""Dataset registry: one :class:`DatasetSpec` per dataset key, collected from the modules here.

Every module of this package that defines ``SPECS`` (a tuple of :class:`DatasetSpec`) contributes
its datasets; ``ORDER`` (an int, default 100) places them in listings. Adding a dataset means
writing its module (stage, load source, load target pool, ``SPECS``) and nothing else: no other
file changes, so no other dataset's cache key moves (:mod:`tasks.stages.versions`). Datasets of
other distributions come from the entry-point group ``alsa_bench.datasets``
(:mod:`tasks.runtime.plugins`), after these; one that reuses a key is named in a warning and
skipped. Importing the registry touches no data: loaders run only when a stage calls them.

Examples
--------
>>> spec = get_dataset_spec("fmnist-coarse")
>>> spec.n_classes, spec.class_names
(3, ('tops', 'footwear', 'other'))
>>> get_dataset_spec("arxiv-sim").modality
'graph'
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Final

from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool, imbalanced_counts
from tasks.runtime.plugins import plugin_members, warn_plugin

__all__ = [
    "DATASETS",
    "SUITE_GROUPS",
    "DatasetSpec",
    "SourceSplits",
    "TargetPool",
    "available_datasets",
    "available_suites",
    "default_suites",
    "get_dataset_spec",
    "group_suites",
    "suite_group",
    "imbalanced_counts",
]

_NOT_DATASET_MODULES: Final[frozenset[str]] = frozenset({"base"})


def _collect() -> dict[str, DatasetSpec]:
    modules = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name in _NOT_DATASET_MODULES:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "SPECS"):
            modules.append((int(getattr(module, "ORDER", 100)), info.name, module))
    found: dict[str, DatasetSpec] = {}
    for _, _, module in sorted(modules, key=lambda m: (m[0], m[1])):
        for spec in module.SPECS:
            if spec.name in found:
                raise RuntimeError(f"dataset {spec.name!r} is registered twice.")
            found[spec.name] = spec
    for ep, specs in plugin_members("datasets", DatasetSpec):
        taken = [s.name for s in specs if s.name in found]
        if taken:
            warn_plugin(ep, f"reuses the dataset key {taken[0]!r}")
            continue
        found.update((s.name, s) for s in specs)
    return found


#: Every registered dataset by key, in listing order.
DATASETS: Final[dict[str, DatasetSpec]] = _collect()


def available_datasets() -> tuple[str, ...]:
    """Registered dataset keys, sorted."""
    return tuple(sorted(DATASETS))


def available_suites() -> tuple[str, ...]:
    """Suites that have at least one dataset, in registry order."""
    return tuple(dict.fromkeys(spec.suite for spec in DATASETS.values()))


#: Suite groups: a name on the command line (``--suite zoo``) that stands for every suite whose
#: name starts with ``"<group>-"``, with what the group is for. Membership is by prefix, so a
#: new ``zoo-*`` suite joins the group by its name alone.
SUITE_GROUPS: Final[dict[str, str]] = {
    "zoo": "independent source datasets for learning which estimate to trust; not in make bench",
}


def suite_group(suite: str) -> str:
    """The group of :data:`SUITE_GROUPS` that ``suite`` belongs to by its name, "" if none."""
    return next((g for g in SUITE_GROUPS if suite.startswith(f"{g}-")), "")


def group_suites(group: str) -> tuple[str, ...]:
    """The suites of a group of :data:`SUITE_GROUPS`: every suite named ``"<group>-..."``, in
    registry order.

    Raises
    ------
    ValueError
        If ``group`` is not a group, or no registered suite belongs to it.
    """
    if group not in SUITE_GROUPS:
        raise ValueError(f"suite group must be one of {', '.join(SUITE_GROUPS)}; got {group!r}.")
    members = tuple(s for s in available_suites() if suite_group(s) == group)
    if not members:
        raise ValueError(f"suite group {group!r} has no suites: no registered suite is named "
                         f"{group}-<name>.")
    return members


def default_suites() -> tuple[str, ...]:
    """The suites of the default benchmark (``alsa-bench run`` without ``--suite``, so
    ``make bench``): those whose every dataset installs offline and is
    :attr:`~tasks.data.spec.DatasetSpec.in_default_bench`, in registry order."""
    return tuple(
        s for s in available_suites()
        if all(not spec.online and spec.in_default_bench
               for spec in DATASETS.values() if spec.suite == s)
    )


def get_dataset_spec(name: str) -> DatasetSpec:
    """Look up a dataset by key.

    Parameters
    ----------
    name : str
        Registry key, e.g. ``"fmnist"``.

    Returns
    -------
    DatasetSpec

    Raises
    ------
    ValueError
        If ``name`` is not registered; the message lists the valid keys.
    """
    try:
        return DATASETS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"dataset must be one of {', '.join(available_datasets())}; got {name!r}."
        ) from None
