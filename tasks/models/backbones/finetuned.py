"""The COT paper's networks: torchvision ResNet18, ResNet50 and VGG11 from ImageNet weights.

The COT paper (Lu et al. 2023, Section 4, "Architectures") loads "the weights pretrained on
ImageNet1k", fine-tunes on CIFAR-10, CIFAR-100 and Tiny ImageNet with the images "upsampled to
224", and calibrates by temperature scaling on the validation set. Each entry here builds the
torchvision architecture, loads the published ``IMAGENET1K_V1`` weights from the state folder
(:mod:`tasks.data.finetune_weights`: SHA-256 checked, ``torch.load(weights_only=True)``,
``strict=True``) and replaces the last linear layer by a fresh one with the dataset's classes,
as the authors' ``model.py`` does (``resnet.fc = nn.Linear(in, C)``,
``vgg.classifier[-1] = nn.Linear(4096, C)``; github.com/luyuzhe111/COT):

===========  ===========================================  =========================
key          architecture (torchvision)                    parameters (C = 10)
===========  ===========================================  =========================
resnet18-ft  ``resnet18``, ImageNet weights, new ``fc``     11,181,642
resnet50     ``resnet50``, ImageNet weights, new ``fc``     23,528,522
vgg11        ``vgg11`` (no batch norm, the authors'),       128,807,306
             ImageNet weights, new ``classifier[6]``
===========  ===========================================  =========================

``resnet18`` (:mod:`tasks.models.backbones.vision`) stays the ALSA paper's ResNet18, trained from
scratch at the images' own size; ``resnet18-ft`` is the COT paper's.

Inputs
------
The networks take 224-pixel inputs with ImageNet's channel statistics: the datasets upsample
their small images for these backbones (``DatasetSpec.backbone_inputs``,
:mod:`tasks.data.datasets._upsample`), on the GPU when the run has one. The builders accept any
3-channel input of at least 32 pixels (torchvision's adaptive pooling).

Recipe (:data:`COT_RECIPE`)
---------------------------
The authors' training scripts (``train_model.py --pretrained`` and ``init_ref_model.py``, called
by ``scripts/train_*.sh`` with ``--train_epoch 20 --lr 0.001 --batch_size 64``): SGD with
momentum 0.9, learning rate 1e-3, no weight decay, batch 64, 20 epochs, no early stopping (the
last epoch is kept). Their cosine schedule has ``T_max = 20 x batches per epoch``; in
``train_model.py`` it is stepped once per epoch, so the rate stays within 0.01 % of 1e-3 for the
20 epochs, and ``init_ref_model.py`` steps it per batch. The recipe here is the image adapter's
``"sgd-step"`` (a tenfold drop every 100 epochs, so none in 20): ``train_model.py``'s schedule, to
that 0.01 %, without a new optimizer in the image adapter (whose code is in every image dataset's
train key). Not reproduced: ``train_model.py``'s fp16 autocast (the adapter trains in float32).
Temperature scaling on the validation set is the estimators' own (AC, ATC and COT fit a
temperature on the validation logits; :mod:`estimators.temperature`).

Weights absent
--------------
Without the file, building raises one line naming it and the fetch command, unless
``ALSA_BENCH_RANDOM_INIT=1`` asks for torchvision's random initialisation
(:func:`tasks.data.finetune_weights.random_init_allowed`; for dry runs on generated releases and
for tests). The new head's initial weights come from the torch generator after the body was
built, as in the authors' code, so ``torch.manual_seed(seed)`` before building fixes both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from torch import nn
from torchvision import models

from tasks.data.errors import DatasetUnavailableError
from tasks.data.finetune_weights import (
    FINETUNE_WEIGHTS,
    missing_message,
    random_init_allowed,
    weights_path,
)
from tasks.models.backbones.base import BackboneSpec
from tasks.models.backbones.pretrained import _check_digest, _read_state_dict

__all__ = ["COT_RECIPE", "SPECS", "build_finetuned", "replace_head"]

logger = logging.getLogger(__name__)

#: The COT authors' fine-tuning recipe, as :class:`BackboneSpec` fields (see the module docstring).
COT_RECIPE: Final[dict[str, Any]] = {
    "optimizer": "sgd-step",
    "lr": 1e-3,
    "weight_decay": 0.0,
    "batch_size": 64,
    "epochs": 20,
    "patience": None,
}


def replace_head(model: nn.Module, n_classes: int) -> nn.Module:
    """Replace the last linear layer of a torchvision ResNet or VGG by ``nn.Linear(in, n_classes)``.

    Parameters
    ----------
    model : torch.nn.Module
        A torchvision ``ResNet`` (``fc``) or ``VGG`` (``classifier[-1]``).
    n_classes : int
        Outputs of the new layer, initialised by torch's default (from the current generator).

    Returns
    -------
    torch.nn.Module
        ``model``, changed in place.

    Raises
    ------
    TypeError
        If ``model`` has neither head.
    """
    if isinstance(getattr(model, "fc", None), nn.Linear):
        model.fc = nn.Linear(model.fc.in_features, n_classes)
    elif isinstance(getattr(model, "classifier", None), nn.Sequential) and isinstance(
            model.classifier[-1], nn.Linear):
        model.classifier[-1] = nn.Linear(model.classifier[-1].in_features, n_classes)
    else:
        raise TypeError(
            f"model must be a torchvision ResNet (fc) or VGG (classifier[-1]); got "
            f"{type(model).__name__}."
        )
    return model


def build_finetuned(
    name: str, n_classes: int, input_shape: tuple[int, ...], root: Path | str | None = None
) -> nn.Module:
    """torchvision's ``name`` with its ImageNet weights and a new head of ``n_classes`` outputs.

    Parameters
    ----------
    name : str
        A key of :data:`tasks.data.finetune_weights.FINETUNE_WEIGHTS`.
    n_classes : int
        Number of classes of the dataset.
    input_shape : tuple of int
        ``(3, height, width)``, height and width at least 32.
    root : Path or str, optional
        Data root of the weights; default :func:`storage.paths.data_dir`.

    Returns
    -------
    torch.nn.Module
        In train mode, every parameter trainable.

    Raises
    ------
    ValueError
        If the input shape does not suit the model, or the weights file is not a state dict of
        the architecture.
    DatasetUnavailableError
        If the weights file is absent and ``$ALSA_BENCH_RANDOM_INIT`` is not set.
    ChecksumError
        If the file's SHA-256 (or its published prefix) differs.
    """
    entry = FINETUNE_WEIGHTS[name]
    shape = tuple(input_shape)
    if len(shape) != 3 or shape[0] != 3 or min(shape[1:]) < entry.min_size:
        raise ValueError(
            f"backbone {name!r} needs RGB inputs (3, height, width) with height and width >= "
            f"{entry.min_size}; got input_shape={shape}."
        )
    path = weights_path(name, root)
    present = path.is_file()
    if not present and not random_init_allowed():
        raise DatasetUnavailableError(missing_message(name, path))
    if present:
        _check_digest(entry, path)
    builder: Callable[..., nn.Module] = getattr(models, entry.arch)
    model = builder(weights=None)  # 1,000 ImageNet classes: the weights' shapes
    if present:
        try:
            model.load_state_dict(_read_state_dict(path), strict=True)
        except RuntimeError as exc:
            detail = " ".join(str(exc).split())
            raise ValueError(
                f"weights file {str(path)!r} does not fit torchvision's {entry.arch}: "
                f"{detail[:400]}"
            ) from None
    else:
        logger.warning("%s: %s is absent; random initialisation (ALSA_BENCH_RANDOM_INIT)",
                       name, path)
    return replace_head(model, n_classes).train()


def _builder(name: str) -> Callable[[int, tuple[int, ...]], nn.Module]:
    def build(n_classes: int, input_shape: tuple[int, ...]) -> nn.Module:
        return build_finetuned(name, n_classes, input_shape)

    return build


def _spec(name: str, description: str) -> BackboneSpec:
    return BackboneSpec(name=name, build=_builder(name), description=description,
                        modalities=("image",), **COT_RECIPE)


#: The COT paper's backbones (registry entries; :mod:`tasks.models.backbones` collects them).
SPECS: Final[tuple[BackboneSpec, ...]] = (
    _spec("resnet18-ft", "torchvision ResNet18 from ImageNet weights, fine-tuned at 224 (COT)"),
    _spec("resnet50", "torchvision ResNet50 from ImageNet weights, fine-tuned at 224 (COT)"),
    _spec("vgg11", "torchvision VGG11 from ImageNet weights, fine-tuned at 224 (COT)"),
)
