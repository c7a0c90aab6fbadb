"""Sub-population shift of the text modality: the OOD splits of a WILDS text dataset.

The text implementation of the ``subpopulation`` family (same name and report order as the
image one, :mod:`.subpopulation`). Nothing is generated: a WILDS dataset ships its OOD
evaluation splits, and the dataset's :class:`~tasks.data.datasets.TargetPool` marks them as
sub-populations (``amazon-wilds``: ``0`` = ``id_test``, ``1`` = OOD ``val``, ``2`` = OOD
``test``, :mod:`tasks.data.datasets.amazon_wilds`). Each split of this family is every text of one of
them, in pool order, which is the order of the WILDS release.

===========  ==================  ============================================================
split        shift               texts
===========  ==================  ============================================================
``subpop1``  ``wilds-ood-val``   pool sub-population 1: the OOD validation split (the ALSA
                                 paper's "A-WILDS Subpop1")
``subpop2``  ``wilds-ood-test``  pool sub-population 2: the OOD test split ("Subpop2")
===========  ==================  ============================================================

The splits have no severity (the two are different reviewer populations, not grades of one
shift). The in-distribution ``id_test`` split is the ``clean`` target (:mod:`.text`).
"""

from __future__ import annotations

from typing import Final

import numpy as np

from tasks.data.spec import TargetPool
from tasks.data.families import ShiftFamily, TargetSplitSpec
from tasks.data.texts import take_texts

__all__ = ["FAMILIES", "WILDS_SUBPOPULATIONS"]

#: (split name, shift, pool sub-population) of every split of the family.
WILDS_SUBPOPULATIONS: Final[tuple[tuple[str, str, int], ...]] = (
    ("subpop1", "wilds-ood-val", 1),
    ("subpop2", "wilds-ood-test", 2),
)


def _splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(name, "subpopulation", shift, None, (("subgroup", float(group)),))
        for name, shift, group in WILDS_SUBPOPULATIONS
    ]


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    if pool.subgroups is None:
        raise ValueError(
            f"split {split.name!r} needs a target pool with sub-populations (1 = OOD val, 2 = "
            f"OOD test of a WILDS dataset); dataset {dataset!r} has none."
        )
    group = int(split.param("subgroup"))
    idx = np.flatnonzero(np.asarray(pool.subgroups) == group).astype(np.int64)
    if idx.size == 0:
        raise ValueError(
            f"split {split.name!r} needs the texts of pool sub-population {group}; the pool of "
            f"dataset {dataset!r} has none (it has sub-populations "
            f"{sorted(int(g) for g in np.unique(pool.subgroups))})."
        )
    return take_texts(pool.samples, idx), np.asarray(pool.labels)[idx]


#: The text implementation of ``subpopulation``: a WILDS dataset's OOD splits.
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("subpopulation", 3, ("text",), _splits, _generate),
)
