"""``pixel-linear``: softmax regression on the flattened pixels, as an alsa-bench backbone.

The entry point ``pixel-linear = "alsa_bench_quantile.linear:SPEC"`` gives alsa-bench this
:class:`~tasks.models.backbones.base.BackboneSpec`. It names the dataset it applies to
(``datasets=("digits",)``), so no dataset module is edited to add it and no other run's cache
key moves.
"""

from __future__ import annotations

import math

from torch import nn

from tasks.models.backbones.base import BackboneSpec

__all__ = ["SPEC", "build"]


def build(n_classes: int, input_shape: tuple[int, ...]) -> nn.Module:
    """``Flatten`` then one ``Linear`` layer: the logits of a multinomial logistic regression."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), n_classes))


SPEC = BackboneSpec(
    name="pixel-linear", build=build, description="softmax regression on the pixels (example "
    "plugin)", modalities=("image",), epochs=20, batch_size=64, lr=1e-2, weight_decay=1e-4,
    datasets=("digits",),
)
