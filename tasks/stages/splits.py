"""On-disk cache of generated target splits, so a second run does not regenerate them.

Layout::

    <data_dir()>/shifts/<dataset>/<generator version>-<data digest>/<split>.npz

The *generator version* (:func:`generator_version`) is a SHA-256 over the source of the
modules that make that dataset's splits (:func:`tasks.stages.versions.module_closure` of the dataset's
module and of its families' implementations; not the training code): editing a
generator, a severity table or the dataset's pool definition starts a fresh folder instead of
reusing stale images, and editing another dataset changes nothing here. The data digest is the
first 12 hex digits of the staged dataset's ``DatasetRef.sha256``. Each ``.npz`` holds
``samples`` (raw form, ``uint8`` for Fashion-MNIST) and ``labels`` (``int64``) and is written
atomically (temporary file + rename), so concurrent or interrupted runs never leave a partial
file. When a new folder is started, the dataset's folders of other versions are deleted
(:func:`prune_stale_versions`), so the cache holds one version (about 90 MB for ``fmnist``).
Deleting ``<data_dir()>/shifts`` is always safe.

Modalities whose adapter says ``cache_splits = False`` (graphs: a split is a cheap view of the
dataset's graph, and storing perturbed copies would cost far more disk than regenerating), and
families that say ``cache = False`` (views of released test files: CIFAR-10-C's blocks, the
natural test sets), are generated on every call and never written.
"""

from __future__ import annotations

import logging
import re
import shutil
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from storage.paths import data_dir
from tasks.data.datasets import get_dataset_spec
from tasks.data.files import atomic_target
from tasks.data.spec import TargetPool
from tasks.runtime.refs import DatasetRef

from tasks.data.shifts import TargetSplitSpec
from tasks.data.targets import generate_split, get_target_split, target_splits

logger = logging.getLogger(__name__)

def _version_files(dataset: str) -> tuple[Path, ...]:
    """The split-generating code of one dataset: its module and its families' modules."""
    from tasks.data.targets import family_implementation
    from tasks.stages.versions import module_closure

    spec = get_dataset_spec(dataset)
    roots = ["tasks.data.families", spec.module]
    roots += [family_implementation(f, spec.modality, dataset).module for f in spec.target_families]
    return tuple(module_closure(tuple(dict.fromkeys(r for r in roots if r))))


def generator_version(dataset: str) -> str:
    """Digest of the code that generates one dataset's target splits: 12 hex digits.

    Parameters
    ----------
    dataset : str
        Dataset key.

    Returns
    -------
    str
        Changes whenever a module that makes this dataset's splits changes (its family
        implementations, the dataset's pool loader, what they import), and only then.
    """
    from tasks.stages.versions import files_version

    return files_version(_version_files(dataset), f"shifts/{dataset}")[:12]


def shift_cache_dir(dataset: DatasetRef, cache_root: Path | None = None) -> Path:
    """Folder of one dataset's cached target splits for this generator version.

    Parameters
    ----------
    dataset : DatasetRef
        Staged dataset.
    cache_root : Path, optional
        Root of the shift cache; default ``data_dir() / "shifts"``.

    Returns
    -------
    Path
        ``<cache_root>/<dataset>/<generator version>-<sha256[:12]>`` (not created here).
    """
    root = Path(cache_root) if cache_root is not None else data_dir() / "shifts"
    return root / dataset.name / f"{generator_version(dataset.name)}-{dataset.sha256[:12]}"


_VERSION_DIR = re.compile(r"^[0-9a-f]{12}-[0-9a-f]{12}$")


def prune_stale_versions(dataset: DatasetRef, cache_root: Path | None = None) -> list[Path]:
    """Delete the dataset's cache folders made by other generator versions or other data.

    Only folders named like ``<12 hex>-<12 hex>`` beside the current one are removed.

    Parameters
    ----------
    dataset : DatasetRef
        Staged dataset.
    cache_root : Path, optional
        Root of the shift cache; default ``data_dir() / "shifts"``.

    Returns
    -------
    list of Path
        The folders removed.
    """
    current = shift_cache_dir(dataset, cache_root)
    removed = []
    if current.parent.is_dir():
        for folder in current.parent.iterdir():
            if folder != current and folder.is_dir() and _VERSION_DIR.match(folder.name):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
                logger.info("removed stale shift cache %s", folder)
    return removed


