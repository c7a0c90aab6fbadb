"""Train the quick GCN on ``arxiv-sim`` and plot its accuracy and the class priors by year.

The GCN is the calibration model of :mod:`tasks.data.datasets.arxiv_sim`: 2 ``GCNConv`` layers
(hidden 64, ReLU, dropout 0.5), Adam (lr 1e-2, weight decay 5e-4), full batch on
``snapshot(2010)`` with all its nodes as training nodes, early stopping on the accuracy of the
2012-2014 papers (forward pass on ``snapshot(2014)``) with patience 20, at most 200 epochs.
Each year's papers are then classified on ``snapshot(year)``. Edges are used undirected
(:func:`tasks.data.graphs.to_undirected`).

Writes ``docs/graph/arxiv-sim-drift.png`` with two panels: accuracy by year (train / validation
/ test eras shaded) and the empirical class priors by year (stacked area). Run from the
repository root::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/plot_arxiv_sim.py
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/plot_arxiv_sim.py --no-plot --seeds 0 1
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch_geometric.nn import GCNConv  # noqa: E402

from tasks.data.datasets.arxiv_sim import (  # noqa: E402
    CLASS_NAMES,
    DATASET_SEED,
    ID_YEAR,
    TEST_YEARS,
    TRAIN_LAST_YEAR,
    VAL_YEARS,
    ArxivSimConfig,
    generate_arxiv_sim,
)
from tasks.data.graphs import Graph, to_undirected  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "docs" / "graph" / "arxiv-sim-drift.png"


class QuickGCN(torch.nn.Module):
    """Two GCNConv layers with ReLU and dropout."""

    def __init__(self, d_in: int, hidden: int, n_classes: int) -> None:
        super().__init__()
        self.conv1 = GCNConv(d_in, hidden)
        self.conv2 = GCNConv(hidden, n_classes)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv1(x, edge_index))
        h = torch.nn.functional.dropout(h, p=0.5, training=self.training)
        return self.conv2(h, edge_index)


def _tensors(graph: Graph) -> tuple[torch.Tensor, torch.Tensor]:
    ei = to_undirected(graph.edge_index, graph.n_nodes)
    return torch.from_numpy(graph.x), torch.from_numpy(ei)


def quick_gcn_accuracy_by_year(
    graph: Graph,
    seed: int = 0,
    *,
    hidden: int = 64,
    max_epochs: int = 200,
    patience: int = 20,
    train_last_year: int = TRAIN_LAST_YEAR,
    val_years: tuple[int, ...] = VAL_YEARS,
) -> tuple[dict[int, float], float, int]:
    """Train the quick GCN and return (accuracy by year, val accuracy, epochs run)."""
    torch.manual_seed(seed)
    n_classes = int(graph.y.max()) + 1
    train_g, _ = graph.snapshot(train_last_year)
    val_g, _ = graph.snapshot(max(val_years))
    tx, tei = _tensors(train_g)
    ty = torch.from_numpy(train_g.y)
    vx, vei = _tensors(val_g)
    vmask = torch.from_numpy(np.isin(val_g.year, val_years))
    vy = torch.from_numpy(val_g.y)
    model = QuickGCN(graph.n_features, hidden, n_classes)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
    best, best_state, wait, epoch = -1.0, None, 0, 0
    for epoch in range(1, max_epochs + 1):
        model.train()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(tx, tei), ty)
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            acc = (model(vx, vei)[vmask].argmax(1) == vy[vmask]).float().mean().item()
        if acc > best:
            best, wait = acc, 0
            best_state = {k: t.clone() for k, t in model.state_dict().items()}
        else:
            wait += 1
            if wait >= patience:
                break
    assert best_state is not None
    model.load_state_dict(best_state)
    model.eval()
    by_year: dict[int, float] = {}
    with torch.no_grad():
        for year in np.unique(graph.year):
            snap, _ = graph.snapshot(int(year))
            x, ei = _tensors(snap)
            mask = snap.year == year
            pred = model(x, ei).argmax(1).numpy()[mask]
            by_year[int(year)] = float(np.mean(pred == snap.y[mask]))
    return by_year, best, epoch


def graph_stats(graph: Graph) -> dict[int, tuple[int, float, float]]:
    """Per year: papers, mean out-degree, fraction of same-class citations made that year."""
    src, dst = graph.edge_index
    out: dict[int, tuple[int, float, float]] = {}
    for year in np.unique(graph.year):
        nodes = graph.year == year
        e = nodes[src]
        same = float(np.mean(graph.y[src[e]] == graph.y[dst[e]])) if e.any() else float("nan")
        out[int(year)] = (int(nodes.sum()), float(e.sum() / nodes.sum()), same)
    return out


def plot(graph: Graph, accs: list[dict[int, float]], path: Path) -> None:
    """Write the two-panel figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    years = np.unique(graph.year)
    n_classes = int(graph.y.max()) + 1
    priors = np.stack(
        [np.bincount(graph.y[graph.year == t], minlength=n_classes) for t in years]
    ).astype(float)
    priors /= priors.sum(axis=1, keepdims=True)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    acc = np.array([[a[int(t)] for t in years] for a in accs])
    mean = acc.mean(axis=0)
    for row in acc:
        ax1.plot(years, 100 * row, color="C0", alpha=0.25, lw=1)
    ax1.plot(years, 100 * mean, color="C0", marker="o", ms=3, lw=2,
             label=f"GCN, mean of {len(accs)} seeds (≤2010: training nodes)")
    ax1.axvspan(years[0] - 0.5, TRAIN_LAST_YEAR + 0.5, color="0.85", label="train (≤2010)")
    ax1.axvspan(ID_YEAR - 0.5, ID_YEAR + 0.5, color="C0", alpha=0.12,
                label="2011: in-distribution held-out year")
    ax1.axvspan(min(VAL_YEARS) - 0.5, max(VAL_YEARS) + 0.5, color="C2", alpha=0.2,
                label="validation (2012–2014)")
    ax1.axvspan(min(TEST_YEARS) - 0.5, max(TEST_YEARS) + 0.5, color="C3", alpha=0.15,
                label="test, one split per year")
    ax1.axhline(100 * priors[-1].max(), color="0.4", ls=":", lw=1,
                label="majority class of 2020")
    ax1.set_xlabel("publication year")
    ax1.set_ylabel("accuracy (%) on snapshot(year)")
    ax1.set_title("arxiv-sim: GCN trained on ≤2010")
    ax1.set_ylim(0, 100)
    ax1.set_xlim(years[0] - 0.5, years[-1] + 0.5)
    ax1.legend(loc="lower left", fontsize=8)

    names = list(CLASS_NAMES[:n_classes]) + [str(c) for c in range(len(CLASS_NAMES), n_classes)]
    colors = plt.get_cmap("tab10" if n_classes <= 10 else "tab20").colors
    ax2.stackplot(years, priors.T, labels=names, colors=colors[:n_classes])
    ax2.axvline(TRAIN_LAST_YEAR + 0.5, color="k", lw=1, ls="--")
    ax2.axvline(min(TEST_YEARS) - 0.5, color="k", lw=1, ls="--")
    ax2.set_xlim(years[0], years[-1])
    ax2.set_ylim(0, 1)
    ax2.set_xlabel("publication year")
    ax2.set_ylabel("class share of the year's papers")
    ax2.set_title("class priors by year")
    ax2.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="GCN seeds")
    parser.add_argument("--graph-seed", type=int, default=DATASET_SEED)
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--stats", action="store_true", help="print per-year graph statistics")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    start = time.perf_counter()
    graph = generate_arxiv_sim(ArxivSimConfig(), seed=args.graph_seed)
    gen_s = time.perf_counter() - start
    print(f"generated {graph.n_nodes} nodes, {graph.n_edges} edges in {gen_s:.2f} s")
    if args.stats:
        for year, (n, deg, same) in graph_stats(graph).items():
            print(f"  {year}: {n:5d} papers, out-degree {deg:4.2f}, same-class {same:.2f}")
    accs = []
    for seed in args.seeds:
        start = time.perf_counter()
        acc, val, epochs = quick_gcn_accuracy_by_year(graph, seed)
        accs.append(acc)
        val_years = ", ".join(f"{y}: {100 * acc[y]:.1f}" for y in VAL_YEARS)
        tests = ", ".join(f"{y}: {100 * acc[y]:.1f}" for y in TEST_YEARS)
        print(
            f"seed {seed}: {epochs} epochs, {time.perf_counter() - start:.1f} s; train(2010) "
            f"{100 * acc[TRAIN_LAST_YEAR]:.1f}, 2011 {100 * acc[2011]:.1f}; val {100 * val:.1f} "
            f"({val_years}); test {tests}"
        )
    if len(accs) > 1:
        mean = {y: float(np.mean([a[y] for a in accs])) for y in accs[0]}
        print("mean: " + ", ".join(f"{y}: {100 * mean[y]:.1f}" for y in range(2010, 2021)))
    if not args.no_plot:
        plot(graph, accs, args.out)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
