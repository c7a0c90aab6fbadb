"""Fashion-MNIST: staging, loading, and the dataset keys ``fmnist``, ``fmnist-coarse``, ``fmnist-binary``.

Staging
-------
torchvision's :class:`~torchvision.datasets.FashionMNIST` reads the four uncompressed idx files
from ``<root>/FashionMNIST/raw/``. :func:`stage_fashion_mnist` fills that folder from, in order:

1. ``source_dir`` when given, else the folder named by ``$FASHION_MNIST_DIR``, else the Debian
   package ``dataset-fashion-mnist`` (``/usr/share/datasets/fashion-mnist``), each holding
   ``train-images-idx3-ubyte.gz`` and the three other files of
   ``torchvision.datasets.FashionMNIST.resources`` (gzipped or already decompressed);
2. failing that, torchvision's own download (``download=True``) into a temporary folder.

Every file is verified before it is renamed into place (decompressed to a temporary file in the
destination folder first, so no half-written file is ever visible). A file passes when the MD5
of its ``.gz`` archive equals torchvision's published one
(``torchvision.datasets.FashionMNIST.resources``) or the MD5 of the decompressed bytes equals the
published MD5 of the upstream uncompressed file (:data:`RAW_MD5`). Both are needed: Debian
re-compresses the archives, so their ``.gz`` bytes differ from the upstream ones while the
decompressed idx files are byte-identical to upstream.

Dataset keys
------------
``fmnist``
    10 classes. Source = class-imbalanced subset of the 60,000 training images (class ``c`` gets
    ``round(3000 (1 + 2c/9) / 3)`` images: 1,000 for T-shirt/top up to 3,000 for Ankle boot,
    20,000 in all); validation = 5,000 further training images drawn the same way (250 to 750
    per class), disjoint from the training subset. Target pool = the 10,000 test images.
``fmnist-coarse``
    3 coarse classes, BREEDS style: tops = {T-shirt/top 0, Pullover 2, Coat 4, Shirt 6},
    footwear = {Sandal 5, Sneaker 7, Ankle boot 9}, other = {Trouser 1, Dress 3, Bag 8}. The
    source uses one mix of sub-classes per coarse class, :data:`COARSE_SOURCE_SUBCLASSES`
    = tops {0, 2}, footwear {5, 7}, other {1, 3}, imbalanced 1:2:3 across the coarse classes
    (2,000 / 4,000 / 6,000 training images, split evenly between the sub-classes; validation
    500 / 1,000 / 1,500). The novel sub-classes :data:`COARSE_NOVEL_SUBCLASSES` = tops {4, 6},
    footwear {9}, other {8} appear only in target splits (``subpopulation`` family).
``fmnist-binary``
    2 classes: upper-body garments (T-shirt/top, Pullover, Coat, Shirt: label 1) against
    everything else (label 0). The images are exactly those of ``fmnist`` (same imbalanced
    source draw, same validation set, same test pool), only the labels are mapped, so the
    binary rows of the report are comparable with the 10-class ones; the harder pairs
    (Shirt/Dress, Coat/Dress, Pullover/Bag) keep it from being trivial.

Both draws use the fixed seed :data:`SPLIT_SEED`, independent of the training seed, so every
run of a dataset sees the same training subset and validation set and the seeds differ only in
initialisation and batch order.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.errors import ChecksumError, DatasetUnavailableError
from tasks.data.files import atomic_target
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool, draw_source_split, imbalanced_counts

logger = logging.getLogger(__name__)

#: Environment variable naming a folder with the four Fashion-MNIST files.
ENV_VAR: Final[str] = "FASHION_MNIST_DIR"

#: Where the Debian package ``dataset-fashion-mnist`` installs the files.
DEBIAN_DIR: Final[Path] = Path("/usr/share/datasets/fashion-mnist")

#: torchvision's published MD5 of each upstream ``.gz`` archive
#: (``torchvision.datasets.FashionMNIST.resources``, copied so that listing the datasets does not
#: import torch; a test checks the copy against torchvision).
ARCHIVE_MD5: Final[dict[str, str]] = {
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}

#: Names of the uncompressed idx files torchvision reads, in torchvision's order.
RAW_FILES: Final[tuple[str, ...]] = tuple(name.removesuffix(".gz") for name in ARCHIVE_MD5)

#: Published MD5 of each upstream uncompressed idx file (Zalando's release, decompressed).
RAW_MD5: Final[dict[str, str]] = {
    "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
    "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
    "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
}

CLASS_NAMES: Final[tuple[str, ...]] = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

COARSE_CLASS_NAMES: Final[tuple[str, ...]] = ("tops", "footwear", "other")

#: Fine classes of each coarse class (index = coarse label).
COARSE_GROUPS: Final[tuple[tuple[int, ...], ...]] = ((0, 2, 4, 6), (5, 7, 9), (1, 3, 8))

#: Sub-classes of each coarse class seen in training.
COARSE_SOURCE_SUBCLASSES: Final[tuple[tuple[int, ...], ...]] = ((0, 2), (5, 7), (1, 3))

#: Sub-classes of each coarse class never seen in training.
COARSE_NOVEL_SUBCLASSES: Final[tuple[tuple[int, ...], ...]] = ((4, 6), (9,), (8,))

#: Coarse label of each fine class.
FINE_TO_COARSE: Final[np.ndarray] = np.empty(10, dtype=np.int64)
for _coarse, _fine in enumerate(COARSE_GROUPS):
    FINE_TO_COARSE[list(_fine)] = _coarse

#: Seed of the source training/validation draw.
SPLIT_SEED: Final[int] = 0

#: Training and validation count of the largest class of ``fmnist``.
FMNIST_TRAIN_LARGEST: Final[int] = 3000
FMNIST_VAL_LARGEST: Final[int] = 750

#: Training and validation count of the largest coarse class of ``fmnist-coarse``.
COARSE_TRAIN_LARGEST: Final[int] = 6000
COARSE_VAL_LARGEST: Final[int] = 1500

#: Normalisation of pixel intensities in [0, 1] (Fashion-MNIST training-set mean and std).
PIXEL_MEAN: Final[float] = 0.2860
PIXEL_STD: Final[float] = 0.3530

INPUT_SHAPE: Final[tuple[int, int, int]] = (1, 28, 28)

_CHUNK = 1 << 20


def raw_folder(root: Path | str) -> Path:
    """Folder torchvision reads the idx files from: ``<root>/FashionMNIST/raw``."""
    return Path(root) / "FashionMNIST" / "raw"


def raw_files(root: Path | str) -> list[Path]:
    """Paths of the four staged idx files under ``root``, in :data:`RAW_FILES` order."""
    folder = raw_folder(root)
    return [folder / name for name in RAW_FILES]


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _source_candidates(source_dir: Path | str | None) -> tuple[Path | None, str]:
    """The source folder to stage from and how it was chosen (for error messages)."""
    if source_dir is not None:
        return Path(source_dir), "source_dir argument"
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env), f"${ENV_VAR}"
    if DEBIAN_DIR.is_dir():
        return DEBIAN_DIR, "Debian package dataset-fashion-mnist"
    return None, ""


def _find_in_source(folder: Path, raw_name: str) -> Path | None:
    for candidate in (folder / f"{raw_name}.gz", folder / raw_name):
        if candidate.is_file():
            return candidate
    return None


def _copy_verified(src: Path, dest: Path, expected_raw_md5: str, archive_md5: str | None) -> None:
    """Decompress (or copy) ``src`` to ``dest`` atomically, verifying checksums first."""
    compressed = src.suffix == ".gz"
    archive_ok = compressed and archive_md5 is not None and _md5(src) == archive_md5
    with atomic_target(dest) as tmp:
        h = hashlib.md5(usedforsecurity=False)
        opener = gzip.open if compressed else open
        try:
            with opener(src, "rb") as fin, open(tmp, "wb") as fout:
                while chunk := fin.read(_CHUNK):
                    h.update(chunk)
                    fout.write(chunk)
        except (OSError, EOFError) as exc:
            raise ChecksumError(
                f"Could not read {str(src)!r}: {exc}. The file is corrupt."
            ) from exc
        raw_md5 = h.hexdigest()
        if not (archive_ok or raw_md5 == expected_raw_md5):
            expected = f"MD5 {expected_raw_md5} for the decompressed bytes"
            if compressed and archive_md5 is not None:
                expected += f" or MD5 {archive_md5} for the .gz archive"
            raise ChecksumError(
                f"Checksum mismatch for {str(src)!r}: expected {expected}; got MD5 {raw_md5} "
                f"(decompressed). The file is corrupt or not the Fashion-MNIST release; "
                f"reinstall it (apt-get install --reinstall dataset-fashion-mnist) or point "
                f"${ENV_VAR} at a good copy."
            )


def _download(root: Path, names: list[str], raw_md5: Mapping[str, str]) -> None:
    """Download with torchvision into a temporary folder, verify, move into place."""
    raw_dir = raw_folder(root)
    raw_dir.mkdir(parents=True, exist_ok=True)
    tmp_root = Path(tempfile.mkdtemp(prefix=".download-", dir=raw_dir.parent))
    try:
        from torchvision.datasets import FashionMNIST

        FashionMNIST(str(tmp_root), train=True, download=True)
        for name in names:
            _copy_verified(raw_folder(tmp_root) / name, raw_dir / name, raw_md5[name], None)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)


def stage_fashion_mnist(
    root: Path | str,
    *,
    source_dir: Path | str | None = None,
    checksums: Mapping[str, str] | None = None,
    allow_download: bool = True,
) -> list[Path]:
    """Put the four verified idx files under ``<root>/FashionMNIST/raw/`` for torchvision.

    Files already staged with the expected checksum are kept; the others are staged from the
    source folder (see the module docstring for the search order) or downloaded.

    Parameters
    ----------
    root : Path or str
        Dataset root; torchvision's ``FashionMNIST(root, download=False)`` then reads the files.
    source_dir : Path or str, optional
        Folder holding the files (``.gz`` or decompressed); default ``$FASHION_MNIST_DIR``, else
        the Debian package's folder when installed.
    checksums : mapping of str to str, optional
        Expected MD5 of each decompressed idx file, keyed by :data:`RAW_FILES` names; default
        :data:`RAW_MD5` (the published ones). A ``.gz`` archive whose MD5 equals torchvision's
        published one passes as well.
    allow_download : bool, default True
        Whether to fall back to torchvision's download when no source folder exists.

    Returns
    -------
    list of Path
        The four staged files, in :data:`RAW_FILES` order.

    Raises
    ------
    DatasetUnavailableError
        If a file is missing from the chosen source folder, or there is no source folder and
        the download is disabled or fails.
    ChecksumError
        If a file's checksum differs from the published one.
    """
    expected = dict(RAW_MD5 if checksums is None else checksums)
    missing_keys = [name for name in RAW_FILES if name not in expected]
    if missing_keys:
        raise ValueError(
            f"checksums must give an MD5 for each of {', '.join(RAW_FILES)}; "
            f"missing {', '.join(missing_keys)}."
        )
    root = Path(root)
    raw_dir = raw_folder(root)
    targets = [raw_dir / name for name in RAW_FILES]
    pending = [p.name for p in targets if not (p.is_file() and _md5(p) == expected[p.name])]
    if not pending:
        return targets

    folder, how = _source_candidates(source_dir)
    if folder is not None:
        for name in pending:
            src = _find_in_source(folder, name)
            if src is None:
                raise DatasetUnavailableError(
                    f"Fashion-MNIST file {name}.gz (or {name}) not found in {str(folder)!r} "
                    f"(chosen by {how}). Install the data with `apt-get install "
                    f"dataset-fashion-mnist` or set {ENV_VAR} to a folder holding "
                    f"{', '.join(f'{n}.gz' for n in RAW_FILES)}."
                )
            if (raw_dir / name).is_file():  # there, but not the published bytes
                logger.warning("%s is damaged (its MD5 is not the published one); staging it "
                               "again from %s.", raw_dir / name, src)
            else:
                logger.info("staging %s from %s", name, src)
            _copy_verified(src, raw_dir / name, expected[name], ARCHIVE_MD5.get(f"{name}.gz"))
        return targets

    hint = (
        f"Install the data with `apt-get install dataset-fashion-mnist` (files in "
        f"{DEBIAN_DIR}) or set {ENV_VAR} to a folder holding "
        f"{', '.join(f'{n}.gz' for n in RAW_FILES)}."
    )
    if not allow_download:
        raise DatasetUnavailableError(
            f"Fashion-MNIST is not staged under {str(raw_dir)!r}, no source folder exists "
            f"and downloading is disabled. {hint}"
        )
    try:
        _download(root, pending, expected)
    except ChecksumError:
        raise
    except Exception as exc:  # torchvision raises RuntimeError, URLError or OSError offline
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatasetUnavailableError(
            f"Fashion-MNIST is not staged under {str(raw_dir)!r}, no source folder exists, and "
            f"torchvision's download failed ({first_line}). {hint}"
        ) from exc
    return targets


def load_fashion_mnist(root: Path | str, *, train: bool) -> tuple[np.ndarray, np.ndarray]:
    """Read staged Fashion-MNIST with torchvision.

    Parameters
    ----------
    root : Path or str
        Root given to :func:`stage_fashion_mnist`.
    train : bool
        True for the 60,000 training images, False for the 10,000 test images.

    Returns
    -------
    images : numpy.ndarray
        ``(n, 28, 28)`` ``uint8``.
    labels : numpy.ndarray
        ``(n,)`` ``int64`` fine labels in ``[0, 10)``.

    Raises
    ------
    DatasetUnavailableError
        If the files are not staged under ``root``.
    """
    from torchvision.datasets import FashionMNIST

    try:
        ds = FashionMNIST(str(root), train=train, download=False)
    except RuntimeError as exc:
        raise DatasetUnavailableError(
            f"Fashion-MNIST is not staged under {str(raw_folder(root))!r}; run "
            f"tasks.stages.download.stage_dataset('fmnist', root) first."
        ) from exc
    return ds.data.numpy(), ds.targets.numpy().astype(np.int64)


def images_to_inputs(images: np.ndarray) -> np.ndarray:
    """``uint8`` images ``(n, 28, 28)`` to normalised ``float32`` model inputs ``(n, 1, 28, 28)``.

    Parameters
    ----------
    images : numpy.ndarray
        Grey-level images with values in ``[0, 255]``.

    Returns
    -------
    numpy.ndarray
        ``(images / 255 - PIXEL_MEAN) / PIXEL_STD`` with a channel axis.

    Raises
    ------
    ValueError
        If ``images`` is not 3-dimensional.
    """
    images = np.asarray(images)
    if images.ndim != 3:
        raise ValueError(f"images must have shape (n, height, width); got {images.shape}.")
    x = images.astype(np.float32) * np.float32(1.0 / 255.0)
    x -= np.float32(PIXEL_MEAN)
    x *= np.float32(1.0 / PIXEL_STD)
    return x[:, None, :, :]


def load_source_fmnist(root: Path | str) -> SourceSplits:
    """Class-imbalanced training subset and held-out validation set of ``fmnist``.

    Parameters
    ----------
    root : Path or str
        Staged dataset root.

    Returns
    -------
    SourceSplits
        20,000 training and 5,000 validation images (fewer, same proportions, when the staged
        files are smaller), class ``c`` in proportion ``1 + 2c/9``.
    """
    images, labels = load_fashion_mnist(root, train=True)
    n_train = imbalanced_counts(10, FMNIST_TRAIN_LARGEST)
    n_val = imbalanced_counts(10, FMNIST_VAL_LARGEST)
    plan = {c: (int(n_train[c]), int(n_val[c])) for c in range(10)}
    train_idx, val_idx = draw_source_split(labels, plan, SPLIT_SEED)
    return SourceSplits(images[train_idx], labels[train_idx], images[val_idx], labels[val_idx])


def load_source_coarse(root: Path | str) -> SourceSplits:
    """Class-imbalanced training subset and validation set of ``fmnist-coarse``.

    Parameters
    ----------
    root : Path or str
        Staged dataset root.

    Returns
    -------
    SourceSplits
        Images of the source sub-classes only, labelled with their coarse class; 12,000
        training and 3,000 validation images when the full files are staged.
    """
    images, fine = load_fashion_mnist(root, train=True)
    n_train = imbalanced_counts(3, COARSE_TRAIN_LARGEST)
    n_val = imbalanced_counts(3, COARSE_VAL_LARGEST)
    plan: dict[int, tuple[int, int]] = {}
    for coarse, subclasses in enumerate(COARSE_SOURCE_SUBCLASSES):
        k = len(subclasses)
        for sub in subclasses:
            plan[sub] = (int(n_train[coarse]) // k, int(n_val[coarse]) // k)
    train_idx, val_idx = draw_source_split(fine, plan, SPLIT_SEED)
    coarse_labels = FINE_TO_COARSE[fine]
    return SourceSplits(
        images[train_idx], coarse_labels[train_idx], images[val_idx], coarse_labels[val_idx]
    )


def load_target_pool_fmnist(root: Path | str) -> TargetPool:
    """The 10,000 test images of ``fmnist`` with their labels.

    Parameters
    ----------
    root : Path or str
        Staged dataset root.

    Returns
    -------
    TargetPool
        No sub-populations.
    """
    images, labels = load_fashion_mnist(root, train=False)
    return TargetPool(samples=images, labels=labels, n_classes=10)


def load_target_pool_coarse(root: Path | str) -> TargetPool:
    """The test images of ``fmnist-coarse``: coarse labels, fine classes as sub-populations.

    Parameters
    ----------
    root : Path or str
        Staged dataset root.

    Returns
    -------
    TargetPool
        ``subgroups`` = fine class; source and novel sub-classes as in the module docstring.
    """
    images, fine = load_fashion_mnist(root, train=False)
    return TargetPool(
        samples=images,
        labels=FINE_TO_COARSE[fine],
        n_classes=3,
        subgroups=fine,
        source_subgroups=tuple(sorted(s for group in COARSE_SOURCE_SUBCLASSES for s in group)),
        novel_subgroups=tuple(sorted(s for group in COARSE_NOVEL_SUBCLASSES for s in group)),
    )


#: Fine classes that form class 1 ("top") of ``fmnist-binary``.
BINARY_POSITIVE: Final[tuple[int, ...]] = (0, 2, 4, 6)
#: Class names of ``fmnist-binary``.
BINARY_CLASS_NAMES: Final[tuple[str, ...]] = ("not-top", "top")
_FINE_TO_BINARY: Final[np.ndarray] = np.isin(np.arange(10), BINARY_POSITIVE).astype(np.int64)


def load_source_binary(root: Path | str) -> SourceSplits:
    """``fmnist``'s source and validation images with binary labels (top vs not).

    Returns
    -------
    SourceSplits
        The images of :func:`load_source_fmnist`; labels ``1`` for :data:`BINARY_POSITIVE`.
    """
    src = load_source_fmnist(root)
    return SourceSplits(
        src.train_x, _FINE_TO_BINARY[src.train_y], src.val_x, _FINE_TO_BINARY[src.val_y]
    )


def load_target_pool_binary(root: Path | str) -> TargetPool:
    """The 10,000 test images with binary labels (top vs not).

    Returns
    -------
    TargetPool
        No sub-populations.
    """
    images, labels = load_fashion_mnist(root, train=False)
    return TargetPool(samples=images, labels=_FINE_TO_BINARY[labels], n_classes=2)


#: Registry position of this module's datasets (lower first).
ORDER: Final[int] = 0

#: The backbones of the Fashion-MNIST suite (the CIFAR/ImageNet-sized ones need larger images).
FMNIST_BACKBONES: Final[tuple[str, ...]] = ("mlp", "lenet", "resnet")

#: The Fashion-MNIST datasets (registry entries; :mod:`tasks.data.datasets` collects them).
SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name="fmnist",
        suite="fmnist",
        source_package="dataset-fashion-mnist (Debian)",
        licence="MIT (Fashion-MNIST, Zalando SE)",
        description=(
            "Fashion-MNIST, 10 classes; imbalanced 1:3 source, corruptions, label shift, "
            "MNIST-M style photo blend"
        ),
        modality="image",
        n_classes=10,
        class_names=CLASS_NAMES,
        input_shape=INPUT_SHAPE,
        target_families=("clean", "synthetic", "label_shift", "domain"),
        stage=stage_fashion_mnist,
        raw_files=raw_files,
        load_source=load_source_fmnist,
        load_target_pool=load_target_pool_fmnist,
        to_inputs=images_to_inputs,
        backbones=FMNIST_BACKBONES,
        paper_row="MNIST-M (synthetic), as an offline stand-in",
    ),
    DatasetSpec(
        name="fmnist-coarse",
        suite="fmnist",
        source_package="dataset-fashion-mnist (Debian)",
        licence="MIT (Fashion-MNIST, Zalando SE)",
        description=(
            "Fashion-MNIST remapped to 3 coarse classes (tops / footwear / other); "
            "novel sub-classes in the targets (BREEDS style)"
        ),
        modality="image",
        n_classes=3,
        class_names=COARSE_CLASS_NAMES,
        input_shape=INPUT_SHAPE,
        target_families=("clean", "subpopulation"),
        stage=stage_fashion_mnist,
        raw_files=raw_files,
        load_source=load_source_coarse,
        load_target_pool=load_target_pool_coarse,
        to_inputs=images_to_inputs,
        backbones=FMNIST_BACKBONES,
        paper_row="sub-population shift (BREEDS style), as an offline stand-in",
    ),
    DatasetSpec(
        name="fmnist-binary",
        suite="fmnist",
        source_package="dataset-fashion-mnist (Debian)",
        licence="MIT (Fashion-MNIST, Zalando SE)",
        description=(
            "Fashion-MNIST as a binary task: upper-body garments vs the rest; the fmnist "
            "images and shifts"
        ),
        modality="image",
        n_classes=2,
        class_names=BINARY_CLASS_NAMES,
        input_shape=INPUT_SHAPE,
        target_families=("clean", "synthetic", "label_shift", "domain"),
        stage=stage_fashion_mnist,
        raw_files=raw_files,
        load_source=load_source_binary,
        load_target_pool=load_target_pool_binary,
        to_inputs=images_to_inputs,
        backbones=FMNIST_BACKBONES,
    ),
)
