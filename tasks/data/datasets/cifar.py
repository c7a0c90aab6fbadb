"""CIFAR-10 and CIFAR-100 with their natural and corrupted test sets: the ALSA paper's CIFAR rows.

Data
----
Under the data root (``$ALSA_BENCH_HOME/data``):

``cifar-10-batches-py/`` (CIFAR-10, Krizhevsky 2009)
    ``data_batch_1`` ... ``data_batch_5``: the source (training and validation subsets);
    ``test_batch``: the ``clean`` target (pool sub-population 0); ``batches.meta``.
``CIFAR-10.1/`` (v6, Recht et al. 2018)
    ``cifar10.1_v6_data.npy``, ``cifar10.1_v6_labels.npy``: ``natural`` split ``cifar10.1``
    (sub-population 1).
``CIFAR-10.2/`` (Lu et al. 2020)
    ``cifar102_test.npz`` with arrays ``images`` and ``labels``: ``natural`` split ``cifar10.2``
    (sub-population 2).
``CIFAR-10-C/``, ``CIFAR-100-C/`` (Hendrycks & Dietterich 2019)
    ``<corruption>.npy`` and ``labels.npy``: ``synthetic`` splits ``<corruption>-<severity>``.
``cifar-100-python/`` (CIFAR-100)
    ``train``: the source; ``test``: the ``clean`` target; ``meta``.

``alsa-bench fetch cifar10`` / ``cifar100`` download the official archives (:data:`SOURCES_CIFAR10`,
:data:`SOURCES_CIFAR100`, each pinned to its published checksum) into the data root; nothing is
downloaded at run time.

Reading the python pickles safely
---------------------------------
The CIFAR batches are Python 2 pickles of dicts (``b"data"``: a ``uint8`` array ``(n, 3072)``,
each row the red, green and blue 32x32 planes in row-major order; ``b"labels"`` or
``b"fine_labels"``: a list of ints). They are read by :class:`RestrictedUnpickler`, whose
``find_class`` returns exactly numpy's array reconstructor, :class:`numpy.ndarray` and
:class:`numpy.dtype` (under their ``numpy.core`` and ``numpy._core`` spellings) and refuses every
other global, so a tampered file cannot run code. Every ``.npy``/``.npz`` file is opened with
``allow_pickle=False``. Shapes, dtypes and label ranges are checked on the way in; a file that is
not the release's format is refused with one line naming it.

Protocol (paper App. H.2)
-------------------------
Source: the class-imbalanced subset 1:3 of the 50,000 training images
(:func:`~tasks.data.spec.imbalanced_counts`, :func:`~tasks.data.spec.draw_source_split`,
seed :data:`SPLIT_SEED`): CIFAR-10 1,333 (class 0) to 4,000 (class 9) training images per class
(26,667 in all) and 333 to 1,000 validation images per class (6,667) from the remaining training
images; CIFAR-100 133 to 400 and 33 to 100 per class. The validation set is thus an
in-distribution sample of the same imbalanced source. Targets: ``clean`` = the 10,000 test
images exactly (the pool's sub-population 0, its only ``source_subgroups``); ``natural`` = each
re-collected test set whole; ``synthetic`` = the 19 corruptions of the CIFAR-C release (the 15
standard ones and the 4 extra ones) at severities 1-5, each split one block of 10,000 rows of the
corruption's array. Images are kept as ``uint8`` ``(n, 32, 32, 3)``; :func:`cifar10_inputs` /
:func:`cifar100_inputs` normalise them per channel for the model, batch by batch. No data
augmentation (the paper names none).

Recipe
------
ResNet18 (torchvision, from scratch): SGD with momentum 0.9, learning rate 0.1 multiplied by 0.1
every 100 epochs, weight decay 5e-4, batch size 200, early stopping after 10 epochs without a
better validation accuracy (the best epoch's weights are kept), at most :data:`MAX_EPOCHS`.

The COT paper's backbones (``resnet18-ft``, ``resnet50``, ``vgg11``:
:mod:`tasks.models.backbones.finetuned`) start from their ImageNet weights (fetched with the
dataset: :mod:`tasks.data.finetune_weights`) and see the images upsampled to 224 with ImageNet's
channel statistics (:data:`BACKBONE_INPUTS`, on the GPU when there is one), with their own recipe
(SGD, lr 1e-3, batch 64, 20 epochs). They train on the same imbalanced source as ResNet18: the
COT authors' own split (a random 40,000 / 10,000 of the balanced training images) is not the ALSA
protocol this dataset implements.

Cost
----
The CIFAR-C arrays (19 x 150 MB per dataset) are opened as read-only memory maps when the target
pool is loaded and only the block of a split is read when that split is generated. Their bytes
are checked once, by the fetch (SHA-256/MD5 of the ``.tar``); :func:`raw_files_cifar10` lists
the files later stages hash to check the data did not change: the pickled batches, the
CIFAR-10.1/10.2 files and ``labels.npy`` (CIFAR-10: about 190 MB, under a second to hash), not
the corruption arrays (2.9 GB), whose presence :func:`stage_cifar10` checks.
"""

