"""A dataset's target splits: which implementation of each shift family serves it, which splits
it has, and how one is made.

The glue between the two registries below it: the datasets (:mod:`tasks.data.datasets`, each
naming its shift families and maybe bringing its own implementation of one, such as CIFAR-10-C)
and the shift families (:mod:`tasks.data.shifts`, each implementing one family for some
modalities). Neither registry imports the other; this module reads both.

Every target split is a :class:`~tasks.data.families.TargetSplitSpec`. :func:`target_splits`
lists a dataset's splits, families in :data:`~tasks.data.shifts.SHIFT_FAMILIES` order;
:func:`generate_split` makes one from the dataset's target pool, deterministically: its generator
is seeded by :data:`~tasks.data.families.SHIFT_SEED` and a CRC-32 of
``"<dataset>/<split name>"`` (:func:`~tasks.data.families.split_rng`). Array splits are cached on
disk by :mod:`tasks.stages.splits`.

Examples
--------
>>> names = [s.name for s in target_splits("fmnist-coarse")]
>>> names[:3]
['clean', 'subpop-novel25', 'subpop-novel50']
>>> [s.name for s in target_splits("arxiv-sim")][:3]
['clean', 'temporal-2015', 'temporal-2016']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tasks.data.datasets import get_dataset_spec
from tasks.data.families import ShiftFamily, TargetSplitSpec, split_rng
from tasks.data.shifts import SHIFT_FAMILIES, implementation
from tasks.data.spec import TargetPool

__all__ = ["family_implementation", "generate_split", "get_target_split", "target_splits"]


def family_implementation(family: str, modality: str, dataset: str | None = None) -> ShiftFamily:
    """The implementation of ``family`` for ``modality`` (and for ``dataset`` when given).

    A dataset may bring its own implementation of a family
    (:attr:`~tasks.data.datasets.DatasetSpec.own_families`: CIFAR-10-C read from its files instead of
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
    return implementation(family, modality)


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
            out.extend(family_implementation(family, spec.modality, dataset).splits_of(spec))
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
