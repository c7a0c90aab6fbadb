"""Small images as inputs of ImageNet-pretrained networks: ImageNet statistics, upsampled to 224.

The COT paper fine-tunes ImageNet-pretrained networks on CIFAR (32 pixels) and Tiny ImageNet
(64 pixels) after "upsampling the images to 224" (its authors' transform:
``Resize(224), ToTensor(), Normalize(IMAGENET_MEAN, IMAGENET_STD)``). :func:`upsampling_inputs`
makes that conversion for ``uint8`` images ``(n, side, side, 3)``:

    ``x = (images / 255 - mean) / std`` per channel, then bilinear interpolation to 224 x 224
    (``torch.nn.functional.interpolate``, ``align_corners=False``: pixel centres aligned, the
    border pixels repeated).

Normalisation is affine per channel and bilinear weights sum to one, so normalising before or
after the resize is the same up to float rounding. PIL's bilinear ``Resize`` of the authors'
transform upsamples with the same triangle filter in two passes, rounding the intermediate and the
final image to ``uint8``: the two differ by at most one grey level (a fifth of the pixels by one
level; checked by ``tests/tasks/test_tinyimagenet.py``).

The returned function has an ``on_device`` twin (what the image adapter calls on CUDA, see
:mod:`tasks.models.modalities.image`): the raw ``uint8`` rows go to the GPU (a 49th of the bytes of
the 224-pixel float inputs) and are normalised and upsampled there. Both run the same torch
operations; on the CPU the function returns a NumPy array. torch is imported when a batch is
converted, never when the dataset registry imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Final

import numpy as np

from tasks.data.datasets._vision import IMAGENET_MEAN, IMAGENET_STD

__all__ = ["UPSAMPLED_SIZE", "upsampled_inputs", "upsampled_on_device", "upsampling_inputs"]

#: Side of the upsampled inputs (the COT paper's 224).
UPSAMPLED_SIZE: Final[int] = 224


def _check(shape: tuple[int, ...], dtype: Any, side: int, what: str) -> None:
    if str(dtype) not in ("uint8", "torch.uint8") or len(shape) != 4 or tuple(shape[1:]) != (
            side, side, 3):
        raise ValueError(
            f"images must be {what} of shape (n, {side}, {side}, 3) and dtype uint8; got dtype "
            f"{dtype}, shape {tuple(shape)}."
        )


def upsampled_on_device(images: Any, *, side: int, size: int = UPSAMPLED_SIZE) -> Any:
    """``uint8`` rows ``(n, side, side, 3)`` (a torch tensor on any device) to float32 inputs.

    Parameters
    ----------
    images : torch.Tensor
        ``uint8`` ``(n, side, side, 3)``.
    side : int
        Side of the images (32 for CIFAR, 64 for Tiny ImageNet).
    size : int, default 224
        Side of the inputs.

    Returns
    -------
    torch.Tensor
        ``float32`` ``(n, 3, size, size)`` on the input's device: ImageNet-normalised, then
        bilinearly upsampled (see the module docstring).

    Raises
    ------
    ValueError
        If ``images`` is not ``uint8`` of that shape.
    """
    import torch
    import torch.nn.functional as F

    _check(tuple(images.shape), images.dtype, side, "a tensor")
    dev = images.device
    x = images.permute(0, 3, 1, 2).to(torch.float32)
    x = x * torch.tensor(1.0 / 255.0, dtype=torch.float32, device=dev)
    x -= torch.tensor(IMAGENET_MEAN, dtype=torch.float32, device=dev)[None, :, None, None]
    x /= torch.tensor(IMAGENET_STD, dtype=torch.float32, device=dev)[None, :, None, None]
    if images.shape[0] == 0:
        return x.new_zeros((0, 3, size, size))
    return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)


def upsampled_inputs(images: np.ndarray, *, side: int, size: int = UPSAMPLED_SIZE) -> np.ndarray:
    """As :func:`upsampled_on_device` on the CPU, for a NumPy batch; returns a NumPy array.

    Raises
    ------
    ValueError
        If ``images`` is not ``uint8`` ``(n, side, side, 3)``.
    """
    import torch

    images = np.asarray(images)
    _check(images.shape, images.dtype, side, "an array")
    out = upsampled_on_device(torch.from_numpy(np.ascontiguousarray(images)), side=side,
                              size=size)
    return np.ascontiguousarray(out.numpy(), dtype=np.float32)


def upsampling_inputs(side: int, size: int = UPSAMPLED_SIZE) -> Callable[[np.ndarray], np.ndarray]:
    """The ``to_inputs`` of a dataset of ``side``-pixel images for an ImageNet-pretrained network.

    Parameters
    ----------
    side : int
        Side of the dataset's ``uint8`` images.
    size : int, default 224
        Side of the network's inputs.

    Returns
    -------
    callable
        ``images -> float32 (n, 3, size, size)`` (:func:`upsampled_inputs`), with the torch twin
        ``.on_device`` (:func:`upsampled_on_device`); both picklable.
    """
    fn = partial(upsampled_inputs, side=side, size=size)
    fn.on_device = partial(upsampled_on_device, side=side, size=size)  # type: ignore[attr-defined]
    return fn
