"""Clean targets and the shared base subset of the generated shifts.

The ``clean`` split of a dataset is its whole in-distribution test pool (for ``fmnist`` the
10,000 test images; for ``fmnist-coarse`` the test images of the training sub-populations).
Note that the test set is class-balanced while the source is imbalanced 1:3, so even ``clean``
differs from the validation set in its label marginal, as in the paper's protocol.

Corrupted and photo-blended splits all start from one *base subset*: a fixed, seeded,
class-stratified sample of the clean pool (:func:`stratified_subset`), so every corruption and
severity is applied to the same images, as in CIFAR-10-C.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from tasks.data.spec import TargetPool
from tasks.data.families import ShiftFamily, TargetSplitSpec, split_rng


def clean_indices(pool: TargetPool) -> np.ndarray:
    """Indices of the clean target split: the pool's in-distribution samples.

    Parameters
    ----------
    pool : TargetPool
        Test pool of the dataset.

    Returns
    -------
    numpy.ndarray
        Sorted ``int64`` indices.
    """
    return pool.in_distribution_indices()


def stratified_subset(
    labels: np.ndarray, candidates: np.ndarray, size: int, rng: np.random.Generator
) -> np.ndarray:
    """A class-stratified random subset of ``candidates``: ``size // c`` per class.

    Parameters
    ----------
    labels : numpy.ndarray
        ``(m,)`` labels of the whole pool.
    candidates : numpy.ndarray
        Indices into the pool to choose from.
    size : int
        Requested subset size, >= 1; each of the ``c`` classes present gets ``size // c``
        samples (all of them when it has fewer).
    rng : numpy.random.Generator
        Seeded generator.

    Returns
    -------
    numpy.ndarray
        Sorted ``int64`` indices, no repeats.

    Raises
    ------
    ValueError
        If ``size < 1`` or there are no candidates.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1; got {size!r}.")
    candidates = np.asarray(candidates, dtype=np.int64)
    if candidates.size == 0:
        raise ValueError("candidates must hold at least one index; got none.")
    cand_labels = np.asarray(labels)[candidates]
    classes = np.unique(cand_labels)
    per_class = max(1, size // classes.size)
    parts = []
    for c in classes:
        members = candidates[cand_labels == c]
        k = min(per_class, members.size)
        parts.append(rng.choice(members, size=k, replace=False))
    return np.sort(np.concatenate(parts)).astype(np.int64)


#: Size of the class-stratified base subset that corruptions and photo blends are applied to.
BASE_SUBSET_SIZE: Final[int] = 2000


def base_subset(dataset: str, pool: TargetPool) -> np.ndarray:
    """Indices of the base subset that corruptions and photo blends are applied to.

    Parameters
    ----------
    dataset : str
        Dataset key (seeds the draw).
    pool : TargetPool
        Test pool of the dataset.

    Returns
    -------
    numpy.ndarray
        :data:`BASE_SUBSET_SIZE` clean indices, stratified by class (fewer for small pools).
    """
    return stratified_subset(
        pool.labels, clean_indices(pool), BASE_SUBSET_SIZE, split_rng(dataset, "base")
    )


def _splits() -> list[TargetSplitSpec]:
    return [TargetSplitSpec("clean", "clean", "clean", None)]


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    idx = clean_indices(pool)
    return pool.samples[idx], pool.labels[idx]


#: ``clean`` for arrays of samples (images); graphs have theirs in :mod:`.structural`.
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("clean", 0, ("image",), _splits, _generate),
)
