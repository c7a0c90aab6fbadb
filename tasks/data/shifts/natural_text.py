"""Natural shift for text: a dataset's own target sets, cut from its data by a column it has.

The text counterpart of :mod:`.natural`: nothing is generated. A text dataset that has a natural
grouping (the year of a speech, the month of a tweet, the country of a name, a play never seen
in training) lists its target sets in :attr:`~tasks.data.spec.DatasetSpec.natural_targets` as
``(split name, shift name, pool sub-population)``; its :class:`~tasks.data.spec.TargetPool`
marks every text of such a set with that sub-population id (the held-out texts of the source
distribution, the ``clean`` target, are sub-population 0). Each split of this family is every
text of one set, in pool order. The splits have no severity: two periods are two samples of the
world, not grades of one shift.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

from tasks.data.families import ShiftFamily, TargetSplitSpec
from tasks.data.spec import TargetPool
from tasks.data.texts import take_texts

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


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    if pool.subgroups is None:
        raise ValueError(
            f"split {split.name!r} needs a target pool whose subgroups mark each natural "
            f"target set; dataset {dataset!r} has none."
        )
    group = int(split.param("subgroup"))
    idx = np.flatnonzero(np.asarray(pool.subgroups) == group).astype(np.int64)
    if idx.size == 0:
        present = sorted(int(g) for g in np.unique(pool.subgroups))
        raise ValueError(
            f"split {split.name!r} needs the texts of pool sub-population {group}; the pool "
            f"of dataset {dataset!r} has none (it has sub-populations {present})."
        )
    return take_texts(pool.samples, idx), np.asarray(pool.labels)[idx]


#: One split per natural target set of a text dataset (``cache=False``: a view of the pool).
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("natural", 7, ("text",), _splits, _generate, per_dataset=True, cache=False),
)
