"""Domain shift, MNIST-M style: grey-level images blended over patches of real photographs.

MNIST-M (Ganin & Lempitsky, 2015) replaces the black background of MNIST digits with colour
patches of photographs and inverts the patch under the stroke: ``out = |patch - digit|`` per
colour channel. Here the photographs are the two that scikit-learn ships
(:func:`sklearn.datasets.load_sample_images`: ``china.jpg`` and ``flower.jpg``, 427 x 640 RGB),
so no download is needed. For every image a photograph is picked at random and a patch of the
image's size is cut at a random position; the blend is

.. math:: out_k = | \\beta \\, patch_k - x |, \\quad k \\in \\{R, G, B\\},

with ``x`` the image in ``[0, 1]`` and ``beta`` the patch intensity (the severity). Because the
classifiers take one-channel input, the RGB blend is converted back to grey level with the
ITU-R 601-2 luma weights PIL uses for ``convert("L")``: ``0.299 R + 0.587 G + 0.114 B``.

References
----------
.. [1] Y. Ganin and V. Lempitsky, "Unsupervised Domain Adaptation by Backpropagation", ICML 2015.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np
from PIL import Image

from tasks.data.spec import TargetPool
from tasks.data.families import ShiftFamily, TargetSplitSpec
from tasks.data.shifts.clean import BASE_SUBSET_SIZE, base_subset

#: ITU-R 601-2 luma weights (PIL's ``convert("L")``).
LUMA: Final[np.ndarray] = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def sample_photo_files() -> list[Path]:
    """The JPEG files behind :func:`sklearn.datasets.load_sample_images`, sorted by name.

    They are located through the installed scikit-learn package without importing it (its
    import pulls in SciPy and takes seconds).

    Returns
    -------
    list of Path
        ``[.../sklearn/datasets/images/china.jpg, .../flower.jpg]``.

    Raises
    ------
    FileNotFoundError
        If scikit-learn or its sample images are not installed.
    """
    spec = importlib.util.find_spec("sklearn")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    files: list[Path] = []
    if locations:
        files = sorted(Path(locations[0]).joinpath("datasets", "images").glob("*.jpg"))
    if not files:
        raise FileNotFoundError(
            "The domain shift blends images over scikit-learn's sample photographs "
            "(sklearn/datasets/images/*.jpg), which were not found; install scikit-learn."
        )
    return files


@lru_cache(maxsize=1)
def sample_photos() -> np.ndarray:
    """The photographs of :func:`sklearn.datasets.load_sample_images`, stacked.

    Read exactly as scikit-learn reads them (``numpy.asarray(PIL.Image.open(file))``).

    Returns
    -------
    numpy.ndarray
        ``(2, 427, 640, 3)`` ``uint8`` (china, flower), read-only.
    """
    images = []
    for path in sample_photo_files():
        with Image.open(path) as img:
            images.append(np.asarray(img, dtype=np.uint8))
    photos = np.stack(images)
    photos.setflags(write=False)
    return photos


def photo_patches(n: int, height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """Cut ``n`` random patches from the sample photographs.

    Parameters
    ----------
    n : int
        Number of patches.
    height, width : int
        Patch size in pixels (at most the photographs' size).
    rng : numpy.random.Generator
        Draws the photograph, then the top-left corner, of every patch.

    Returns
    -------
    numpy.ndarray
        ``(n, height, width, 3)`` ``float32`` RGB patches in ``[0, 1]``.
    """
    photos = sample_photos()
    k, ph, pw, _ = photos.shape
    which = rng.integers(0, k, n)
    top = rng.integers(0, ph - height + 1, n)
    left = rng.integers(0, pw - width + 1, n)
    rows = top[:, None] + np.arange(height)[None, :]
    cols = left[:, None] + np.arange(width)[None, :]
    patches = photos[which[:, None, None], rows[:, :, None], cols[:, None, :]]
    return patches.astype(np.float32) / np.float32(255.0)


def mnistm_blend(images: np.ndarray, intensity: float, rng: np.random.Generator) -> np.ndarray:
    """Blend grey-level images over photograph patches, MNIST-M style, back to grey level.

    Parameters
    ----------
    images : numpy.ndarray
        ``(n, height, width)`` ``uint8`` images.
    intensity : float
        Patch intensity ``beta`` in ``(0, 1]``; 1 is the original MNIST-M blend.
    rng : numpy.random.Generator
        Seeded generator for :func:`photo_patches`.

    Returns
    -------
    numpy.ndarray
        ``(n, height, width)`` ``uint8`` images.

    Raises
    ------
    ValueError
        If the images are not ``uint8`` ``(n, h, w)`` or ``intensity`` is outside ``(0, 1]``.
    """
    images = np.asarray(images)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(
            f"images must be a uint8 array of shape (n, height, width); got {images.dtype} "
            f"{images.shape}."
        )
    if not 0.0 < intensity <= 1.0:
        raise ValueError(f"intensity must be in (0, 1]; got {intensity!r}.")
    n, h, w = images.shape
    patches = photo_patches(n, h, w, rng)
    x = images.astype(np.float32)[..., None] / np.float32(255.0)
    rgb = np.abs(np.float32(intensity) * patches - x)
    grey = rgb @ LUMA
    return np.clip(np.rint(grey * 255.0), 0, 255).astype(np.uint8)


#: Photo-patch intensity of domain severities 1 to 3.
DOMAIN_INTENSITIES: tuple[float, ...] = (0.4, 0.7, 1.0)


def _splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(
            f"mnistm-photo-{sev}",
            "domain",
            "mnistm-photo",
            sev,
            (("intensity", beta), ("size", float(BASE_SUBSET_SIZE))),
        )
        for sev, beta in enumerate(DOMAIN_INTENSITIES, start=1)
    ]


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    idx = base_subset(dataset, pool)
    return mnistm_blend(pool.samples[idx], split.param("intensity"), rng), pool.labels[idx]


#: MNIST-M style blend with patches of real photographs.
FAMILIES: tuple[ShiftFamily, ...] = (
    ShiftFamily("domain", 4, ("image",), _splits, _generate),
)
