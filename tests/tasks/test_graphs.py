"""Graph types: validation of what loaders produce, snapshots, undirected edges, splits."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.data.graphs import Graph, GraphSplit, to_undirected
from tests.tasks._graph_fake import make_graph


def _g(**kw):
    base = dict(
        x=np.zeros((4, 2), np.float32), edge_index=np.array([[1, 2, 3], [0, 0, 1]]),
        y=np.array([0, 1, 0, 1]), year=np.array([2000, 2001, 2002, 2002]),
    )
    base.update(kw)
    return Graph(**base)


def test_edges_pointing_at_missing_nodes_are_named() -> None:
    with pytest.raises(ValueError, match=r"edge 1 is 2 -> 7, but node ids must be in \[0, 4\)"):
        _g(edge_index=np.array([[1, 2], [0, 7]]))
    with pytest.raises(ValueError, match="missing node"):
        _g(edge_index=np.array([[-1], [0]]))


def test_missing_or_short_years_and_bad_features_are_refused() -> None:
    with pytest.raises(ValueError, match=r"one year per node \(4\); got 3 \(years missing\?\)"):
        _g(year=np.array([2000, 2001, 2002]))
    with pytest.raises(ValueError, match="graph year has missing"):
        _g(year=np.array([2000.0, np.nan, 2002.0, 2002.0]))
    with pytest.raises(ValueError, match="NaN or infinite feature .*node 2"):
        _g(x=np.array([[0, 0], [0, 0], [np.inf, 0], [0, 0]], np.float32))
    with pytest.raises(ValueError, match="one label per node"):
        _g(y=np.array([0, 1]))
    with pytest.raises(ValueError, match=r"shape \(2, n_edges\)"):
        _g(edge_index=np.zeros((3, 2), np.int64))


def test_snapshot_keeps_the_past_and_edges_between_it() -> None:
    g = _g()
    snap, ids = g.snapshot(2001)
    assert ids.tolist() == [0, 1] and snap.n_nodes == 2
    assert snap.edge_index.tolist() == [[1], [0]]
    full, ids = g.snapshot(2002)
    assert full.n_edges == 3 and ids.tolist() == [0, 1, 2, 3]


def test_to_undirected_is_symmetric_without_loops_or_duplicates() -> None:
    e = to_undirected(np.array([[0, 1, 1, 2], [1, 0, 1, 0]]), 3)
    pairs = set(map(tuple, e.T.tolist()))
    assert pairs == {(0, 1), (1, 0), (0, 2), (2, 0)} and e.shape[1] == 4


def test_split_validates_nodes_and_takes_subsets() -> None:
    g = make_graph(n_per_year=5, years=range(2010, 2013))
    s = GraphSplit(g, np.array([3, 7, 9]))
    assert len(s) == 3 and s.labels.tolist() == g.y[[3, 7, 9]].tolist()
    assert s.take(np.array([2, 0])).nodes.tolist() == [9, 3]
    with pytest.raises(ValueError, match=r"split nodes must be ids in \[0, 15\)"):
        GraphSplit(g, np.array([0, 15]))
