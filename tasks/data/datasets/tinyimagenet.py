"""``tinyimagenet``: Tiny ImageNet and Tiny-ImageNet-C, the COT paper's third dataset.

The COT paper (Lu et al. 2023) fine-tunes ImageNet-pretrained ResNet18, ResNet50 and VGG11 on
Tiny ImageNet (Le & Yang 2015: 200 ImageNet classes, 64 x 64 pixels) and estimates their error on
Tiny-ImageNet-C (Hendrycks & Dietterich, ICLR 2019: 15 corruptions x 5 severities).

On-disk layout (under the data root ``$ALSA_BENCH_HOME/data``)
--------------------------------------------------------------
The official releases, as their archives unpack::

    tiny-imagenet-200/                       tiny-imagenet-200.zip (cs231n.stanford.edu)
        wnids.txt                            the 200 class wnids, one a line: the label order
        words.txt                            wnid <TAB> names, for every ImageNet synset (unread)
        train/<wnid>/images/<wnid>_<k>.JPEG  500 training images per class (k = 0..499)
        train/<wnid>/<wnid>_boxes.txt        <file> <TAB> x0 y0 x1 y1 (unread)
        val/images/val_<k>.JPEG              10,000 validation images (k = 0..9999)
        val/val_annotations.txt              <file> <TAB> <wnid> <TAB> x0 y0 x1 y1
        test/images/test_<k>.JPEG            10,000 unlabelled test images (unread)
    Tiny-ImageNet-C/                         Tiny-ImageNet-C.tar (Zenodo record 2536630)
        <corruption>/<severity>/<wnid>/*.JPEG  15 corruptions x severities 1-5, 10,000 images
                                               each (50 per class)
    tinyimagenet-manifest.tsv                written by :func:`stage`

Every image is a 64 x 64 JPEG (some of Tiny ImageNet's are greyscale: they are converted to RGB);
a label is the wnid's line in ``wnids.txt``, which must list :data:`WNIDS` in that order (the
order of the release, of the COT authors' loader and of the usual ones), so labels do not depend
on which class folders are present.

Splits (the COT authors' protocol)
----------------------------------
=========================  ====================================================================
split                      images
=========================  ====================================================================
train                      the 100,000 training images minus the validation ones (90,000)
``val``                    a seeded 10 % of the training images (:data:`VAL_FRACTION`,
                           10,000): the last tenth of a permutation with seed :data:`SPLIT_SEED`
                           of the images in sorted path order (the authors hold out 10,000
                           training images the same way, with their own torch seed)
``clean``                  the 10,000 official validation images (``val/``)
``<corruption>-<severity>``  one Tiny-ImageNet-C folder whole (``synthetic`` family, 75 splits)
=========================  ====================================================================

Samples and inputs
------------------
Images are decoded once when a split is loaded (the training images when the source is loaded,
a corruption's 10,000 when its split is made; in ``--loader-workers`` threads, none by default)
into ``uint8`` arrays ``(n, 64, 64, 3)``: 1.2 GB for the source, 123 MB a split. The networks see
them upsampled to 224 with ImageNet's statistics (:mod:`tasks.data.datasets._upsample`, on the
GPU when there is one). Tiny-ImageNet-C's splits are views of the release and are not copied
into the shift cache; decoding one takes 2-4 s on one core.

Fetch
-----
``alsa-bench fetch tinyimagenet`` downloads the two archives (:data:`SOURCES`; their MD5 and
sizes as published, see the pins below) and the ImageNet weights of ResNet18 and ResNet50
(:mod:`tasks.data.finetune_weights`), then checks the layout (:func:`verify_fetched`).

Cost
----
:func:`stage` lists every image of the training and validation folders (relative path and size)
into the manifest that the dataset digest covers, and checks that every Tiny-ImageNet-C folder
is there; the JPEG bytes (2 GB) are not hashed at every run, the archives being verified at
fetch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.datasets._online import fetch_hint, require_files
from tasks.data.datasets._upsample import UPSAMPLED_SIZE, upsampling_inputs
from tasks.data.errors import DatasetUnavailableError
from tasks.data.families import ShiftFamily, TargetSplitSpec
from tasks.data.files import atomic_target
from tasks.data.finetune_weights import FINETUNE_WEIGHTS
from tasks.data.finetune_weights import remote_files as weight_files
from tasks.data.spec import DatasetSpec, RemoteFile, SourceSplits, TargetPool
from tasks.runtime.loader import loader_workers

__all__ = [
    "CLASS_NAMES",
    "CORRUPTIONS",
    "C_DIR",
    "DATASET_DIR",
    "MANIFEST",
    "NAME",
    "SEVERITIES",
    "SOURCES",
    "SPECS",
    "WNIDS",
    "decode_images",
    "load_source",
    "load_target_pool",
    "raw_files",
    "read_corrupted",
    "read_train",
    "read_val",
    "read_wnids",
    "split_source",
    "stage",
    "to_inputs",
    "verify_fetched",
]

#: Registry position (after CIFAR and ImageNet).
ORDER: Final[int] = 265

NAME: Final[str] = "tinyimagenet"
#: Folder of the Tiny ImageNet release under the data root (the zip's one top folder).
DATASET_DIR: Final[str] = "tiny-imagenet-200"
#: Folder of the Tiny-ImageNet-C release under the data root (the tar's one top folder).
C_DIR: Final[str] = "Tiny-ImageNet-C"
#: The manifest of the images the dataset digest covers, under the data root.
MANIFEST: Final[str] = "tinyimagenet-manifest.tsv"

N_CLASSES: Final[int] = 200
#: Side of every image of both releases.
SIDE: Final[int] = 64
#: Share of the training images held out for validation (10,000 of 100,000, as the COT authors).
VAL_FRACTION: Final[float] = 0.1
#: Seed of the validation draw.
SPLIT_SEED: Final[int] = 0

#: The 15 corruptions of Tiny-ImageNet-C (``Tiny-ImageNet-C.tar``; the 4 extra ones of
#: ``Tiny-ImageNet-C-extra.tar`` are not part of the COT protocol).
CORRUPTIONS: Final[tuple[str, ...]] = (
    "gaussian_noise", "shot_noise", "impulse_noise",
    "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness",
    "contrast", "elastic_transform", "pixelate", "jpeg_compression",
)  # fmt: skip
#: Severities of Tiny-ImageNet-C, one folder each.
SEVERITIES: Final[tuple[int, ...]] = (1, 2, 3, 4, 5)

# The 200 wnids in the order of the release's wnids.txt ("n" + 8 digits).
_WNID_DIGITS: Final[str] = """
02124075 04067472 04540053 04099969 07749582 01641577 02802426 09246464 07920052 03970156
03891332 02106662 03201208 02279972 02132136 04146614 07873807 02364673 04507155 03854065
03838899 03733131 01443537 07875152 03544143 09428293 03085013 02437312 07614500 03804744
04265275 02963159 02486410 01944390 09256479 02058221 04275548 02321529 02769748 02099712
07695742 02056570 02281406 01774750 02509815 03983396 07753592 04254777 02233338 04008634
02823428 02236044 03393912 07583066 04074963 01629819 09332890 02481823 03902125 03404251
09193705 03637318 04456115 02666196 03796401 02795169 02123045 01855672 01882714 02917067
02988304 04398044 02843684 02423022 02669723 04465501 02165456 03770439 02099601 04486054
02950826 03814639 04259630 03424325 02948072 03179701 03400231 02206856 03160309 01984695
03977966 03584254 04023962 02814860 01910747 04596742 03992509 04133789 03937543 02927161
01945685 02395406 02125311 03126707 04532106 02268443 02977058 07734744 03599486 04562935
03014705 04251144 04356056 02190166 03670208 02002724 02074367 04285008 04560804 04366367
02403003 07615774 04501370 03026506 02906734 01770393 04597913 03930313 04118538 04179913
04311004 02123394 04070727 02793495 02730930 02094433 04371430 04328186 03649909 04417672
03388043 01774384 02837789 07579787 04399382 02791270 03089624 02814533 04149813 07747607
03355925 01983481 04487081 03250847 03255030 02892201 02883205 03100240 02415577 02480495
01698640 01784675 04376876 03444034 01917289 01950731 03042490 07711569 04532670 03763968
07768694 02999410 03617480 06596364 01768244 02410509 03976657 01742172 03980874 02808440
02226429 02231487 02085620 01644900 02129165 02699494 03837869 02815834 07720875 02788148
02909870 03706229 07871810 03447447 02113799 12267677 03662601 02841315 07715103 02504458
"""
#: The 200 class wnids in label order: the lines of the release's ``wnids.txt``.
WNIDS: Final[tuple[str, ...]] = tuple("n" + d for d in _WNID_DIGITS.split())
_WNID_INDEX: Final[dict[str, int]] = {w: i for i, w in enumerate(WNIDS)}

#: Class names in label order: torchvision's ImageNet name of each wnid.
CLASS_NAMES: Final[tuple[str, ...]] = (
    'Egyptian cat', 'reel', 'volleyball', 'rocking chair', 'lemon', 'bullfrog', 'basketball',
    'cliff', 'espresso', 'plunger', 'parking meter', 'German shepherd', 'dining table', 'monarch',
    'brown bear', 'school bus', 'pizza', 'guinea pig', 'umbrella', 'organ', 'oboe', 'maypole',
    'goldfish', 'potpie', 'hourglass', 'seashore', 'computer keyboard', 'Arabian camel',
    'ice cream', 'nail', 'space heater', 'cardigan', 'baboon', 'snail', 'coral reef', 'albatross',
    'spider web', 'sea cucumber', 'backpack', 'Labrador retriever', 'pretzel', 'king penguin',
    'sulphur butterfly', 'tarantula', 'lesser panda', 'pop bottle', 'banana', 'sock', 'cockroach',
    'projectile', 'beer bottle', 'mantis', 'freight car', 'guacamole', 'remote control',
    'European fire salamander', 'lakeside', 'chimpanzee', 'pay-phone', 'fur coat', 'alp',
    'lampshade', 'torch', 'abacus', 'moving van', 'barrel', 'tabby', 'goose', 'koala',
    'bullet train', 'CD player', 'teapot', 'birdhouse', 'gazelle', 'academic gown', 'tractor',
    'ladybug', 'miniskirt', 'golden retriever', 'triumphal arch', 'cannon', 'neck brace',
    'sombrero', 'gasmask', 'candle', 'desk', 'frying pan', 'bee', 'dam', 'spiny lobster',
    'police van', 'iPod', 'punching bag', 'beacon', 'jellyfish', 'wok', "potter's wheel", 'sandal',
    'pill bottle', 'butcher shop', 'slug', 'hog', 'cougar', 'crane', 'vestment', 'dragonfly',
    'cash machine', 'mushroom', 'jinrikisha', 'water tower', 'chest', 'snorkel', 'sunglasses',
    'fly', 'limousine', 'black stork', 'dugong', 'sports car', 'water jug', 'suspension bridge',
    'ox', 'ice lolly', 'turnstile', 'Christmas stocking', 'broom', 'scorpion', 'wooden spoon',
    'picket fence', 'rugby ball', 'sewing machine', 'steel arch bridge', 'Persian cat',
    'refrigerator', 'barn', 'apron', 'Yorkshire terrier', 'swimming trunks', 'stopwatch',
    'lawn mower', 'thatch', 'fountain', 'black widow', 'bikini', 'plate', 'teddy', 'barbershop',
    'confectionery', 'beach wagon', 'scoreboard', 'orange', 'flagpole', 'American lobster',
    'trolleybus', 'drumstick', 'dumbbell', 'brass', 'bow tie', 'convertible', 'bighorn',
    'orangutan', 'American alligator', 'centipede', 'syringe', 'go-kart', 'brain coral',
    'sea slug', 'cliff dwelling', 'mashed potato', 'viaduct', 'military uniform', 'pomegranate',
    'chain', 'kimono', 'comic book', 'trilobite', 'bison', 'pole', 'boa constrictor', 'poncho',
    'bathtub', 'grasshopper', 'walking stick', 'Chihuahua', 'tailed frog', 'lion', 'altar',
    'obelisk', 'beaker', 'bell pepper', 'bannister', 'bucket', 'magnetic compass', 'meat loaf',
    'gondola', 'standard poodle', 'acorn', 'lifeboat', 'binoculars', 'cauliflower',
    'African elephant',
)

# Published checksums. tiny-imagenet-200.zip: no checksum is published by the release page; the
# MD5 is the one public Tiny ImageNet loaders pin (the torchvision-style ``TinyImageNet`` datasets
# of several projects) and the size that of the same file measured by an independent audit.
# Tiny-ImageNet-C.tar: the MD5 and size listed with the file on Zenodo (as pinned by
# torch-uncertainty's ``TinyImageNetC`` for the record's later version 8206060, which adds
# ``Tiny-ImageNet-C-extra.tar`` beside the same archive, and measured by an independent audit);
# the URL is the official record 2536630 (hendrycks/robustness README). No SHA-256 is published
# for either archive, so none is pinned: a file whose MD5 or size differs is refused.
ZIP_ARCHIVE: Final[RemoteFile] = RemoteFile(
    url="http://cs231n.stanford.edu/tiny-imagenet-200.zip",
    filename="tiny-imagenet-200.zip",
    md5="90528d7ca1a48142e341f4ef8d21d0de",
    size=248_100_043,
)
C_ARCHIVE: Final[RemoteFile] = RemoteFile(
    url="https://zenodo.org/records/2536630/files/Tiny-ImageNet-C.tar",
    filename="Tiny-ImageNet-C.tar",
    md5="f9c9a9dbdc11469f0b850190f7ad8be1",
    size=1_794_775_040,
)
#: What ``alsa-bench fetch tinyimagenet`` downloads: both archives and the ImageNet weights of
#: the fine-tuned backbones that have a pinned digest.
SOURCES: Final[tuple[RemoteFile, ...]] = (ZIP_ARCHIVE, C_ARCHIVE, *weight_files())

_IMAGE_SUFFIXES: Final[frozenset[str]] = frozenset({".jpeg", ".jpg"})


# --------------------------------------------------------------------------------- reading
def _folder(root: Path | str) -> Path:
    return Path(root) / DATASET_DIR


def _images_in(folder: Path) -> list[str]:
    """File names of the JPEG images of a folder, sorted (other files are ignored)."""
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries
                      if e.is_file() and os.path.splitext(e.name)[1].lower() in _IMAGE_SUFFIXES)


def read_wnids(root: Path | str) -> tuple[str, ...]:
    """The class wnids of ``wnids.txt``, checked against :data:`WNIDS`.

    Raises
    ------
    DatasetUnavailableError
        If the file is missing.
    ValueError
        If it does not list the 200 wnids of :data:`WNIDS` in that order (the label order).
    """
    (path,) = require_files(NAME, root, [_folder(root) / "wnids.txt"])
    got = tuple(line.strip() for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip())
    if got != WNIDS:
        first = next((i for i, (a, b) in enumerate(zip(got, WNIDS)) if a != b),
                     min(len(got), len(WNIDS)))
        raise ValueError(
            f"{str(path)!r} must list the 200 Tiny ImageNet wnids in the release's order "
            f"({WNIDS[0]}, {WNIDS[1]}, ...); got {len(got)} lines, differing at line "
            f"{first + 1}."
        )
    return got


def _label(wnid: str, where: str) -> int:
    try:
        return _WNID_INDEX[wnid]
    except KeyError:
        raise ValueError(
            f"{where} names {wnid!r}, which is not one of the 200 Tiny ImageNet wnids "
            f"(wnids.txt)."
        ) from None


def read_train(root: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """Every training image, ``train/<wnid>/images/*.JPEG``, in sorted relative-path order.

    Returns
    -------
    paths, labels : numpy.ndarray
        ``str`` absolute paths and ``int64`` labels (the wnid's line in ``wnids.txt``).

    Raises
    ------
    DatasetUnavailableError
        If the training folder is missing.
    ValueError
        If a class folder is not a Tiny ImageNet wnid or has no ``images/`` folder, or there are
        no images.
    """
    read_wnids(root)
    (train,) = require_files(NAME, root, [_folder(root) / "train"])
    paths: list[str] = []
    labels: list[int] = []
    with os.scandir(train) as entries:
        classes = sorted(e.name for e in entries if e.is_dir())
    for wnid in classes:
        label = _label(wnid, f"training folder {str(train / wnid)!r}")
        images = train / wnid / "images"
        if not images.is_dir():
            raise ValueError(f"training class folder {str(train / wnid)!r} has no images/ "
                             f"folder (the release's layout: train/<wnid>/images/*.JPEG).")
        names = _images_in(images)
        paths += [os.path.join(images, n) for n in names]
        labels += [label] * len(names)
    if not paths:
        raise ValueError(f"training folder {str(train)!r} holds no images in "
                         f"<wnid>/images/ sub-folders.")
    return np.array(paths, dtype=str), np.array(labels, dtype=np.int64)


def read_val(root: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """The official validation images, ``val/images/*.JPEG``, labelled by ``val_annotations.txt``.

    Returns
    -------
    paths, labels : numpy.ndarray
        ``str`` absolute paths sorted by file name, ``int64`` labels.

    Raises
    ------
    DatasetUnavailableError
        If the folder or the annotations are missing.
    ValueError
        If an annotation line has fewer than two tab-separated fields or an unknown wnid, an
        image has no annotation, or an annotated image is missing.
    """
    read_wnids(root)
    images, notes = require_files(NAME, root, [_folder(root) / "val" / "images",
                                               _folder(root) / "val" / "val_annotations.txt"])
    label_of: dict[str, int] = {}
    for number, line in enumerate(notes.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) < 2:
            raise ValueError(
                f"{str(notes)!r} line {number} must be '<file> TAB <wnid> TAB x0 y0 x1 y1'; "
                f"got {line[:80]!r}."
            )
        label_of[fields[0]] = _label(fields[1], f"{str(notes)!r} line {number}")
    names = _images_in(images)
    unlabelled = [n for n in names if n not in label_of]
    if unlabelled:
        raise ValueError(f"validation image {unlabelled[0]!r} has no line in {str(notes)!r} "
                         f"({len(unlabelled)} images without one).")
    missing = sorted(set(label_of) - set(names))
    if missing:
        raise ValueError(f"{str(notes)!r} annotates {missing[0]!r}, which is not in "
                         f"{str(images)!r} ({len(missing)} missing).")
    if not names:
        raise ValueError(f"validation folder {str(images)!r} holds no images.")
    return (np.array([os.path.join(images, n) for n in names], dtype=str),
            np.array([label_of[n] for n in names], dtype=np.int64))


def _condition(root: Path | str, corruption: str, severity: int) -> Path:
    return Path(root) / C_DIR / corruption / str(int(severity))


def read_corrupted(root: Path | str, corruption: str, severity: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """One Tiny-ImageNet-C folder, ``<corruption>/<severity>/<wnid>/*.JPEG``, in sorted order.

    Raises
    ------
    DatasetUnavailableError
        If the folder is missing.
    ValueError
        If the corruption or severity is not one of the release's, a class folder is not a
        Tiny ImageNet wnid, or the folder holds no images.
    """
    if corruption not in CORRUPTIONS or int(severity) not in SEVERITIES:
        raise ValueError(
            f"corruption must be one of {', '.join(CORRUPTIONS)} and severity one of "
            f"{SEVERITIES}; got {corruption!r}, {severity!r}."
        )
    (folder,) = require_files(NAME, root, [_condition(root, corruption, severity)])
    paths: list[str] = []
    labels: list[int] = []
    with os.scandir(folder) as entries:
        classes = sorted(e.name for e in entries if e.is_dir())
    for wnid in classes:
        label = _label(wnid, f"Tiny-ImageNet-C folder {str(folder / wnid)!r}")
        names = _images_in(folder / wnid)
        paths += [os.path.join(folder, wnid, n) for n in names]
        labels += [label] * len(names)
    if not paths:
        raise ValueError(f"Tiny-ImageNet-C folder {str(folder)!r} holds no images in <wnid>/ "
                         f"sub-folders.")
    return np.array(paths, dtype=str), np.array(labels, dtype=np.int64)


def _decode_one(path: str) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            rgb = img.convert("RGB")
    except FileNotFoundError:
        raise DatasetUnavailableError(
            f"image {path!r} does not exist; the release changed since it was listed: run "
            f"`{fetch_hint(NAME)} --force`."
        ) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ValueError(
            f"image {path!r} cannot be decoded ({type(exc).__name__}: {exc}); the file is "
            f"corrupt: fetch the dataset again."
        ) from None
    if rgb.size != (SIDE, SIDE):
        raise ValueError(f"image {path!r} is {rgb.size[0]} x {rgb.size[1]} pixels; every Tiny "
                         f"ImageNet image is {SIDE} x {SIDE}.")
    return np.asarray(rgb, dtype=np.uint8)


def decode_images(paths: Sequence[str] | np.ndarray, threads: int | None = None) -> np.ndarray:
    """Decode 64 x 64 JPEG files into one ``uint8`` array ``(n, 64, 64, 3)``, RGB, in order.

    Parameters
    ----------
    paths : sequence of str
        Image files.
    threads : int, optional
        Decoding threads (Pillow releases the GIL while it decodes); default
        :func:`tasks.runtime.loader.loader_workers` (``--loader-workers``; 0 decodes here).
        The result does not depend on it.

    Raises
    ------
    ValueError
        If a file is not a readable 64 x 64 image (naming it).
    DatasetUnavailableError
        If a file does not exist.
    """
    items = [str(p) for p in np.asarray(paths, dtype=object).reshape(-1)]
    out = np.empty((len(items), SIDE, SIDE, 3), dtype=np.uint8)
    n_threads = loader_workers() if threads is None else int(threads)
    if n_threads <= 1 or len(items) < 256:
        for i, path in enumerate(items):
            out[i] = _decode_one(path)
        return out

    def fill(chunk: range) -> None:
        for i in chunk:
            out[i] = _decode_one(items[i])

    step = max(64, len(items) // (4 * n_threads))
    with ThreadPoolExecutor(n_threads) as pool:
        for done in pool.map(fill, [range(s, min(s + step, len(items)))
                                    for s in range(0, len(items), step)]):
            del done
    return out


# ---------------------------------------------------------------------------------- splits
def split_source(n: int, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """The seeded validation draw of the training images: ``(train_idx, val_idx)``.

    Parameters
    ----------
    n : int
        Number of training images (in :func:`read_train` order), at least 2.
    seed : int, default :data:`SPLIT_SEED`

    Returns
    -------
    train_idx, val_idx : numpy.ndarray
        Sorted, disjoint ``int64`` indices covering ``range(n)``: ``val_idx`` the last
        ``max(1, round(0.1 n))`` entries of ``numpy.random.default_rng(seed).permutation(n)``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2 (one training and one validation image); "
                         f"got {n!r}.")
    n_val = min(int(n) - 1, max(1, int(round(VAL_FRACTION * int(n)))))
    order = np.random.default_rng(seed).permutation(int(n))
    return (np.sort(order[: int(n) - n_val]).astype(np.int64),
            np.sort(order[int(n) - n_val:]).astype(np.int64))


def load_source(root: Path | str) -> SourceSplits:
    """The training images without the seeded validation tenth, and that tenth (decoded).

    Returns
    -------
    SourceSplits
        ``uint8`` images ``(n, 64, 64, 3)``: 90,000 training and 10,000 validation images with
        the full release.
    """
    paths, labels = read_train(root)
    train_idx, val_idx = split_source(paths.size)
    return SourceSplits(decode_images(paths[train_idx]), labels[train_idx],
                        decode_images(paths[val_idx]), labels[val_idx])


def load_target_pool(root: Path | str) -> TargetPool:
    """``clean``: the official validation images (decoded); Tiny-ImageNet-C read per split.

    Returns
    -------
    TargetPool
        No sub-populations (``clean`` is the whole validation set); ``extras["c_root"]`` is the
        data root that :data:`TINY_C_FAMILY` reads its folders from.

    Raises
    ------
    DatasetUnavailableError
        If a release folder (a Tiny-ImageNet-C one included) is missing.
    """
    _check_c_folders(root)
    paths, labels = read_val(root)
    return TargetPool(samples=decode_images(paths), labels=labels, n_classes=N_CLASSES,
                      extras={"c_root": Path(root)})


def _check_c_folders(root: Path | str) -> list[Path]:
    return require_files(NAME, root, [_condition(root, c, s) for c in CORRUPTIONS
                                      for s in SEVERITIES])


def _c_splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(f"{name}-{sev}", "synthetic", name, sev, (("severity", float(sev)),))
        for name in CORRUPTIONS
        for sev in SEVERITIES
    ]


def _c_generate(dataset: str, split: TargetSplitSpec, pool: TargetPool,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The split's Tiny-ImageNet-C folder, decoded now."""
    root = pool.extras.get("c_root")
    if root is None:
        raise ValueError(
            f"split {split.name!r} of dataset {dataset!r} needs the Tiny-ImageNet-C data root "
            f"in the target pool's extras ('c_root'); it has {sorted(pool.extras)}."
        )
    paths, labels = read_corrupted(root, split.shift, int(split.severity or 0))
    return decode_images(paths), labels


#: Tiny-ImageNet-C read from the release (15 corruptions x 5 severities), never cached.
TINY_C_FAMILY: Final[ShiftFamily] = ShiftFamily(
    "synthetic", 1, ("image",), _c_splits, _c_generate, cache=False
)


# ------------------------------------------------------------------------------- staging
def raw_files(root: Path | str) -> list[Path]:
    """Files that later stages hash (no IO): the image manifest, ``wnids.txt`` and the
    validation annotations."""
    base = Path(root)
    return [base / MANIFEST, _folder(base) / "wnids.txt",
            _folder(base) / "val" / "val_annotations.txt"]


def _manifest_text(root: Path, groups: Sequence[np.ndarray]) -> str:
    """``<relative path> TAB <size>`` of every image, sorted (the readers build every path from
    ``str(root)``, so the relative path is the rest of the string: no resolving per file)."""
    prefix = len(os.path.join(str(root), ""))
    lines = [f"{p[prefix:]}\t{os.stat(p).st_size}\n" for paths in groups for p in paths.tolist()]
    return "".join(sorted(lines))


def stage(root: Path | str) -> list[Path]:
    """Check both releases' layout; write the manifest of the training and validation images.

    Returns
    -------
    list of Path
        :func:`raw_files`.

    Raises
    ------
    DatasetUnavailableError
        One line naming the first missing file or folder and ``alsa-bench fetch tinyimagenet``.
    ValueError
        If a folder does not have the layout of the module docstring.
    """
    base = Path(root)
    train_paths, _ = read_train(base)
    val_paths, _ = read_val(base)
    _check_c_folders(base)
    manifest = base / MANIFEST
    text = _manifest_text(base, [train_paths, val_paths])
    if not manifest.is_file() or manifest.read_text(encoding="utf-8") != text:
        with atomic_target(manifest) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return raw_files(base)


def verify_fetched(root: Path | str) -> None:
    """After ``alsa-bench fetch``: the layout check and manifest of :func:`stage`."""
    stage(root)


#: ``uint8`` images ``(n, 64, 64, 3)`` to ImageNet-normalised ``float32`` inputs
#: ``(n, 3, 224, 224)`` (bilinear upsampling; on the GPU through ``to_inputs.on_device``).
to_inputs = upsampling_inputs(SIDE)

#: The dataset (registry entry; :mod:`tasks.data.datasets` collects it).
SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME,
        suite="tinyimagenet",
        description=(
            "Tiny ImageNet (200 classes, 64 px, upsampled to 224): 90k train / 10k val of the "
            "training images; targets the val set and Tiny-ImageNet-C (15 corruptions x 5)"
        ),
        modality="image",
        n_classes=N_CLASSES,
        class_names=CLASS_NAMES,
        input_shape=(3, UPSAMPLED_SIZE, UPSAMPLED_SIZE),
        target_families=("clean", "synthetic"),
        stage=stage,
        raw_files=raw_files,
        load_source=load_source,
        load_target_pool=load_target_pool,
        to_inputs=to_inputs,
        online=True,
        paper_row="COT paper (Lu et al. 2023), Tables 1-2: TinyImageNet-C",
        backbones=tuple(FINETUNE_WEIGHTS),
        sources=SOURCES,
        own_families=(TINY_C_FAMILY,),
    ),
)
