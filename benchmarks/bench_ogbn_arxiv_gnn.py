"""Full-batch GNN training on ogbn-arxiv at real size, on CPU: seconds per epoch and peak RSS.

Reads the release under ``--root`` (the data root holding ``ogbn_arxiv/``; a generated one from
``benchmarks/synth_release.py ogbn-arxiv`` has the real node, edge and feature counts), or
generates it there first with ``--generate``. Each backbone of ``tasks/models/backbones/graph.py``
(``gcn``, ``sage``, ``gat``, ``gin``: 2 layers of 128 + linear head) runs in its own process, so
the peak resident memory (``ru_maxrss``) is that backbone's alone: the graph is read
(:func:`tasks.data.datasets.ogbn_arxiv.load_graph`, parsed-array cache), made undirected as the
graph adapter does, and the model is trained full batch with the paper's Adam recipe (learning
rate 1e-2, weight decay 5e-4) on the whole 2020 graph (every node's forward pass, the loss on
the training years <= 2010), then predicts once without gradients::

    flock /tmp/heavy.lock .venv/bin/python benchmarks/bench_ogbn_arxiv_gnn.py \\
        --root /tmp/synth-real/data --epochs 3 [--threads 2] [--backbones gcn sage gat gin]
        [--gat-heads 4]

Prints one JSON line per backbone and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_one(root: Path, backbone: str, epochs: int, threads: int, gat_heads: int) -> dict:
    """Train ``backbone`` full batch for ``epochs`` epochs in this process; return the figures."""
    import numpy as np
    import torch

    from tasks.data.datasets.ogbn_arxiv import N_CLASSES, load_graph
    from tasks.data.graphs import to_undirected
    from tasks.models.backbones import get_backbone

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    graph = load_graph(root)
    load_s = time.perf_counter() - t0
    rss_graph = _rss_mib()
    x = torch.from_numpy(np.ascontiguousarray(graph.x, dtype=np.float32))
    edges = torch.from_numpy(to_undirected(graph.edge_index, graph.n_nodes))
    y = torch.from_numpy(np.asarray(graph.y, dtype=np.int64))
    train = torch.from_numpy(np.asarray(graph.year) <= 2010)
    if backbone == "gat" and gat_heads != 4:
        from torch_geometric.nn import GATConv

        from tasks.models.backbones.graph import GRAPH_DROPOUT, GRAPH_HIDDEN, NodeClassifier

        h = GRAPH_HIDDEN
        model = NodeClassifier(
            [GATConv(x.shape[1] if i == 0 else h, h // gat_heads, heads=gat_heads)
             for i in range(2)], h, N_CLASSES, GRAPH_DROPOUT)
    else:
        model = get_backbone(backbone, N_CLASSES, (x.shape[1],))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
    times = []
    for _ in range(epochs):
        t = time.perf_counter()
        model.train()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x, edges)[train], y[train])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    model.eval()
    with torch.no_grad():
        acc = float((model(x, edges).argmax(1) == y).float().mean())
    predict_s = time.perf_counter() - t
    return {
        "backbone": backbone if backbone != "gat" or gat_heads == 4 else f"gat-{gat_heads}heads",
        "nodes": int(graph.n_nodes), "directed_edges": int(graph.edge_index.shape[1]),
        "undirected_edges": int(edges.shape[1]), "threads": threads, "epochs": epochs,
        "load_s": round(load_s, 2), "epoch_s": [round(v, 2) for v in times],
        "epoch_s_median": round(float(np.median(times)), 2), "predict_s": round(predict_s, 2),
        "rss_after_graph_mib": round(rss_graph), "peak_rss_mib": round(_rss_mib()),
        "final_loss": round(float(loss), 4), "accuracy_all_nodes": round(acc, 4),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--generate", action="store_true",
                        help="generate the release under --root first (synth_release.py)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--backbones", nargs="+", default=["gcn", "sage", "gat", "gin"])
    parser.add_argument("--gat-heads", type=int, default=4)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.root, args.one, args.epochs, args.threads, args.gat_heads)))
        return 0
    if args.generate:
        from benchmarks.synth_release import generate

        generate("ogbn-arxiv", args.root)
    from tasks.data.datasets.ogbn_arxiv import load_graph

    load_graph(args.root)  # parse the CSVs once (writes the cache) before the timed children
    results = []
    for name in args.backbones:
        cmd = [sys.executable, __file__, "--root", str(args.root), "--epochs", str(args.epochs),
               "--threads", str(args.threads), "--gat-heads", str(args.gat_heads), "--one", name]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
            result = {"backbone": name, "failed": tail[0],
                      "returncode": proc.returncode}
        else:
            result = json.loads(proc.stdout.strip().splitlines()[-1])
        print(json.dumps(result), flush=True)
        results.append(result)
    print("\n| backbone | s / epoch (median) | predict s | peak RSS MiB |\n| --- | --- | --- | --- |")
    for r in results:
        if "failed" in r:
            print(f"| {r['backbone']} | failed: {r['failed']} | | |")
        else:
            print(f"| {r['backbone']} | {r['epoch_s_median']} | {r['predict_s']} | "
                  f"{r['peak_rss_mib']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
