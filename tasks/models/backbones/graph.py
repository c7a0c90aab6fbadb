"""Graph backbones: GNN node classifiers from ``torch_geometric.nn``, trained full batch.

Every entry builds a :class:`NodeClassifier`: two message-passing layers of width 128 (ReLU,
dropout 0.5) then a linear head, so three learned layers as in the usual ogbn-arxiv baselines.
``model(x, edge_index)`` returns the logits of every node; ``model.embed(x, edge_index)`` the
128-d node embeddings before the head (GNNEvaluator's DiscGraph features use them).

torch-geometric 2.8 runs these layers in pure Python (no pyg-lib, torch-scatter or
torch-sparse needed), which is what keeps the graph suite offline-installable. The recipe is the
paper's (App. H, ogbn-arxiv): Adam, learning rate 1e-2, weight decay 5e-4, early stopping when
validation accuracy has not improved for 20 epochs (at most 200 epochs).

======  ====================================================================
key     layers
======  ====================================================================
gcn     ``GCNConv`` (Kipf & Welling 2017), symmetric normalisation, self-loops
sage    ``SAGEConv`` (Hamilton et al. 2017), mean aggregation, root weight
gat     ``GATConv`` (Velickovic et al. 2018), 4 heads of 32 concatenated
gin     ``GINConv`` (Xu et al. 2019), each with a 2-layer MLP, learnable eps off
======  ====================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import torch
from torch import nn

from tasks.models.backbones.base import BackboneSpec

__all__ = ["GRAPH_DROPOUT", "GRAPH_HIDDEN", "NodeClassifier", "SPECS"]

#: Width of the node embeddings.
GRAPH_HIDDEN: Final[int] = 128
#: Dropout after every message-passing layer (training only).
GRAPH_DROPOUT: Final[float] = 0.5
_LAYERS: Final[int] = 2


class NodeClassifier(nn.Module):
    """Message-passing encoder plus a linear head.

    Parameters
    ----------
    convs : list of torch.nn.Module
        Message-passing layers ``conv(x, edge_index)``; the last outputs ``hidden`` features.
    hidden : int
        Width of the embeddings.
    n_classes : int
        Number of outputs.
    dropout : float
        Dropout after every layer.
    """

    def __init__(
        self, convs: list[nn.Module], hidden: int, n_classes: int, dropout: float
    ) -> None:
        super().__init__()
        self.convs = nn.ModuleList(convs)
        self.dropout = float(dropout)
        self.head = nn.Linear(hidden, n_classes)

    def embed(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Node embeddings ``(n_nodes, hidden)`` before the head."""
        for conv in self.convs:
            x = torch.relu(conv(x, edge_index))
            x = nn.functional.dropout(x, p=self.dropout, training=self.training)
        return x

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Logits ``(n_nodes, n_classes)``; ``edge_index`` undirected, ``(2, n_edges)``."""
        return self.head(self.embed(x, edge_index))


def _features(name: str, shape: tuple[int, ...]) -> int:
    if len(shape) != 1:
        raise ValueError(
            f"backbone {name!r} needs node feature vectors, input_shape=(n_features,); got "
            f"input_shape={shape}."
        )
    return int(shape[0])


def _gcn(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    from torch_geometric.nn import GCNConv

    d, h = _features("gcn", shape), GRAPH_HIDDEN
    convs = [GCNConv(d if i == 0 else h, h) for i in range(_LAYERS)]
    return NodeClassifier(convs, h, n_classes, GRAPH_DROPOUT)


def _sage(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    from torch_geometric.nn import SAGEConv

    d, h = _features("sage", shape), GRAPH_HIDDEN
    convs = [SAGEConv(d if i == 0 else h, h, aggr="mean") for i in range(_LAYERS)]
    return NodeClassifier(convs, h, n_classes, GRAPH_DROPOUT)


def _gat(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    from torch_geometric.nn import GATConv

    d, h, heads = _features("gat", shape), GRAPH_HIDDEN, 4
    convs = [GATConv(d if i == 0 else h, h // heads, heads=heads) for i in range(_LAYERS)]
    return NodeClassifier(convs, h, n_classes, GRAPH_DROPOUT)


def _gin(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    from torch_geometric.nn import GINConv

    d, h = _features("gin", shape), GRAPH_HIDDEN

    def mlp(width_in: int) -> nn.Module:
        return nn.Sequential(nn.Linear(width_in, h), nn.ReLU(), nn.Linear(h, h))

    convs = [GINConv(mlp(d if i == 0 else h), train_eps=False) for i in range(_LAYERS)]
    return NodeClassifier(convs, h, n_classes, GRAPH_DROPOUT)


def _spec(name: str, build: Callable[[int, tuple[int, ...]], nn.Module], what: str) -> BackboneSpec:
    return BackboneSpec(
        name=name, build=build, description=what, modalities=("graph",), epochs=200,
        batch_size=0, lr=1e-2, weight_decay=5e-4, optimizer="adam", patience=20,
    )


#: The graph backbones (registry entries; :mod:`tasks.models.backbones` collects them).
SPECS: Final[tuple[BackboneSpec, ...]] = (
    _spec("gcn", _gcn, "GCN: 2 GCNConv layers (128) + linear head, full batch"),
    _spec("sage", _sage, "GraphSAGE: 2 SAGEConv layers (mean, 128) + linear head"),
    _spec("gat", _gat, "GAT: 2 GATConv layers (4 heads x 32) + linear head"),
    _spec("gin", _gin, "GIN: 2 GINConv layers (2-layer MLPs, 128) + linear head"),
)
