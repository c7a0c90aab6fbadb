"""``office31``: Office-31 (Saenko et al. 2010), Amazon product photos -> DSLR / Webcam photos.

Data
----
31 office object classes photographed in three domains: ``amazon`` (2,817 catalogue images),
``dslr`` (498) and ``webcam`` (795). Following the ALSA paper (App. H.2), a ResNet18 is trained
on a seeded 80 % of the Amazon images of every class and validated on the other 20 %; the DSLR
and Webcam domains are the two target splits of the ``domain`` family (paper: Office-31, domain
shift), ``dslr`` and ``webcam``, each every image of its domain.

There is no ``clean`` target: the release has no held-out Amazon test set, and re-using the
20 % validation images as a target would score every estimator on the very data it was fitted
on. The paper reports the two domain splits only.

On-disk layout
--------------
``alsa-bench fetch office31`` downloads ``domain_adaptation_images.tar.gz`` (the archive that
the Office-31 page of Saenko et al. links; Google Drive id ``0B4IapRTv9pJ1WGZVd1VDMmhwdlE``,
MD5 as pinned by DeepMind's ``dm_nevis`` dataset catalogue) and unpacks it into
``<root>/office31``::

    <root>/office31/amazon/images/<class>/frame_0001.jpg
    <root>/office31/dslr/images/<class>/frame_0001.jpg
    <root>/office31/webcam/images/<class>/frame_0001.jpg

The archive holds the three domain folders at its top level; a copy unpacked with the extra
top folder ``domain_adaptation_images/`` (``<root>/office31/domain_adaptation_images/amazon/...``)
is read as well. Class indices are the sorted class folder names, as
:class:`torchvision.datasets.ImageFolder` numbers them (:data:`CLASS_NAMES`); every domain must
have exactly these 31 folders.

Samples and model inputs
------------------------
A sample is the absolute path of its JPEG (a numpy ``str`` array), so nothing is decoded until a
mini-batch needs it: :func:`photos_to_inputs` opens each file with PIL, converts it to RGB,
resizes its shorter side to 256 pixels (bilinear), takes the central 224 x 224 crop and
normalises every channel with the ImageNet mean and standard deviation, exactly
``torchvision.transforms.Compose([Resize(256), CenterCrop(224), ToTensor(),
Normalize(IMAGENET_MEAN, IMAGENET_STD)])``. Waterbirds (:mod:`tasks.data.datasets.waterbirds`) uses
the same function.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Final

import numpy as np

from tasks.data.families import test_set_family

from tasks.data.datasets._online import require_files
from tasks.data.datasets._vision import INPUT_SHAPE, photos_to_inputs
from tasks.data.spec import DatasetSpec, RemoteFile, SourceSplits, TargetPool, draw_source_split

__all__ = [
    "CLASS_NAMES",
    "DOMAINS",
    "DOMAIN_FAMILY",
    "SPECS",
    "TARGETS",
    "dataset_folder",
    "domain_images",
    "load_source",
    "load_target_pool",
    "raw_files",
    "stage",
]

#: Registry position (online vision suites after the offline suites).
ORDER: Final[int] = 430

NAME: Final[str] = "office31"
#: Folder the archive is unpacked into, under the data root.
DATASET_DIR: Final[str] = "office31"
#: Extra top folder of some unpacked copies of the archive.
ARCHIVE_TOP: Final[str] = "domain_adaptation_images"
#: The three domains; the first is the source.
DOMAINS: Final[tuple[str, ...]] = ("amazon", "dslr", "webcam")
SOURCE_DOMAIN: Final[str] = "amazon"

#: Office-31 class folders in sorted order (class index = position).
CLASS_NAMES: Final[tuple[str, ...]] = (
    "back_pack", "bike", "bike_helmet", "bookcase", "bottle", "calculator", "desk_chair",
    "desk_lamp", "desktop_computer", "file_cabinet", "headphones", "keyboard",
    "laptop_computer", "letter_tray", "mobile_phone", "monitor", "mouse", "mug",
    "paper_notebook", "pen", "phone", "printer", "projector", "punchers", "ring_binder",
    "ruler", "scissors", "speaker", "stapler", "tape_dispenser", "trash_can",
)
N_CLASSES: Final[int] = len(CLASS_NAMES)

#: Target splits ``(split name, shift name, pool sub-population)``; Amazon is sub-population 0.
TARGETS: Final[tuple[tuple[str, str, int], ...]] = (
    ("dslr", "amazon-to-dslr", 1),
    ("webcam", "amazon-to-webcam", 2),
)

#: Fraction of every Amazon class held out for validation (paper App. H.2: 20 %).
VAL_FRACTION: Final[float] = 0.2
#: Seed of the Amazon training/validation draw (independent of the training seed).
SPLIT_SEED: Final[int] = 0


_IMAGE_SUFFIXES: Final[frozenset[str]] = frozenset({".jpg", ".jpeg"})

#: The official archive (MD5 published in DeepMind's dm_nevis catalogue, ``office31.py``).
SOURCES: Final[tuple[RemoteFile, ...]] = (
    RemoteFile(
        url=(
            "https://drive.google.com/u/0/uc?id=0B4IapRTv9pJ1WGZVd1VDMmhwdlE"
            "&export=download&confirm=y"
        ),
        filename="domain_adaptation_images.tar.gz",
        md5="1b536d114869a5a8aa4580b89e9758fb",
        dest=DATASET_DIR,
    ),
)


#: Office-31's own ``domain`` family: DSLR and Webcam as released test sets.
DOMAIN_FAMILY: Final = test_set_family("domain", 4, TARGETS)


def dataset_folder(root: Path | str) -> Path:
    """Folder holding the three domain folders: ``<root>/office31`` (or its
    ``domain_adaptation_images`` sub-folder when the copy was unpacked with it)."""
    folder = Path(root) / DATASET_DIR
    nested = folder / ARCHIVE_TOP
    if not (folder / SOURCE_DOMAIN).is_dir() and (nested / SOURCE_DOMAIN).is_dir():
        return nested
    return folder


def _images_dir(root: Path | str, domain: str) -> Path:
    return dataset_folder(root) / domain / "images"


def _check_classes(images_dir: Path) -> None:
    found = sorted(p.name for p in images_dir.iterdir() if p.is_dir())
    if tuple(found) != CLASS_NAMES:
        missing = sorted(set(CLASS_NAMES) - set(found))
        extra = sorted(set(found) - set(CLASS_NAMES))
        raise ValueError(
            f"Office-31 folder {str(images_dir)!r} must hold exactly the 31 class folders "
            f"{', '.join(CLASS_NAMES[:3])}, ... {CLASS_NAMES[-1]}; missing {missing or 'none'}, "
            f"unexpected {extra or 'none'}. It is not the Office-31 release; fetch it again "
            f"with `alsa-bench fetch {NAME}`."
        )


def domain_images(root: Path | str, domain: str) -> tuple[np.ndarray, np.ndarray]:
    """Every image of one domain, in ``ImageFolder`` order, with its class.

    Parameters
    ----------
    root : Path or str
        Data root (the folder containing ``office31/``).
    domain : str
        One of :data:`DOMAINS`.

    Returns
    -------
    paths : numpy.ndarray
        Absolute paths of the JPEG files (``str`` array), class by class, names sorted.
    labels : numpy.ndarray
        ``int64`` class indices into :data:`CLASS_NAMES`.

    Raises
    ------
    ValueError
        If ``domain`` is unknown, the class folders are not the 31 of the release, or the
        domain holds no image.
    DatasetUnavailableError
        If the domain's folder is missing.
    """
    if domain not in DOMAINS:
        raise ValueError(f"domain must be one of {', '.join(DOMAINS)}; got {domain!r}.")
    images_dir = _images_dir(root, domain)
    require_files(NAME, root, [images_dir])
    _check_classes(images_dir)
    paths: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(CLASS_NAMES):
        files = sorted(
            p for p in (images_dir / name).iterdir()
            if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES
        )
        paths.extend(str(p.resolve()) for p in files)
        labels.extend([label] * len(files))
    if not paths:
        raise ValueError(
            f"Office-31 domain {domain!r} under {str(images_dir)!r} holds no .jpg image; fetch "
            f"the dataset again with `alsa-bench fetch {NAME}`."
        )
    return np.asarray(paths, dtype=str), np.asarray(labels, dtype=np.int64)


def raw_files(root: Path | str) -> list[Path]:
    """Every image file of the three domains (sorted); a missing domain folder stands for itself.

    The listing walks the class folders but reads no image; a domain whose ``images`` folder is
    missing contributes that folder's path, which is not a file, so the dataset counts as not
    staged.
    """
    out: list[Path] = []
    for domain in DOMAINS:
        images_dir = _images_dir(root, domain)
        if not images_dir.is_dir():
            out.append(images_dir)
            continue
        out.extend(sorted(
            p for p in images_dir.glob("*/*") if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES
        ))
    return out


def stage(root: Path | str) -> list[Path]:
    """Check that Office-31 is unpacked under ``<root>/office31``; download nothing.

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
        If a domain folder is missing (one line ending with ``alsa-bench fetch office31``).
    ValueError
        If a domain's class folders are not the 31 of the release.
    """
    require_files(NAME, root, [_images_dir(root, d) for d in DOMAINS])
    for domain in DOMAINS:
        _check_classes(_images_dir(root, domain))
    return raw_files(root)


def load_source(root: Path | str) -> SourceSplits:
    """A seeded 80 % of every Amazon class for training, the other 20 % for validation.

    Class ``c`` with ``n_c`` images gives ``max(1, round(0.2 n_c))`` to validation and the rest
    to training (:func:`tasks.data.spec.draw_source_split`, seed :data:`SPLIT_SEED`).

    Raises
    ------
    ValueError
        If an Amazon class holds fewer than 2 images.
    """
    paths, labels = domain_images(root, SOURCE_DOMAIN)
    counts = np.bincount(labels, minlength=N_CLASSES)
    small = [CLASS_NAMES[c] for c in range(N_CLASSES) if counts[c] < 2]
    if small:
        raise ValueError(
            f"every Amazon class of Office-31 needs at least 2 images (training and "
            f"validation); {', '.join(small)} under {str(_images_dir(root, SOURCE_DOMAIN))!r} "
            f"hold fewer."
        )
    plan = {}
    for c in range(N_CLASSES):
        n_val = max(1, int(round(VAL_FRACTION * counts[c])))
        plan[c] = (int(counts[c]) - n_val, n_val)
    train_idx, val_idx = draw_source_split(labels, plan, SPLIT_SEED)
    return SourceSplits(paths[train_idx], labels[train_idx], paths[val_idx], labels[val_idx])


def load_target_pool(root: Path | str) -> TargetPool:
    """DSLR (sub-population 1) and Webcam (2) images, concatenated in that order."""
    parts = [(*domain_images(root, domain), group) for domain, _, group in TARGETS]
    samples = np.concatenate([paths for paths, _, _ in parts])
    labels = np.concatenate([y for _, y, _ in parts])
    groups = np.concatenate([np.full(y.size, g, dtype=np.int64) for _, y, g in parts])
    return TargetPool(
        samples=samples, labels=labels, n_classes=N_CLASSES, subgroups=groups,
        source_subgroups=(0,), novel_subgroups=tuple(t[2] for t in TARGETS),
    )


#: The Office-31 dataset (registry entry; :mod:`tasks.data.datasets` collects it).
SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME,
        suite="office31",
        description="Office-31: ResNet18 on 80 % of Amazon; targets DSLR and Webcam (domain shift)",
        modality="image",
        n_classes=N_CLASSES,
        class_names=CLASS_NAMES,
        input_shape=INPUT_SHAPE,
        target_families=("domain",),
        stage=stage,
        raw_files=raw_files,
        load_source=load_source,
        load_target_pool=load_target_pool,
        to_inputs=photos_to_inputs,
        online=True,
        paper_row="Office-31 (domain shift; Table 1)",
        backbones=("resnet18",),
        sources=SOURCES,
        recipes=MappingProxyType({
            "resnet18": MappingProxyType({
                "optimizer": "adam", "lr": 1e-3, "weight_decay": 0.0, "batch_size": 64,
                "epochs": 300, "patience": 5,
            }),
        }),
        own_families=(DOMAIN_FAMILY,),
    ),
)
