"""Pretrained ImageNet classifiers: torchvision's AlexNet, MobileNetV2 and EfficientNet-B0.

The ALSA paper (App. H) evaluates three models "provided by PyTorch" directly on ImageNet, with
no training. Each entry here builds the torchvision architecture with ``weights=None`` and loads
the published ``IMAGENET1K_V1`` weights from the state folder, never from the internet:

===============  ===========================================  ==========  =================
key              weights file (torchvision ``IMAGENET1K_V1``)   parameters  input transform
===============  ===========================================  ==========  =================
alexnet          ``alexnet-owt-7be5be79.pth``                  61.1 M      resize 256 bilinear
mobilenet_v2     ``mobilenet_v2-b0353104.pth``                 3.5 M       resize 256 bilinear
efficientnet_b0  ``efficientnet_b0_rwightman-7f5810bc.pth``    5.3 M       resize 256 bicubic
===============  ===========================================  ==========  =================

Where the weights live
----------------------
``<data root>/imagenet/weights/<file>`` (:func:`weights_path`), the data root being
``$ALSA_BENCH_HOME/data``. ``alsa-bench fetch imagenet`` puts them there: the ``imagenet``
dataset lists them in its ``sources`` (:func:`remote_files`, ``extract=False``,
``dest="imagenet/weights"``), so they are fetched, verified and copied like the ImageNetV2
archives, and the dataset's digest covers them.

Checksums
---------
torch hub checks that a downloaded file's SHA-256 starts with the 8 hex digits in its name.
The full SHA-256 is pinned where a published one was found (AlexNet, EfficientNet-B0); for
MobileNetV2 only the published 8-digit prefix ``b0353104`` is known, so that file is not in
``sources`` (a :class:`~tasks.data.spec.RemoteFile` needs a full digest) and must be put
into the folder by hand (the missing-file message gives the URL). Every load re-checks the
file's SHA-256: the full digest when pinned, else the prefix of its name, as torch hub does.
The file is read with ``torch.load(weights_only=True)`` and loaded with ``strict=True``.

Examples
--------
>>> weights_path("alexnet").name
'alexnet-owt-7be5be79.pth'
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

import torch
from torch import nn
from torchvision import models

from storage.hashing import file_sha256
from tasks.data.pretrained_weights import (
    WEIGHTS,
    WEIGHTS_DIR,
    PretrainedWeights,
    _entry,
    remote_files,
    weights_path,
)
from tasks.models.backbones.base import BackboneSpec

__all__ = [
    "PretrainedWeights",
    "SPECS",
    "WEIGHTS",
    "WEIGHTS_DIR",
    "build_pretrained",
    "remote_files",
    "weights_path",
]

def _check_digest(entry: PretrainedWeights, path: Path) -> None:
    from tasks.data.errors import ChecksumError

    got = file_sha256(path)
    expected = entry.sha256 or entry.prefix
    if not got.startswith(expected):
        what = "SHA-256" if entry.sha256 else "SHA-256 prefix (from the file name, as torch hub)"
        raise ChecksumError(
            f"weights file {str(path)!r} has SHA-256 {got}; expected {what} {expected}. It is "
            f"corrupt or not torchvision's release: delete it and download {entry.url} again."
        )


def _missing(name: str, entry: PretrainedWeights, path: Path) -> Exception:
    from tasks.data.errors import DatasetUnavailableError

    how = (
        "download them once with `alsa-bench fetch imagenet` (needs the internet)"
        if entry.sha256
        else f"download {entry.url} once (needs the internet) and put it there"
    )
    return DatasetUnavailableError(
        f"pretrained weights of {name!r} are not on this machine: missing {entry.filename!r} "
        f"in the folder {str(path.parent)!r}; {how}, or point ALSA_BENCH_HOME at a state "
        f"folder that has them."
    )


def _read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as exc:
        raise ValueError(
            f"weights file {str(path)!r} is not a readable torch state dict "
            f"({exc.__class__.__name__}); delete it and download it again."
        ) from exc
    if not isinstance(blob, Mapping) or not blob or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in blob.items()
    ):
        got = type(blob).__name__ if not isinstance(blob, Mapping) else "a mapping of other values"
        raise ValueError(
            f"weights file {str(path)!r} must hold a state dict (a mapping of parameter names "
            f"to tensors); got {got}."
        )
    return dict(blob)


def build_pretrained(
    name: str, n_classes: int, input_shape: tuple[int, ...], root: Path | str | None = None
) -> nn.Module:
    """Build torchvision's ``name`` and load its published weights from the state folder.

    Parameters
    ----------
    name : str
        A key of :data:`WEIGHTS`.
    n_classes : int
        Number of classes; must match the classifier in the weights (1000 for ImageNet).
    input_shape : tuple of int
        ``(3, height, width)`` with height and width at least the architecture's minimum.
    root : Path or str, optional
        Data root; default :func:`storage.paths.data_dir`.

    Returns
    -------
    torch.nn.Module
        The classifier with the weights loaded (``strict=True``), in eval mode.

    Raises
    ------
    DatasetUnavailableError
        If the weight file is missing (one line: file, folder, how to get it).
    ChecksumError
        If the file's SHA-256 (or its published prefix) differs.
    ValueError
        If the input shape does not suit the model, the file is not a state dict, or its
        tensors do not fit the architecture at ``n_classes`` classes.
    """
    entry = _entry(name)
    shape = tuple(input_shape)
    if len(shape) != 3 or shape[0] != 3 or min(shape[1:]) < entry.min_size:
        raise ValueError(
            f"backbone {name!r} needs RGB inputs (3, height, width) with height and width >= "
            f"{entry.min_size}; got input_shape={shape}."
        )
    path = weights_path(name, root)
    if not path.is_file():
        raise _missing(name, entry, path)
    _check_digest(entry, path)
    state = _read_state_dict(path)
    builder: Callable[..., nn.Module] = getattr(models, entry.arch)
    model = builder(weights=None, num_classes=n_classes)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())
        raise ValueError(
            f"weights file {str(path)!r} does not fit torchvision's {entry.arch} with "
            f"{n_classes} classes: {detail[:400]}"
        ) from None
    return model.eval()


def _spec(name: str, description: str) -> BackboneSpec:
    return BackboneSpec(
        name=name,
        build=lambda n_classes, shape: build_pretrained(name, n_classes, shape),
        description=description,
        modalities=("image",),
        epochs=0,
        batch_size=256,
        pretrained=True,
    )


#: The pretrained ImageNet backbones (registry entries; :mod:`tasks.models.backbones` collects them).
SPECS: Final[tuple[BackboneSpec, ...]] = (
    _spec("alexnet", "AlexNet, torchvision IMAGENET1K_V1 weights (no training)"),
    _spec("mobilenet_v2", "MobileNetV2, torchvision IMAGENET1K_V1 weights (no training)"),
    _spec("efficientnet_b0", "EfficientNet-B0, torchvision IMAGENET1K_V1 weights (no training)"),
)
