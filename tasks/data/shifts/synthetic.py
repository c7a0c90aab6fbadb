"""Synthetic shift: 18 image corruptions at 5 severities, in the spirit of MNIST-C and CIFAR-10-C.

Every corruption maps grey-level images ``(n, height, width)`` ``uint8`` to images of the same
shape and dtype, values in ``[0, 255]``. Internally pixels are floats in ``[0, 1]``; each
corruption is a function ``f(x, level, rng)`` of those floats, the severity's parameter ``level``
(:attr:`Corruption.levels`) and a seeded :class:`numpy.random.Generator`. Random draws never
depend on the severity, so with one seed a higher severity applies the same random pattern
(noise field, direction, position) with a larger magnitude. Only numpy, torch and PIL are used;
torch runs on the CPU and gives the same bytes for the same seed.

Families of corruptions (``CORRUPTIONS`` keys):

* noise: ``gaussian_noise``, ``shot_noise``, ``impulse_noise``
* blur: ``gaussian_blur``, ``motion_blur``, ``defocus_blur``, ``zoom_blur``
* geometric: ``rotate``, ``shear``, ``scale``, ``translate``
* photometric: ``brightness``, ``contrast``, ``fog``
* digital: ``jpeg``, ``pixelate``
* occlusion: ``occlusion``, ``stripe``

References
----------
.. [1] D. Hendrycks and T. Dietterich, "Benchmarking Neural Network Robustness to Common
   Corruptions and Perturbations", ICLR 2019 (CIFAR-10-C).
.. [2] N. Mu and J. Gilmer, "MNIST-C: A Robustness Benchmark for Computer Vision", 2019.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import numpy as np
from PIL import Image

from tasks.data.spec import TargetPool
from tasks.data.families import ShiftFamily, TargetSplitSpec
from tasks.data.shifts.clean import BASE_SUBSET_SIZE, base_subset

#: Severity levels of every corruption.
SEVERITIES: Final[tuple[int, ...]] = (1, 2, 3, 4, 5)

CorruptionFn = Callable[[np.ndarray, float, np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class Corruption:
    """One corruption of the registry.

    Attributes
    ----------
    name : str
        Registry key, also the ``shift`` of its target splits.
    fn : callable
        ``fn(x, level, rng) -> x'`` on float images ``(n, h, w)`` in ``[0, 1]``.
    levels : tuple of float
        The parameter of severities 1 to 5, in order.
    parameter : str
        What ``levels`` measures (for docs/SHIFTS.md).
    group : str
        ``noise``, ``blur``, ``geometric``, ``photometric``, ``digital`` or ``occlusion``.
    """

    name: str
    fn: CorruptionFn
    levels: tuple[float, ...]
    parameter: str
    group: str


# ----------------------------------------------------------------------------- helpers


def _as_float(images: np.ndarray) -> np.ndarray:
    return images.astype(np.float32) * np.float32(1.0 / 255.0)


def _as_uint8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x * 255.0), 0, 255).astype(np.uint8)


def _convolve(x: np.ndarray, kernels: np.ndarray) -> np.ndarray:
    """Convolve each image with one shared kernel ``(k, k)`` or its own ``(n, k, k)``."""
    import torch
    import torch.nn.functional as F

    n, h, w = x.shape
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    k = torch.from_numpy(np.ascontiguousarray(kernels, dtype=np.float32))
    pad = k.shape[-1] // 2
    with torch.no_grad():
        if k.ndim == 2:
            out = F.conv2d(t[:, None], k[None, None], padding=pad)[:, 0]
        else:
            out = F.conv2d(t[None], k[:, None], padding=pad, groups=n)[0]
    return out.numpy()


def _warp(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Apply per-image affine maps ``(n, 2, 3)`` (output to input, normalised coordinates)."""
    import torch
    import torch.nn.functional as F

    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))[:, None]
    th = torch.from_numpy(np.ascontiguousarray(theta, dtype=np.float32))
    with torch.no_grad():
        grid = F.affine_grid(th, list(t.shape), align_corners=False)
        out = F.grid_sample(t, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out[:, 0].numpy()


def _affine(n: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    theta = np.zeros((n, 2, 3), dtype=np.float32)
    theta[:, 0, 0], theta[:, 0, 1], theta[:, 1, 0], theta[:, 1, 1] = a, b, c, d
    return theta


def _random_signs(n: int, rng: np.random.Generator) -> np.ndarray:
    return np.where(rng.random(n) < 0.5, -1.0, 1.0)


def _disk(radius: float) -> np.ndarray:
    r = int(math.ceil(radius))
    yy, xx = np.mgrid[-r : r + 1, -r : r + 1]
    # Anti-aliased edge: full weight inside, linear fall-off over half a pixel.
    k = np.clip(radius + 0.5 - np.hypot(yy, xx), 0.0, 1.0)
    return k / k.sum()


def _gaussian_kernel(sigma: float) -> np.ndarray:
    r = max(1, int(math.ceil(3.0 * sigma)))
    ax = np.arange(-r, r + 1, dtype=np.float64)
    g = np.exp(-0.5 * (ax / sigma) ** 2)
    k = np.outer(g, g)
    return k / k.sum()


# ----------------------------------------------------------------------------- noise


def gaussian_noise(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Add white Gaussian noise.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Standard deviation of the noise (pixel scale ``[0, 1]``).
    rng : numpy.random.Generator
        Source of the noise field.

    Returns
    -------
    numpy.ndarray
        ``x + level * z`` with ``z`` standard normal (clipped later).
    """
    return x + np.float32(level) * rng.standard_normal(x.shape, dtype=np.float32)


def shot_noise(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Poisson (photon) noise: each pixel becomes ``Poisson(x * level) / level``.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Photon count of a white pixel; lower is noisier.
    rng : numpy.random.Generator
        Source of the counts.

    Returns
    -------
    numpy.ndarray
        Noisy images.
    """
    return (rng.poisson(x.astype(np.float64) * level) / level).astype(np.float32)


def impulse_noise(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Salt-and-pepper noise: a fraction ``level`` of pixels set to black or white.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Fraction of pixels replaced.
    rng : numpy.random.Generator
        Chooses the pixels (one uniform draw per pixel) and their colour.

    Returns
    -------
    numpy.ndarray
        Noisy images; a higher level replaces a superset of the pixels.
    """
    hit = rng.random(x.shape) < level
    salt = (rng.random(x.shape) < 0.5).astype(np.float32)
    return np.where(hit, salt, x)


# ----------------------------------------------------------------------------- blur


def gaussian_blur(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Gaussian blur.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Standard deviation of the kernel in pixels.
    rng : numpy.random.Generator
        Unused (deterministic corruption); kept for the common signature.

    Returns
    -------
    numpy.ndarray
        Blurred images (zero padding: the background is black).
    """
    return _convolve(x, _gaussian_kernel(level))


def motion_blur(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Linear motion blur along a random direction per image.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Length of the motion in pixels.
    rng : numpy.random.Generator
        Draws one direction per image, uniform in ``[0, pi)``.

    Returns
    -------
    numpy.ndarray
        Images averaged along an anti-aliased line segment of the given length.
    """
    n = x.shape[0]
    angles = rng.uniform(0.0, math.pi, n)
    half = (level - 1.0) / 2.0
    r = int(math.ceil(half)) + 1
    yy, xx = np.mgrid[-r : r + 1, -r : r + 1].astype(np.float64)
    cos, sin = np.cos(angles)[:, None, None], np.sin(angles)[:, None, None]
    along = xx[None] * cos + yy[None] * sin
    across = -xx[None] * sin + yy[None] * cos
    k = np.clip(1.0 - np.abs(across), 0.0, 1.0) * np.clip(half + 0.5 - np.abs(along), 0.0, 1.0)
    k /= k.sum(axis=(1, 2), keepdims=True)
    return _convolve(x, k)


def defocus_blur(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Defocus (disk) blur.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Radius of the disk kernel in pixels.
    rng : numpy.random.Generator
        Unused (deterministic corruption); kept for the common signature.

    Returns
    -------
    numpy.ndarray
        Blurred images.
    """
    return _convolve(x, _disk(level))


def zoom_blur(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Zoom blur: the mean of the image and 5 centre zooms up to factor ``level``.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Largest zoom factor (> 1).
    rng : numpy.random.Generator
        Unused (deterministic corruption); kept for the common signature.

    Returns
    -------
    numpy.ndarray
        Blurred images.
    """
    n = x.shape[0]
    out = x.astype(np.float32).copy()
    zooms = np.linspace(1.0, level, 6)[1:]
    for z in zooms:
        s = np.full(n, 1.0 / z)
        out += _warp(x, _affine(n, s, np.zeros(n), np.zeros(n), s))
    return out / (len(zooms) + 1)


# ----------------------------------------------------------------------------- geometric


def rotate(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Rotate about the centre by ``level`` degrees, clockwise or anticlockwise at random.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Rotation angle in degrees.
    rng : numpy.random.Generator
        Draws the direction of every image.

    Returns
    -------
    numpy.ndarray
        Rotated images, bilinear, black outside.
    """
    n = x.shape[0]
    a = np.deg2rad(level) * _random_signs(n, rng)
    return _warp(x, _affine(n, np.cos(a), -np.sin(a), np.sin(a), np.cos(a)))


def shear(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Shear horizontally or vertically (random per image) by factor ``level``.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Shear factor (displacement per unit of the other coordinate).
    rng : numpy.random.Generator
        Draws axis and sign of every image.

    Returns
    -------
    numpy.ndarray
        Sheared images.
    """
    n = x.shape[0]
    horizontal = rng.random(n) < 0.5
    s = level * _random_signs(n, rng)
    ones, zeros = np.ones(n), np.zeros(n)
    shear_x = np.where(horizontal, s, zeros)
    shear_y = np.where(horizontal, zeros, s)
    return _warp(x, _affine(n, ones, shear_x, shear_y, ones))


def scale(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Shrink about the centre to ``level`` times the size.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Scale factor in ``(0, 1]``.
    rng : numpy.random.Generator
        Unused (deterministic corruption); kept for the common signature.

    Returns
    -------
    numpy.ndarray
        Shrunk images on a black canvas.
    """
    n = x.shape[0]
    s = np.full(n, 1.0 / level)
    return _warp(x, _affine(n, s, np.zeros(n), np.zeros(n), s))


def translate(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Shift by ``level`` pixels in a random direction per image.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Length of the shift in pixels.
    rng : numpy.random.Generator
        Draws one direction per image, uniform in ``[0, 2 pi)``.

    Returns
    -------
    numpy.ndarray
        Shifted images, black where uncovered.
    """
    n, h, w = x.shape
    angle = rng.uniform(0.0, 2.0 * math.pi, n)
    theta = _affine(n, np.ones(n), np.zeros(n), np.zeros(n), np.ones(n))
    theta[:, 0, 2] = -2.0 * level * np.cos(angle) / w
    theta[:, 1, 2] = -2.0 * level * np.sin(angle) / h
    return _warp(x, theta)


# ----------------------------------------------------------------------------- photometric


def brightness(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Raise every pixel by ``level``.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Added intensity.
    rng : numpy.random.Generator
        Unused (deterministic corruption); kept for the common signature.

    Returns
    -------
    numpy.ndarray
        Brighter images (clipped later).
    """
    return x + np.float32(level)


def contrast(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Scale deviations from each image's mean by ``level``.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Contrast factor in ``(0, 1]``; lower is flatter.
    rng : numpy.random.Generator
        Unused (deterministic corruption); kept for the common signature.

    Returns
    -------
    numpy.ndarray
        Low-contrast images.
    """
    mean = x.mean(axis=(1, 2), keepdims=True)
    return mean + (x - mean) * np.float32(level)


def fog(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Overlay a smooth random haze (three octaves of upsampled noise, CIFAR-10-C style).

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Haze strength: ``x' = (x + level * haze) / (1 + level)`` with ``haze`` in ``[0, 1]``.
    rng : numpy.random.Generator
        Draws the noise of the haze.

    Returns
    -------
    numpy.ndarray
        Hazy images.
    """
    import torch
    import torch.nn.functional as F

    n, h, w = x.shape
    haze = torch.zeros(n, 1, h, w)
    for cells, weight in ((3, 1.0), (6, 0.5), (12, 0.25)):
        noise = torch.from_numpy(rng.random((n, 1, cells, cells), dtype=np.float32))
        haze += weight * F.interpolate(noise, size=(h, w), mode="bicubic", align_corners=False)
    hz = haze[:, 0].numpy()
    lo, hi = hz.min(axis=(1, 2), keepdims=True), hz.max(axis=(1, 2), keepdims=True)
    hz = (hz - lo) / np.maximum(hi - lo, 1e-6)
    return (x + np.float32(level) * hz) / np.float32(1.0 + level)


# ----------------------------------------------------------------------------- digital


def jpeg(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """JPEG compression at quality ``level`` (PIL encoder, grey-level).

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        JPEG quality in ``[1, 95]``; lower is blockier.
    rng : numpy.random.Generator
        Unused (deterministic corruption); kept for the common signature.

    Returns
    -------
    numpy.ndarray
        Decoded images.
    """
    out = np.empty_like(x, dtype=np.float32)
    for i, img in enumerate(_as_uint8(x)):
        buf = io.BytesIO()
        Image.fromarray(img, mode="L").save(buf, format="JPEG", quality=int(level))
        buf.seek(0)
        out[i] = np.asarray(Image.open(buf), dtype=np.float32) / 255.0
    return out


def pixelate(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Average down to ``level`` x ``level`` pixels, then scale back up (nearest neighbour).

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Side of the low-resolution image in pixels.
    rng : numpy.random.Generator
        Unused (deterministic corruption); kept for the common signature.

    Returns
    -------
    numpy.ndarray
        Pixelated images.
    """
    import torch
    import torch.nn.functional as F

    n, h, w = x.shape
    side = int(level)
    t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))[:, None]
    small = F.interpolate(t, size=(side, side), mode="area")
    return F.interpolate(small, size=(h, w), mode="nearest")[:, 0].numpy()


# ----------------------------------------------------------------------------- occlusion


def occlusion(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Paste a grey square of side ``level`` pixels at a random place on each image.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Side of the square in pixels.
    rng : numpy.random.Generator
        Draws the centre (uniform over the central half of the image, where the object is)
        and the grey value (uniform in ``[0.3, 0.7]``) of every square.

    Returns
    -------
    numpy.ndarray
        Occluded images; a higher level covers a superset of the pixels.
    """
    n, h, w = x.shape
    cy = rng.uniform(0.25 * h, 0.75 * h, n)[:, None, None]
    cx = rng.uniform(0.25 * w, 0.75 * w, n)[:, None, None]
    grey = rng.uniform(0.3, 0.7, n).astype(np.float32)[:, None, None]
    yy, xx = np.mgrid[0:h, 0:w]
    half = level / 2.0
    inside = (np.abs(yy[None] + 0.5 - cy) <= half) & (np.abs(xx[None] + 0.5 - cx) <= half)
    return np.where(inside, grey, x)


def stripe(x: np.ndarray, level: float, rng: np.random.Generator) -> np.ndarray:
    """Draw ``level`` white lines, one pixel wide, across each image.

    Parameters
    ----------
    x : numpy.ndarray
        Float images ``(n, h, w)`` in ``[0, 1]``.
    level : float
        Number of lines (1 to 5).
    rng : numpy.random.Generator
        Draws, per image, an orientation (horizontal or vertical) and 5 line positions in the
        central 80 %; the first ``level`` are drawn, so a higher level adds lines.

    Returns
    -------
    numpy.ndarray
        Striped images.
    """
    n, h, w = x.shape
    horizontal = rng.random(n) < 0.5
    rows = rng.integers(int(0.1 * h), int(0.9 * h), (n, 5))
    cols = rng.integers(int(0.1 * w), int(0.9 * w), (n, 5))
    out = x.copy()
    k = int(level)
    for i in range(n):
        if horizontal[i]:
            out[i, rows[i, :k], :] = 1.0
        else:
            out[i, :, cols[i, :k]] = 1.0
    return out


CORRUPTIONS: Final[dict[str, Corruption]] = {
    c.name: c
    for c in (
        Corruption(
            "gaussian_noise", gaussian_noise, (0.08, 0.12, 0.18, 0.26, 0.38), "noise std", "noise"
        ),
        Corruption(
            "shot_noise", shot_noise, (60, 25, 12, 5, 3), "photons per white pixel", "noise"
        ),
        Corruption(
            "impulse_noise",
            impulse_noise,
            (0.03, 0.06, 0.09, 0.17, 0.27),
            "fraction of pixels",
            "noise",
        ),
        Corruption(
            "gaussian_blur", gaussian_blur, (0.6, 0.9, 1.2, 1.6, 2.0), "kernel std (px)", "blur"
        ),
        Corruption(
            "motion_blur", motion_blur, (3, 5, 7, 9, 11), "motion length (px)", "blur"
        ),
        Corruption(
            "defocus_blur", defocus_blur, (1.0, 1.5, 2.0, 2.5, 3.0), "disk radius (px)", "blur"
        ),
        Corruption(
            "zoom_blur", zoom_blur, (1.08, 1.16, 1.24, 1.32, 1.4), "largest zoom factor", "blur"
        ),
        Corruption(
            "rotate", rotate, (10, 20, 30, 40, 50), "angle (degrees)", "geometric"
        ),
        Corruption(
            "shear", shear, (0.15, 0.3, 0.45, 0.6, 0.75), "shear factor", "geometric"
        ),
        Corruption(
            "scale", scale, (0.85, 0.75, 0.65, 0.55, 0.45), "scale factor", "geometric"
        ),
        Corruption(
            "translate", translate, (2, 3, 4, 5, 6), "shift (px)", "geometric"
        ),
        Corruption(
            "brightness", brightness, (0.1, 0.2, 0.3, 0.4, 0.5), "added intensity", "photometric"
        ),
        Corruption(
            "contrast", contrast, (0.5, 0.35, 0.25, 0.15, 0.08), "contrast factor", "photometric"
        ),
        Corruption(
            "fog", fog, (0.3, 0.5, 0.7, 0.9, 1.2), "haze strength", "photometric"
        ),
        Corruption(
            "jpeg", jpeg, (30, 20, 15, 8, 5), "JPEG quality", "digital"
        ),
        Corruption(
            "pixelate", pixelate, (20, 16, 12, 10, 8), "low-res side (px)", "digital"
        ),
        Corruption(
            "occlusion", occlusion, (6, 8, 10, 12, 14), "square side (px)", "occlusion"
        ),
        Corruption(
            "stripe", stripe, (1, 2, 3, 4, 5), "number of lines", "occlusion"
        ),
    )
}


def available_corruptions() -> tuple[str, ...]:
    """Corruption keys, in registry order."""
    return tuple(CORRUPTIONS)


def corrupt(images: np.ndarray, name: str, severity: int, rng: np.random.Generator) -> np.ndarray:
    """Apply corruption ``name`` at ``severity`` to grey-level images.

    Parameters
    ----------
    images : numpy.ndarray
        ``(n, height, width)`` ``uint8`` images.
    name : str
        A key of :data:`CORRUPTIONS`.
    severity : int
        1 (mild) to 5 (strong).
    rng : numpy.random.Generator
        Seeded generator; the same seed gives the same bytes.

    Returns
    -------
    numpy.ndarray
        Corrupted images, same shape, ``uint8``.

    Raises
    ------
    ValueError
        If ``name``, ``severity`` or the images' shape or dtype is invalid.
    """
    try:
        corruption = CORRUPTIONS[name]
    except KeyError:
        raise ValueError(
            f"corruption must be one of {', '.join(CORRUPTIONS)}; got {name!r}."
        ) from None
    if isinstance(severity, bool) or severity not in SEVERITIES:
        raise ValueError(f"severity must be an integer in 1..5; got {severity!r}.")
    images = np.asarray(images)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(
            f"images must be a uint8 array of shape (n, height, width); got {images.dtype} "
            f"{images.shape}."
        )
    if images.shape[0] == 0:
        return images.copy()
    level = corruption.levels[severity - 1]
    return _as_uint8(corruption.fn(_as_float(images), level, rng))


def _splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(
            f"{name}-{sev}",
            "synthetic",
            name,
            sev,
            (("level", float(c.levels[sev - 1])), ("size", float(BASE_SUBSET_SIZE))),
        )
        for name, c in CORRUPTIONS.items()
        for sev in SEVERITIES
    ]


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    idx = base_subset(dataset, pool)
    images = corrupt(pool.samples[idx], split.shift, int(split.severity or 0), rng)
    return images, pool.labels[idx]


#: Image corruptions (CIFAR-10-C style) at 5 severities.
FAMILIES: tuple[ShiftFamily, ...] = (
    ShiftFamily("synthetic", 1, ("image",), _splits, _generate),
)