def _read(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            images, labels = data["samples"], data["labels"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        logger.warning("ignoring unreadable cached split %s (%s); regenerating", path, exc)
        return None
    if images.shape[0] != labels.shape[0]:
        logger.warning("ignoring inconsistent cached split %s; regenerating", path)
        return None
    return images, labels


def _write(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    with atomic_target(path) as tmp, open(tmp, "wb") as handle:
        np.savez_compressed(handle, samples=images, labels=labels.astype(np.int64))


@dataclass
class _PoolLoader:
    """Loads the dataset's test pool once, on first need."""

    dataset: DatasetRef
    _pool: TargetPool | None = None

    def __call__(self) -> TargetPool:
        if self._pool is None:
            spec = get_dataset_spec(self.dataset.name)
            self._pool = spec.load_target_pool(Path(self.dataset.root))
        return self._pool


def load_target_split(
    dataset: DatasetRef,
    split: TargetSplitSpec | str,
    *,
    cache_root: Path | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One target split, from the cache or generated (and cached).

    Parameters
    ----------
    dataset : DatasetRef
        Staged dataset.
    split : TargetSplitSpec or str
        The split or its name.
    cache_root : Path, optional
        Root of the shift cache; default ``data_dir() / "shifts"``.

    Returns
    -------
    images, labels : numpy.ndarray
    """
    spec = get_target_split(dataset.name, split) if isinstance(split, str) else split
    folder = shift_cache_dir(dataset, cache_root)
    return _load_or_generate(dataset, spec, folder, _PoolLoader(dataset))


def _cacheable(dataset: DatasetRef, split: TargetSplitSpec) -> bool:
    from tasks.models.modalities import get_adapter
    from tasks.data.targets import family_implementation

    spec = get_dataset_spec(dataset.name)
    family = family_implementation(split.shift_family, spec.modality, spec.name)
    return bool(get_adapter(spec.modality).cache_splits and family.cache)


def _load_or_generate(
    dataset: DatasetRef, split: TargetSplitSpec, folder: Path, pool: _PoolLoader
) -> tuple[Any, np.ndarray]:
    if not _cacheable(dataset, split):
        return generate_split(dataset.name, split, pool())
    path = folder / f"{split.name}.npz"
    if path.is_file():
        cached = _read(path)
        if cached is not None:
            return cached
    images, labels = generate_split(dataset.name, split, pool())
    _write(path, images, labels)
    return images, labels


def iter_target_splits(
    dataset: DatasetRef, *, cache_root: Path | None = None
) -> Iterator[tuple[TargetSplitSpec, np.ndarray, np.ndarray]]:
    """Yield every target split of a dataset with its images and labels, caching as it goes.

    The test pool is loaded only if some split is not cached yet.

    Parameters
    ----------
    dataset : DatasetRef
        Staged dataset.
    cache_root : Path, optional
        Root of the shift cache; default ``data_dir() / "shifts"``.

    Yields
    ------
    split : TargetSplitSpec
    images, labels : numpy.ndarray
    """
    folder = shift_cache_dir(dataset, cache_root)
    if not folder.is_dir():
        prune_stale_versions(dataset, cache_root)
    pool = _PoolLoader(dataset)
    for split in target_splits(dataset.name):
        images, labels = _load_or_generate(dataset, split, folder, pool)
        yield split, images, labels


def prepare_target_splits(dataset: DatasetRef, *, cache_root: Path | None = None) -> Path:
    """Generate and cache every target split of a dataset that is not cached yet.

    Parameters
    ----------
    dataset : DatasetRef
        Staged dataset.
    cache_root : Path, optional
        Root of the shift cache; default ``data_dir() / "shifts"``.

    Returns
    -------
    Path
        The dataset's cache folder (:func:`shift_cache_dir`).
    """
    folder = shift_cache_dir(dataset, cache_root)
    splits = [s for s in target_splits(dataset.name) if _cacheable(dataset, s)]
    if not splits:
        return folder
    if not folder.is_dir():
        prune_stale_versions(dataset, cache_root)
    pool = _PoolLoader(dataset)
    for split in splits:
        path = folder / f"{split.name}.npz"
        if not path.is_file():
            images, labels = generate_split(dataset.name, split, pool())
            _write(path, images, labels)
    return folder
