"""Temporal shift on graphs with publication years: one target split per test year.

The split of year ``Y`` (name ``temporal-<Y>``, shift ``"<Y>"``) is the graph as it stood at
the end of ``Y`` (:meth:`tasks.data.graphs.Graph.snapshot`: the papers published up to ``Y`` and the
citations between them) with the papers of year ``Y`` as the nodes to classify. Test years are
those of :data:`tasks.data.temporal.PROTOCOL` (2015-2020, the paper's App. F). Nothing is
random: the split is a view of the data.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from tasks.data.spec import TargetPool
from tasks.data.temporal import PROTOCOL
from tasks.data.graphs import Graph, GraphSplit
from tasks.data.families import ShiftFamily, TargetSplitSpec

__all__ = ["FAMILIES", "year_split"]


def year_split(graph: Graph, year: int) -> GraphSplit:
    """The papers of ``year`` on the snapshot of ``year``.

    Raises
    ------
    ValueError
        If no paper was published in ``year``.
    """
    snap, _ = graph.snapshot(year)
    nodes = np.flatnonzero(snap.year == int(year)).astype(np.int64)
    if nodes.size == 0:
        raise ValueError(f"the graph has no nodes of year {year}; a temporal split needs some.")
    return GraphSplit(snap, nodes)


def _splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(f"temporal-{y}", "temporal", str(y), None, (("year", float(y)),))
        for y in PROTOCOL.test_years
    ]


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[GraphSplit, np.ndarray]:
    graph = pool.samples
    if not isinstance(graph, Graph):
        raise ValueError(
            f"split {split.name!r} needs a graph target pool; dataset {dataset!r} has "
            f"{type(graph).__name__}."
        )
    out = year_split(graph, int(split.param("year")))
    return out, out.labels


#: One split per test year.
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("temporal", 5, ("graph",), _splits, _generate),
)
