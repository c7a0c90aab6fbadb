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

from typing import Final

import numpy as np

from tasks.datasets import get_dataset_spec
from tasks.datasets.base import TargetPool
from tasks.shifts.base import ShiftFamily, TargetSplitSpec

__all__ = ["FAMILIES"]


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


#: One split per natural test set of the dataset (image datasets).
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("natural", 7, ("image",), _splits, _generate, per_dataset=True),
)
