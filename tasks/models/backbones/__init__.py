"""Backbone registry: every classifier architecture, collected from one module per modality.

Each module of this package (``image.py``, ``graph.py``, ...) defines ``SPECS``, a tuple of
key              modality  architecture
===============  ========  =====================================================================
mlp              image     flatten, 256 - 128 hidden units, ReLU, dropout 0.1
lenet            image     LeNet-5 style CNN
resnet           image     narrow ResNet: stride-2 stem, BasicBlocks 16/32/64, BatchNorm
resnet18         image     torchvision ResNet18 from scratch (CIFAR, Waterbirds, Office-31)
cnn3             image     3 conv layers + FC head (the paper's MNIST network)
alexnet          image     torchvision AlexNet with its published ImageNet weights (no training)
mobilenet_v2     image     torchvision MobileNetV2, published ImageNet weights
efficientnet_b0  image     torchvision EfficientNet-B0, published ImageNet weights
gcn              graph     3 GCNConv layers (hidden 128), ReLU, dropout 0.5, linear head
sage             graph     3 SAGEConv layers (mean aggregation)
gat              graph     3 GATConv layers (4 heads x 32)
gin              graph     3 GINConv layers (2-layer MLPs)
bow-linear       text      hashed uni+bigram bag of words, linear
minilm-mlp       text      MLP on frozen all-MiniLM-L6-v2 embeddings
minilm-ft        text      MiniLM with its top layer fine-tuned
distilbert       text      DistilBERT-base-uncased fine-tuned (local weights only)
tab-logreg       tabular   logistic regression (scikit-learn) on the one-hot encoding, as tensors
tab-hgb          tabular   histogram gradient-boosted trees (scikit-learn), node arrays as tensors
tab-mlp          tabular   MLP 128-64 on the one-hot encoding
===============  ========  =====================================================================
=======
:class:`BackboneSpec`; so does every plugin of the entry-point group ``alsa_bench.backbones``
(:mod:`tasks.runtime.plugins`). Adding an architecture is a module of its own (or a plugin)
that touches no other file, so no other run's cache key moves (:mod:`tasks.stages.versions`
hashes the run's backbone module only). Every entry declares the modalities it accepts;
:func:`check_backbone` refuses a pairing such as ``lenet`` on a graph before anything is
trained. ``alsa-bench datasets`` lists which backbones apply to each dataset
(:func:`backbones_for`), and each entry's ``description`` says what it is.

Examples
--------
>>> get_backbone_spec("gcn").modalities
('graph',)
>>> "lenet" in available_backbones("image") and "gcn" not in available_backbones("image")
True
"""

from __future__ import annotations

import importlib
import pkgutil

from torch import nn

from tasks.data.spec import DatasetSpec
from tasks.models.backbones.base import BackboneSpec
from tasks.runtime.plugins import plugin_members, warn_plugin

__all__ = [
    "BACKBONES",
    "BackboneSpec",
    "available_backbones",
    "backbones_for",
    "check_backbone",
    "get_backbone",
    "get_backbone_spec",
]

_NOT_MODULES = frozenset({"base"})


def _collect() -> dict[str, BackboneSpec]:
    found: dict[str, BackboneSpec] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in _NOT_MODULES:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for spec in getattr(module, "SPECS", ()):
            if spec.name in found:
                raise RuntimeError(f"backbone {spec.name!r} is registered twice.")
            found[spec.name] = spec
    for ep, specs in plugin_members("backbones", BackboneSpec):
        taken = [s.name for s in specs if s.name in found]
        if taken:
            warn_plugin(ep, f"reuses the backbone key {taken[0]!r}")
            continue
        found.update((s.name, s) for s in specs)
    return found


#: Every registered backbone by key, collected from the modality modules of this package.
BACKBONES: dict[str, BackboneSpec] = _collect()


def available_backbones(modality: str | None = None) -> tuple[str, ...]:
    """Registered backbone keys, sorted; only those accepting ``modality`` when given."""
    return tuple(sorted(k for k, s in BACKBONES.items() if modality is None or s.accepts(modality)))


def backbones_for(dataset: DatasetSpec) -> tuple[str, ...]:
    """The backbones that apply to a dataset, sorted.

    Those of its modality that the dataset lists (:attr:`DatasetSpec.backbones`; every one of
    the modality when it lists none), and those that name the dataset themselves
    (:attr:`BackboneSpec.datasets`).

    >>> from tasks.data.datasets import get_dataset_spec
    >>> "resnet18" in backbones_for(get_dataset_spec("cifar10"))
    True
    """
    return tuple(b for b in available_backbones(dataset.modality)
                 if dataset.applies(b) or dataset.name in BACKBONES[b].datasets)


def get_backbone_spec(name: str) -> BackboneSpec:
    """Look up a backbone's registry entry.

    Parameters
    ----------
    name : str
        Registry key.

    Returns
    -------
    BackboneSpec

    Raises
    ------
    ValueError
        If ``name`` is not registered; the message lists the valid keys.
    """
    try:
        return BACKBONES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"backbone must be one of {', '.join(available_backbones())}; got {name!r}."
        ) from None


def check_backbone(name: str, modality: str, dataset: str = "") -> BackboneSpec:
    """The entry of ``name``, after checking that it accepts inputs of ``modality``.

    Raises
    ------
    ValueError
        If the backbone is unknown or does not accept the modality; the message lists the
        backbones that do.
    """
    spec = get_backbone_spec(name)
    if not spec.accepts(modality):
        where = f"dataset {dataset!r} is" if dataset else "the data is"
        raise ValueError(
            f"backbone {name!r} takes {'/'.join(spec.modalities)} inputs, but {where} "
            f"{modality}; choose one of {', '.join(available_backbones(modality))}."
        )
    return spec


def get_backbone(name: str, n_classes: int, input_shape: tuple[int, ...]) -> nn.Module:
    """Build an untrained classifier.

    Parameters
    ----------
    name : str
        Registry key (see :func:`available_backbones`).
    n_classes : int
        Number of classes, at least 2.
    input_shape : tuple of int
        Shape of one model input: ``(channels, height, width)`` for images, ``(n_features,)``
        for graph nodes.

    Returns
    -------
    torch.nn.Module
        Parameters initialised from the current torch random state (seed it first).

    Raises
    ------
    ValueError
        If ``name`` is unknown, ``n_classes < 2``, or ``input_shape`` does not suit the
        architecture.
    """
    spec = get_backbone_spec(name)
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2; got {n_classes!r}.")
    shape = tuple(int(d) for d in input_shape)
    if not shape or any(d < 1 for d in shape):
        raise ValueError(f"input_shape must be a tuple of positive sizes; got {input_shape!r}.")
    return spec.build(n_classes, shape)
