"""Label shift on graphs: the held-out year's nodes re-drawn with Dirichlet class priors.

The graph counterpart of :mod:`.label_shift` (same family name, same split names): every split
starts from the ``clean`` base split of a temporal graph (the held-out year's nodes on its
snapshot, :func:`tasks.data.shifts.structural.base_split`) and keeps a subset of its nodes whose
class proportions follow priors drawn from ``Dirichlet(alpha * 1)``
(:func:`tasks.data.shifts.label_shift.label_shift_indices`), alpha in (0.3, 1, 5), two draws
each, :data:`GRAPH_LABEL_SHIFT_SIZE` nodes at most (fewer where the base split is short). The
graph itself is untouched: only which nodes count changes, so the split isolates the shift of
``p(y)`` from any change of the features or edges.

The ``structural`` family's ``class_prior`` splits do the same at five fixed concentrations with
half the base split; this family gives graph datasets the same label-shift splits, by name, as
the image and text datasets, so that a report can line the family up across modalities.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from tasks.data.families import ShiftFamily, TargetSplitSpec
from tasks.data.graphs import Graph, GraphSplit
from tasks.data.shifts.label_shift import label_shift_indices, label_shift_splits
from tasks.data.shifts.structural import base_split
from tasks.data.spec import TargetPool

__all__ = ["FAMILIES", "GRAPH_LABEL_SHIFT_SIZE"]

#: Nodes per split at most (the base splits of the zoo's graphs hold 1-2 thousand nodes).
GRAPH_LABEL_SHIFT_SIZE: Final[int] = 1000


def _splits() -> list[TargetSplitSpec]:
    return label_shift_splits(GRAPH_LABEL_SHIFT_SIZE)


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[GraphSplit, np.ndarray]:
    if not isinstance(pool.samples, Graph):
        raise ValueError(
            f"split {split.name!r} needs a graph target pool; dataset {dataset!r} has "
            f"{type(pool.samples).__name__}."
        )
    base = base_split(pool.samples)
    local, _ = label_shift_indices(
        base.labels, pool.n_classes, split.param("alpha"), int(split.param("size")), rng
    )
    out = base.take(np.sort(local))
    return out, out.labels


#: Dirichlet-resampled class priors over a temporal graph's held-out year.
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("label_shift", 2, ("graph",), _splits, _generate),
)
