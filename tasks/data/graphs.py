"""Graph data for node classification: a citation graph with publication years, and its splits.

A :class:`Graph` is one attributed graph (node features, directed citation edges, labels, the
year each node appeared). A :class:`GraphSplit` is what a model is evaluated on: a graph **as it
stands at some time** (or perturbed) plus the nodes to classify in it. The graph modality's
adapter (:mod:`tasks.models.modalities.graph`) runs the model full-batch on ``split.graph`` and keeps the
rows of ``split.nodes``.

Snapshots
---------
``graph.snapshot(year)`` keeps the nodes published up to ``year`` and the edges between them: a
paper can only cite papers that exist, so these are exactly the edges that existed at the end of
``year``. Node ids are renumbered ``0 .. n_kept - 1`` in their original order; the original ids
come back as the second return value.

Checks
------
Construction validates everything a loader could get wrong and names it: edges pointing at
missing nodes, a years array of the wrong length or with missing values, non-finite features,
negative labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Graph", "GraphSplit", "to_undirected"]


def _as_int_array(value: object, name: str, ndim: int) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d integer array; got shape {arr.shape}.")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} has missing (NaN) or infinite values.")
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError(f"{name} must hold integers; got dtype {arr.dtype} with fractions.")
    return arr.astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class Graph:
    """A node-classification graph with publication years.

    Attributes
    ----------
    x : numpy.ndarray
        ``(n_nodes, n_features)`` ``float32`` node features.
    edge_index : numpy.ndarray
        ``(2, n_edges)`` ``int64`` directed edges ``source -> target`` (citing -> cited), ids in
        ``[0, n_nodes)``. GNNs see them undirected (:func:`to_undirected`).
    y : numpy.ndarray
        ``(n_nodes,)`` ``int64`` labels in ``[0, n_classes)``.
    year : numpy.ndarray
        ``(n_nodes,)`` ``int64`` publication year of every node.

    Raises
    ------
    ValueError
        If shapes disagree, an edge points at a missing node, a year or label is missing or
        negative, or a feature is not finite.
    """

    x: np.ndarray = field(repr=False)
    edge_index: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    year: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        x = np.asarray(self.x)
        if x.ndim != 2:
            raise ValueError(f"graph x must be (n_nodes, n_features); got shape {x.shape}.")
        if not np.issubdtype(x.dtype, np.number):
            raise ValueError(f"graph x must be numeric; got dtype {x.dtype}.")
        x = x.astype(np.float32, copy=False)
        if not np.all(np.isfinite(x)):
            bad = int(np.flatnonzero(~np.isfinite(x).all(axis=1))[0])
            raise ValueError(f"graph x has a NaN or infinite feature (first at node {bad}).")
        n = x.shape[0]
        edges = _as_int_array(self.edge_index, "graph edge_index", 2)
        if edges.shape[0] != 2:
            raise ValueError(f"graph edge_index must have shape (2, n_edges); got {edges.shape}.")
        if edges.size and (edges.min() < 0 or edges.max() >= n):
            col = int(np.flatnonzero((edges < 0).any(axis=0) | (edges >= n).any(axis=0))[0])
            raise ValueError(
                f"graph edge_index has an edge pointing at a missing node: edge {col} is "
                f"{int(edges[0, col])} -> {int(edges[1, col])}, but node ids must be in "
                f"[0, {n})."
            )
        y = _as_int_array(self.y, "graph y", 1)
        year = _as_int_array(self.year, "graph year", 1)
        if y.shape[0] != n:
            raise ValueError(f"graph y must hold one label per node ({n}); got {y.shape[0]}.")
        if year.shape[0] != n:
            raise ValueError(
                f"graph year must hold one year per node ({n}); got {year.shape[0]} (years "
                f"missing?)."
            )
        if y.size and y.min() < 0:
            raise ValueError(f"graph y must hold labels >= 0; got {int(y.min())}.")
        if year.size and year.min() < 0:
            raise ValueError(f"graph year must hold years >= 0; got {int(year.min())}.")
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "edge_index", edges)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "year", year)

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return int(self.x.shape[0])

    @property
    def n_edges(self) -> int:
        """Number of directed edges."""
        return int(self.edge_index.shape[1])

    @property
    def n_features(self) -> int:
        """Width of a node's feature vector."""
        return int(self.x.shape[1])

    def subgraph(self, keep: np.ndarray) -> Graph:
        """The graph induced by a boolean node mask, ids renumbered in order.

        Parameters
        ----------
        keep : numpy.ndarray
            ``(n_nodes,)`` boolean mask.

        Returns
        -------
        Graph
            The kept nodes and the edges with both ends kept.
        """
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (self.n_nodes,):
            raise ValueError(f"keep must be a ({self.n_nodes},) mask; got shape {keep.shape}.")
        new_id = np.full(self.n_nodes, -1, dtype=np.int64)
        new_id[keep] = np.arange(int(keep.sum()), dtype=np.int64)
        src, dst = self.edge_index
        both = keep[src] & keep[dst]
        return Graph(
            x=self.x[keep],
            edge_index=np.stack([new_id[src[both]], new_id[dst[both]]]),
            y=self.y[keep],
            year=self.year[keep],
        )

    def snapshot(self, year: int) -> tuple[Graph, np.ndarray]:
        """The graph as it stood at the end of ``year``.

        Parameters
        ----------
        year : int
            Last publication year kept.

        Returns
        -------
        graph : Graph
            Nodes with ``self.year <= year`` and the edges between them, ids renumbered.
        original_ids : numpy.ndarray
            ``int64`` id in ``self`` of every node of ``graph``.
        """
        keep = self.year <= int(year)
        return self.subgraph(keep), np.flatnonzero(keep).astype(np.int64)


