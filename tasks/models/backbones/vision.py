"""The ALSA paper's vision backbones: torchvision's ResNet18 and the 3-convolution MNIST network.

========  ==================================================================  ===============
key       architecture                                                        parameters
========  ==================================================================  ===============
resnet18  ``torchvision.models.resnet18(weights=None, num_classes=C)``, from  11,181,642
          scratch (paper App. H.1: "ResNet18 from torchvision")               (C = 10)
cnn3      3 x (conv 3x3, ReLU, max-pool 2) with 32 / 64 / 128 channels,       241,546
          flatten, FC 128, ReLU, FC C (paper App. H.2, MNIST: "a fully        (1x28x28,
          connected network with three convolutional layers")                 C = 10)
========  ==================================================================  ===============

ResNet18 is torchvision's ImageNet architecture unchanged (7x7 stride-2 stem and max-pool), also
on 32x32 CIFAR images, where the last stage works on a 1x1 map: the paper names torchvision's
model and no CIFAR variant, so none is made up here. It needs 3-channel inputs of at least
32x32 pixels. No pretrained weights are loaded (the paper trains it from scratch on CIFAR,
Waterbirds and Office-31).

The paper gives no layer sizes for the MNIST network; ``cnn3`` is the common reading of its
sentence: three convolutional layers (3x3, padding 1, each followed by ReLU and 2x2 max pooling:
28 -> 14 -> 7 -> 3) and a fully connected head.

Recipes (defaults; datasets override them with :attr:`~tasks.data.datasets.DatasetSpec.recipes`):
``resnet18`` the paper's CIFAR recipe (SGD momentum 0.9, lr 0.1 x 0.1 every 100 epochs, weight
decay 5e-4, batch 200, early stopping after 10 epochs, at most 200 epochs); ``cnn3`` the MNIST
recipe (Adam, fixed lr 1e-3, early stopping after 5 epochs, at most 100 epochs).

Examples
--------
>>> from tasks.models.backbones import get_backbone
>>> import torch
>>> get_backbone("cnn3", n_classes=10, input_shape=(1, 28, 28))(torch.zeros(2, 1, 28, 28)).shape
torch.Size([2, 10])
"""

from __future__ import annotations

from typing import Final

import torch
from torch import nn
from torchvision.models import resnet18

from tasks.models.backbones.base import BackboneSpec

__all__ = ["CNN3", "SPECS", "build_resnet18"]


class CNN3(nn.Module):
    """Three convolutional layers and a fully connected head (the paper's MNIST network).

    Parameters
    ----------
    n_classes : int
        Number of outputs.
    input_shape : tuple of int
        ``(channels, height, width)``, height and width at least 8.
    widths : tuple of int, default (32, 64, 128)
        Channels of the three convolutions.
    hidden : int, default 128
        Width of the hidden fully connected layer.
    """

    def __init__(
        self,
        n_classes: int,
        input_shape: tuple[int, ...],
        widths: tuple[int, int, int] = (32, 64, 128),
        hidden: int = 128,
    ) -> None:
        super().__init__()
        channels, height, width = input_shape
        layers: list[nn.Module] = []
        for w in widths:
            layers += [nn.Conv2d(channels, w, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
            channels = w
        self.features = nn.Sequential(*layers)
        flat = channels * (height // 8) * (width // 8)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(flat, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, n_classes)``."""
        return self.classifier(self.features(x))


def build_resnet18(n_classes: int, input_shape: tuple[int, ...]) -> nn.Module:
    """torchvision's ResNet18, randomly initialised, with ``n_classes`` outputs.

    Parameters
    ----------
    n_classes : int
        Number of outputs.
    input_shape : tuple of int
        ``(3, height, width)`` with height and width at least 32.

    Returns
    -------
    torch.nn.Module
        ``torchvision.models.resnet18(weights=None, num_classes=n_classes)``.

    Raises
    ------
    ValueError
        If ``input_shape`` is not a 3-channel image of at least 32x32 pixels.
    """
    if len(input_shape) != 3 or input_shape[0] != 3 or min(input_shape[1:]) < 32:
        raise ValueError(
            f"backbone 'resnet18' needs RGB image inputs (3, height, width) with height and "
            f"width >= 32; got input_shape={tuple(input_shape)}."
        )
    return resnet18(weights=None, num_classes=n_classes)


def _cnn3(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    if len(shape) != 3 or min(shape[1:]) < 8:
        raise ValueError(
            f"backbone 'cnn3' needs image inputs (channels, height, width) with height and "
            f"width >= 8; got input_shape={shape}."
        )
    return CNN3(n_classes, shape)


#: The paper's vision backbones (registry entries; :mod:`tasks.models.backbones` collects them).
SPECS: Final[tuple[BackboneSpec, ...]] = (
    BackboneSpec(
        name="resnet18",
        build=build_resnet18,
        description="torchvision ResNet18 from scratch (paper: CIFAR, Waterbirds, Office-31)",
        modalities=("image",),
        epochs=200,
        batch_size=200,
        lr=0.1,
        weight_decay=5e-4,
        optimizer="sgd-step",
        patience=10,
    ),
    BackboneSpec(
        name="cnn3",
        build=_cnn3,
        description="3 conv layers + FC head (paper: MNIST)",
        modalities=("image",),
        epochs=100,
        batch_size=128,
        lr=1e-3,
        weight_decay=0.0,
        optimizer="adam",
        patience=5,
    ),
)
