"""Image backbones: maps a batch of images ``(n, channels, height, width)`` to raw logits.

Each entry of :data:`SPECS` carries its training recipe (AdamW with a one-cycle schedule; epochs,
batch size, learning rate), which the image adapter (:mod:`tasks.models.modalities.image`) uses unless
told otherwise. All are small enough to train on 2 CPU cores within the benchmark budget.

======  ===================================================================  ==========
key     architecture                                                         parameters
======  ===================================================================  ==========
mlp     flatten, 256 - 128 hidden units, ReLU, dropout 0.1                   ~235 k
lenet   LeNet-5 style: conv 6@5x5, pool, conv 16@5x5, pool, 120 - 84, ReLU   ~62 k
resnet  narrow ResNet: 3x3 stride-2 stem (16), BasicBlocks 16/32/64 at       ~78 k
        strides 1/2/2, BatchNorm, global average pooling
======  ===================================================================  ==========

Examples
--------
>>> from tasks.models.backbones import get_backbone
>>> net = get_backbone("lenet", n_classes=3, input_shape=(1, 28, 28))
>>> import torch
>>> net(torch.zeros(2, 1, 28, 28)).shape
torch.Size([2, 3])
"""

from __future__ import annotations

import math
from typing import ClassVar, Final

import torch
from torch import nn

from tasks.models.backbones.base import BackboneSpec

__all__ = ["SPECS", "LeNet", "MLP", "NarrowResNet"]


class MLP(nn.Module):
    """Two-hidden-layer perceptron on flattened inputs.

    Parameters
    ----------
    n_classes : int
        Number of outputs.
    input_shape : tuple of int
        Shape of one input; any shape (flattened).
    hidden : tuple of int, default (256, 128)
        Hidden layer widths.
    dropout : float, default 0.1
        Dropout after each hidden layer.
    """

    def __init__(
        self,
        n_classes: int,
        input_shape: tuple[int, ...],
        hidden: tuple[int, ...] = (256, 128),
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = math.prod(input_shape)
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(inplace=True), nn.Dropout(dropout)]
            width = h
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, n_classes)``."""
        return self.net(x)


class LeNet(nn.Module):
    """LeNet-5 style CNN (ReLU, max pooling) for small grey or colour images.

    Parameters
    ----------
    n_classes : int
        Number of outputs.
    input_shape : tuple of int
        ``(channels, height, width)``, height and width at least 12.

    Attributes
    ----------
    CHANNELS_LAST_ON_ATEN : bool
        False: where ATen's own convolution kernels compute (the reproducible mode on the CPU),
        the image adapter feeds contiguous batches, on which its five-by-five convolutions of
        1 and 6 channels train 1.7x faster than channels-last
        (:func:`tasks.models.modalities.image.batch_layout`).
    """

    CHANNELS_LAST_ON_ATEN: ClassVar[bool] = False

    def __init__(self, n_classes: int, input_shape: tuple[int, ...]) -> None:
        super().__init__()
        channels, height, width = input_shape
        self.features = nn.Sequential(
            nn.Conv2d(channels, 6, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, kernel_size=5),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        flat = 16 * ((height // 2 - 4) // 2) * ((width // 2 - 4) // 2)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(flat, 120),
            nn.ReLU(inplace=True),
            nn.Linear(120, 84),
            nn.ReLU(inplace=True),
            nn.Linear(84, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, n_classes)``."""
        return self.classifier(self.features(x))


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 convolutions with BatchNorm and an identity/1x1 shortcut.

    Parameters
    ----------
    in_channels, out_channels : int
        Channel counts.
    stride : int, default 1
        Stride of the first convolution (and of the shortcut).
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual output."""
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class NarrowResNet(nn.Module):
    """A narrow ResNet for 28x28-scale images: stride-2 stem, three basic blocks, pooling.

    The stem halves the resolution at once (28 -> 14), which makes the network about 2.5 times
    cheaper on a CPU than a stride-1 stem at little cost in accuracy; then one basic block per
    stage at strides 1, 2, 2 (14 -> 14 -> 7 -> 4) and global average pooling.

    Parameters
    ----------
    n_classes : int
        Number of outputs.
    input_shape : tuple of int
        ``(channels, height, width)``.
    widths : tuple of int, default (16, 32, 64)
        Channels of the three stages (the stem has ``widths[0]``).
    """

    def __init__(
        self,
        n_classes: int,
        input_shape: tuple[int, ...],
        widths: tuple[int, int, int] = (16, 32, 64),
    ) -> None:
        super().__init__()
        channels = input_shape[0]
        self.stem = nn.Sequential(
            nn.Conv2d(channels, widths[0], 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
        )
        blocks, width = [], widths[0]
        for w, stride in zip(widths, (1, 2, 2), strict=True):
            blocks.append(BasicBlock(width, w, stride=stride))
            width = w
        self.stages = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, n_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, n_classes)``."""
        return self.head(self.stages(self.stem(x)))


def _needs_image(name: str, shape: tuple[int, ...]) -> None:
    if len(shape) != 3 or min(shape[1:]) < 12:
        raise ValueError(
            f"backbone {name!r} needs image inputs (channels, height, width) with height and "
            f"width >= 12; got input_shape={shape}."
        )


def _lenet(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    _needs_image("lenet", shape)
    return LeNet(n_classes, shape)


def _resnet(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    _needs_image("resnet", shape)
    return NarrowResNet(n_classes, shape)


#: The image backbones (registry entries; :mod:`tasks.models.backbones` collects them).
SPECS: Final[tuple[BackboneSpec, ...]] = (
    BackboneSpec(
        name="mlp",
        build=lambda n_classes, shape: MLP(n_classes, shape),
        description="MLP 256-128 on flattened pixels",
        modalities=("image",),
        epochs=5,
    ),
    BackboneSpec(
        name="lenet",
        build=_lenet,
        description="LeNet-5 style CNN",
        modalities=("image",),
        epochs=5,
    ),
    BackboneSpec(
        name="resnet",
        build=_resnet,
        description="narrow ResNet (16/32/64 channels, 3 basic blocks)",
        modalities=("image",),
        epochs=3,
    ),
)
