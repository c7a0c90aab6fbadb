"""Natural shift: test sets collected anew for a dataset (CIFAR-10.1, ImageNetV2, MNIST-M, ...).

Nothing is generated. A dataset whose release has natural target test sets lists them in
:attr:`~tasks.data.datasets.DatasetSpec.natural_targets` as ``(split name, shift name,
sub-population)``, and its :class:`~tasks.data.datasets.TargetPool` holds every such set's samples
marked with that sub-population id in ``subgroups`` (the in-distribution test images, the
``clean`` target, are another id). Each split of this family is every sample of one set, in pool
order, which is the order of the release's files.

The splits have no severity: CIFAR-10.1 and CIFAR-10.2 are two re-collections, not grades of one
shift.
"""

from __future__ import annotations

from typing import Any, Final


from tasks.data.families import ShiftFamily, TargetSplitSpec, subgroup_split

__all__ = ["FAMILIES"]


def _splits(spec: Any) -> list[TargetSplitSpec]:
    if not spec.natural_targets:
        raise ValueError(
            f"dataset {spec.name!r} lists the natural family but no natural_targets "
            f"(split name, shift name, pool sub-population) to make its splits from."
        )
    return [
        TargetSplitSpec(name, "natural", shift, None, (("subgroup", float(group)),))
        for name, shift, group in spec.natural_targets
    ]


#: One split per natural test set of the dataset (image datasets).
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("natural", 7, ("image",), _splits, subgroup_split, per_dataset=True, cache=False),
)
