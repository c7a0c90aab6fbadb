"""The paper's vision backbones: torchvision's ResNet18 (from scratch) and the MNIST ``cnn3``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tasks.models.backbones import available_backbones, get_backbone, get_backbone_spec


def _n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_resnet18_is_torchvisions_architecture_untrained() -> None:
    torch.manual_seed(0)
    net = get_backbone("resnet18", 10, (3, 32, 32))
    # torchvision documents 11,689,512 parameters for resnet18 (1000 classes); the head of a
    # 10-class model has 512 * 990 + 990 fewer
    assert _n_params(get_backbone("resnet18", 1000, (3, 224, 224))) == 11_689_512
    assert _n_params(net) == 11_689_512 - 512 * 990 - 990
    assert net.conv1.kernel_size == (7, 7) and net.fc.out_features == 10
    net.eval()
    with torch.no_grad():
        assert net(torch.zeros(4, 3, 32, 32)).shape == (4, 10)
        assert net(torch.zeros(2, 3, 64, 48)).shape == (2, 10)
    # no pretrained weights: two seeds give different weights
    torch.manual_seed(1)
    other = get_backbone("resnet18", 10, (3, 32, 32))
    assert not torch.equal(net.conv1.weight, other.conv1.weight)


def test_cnn3_has_three_convolutions_and_a_dense_head() -> None:
    net = get_backbone("cnn3", 10, (1, 28, 28))
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    dense = [m for m in net.modules() if isinstance(m, nn.Linear)]
    assert [c.out_channels for c in convs] == [32, 64, 128] and len(dense) == 2
    # 3x3 convolutions with bias; 28 -> 14 -> 7 -> 3 after three poolings: 128 * 3 * 3 inputs
    expected = (9 * 1 * 32 + 32) + (9 * 32 * 64 + 64) + (9 * 64 * 128 + 128)
    expected += (128 * 9 * 128 + 128) + (128 * 10 + 10)
    assert _n_params(net) == expected == 241_546
    assert net(torch.zeros(5, 1, 28, 28)).shape == (5, 10)
    assert get_backbone("cnn3", 10, (3, 32, 32))(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_recipes_and_registry() -> None:
    assert {"resnet18", "cnn3"} <= set(available_backbones("image"))
    r18, cnn = get_backbone_spec("resnet18"), get_backbone_spec("cnn3")
    assert (r18.optimizer, r18.lr, r18.batch_size, r18.weight_decay, r18.patience) == (
        "sgd-step", 0.1, 200, 5e-4, 10)
    assert (cnn.optimizer, cnn.lr, cnn.patience) == ("adam", 1e-3, 5)


@pytest.mark.parametrize(("name", "shape", "match"), [
    ("resnet18", (1, 28, 28), r"resnet18' needs RGB image inputs \(3, height, width\)"),
    ("resnet18", (3, 16, 16), r"height and width >= 32; got input_shape=\(3, 16, 16\)"),
    ("cnn3", (100,), r"cnn3' needs image inputs .* got input_shape=\(100,\)"),
    ("cnn3", (1, 4, 28), r"width >= 8"),
])
def test_unsuitable_inputs_are_refused(name: str, shape: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        get_backbone(name, 10, shape)
