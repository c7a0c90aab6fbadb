"""The published ImageNet weights of the pretrained backbones: names, URLs, digests, places.

Kept out of the :mod:`tasks.models.backbones` package (whose registry imports torch) so that
the dataset registry, which lists these files as ``alsa-bench fetch imagenet``'s downloads, does
not import torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from storage.paths import data_dir

__all__ = ["WEIGHTS", "WEIGHTS_DIR", "PretrainedWeights", "remote_files", "weights_path"]

_HUB_PREFIX = re.compile(r"-([a-f0-9]{8,})\.")

#: Folder of the weight files, relative to the data root (``$ALSA_BENCH_HOME/data``).
WEIGHTS_DIR: Final[str] = "imagenet/weights"


@dataclass(frozen=True)
class PretrainedWeights:
    """One published weight file of a torchvision ImageNet classifier.

    Attributes
    ----------
    arch : str
        Name of the torchvision builder (``torchvision.models.<arch>``).
    url : str
        ``torchvision.models.<Arch>_Weights.IMAGENET1K_V1.url``.
    filename : str
        The URL's file name; torchvision's names carry the first hex digits of the SHA-256.
    sha256 : str
        Full pinned SHA-256, or "" when only the name's prefix is published.
    size : int or None
        Size in bytes when known.
    min_size : int
        Smallest input height and width the architecture accepts (torchvision's ``min_size``).
    """

    arch: str
    url: str
    filename: str
    sha256: str = ""
    size: int | None = None
    min_size: int = 1

    @property
    def prefix(self) -> str:
        """The SHA-256 prefix in the file name (torch hub's check), e.g. ``"7be5be79"``."""
        found = _HUB_PREFIX.search(self.filename)
        if found is None:
            raise ValueError(f"weights file name {self.filename!r} carries no SHA-256 prefix.")
        return found.group(1)


_BASE_URL: Final[str] = "https://download.pytorch.org/models/"

#: The published ``IMAGENET1K_V1`` weights of every pretrained backbone, by backbone key.
WEIGHTS: Final[dict[str, PretrainedWeights]] = {
    "alexnet": PretrainedWeights(
        arch="alexnet",
        url=_BASE_URL + "alexnet-owt-7be5be79.pth",
        filename="alexnet-owt-7be5be79.pth",
        sha256="7be5be791159472b1fbf3c69796f7cb30dca7ad8466c2df70058c37116cdee02",
        size=244_408_911,
        min_size=63,
    ),
    "mobilenet_v2": PretrainedWeights(
        arch="mobilenet_v2",
        url=_BASE_URL + "mobilenet_v2-b0353104.pth",
        filename="mobilenet_v2-b0353104.pth",
    ),
    "efficientnet_b0": PretrainedWeights(
        arch="efficientnet_b0",
        url=_BASE_URL + "efficientnet_b0_rwightman-7f5810bc.pth",
        filename="efficientnet_b0_rwightman-7f5810bc.pth",
        sha256="7f5810bc96def8f7552d5b7e68d53c4786f81167d28291b21c0d90e1fca14934",
        size=21_444_401,
    ),
}


def weights_path(name: str, root: Path | str | None = None) -> Path:
    """Where the weights of backbone ``name`` are read from (no IO).

    Parameters
    ----------
    name : str
        A key of :data:`WEIGHTS`.
    root : Path or str, optional
        Data root; default :func:`storage.paths.data_dir` (``$ALSA_BENCH_HOME/data``).

    Returns
    -------
    Path
        ``<root>/imagenet/weights/<filename>``.
    """
    entry = _entry(name)
    base = Path(root) if root is not None else data_dir()
    return base / WEIGHTS_DIR / entry.filename


def remote_files() -> tuple[Any, ...]:
    """The weight files that ``alsa-bench fetch imagenet`` downloads (those with a full digest).

    Returns
    -------
    tuple of tasks.data.spec.RemoteFile
        One per entry of :data:`WEIGHTS` with a pinned SHA-256, ``extract=False``, ``dest``
        :data:`WEIGHTS_DIR`.
    """
    # imported here: the dataset registry imports this module while it is being built
    from tasks.data.spec import RemoteFile

    return tuple(
        RemoteFile(
            url=w.url, filename=w.filename, sha256=w.sha256, size=w.size, extract=False,
            dest=WEIGHTS_DIR,
        )
        for w in WEIGHTS.values()
        if w.sha256
    )


def _entry(name: str) -> PretrainedWeights:
    try:
        return WEIGHTS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"pretrained backbone must be one of {', '.join(sorted(WEIGHTS))}; got {name!r}."
        ) from None
