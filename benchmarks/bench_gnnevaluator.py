"""Cost of GNNEvaluator (:mod:`tasks.models.gnnevaluator`): fit, meta-set build and estimate times.

Fits the evaluator on a synthetic snapshot (default: 5,000 validation nodes in a 30,000-node graph
with ~240k undirected edges, 128-d features) with a briefly trained 2-layer GCN of 128 units and
prints the figures quoted in the module's "Cost" section. Run on a quiet machine::

    .venv/bin/python benchmarks/bench_gnnevaluator.py [--threads 1] [--induced]

Needs ``torch-geometric`` (the ``graph`` extra).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.data.graphs import Graph, GraphSplit, to_undirected  # noqa: E402  (repository root first)
from tasks.models.gnnevaluator import GNNEvaluatorConfig, fit_gnnevaluator  # noqa: E402


def _synthetic_graph(n_nodes: int, n_features: int, n_classes: int, degree: int,
                     homophily: float, rng: np.random.Generator) -> Graph:
    y = rng.integers(0, n_classes, n_nodes)
    centers = rng.normal(0.0, 1.0, (n_classes, n_features))
    x = (centers[y] * 0.4 + rng.normal(0.0, 1.0, (n_nodes, n_features))).astype(np.float32)
    n_edges = n_nodes * degree // 2
    src = rng.integers(0, n_nodes, n_edges)
    by_class = [np.flatnonzero(y == c) for c in range(n_classes)]
    same = rng.random(n_edges) < homophily
    dst = rng.integers(0, n_nodes, n_edges)
    for c in range(n_classes):
        rows = np.flatnonzero(same & (y[src] == c))
        dst[rows] = by_class[c][rng.integers(0, by_class[c].shape[0], rows.shape[0])]
    return Graph(x=x, edge_index=np.stack([src, dst]), y=y, year=np.zeros(n_nodes, np.int64))


class _BenchGCN(nn.Module):
    """Two-layer GCN encoder plus a linear head (the interface :func:`fit_gnnevaluator` needs)."""

    def __init__(self, n_features: int, hidden: int, n_classes: int) -> None:
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv1 = GCNConv(n_features, hidden)
        self.conv2 = GCNConv(hidden, hidden)
        self.head = nn.Linear(hidden, n_classes)

    def embed(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv2(F.relu(self.conv1(x, edge_index)), edge_index))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x, edge_index))


def bench_gnnevaluator(
    n_nodes: int = 30_000,
    n_val: int = 5_000,
    n_features: int = 128,
    n_classes: int = 10,
    hidden: int = 128,
    config: GNNEvaluatorConfig | None = None,
    threads: int = 1,
    seed: int = 0,
) -> dict[str, float]:
    """Time :func:`fit_gnnevaluator` on a synthetic snapshot with a briefly trained GCN.

    Parameters
    ----------
    n_nodes, n_val, n_features, n_classes, hidden : int
        Snapshot size, validation nodes, feature width, classes, GCN width.
    config : GNNEvaluatorConfig, optional
        Evaluator settings (defaults if omitted).
    threads : int
        ``torch.set_num_threads`` during the run (restored afterwards).
    seed : int
        Seeds the graph and the classifier.

    Returns
    -------
    dict
        ``fit_seconds``, ``meta_build_seconds``, ``estimate_seconds``, ``meta_rmse``,
        ``constant_rmse``, ``val_accuracy``, ``val_estimate``, ``epochs_run``.
    """
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rng = np.random.default_rng(seed)
        graph = _synthetic_graph(n_nodes, n_features, n_classes, 8, 0.7, rng)
        order = rng.permutation(n_nodes)
        train = GraphSplit(graph, np.sort(order[n_val:2 * n_val]))
        val = GraphSplit(graph, np.sort(order[:n_val]))
        torch.manual_seed(seed)
        model = _BenchGCN(n_features, hidden, n_classes)
        x = torch.from_numpy(graph.x)
        ei = torch.from_numpy(to_undirected(graph.edge_index, graph.n_nodes))
        y = torch.from_numpy(graph.y)
        idx = torch.from_numpy(train.nodes)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(20):
            opt.zero_grad()
            F.cross_entropy(model(x, ei)[idx], y[idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            val_acc = float((model(x, ei).argmax(1)[torch.from_numpy(val.nodes)]
                             == y[torch.from_numpy(val.nodes)]).float().mean())
        fitted = fit_gnnevaluator(model, train, val, config)
        t0 = time.perf_counter()
        estimate = fitted.estimate(val)
        diag = fitted.diagnostics()
        return {
            "fit_seconds": fitted.fit_seconds_,
            "meta_build_seconds": diag["meta_build_seconds"],
            "estimate_seconds": time.perf_counter() - t0,
            "meta_rmse": fitted.meta_rmse_,
            "constant_rmse": diag["constant_rmse"],
            "val_accuracy": val_acc,
            "val_estimate": estimate,
            "epochs_run": float(diag["epochs_run"]),
        }
    finally:
        torch.set_num_threads(old_threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=30_000, help="nodes in the snapshot")
    parser.add_argument("--val", type=int, default=5_000, help="validation nodes")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--induced", action="store_true",
                        help="run the model on the validation subgraph (config induced=True)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = replace(GNNEvaluatorConfig(), induced=True) if args.induced else None
    figures = bench_gnnevaluator(n_nodes=args.nodes, n_val=args.val, config=config,
                                 threads=args.threads, seed=args.seed)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
