"""A tiny temporal graph dataset for tests: homophilous citations, class features, 2005-2020."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.temporal import temporal_source_splits, temporal_target_pool
from tasks.data.graphs import Graph

TINY_GRAPH_CLASSES = 3
TINY_GRAPH_FEATURES = 8


def make_graph(
    n_per_year: int = 40, years: range = range(2005, 2021), seed: int = 0, drift: float = 0.15
) -> Graph:
    """Papers of ``n_per_year`` per year; features = class mean (rotating with time) + noise;
    each paper cites 3 earlier papers, of its class with probability 0.8."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 1.0, size=(TINY_GRAPH_CLASSES, TINY_GRAPH_FEATURES))
    other = rng.normal(0.0, 1.0, size=(TINY_GRAPH_CLASSES, TINY_GRAPH_FEATURES))
    xs, ys, yrs, src, dst = [], [], [], [], []
    n = 0
    for i, year in enumerate(years):
        y = rng.integers(0, TINY_GRAPH_CLASSES, size=n_per_year)
        angle = drift * i
        mu = np.cos(angle) * means + np.sin(angle) * other
        xs.append(mu[y] + rng.normal(0.0, 1.2, size=(n_per_year, TINY_GRAPH_FEATURES)))
        ys.append(y)
        yrs.append(np.full(n_per_year, year))
        if n:
            prev_y = np.concatenate(ys[:-1])
            for j in range(n_per_year):
                same = np.flatnonzero(prev_y == y[j])
                pool = same if (rng.random() < 0.8 and same.size) else np.arange(n)
                for t in rng.choice(pool, size=min(3, pool.size), replace=False):
                    src.append(n + j)
                    dst.append(int(t))
        n += n_per_year
    return Graph(
        x=np.concatenate(xs).astype(np.float32),
        edge_index=np.array([src, dst], dtype=np.int64).reshape(2, -1),
        y=np.concatenate(ys),
        year=np.concatenate(yrs),
    )


def _raw(root: Path) -> list[Path]:
    return [Path(root) / "tiny-graph" / "graph.npz"]


def _stage(root: Path) -> list[Path]:
    [path] = _raw(root)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        g = make_graph()
        np.savez(path, x=g.x, edge_index=g.edge_index, y=g.y, year=g.year)
    return [path]


def _load(root: Path) -> Graph:
    with np.load(_raw(root)[0], allow_pickle=False) as d:
        return Graph(d["x"], d["edge_index"], d["y"], d["year"])


def _source(root: Path) -> SourceSplits:
    return temporal_source_splits(_load(root), TINY_GRAPH_CLASSES)


def _pool(root: Path) -> TargetPool:
    return temporal_target_pool(_load(root), TINY_GRAPH_CLASSES)


def tiny_graph_spec(n_classes: int = TINY_GRAPH_CLASSES) -> DatasetSpec:
    """The spec of dataset ``tiny-graph`` (suite ``tiny-graph``)."""
    return DatasetSpec(
        name="tiny-graph", suite="tiny-graph", description="test-only temporal graph",
        modality="graph", n_classes=n_classes,
        class_names=tuple(f"c{i}" for i in range(n_classes)),
        input_shape=(TINY_GRAPH_FEATURES,), target_families=("clean", "temporal", "structural"),
        stage=_stage, raw_files=_raw, load_source=_source, load_target_pool=_pool,
    )
