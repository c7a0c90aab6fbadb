"""GNNEvaluator: learns meta-graph accuracies, is seeded, bounded to [0, 1], and fails clearly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GCNConv

from tasks.models.gnnevaluator import (
    AUGMENTATIONS,
    GNNEvaluatorConfig,
    _normalized_adjacency,
    fit_gnnevaluator,
)
from tasks.data.graphs import Graph, GraphSplit, to_undirected


N_CLASSES = 3
FAST = GNNEvaluatorConfig(n_meta=24, n_reference=48, epochs=60, patience=20, seed=0)


class TinyGCN(nn.Module):
    """GCN encoder + linear head with the ``embed`` interface GNNEvaluator needs."""

    def __init__(self, n_features: int, hidden: int, n_classes: int) -> None:
        super().__init__()
        self.conv = GCNConv(n_features, hidden)
        self.head = nn.Linear(hidden, n_classes)

    def embed(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x, edge_index))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x, edge_index))


class NoEmbed(nn.Module):
    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return x[:, :N_CLASSES]


def _graph(n: int = 400, d: int = 8, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, N_CLASSES, n)
    x = rng.normal(0.0, 1.0, (n, d)) + 0.8 * np.eye(N_CLASSES, d)[y]
    src = rng.integers(0, n, 4 * n)
    dst = np.where(
        rng.random(4 * n) < 0.8,
        [rng.choice(np.flatnonzero(y == y[s])) for s in src],
        rng.integers(0, n, 4 * n),
    )
    return Graph(x=x, edge_index=np.stack([src, dst]), y=y, year=np.zeros(n, dtype=np.int64))


def _accuracy(model: nn.Module, split: GraphSplit) -> float:
    ei = torch.from_numpy(to_undirected(split.graph.edge_index, split.graph.n_nodes))
    with torch.no_grad():
        pred = model(torch.from_numpy(split.graph.x), ei).argmax(1).numpy()
    return float((pred[split.nodes] == split.labels).mean())


@pytest.fixture(scope="module")
def setup():
    graph = _graph()
    order = np.random.default_rng(1).permutation(graph.n_nodes)
    train = GraphSplit(graph, np.sort(order[:200]))
    val = GraphSplit(graph, np.sort(order[200:]))
    torch.manual_seed(0)
    model = TinyGCN(graph.n_features, 16, N_CLASSES)
    x = torch.from_numpy(graph.x)
    ei = torch.from_numpy(to_undirected(graph.edge_index, graph.n_nodes))
    y = torch.from_numpy(graph.y)
    idx = torch.from_numpy(train.nodes)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(40):
        opt.zero_grad()
        F.cross_entropy(model(x, ei)[idx], y[idx]).backward()
        opt.step()
    model.eval()
    fitted = fit_gnnevaluator(model, train, val, FAST)
    return model, train, val, fitted


def test_learns_meta_accuracy_better_than_a_constant(setup):
    _, _, _, fitted = setup
    diag = fitted.diagnostics()
    assert diag["constant_rmse"] > 0.02  # the meta-set spans a real range of accuracies
    assert fitted.meta_rmse_ < 0.8 * diag["constant_rmse"]
    assert fitted.n_meta_ == FAST.n_meta == len(fitted.meta_accuracies_)
    assert set(fitted.meta_augmentations_) == set(AUGMENTATIONS)
    assert diag["n_meta_train"] + diag["n_meta_test"] == FAST.n_meta
    assert diag["n_reference"] == FAST.n_reference
    assert fitted.fit_seconds_ > 0


def test_estimate_on_the_validation_split_is_close_to_its_accuracy(setup):
    model, _, val, fitted = setup
    estimate = fitted.estimate(val)
    assert 0.0 <= estimate <= 1.0
    assert abs(estimate - _accuracy(model, val)) < 0.15


def test_estimate_drops_on_a_heavily_masked_target(setup):
    model, _, val, fitted = setup
    g = val.graph
    x = g.x.copy()
    x[:, :N_CLASSES] = 0.0  # the class signal is gone
    target = GraphSplit(Graph(x=x, edge_index=g.edge_index, y=g.y, year=g.year), val.nodes)
    assert _accuracy(model, target) < _accuracy(model, val) - 0.2
    assert 0.0 <= fitted.estimate(target) < fitted.estimate(val)


def test_same_seed_same_estimate_and_leaves_the_model_alone(setup):
    model, train, val, fitted = setup
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = torch.random.get_rng_state()
    again = fit_gnnevaluator(model, train, val, FAST)
    assert torch.equal(state, torch.random.get_rng_state())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert again.meta_rmse_ == fitted.meta_rmse_
    assert again.estimate(val) == fitted.estimate(val)
    np.testing.assert_array_equal(again.meta_accuracies_, fitted.meta_accuracies_)


def test_induced_mode_runs(setup):
    model, train, val, _ = setup
    cfg = GNNEvaluatorConfig(n_meta=8, n_reference=16, epochs=3, induced=True)
    fitted = fit_gnnevaluator(model, train, val, cfg)
    assert 0.0 <= fitted.estimate(val.take(np.arange(50))) <= 1.0
    assert fitted.diagnostics()["config"]["induced"] is True


class ShiftedHead(TinyGCN):
    """``head(embed)`` is not the model's output, so GNNEvaluator must run the model twice."""

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return super().forward(x, edge_index) + torch.tensor([0.0, 5.0, 0.0])


