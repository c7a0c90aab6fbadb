"""Natural shift: test sets collected anew for a dataset (CIFAR-10.1, ImageNetV2, MNIST-M, ...).

Nothing is generated. A dataset whose release has natural target test sets lists them in
:attr:`~tasks.datasets.DatasetSpec.natural_targets` as ``(split name, shift name,
sub-population)``, and its :class:`~tasks.datasets.TargetPool` holds every such set's samples
marked with that sub-population id in ``subgroups`` (the in-distribution test images, the
``clean`` target, are another id). Each split of this family is every sample of one set, in pool
order, which is the order of the release's files.

The splits have no severity: CIFAR-10.1 and CIFAR-10.2 are two re-collections, not grades of one
shift.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from tasks.datasets.base import TargetPool
from tasks.shifts.base import ShiftFamily, TargetSplitSpec

def get_dataset_spec(name: str) -> Any:
    """:func:`tasks.datasets.get_dataset_spec`, imported at call time: dataset modules build
    their own families from this package while the dataset registry is being collected."""
    from tasks.datasets import get_dataset_spec as lookup

    return lookup(name)


__all__ = ["FAMILIES", "test_set_family"]


def _splits(dataset: str) -> list[TargetSplitSpec]:
    spec = get_dataset_spec(dataset)
    if not spec.natural_targets:
        raise ValueError(
            f"dataset {dataset!r} lists the natural family but no natural_targets "
            f"(split name, shift name, pool sub-population) to make its splits from."
        )
    return [
        TargetSplitSpec(name, "natural", shift, None, (("subgroup", float(group)),))
        for name, shift, group in spec.natural_targets
    ]


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    if pool.subgroups is None:
        raise ValueError(
            f"split {split.name!r} needs a target pool whose subgroups mark each natural test "
            f"set; dataset {dataset!r} has none."
        )
    group = int(split.param("subgroup"))
    idx = np.flatnonzero(np.asarray(pool.subgroups) == group).astype(np.int64)
    if idx.size == 0:
        present = sorted(int(g) for g in np.unique(pool.subgroups))
        raise ValueError(
            f"split {split.name!r} needs the samples of pool sub-population {group}; the pool "
            f"of dataset {dataset!r} has none (it has sub-populations {present})."
        )
    return np.asarray(pool.samples)[idx], np.asarray(pool.labels)[idx]


def test_set_family(
    family: str, order: int, targets: tuple[tuple[str, str, int], ...]
) -> ShiftFamily:
    """A dataset's own implementation of ``family`` whose splits are released test sets.

    For :attr:`~tasks.datasets.DatasetSpec.own_families`: the paper files MNIST-M under
    ``synthetic`` and Office-31's DSLR/Webcam under ``domain``, yet both are test sets read from
    disk like a natural shift, not images corrupted here.

    Parameters
    ----------
    family : str
        Family name (one of :data:`tasks.shifts.SHIFT_FAMILIES`).
    order : int
        Report position of the family (the registry's order for that name).
    targets : tuple of (str, str, int)
        ``(split name, shift name, pool sub-population)`` of every split.

    Returns
    -------
    ShiftFamily
        An image family whose split ``name`` is every pool sample of its sub-population.
    """
    if not targets:
        raise ValueError(f"targets must list at least one (split, shift, subgroup); got {targets!r}.")
    fixed = tuple((str(n), str(s), int(g)) for n, s, g in targets)

    def splits() -> list[TargetSplitSpec]:
        return [
            TargetSplitSpec(name, family, shift, None, (("subgroup", float(group)),))
            for name, shift, group in fixed
        ]

    return ShiftFamily(family, order, ("image",), splits, _generate, cache=False)


#: One split per natural test set of the dataset (image datasets).
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("natural", 7, ("image",), _splits, _generate, per_dataset=True, cache=False),
)