from __future__ import annotations

import pickle
import zipfile
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import numpy as np

from tasks.data.families import ShiftFamily, TargetSplitSpec

from tasks.data.datasets._online import require_files
from tasks.data.datasets._upsample import upsampling_inputs
from tasks.data.finetune_weights import FINETUNE_WEIGHTS
from tasks.data.finetune_weights import remote_files as weight_files
from tasks.data.spec import (
    DatasetSpec,
    RemoteFile,
    SourceSplits,
    TargetPool,
    draw_source_split,
    imbalanced_counts,
)

__all__ = [
    "BACKBONE_INPUTS",
    "CIFAR10_C_DIR",
    "CIFAR100_C_DIR",
    "CORRUPTIONS",
    "RestrictedUnpickler",
    "SEVERITIES",
    "SPECS",
    "cifar10_inputs",
    "cifar100_inputs",
    "check_meta",
    "decode_rows",
    "load_pickle",
    "load_source_cifar10",
    "load_source_cifar100",
    "load_target_pool_cifar10",
    "load_target_pool_cifar100",
    "open_corrupted",
    "raw_files_cifar10",
    "raw_files_cifar100",
    "read_batch",
    "stage_cifar10",
    "stage_cifar100",
]

#: Folders of the releases under the data root.
CIFAR10_DIR: Final[str] = "cifar-10-batches-py"
CIFAR100_DIR: Final[str] = "cifar-100-python"
CIFAR10_1_DIR: Final[str] = "CIFAR-10.1"
CIFAR10_2_DIR: Final[str] = "CIFAR-10.2"
CIFAR10_C_DIR: Final[str] = "CIFAR-10-C"
CIFAR100_C_DIR: Final[str] = "CIFAR-100-C"

CIFAR10_TRAIN_FILES: Final[tuple[str, ...]] = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_1_FILES: Final[tuple[str, str]] = ("cifar10.1_v6_data.npy", "cifar10.1_v6_labels.npy")
CIFAR10_2_FILE: Final[str] = "cifar102_test.npz"

#: The 19 corruptions of CIFAR-10-C / CIFAR-100-C: the 15 standard ones, then the 4 extra ones.
CORRUPTIONS: Final[tuple[str, ...]] = (
    "gaussian_noise", "shot_noise", "impulse_noise",
    "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness",
    "contrast", "elastic_transform", "pixelate", "jpeg_compression",
    "speckle_noise", "gaussian_blur", "spatter", "saturate",
)  # fmt: skip
#: Severities of the CIFAR-C release, stacked in that order in every corruption array.
SEVERITIES: Final[tuple[int, ...]] = (1, 2, 3, 4, 5)

#: Seed of the source training/validation draw.
SPLIT_SEED: Final[int] = 0
#: Training and validation count of the largest class (CIFAR-10: 5,000 training images each).
CIFAR10_TRAIN_LARGEST: Final[int] = 4000
CIFAR10_VAL_LARGEST: Final[int] = 1000
#: The same for CIFAR-100 (500 training images per class).
CIFAR100_TRAIN_LARGEST: Final[int] = 400
CIFAR100_VAL_LARGEST: Final[int] = 100
#: Cap on ResNet18 epochs; early stopping ends training long before in practice.
MAX_EPOCHS: Final[int] = 200

