"""Subpopulation shift (BREEDS style): classes keep their meaning, their sub-populations change.

The classifier was trained on some sub-populations of each class (for ``fmnist-coarse``: tops =
T-shirt/top + Pullover, footwear = Sandal + Sneaker, other = Trouser + Dress). A split of this
family draws, for every class, a fraction ``novel_fraction`` of its images from sub-populations
never seen in training (Coat + Shirt, Ankle boot, Bag) and the rest from the training
sub-populations, all from the test set. ``novel_fraction = 1`` is the pure BREEDS target; smaller
fractions give intermediate shifts.
"""

from __future__ import annotations

import math

import numpy as np

from tasks.data.spec import TargetPool
from tasks.data.families import ShiftFamily, TargetSplitSpec


def subpopulation_indices(
    labels: np.ndarray,
    subgroups: np.ndarray,
    source_subgroups: tuple[int, ...],
    novel_subgroups: tuple[int, ...],
    novel_fraction: float,
    per_class: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Indices of a mixture of seen and novel sub-populations, balanced over classes.

    Parameters
    ----------
    labels : numpy.ndarray
        ``(m,)`` class labels of the pool.
    subgroups : numpy.ndarray
        ``(m,)`` sub-population of every pool sample.
    source_subgroups, novel_subgroups : tuple of int
        Sub-populations seen / not seen in training.
    novel_fraction : float
        Fraction in ``[0, 1]`` of each class's images taken from novel sub-populations.
    per_class : int
        Images per class; lowered for a class (keeping ``novel_fraction``) when the pool holds
        too few images of the needed kind.
    rng : numpy.random.Generator
        Seeded generator; images are drawn uniformly without replacement within the seen and
        within the novel sub-populations of each class.

    Returns
    -------
    numpy.ndarray
        Sorted ``int64`` indices into the pool.

    Raises
    ------
    ValueError
        If ``novel_fraction`` is outside ``[0, 1]``, ``per_class < 1``, or a class lacks the
        needed sub-populations entirely.
    """
    if not 0.0 <= novel_fraction <= 1.0:
        raise ValueError(f"novel_fraction must be in [0, 1]; got {novel_fraction!r}.")
    if per_class < 1:
        raise ValueError(f"per_class must be >= 1; got {per_class!r}.")
    labels = np.asarray(labels)
    subgroups = np.asarray(subgroups)
    seen = np.isin(subgroups, source_subgroups)
    novel = np.isin(subgroups, novel_subgroups)
    parts = []
    for c in np.unique(labels):
        seen_idx = np.flatnonzero((labels == c) & seen)
        novel_idx = np.flatnonzero((labels == c) & novel)
        k = per_class
        if novel_fraction > 0:
            k = min(k, math.floor(novel_idx.size / novel_fraction))
        if novel_fraction < 1:
            k = min(k, math.floor(seen_idx.size / (1.0 - novel_fraction)))
        if k < 1:
            raise ValueError(
                f"class {int(c)} has {seen_idx.size} images of seen and {novel_idx.size} of "
                f"novel sub-populations; cannot draw a mixture with novel_fraction="
                f"{novel_fraction}."
            )
        n_novel = int(round(k * novel_fraction))
        parts.append(rng.choice(novel_idx, size=n_novel, replace=False))
        parts.append(rng.choice(seen_idx, size=k - n_novel, replace=False))
    return np.sort(np.concatenate(parts)).astype(np.int64)


#: Fractions of novel sub-population images (severities 1 to 4) and images per class.
SUBPOP_FRACTIONS: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
SUBPOP_PER_CLASS: int = 1000


def _splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(
            f"subpop-novel{round(frac * 100)}",
            "subpopulation",
            "novel_subclasses",
            sev,
            (("novel_fraction", frac), ("per_class", float(SUBPOP_PER_CLASS))),
        )
        for sev, frac in enumerate(SUBPOP_FRACTIONS, start=1)
    ]


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    if pool.subgroups is None:
        raise ValueError(
            f"split {split.name!r} needs a pool with sub-populations; dataset {dataset!r} "
            f"has none."
        )
    idx = subpopulation_indices(
        pool.labels,
        pool.subgroups,
        pool.source_subgroups,
        pool.novel_subgroups,
        split.param("novel_fraction"),
        int(split.param("per_class")),
        rng,
    )
    return pool.samples[idx], pool.labels[idx]


#: Novel sub-populations mixed into every class.
FAMILIES: tuple[ShiftFamily, ...] = (
    ShiftFamily("subpopulation", 3, ("image",), _splits, _generate),
)