@dataclass(frozen=True, eq=False)
class GraphSplit:
    """Nodes to classify in a graph as it stands for this split.

    Attributes
    ----------
    graph : Graph
        The graph the model's forward pass sees (a snapshot, possibly perturbed).
    nodes : numpy.ndarray
        ``int64`` ids in ``graph`` of the nodes whose predictions count, in order.
    """

    graph: Graph = field(repr=False)
    nodes: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        nodes = _as_int_array(self.nodes, "split nodes", 1)
        if nodes.size and (nodes.min() < 0 or nodes.max() >= self.graph.n_nodes):
            raise ValueError(
                f"split nodes must be ids in [0, {self.graph.n_nodes}); got ids from "
                f"{int(nodes.min())} to {int(nodes.max())}."
            )
        object.__setattr__(self, "nodes", nodes)

    def __len__(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def labels(self) -> np.ndarray:
        """``int64`` labels of the split's nodes."""
        return self.graph.y[self.nodes]

    def take(self, index: np.ndarray) -> GraphSplit:
        """The same graph with a subset of the nodes (positions into ``nodes``)."""
        return GraphSplit(self.graph, self.nodes[np.asarray(index, dtype=np.int64)])


def to_undirected(edge_index: np.ndarray, n_nodes: int) -> np.ndarray:
    """Both directions of every edge, self-loops and duplicates removed, sorted.

    Parameters
    ----------
    edge_index : numpy.ndarray
        ``(2, n_edges)`` ``int64``.
    n_nodes : int
        Number of nodes (for the sort key).

    Returns
    -------
    numpy.ndarray
        ``(2, m)`` ``int64``, sorted by (source, target), no self-loops, each pair once per
        direction.
    """
    src, dst = np.asarray(edge_index, dtype=np.int64)
    both_src = np.concatenate([src, dst])
    both_dst = np.concatenate([dst, src])
    keep = both_src != both_dst
    key = np.unique(both_src[keep] * np.int64(n_nodes) + both_dst[keep])
    return np.stack([key // n_nodes, key % n_nodes]).astype(np.int64)