#: Per-channel mean and standard deviation of the training images, pixel values in [0, 1].
CIFAR10_MEAN: Final[tuple[float, float, float]] = (0.4914, 0.4822, 0.4465)
CIFAR10_STD: Final[tuple[float, float, float]] = (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN: Final[tuple[float, float, float]] = (0.5071, 0.4865, 0.4409)
CIFAR100_STD: Final[tuple[float, float, float]] = (0.2673, 0.2564, 0.2762)

INPUT_SHAPE: Final[tuple[int, int, int]] = (3, 32, 32)
_SIDE: Final[int] = 32
_ROW: Final[int] = 3 * _SIDE * _SIDE

CIFAR10_CLASSES: Final[tuple[str, ...]] = (
    "airplane", "automobile", "bird", "cat", "deer",
    "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip

#: CIFAR-100 fine class names, in label order (the release's ``meta`` file: alphabetical).
CIFAR100_CLASSES: Final[tuple[str, ...]] = (
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle",
    "bottle", "bowl", "boy", "bridge", "bus", "butterfly", "camel", "can", "castle",
    "caterpillar", "cattle", "chair", "chimpanzee", "clock", "cloud", "cockroach", "couch",
    "crab", "crocodile", "cup", "dinosaur", "dolphin", "elephant", "flatfish", "forest", "fox",
    "girl", "hamster", "house", "kangaroo", "keyboard", "lamp", "lawn_mower", "leopard", "lion",
    "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain", "mouse", "mushroom",
    "oak_tree", "orange", "orchid", "otter", "palm_tree", "pear", "pickup_truck", "pine_tree",
    "plain", "plate", "poppy", "porcupine", "possum", "rabbit", "raccoon", "ray", "road",
    "rocket", "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake",
    "spider", "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank", "telephone",
    "television", "tiger", "tractor", "train", "trout", "tulip", "turtle", "wardrobe", "whale",
    "willow_tree", "wolf", "woman", "worm",
)  # fmt: skip

#: The paper's recipe for ResNet18 on CIFAR (App. H.2).
RESNET18_RECIPE: Final[Mapping[str, Any]] = {
    "optimizer": "sgd-step",
    "lr": 0.1,
    "batch_size": 200,
    "weight_decay": 5e-4,
    "epochs": MAX_EPOCHS,
    "patience": 10,
}

# Published checksums. torchvision.datasets.CIFAR10/CIFAR100 (url, tgz_md5); the archive size of
# CIFAR-10 as given with that MD5 (170,498,071 bytes). CIFAR-10.1: TensorFlow Datasets
# url_checksums/cifar10_1.txt (size, SHA-256). CIFAR-10.2: no checksum is published by the
# release; the SHA-256 and size are those recorded for the file at the official repository's
# commit 521467a52ad494b78ff9c70051099c0d9ba74d40 (git blob
# 7a3829681be56af70ea80ec99cf3822e2f5edff3) in public reproduction code, and the URL is pinned
# to that commit. CIFAR-10-C / CIFAR-100-C: MD5 as listed on the Zenodo records 2535967 /
# 3555552, SHA-256 and size from TensorFlow Datasets url_checksums/cifar10_corrupted.txt and
# cifar100_corrupted.txt. No size is pinned for cifar-100-python.tar.gz (none found published).
_CIFAR10_1_URL = "https://github.com/modestyachts/CIFAR-10.1/raw/master/datasets/"
_CIFAR10_2_URL = (
    "https://github.com/modestyachts/cifar-10.2/raw/521467a52ad494b78ff9c70051099c0d9ba74d40/"
)
CIFAR10_ARCHIVE: Final[RemoteFile] = RemoteFile(
    url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    filename="cifar-10-python.tar.gz",
    md5="c58f30108f718f92721af3b95e74349a",
    size=170_498_071,
)
CIFAR100_ARCHIVE: Final[RemoteFile] = RemoteFile(
    url="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
    filename="cifar-100-python.tar.gz",
    md5="eb9058c3a382ffc7106e4002c42a8d85",
)
SOURCES_CIFAR10: Final[tuple[RemoteFile, ...]] = (
    CIFAR10_ARCHIVE,
    RemoteFile(
        url=_CIFAR10_1_URL + CIFAR10_1_FILES[0],
        filename=CIFAR10_1_FILES[0],
        sha256="2997188e5816f5bd545dc77771b6227828c28146049fcecf3fa10775474cacc6",
        size=6_144_128,
        extract=False,
        dest=CIFAR10_1_DIR,
    ),
    RemoteFile(
        url=_CIFAR10_1_URL + CIFAR10_1_FILES[1],
        filename=CIFAR10_1_FILES[1],
        sha256="ae40beda001693674edc94d925ee8268cfe68905f8f9aff800c8dcdfcd6c9448",
        size=8_128,
        extract=False,
        dest=CIFAR10_1_DIR,
    ),
    RemoteFile(
        url=_CIFAR10_2_URL + CIFAR10_2_FILE,
        filename=CIFAR10_2_FILE,
        sha256="e4fd6462bd5141ed293acd52ea570952f65d1bfd4ec9b068f87742f75a7a632e",
        size=6_393_664,
        extract=False,
        dest=CIFAR10_2_DIR,
    ),
    RemoteFile(
        url="https://zenodo.org/records/2535967/files/CIFAR-10-C.tar",
        filename="CIFAR-10-C.tar",
        md5="56bf5dcef84df0e2308c6dcbcbbd8499",
        sha256="c72763e101c723b7c507b96205f7e938912a5d587376173b825850cf3cb876a7",
        size=2_918_471_680,
    ),
    *weight_files(),
)
SOURCES_CIFAR100: Final[tuple[RemoteFile, ...]] = (
    CIFAR100_ARCHIVE,
    RemoteFile(
        url="https://zenodo.org/records/3555552/files/CIFAR-100-C.tar",
        filename="CIFAR-100-C.tar",
        md5="11f0ed0f1191edbf9fa23466ae6021d3",
        sha256="30ee6543a1bfd049fa33834b7c1ada301e7064b7fbe8fc38340eb8b62ced4b33",
        size=2_918_473_216,
    ),
    *weight_files(),
)


# --------------------------------------------------------------------------- safe reading


def _array_reconstructor() -> Any:
    """numpy's ``_reconstruct``, taken from how an array pickles (whatever the module path)."""
    return np.zeros(1).__reduce__()[0]


#: The only globals a CIFAR pickle may name, by (module, name).
_ALLOWED_GLOBALS: Final[dict[tuple[str, str], Any]] = {
    **{(f"{m}.multiarray", "_reconstruct"): _array_reconstructor()
       for m in ("numpy.core", "numpy._core")},
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}  # fmt: skip


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that builds numpy arrays, dicts, lists, bytes and numbers, and nothing else.

    ``find_class`` is the only way a pickle reaches code; here it returns numpy's array
    reconstructor, :class:`numpy.ndarray` or :class:`numpy.dtype` and raises
    :class:`pickle.UnpicklingError` for every other global (``os.system``, ``builtins.eval``,
    ``subprocess.Popen``...) before anything is called.
    """

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"refusing global {module}.{name}: a CIFAR batch holds only numpy arrays, "
                f"lists, bytes and numbers"
            ) from None


def load_pickle(path: Path | str) -> Any:
    """Read one CIFAR python batch with :class:`RestrictedUnpickler` (``encoding="bytes"``).

    Parameters
    ----------
    path : Path or str
        A batch file of ``cifar-10-batches-py`` or ``cifar-100-python``.

    Returns
    -------
    object
        The unpickled object (a dict with ``bytes`` keys for the release's files).

    Raises
    ------
    ValueError
        One line naming the file if it cannot be unpickled or names a forbidden global.
    """
    try:
        with open(path, "rb") as handle:
            return RestrictedUnpickler(handle, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, KeyError,
            IndexError) as exc:
        raise ValueError(
            f"cannot read CIFAR batch {str(path)!r}: {exc}. It is not a file of the official "
            f"release; delete it and fetch the dataset again."
        ) from None


def decode_rows(data: np.ndarray) -> np.ndarray:
    """CIFAR rows ``(n, 3072)`` (red, green, blue 32x32 planes, row-major) to images.

    Parameters
    ----------
    data : numpy.ndarray
        ``uint8`` array ``(n, 3072)``.

    Returns
    -------
    numpy.ndarray
        ``uint8`` ``(n, 32, 32, 3)``, C-contiguous:
        ``out[i, y, x, c] = data[i, c*1024 + y*32 + x]``.
    """
    n = data.shape[0]
    return np.ascontiguousarray(data.reshape(n, 3, _SIDE, _SIDE).transpose(0, 2, 3, 1))


def _labels(values: Any, n: int, n_classes: int, what: str) -> np.ndarray:
    """Check labels: ``n`` integers in ``[0, n_classes)``; return them as ``int64``."""
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.shape[0] != n or not (
        arr.size == 0 or np.issubdtype(arr.dtype, np.integer)
    ):
        raise ValueError(
            f"{what} must hold {n} integer labels; got shape {arr.shape}, dtype {arr.dtype}."
        )
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= n_classes):
        raise ValueError(
            f"{what} must hold labels in [0, {n_classes}); got values from {int(arr.min())} "
            f"to {int(arr.max())}."
        )
    return arr.astype(np.int64)


def _images(arr: Any, what: str, n: int | None = None) -> np.ndarray:
    """Check an image array: ``uint8`` ``(n, 32, 32, 3)``."""
    a = arr if isinstance(arr, np.ndarray) else np.asarray(arr)  # keeps a memory map a map
    if a.dtype != np.uint8 or a.ndim != 4 or a.shape[1:] != (_SIDE, _SIDE, 3) or (
        n is not None and a.shape[0] != n
    ):
        want = f"({n if n is not None else 'n'}, 32, 32, 3)"
        raise ValueError(
            f"{what} must be uint8 images of shape {want}; got dtype {a.dtype}, shape {a.shape}."
        )
    return a


def read_batch(path: Path | str, label_key: bytes, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Images and labels of one CIFAR python batch.

    Parameters
    ----------
    path : Path or str
        Batch file.
    label_key : bytes
        ``b"labels"`` (CIFAR-10) or ``b"fine_labels"`` (CIFAR-100).
    n_classes : int
        Labels must lie in ``[0, n_classes)``.

    Returns
    -------
    images : numpy.ndarray
        ``uint8`` ``(n, 32, 32, 3)``.
    labels : numpy.ndarray
        ``int64`` ``(n,)``.

    Raises
    ------
    ValueError
        One line naming the file if it is not a batch of the release's format.
    """
    batch = load_pickle(path)
    where = f"CIFAR batch {str(path)!r}"
    if not isinstance(batch, dict) or b"data" not in batch or label_key not in batch:
        keys = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
        raise ValueError(
            f"{where} must be a dict with keys b'data' and {label_key!r}; got {keys}."
        )
    data = batch[b"data"]
    if (not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2
            or data.shape[1] != _ROW):
        shape = getattr(data, "shape", None)
        raise ValueError(
            f"{where}: b'data' must be a uint8 array (n, {_ROW}); got "
            f"{type(data).__name__} {getattr(data, 'dtype', '')} {shape}."
        )
    labels = _labels(batch[label_key], data.shape[0], n_classes, f"{where} {label_key!r}")
    return decode_rows(data), labels


def _load_npy(path: Path, **kwargs: Any) -> np.ndarray:
    """``np.load`` with ``allow_pickle=False``; a refused or broken file is one line."""
    try:
        return np.load(path, allow_pickle=False, **kwargs)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(
            f"cannot read {str(path)!r} as a plain numpy array: {exc}. It is not a file of the "
            f"official release; delete it and fetch the dataset again."
        ) from None


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, read with ``allow_pickle=False``."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(
            f"cannot read {str(path)!r} as a plain numpy archive: {exc}. It is not a file of "
            f"the official release; delete it and fetch the dataset again."
        ) from None


# --------------------------------------------------------------------------- files


def _c_files(folder: str) -> list[str]:
    return [f"{folder}/{name}.npy" for name in CORRUPTIONS]


def raw_files_cifar10(root: Path | str) -> list[Path]:
    """Files of ``cifar10`` that later stages hash (no IO); see the module's Cost section.

    The pickled batches, the CIFAR-10.1 and CIFAR-10.2 files and CIFAR-10-C's ``labels.npy``;
    not the 19 corruption arrays.
    """
    base = Path(root)
    names = [f"{CIFAR10_DIR}/{n}" for n in (*CIFAR10_TRAIN_FILES, "test_batch", "batches.meta")]
    names += [f"{CIFAR10_1_DIR}/{n}" for n in CIFAR10_1_FILES]
    names += [f"{CIFAR10_2_DIR}/{CIFAR10_2_FILE}", f"{CIFAR10_C_DIR}/labels.npy"]
    return [base / n for n in names]


def raw_files_cifar100(root: Path | str) -> list[Path]:
    """Files of ``cifar100`` that later stages hash (no IO): the pickles and ``labels.npy``."""
    base = Path(root)
    names = [f"{CIFAR100_DIR}/{n}" for n in ("train", "test", "meta")]
    return [base / n for n in (*names, f"{CIFAR100_C_DIR}/labels.npy")]


def stage_cifar10(root: Path | str) -> list[Path]:
    """Check that every file ``cifar10`` reads is under ``root``; download nothing.

    Returns
    -------
    list of Path
        :func:`raw_files_cifar10`.

    Raises
    ------
    DatasetUnavailableError
        One line: the first missing file, the data root and ``alsa-bench fetch cifar10``.
    """
    files = raw_files_cifar10(root)
    require_files("cifar10", root, [*files, *_c_files(CIFAR10_C_DIR)])
    return files


def stage_cifar100(root: Path | str) -> list[Path]:
    """Check that every file ``cifar100`` reads is under ``root``; download nothing.

    Returns
    -------
    list of Path
        :func:`raw_files_cifar100`.

    Raises
    ------
    DatasetUnavailableError
        One line: the first missing file, the data root and ``alsa-bench fetch cifar100``.
    """
    files = raw_files_cifar100(root)
    require_files("cifar100", root, [*files, *_c_files(CIFAR100_C_DIR)])
    return files


# --------------------------------------------------------------------------- loaders


def check_meta(path: Path | str, key: bytes, expected: tuple[str, ...]) -> None:
    """Check that a release's ``meta`` file names the classes in :data:`CIFAR10_CLASSES` /
    :data:`CIFAR100_CLASSES` order (the label order the loaders assume).

    Raises
    ------
    ValueError
        One line naming the file if it lists other class names.
    """
    meta = load_pickle(path)
    names = meta.get(key) if isinstance(meta, dict) else None
    got = [n.decode("latin-1") if isinstance(n, bytes) else n for n in names or ()]
    if got != list(expected):
        raise ValueError(
            f"{str(path)!r} must list the {len(expected)} class names under {key!r} in the "
            f"release's order ({', '.join(expected[:3])}, ...); got {got[:3]}"
            f"{' ...' if len(got) > 3 else ''} ({len(got)} names)."
        )


def _read_train(dataset: str, root: Path) -> tuple[np.ndarray, np.ndarray]:
    if dataset == "cifar10":
        (meta,) = require_files(dataset, root, [f"{CIFAR10_DIR}/batches.meta"])
        check_meta(meta, b"label_names", CIFAR10_CLASSES)
        paths = require_files(dataset, root, [f"{CIFAR10_DIR}/{n}" for n in CIFAR10_TRAIN_FILES])
        parts = [read_batch(p, b"labels", 10) for p in paths]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    path, meta = require_files(dataset, root, [f"{CIFAR100_DIR}/train", f"{CIFAR100_DIR}/meta"])
    check_meta(meta, b"fine_label_names", CIFAR100_CLASSES)
    return read_batch(path, b"fine_labels", 100)


def _read_test(dataset: str, root: Path) -> tuple[np.ndarray, np.ndarray]:
    if dataset == "cifar10":
        (path,) = require_files(dataset, root, [f"{CIFAR10_DIR}/test_batch"])
        return read_batch(path, b"labels", 10)
    (path,) = require_files(dataset, root, [f"{CIFAR100_DIR}/test"])
    return read_batch(path, b"fine_labels", 100)


def _source(dataset: str, root: Path | str, n_classes: int, train_largest: int,
            val_largest: int) -> SourceSplits:
    images, labels = _read_train(dataset, Path(root))
    n_train = imbalanced_counts(n_classes, train_largest)
    n_val = imbalanced_counts(n_classes, val_largest)
    plan = {c: (int(n_train[c]), int(n_val[c])) for c in range(n_classes)}
    train_idx, val_idx = draw_source_split(labels, plan, SPLIT_SEED)
    return SourceSplits(images[train_idx], labels[train_idx], images[val_idx], labels[val_idx])


def load_source_cifar10(root: Path | str) -> SourceSplits:
    """Class-imbalanced (1:3) training subset and validation set from the 50,000 training images.

    Returns
    -------
    SourceSplits
        ``uint8`` images ``(n, 32, 32, 3)``; 26,667 training and 6,667 validation images with
        the full release (see the module docstring).
    """
    return _source("cifar10", root, 10, CIFAR10_TRAIN_LARGEST, CIFAR10_VAL_LARGEST)


def load_source_cifar100(root: Path | str) -> SourceSplits:
    """Class-imbalanced (1:3) training subset and validation set of CIFAR-100 (fine labels).

    Returns
    -------
    SourceSplits
        ``uint8`` images ``(n, 32, 32, 3)``.
    """
    return _source("cifar100", root, 100, CIFAR100_TRAIN_LARGEST, CIFAR100_VAL_LARGEST)


def open_corrupted(dataset: str, root: Path | str, folder: str, n_classes: int) -> dict[str, Any]:
    """Open a CIFAR-C release as read-only memory maps, checking only the array headers.

    Parameters
    ----------
    dataset : str
        Dataset key (for the fetch hint).
    root : Path or str
        Data root.
    folder : str
        :data:`CIFAR10_C_DIR` or :data:`CIFAR100_C_DIR`.
    n_classes : int
        Labels must lie in ``[0, n_classes)``.

    Returns
    -------
    dict of str to numpy.ndarray
        ``"labels"`` (``int64``, ``5k`` rows, read) and one ``uint8`` memory map
        ``(5k, 32, 32, 3)`` per corruption of :data:`CORRUPTIONS` (nothing read).

    Raises
    ------
    DatasetUnavailableError
        If a file is missing.
    ValueError
        If a file is not a plain array of the release's shape and dtype.
    """
    paths = require_files(dataset, root, [f"{folder}/labels.npy", *_c_files(folder)])
    raw = _load_npy(paths[0])
    if raw.ndim != 1 or raw.shape[0] == 0 or raw.shape[0] % len(SEVERITIES):
        raise ValueError(
            f"{str(paths[0])!r} must hold one label per row of the {len(SEVERITIES)} severity "
            f"blocks (a positive multiple of {len(SEVERITIES)}); got shape {raw.shape}."
        )
    rows = int(raw.shape[0])
    out: dict[str, Any] = {"labels": _labels(raw, rows, n_classes, repr(str(paths[0])))}
    for name, path in zip(CORRUPTIONS, paths[1:], strict=True):
        out[name] = _images(_load_npy(path, mmap_mode="r"), repr(str(path)), rows)
    return out


def load_target_pool_cifar10(root: Path | str) -> TargetPool:
    """Test images (sub-population 0), CIFAR-10.1 (1), CIFAR-10.2 (2); CIFAR-10-C as extras.

    Returns
    -------
    TargetPool
        ``source_subgroups=(0,)``, so ``clean`` is exactly the 10,000 test images;
        ``extras`` holds CIFAR-10-C (:func:`open_corrupted`).
    """
    base = Path(root)
    test_x, test_y = _read_test("cifar10", base)
    data_path, label_path, npz_path = require_files(
        "cifar10", base,
        [*(f"{CIFAR10_1_DIR}/{n}" for n in CIFAR10_1_FILES), f"{CIFAR10_2_DIR}/{CIFAR10_2_FILE}"],
    )
    v1_x = _images(_load_npy(data_path), repr(str(data_path)))
    v1_y = _labels(_load_npy(label_path), v1_x.shape[0], 10, repr(str(label_path)))
    archive = _load_npz(npz_path)
    if "images" not in archive or "labels" not in archive:
        raise ValueError(
            f"{str(npz_path)!r} must hold arrays 'images' and 'labels'; got {sorted(archive)}."
        )
    v2_x = _images(archive["images"], f"{str(npz_path)!r} 'images'")
    v2_y = _labels(archive["labels"], v2_x.shape[0], 10, f"{str(npz_path)!r} 'labels'")
    parts = ((test_x, test_y), (v1_x, v1_y), (v2_x, v2_y))
    return TargetPool(
        samples=np.concatenate([x for x, _ in parts]),
        labels=np.concatenate([y for _, y in parts]),
        n_classes=10,
        subgroups=np.concatenate(
            [np.full(y.shape[0], g, dtype=np.int64) for g, (_, y) in enumerate(parts)]
        ),
        source_subgroups=(0,),
        extras=open_corrupted("cifar10", base, CIFAR10_C_DIR, 10),
    )


def load_target_pool_cifar100(root: Path | str) -> TargetPool:
    """The 10,000 CIFAR-100 test images; CIFAR-100-C as extras.

    Returns
    -------
    TargetPool
        No sub-populations (``clean`` is the whole test set); ``extras`` holds CIFAR-100-C.
    """
    base = Path(root)
    test_x, test_y = _read_test("cifar100", base)
    return TargetPool(
        samples=test_x,
        labels=test_y,
        n_classes=100,
        extras=open_corrupted("cifar100", base, CIFAR100_C_DIR, 100),
    )


def _normalise(images: np.ndarray, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != (_SIDE, _SIDE, 3):
        raise ValueError(
            f"images must be uint8 of shape (n, 32, 32, 3); got dtype {images.dtype}, "
            f"shape {images.shape}."
        )
    x = images.transpose(0, 3, 1, 2).astype(np.float32) * np.float32(1.0 / 255.0)
    x -= np.asarray(mean, dtype=np.float32)[None, :, None, None]
    x /= np.asarray(std, dtype=np.float32)[None, :, None, None]
    return np.ascontiguousarray(x)


def _normalise_on_device(images: Any, mean: tuple[float, ...], std: tuple[float, ...]) -> Any:
    """:func:`_normalise` in torch, for ``uint8`` ``(n, 32, 32, 3)`` rows already on a device.

    The same float32 operations in the same order (``x * float32(1/255)``, ``- mean``,
    ``/ std``, each IEEE-rounded on CPU and CUDA alike), so the result equals :func:`_normalise`'s
    bit for bit; the image adapter uses it on CUDA to send ``uint8`` rows instead of float32
    inputs. Returns a ``float32`` ``(n, 3, 32, 32)`` tensor on the input's device (a
    channels-first view; the caller picks the memory format).
    """
    import torch  # the dataset registry imports this module and must not import torch

    if images.dtype != torch.uint8 or images.ndim != 4 or tuple(images.shape[1:]) != (
            _SIDE, _SIDE, 3):
        raise ValueError(
            f"images must be a uint8 tensor of shape (n, 32, 32, 3); got dtype {images.dtype}, "
            f"shape {tuple(images.shape)}."
        )
    dev = images.device
    x = images.permute(0, 3, 1, 2).to(torch.float32)
    x = x * torch.tensor(1.0 / 255.0, dtype=torch.float32, device=dev)
    x -= torch.tensor(mean, dtype=torch.float32, device=dev)[None, :, None, None]
    x /= torch.tensor(std, dtype=torch.float32, device=dev)[None, :, None, None]
    return x


def cifar10_inputs(images: np.ndarray) -> np.ndarray:
    """``uint8`` images ``(n, 32, 32, 3)`` to ``float32`` inputs ``(n, 3, 32, 32)``.

    ``x[:, c] = (images[..., c] / 255 - CIFAR10_MEAN[c]) / CIFAR10_STD[c]``.

    Raises
    ------
    ValueError
        If ``images`` is not ``uint8`` ``(n, 32, 32, 3)``.
    """
    return _normalise(images, CIFAR10_MEAN, CIFAR10_STD)


def cifar100_inputs(images: np.ndarray) -> np.ndarray:
    """As :func:`cifar10_inputs`, with CIFAR-100's channel means and standard deviations."""
    return _normalise(images, CIFAR100_MEAN, CIFAR100_STD)


# The torch twins the image adapter converts CUDA batches with (``to_inputs.on_device``).
cifar10_inputs.on_device = partial(  # type: ignore[attr-defined]
    _normalise_on_device, mean=CIFAR10_MEAN, std=CIFAR10_STD)
cifar100_inputs.on_device = partial(  # type: ignore[attr-defined]
    _normalise_on_device, mean=CIFAR100_MEAN, std=CIFAR100_STD)


#: The COT paper's backbones see the images upsampled to 224 with ImageNet's channel statistics
#: (:func:`tasks.data.datasets._upsample.upsampling_inputs`; its torch twin runs on CUDA).
BACKBONE_INPUTS: Final[Mapping[str, Any]] = MappingProxyType(
    dict.fromkeys(FINETUNE_WEIGHTS, upsampling_inputs(_SIDE)))


# --------------------------------------------------------------------------- CIFAR-C family


def _c_splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(f"{name}-{sev}", "synthetic", name, sev, (("severity", float(sev)),))
        for name in CORRUPTIONS
        for sev in SEVERITIES
    ]


def _c_generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Block ``severity`` of the corruption's array: rows ``[(s-1) k, s k)``, read now."""
    labels = pool.extras.get("labels")
    images = pool.extras.get(split.shift)
    if labels is None or images is None:
        raise ValueError(
            f"split {split.name!r} of dataset {dataset!r} needs the CIFAR-C arrays "
            f"'{split.shift}' and 'labels' in the target pool's extras; it has "
            f"{sorted(pool.extras)}."
        )
    sev = int(split.severity or 0)
    if sev not in SEVERITIES:
        raise ValueError(f"split {split.name!r}: severity must be one of {SEVERITIES}; got {sev}.")
    block = int(np.asarray(labels).shape[0]) // len(SEVERITIES)
    rows = slice((sev - 1) * block, sev * block)
    return np.array(images[rows], dtype=np.uint8), np.asarray(labels[rows], dtype=np.int64)


#: CIFAR-10-C / CIFAR-100-C read from the release (19 corruptions x 5 severities).
CIFAR_C_FAMILY: Final[ShiftFamily] = ShiftFamily(
    "synthetic", 1, ("image",), _c_splits, _c_generate, cache=False
)

#: Registry position of this module's datasets (lower first).
ORDER: Final[int] = 250

#: The CIFAR datasets (registry entries; :mod:`tasks.data.datasets` collects them).
SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name="cifar10",
        suite="cifar10",
        description=(
            "CIFAR-10, imbalanced 1:3 source; targets CIFAR-10.1 v6, CIFAR-10.2, CIFAR-10-C "
            "(19 corruptions x 5 severities)"
        ),
        modality="image",
        n_classes=10,
        class_names=CIFAR10_CLASSES,
        input_shape=INPUT_SHAPE,
        target_families=("clean", "synthetic", "natural"),
        stage=stage_cifar10,
        raw_files=raw_files_cifar10,
        load_source=load_source_cifar10,
        load_target_pool=load_target_pool_cifar10,
        to_inputs=cifar10_inputs,
        online=True,
        paper_row="CIFAR10 (Table 1: CIFAR-10.1, CIFAR-10.2, CIFAR-10C)",
        backbones=("resnet18", *FINETUNE_WEIGHTS),
        sources=SOURCES_CIFAR10,
        recipes={"resnet18": RESNET18_RECIPE},
        backbone_inputs=BACKBONE_INPUTS,
        natural_targets=(("cifar10.1", "cifar10.1-v6", 1), ("cifar10.2", "cifar10.2", 2)),
        own_families=(CIFAR_C_FAMILY,),
    ),
    DatasetSpec(
        name="cifar100",
        suite="cifar100",
        description="CIFAR-100, imbalanced 1:3 source; target CIFAR-100-C (19 x 5)",
        modality="image",
        n_classes=100,
        class_names=CIFAR100_CLASSES,
        input_shape=INPUT_SHAPE,
        target_families=("clean", "synthetic"),
        stage=stage_cifar100,
        raw_files=raw_files_cifar100,
        load_source=load_source_cifar100,
        load_target_pool=load_target_pool_cifar100,
        to_inputs=cifar100_inputs,
        online=True,
        paper_row="CIFAR100 (Table 1: CIFAR-100C)",
        backbones=("resnet18", *FINETUNE_WEIGHTS),
        sources=SOURCES_CIFAR100,
        recipes={"resnet18": RESNET18_RECIPE},
        backbone_inputs=BACKBONE_INPUTS,
        own_families=(CIFAR_C_FAMILY,),
    ),
)
