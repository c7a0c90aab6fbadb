"""Photos as ResNet/ImageNet-style model inputs, shared by the photo datasets (Office-31, Waterbirds).

Samples of these datasets are image file paths; the image adapter calls the dataset's
``to_inputs`` on each mini-batch, so only one batch of decoded pixels is in memory at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.errors import DatasetUnavailableError

__all__ = ["CROP", "IMAGENET_MEAN", "IMAGENET_STD", "INPUT_SHAPE", "RESIZE", "photos_to_inputs"]

#: ImageNet channel statistics of torchvision's pretrained models (RGB, pixels in [0, 1]).
IMAGENET_MEAN: Final[tuple[float, float, float]] = (0.485, 0.456, 0.406)
IMAGENET_STD: Final[tuple[float, float, float]] = (0.229, 0.224, 0.225)
#: Shorter side after resizing, and the side of the central crop.
RESIZE: Final[int] = 256
CROP: Final[int] = 224
INPUT_SHAPE: Final[tuple[int, int, int]] = (3, CROP, CROP)


def _center_crop_box(width: int, height: int, size: int) -> tuple[int, int, int, int]:
    left = int(round((width - size) / 2.0))
    top = int(round((height - size) / 2.0))
    return left, top, left + size, top + size


def photos_to_inputs(
    paths: Sequence[str] | np.ndarray,
    *,
    resize: int = RESIZE,
    crop: int = CROP,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> np.ndarray:
    """Decode photos and make ResNet inputs: resize, centre crop, ImageNet normalisation.

    Every image is converted to RGB, its shorter side resized to ``resize`` pixels (bilinear,
    the other side ``int(resize * long / short)``), the central ``crop x crop`` square kept,
    and channel ``k`` mapped to ``(x / 255 - mean[k]) / std[k]``: torchvision's
    ``Resize(resize)``, ``CenterCrop(crop)``, ``ToTensor()``, ``Normalize(mean, std)``.

    Parameters
    ----------
    paths : sequence of str or numpy.ndarray
        Image file paths, one per sample (1-dimensional).
    resize, crop : int
        Shorter side after resizing (default 256) and crop side (default 224); ``crop <=
        resize``.
    mean, std : sequence of float
        Per-channel statistics (default ImageNet's).

    Returns
    -------
    numpy.ndarray
        ``(n, 3, crop, crop)`` ``float32``.

    Raises
    ------
    ValueError
        If ``paths`` is not a 1-dimensional array of strings, or a file cannot be decoded as an
        image (the message names the file).
    DatasetUnavailableError
        If a file does not exist.
    """
    from PIL import Image, UnidentifiedImageError

    arr = np.asarray(paths)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "UO"):
        raise ValueError(
            f"paths must be a 1-dimensional array of image file paths; got shape {arr.shape}, "
            f"dtype {arr.dtype}."
        )
    if not 1 <= crop <= resize:
        raise ValueError(f"crop must be in [1, resize={resize}]; got {crop!r}.")
    out = np.empty((arr.size, 3, crop, crop), dtype=np.float32)
    scale = np.float32(1.0 / 255.0)
    m = np.asarray(mean, dtype=np.float32).reshape(3, 1, 1)
    s = np.asarray(std, dtype=np.float32).reshape(3, 1, 1)
    for i, raw in enumerate(arr.tolist()):
        if not isinstance(raw, str):
            raise ValueError(f"paths[{i}] must be a file path (str); got {type(raw).__name__}.")
        path = Path(raw)
        if not path.is_file():
            raise DatasetUnavailableError(
                f"image {raw!r} (sample {i}) does not exist; the dataset's files changed since "
                f"they were staged: fetch the dataset again."
            )
        try:
            with Image.open(path) as img:
                rgb = img.convert("RGB")
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
            raise ValueError(
                f"image {raw!r} (sample {i}) cannot be decoded ({type(exc).__name__}: {exc}); "
                f"the file is corrupt: fetch the dataset again."
            ) from None
        w, h = rgb.size
        if w <= h:
            size = (resize, int(resize * h / w))
        else:
            size = (int(resize * w / h), resize)
        if size != (w, h):
            rgb = rgb.resize(size, Image.Resampling.BILINEAR)
        rgb = rgb.crop(_center_crop_box(rgb.size[0], rgb.size[1], crop))
        x = np.asarray(rgb, dtype=np.float32).transpose(2, 0, 1) * scale
        out[i] = (x - m) / s
    return out