def test_head_shortcut_only_when_it_reproduces_the_logits(setup):
    model, train, val, fitted = setup
    cfg = GNNEvaluatorConfig(n_meta=8, n_reference=16, epochs=2)
    assert fitted.diagnostics()["head_shortcut"] is True
    shifted = ShiftedHead(train.graph.n_features, 16, N_CLASSES)
    shifted.load_state_dict(model.state_dict())
    shifted.eval()
    other = fit_gnnevaluator(shifted, train, val, cfg)
    assert other.diagnostics()["head_shortcut"] is False
    plain = fit_gnnevaluator(model, train, val, cfg)
    assert not np.array_equal(other.meta_accuracies_, plain.meta_accuracies_)


def test_propagation_matches_pyg_gcnconv():
    rng = np.random.default_rng(0)
    edges = torch.from_numpy(to_undirected(rng.integers(0, 30, (2, 80)), 30))
    x = torch.randn(30, 5)
    conv = GCNConv(5, 4)
    with torch.no_grad():
        ours = torch.sparse.mm(_normalized_adjacency(edges, 30), x @ conv.lin.weight.T) + conv.bias
        torch.testing.assert_close(ours, conv(x, edges), rtol=1e-5, atol=1e-5)


def test_model_without_embed_is_a_type_error(setup):
    _, train, val, _ = setup
    with pytest.raises(TypeError, match="embed"):
        fit_gnnevaluator(NoEmbed(), train, val, FAST)


def test_empty_node_sets_are_rejected(setup):
    model, train, val, fitted = setup
    empty = val.take(np.array([], dtype=np.int64))
    with pytest.raises(ValueError, match="val"):
        fit_gnnevaluator(model, train, empty, FAST)
    with pytest.raises(ValueError, match="train"):
        fit_gnnevaluator(model, empty, val, FAST)
    with pytest.raises(ValueError, match="target"):
        fitted.estimate(empty)


def test_class_count_mismatch_names_both_counts(setup):
    _, train, val, _ = setup
    torch.manual_seed(0)
    two_class = TinyGCN(train.graph.n_features, 8, 2)
    with pytest.raises(ValueError, match=r"2 classes.*3"):
        fit_gnnevaluator(two_class, train, val, FAST)


def test_bad_config_and_feature_width(setup):
    with pytest.raises(ValueError, match="n_meta"):
        GNNEvaluatorConfig(n_meta=4)
    with pytest.raises(ValueError, match="edge_drop"):
        GNNEvaluatorConfig(edge_drop=(0.5, 0.2))
    _, _, val, fitted = setup
    g = val.graph
    wide = Graph(x=np.hstack([g.x, g.x]), edge_index=g.edge_index, y=g.y, year=g.year)
    with pytest.raises(ValueError, match="width 8"):
        fitted.estimate(GraphSplit(wide, val.nodes))
