"""Generate a synthetic stand-in for an online dataset's release, at real size, in its on-disk format.

Usage::

    python benchmarks/synth_release.py DATASET --root DIR [--scale F] [--seed S] [--force]

``DATASET`` is one of :data:`DATASETS` (or ``all``); ``DIR`` is the data root the loaders read
(``$ALSA_BENCH_HOME/data``). At ``--scale 1.0`` every part has the real release's row count;
``--scale 0.001`` makes a tiny release for tests (each part keeps a small minimum).

What is written is exactly what the loaders in ``tasks/data/datasets/`` read, byte layout
included: CIFAR python pickles (protocol 2, ``bytes`` keys, ``uint8`` rows of red, green, blue
planes), CIFAR-10.1 ``.npy`` and CIFAR-10.2 ``.npz``, CIFAR-10-C / CIFAR-100-C (19 corruptions x 5
severities, ``uint8`` ``.npy`` + ``labels.npy``), ImageNet's flat ``ILSVRC2012_img_val.tar`` and
devkit (sorted into ``imagenet/val/<wnid>/`` by the loader module's own ``prepare_val``) plus the
three ImageNetV2 folders, MNIST idx ``.gz`` files and MNIST-M PNGs, the Office-31 domain folders,
Waterbirds' ``metadata.csv`` and JPEGs, ogbn-arxiv's raw gzip CSVs, and Amazon-WILDS'
``reviews.csv`` and ``splits/user.csv``.

The data carries a learnable class signal (class templates plus noise and a distractor
template) and every target family degrades it in its own way: CIFAR-C by corruption and severity,
CIFAR-10.1/10.2 and ImageNetV2 mildly, MNIST-M by colour and background, Office-31 by domain,
Waterbirds by a background that is spurious in training, ogbn-arxiv by a feature and label drift
with the year, Amazon-WILDS by reviewers who write less about their rating.

Every release is marked (:mod:`tasks.data.synthetic`): ``<root>/SYNTHETIC_RELEASE-<dataset>.json``
is written before the first file and completed after the last one, so the catalog, the reports
and the run's mixing check see it. Arrays are streamed to disk (``open_memmap``, one pickled
batch or CSV chunk at a time), so peak memory stays far below the release's size.

Not reproduced: the pretrained ImageNet weights (``alsa-bench fetch imagenet`` downloads them;
the imagenet suite needs them), the Amazon reviews of other split schemes (only the 539,502 rows
of the ``user`` scheme are written), and the pixels' natural statistics.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import pickle
import shutil
import struct
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tasks.data.synthetic import is_synthetic, write_marker  # noqa: E402

__all__ = ["DATASETS", "Py2Pickler", "corrupt", "generate", "main", "py2_dumps", "write_cifar_batch",
           "write_idx"]

#: Rows per chunk when streaming images to disk.
CHUNK: Final[int] = 5000
GENERATOR: Final[str] = "benchmarks/synth_release.py"


# ------------------------------------------------------------------------------------ helpers
def rows(full: int, scale: float, minimum: int) -> int:
    """Row count of a part: ``round(full * scale)``, at least ``minimum``, at most ``full``."""
    return int(min(full, max(minimum, round(full * scale))))


def balanced_labels(n: int, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` labels, every class ``n // n_classes`` or one more times, shuffled (``int64``)."""
    return rng.permutation(np.arange(n, dtype=np.int64) % n_classes)


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], check=True,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _upsample(low: np.ndarray, side: int) -> np.ndarray:
    """Bilinear upsampling of ``(n, r, r, c)`` fields to ``(n, side, side, c)`` (float32)."""
    from scipy.ndimage import zoom

    r = low.shape[1]
    return zoom(low.astype(np.float32), (1, side / r, side / r, 1), order=1).astype(np.float32)


def templates(rng: np.random.Generator, n_classes: int, side: int, channels: int = 3,
              res: int = 8) -> np.ndarray:
    """Class templates: a shared smooth field plus a class-specific one, unit scale, float32."""
    shared = rng.normal(size=(1, res, res, channels))
    own = rng.normal(size=(n_classes, res, res, channels))
    t = _upsample(0.5 * shared + own, side)
    t /= t.std(axis=(1, 2, 3), keepdims=True) + 1e-6
    return t


def render(tpl: np.ndarray, labels: np.ndarray, rng: np.random.Generator, *, amp: float = 32.0,
           noise: float = 40.0, distractor: float = 1.1, offset: Any = 0.0,
           contrast: float = 1.0) -> np.ndarray:
    """Images of ``labels``: ``128 + amp (T[y] + w T[z]) + noise`` with a random other class ``z``
    at weight ``w ~ U(0, distractor)`` (above 1 the image looks like ``z``: irreducible error)."""
    n = labels.shape[0]
    k = tpl.shape[0]
    other = (labels + rng.integers(1, k, size=n)) % k
    w = rng.uniform(0.0, distractor, size=(n, 1, 1, 1)).astype(np.float32)
    gain = rng.uniform(0.8, 1.2, size=(n, 1, 1, 1)).astype(np.float32)
    x = tpl[labels] + w * tpl[other]
    x *= np.float32(amp * contrast) * gain
    x += np.float32(128.0) + np.asarray(offset, dtype=np.float32)
    x += rng.normal(0.0, noise, size=x.shape).astype(np.float32)
    return np.clip(x, 0, 255).astype(np.uint8)


def _box_blur(x: np.ndarray, radius: int, axes: tuple[int, ...] = (1, 2)) -> np.ndarray:
    from scipy.ndimage import uniform_filter1d

    out = x.astype(np.float32)
    for axis in axes:
        out = uniform_filter1d(out, size=2 * radius + 1, axis=axis, mode="reflect")
    return out


