"""What this machine has: every registered dataset, whether its files are here, its backbones.

``alsa-bench datasets`` prints :func:`dataset_status` for every dataset. It reads the dataset
registry (:mod:`tasks.data.datasets`) and, for a dataset that names no backbones, the backbone
registry (:mod:`tasks.models.backbones`) of its modality, so it sits above both.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from storage.paths import data_dir
from tasks.data.datasets import DatasetSpec, default_suites, get_dataset_spec, suite_group
from tasks.data.synthetic import is_synthetic

logger = logging.getLogger(__name__)

__all__ = ["DatasetStatus", "dataset_status"]


@dataclass(frozen=True)
class DatasetStatus:
    """What ``alsa-bench datasets`` shows about one registered dataset.

    Attributes
    ----------
    name, suite, modality : str
        Registry key, suite and modality.
    online : bool
        Whether the data comes from the internet (``alsa-bench fetch``).
    present : bool
        Whether every raw file the loaders read (``spec.raw_files(root)``) exists.
    size_bytes : int
        Bytes on disk of those files and folders that exist (folders counted recursively).
    backbones : tuple of str
        ``spec.backbones`` (in its order), then the backbones that name the dataset themselves
        (a plugin's); every registered backbone of the modality when the dataset names none.
    paper_row : str
        Row of the ALSA paper's tables the dataset reproduces ("" if none).
    fetchable : bool
        Whether ``alsa-bench fetch`` downloads it (the spec declares ``sources``).
    synthetic : bool
        Whether the data root holds a generated release of it (``benchmarks/synth_release.py``,
        marked by :func:`tasks.data.synthetic.marker_path`), not the real one.
    group : str
        The suite group whose ``--suite`` runs it (``"zoo"`` for a ``zoo-*`` suite), "" if none.
    in_default_bench : bool
        Whether the default benchmark (``alsa-bench run`` with no ``--suite``) runs it.
    source_package : str
        The package that ships the data, or ``"generated"`` ("" if not declared).
    licence : str
        The data's licence ("" if not declared).
    """

    name: str
    suite: str
    modality: str
    online: bool
    present: bool
    size_bytes: int
    backbones: tuple[str, ...]
    paper_row: str
    fetchable: bool
    synthetic: bool = False
    group: str = ""
    in_default_bench: bool = True
    source_package: str = ""
    licence: str = ""

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready dict with stable keys (``backbones`` as a list)."""
        record = asdict(self)
        record["backbones"] = list(self.backbones)
        return record


def dataset_status(name: str, root: Path | str | None = None) -> DatasetStatus:
    """Whether dataset ``name`` is on this machine, and what the listing shows about it.

    Parameters
    ----------
    name : str
        Registry key.
    root : Path or str, optional
        Data root; default :func:`storage.paths.data_dir`.

    Returns
    -------
    DatasetStatus

    Raises
    ------
    ValueError
        If ``name`` is not registered.
    """
    from tasks.models.backbones import backbones_for  # imports torch

    spec = get_dataset_spec(name)
    base = Path(root) if root is not None else data_dir()
    try:
        paths = [Path(p) for p in spec.raw_files(base)]
    except Exception as exc:  # noqa: BLE001 - a loader's layout check must not break the listing
        logger.debug("raw_files of %s failed: %s", name, exc)
        paths = []
    existing = [p for p in paths if p.exists()]
    return DatasetStatus(
        name=spec.name,
        suite=spec.suite,
        modality=spec.modality,
        online=spec.online,
        present=bool(paths) and len(existing) == len(paths),
        size_bytes=sum(_size_on_disk(p) for p in _outermost(existing)),
        backbones=_backbones(spec, backbones_for(spec)),
        paper_row=spec.paper_row,
        fetchable=bool(spec.sources),
        synthetic=is_synthetic(base, spec.name),
        group=suite_group(spec.suite),
        in_default_bench=spec.suite in default_suites(),
        source_package=spec.source_package,
        licence=spec.licence,
    )


def _outermost(paths: list[Path]) -> list[Path]:
    """The paths not inside another of them (a folder and its file are counted once)."""
    unique = sorted({p.absolute() for p in paths}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in unique:
        if not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def _backbones(spec: DatasetSpec, applying: tuple[str, ...]) -> tuple[str, ...]:
    """The dataset's own list first (in its order), then the backbones naming the dataset."""
    own = [b for b in spec.backbones or () if b in applying]
    return (*own, *[b for b in applying if b not in own]) if spec.backbones is not None \
        else applying


def _size_on_disk(path: Path) -> int:
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    except OSError:
        return 0
