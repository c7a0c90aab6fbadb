"""Graph adapter: full-batch training on one graph with node masks, prediction on a snapshot.

A split's samples are a :class:`tasks.data.graphs.GraphSplit`: the graph as it stands for that split
(a snapshot of the years up to then, possibly perturbed) and the nodes whose predictions count.
The model's forward pass always sees the **whole** graph of the split, with its edges made
undirected (:func:`tasks.data.graphs.to_undirected`); only the rows of ``split.nodes`` are kept. No
neighbour sampling: ``NeighborLoader`` would need pyg-lib or torch-scatter, and the suites'
graphs fit in memory at once.

Recipe (paper App. H, ogbn-arxiv)
---------------------------------
Cross-entropy on the training nodes, Adam with the backbone's learning rate (1e-2) and weight
decay (5e-4), one full-batch step per epoch. After every epoch the validation accuracy is
measured on the validation split's graph; training stops when it has not improved for
``recipe.patience`` (20) epochs or after ``epochs`` (200), and the best epoch's weights are kept.

Speed: every message-passing operation allocates a tensor of tens of megabytes; the adapter
first switches glibc to keeping freed memory (:mod:`tasks.runtime.allocator`), which makes a training
step about ten times faster on the CPU and changes no number.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Final

import numpy as np
import torch
from torch import nn

from tasks.runtime.allocator import keep_freed_memory
from tasks.models.backbones.base import BackboneSpec
from tasks.data.graphs import Graph, GraphSplit, to_undirected
from tasks.models.modalities.base import FitReport, ModalityAdapter
from tasks.models.optim import adam
from tasks.runtime.progress import progress as show_progress

__all__ = ["ADAPTER", "GraphAdapter", "graph_tensors"]

logger = logging.getLogger("tasks.stages.train")


def graph_tensors(graph: Graph, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Features and undirected ``edge_index`` of a graph as tensors on ``device``."""
    x = torch.from_numpy(np.ascontiguousarray(graph.x)).to(device)
    edges = torch.from_numpy(to_undirected(graph.edge_index, graph.n_nodes)).to(device)
    return x, edges


def _as_split(samples: Any, what: str) -> GraphSplit:
    if not isinstance(samples, GraphSplit):
        raise TypeError(f"{what} must be a GraphSplit for the graph modality; got "
                        f"{type(samples).__name__}.")
    return samples


class GraphAdapter(ModalityAdapter):
    """Node classification on one graph per split, full batch."""

    name = "graph"
    cache_splits = False  # splits are cheap views of the dataset's graph; regenerated each time

    def size(self, samples: Any) -> int:
        return len(_as_split(samples, "samples"))

    def take(self, samples: Any, index: np.ndarray) -> Any:
        return _as_split(samples, "samples").take(index)

    def fit(
        self,
        model: nn.Module,
        recipe: BackboneSpec,
        spec: Any,
        train: tuple[Any, np.ndarray],
        val: tuple[Any, np.ndarray],
        *,
        epochs: int,
        seed: int,
        device: torch.device,
        progress: bool,
        key: str,
    ) -> FitReport:
        keep_freed_memory()  # large message tensors: see tasks/runtime/allocator.py (10x on CPU)
        train_split = _as_split(train[0], "train samples")
        val_split = _as_split(val[0], "validation samples")
        model.to(device)
        x, edges = graph_tensors(train_split.graph, device)
        nodes = torch.from_numpy(train_split.nodes).to(device)
        y = torch.from_numpy(np.asarray(train[1], dtype=np.int64)).to(device)
        vx, vedges = graph_tensors(val_split.graph, device)
        vnodes = torch.from_numpy(val_split.nodes).to(device)
        vy = torch.from_numpy(np.asarray(val[1], dtype=np.int64)).to(device)
        optimizer = adam(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay,
                         decoupled=recipe.optimizer != "adam")
        loss_fn = nn.CrossEntropyLoss()
        best_acc, best_epoch, best_state = -1.0, 0, None
        last_loss, ran = float("nan"), 0
        patience = recipe.patience
        epoch_bar = show_progress(range(1, epochs + 1), desc=f"train {key}", unit="epoch",
                                  enabled=progress)
        for epoch in epoch_bar:
            model.train()
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x, edges)[nodes], y)
            loss.backward()
            optimizer.step()
            last_loss, ran = float(loss.detach()), epoch
            if patience is None:
                continue
            model.eval()
            with torch.inference_mode():
                pred = model(vx, vedges)[vnodes].argmax(dim=1)
                acc = float((pred == vy).float().mean()) if vy.numel() else 0.0
            if acc > best_acc:
                best_acc, best_epoch = acc, epoch
                best_state = copy.deepcopy(model.state_dict())
            elif epoch - best_epoch >= patience:
                break
            if progress and epoch % 20 == 0:
                logger.info("%s epoch %d: loss %.4f, val acc %.4f (best %.4f at %d)",
                            key, epoch, last_loss, acc, best_acc, best_epoch)
        getattr(epoch_bar, "close", lambda: None)()  # early stopping leaves the bar open
        if best_state is not None:
            model.load_state_dict(best_state)
        logger.info("%s: %d epochs, kept epoch %s (val acc %.4f)", key, ran, best_epoch, best_acc)
        return FitReport(
            final_train_loss=last_loss,
            epochs_run=ran,
            best_epoch=best_epoch if best_state is not None else None,
            best_val_accuracy=best_acc if best_state is not None else None,
        )

    def predict(
        self, model: nn.Module, spec: Any, samples: Any, device: torch.device, batch_size: int
    ) -> np.ndarray:
        keep_freed_memory()
        split = _as_split(samples, "samples")
        model.to(device).eval()
        x, edges = graph_tensors(split.graph, device)
        with torch.inference_mode():
            logits = model(x, edges)[torch.from_numpy(split.nodes).to(device)]
        return logits.float().cpu().numpy().astype(np.float32, copy=False)


#: The graph adapter.
ADAPTER: Final[GraphAdapter] = GraphAdapter()
