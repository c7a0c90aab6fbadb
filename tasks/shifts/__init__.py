"""Shift registry: the target splits of every dataset, and how each is generated.

Every target split is a :class:`TargetSplitSpec` (name, shift family, shift, severity,
parameters). :func:`target_splits` lists a dataset's splits from the families its
:class:`~tasks.datasets.DatasetSpec` names, using each family's implementation for the dataset's
modality; :func:`generate_split` makes one from the dataset's target pool, deterministically:
its generator is seeded by :data:`SHIFT_SEED` and a CRC-32 of ``"<dataset>/<split name>"``
(:func:`split_rng`). Array splits are cached on disk by :mod:`tasks.shifts.cache`.

The families are collected from the modules of this package (each defines ``FAMILIES``), so a
new family is one module; docs/SHIFTS.md has the full table.

=================  =========  ===================================================  ===============
family             modality   splits                                               module
=================  =========  ===================================================  ===============
``clean``          image      ``clean``: the in-distribution test pool             :mod:`.clean`
``clean``          graph      ``clean``: held-out year 2011 on its snapshot        :mod:`.structural`
``synthetic``      image      ``<corruption>-<severity>``, 18 x 5                  :mod:`.synthetic`
``label_shift``    image      ``label_shift-a<alpha>-d<draw>``, Dirichlet priors   :mod:`.label_shift`
``subpopulation``  image      ``subpop-novel<percent>``, novel sub-classes         :mod:`.subpopulation`
``domain``         image      ``mnistm-photo-<severity>``, photo-patch blend       :mod:`.domain`
``temporal``       graph      ``temporal-<year>``, 2015-2020 snapshots             :mod:`.temporal`
``structural``     graph      edge drop / feature noise / class priors, x 5        :mod:`.structural`
=================  =========  ===================================================  ===============

Examples
--------
>>> names = [s.name for s in target_splits("fmnist-coarse")]
>>> names[:3]
['clean', 'subpop-novel25', 'subpop-novel50']
>>> [s.name for s in target_splits("arxiv-sim")][:3]
['clean', 'temporal-2015', 'temporal-2016']
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Final

import numpy as np

from tasks.datasets.base import TargetPool

from .base import SHIFT_SEED, ShiftFamily, TargetSplitSpec, split_rng

#: Names re-exported from family modules, resolved on first access (PEP 562) so that this
#: registry does not import image code for a graph dataset (and its code version stays apart).
_LAZY: Final[dict[str, str]] = {
    "BASE_SUBSET_SIZE": "clean",
    "base_subset": "clean",
    "CORRUPTIONS": "synthetic",
    "SEVERITIES": "synthetic",
    "available_corruptions": "synthetic",
    "corrupt": "synthetic",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

def get_dataset_spec(name: str) -> Any:
    """:func:`tasks.datasets.get_dataset_spec`, imported at call time: dataset modules build
    their own families from this package while the dataset registry is being collected."""
    from tasks.datasets import get_dataset_spec as lookup

    return lookup(name)


__all__ = [
    "BASE_SUBSET_SIZE",
    "CORRUPTIONS",
    "SEVERITIES",
    "SHIFT_FAMILIES",
    "SHIFT_SEED",
    "ShiftFamily",
    "TargetSplitSpec",
    "available_corruptions",
    "base_subset",
    "corrupt",
    "family_implementation",
    "generate_split",
    "get_target_split",
    "split_rng",
    "target_splits",
]

_NOT_FAMILY_MODULES: Final[frozenset[str]] = frozenset({"base", "cache"})


def _collect() -> dict[tuple[str, str], ShiftFamily]:
    found: dict[tuple[str, str], ShiftFamily] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in _NOT_FAMILY_MODULES:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for family in getattr(module, "FAMILIES", ()):
            for modality in family.modalities:
                if (family.name, modality) in found:
                    raise RuntimeError(
                        f"shift family {family.name!r} is implemented twice for {modality}."
                    )
                found[(family.name, modality)] = family
    return found


_IMPLEMENTATIONS: Final[dict[tuple[str, str], ShiftFamily]] = _collect()

#: The shift families, in report order.
SHIFT_FAMILIES: Final[tuple[str, ...]] = tuple(
    name
    for _, name in sorted({(f.order, f.name) for f in _IMPLEMENTATIONS.values()})
)


def family_implementation(family: str, modality: str, dataset: str | None = None) -> ShiftFamily:
    """The implementation of ``family`` for ``modality`` (and for ``dataset`` when given).

    A dataset may bring its own implementation of a family
    (:attr:`~tasks.datasets.DatasetSpec.own_families`: CIFAR-10-C read from its files instead of
    corruptions computed here); when ``dataset`` is given, that one wins.

    Raises
    ------
    ValueError
        If the family is unknown or has no implementation for the modality.
    """
    if dataset is not None:
        for own in get_dataset_spec(dataset).own_families:
            if own.name == family and modality in own.modalities:
                return own
    if family not in SHIFT_FAMILIES:
        raise ValueError(
            f"shift family must be one of {', '.join(SHIFT_FAMILIES)}; got {family!r}."
        )
    try:
        return _IMPLEMENTATIONS[(family, modality)]
    except KeyError:
        served = sorted(f for f, m in _IMPLEMENTATIONS if m == modality)
        raise ValueError(
            f"shift family {family!r} has no {modality} implementation; {modality} datasets "
            f"can use {', '.join(served)}."
        ) from None


def target_splits(dataset: str) -> tuple[TargetSplitSpec, ...]:
    """Every target split of a dataset, families in :data:`SHIFT_FAMILIES` order.

    Parameters
    ----------
    dataset : str
        Dataset key.

    Returns
    -------
    tuple of TargetSplitSpec
        Names are unique; none is ``"val"``.

    Raises
    ------
    ValueError
        If the dataset is unknown or lists a family that has no implementation for its
        modality.
    """
    spec = get_dataset_spec(dataset)
    unknown = [f for f in spec.target_families if f not in SHIFT_FAMILIES]
    if unknown:
        raise ValueError(
            f"dataset {dataset!r} lists unknown shift families {unknown}; expected a subset of "
            f"{', '.join(SHIFT_FAMILIES)}."
        )
    out: list[TargetSplitSpec] = []
    for family in SHIFT_FAMILIES:
        if family in spec.target_families:
            out.extend(family_implementation(family, spec.modality, dataset).splits_of(dataset))
    return tuple(out)


def get_target_split(dataset: str, name: str) -> TargetSplitSpec:
    """Look up one target split of a dataset by name.

    Raises
    ------
    ValueError
        If the dataset has no split of that name; the message lists a few valid names.
    """
    splits = target_splits(dataset)
    for split in splits:
        if split.name == name:
            return split
    examples = ", ".join(s.name for s in splits[:6])
    raise ValueError(
        f"split must be a target split of {dataset!r} ({len(splits)} splits, e.g. {examples}); "
        f"got {name!r}."
    )


def generate_split(
    dataset: str, split: TargetSplitSpec, pool: TargetPool
) -> tuple[Any, np.ndarray]:
    """Make one target split from the dataset's test pool.

    Parameters
    ----------
    dataset : str
        Dataset key (part of the seed; its modality picks the family's implementation).
    split : TargetSplitSpec
        The split to make (from :func:`target_splits`).
    pool : TargetPool
        Test pool of the dataset.

    Returns
    -------
    samples : numpy.ndarray or GraphSplit
        Samples in the pool's raw form (images keep their dtype).
    labels : numpy.ndarray
        ``int64`` labels in the model's label space.

    Raises
    ------
    ValueError
        If the split's family is unknown or does not fit the pool (a subpopulation split of a
        pool without sub-populations, a temporal split of images).
    """
    modality = get_dataset_spec(dataset).modality
    family = family_implementation(split.shift_family, modality, dataset)
    return family.generate(dataset, split, pool, split_rng(dataset, split.name))
