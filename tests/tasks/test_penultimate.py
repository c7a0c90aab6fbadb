"""The penultimate features of every backbone: the input of its output layer, or None."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from tasks.models.backbones import get_backbone
from tasks.models.penultimate import FEATURE_DTYPE, PenultimateCapture


def _output_layer(model: nn.Module) -> nn.Linear:
    """The model's output layer, found independently: the Linear whose out_features are the
    classes and which is registered last."""
    return [m for m in model.modules() if isinstance(m, nn.Linear)][-1]


def _check(model: nn.Module, *inputs: torch.Tensor) -> np.ndarray:
    model.eval()
    with PenultimateCapture(model) as capture, torch.inference_mode():
        logits = model(*inputs)
    features = capture.features()
    assert features is not None and features.dtype == FEATURE_DTYPE
    assert features.shape[0] == logits.shape[0]
    head = _output_layer(model)
    assert features.shape[1] == head.in_features
    with torch.inference_mode():  # the layer applied to the features gives the logits
        again = head(torch.from_numpy(features.astype(np.float32)))
    np.testing.assert_allclose(again.numpy(), logits.numpy(), atol=0.05, rtol=0.01)
    return features


@pytest.mark.parametrize("name,shape", [
    ("mlp", (1, 28, 28)), ("lenet", (1, 28, 28)), ("resnet", (1, 28, 28)),
    ("cnn3", (3, 32, 32)), ("resnet18", (3, 32, 32)),
])
def test_image_backbones_give_the_input_of_their_output_layer(name, shape):
    torch.manual_seed(0)
    _check(get_backbone(name, 5, shape), torch.randn(6, *shape))


@pytest.mark.parametrize("build", ["alexnet", "mobilenet_v2", "efficientnet_b0"])
def test_torchvision_heads_are_found_too(build):
    """The pretrained backbones' architectures (weights are not on this machine)."""
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, build)(weights=None, num_classes=7)
    _check(model, torch.randn(2, 3, 64, 64))


@pytest.mark.parametrize("name", ["gcn", "sage", "gat", "gin"])
def test_graph_backbones_give_their_node_embedding(name):
    torch.manual_seed(0)
    model = get_backbone(name, 4, (8,))
    x, edges = torch.randn(12, 8), torch.tensor([[0, 1, 2, 3, 5], [1, 2, 3, 4, 6]])
    features = _check(model, x, edges)
    with torch.inference_mode():  # NodeClassifier.embed is the same representation
        np.testing.assert_allclose(features.astype(np.float32),
                                   model.embed(x, edges).numpy(), atol=1e-2, rtol=1e-2)


def test_a_model_without_a_linear_output_layer_gives_none():
    class Bag(nn.Module):  # what bow-linear is: an embedding bag plus a bias
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.EmbeddingBag(20, 3, mode="sum")
            self.bias = nn.Parameter(torch.zeros(3))

        def forward(self, idx: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
            return self.weight(idx, offsets) + self.bias

    with PenultimateCapture(Bag()) as capture, torch.inference_mode():
        Bag()(torch.tensor([1, 2, 3]), torch.tensor([0, 2]))
    assert capture.features() is None


def test_a_linear_layer_that_is_not_the_output_does_not_count():
    class Scaled(nn.Module):  # the last Linear's output is post-processed: not the logits
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * 2

    model = Scaled()
    with PenultimateCapture(model) as capture, torch.inference_mode():
        model(torch.ones(2, 4))
    assert capture.features() is None


def test_batches_concatenate_in_call_order_and_hooks_are_removed():
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)).eval()
    x = torch.randn(7, 3)
    with PenultimateCapture(model) as capture, torch.inference_mode():
        for chunk in (x[:3], x[3:]):
            model(chunk)
    with torch.inference_mode():
        want = torch.tanh(model[0](x)).numpy().astype(np.float16)
    np.testing.assert_array_equal(capture.features(), want)
    assert not model._forward_hooks and not model[2]._forward_hooks


def test_unpermute_puts_rows_back_and_checks_the_order():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)).eval()
    x = torch.arange(8.0).reshape(4, 2)
    order = np.array([2, 0, 3, 1])
    with PenultimateCapture(model) as capture, torch.inference_mode():
        model(x[order])
    capture.unpermute(order)
    with torch.inference_mode():
        np.testing.assert_array_equal(capture.features(), model[0](x).numpy().astype(np.float16))
    with pytest.raises(ValueError, match="order must have one entry per captured row"):
        capture.unpermute(np.arange(3))


def test_a_non_module_is_refused():
    with pytest.raises(TypeError, match="model must be a torch.nn.Module; got int"):
        PenultimateCapture(3)


def test_an_empty_batch_gives_an_empty_matrix():
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)).eval()
    with PenultimateCapture(model) as capture, torch.inference_mode():
        model(torch.zeros(0, 3))
    assert capture.features().shape == (0, 4)
