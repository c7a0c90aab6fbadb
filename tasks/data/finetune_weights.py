"""The published ImageNet weights the COT paper's backbones start from, and where they are read.

The COT paper (Lu et al., "Predicting Out-of-Distribution Error with Confidence Optimal
Transport", ICLR 2023 workshop) fine-tunes ResNet18, ResNet50 and VGG11 "pretrained on
ImageNet1k" on CIFAR-10, CIFAR-100 and Tiny ImageNet. Its authors' code builds them with
``torchvision.models.<arch>(pretrained=True)``, which is ``IMAGENET1K_V1``, and replaces the last
linear layer (``model.py`` of github.com/luyuzhe111/COT: ``resnet.fc``, ``vgg.classifier[-1]``).
This module names those three files; :mod:`tasks.models.backbones.finetuned` builds the networks.
It imports no torch, so the dataset registry can list the files as downloads.

=============  ======================  ==============================  ============================
backbone key   torchvision builder     file (``IMAGENET1K_V1``)        SHA-256 pinned from
=============  ======================  ==============================  ============================
resnet18-ft    ``resnet18``            ``resnet18-f37072fd.pth``       full digest (see below)
resnet50       ``resnet50``            ``resnet50-0676ba61.pth``       full digest (see below)
vgg11          ``vgg11`` (no BN)       ``vgg11-8a719046.pth``          the name's prefix only
=============  ======================  ==============================  ============================

Checksums
---------
torchvision publishes the first 8 hex digits of each file's SHA-256 in its name (torch hub checks
that prefix). The full SHA-256 and sizes of ``resnet18-f37072fd.pth`` (46,830,571 bytes) and
``resnet50-0676ba61.pth`` (102,530,333 bytes) are those that several independent public projects
record for the files downloaded from ``download.pytorch.org`` (each digest starts with the
published prefix); they are pinned, so ``alsa-bench fetch cifar10`` (``cifar100``,
``tinyimagenet``) downloads and verifies them like any release file. **No full SHA-256 of
``vgg11-8a719046.pth`` was found in a public source**, and none is invented here: like
MobileNetV2's weights in :mod:`tasks.data.pretrained_weights`, the file is not in any dataset's
``sources`` (a :class:`~tasks.data.spec.RemoteFile` needs a full digest, so ``alsa-bench fetch``
never trusts a file it cannot verify); the user downloads it by hand from its URL into the
weights folder (the missing-file message says so), and every load checks the published prefix
``8a719046``, as torch hub does.

Where the weights live
----------------------
``<data root>/imagenet/weights/<file>`` (:func:`weights_path`): the folder of the imagenet suite's
weights (:data:`tasks.data.pretrained_weights.WEIGHTS_DIR`), so one download serves every suite.

Random initialisation for dry runs
----------------------------------
The weights never download at run time. A dry run on a generated release
(``benchmarks/synth_release.py``) on a machine without them may set
``ALSA_BENCH_RANDOM_INIT=1`` (:data:`RANDOM_INIT_ENV`): a backbone whose weights file is absent
then starts from torchvision's random initialisation (the compute per image is the same) and logs
one warning. ``alsa-bench run`` refuses that switch on a real release (:func:`check_weights`):
generated and real data never share a state folder (:mod:`tasks.data.synthetic`), so random
initialisations never mix with published weights in results. A file that is present is always
loaded and checked, with or without the switch.

Examples
--------
>>> weights_path("resnet50", "/data").as_posix()
'/data/imagenet/weights/resnet50-0676ba61.pth'
>>> [f.filename for f in remote_files()]
['resnet18-f37072fd.pth', 'resnet50-0676ba61.pth']
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from storage.paths import data_dir
from tasks.data.errors import DatasetUnavailableError
from tasks.data.pretrained_weights import WEIGHTS_DIR, PretrainedWeights

__all__ = [
    "FETCHED_BY",
    "FINETUNE_WEIGHTS",
    "RANDOM_INIT_ENV",
    "check_weights",
    "missing_message",
    "random_init_allowed",
    "remote_files",
    "weights_path",
]

_BASE_URL: Final[str] = "https://download.pytorch.org/models/"

#: The published ``IMAGENET1K_V1`` weights of the COT paper's backbones, by backbone key.
FINETUNE_WEIGHTS: Final[dict[str, PretrainedWeights]] = {
    "resnet18-ft": PretrainedWeights(
        arch="resnet18",
        url=_BASE_URL + "resnet18-f37072fd.pth",
        filename="resnet18-f37072fd.pth",
        sha256="f37072fd47e89c5e827621c5baffa7500819f7896bbacec160b1a16c560e07ec",
        size=46_830_571,
        min_size=32,
    ),
    "resnet50": PretrainedWeights(
        arch="resnet50",
        url=_BASE_URL + "resnet50-0676ba61.pth",
        filename="resnet50-0676ba61.pth",
        sha256="0676ba61b6795bbe1773cffd859882e5e297624d384b6993f7c9e683e722fb8a",
        size=102_530_333,
        min_size=32,
    ),
    "vgg11": PretrainedWeights(
        arch="vgg11",
        url=_BASE_URL + "vgg11-8a719046.pth",
        filename="vgg11-8a719046.pth",
        min_size=32,
    ),
}

#: The datasets whose ``alsa-bench fetch`` downloads the pinned files above.
FETCHED_BY: Final[tuple[str, ...]] = ("cifar10", "cifar100", "tinyimagenet")

#: Set to ``1`` to build a backbone whose weights file is absent from random initialisation.
RANDOM_INIT_ENV: Final[str] = "ALSA_BENCH_RANDOM_INIT"


def _entry(name: str) -> PretrainedWeights:
    try:
        return FINETUNE_WEIGHTS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"fine-tuned backbone must be one of {', '.join(sorted(FINETUNE_WEIGHTS))}; got "
            f"{name!r}."
        ) from None


def weights_path(name: str, root: Path | str | None = None) -> Path:
    """Where the ImageNet weights of backbone ``name`` are read from (no IO).

    Parameters
    ----------
    name : str
        A key of :data:`FINETUNE_WEIGHTS`.
    root : Path or str, optional
        Data root; default :func:`storage.paths.data_dir` (``$ALSA_BENCH_HOME/data``).

    Returns
    -------
    Path
        ``<root>/imagenet/weights/<filename>``.

    Raises
    ------
    ValueError
        If ``name`` is not a key of :data:`FINETUNE_WEIGHTS`.
    """
    entry = _entry(name)
    base = Path(root) if root is not None else data_dir()
    return base / WEIGHTS_DIR / entry.filename


def remote_files() -> tuple[Any, ...]:
    """The weight files ``alsa-bench fetch`` downloads for the datasets of :data:`FETCHED_BY`.

    Returns
    -------
    tuple of tasks.data.spec.RemoteFile
        One per entry with a pinned full SHA-256 (ResNet18, ResNet50; not VGG11), in table order,
        ``extract=False``, ``dest`` the weights folder.
    """
    from tasks.data.spec import RemoteFile  # the registry imports this module while it is built

    return tuple(
        RemoteFile(url=w.url, filename=w.filename, sha256=w.sha256, size=w.size, extract=False,
                   dest=WEIGHTS_DIR)
        for w in FINETUNE_WEIGHTS.values() if w.sha256
    )


def random_init_allowed() -> bool:
    """Whether ``$ALSA_BENCH_RANDOM_INIT`` asks for random initialisation of absent weights.

    Raises
    ------
    ValueError
        If the variable is set to anything but ``0``, ``1``, ``true`` or ``false``.
    """
    raw = os.environ.get(RANDOM_INIT_ENV, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ValueError(f"{RANDOM_INIT_ENV} must be 0 or 1; got {raw!r}.")


def missing_message(name: str, path: Path, dataset: str | None = None) -> str:
    """One line: which weights file is missing, where, and how to get it.

    Parameters
    ----------
    name : str
        Backbone key.
    path : Path
        The expected file (:func:`weights_path`).
    dataset : str, optional
        The dataset being run, for the fetch command (default: the datasets that fetch them).
    """
    entry = _entry(name)
    if entry.sha256:
        command = (f"`alsa-bench fetch {dataset}`" if dataset else
                   "`alsa-bench fetch " + "` (or `".join(FETCHED_BY) + "`)")
        how = f"download them once with {command} (needs the internet)"
    else:
        how = (f"no full SHA-256 of this file is published, so `alsa-bench fetch` does not "
               f"download it: download {entry.url} once (needs the internet) into that folder "
               f"(its load checks the published prefix {entry.prefix})")
    return (
        f"pretrained weights of {name!r} are not on this machine: missing {entry.filename!r} in "
        f"the folder {str(path.parent)!r}; {how}, or point ALSA_BENCH_HOME at a state folder "
        f"that has them (a dry run on a generated release may set {RANDOM_INIT_ENV}=1 instead)."
    )


def check_weights(backbones: Iterable[str], dataset: str, root: Path | str | None = None) -> None:
    """Before a run: each fine-tuned backbone of ``backbones`` has its weights, or may start
    from random initialisation.

    Parameters
    ----------
    backbones : iterable of str
        The backbones the run trains on ``dataset``; keys not in :data:`FINETUNE_WEIGHTS` are
        skipped.
    dataset : str
        Dataset key (for the fetch command, and to tell a generated release from the real one).
    root : Path or str, optional
        Data root; default :func:`storage.paths.data_dir`.

    Raises
    ------
    DatasetUnavailableError
        One line when a weights file is absent and random initialisation is not asked for.
    ValueError
        One line when random initialisation is asked for on the real release of ``dataset``, or
        ``$ALSA_BENCH_RANDOM_INIT`` is malformed.
    """
    from tasks.data.synthetic import is_synthetic

    base = Path(root) if root is not None else data_dir()
    for name in backbones:
        if name not in FINETUNE_WEIGHTS:
            continue
        path = weights_path(name, base)
        if path.is_file():
            continue  # its digest is checked when the backbone loads it
        if not random_init_allowed():
            raise DatasetUnavailableError(missing_message(name, path, dataset))
        if not is_synthetic(base, dataset):
            raise ValueError(
                f"{RANDOM_INIT_ENV} is set but the data of {dataset!r} under {str(base)!r} is the "
                f"real release: random initialisation of {name!r} is only for dry runs on a "
                f"generated release; unset {RANDOM_INIT_ENV} and put {path.name!r} into "
                f"{str(path.parent)!r}."
            )