def corrupt(images: np.ndarray, name: str, severity: int, rng: np.random.Generator) -> np.ndarray:
    """One CIFAR-C-like corruption of ``uint8`` images ``(n, h, w, 3)`` at severity 1-5."""
    s = int(severity)
    x = images.astype(np.float32)
    n, h, w, _ = x.shape
    if name == "gaussian_noise":
        x += rng.normal(0, 28.0 * s, size=x.shape)
    elif name == "shot_noise":
        x += rng.normal(0, 1.0, size=x.shape) * np.sqrt(x + 1.0) * (1.8 * s)
    elif name == "impulse_noise":
        u = rng.random(size=x.shape[:3])
        x[u < 0.05 * s] = 0.0
        x[u > 1 - 0.05 * s] = 255.0
    elif name == "speckle_noise":
        x *= 1.0 + rng.normal(0, 0.25 * s, size=x.shape)
    elif name in ("defocus_blur", "gaussian_blur"):
        x = _box_blur(x, s if name == "defocus_blur" else max(1, s - 1))
    elif name == "motion_blur":
        x = _box_blur(x, s + 1, axes=(2,))
    elif name == "zoom_blur":
        c = max(1, s * h // 20)
        inner = x[:, c:h - c, c:w - c]
        idx_h = np.linspace(0, inner.shape[1] - 1, h).round().astype(int)
        idx_w = np.linspace(0, inner.shape[2] - 1, w).round().astype(int)
        x = 0.5 * x + 0.5 * inner[:, idx_h][:, :, idx_w]
    elif name == "glass_blur":
        x = _box_blur(x, 1)
        shift = rng.integers(-s, s + 1, size=(n, h, 1, 1))
        cols = (np.arange(w)[None, None, :, None] + shift) % w
        x = np.take_along_axis(x, np.broadcast_to(cols, x.shape), axis=2)
    elif name == "elastic_transform":
        shift = rng.integers(-s, s + 1, size=(n, 1, w, 1))
        rws = (np.arange(h)[None, :, None, None] + shift) % h
        x = np.take_along_axis(x, np.broadcast_to(rws, x.shape), axis=1)
    elif name in ("snow", "frost", "fog", "spatter"):
        field = _upsample(rng.normal(size=(n, 4 if name == "fog" else 16,
                                           4 if name == "fog" else 16, 1)), h)
        if name == "spatter":
            mask = (field > 1.6 - 0.2 * s).astype(np.float32)
            x = x * (1 - mask) + mask * np.float32(40.0)
        else:
            alpha = np.float32(0.13 * s)
            level = {"snow": 245.0, "frost": 200.0, "fog": 170.0}[name]
            x = (1 - alpha) * x + alpha * (level + 30.0 * field)
    elif name == "brightness":
        x += 22.0 * s
    elif name == "contrast":
        mean = x.mean(axis=(1, 2, 3), keepdims=True)
        x = mean + (x - mean) * (1.0 - 0.17 * s)
    elif name == "saturate":
        grey = x.mean(axis=3, keepdims=True)
        factor = (0.0, 0.4, 1.8, 2.6, 3.4, 4.2)[s]
        x = grey + (x - grey) * factor
    elif name == "pixelate":
        b = s + 1
        idx_h, idx_w = (np.arange(h) // b) * b, (np.arange(w) // b) * b
        x = x[:, idx_h][:, :, idx_w]
    elif name == "jpeg_compression":
        step = np.float32(6.0 * s)
        x = np.round(x / step) * step
        x = 0.5 * x + 0.5 * _box_blur(x, 1)
    else:
        raise ValueError(f"name must be a CIFAR-C corruption; got {name!r}.")
    return np.clip(x, 0, 255).astype(np.uint8)


def _chunks(n: int, size: int = CHUNK) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def _jpeg(array: np.ndarray, size: tuple[int, int] | None = None, quality: int = 90) -> bytes:
    from PIL import Image

    img = Image.fromarray(array, mode="RGB")
    if size is not None and img.size != size:
        img = img.resize(size, Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


# ------------------------------------------------------------------------------------- CIFAR
def _cifar_rows(images: np.ndarray) -> np.ndarray:
    """``(n, 32, 32, 3)`` images to the release's rows ``(n, 3072)`` (R, G, B planes)."""
    return np.ascontiguousarray(images.transpose(0, 3, 1, 2).reshape(images.shape[0], -1))


class Py2Pickler(pickle._Pickler):  # type: ignore[misc,name-defined]
    """Protocol 2 as Python 2 wrote the CIFAR release: ``str`` opcodes (``SHORT_BINSTRING`` /
    ``BINSTRING``) for byte strings, and numpy under its ``numpy.core`` module name, as numpy 1
    pickles it (Python 3 would write ``_codecs.encode`` calls and ``numpy._core``)."""

    dispatch = dict(pickle._Pickler.dispatch)  # type: ignore[attr-defined]

    def save_bytes(self, obj: bytes) -> None:
        n = len(obj)
        op = pickle.SHORT_BINSTRING + bytes([n]) if n < 256 else (
            pickle.BINSTRING + struct.pack("<i", n))
        self.write(op + obj)
        self.memoize(obj)

    dispatch[bytes] = save_bytes

    def save_str(self, obj: str) -> None:  # Python 2 ``str`` is bytes: 'u1', '|' in numpy dtypes
        self.save_bytes(obj.encode("latin-1"))

    dispatch[str] = save_str

    def save_global(self, obj: Any, name: str | None = None) -> None:
        module = getattr(obj, "__module__", "")
        if module.startswith("numpy._core"):
            name = name or obj.__qualname__
            self.write(pickle.GLOBAL + f"{module.replace('numpy._core', 'numpy.core')}\n"
                       f"{name}\n".encode())
            self.memoize(obj)
            return
        super().save_global(obj, name)

    dispatch[type] = save_global


def py2_dumps(obj: object) -> bytes:
    """``obj`` pickled as Python 2 pickled the CIFAR batches (:class:`Py2Pickler`)."""
    buf = io.BytesIO()
    Py2Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def write_cifar_batch(path: Path, entries: dict[bytes, Any]) -> None:
    """Pickle one CIFAR batch dict into ``path`` as the release's Python 2 files are
    (:class:`Py2Pickler`: ``bytes`` keys, protocol 2), streamed to the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        Py2Pickler(handle, protocol=2).dump(entries)


def _render_into(out: np.ndarray, tpl: np.ndarray, labels: np.ndarray,
                 rng: np.random.Generator, **kw: Any) -> None:
    for sl in _chunks(labels.shape[0]):
        out[sl] = render(tpl, labels[sl], rng, **kw)


def _cifar_c(folder: Path, test_x: np.ndarray, test_y: np.ndarray, rng: np.random.Generator,
             corruptions: tuple[str, ...], severities: tuple[int, ...]) -> None:
    from numpy.lib.format import open_memmap

    folder.mkdir(parents=True, exist_ok=True)
    k = test_x.shape[0]
    for name in corruptions:
        mm = open_memmap(folder / f"{name}.npy", mode="w+", dtype=np.uint8,
                         shape=(k * len(severities), *test_x.shape[1:]))
        for b, sev in enumerate(severities):
            for sl in _chunks(k):
                mm[b * k + sl.start:b * k + sl.stop] = corrupt(test_x[sl], name, sev, rng)
        mm.flush()
        del mm
    np.save(folder / "labels.npy", np.tile(test_y, len(severities)).astype(np.uint8))


def gen_cifar10(root: Path, scale: float, rng: np.random.Generator) -> dict[str, int]:
    """CIFAR-10 (5 + 1 batches), CIFAR-10.1 v6, CIFAR-10.2, CIFAR-10-C."""
    from tasks.data.datasets import cifar

    tpl = templates(rng, 10, 32)
    folder = root / cifar.CIFAR10_DIR
    n_train, n_test = rows(50_000, scale, 500), rows(10_000, scale, 100)
    per_batch = [len(a) for a in np.array_split(np.arange(n_train), 5)]
    labels = balanced_labels(n_train, 10, rng)
    start = 0
    for i, n in enumerate(per_batch, start=1):
        y = labels[start:start + n]
        start += n
        x = np.empty((n, 32, 32, 3), np.uint8)
        _render_into(x, tpl, y, rng)
        write_cifar_batch(folder / f"data_batch_{i}", {
            b"batch_label": f"training batch {i} of 5".encode(), b"labels": y.tolist(),
            b"data": _cifar_rows(x),
            b"filenames": [f"synthetic_{i}_{j:05d}.png".encode() for j in range(n)],
        })
    test_y = balanced_labels(n_test, 10, rng)
    test_x = np.empty((n_test, 32, 32, 3), np.uint8)
    _render_into(test_x, tpl, test_y, rng)
    write_cifar_batch(folder / "test_batch", {
        b"batch_label": b"testing batch 1 of 1", b"labels": test_y.tolist(),
        b"data": _cifar_rows(test_x),
        b"filenames": [f"synthetic_test_{j:05d}.png".encode() for j in range(n_test)],
    })
    write_cifar_batch(folder / "batches.meta", {
        b"num_cases_per_batch": 10_000, b"num_vis": 3072,
        b"label_names": [name.encode() for name in cifar.CIFAR10_CLASSES],
    })
    # CIFAR-10.1 v6: mild shift (more noise, a warm tint, more confusable)
    n1 = rows(2_000, scale, 50)
    y1 = balanced_labels(n1, 10, rng)
    x1 = render(tpl, y1, rng, noise=46.0, distractor=1.2, offset=np.array([8.0, 0.0, -6.0]))
    v1 = root / cifar.CIFAR10_1_DIR
    v1.mkdir(parents=True, exist_ok=True)
    np.save(v1 / cifar.CIFAR10_1_FILES[0], x1)
    np.save(v1 / cifar.CIFAR10_1_FILES[1], y1.astype(np.int32))
    # CIFAR-10.2: another mild shift (lower contrast, brighter)
    n2 = rows(2_000, scale, 50)
    y2 = balanced_labels(n2, 10, rng)
    x2 = render(tpl, y2, rng, noise=44.0, distractor=1.2, offset=10.0, contrast=0.85)
    v2 = root / cifar.CIFAR10_2_DIR
    v2.mkdir(parents=True, exist_ok=True)
    np.savez(v2 / cifar.CIFAR10_2_FILE, images=x2, labels=y2.astype(np.int64))
    _cifar_c(root / cifar.CIFAR10_C_DIR, test_x, test_y, rng, cifar.CORRUPTIONS, cifar.SEVERITIES)
    return {"train": n_train, "test": n_test, "cifar10.1": n1, "cifar10.2": n2,
            "cifar10-c": n_test * len(cifar.SEVERITIES) * len(cifar.CORRUPTIONS)}


def gen_cifar100(root: Path, scale: float, rng: np.random.Generator) -> dict[str, int]:
    """CIFAR-100 (train/test/meta, fine and coarse labels) and CIFAR-100-C."""
    from tasks.data.datasets import cifar

    tpl = templates(rng, 100, 32)
    folder = root / cifar.CIFAR100_DIR
    n_train, n_test = rows(50_000, scale, 1_000), rows(10_000, scale, 200)
    coarse_of = np.arange(100) // 5
    out = {}
    for part, n in (("train", n_train), ("test", n_test)):
        y = balanced_labels(n, 100, rng)
        x = np.empty((n, 32, 32, 3), np.uint8)
        _render_into(x, tpl, y, rng)
        write_cifar_batch(folder / part, {
            b"filenames": [f"synthetic_{part}_{j:05d}.png".encode() for j in range(n)],
            b"batch_label": f"{part}ing batch 1 of 1".encode(),
            b"fine_labels": y.tolist(), b"coarse_labels": coarse_of[y].tolist(),
            b"data": _cifar_rows(x),
        })
        out[part] = (x, y) if part == "test" else None
    write_cifar_batch(folder / "meta", {
        b"fine_label_names": [name.encode() for name in cifar.CIFAR100_CLASSES],
        b"coarse_label_names": [f"coarse_{k:02d}".encode() for k in range(20)],
    })
    test_x, test_y = out["test"]
    _cifar_c(root / cifar.CIFAR100_C_DIR, test_x, test_y, rng, cifar.CORRUPTIONS,
             cifar.SEVERITIES)
    return {"train": n_train, "test": n_test,
            "cifar100-c": n_test * len(cifar.SEVERITIES) * len(cifar.CORRUPTIONS)}


# ------------------------------------------------------------------------------------- MNIST
def write_idx(path: Path, array: np.ndarray) -> None:
    """An idx file of unsigned bytes (gzipped when the name ends with ``.gz``)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as handle:
        handle.write(header)
        handle.write(array.tobytes())


def _digit_templates(rng: np.random.Generator) -> np.ndarray:
    """Ten stroke-like grey templates ``(10, 28, 28)`` in [0, 1] on a black border."""
    low = rng.normal(size=(10, 6, 6, 1))
    t = _upsample(low, 20)[..., 0]
    t = np.clip((t - 0.2) * 1.6, 0, 1)
    out = np.zeros((10, 28, 28), np.float32)
    out[:, 4:24, 4:24] = t
    return out


def _digits(tpl: np.ndarray, labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Grey digits ``(n, 28, 28)`` in [0, 1]: template, a distractor, a shift of up to 2 pixels."""
    n = labels.shape[0]
    other = (labels + rng.integers(1, 10, size=n)) % 10
    w = rng.uniform(0.0, 0.9, size=(n, 1, 1)).astype(np.float32)
    x = tpl[labels] + w * tpl[other] + rng.normal(0, 0.15, size=(n, 28, 28)).astype(np.float32)
    dy, dx = rng.integers(-2, 3, size=2)
    x = np.roll(x, (int(dy), int(dx)), axis=(1, 2))
    return np.clip(x, 0, 1)


def gen_mnist(root: Path, scale: float, rng: np.random.Generator) -> dict[str, int]:
    """MNIST idx ``.gz`` files and the MNIST-M test PNGs with their label file."""
    from PIL import Image

    from tasks.data.datasets import mnist

    tpl = _digit_templates(rng)
    folder = root / mnist.MNIST_DIR
    counts = {}
    for prefix, full, minimum in (("train", 60_000, 600), ("t10k", 10_000, 100)):
        n = rows(full, scale, minimum)
        y = balanced_labels(n, 10, rng)
        x = np.empty((n, 28, 28), np.uint8)
        for sl in _chunks(n):
            x[sl] = (_digits(tpl, y[sl], rng) * 255).astype(np.uint8)
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", x)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", y.astype(np.uint8))
        counts[prefix] = n
    # MNIST-M: |background patch - digit|, 32 x 32 RGB PNGs (the loader resizes to 28)
    n = rows(9_001, scale, 100)
    y = balanced_labels(n, 10, rng)
    out_dir = root / mnist.MNISTM_DIR / mnist.MNISTM_TEST_IMAGES
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for sl in _chunks(n, 1000):
        d = np.pad(_digits(tpl, y[sl], rng), ((0, 0), (2, 2), (2, 2)))[..., None] * 255.0
        bg = _upsample(rng.uniform(0, 255, size=(d.shape[0], 4, 4, 3)), 32)
        bg += rng.normal(0, 25, size=bg.shape).astype(np.float32)
        img = np.clip(np.abs(bg - d), 0, 255).astype(np.uint8)
        for j, i in enumerate(range(sl.start, sl.stop)):
            name = f"{i:08d}.png"
            Image.fromarray(img[j], mode="RGB").save(out_dir / name)
            lines.append(f"{name} {int(y[i])}\n")
    (root / mnist.MNISTM_DIR / mnist.MNISTM_TEST_LABELS).write_text("".join(lines))
    counts["mnist-m"] = n
    return counts


# --------------------------------------------------------------------------------- Office-31
#: Images per domain in the release, and the size each domain's photos are stored at.
OFFICE_DOMAINS: Final[dict[str, tuple[int, tuple[int, int]]]] = {
    "amazon": (2_817, (300, 300)), "dslr": (498, (1000, 1000)), "webcam": (795, (640, 480)),
}


def _object_photos(tpl: np.ndarray, labels: np.ndarray, domain: str,
                   rng: np.random.Generator) -> np.ndarray:
    """64 x 64 photos of the class objects (a disc of the class template) in a domain's look."""
    n = labels.shape[0]
    yy, xx = np.mgrid[0:64, 0:64]
    obj = render(tpl, labels, rng, amp=55.0, noise=12.0, distractor=0.9).astype(np.float32)
    if domain == "amazon":  # catalogue shot: white background, centred
        bg = np.full((n, 64, 64, 3), 250.0, np.float32)
        radius, centre = 26.0, (32.0, 32.0)
    elif domain == "dslr":  # desk texture, warm light, smaller object off-centre
        bg = 150.0 + 40.0 * _upsample(rng.normal(size=(n, 8, 8, 1)), 64)
        bg = bg * np.array([1.0, 0.8, 0.6], np.float32)
        obj = obj * np.array([1.1, 0.95, 0.8], np.float32)
        radius, centre = 18.0, (28.0, 36.0)
    else:  # webcam: grey-blue room, blur, noise, low contrast
        bg = 110.0 + 20.0 * _upsample(rng.normal(size=(n, 4, 4, 1)), 64)
        bg = bg * np.array([0.85, 0.9, 1.1], np.float32)
        obj = 0.6 * obj + 0.4 * 128.0
        radius, centre = 20.0, (34.0, 30.0)
    mask = (((yy - centre[0]) ** 2 + (xx - centre[1]) ** 2) <= radius ** 2)[None, :, :, None]
    x = np.where(mask, obj, bg)
    if domain == "webcam":
        x = _box_blur(x, 1) + rng.normal(0, 12.0, size=x.shape)
    return np.clip(x, 0, 255).astype(np.uint8)


def gen_office31(root: Path, scale: float, rng: np.random.Generator) -> dict[str, int]:
    """The three domain folders ``office31/<domain>/images/<class>/frame_NNNN.jpg``."""
    from tasks.data.datasets import office31

    tpl = templates(rng, office31.N_CLASSES, 64, res=6)
    counts = {}
    for domain, (full, size) in OFFICE_DOMAINS.items():
        n = rows(full, scale, 2 * office31.N_CLASSES)
        labels = np.sort(balanced_labels(n, office31.N_CLASSES, rng))
        photos = _object_photos(tpl, labels, domain, rng)
        seen = np.zeros(office31.N_CLASSES, int)
        for photo, label in zip(photos, labels):
            seen[label] += 1
            path = (root / office31.DATASET_DIR / domain / "images"
                    / office31.CLASS_NAMES[label] / f"frame_{seen[label]:04d}.jpg")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_jpeg(photo, size))
        counts[domain] = n
    return counts


# -------------------------------------------------------------------------------- Waterbirds
#: Images per split and group (landbird/land, landbird/water, waterbird/land, waterbird/water).
WATERBIRDS_GROUPS: Final[dict[int, tuple[int, int, int, int]]] = {
    0: (3_498, 184, 56, 1_057), 1: (467, 466, 133, 133), 2: (2_255, 2_255, 642, 642),
}
WATERBIRDS_COLUMNS: Final[tuple[str, ...]] = (
    "img_id", "img_filename", "y", "split", "place", "place_filename",
)


def _bird_photos(species_tpl: np.ndarray, species: np.ndarray, place: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """64 x 64: a bird (its species' template, a small ellipse) on land (green-brown texture)
    or water (blue bands); the background is far stronger than the bird."""
    n = species.shape[0]
    yy, xx = np.mgrid[0:64, 0:64]
    land = np.array([70.0, 120.0, 50.0], np.float32) + 45.0 * _upsample(
        rng.normal(size=(n, 16, 16, 1)), 64)
    water = np.array([40.0, 90.0, 170.0], np.float32) + 25.0 * np.sin(
        yy[None, :, :, None] / 3.0 + rng.uniform(0, 6, size=(n, 1, 1, 1)))
    bg = np.where(place[:, None, None, None] == 1, water, land)
    bird = render(species_tpl, species, rng, amp=40.0, noise=20.0, distractor=0.8)
    cy, cx = rng.integers(24, 40, size=2)
    mask = ((((yy - cy) / 10.0) ** 2 + ((xx - cx) / 14.0) ** 2) <= 1.0)[None, :, :, None]
    x = np.where(mask, bird.astype(np.float32), bg) + rng.normal(0, 10.0, size=(n, 64, 64, 3))
    return np.clip(x, 0, 255).astype(np.uint8)


def gen_waterbirds(root: Path, scale: float, rng: np.random.Generator) -> dict[str, int]:
    """``waterbirds_v1.0/``: ``RELEASE_v1.0.txt``, ``metadata.csv`` and the JPEGs it lists."""
    from tasks.data.datasets import waterbirds

    folder = root / waterbirds.DATASET_DIR
    folder.mkdir(parents=True, exist_ok=True)
    n_species = 200
    is_water = np.zeros(n_species, bool)
    is_water[rng.choice(n_species, 60, replace=False)] = True
    tpl = templates(rng, n_species, 64, res=4)
    table = []
    for split, counts in WATERBIRDS_GROUPS.items():
        for group, full in enumerate(counts):
            y, place = divmod(group, 2)
            for _ in range(rows(full, scale, 2)):
                table.append((split, y, place))
    order = rng.permutation(len(table))
    table = [table[i] for i in order]
    y = np.array([t[1] for t in table])
    place = np.array([t[2] for t in table])
    pool = [np.flatnonzero(~is_water), np.flatnonzero(is_water)]
    species = np.array([rng.choice(pool[v]) for v in y])
    records = []
    for sl in _chunks(len(table), 1000):
        photos = _bird_photos(tpl, species[sl], place[sl], rng)
        for j, i in enumerate(range(sl.start, sl.stop)):
            k = int(species[i]) + 1
            name = f"{k:03d}.Species_{k:03d}/Species_{k:03d}_{i + 1:05d}_{k}.jpg"
            path = folder / name
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(_jpeg(photos[j], (224, 224), quality=95))
            kind = "l/lake/natural" if place[i] else "b/bamboo_forest"
            records.append((i + 1, name, int(y[i]), table[i][0], int(place[i]),
                            f"/{kind}/{i + 1:08d}.jpg"))
    with open(folder / waterbirds.METADATA_FILE, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(WATERBIRDS_COLUMNS)
        writer.writerows(records)
    (folder / waterbirds.RELEASE_FILE).write_text("Waterbirds v1.0 (synthetic release)\n")
    return {name: int(sum(t[0] == code for t in table))
            for name, code in waterbirds.WILDS_SPLITS.items()}


# ---------------------------------------------------------------------------------- ImageNet
def _imagenet_photos(tpl: np.ndarray, labels: np.ndarray, rng: np.random.Generator,
                     shift: bool) -> np.ndarray:
    if shift:  # ImageNetV2: re-collected, slightly darker and noisier
        return render(tpl, labels, rng, amp=40.0, noise=34.0, distractor=1.0, offset=-8.0)
    return render(tpl, labels, rng, amp=40.0, noise=30.0, distractor=0.9)


def write_devkit(path: Path, wnids: list[str], truth_ids: np.ndarray,
                 id_of_wnid: dict[str, int]) -> None:
    """``ILSVRC2012_devkit_t12.tar.gz`` with ``data/meta.mat`` (synsets: ILSVRC2012_ID, WNID,
    words, num_children, ...) and ``data/ILSVRC2012_validation_ground_truth.txt``."""
    import scipy.io

    fields = ["ILSVRC2012_ID", "WNID", "words", "gloss", "num_children", "children",
              "wordnet_height", "num_train_images"]
    synsets = np.zeros(len(wnids) + 1, dtype=[(f, "O") for f in fields])
    for wnid in wnids:
        i = id_of_wnid[wnid]
        synsets[i - 1] = (i, wnid, wnid, "", 0, np.zeros(0), 0, 1300)
    synsets[-1] = (len(wnids) + 1, "n00001740", "entity", "", len(wnids),
                   np.arange(1, len(wnids) + 1), 19, 0)
    meta = io.BytesIO()
    scipy.io.savemat(meta, {"synsets": synsets})
    truth = "".join(f"{int(i)}\n" for i in truth_ids).encode("ascii")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (("meta.mat", meta.getvalue()),
                           ("ILSVRC2012_validation_ground_truth.txt", truth)):
            info = tarfile.TarInfo(f"ILSVRC2012_devkit_t12/data/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def gen_imagenet(root: Path, scale: float, rng: np.random.Generator) -> dict[str, int]:
    """The flat ``ILSVRC2012_img_val.tar`` and devkit (kept under ``imagenet/ILSVRC2012/``), sorted
    into ``imagenet/val/<wnid>/`` by :func:`tasks.data.datasets.imagenet.prepare_val`, and the
    three ImageNetV2 folders. The pretrained weights are not generated."""
    from tasks.data.datasets import imagenet

    wnids = list(imagenet.WNIDS)
    tpl = templates(rng, 1000, 32, res=4)
    ids = rng.permutation(1000) + 1  # the devkit's ILSVRC2012_ID of each wnid (not sorted order)
    id_of_wnid = {w: int(i) for w, i in zip(wnids, ids)}
    n_val = rows(50_000, scale, 100)
    labels = balanced_labels(n_val, 1000, rng)
    archive_dir = root / imagenet.DATASET_DIR / "ILSVRC2012"
    archive_dir.mkdir(parents=True, exist_ok=True)
    val_tar, devkit = archive_dir / "ILSVRC2012_img_val.tar", archive_dir / "ILSVRC2012_devkit_t12.tar.gz"
    with tarfile.open(val_tar, "w") as tar:
        for sl in _chunks(n_val, 500):
            small = _imagenet_photos(tpl, labels[sl], rng, shift=False)
            for j, i in enumerate(range(sl.start, sl.stop)):
                data = _jpeg(small[j], (500, 375))
                info = tarfile.TarInfo(f"ILSVRC2012_val_{i + 1:08d}.JPEG")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    write_devkit(devkit, wnids, np.array([id_of_wnid[wnids[c]] for c in labels]), id_of_wnid)
    shutil.rmtree(root / imagenet.DATASET_DIR / imagenet.VAL_DIR, ignore_errors=True)
    imagenet.prepare_val(val_tar, devkit, root)
    counts = {"val": n_val}
    for split, _, _, folder, *_ in imagenet.V2_SETS:
        n = rows(10_000, scale, 100)
        y = balanced_labels(n, 1000, rng)
        base = root / imagenet.DATASET_DIR / folder
        shutil.rmtree(base, ignore_errors=True)
        for sl in _chunks(n, 500):
            small = _imagenet_photos(tpl, y[sl], rng, shift=True)
            for j, i in enumerate(range(sl.start, sl.stop)):
                path = base / str(int(y[i])) / f"{hashlib.sha1(f'{split}{i}'.encode()).hexdigest()}.jpeg"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(_jpeg(small[j], (500, 375)))
        counts[split] = n
    return counts


# ------------------------------------------------------------------------------- ogbn-arxiv
ARXIV_NODES: Final[int] = 169_343
ARXIV_EDGES: Final[int] = 1_166_243


def _gz_csv(path: Path, chunks: Iterator[np.ndarray], fmt: str | None = None,
            header: str | None = None) -> None:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="ascii", compresslevel=6, newline="") as handle:
        if header:
            handle.write(header + "\n")
        for block in chunks:
            pd.DataFrame(block).to_csv(handle, header=False, index=False, float_format=fmt,
                                       lineterminator="\n")


def gen_ogbn_arxiv(root: Path, scale: float, rng: np.random.Generator) -> dict[str, int]:
    """``ogbn_arxiv/raw/*.csv.gz``, ``split/time/``, ``mapping/`` and ``RELEASE_v1.txt``.

    Years 1971-2020, skewed to recent ones; labels drawn with year-dependent priors; features
    ``mu[y] + drift[y] (year - 2010) / 10 + noise`` (128 floats, 6 decimals); each edge goes
    from a node to an earlier one, of the same class with probability 0.65.
    """
    from tasks.data.datasets import ogbn_arxiv

    n = rows(ARXIV_NODES, scale, 400)
    e = rows(ARXIV_EDGES, scale, 2_000)
    k, d = ogbn_arxiv.N_CLASSES, ogbn_arxiv.N_FEATURES
    years_all = np.arange(1971, 2021)
    p = np.exp(0.2 * (years_all - 2020))
    year = np.sort(rng.choice(years_all, size=n, p=p / p.sum()))
    year[rng.choice(n, min(n, 40), replace=False)] = np.repeat(np.arange(2005, 2021), 3)[:min(n, 40)]
    year.sort()  # every era of the temporal protocol holds nodes, even at tiny scales
    t = (year - 2010) / 10.0
    a, b = rng.normal(0, 0.8, size=k), rng.normal(0, 1.0, size=k)
    logits = a[None, :] + b[None, :] * t[:, None]
    prob = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob /= prob.sum(axis=1, keepdims=True)
    label = (prob.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1).astype(np.int64)
    mu = rng.normal(0, 0.35, size=(k, d)).astype(np.float32)
    drift = rng.normal(0, 0.35, size=(k, d)).astype(np.float32)
    shared = rng.normal(0, 0.2, size=d).astype(np.float32)
    # node ids are shuffled so that ids do not follow the years (as in the release)
    perm = rng.permutation(n)  # node id of the i-th oldest paper
    # edges: source = a random paper, target = an earlier one (same class with prob 0.65)
    src_rank = rng.integers(1, n, size=e)
    same = rng.random(e) < 0.65
    dst_rank = (rng.random(e) * src_rank).astype(np.int64)
    order_by_class = [np.flatnonzero(label == c) for c in range(k)]
    for c in range(k):
        members = order_by_class[c]
        pick = np.flatnonzero(same & (label[src_rank] == c))
        before = np.searchsorted(members, src_rank[pick])  # same-class papers older than source
        ok = before > 0
        choice = (rng.random(int(ok.sum())) * before[ok]).astype(np.int64)
        dst_rank[pick[ok]] = members[choice]
    edges = np.stack([perm[src_rank], perm[dst_rank]], axis=1)
    # write in node-id order
    inv = np.empty(n, np.int64)
    inv[perm] = np.arange(n)  # rank of node id
    raw = root / ogbn_arxiv.DATASET_DIR / "raw"

    def features() -> Iterator[np.ndarray]:
        for sl in _chunks(n, 20_000):
            r = inv[sl]
            x = mu[label[r]] + drift[label[r]] * t[r, None].astype(np.float32)
            x += shared * t[r, None].astype(np.float32)
            x += rng.normal(0, 0.5, size=x.shape).astype(np.float32)
            yield x

    _gz_csv(raw / "node-feat.csv.gz", features(), fmt="%.6f")
    _gz_csv(raw / "edge.csv.gz", (edges[sl] for sl in _chunks(e, 200_000)))
    _gz_csv(raw / "node-label.csv.gz", iter([label[inv][:, None]]))
    _gz_csv(raw / "node_year.csv.gz", iter([year[inv][:, None]]))
    _gz_csv(raw / "num-node-list.csv.gz", iter([np.array([[n]])]))
    _gz_csv(raw / "num-edge-list.csv.gz", iter([np.array([[e]])]))
    folder = root / ogbn_arxiv.DATASET_DIR
    y_id = year[inv]
    for part, sel in (("train", y_id <= 2017), ("valid", y_id == 2018), ("test", y_id >= 2019)):
        _gz_csv(folder / "split" / "time" / f"{part}.csv.gz", iter([np.flatnonzero(sel)[:, None]]))
    names = np.array([[i, name] for i, name in enumerate(ogbn_arxiv.CLASS_NAMES)], dtype=object)
    _gz_csv(folder / ogbn_arxiv.MAPPING_FILE, iter([names]), header="label idx,arxiv category")
    _gz_csv(folder / "mapping" / "nodeidx2paperid.csv.gz",
            iter([np.stack([np.arange(n), 9_000_000 + np.arange(n)], axis=1)]),
            header="node idx,paper id")
    (folder / "RELEASE_v1.txt").write_text("ogbn-arxiv (synthetic release)\n")
    (folder / ogbn_arxiv.CACHE_NAME).unlink(missing_ok=True)
    return {"nodes": n, "edges": e}


# ----------------------------------------------------------------------------- Amazon-WILDS
#: Reviews per WILDS split of the ``user`` scheme (code: count).
AMAZON_SPLITS: Final[dict[int, int]] = {0: 245_502, 1: 100_050, 2: 46_950, 3: 100_050,
                                        4: 46_950}
_SENTIMENT: Final[tuple[tuple[str, ...], ...]] = (
    ("awful", "broke", "refund", "useless", "garbage", "worst", "waste", "junk"),
    ("disappointing", "flimsy", "poor", "cheap", "meh", "lacking", "returned", "mediocre"),
    ("okay", "average", "decent", "fine", "acceptable", "alright", "so-so", "fair"),
    ("good", "solid", "nice", "sturdy", "pleased", "recommend", "useful", "happy"),
    ("excellent", "perfect", "love", "amazing", "fantastic", "best", "wonderful", "superb"),
)
_NEUTRAL: Final[tuple[str, ...]] = tuple(
    "the a it this product item i bought for my with and was is to of in on box arrived "
    "shipping size color price use used week month after time daughter son gift kitchen book "
    "phone case cable battery read pages story author".split()
)


def gen_amazon_wilds(root: Path, scale: float, rng: np.random.Generator) -> dict[str, int]:
    """``amazon_v2.1/``: ``reviews.csv`` (QUOTE_NONNUMERIC), ``splits/user.csv``, the release file.

    Ratings skew to 5 stars; a review mixes words of its rating's sentiment (and its
    neighbours') with neutral words. Reviewers of the OOD splits (val, test) are new people who
    write fewer sentiment words: the subpopulation shift.
    """
    import pandas as pd

    from tasks.data.datasets import amazon_wilds

    folder = root / amazon_wilds.DATASET_DIR
    (folder / "splits").mkdir(parents=True, exist_ok=True)
    counts = {code: rows(full, scale, 20) for code, full in AMAZON_SPLITS.items()}
    split = rng.permutation(np.concatenate([np.full(c, code) for code, c in counts.items()]))
    total = split.size
    stars = rng.choice(5, size=total, p=[0.07, 0.06, 0.10, 0.22, 0.55]) + 1
    ood = np.isin(split, (1, 3))
    users_id, users_ood = max(10, total // 40), max(10, total // 40)
    user = np.where(ood, users_id + rng.integers(0, users_ood, total), rng.integers(0, users_id, total))
    tilt = rng.uniform(0.15, 0.45, size=users_id + users_ood)
    tilt[users_id:] *= 0.55
    vocab = np.array([*(w for level in _SENTIMENT for w in level), *_NEUTRAL])
    n_sent = sum(len(level) for level in _SENTIMENT)
    categories = np.array(["Books", "Electronics", "Home_and_Kitchen", "Clothing", "Toys"])
    path = folder / "reviews.csv"
    path.unlink(missing_ok=True)
    for sl in _chunks(total, 50_000):
        m = sl.stop - sl.start
        length = 30
        is_sent = rng.random((m, length)) < tilt[user[sl]][:, None]
        level = np.clip(stars[sl][:, None] - 1 + rng.choice([-1, 0, 0, 0, 1], size=(m, length)), 0, 4)
        word = np.where(is_sent, level * 8 + rng.integers(0, 8, (m, length)),
                        n_sent + rng.integers(0, len(_NEUTRAL), (m, length)))
        cut = rng.integers(8, length + 1, size=m)
        words = vocab[word]
        texts = [" ".join(words[i, :cut[i]].tolist()) for i in range(m)]
        year = rng.integers(2005, 2019, size=m)
        frame = pd.DataFrame({
            "reviewerID": [f"A{u:013d}" for u in user[sl]],
            "asin": [f"B{a:09d}" for a in rng.integers(0, 200_000, size=m)],
            "overall": stars[sl].astype(float),
            "reviewTime": [f"01 1, {y}" for y in year],
            "unixReviewTime": 1_100_000_000 + rng.integers(0, 400_000_000, size=m),
            "reviewText": texts,
            "summary": [" ".join(words[i, :3].tolist()) for i in range(m)],
            "verified": rng.random(m) < 0.8,
            "category": categories[rng.integers(0, len(categories), size=m)],
            "reviewYear": year,
        })
        frame.to_csv(path, mode="a", header=sl.start == 0, index=False,
                     quoting=csv.QUOTE_NONNUMERIC)
    pd.DataFrame({"split": split}).to_csv(folder / "splits" / "user.csv", index=False)
    (folder / f"RELEASE_v{amazon_wilds.VERSION}.txt").write_text(
        "Amazon WILDS v2.1 (synthetic release)\n")
    names = {0: "train", 1: "val", 2: "id_val", 3: "test", 4: "id_test"}
    return {names[c]: n for c, n in counts.items()}


# ----------------------------------------------------------------------------- Tiny ImageNet
#: Images of the Tiny ImageNet release: training per class, validation, test, and each
#: Tiny-ImageNet-C folder (corruption x severity).
TINY_COUNTS: Final[dict[str, int]] = {"train_per_class": 500, "val": 10_000, "test": 10_000,
                                      "corrupted": 10_000}
#: Share of Tiny ImageNet's images written greyscale (the release has some; the loader converts).
TINY_GREY: Final[float] = 0.02
#: JPEG quality of the generated Tiny ImageNet files (about the release's 2-3 KB per image).
TINY_QUALITY: Final[int] = 75

_TINY: dict[str, Any] = {}  # per process: the class templates and the Tiny-ImageNet-C base images


def _tiny_setup(seed: int, c_labels: np.ndarray) -> None:
    """Worker initialiser: the class templates and the base images every corruption degrades,
    both from ``seed`` alone, so every process holds the same ones."""
    _TINY["tpl"] = templates(np.random.default_rng([seed, 0]), 200, 64, res=8)
    _TINY["c_base"] = _tiny_render(c_labels, np.random.default_rng([seed, 3]))


def _tiny_render(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return render(_TINY["tpl"], labels, rng, amp=34.0, noise=24.0, distractor=1.0)


def _write_jpegs(folder: Path, names: list[str], images: np.ndarray,
                 rng: np.random.Generator) -> None:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    grey = rng.random(len(names)) < TINY_GREY
    for name, image, is_grey in zip(names, images, grey):
        img = Image.fromarray(image, mode="RGB")
        (img.convert("L") if is_grey else img).save(folder / name, format="JPEG",
                                                    quality=TINY_QUALITY)


def _tiny_task(task: tuple[Any, ...]) -> tuple[str, int]:
    """One unit of the Tiny ImageNet generation (run in a worker process, or here)."""
    from tasks.data.datasets import tinyimagenet as tiny

    kind, root, seed = task[0], Path(task[1]), int(task[2])
    if kind == "train":
        label, per_class = int(task[3]), int(task[4])
        rng = np.random.default_rng([seed, 1, label])
        wnid = tiny.WNIDS[label]
        folder = root / tiny.DATASET_DIR / "train" / wnid
        names = [f"{wnid}_{k}.JPEG" for k in range(per_class)]
        _write_jpegs(folder / "images", names, _tiny_render(np.full(per_class, label), rng), rng)
        boxes = rng.integers(0, 64, size=(per_class, 4))
        lo, hi = np.minimum(boxes[:, :2], boxes[:, 2:]), np.maximum(boxes[:, :2], boxes[:, 2:])
        (folder / f"{wnid}_boxes.txt").write_text("".join(
            f"{n}\t{a}\t{b}\t{c}\t{d}\n" for n, (a, b), (c, d) in zip(names, lo, hi)))
        return kind, per_class
    if kind in ("val", "test"):
        start, labels = int(task[3]), np.asarray(task[4])
        rng = np.random.default_rng([seed, 2 if kind == "val" else 5, start])
        names = [f"{kind}_{start + k}.JPEG" for k in range(labels.size)]
        _write_jpegs(root / tiny.DATASET_DIR / kind / "images", names,
                     _tiny_render(labels, rng), rng)
        return kind, int(labels.size)
    corruption, severity, c_labels = str(task[3]), int(task[4]), np.asarray(task[5])
    rng = np.random.default_rng([seed, 4, tiny.CORRUPTIONS.index(corruption), severity])
    base = _TINY["c_base"]
    folder = root / tiny.C_DIR / corruption / str(severity)
    for sl in _chunks(base.shape[0], 2000):
        images = corrupt(base[sl], corruption, severity, rng)
        for label in np.unique(c_labels[sl]):
            keep = np.flatnonzero(c_labels[sl] == label)
            _write_jpegs(folder / tiny.WNIDS[int(label)],
                         [f"test_{sl.start + int(k)}.JPEG" for k in keep], images[keep], rng)
    return kind, int(base.shape[0])


def gen_tinyimagenet(root: Path, scale: float, rng: np.random.Generator,
                     jobs: int | None = None) -> dict[str, int]:
    """``tiny-imagenet-200/`` (wnids.txt, words.txt, train/, val/, test/) and ``Tiny-ImageNet-C/``
    (15 corruptions x 5 severities), 64 x 64 JPEGs in the releases' layout.

    The units (one training class, a thousand validation or test images, one Tiny-ImageNet-C
    folder) run in ``jobs`` processes (default: every core; 1 runs them here); each unit draws
    from its own generator seeded by the release's seed and its name, so the files do not depend
    on ``jobs``.
    """
    import os
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from tasks.data.datasets import tinyimagenet as tiny

    per_class = rows(TINY_COUNTS["train_per_class"], scale, 2)
    n_val = rows(TINY_COUNTS["val"], scale, 20)
    n_test = rows(TINY_COUNTS["test"], scale, 20)
    n_c = rows(TINY_COUNTS["corrupted"], scale, 20)
    seed = int(rng.integers(0, 2**62))
    val_labels = balanced_labels(n_val, 200, rng)
    test_labels = balanced_labels(n_test, 200, rng)
    c_labels = balanced_labels(n_c, 200, rng)
    for folder in (tiny.DATASET_DIR, tiny.C_DIR):
        shutil.rmtree(root / folder, ignore_errors=True)
    (root / tiny.MANIFEST).unlink(missing_ok=True)
    base = root / tiny.DATASET_DIR
    base.mkdir(parents=True)
    (base / "wnids.txt").write_text("".join(f"{w}\n" for w in tiny.WNIDS))
    (base / "words.txt").write_text("".join(
        f"{w}\t{name}\n" for w, name in sorted(zip(tiny.WNIDS, tiny.CLASS_NAMES))))
    boxes = rng.integers(0, 64, size=(n_val, 4))
    lo, hi = np.minimum(boxes[:, :2], boxes[:, 2:]), np.maximum(boxes[:, :2], boxes[:, 2:])
    (base / "val").mkdir()
    (base / "val" / "val_annotations.txt").write_text("".join(
        f"val_{k}.JPEG\t{tiny.WNIDS[int(y)]}\t{a}\t{b}\t{c}\t{d}\n"
        for k, (y, (a, b), (c, d)) in enumerate(zip(val_labels, lo, hi))))
    key = str(root)
    tasks: list[tuple[Any, ...]] = [
        *(("train", key, seed, label, per_class) for label in range(200)),
        *(("val", key, seed, sl.start, val_labels[sl]) for sl in _chunks(n_val, 1000)),
        *(("test", key, seed, sl.start, test_labels[sl]) for sl in _chunks(n_test, 1000)),
        *(("c", key, seed, name, sev, c_labels) for name in tiny.CORRUPTIONS
          for sev in tiny.SEVERITIES),
    ]
    workers = max(1, int(jobs if jobs is not None else (os.cpu_count() or 1)))
    counts: dict[str, int] = {}
    if workers == 1:
        _tiny_setup(seed, c_labels)
        done = map(_tiny_task, tasks)
        for kind, n in done:
            counts[kind] = counts.get(kind, 0) + n
    else:
        with ProcessPoolExecutor(workers, mp_context=get_context("forkserver"),
                                 initializer=_tiny_setup, initargs=(seed, c_labels)) as pool:
            for kind, n in pool.map(_tiny_task, tasks, chunksize=1):
                counts[kind] = counts.get(kind, 0) + n
    return {"train": counts["train"], "val": counts["val"], "test": counts["test"],
            "tiny-imagenet-c": counts["c"]}


# ------------------------------------------------------------------------------------ driver
#: Generators by dataset registry key.
DATASETS: Final[dict[str, Callable[[Path, float, np.random.Generator], dict[str, int]]]] = {
    "cifar10": gen_cifar10,
    "cifar100": gen_cifar100,
    "imagenet": gen_imagenet,
    "mnist": gen_mnist,
    "office31": gen_office31,
    "waterbirds": gen_waterbirds,
    "ogbn-arxiv": gen_ogbn_arxiv,
    "amazon-wilds": gen_amazon_wilds,
    "tinyimagenet": gen_tinyimagenet,
}
#: Generators that run their units in processes (``--jobs``).
PARALLEL: Final[frozenset[str]] = frozenset({"tinyimagenet"})


def generate(dataset: str, root: Path | str, *, scale: float = 1.0, seed: int = 0,
             force: bool = False, jobs: int | None = None) -> Path:
    """Generate a marked synthetic release of ``dataset`` under the data root ``root``.

    Parameters
    ----------
    dataset : str
        One of :data:`DATASETS`.
    root : Path or str
        Data root (the folder the dataset's loaders read).
    scale : float, default 1.0
        Fraction of the real release's row counts, in (0, 1].
    seed : int, default 0
        Seed of every random draw.
    force : bool, default False
        Overwrite files of the dataset that are there without a synthetic marker (a real
        release): refused without it.
    jobs : int, optional
        Processes of the generators of :data:`PARALLEL` (default: every core); the files do not
        depend on it. Other generators run in this process.

    Returns
    -------
    Path
        The marker file.

    Raises
    ------
    ValueError
        If ``dataset`` is unknown, ``scale`` is not in (0, 1], or the root holds the real release
        and ``force`` is not given.
    """
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {', '.join(DATASETS)}; got {dataset!r}.")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= 1:
        raise ValueError(f"scale must be a number in (0, 1]; got {scale!r}.")
    from tasks.data.datasets import get_dataset_spec

    base = Path(root)
    spec = get_dataset_spec(dataset)
    try:
        present = [p for p in spec.raw_files(base) if Path(p).exists()]
    except (OSError, ValueError):
        present = []
    if present and not is_synthetic(base, dataset) and not force:
        raise ValueError(
            f"the data root {str(base)!r} holds files of dataset {dataset!r} without a synthetic "
            f"marker (e.g. {str(present[0])!r}): it looks like the real release; refusing to "
            f"overwrite it. Choose another --root, or pass --force."
        )
    info: dict[str, Any] = {
        "generator": GENERATOR, "seed": int(seed), "scale": float(scale), "commit": _commit(),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "complete": False,
        "note": "synthetic data for measuring cost; not the paper's numbers",
    }
    write_marker(base, dataset, info)  # first: an interrupted generation still marks the root
    rng = np.random.default_rng([int(seed), sum(dataset.encode())])
    t0 = time.perf_counter()
    extra = {"jobs": jobs} if dataset in PARALLEL else {}
    counts = DATASETS[dataset](base, float(scale), rng, **extra)
    info.update(complete=True, rows=counts, seconds=round(time.perf_counter() - t0, 1),
                finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    return write_marker(base, dataset, info)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``synth_release.py DATASET --root DIR [--scale F] [--seed S] [--force]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", choices=[*DATASETS, "all"])
    parser.add_argument("--root", required=True, type=Path, help="data root the loaders read")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the real row counts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true",
                        help="overwrite files of a release that carries no synthetic marker")
    parser.add_argument("--jobs", type=int, default=None,
                        help="processes for tinyimagenet (default: every core)")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        print(f"synth_release: --jobs must be an integer >= 1; got {args.jobs}.", file=sys.stderr)
        return 2
    names = list(DATASETS) if args.dataset == "all" else [args.dataset]
    for name in names:
        t0 = time.perf_counter()
        try:
            marker = generate(name, args.root, scale=args.scale, seed=args.seed, force=args.force,
                              jobs=args.jobs)
        except ValueError as exc:
            print(f"synth_release: {exc}", file=sys.stderr)
            return 2
        payload = json.loads(marker.read_text())
        print(f"{name}: {payload['rows']} in {time.perf_counter() - t0:.1f} s; marker {marker}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
