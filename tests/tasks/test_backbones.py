"""Backbone registry: every architecture builds, maps inputs to logits, and fails clearly."""

from __future__ import annotations

import pytest
import torch

from tasks.backbones import BACKBONES, available_backbones, get_backbone, get_backbone_spec


def test_registry_lists_the_three_families():
    assert set(available_backbones()) >= {"mlp", "lenet", "resnet"}
    assert list(available_backbones()) == sorted(BACKBONES)


@pytest.mark.parametrize("n_classes", [10, 3])
@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_forward_shape(name, n_classes):
    torch.manual_seed(0)
    net = get_backbone(name, n_classes).eval()
    with torch.no_grad():
        out = net(torch.rand(5, 1, 28, 28))
    assert out.shape == (5, n_classes) and out.dtype == torch.float32
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_same_seed_same_weights(name):
    torch.manual_seed(3)
    a = get_backbone(name, 10).state_dict()
    torch.manual_seed(3)
    b = get_backbone(name, 10).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_channels_last_gives_the_same_logits():
    torch.manual_seed(0)
    net = get_backbone("resnet", 10).eval()
    x = torch.rand(4, 1, 28, 28)
    with torch.no_grad():
        plain = net(x)
        net = net.to(memory_format=torch.channels_last)
        fast = net(x.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(plain, fast, rtol=1e-4, atol=1e-5)


def test_unknown_backbone_lists_names():
    with pytest.raises(ValueError) as info:
        get_backbone("vgg", 10)
    message = str(info.value)
    assert "'vgg'" in message
    assert all(name in message for name in available_backbones())
    with pytest.raises(ValueError, match="backbone must be one of"):
        get_backbone_spec("vgg")


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="n_classes"):
        get_backbone("mlp", 1)
    with pytest.raises(ValueError, match="image inputs"):
        get_backbone("lenet", 10, input_shape=(384,))
    # the MLP also takes flat feature vectors (e.g. sentence embeddings)
    assert get_backbone("mlp", 4, input_shape=(384,))(torch.rand(2, 384)).shape == (2, 4)
