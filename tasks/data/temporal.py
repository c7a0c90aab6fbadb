"""The paper's temporal protocol for graph datasets with publication years (App. F, App. H).

=====================  ===============================================================
era                    use
=====================  ===============================================================
year <= 2010           training nodes; the forward pass sees the 2010 snapshot
2011                   held out: the in-distribution base year of the ``clean`` and
                       ``structural`` target splits (neither trained nor validated on)
2012 - 2014            validation nodes (temperature, ATC thresholds, ALSA anchors,
                       early stopping); the forward pass sees the 2014 snapshot
2015, ..., 2020        one ``temporal`` target split per year, on that year's snapshot
=====================  ===============================================================

The paper trains "before 2011" and validates on 2012-2014 and is silent on 2011. Keeping 2011
out of both gives a year that is as close to the training distribution as the data allows
without being trained on: the natural base for shifts that are *not* temporal (edge drop,
feature noise, class priors), so those isolate their own effect from time.

A snapshot keeps the nodes published up to its year and the edges between them
(:meth:`tasks.data.graphs.Graph.snapshot`): citations point backwards in time, so these are exactly
the edges that existed then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from tasks.data.spec import SourceSplits, TargetPool
from tasks.data.graphs import Graph, GraphSplit

__all__ = ["PROTOCOL", "TemporalProtocol", "temporal_source_splits", "temporal_target_pool"]


@dataclass(frozen=True)
class TemporalProtocol:
    """Years of each era (see the module docstring)."""

    train_last_year: int = 2010
    held_out_year: int = 2011
    val_years: tuple[int, int] = (2012, 2014)
    test_years: tuple[int, ...] = (2015, 2016, 2017, 2018, 2019, 2020)


#: The paper's protocol.
PROTOCOL: Final[TemporalProtocol] = TemporalProtocol()


def _check_labels(graph: Graph, n_classes: int, where: str) -> None:
    if graph.y.size and int(graph.y.max()) >= n_classes:
        bad = int(graph.y.max())
        raise ValueError(
            f"{where} has label {bad}, but the dataset has {n_classes} classes (labels "
            f"0..{n_classes - 1}): the class counts of training and target data disagree."
        )


def _require_nodes(mask: np.ndarray, what: str) -> np.ndarray:
    nodes = np.flatnonzero(mask).astype(np.int64)
    if nodes.size == 0:
        raise ValueError(f"the graph has no {what}; check its year array.")
    return nodes


def temporal_source_splits(
    graph: Graph, n_classes: int, protocol: TemporalProtocol = PROTOCOL
) -> SourceSplits:
    """Training nodes (year <= 2010, 2010 snapshot) and validation nodes (2012-2014, 2014 snapshot).

    Parameters
    ----------
    graph : Graph
        The whole graph, every year.
    n_classes : int
        Number of classes of the dataset; labels must lie in ``[0, n_classes)``.
    protocol : TemporalProtocol, optional
        Years of each era.

    Returns
    -------
    SourceSplits
        ``train_x``/``val_x`` are :class:`~tasks.data.graphs.GraphSplit` on their snapshots.

    Raises
    ------
    ValueError
        If an era has no nodes, or a label is out of range.
    """
    _check_labels(graph, n_classes, "the graph")
    train_graph, _ = graph.snapshot(protocol.train_last_year)
    train_nodes = _require_nodes(
        np.ones(train_graph.n_nodes, dtype=bool),
        f"training nodes (year <= {protocol.train_last_year})",
    )
    first, last = protocol.val_years
    val_graph, _ = graph.snapshot(last)
    val_nodes = _require_nodes(
        (val_graph.year >= first) & (val_graph.year <= last),
        f"validation nodes (years {first}-{last})",
    )
    return SourceSplits(
        train_x=GraphSplit(train_graph, train_nodes),
        train_y=train_graph.y[train_nodes],
        val_x=GraphSplit(val_graph, val_nodes),
        val_y=val_graph.y[val_nodes],
    )


def temporal_target_pool(graph: Graph, n_classes: int) -> TargetPool:
    """The whole graph as the target pool; the graph shift families cut their splits from it.

    Raises
    ------
    ValueError
        If a label is out of range for ``n_classes``.
    """
    _check_labels(graph, n_classes, "the target graph")
    return TargetPool(samples=graph, labels=graph.y, n_classes=n_classes)
