"""The modality adapter contract, for every adapter: size, take, fit, predict."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tasks.models.backbones import get_backbone, get_backbone_spec
from tasks.data.temporal import temporal_source_splits
from tasks.data.graphs import Graph, GraphSplit
from tasks.models.modalities import available_modalities, get_adapter
from tasks.models.modalities.graph import graph_tensors
from tests.tasks._graph_fake import TINY_GRAPH_CLASSES, TINY_GRAPH_FEATURES, make_graph

CPU = torch.device("cpu")


class _Spec:
    """What the adapters read of a dataset spec."""

    def __init__(self, to_inputs=None):
        self.to_inputs = to_inputs


def _images(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    x = rng.normal(0, 0.3, size=(n, 1, 28, 28)).astype(np.float32)
    for c in range(3):
        x[y == c, :, 9 * c: 9 * c + 9, :] += 1.0
    return x, y


def test_registry_names_the_modalities_and_refuses_others() -> None:
    assert available_modalities() == ("graph", "image", "tabular", "text")
    with pytest.raises(ValueError,
                       match="modality must be one of graph, image, tabular, text; got 'audio'"):
        get_adapter("audio")


def test_image_adapter_contract() -> None:
    adapter = get_adapter("image")
    x, y = _images(240, 0)
    assert adapter.size(x) == 240 and adapter.take(x, np.array([5, 1])).shape == (2, 1, 28, 28)
    spec = get_backbone_spec("mlp")
    torch.manual_seed(0)
    model = get_backbone("mlp", 3, (1, 28, 28))
    report = adapter.fit(model, spec, _Spec(), (x, y), (x[:10], y[:10]), epochs=3, seed=0,
                         device=CPU, progress=False, key="t")
    assert report.epochs_run == 3 and np.isfinite(report.final_train_loss)
    xt, yt = _images(120, 1)
    logits = adapter.predict(model, _Spec(), xt, CPU, 50)
    assert logits.shape == (120, 3) and logits.dtype == np.float32
    assert np.mean(logits.argmax(1) == yt) > 0.9
    np.testing.assert_allclose(logits, adapter.predict(model, _Spec(), xt, CPU, 7), rtol=1e-5, atol=1e-5)


def test_image_adapter_applies_the_datasets_to_inputs() -> None:
    adapter = get_adapter("image")
    model = get_backbone("mlp", 3, (1, 28, 28))
    x, _ = _images(4, 0)
    doubled = adapter.predict(model, _Spec(lambda s: s * 2), x, CPU, 8)
    np.testing.assert_allclose(doubled, adapter.predict(model, _Spec(), x * 2, CPU, 8), rtol=1e-6)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return make_graph(n_per_year=60)


def _train(name: str, graph: Graph, patience_epochs: int = 200):
    adapter = get_adapter("graph")
    source = temporal_source_splits(graph, TINY_GRAPH_CLASSES)
    torch.manual_seed(0)
    model = get_backbone(name, TINY_GRAPH_CLASSES, (TINY_GRAPH_FEATURES,))
    report = adapter.fit(
        model, get_backbone_spec(name), _Spec(), (source.train_x, source.train_y),
        (source.val_x, source.val_y), epochs=patience_epochs, seed=0, device=CPU,
        progress=False, key="t",
    )
    return adapter, source, model, report


@pytest.mark.parametrize("name", ["gcn", "sage", "gat", "gin"])
def test_graph_adapter_trains_full_batch_with_early_stopping(graph: Graph, name: str) -> None:
    adapter, source, model, report = _train(name, graph)
    assert adapter.size(source.val_x) == len(source.val_y)
    # early stopping kept the best epoch, and the kept weights give the recorded accuracy
    assert report.best_epoch is not None and report.epochs_run <= report.best_epoch + 20
    val = adapter.predict(model, _Spec(), source.val_x, CPU, 1)
    acc = float(np.mean(val.argmax(1) == source.val_y))
    assert acc == pytest.approx(report.best_val_accuracy)
    assert acc > 0.6  # 3 classes: chance is about 1/3


def test_graph_prediction_sees_the_whole_graph_and_keeps_only_the_nodes(graph: Graph) -> None:
    adapter, source, model, _ = _train("gcn", graph, patience_epochs=30)
    split = source.val_x
    all_nodes = GraphSplit(split.graph, np.arange(split.graph.n_nodes))
    full = adapter.predict(model, _Spec(), all_nodes, CPU, 1)
    part = adapter.predict(model, _Spec(), split, CPU, 1)
    np.testing.assert_allclose(part, full[split.nodes], rtol=1e-5, atol=1e-6)
    # the neighbourhood matters: without edges, the same nodes get other logits
    bare = Graph(split.graph.x, np.zeros((2, 0), np.int64), split.graph.y, split.graph.year)
    alone = adapter.predict(model, _Spec(), GraphSplit(bare, split.nodes), CPU, 1)
    assert np.abs(alone - part).max() > 1e-3
    # and it is the same computation as running the model on the tensors directly
    x, edges = graph_tensors(split.graph, CPU)
    with torch.no_grad():
        direct = model.eval()(x, edges)[torch.from_numpy(split.nodes)].numpy()
    np.testing.assert_allclose(part, direct, rtol=1e-6)


def test_graph_adapter_refuses_arrays() -> None:
    with pytest.raises(TypeError, match="must be a GraphSplit for the graph modality; got ndarray"):
        get_adapter("graph").size(np.zeros((3, 2)))
