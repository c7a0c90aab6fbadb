"""``mnist``: MNIST digits (LeCun et al. 1998) -> MNIST-M (Ganin & Lempitsky 2015).

Data
----
Source: the 60,000 MNIST training digits, sub-sampled class-imbalanced 1:100 as in the ALSA paper
(App. H.2, MNIST: "the ratio of samples between Class 0 and Class 9 to 1:100, with the ratio
increasing linearly"): class ``c`` gets ``round(4000 (1 + 99 c / 9) / 100)`` training digits
(40 for ``0`` up to 4,000 for ``9``, 20,200 in all) and, drawn the same way from the digits left
over, ``round(1000 (1 + 99 c / 9) / 100)`` validation digits (10 up to 1,000, 5,050 in all);
:func:`tasks.data.spec.imbalanced_counts` with ``ratio=100``, seed :data:`SPLIT_SEED`.

Targets: ``clean`` = the 10,000 MNIST test digits (pool sub-population 0), and ``mnist-m`` = the
9,001 MNIST-M test digits (sub-population 1): MNIST digits blended with colour patches of
BSDS500 photos. The paper files MNIST-M under *synthetic* shift (App. F), so its split belongs
to the ``synthetic`` family, made by :func:`tasks.data.families.test_set_family` (every image
of the released test set, nothing generated here).

Model input
-----------
MNIST digits are 28 x 28 grey; MNIST-M digits are RGB. Both are stored as ``uint8`` arrays
``(n, 28, 28, 3)`` (a grey digit's value copied into the three channels; an MNIST-M image of
another size, such as 32 x 32, is resized to 28 x 28 with bilinear interpolation, as the DANN
loaders' ``Resize(28)`` does), and :func:`digits_to_inputs` makes ``(n, 3, 28, 28)`` ``float32``
inputs normalised with the MNIST training statistics (mean 0.1307, std 0.3081, every channel).
A grey digit therefore gives three equal channels, and the 3-layer CNN of the paper (``cnn3``)
sees MNIST and MNIST-M in one input space.

On-disk layout (``alsa-bench fetch mnist``)
-------------------------------------------
::

    <root>/MNIST/raw/train-images-idx3-ubyte.gz    torchvision's MNIST layout; the four files of
    <root>/MNIST/raw/train-labels-idx1-ubyte.gz    torchvision.datasets.MNIST.resources (MD5s
    <root>/MNIST/raw/t10k-images-idx3-ubyte.gz     copied into :data:`ARCHIVE_MD5`), gzipped or
    <root>/MNIST/raw/t10k-labels-idx1-ubyte.gz     already decompressed (no ``.gz``)
    <root>/mnist_m/mnist_m_test_labels.txt         one line per image: "<file name> <label>"
    <root>/mnist_m/mnist_m_test/00000000.png ...   the MNIST-M test images (PNG)

``mnist_m.tar.gz`` is the "unpacked" MNIST-M release of the DANN authors (top folder
``mnist_m/`` with ``mnist_m_train``, ``mnist_m_test`` and their label files); it is fetched from
the copy that ``pytorch-adapt`` (``pytorch_adapt.datasets.MNISTM``) downloads, with the MD5 that
library pins. Only the test half is read.

idx files are read here (:func:`read_idx`): big-endian header (two zero bytes, type ``0x08`` =
unsigned byte, number of dimensions, then each dimension as a 32-bit integer) followed by the
values; a wrong magic number, a truncated or over-long file, or a label outside ``0..9`` is
refused with the file named.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path
from types import MappingProxyType
from typing import Final

import numpy as np

from tasks.data.families import test_set_family

from tasks.data.errors import DatasetUnavailableError
from tasks.data.datasets._online import require_files
from tasks.data.spec import (
    DatasetSpec,
    RemoteFile,
    SourceSplits,
    TargetPool,
    draw_source_split,
    imbalanced_counts,
)

__all__ = [
    "ARCHIVE_MD5",
    "CLASS_NAMES",
    "IMBALANCE",
    "SPECS",
    "TARGETS",
    "digits_to_inputs",
    "load_mnist",
    "load_mnist_m_test",
    "load_source",
    "load_target_pool",
    "raw_files",
    "read_idx",
    "stage",
]

#: Registry position (online vision suites after the offline suites).
ORDER: Final[int] = 420

NAME: Final[str] = "mnist"

#: torchvision's published MD5 of each MNIST ``.gz`` file (``torchvision.datasets.MNIST.resources``,
#: copied so that listing the datasets does not import torch; a test checks the copy).
ARCHIVE_MD5: Final[dict[str, str]] = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
#: First mirror of ``torchvision.datasets.MNIST.mirrors``.
MNIST_MIRROR: Final[str] = "https://ossci-datasets.s3.amazonaws.com/mnist/"
#: Names of the idx files without ``.gz``, in torchvision's order.
IDX_FILES: Final[tuple[str, ...]] = tuple(name.removesuffix(".gz") for name in ARCHIVE_MD5)
#: Folder of the idx files under the data root (torchvision's ``MNIST/raw``).
MNIST_DIR: Final[str] = "MNIST/raw"

#: MNIST-M release: archive, its MD5 (pinned by pytorch-adapt) and what is read from it.
MNISTM_URL: Final[str] = "https://cornell.box.com/shared/static/jado7quprg6hzzdubvwzh9umr75damwi"
MNISTM_ARCHIVE: Final[str] = "mnist_m.tar.gz"
MNISTM_MD5: Final[str] = "859df31c91afe82e80e5012ba928f279"
MNISTM_DIR: Final[str] = "mnist_m"
MNISTM_TEST_LABELS: Final[str] = "mnist_m_test_labels.txt"
MNISTM_TEST_IMAGES: Final[str] = "mnist_m_test"

SOURCES: Final[tuple[RemoteFile, ...]] = (
    *(
        RemoteFile(
            url=f"{MNIST_MIRROR}{name}", filename=name, md5=md5, extract=False, dest=MNIST_DIR
        )
        for name, md5 in ARCHIVE_MD5.items()
    ),
    RemoteFile(url=MNISTM_URL, filename=MNISTM_ARCHIVE, md5=MNISTM_MD5),
)

N_CLASSES: Final[int] = 10
CLASS_NAMES: Final[tuple[str, ...]] = tuple(str(d) for d in range(N_CLASSES))
SIDE: Final[int] = 28
INPUT_SHAPE: Final[tuple[int, int, int]] = (3, SIDE, SIDE)

#: Class-0 : class-9 ratio of the source (paper App. H.2, MNIST: 1:100).
IMBALANCE: Final[float] = 100.0
#: Training and validation count of the largest class (digit 9).
TRAIN_LARGEST: Final[int] = 4000
VAL_LARGEST: Final[int] = 1000
#: Seed of the source training/validation draw (independent of the training seed).
SPLIT_SEED: Final[int] = 0

#: MNIST training-set pixel statistics (intensities in [0, 1]), applied to every channel.
PIXEL_MEAN: Final[float] = 0.1307
PIXEL_STD: Final[float] = 0.3081

#: Target splits of the ``synthetic`` family: ``(split name, shift name, pool sub-population)``.
TARGETS: Final[tuple[tuple[str, str, int], ...]] = (("mnist-m", "mnist-m", 1),)

_IDX_UBYTE: Final[int] = 0x08


#: MNIST's own ``synthetic`` family: MNIST-M, the paper's synthetic-shift row, read from disk.
MNISTM_FAMILY: Final = test_set_family("synthetic", 1, TARGETS)


def _idx_path(root: Path | str, name: str) -> Path:
    """The staged idx file ``name``: its ``.gz`` when present, else the decompressed file."""
    folder = Path(root) / MNIST_DIR
    gz = folder / f"{name}.gz"
    plain = folder / name
    return plain if plain.is_file() and not gz.is_file() else gz


def raw_files(root: Path | str) -> list[Path]:
    """The four idx files, the MNIST-M test label file and its PNG images (sorted).

    Reads no file; a missing ``mnist_m_test`` folder stands for itself (not a file, so the
    dataset counts as not staged).
    """
    out = [_idx_path(root, name) for name in IDX_FILES]
    folder = Path(root) / MNISTM_DIR
    out.append(folder / MNISTM_TEST_LABELS)
    images = folder / MNISTM_TEST_IMAGES
    out.extend(sorted(images.glob("*.png")) if images.is_dir() else [images])
    return out


def _required(root: Path | str) -> list[Path]:
    folder = Path(root) / MNISTM_DIR
    return [
        *(_idx_path(root, name) for name in IDX_FILES),
        folder / MNISTM_TEST_LABELS,
        folder / MNISTM_TEST_IMAGES,
    ]


def stage(root: Path | str) -> list[Path]:
    """Check that MNIST and MNIST-M are under ``root``; download nothing.

    Parameters
    ----------
    root : Path or str
        Data root.

    Returns
    -------
    list of Path
        :func:`raw_files`.

    Raises
    ------
    DatasetUnavailableError
        If a file is missing (one line ending with ``alsa-bench fetch mnist``).
    """
    require_files(NAME, root, _required(root))
    return raw_files(root)


def read_idx(path: Path | str, ndim: int) -> np.ndarray:
    """Read one idx file of unsigned bytes (gzipped when its name ends with ``.gz``).

    Parameters
    ----------
    path : Path or str
        The file.
    ndim : int
        Number of dimensions the file must declare (3 for images, 1 for labels).

    Returns
    -------
    numpy.ndarray
        ``uint8`` array of the declared shape.

    Raises
    ------
    ValueError
        If the file cannot be decompressed, its magic number is not that of an unsigned-byte
        idx file of ``ndim`` dimensions, or its length differs from what its header declares.
    """
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as handle:
                data = handle.read()
        else:
            data = path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(
            f"MNIST file {str(path)!r} cannot be read ({exc}); it is corrupt."
        ) from None
    header = 4 + 4 * ndim
    if len(data) < header or data[:2] != b"\0\0" or data[2] != _IDX_UBYTE or data[3] != ndim:
        raise ValueError(
            f"MNIST file {str(path)!r} is not an idx file of unsigned bytes with {ndim} "
            f"dimension(s): its magic number is {data[:4].hex() or 'missing'}, expected "
            f"0000{_IDX_UBYTE:02x}{ndim:02x}."
        )
    shape = struct.unpack(f">{ndim}I", data[4:header])
    expected = header + int(np.prod(shape, dtype=np.int64))
    if len(data) != expected:
        raise ValueError(
            f"MNIST file {str(path)!r} declares shape {shape} ({expected} bytes with the header) "
            f"but holds {len(data)} bytes; it is truncated or corrupt."
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def _checked_labels(labels: np.ndarray, path: Path) -> np.ndarray:
    bad = np.flatnonzero(labels >= N_CLASSES)
    if bad.size:
        raise ValueError(
            f"MNIST label file {str(path)!r}: label {int(labels[bad[0]])} at index {int(bad[0])} "
            f"is outside 0..{N_CLASSES - 1}."
        )
    return labels.astype(np.int64)


def _as_rgb(grey: np.ndarray) -> np.ndarray:
    return np.repeat(grey[..., None], 3, axis=-1)


def load_mnist(root: Path | str, *, train: bool) -> tuple[np.ndarray, np.ndarray]:
    """MNIST training or test digits as RGB ``uint8`` images with their labels.

    Parameters
    ----------
    root : Path or str
        Data root.
    train : bool
        True for the training files, False for ``t10k``.

    Returns
    -------
    images : numpy.ndarray
        ``(n, 28, 28, 3)`` ``uint8``; the three channels are equal.
    labels : numpy.ndarray
        ``(n,)`` ``int64`` in ``[0, 10)``.

    Raises
    ------
    DatasetUnavailableError
        If a file is missing.
    ValueError
        If a file is corrupt, its images are not 28 x 28, a label is out of range, or the image
        and label counts differ.
    """
    prefix = "train" if train else "t10k"
    img_path = _idx_path(root, f"{prefix}-images-idx3-ubyte")
    lab_path = _idx_path(root, f"{prefix}-labels-idx1-ubyte")
    require_files(NAME, root, [img_path, lab_path])
    images = read_idx(img_path, 3)
    labels = _checked_labels(read_idx(lab_path, 1), lab_path)
    if images.shape[1:] != (SIDE, SIDE):
        raise ValueError(
            f"MNIST file {str(img_path)!r} holds images of {images.shape[1:]} pixels; expected "
            f"{(SIDE, SIDE)}."
        )
    if images.shape[0] != labels.shape[0]:
        raise ValueError(
            f"MNIST files {str(img_path)!r} and {str(lab_path)!r} disagree: {images.shape[0]} "
            f"images but {labels.shape[0]} labels."
        )
    return _as_rgb(images), labels


def _read_label_lines(path: Path) -> list[tuple[str, int]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"MNIST-M label file {str(path)!r} cannot be read ({exc}).") from None
    entries: list[tuple[str, int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(
                f"MNIST-M label file {str(path)!r}, line {number}: expected '<image file> "
                f"<label>'; got {line!r:.60}."
            )
        name, raw = fields
        if "/" in name or "\\" in name or name in (".", ".."):
            raise ValueError(
                f"MNIST-M label file {str(path)!r}, line {number}: image name must be a plain "
                f"file name; got {name!r}."
            )
        if not raw.isdigit() or int(raw) >= N_CLASSES:
            raise ValueError(
                f"MNIST-M label file {str(path)!r}, line {number}: label must be an integer "
                f"0..{N_CLASSES - 1}; got {raw!r}."
            )
        entries.append((name, int(raw)))
    if not entries:
        raise ValueError(f"MNIST-M label file {str(path)!r} lists no image.")
    return entries


def _decode_digit(path: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise DatasetUnavailableError(
            f"MNIST-M image {str(path)!r} is listed in {MNISTM_TEST_LABELS} but missing; fetch "
            f"the dataset again with `alsa-bench fetch {NAME}`."
        )
    try:
        with Image.open(path) as img:
            rgb = img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ValueError(
            f"MNIST-M image {str(path)!r} cannot be decoded ({type(exc).__name__}: {exc}); the "
            f"file is corrupt: fetch the dataset again with `alsa-bench fetch {NAME}`."
        ) from None
    if rgb.size != (SIDE, SIDE):
        rgb = rgb.resize((SIDE, SIDE), Image.Resampling.BILINEAR)
    return np.asarray(rgb, dtype=np.uint8)


def load_mnist_m_test(root: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """The MNIST-M test images, in the order of ``mnist_m_test_labels.txt``.

    Parameters
    ----------
    root : Path or str
        Data root.

    Returns
    -------
    images : numpy.ndarray
        ``(n, 28, 28, 3)`` ``uint8`` RGB (resized to 28 x 28 when stored at another size).
    labels : numpy.ndarray
        ``(n,)`` ``int64`` in ``[0, 10)``.

    Raises
    ------
    DatasetUnavailableError
        If the label file, the image folder or a listed image is missing.
    ValueError
        If a line of the label file is malformed or its label out of range (file and line
        named), or an image cannot be decoded (file named).
    """
    folder = Path(root) / MNISTM_DIR
    labels_path, images_dir = folder / MNISTM_TEST_LABELS, folder / MNISTM_TEST_IMAGES
    require_files(NAME, root, [labels_path, images_dir])
    entries = _read_label_lines(labels_path)
    images = np.stack([_decode_digit(images_dir / name) for name, _ in entries])
    labels = np.asarray([label for _, label in entries], dtype=np.int64)
    return images, labels


def load_source(root: Path | str) -> SourceSplits:
    """Class-imbalanced (1:100) training subset and validation set of MNIST training digits.

    Returns
    -------
    SourceSplits
        20,200 training and 5,050 validation digits (fewer, same proportions, when the staged
        files are smaller), class ``c`` in proportion ``1 + 99 c / 9``; disjoint.
    """
    images, labels = load_mnist(root, train=True)
    n_train = imbalanced_counts(N_CLASSES, TRAIN_LARGEST, ratio=IMBALANCE)
    n_val = imbalanced_counts(N_CLASSES, VAL_LARGEST, ratio=IMBALANCE)
    plan = {c: (int(n_train[c]), int(n_val[c])) for c in range(N_CLASSES)}
    train_idx, val_idx = draw_source_split(labels, plan, SPLIT_SEED)
    return SourceSplits(images[train_idx], labels[train_idx], images[val_idx], labels[val_idx])


def load_target_pool(root: Path | str) -> TargetPool:
    """MNIST test digits (sub-population 0, ``clean``) then MNIST-M test digits (1)."""
    mnist_x, mnist_y = load_mnist(root, train=False)
    mnistm_x, mnistm_y = load_mnist_m_test(root)
    groups = np.concatenate([
        np.zeros(mnist_y.size, dtype=np.int64), np.full(mnistm_y.size, 1, dtype=np.int64),
    ])
    return TargetPool(
        samples=np.concatenate([mnist_x, mnistm_x]),
        labels=np.concatenate([mnist_y, mnistm_y]),
        n_classes=N_CLASSES,
        subgroups=groups,
        source_subgroups=(0,),
        novel_subgroups=(1,),
    )


def digits_to_inputs(images: np.ndarray) -> np.ndarray:
    """``uint8`` RGB digits ``(n, 28, 28, 3)`` to normalised ``float32`` inputs ``(n, 3, 28, 28)``.

    Parameters
    ----------
    images : numpy.ndarray
        Pixel values in ``[0, 255]``, channels last.

    Returns
    -------
    numpy.ndarray
        ``(images / 255 - 0.1307) / 0.3081``, channels first.

    Raises
    ------
    ValueError
        If ``images`` is not ``(n, 28, 28, 3)``.
    """
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[1:] != (SIDE, SIDE, 3):
        raise ValueError(
            f"images must have shape (n, {SIDE}, {SIDE}, 3); got {images.shape}."
        )
    x = images.astype(np.float32).transpose(0, 3, 1, 2) * np.float32(1.0 / 255.0)
    x -= np.float32(PIXEL_MEAN)
    x *= np.float32(1.0 / PIXEL_STD)
    return np.ascontiguousarray(x)


#: The MNIST -> MNIST-M dataset (registry entry; :mod:`tasks.data.datasets` collects it).
SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME,
        suite="mnist",
        description="MNIST, imbalanced 1:100, 3-layer CNN; target MNIST-M test digits",
        modality="image",
        n_classes=N_CLASSES,
        class_names=CLASS_NAMES,
        input_shape=INPUT_SHAPE,
        target_families=("clean", "synthetic"),
        stage=stage,
        raw_files=raw_files,
        load_source=load_source,
        load_target_pool=load_target_pool,
        to_inputs=digits_to_inputs,
        online=True,
        paper_row="MNIST-M (synthetic shift; Table 1)",
        backbones=("cnn3",),
        sources=SOURCES,
        recipes=MappingProxyType({
            "cnn3": MappingProxyType({
                "optimizer": "adam", "lr": 1e-3, "weight_decay": 0.0, "epochs": 100,
                "patience": 5,
            }),
        }),
        own_families=(MNISTM_FAMILY,),
    ),
)
