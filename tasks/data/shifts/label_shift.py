"""Label shift: the test set resampled to class priors drawn from a symmetric Dirichlet.

A split of this family keeps the class-conditional distributions ``p(x | y)`` of the test set
and changes only the label marginal ``p(y)``: priors ``pi ~ Dirichlet(alpha * 1)`` are drawn with
a seeded generator, then ``round(n * pi_c)`` test images of class ``c`` are drawn without
replacement. Small ``alpha`` gives peaked priors (a few classes dominate), large ``alpha`` priors
close to uniform. When a class holds too few images for ``n * pi_c``, ``n`` is lowered for the
whole split so that the priors are still honoured exactly (up to rounding) and no image repeats.
"""

from __future__ import annotations

import numpy as np

from tasks.data.spec import TargetPool
from tasks.data.families import ShiftFamily, TargetSplitSpec
from tasks.data.shifts.clean import clean_indices


def dirichlet_priors(n_classes: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Draw class priors from a symmetric Dirichlet distribution.

    Parameters
    ----------
    n_classes : int
        Number of classes, at least 2.
    alpha : float
        Concentration, > 0.
    rng : numpy.random.Generator
        Seeded generator.

    Returns
    -------
    numpy.ndarray
        ``(n_classes,)`` ``float64`` priors summing to 1.

    Raises
    ------
    ValueError
        If ``n_classes < 2`` or ``alpha <= 0``.
    """
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2; got {n_classes!r}.")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0; got {alpha!r}.")
    priors = rng.dirichlet(np.full(n_classes, float(alpha)))
    return priors / priors.sum()


def prior_counts(priors: np.ndarray, available: np.ndarray, size: int) -> np.ndarray:
    """Per-class counts proportional to ``priors`` that fit into the available images.

    Parameters
    ----------
    priors : numpy.ndarray
        ``(c,)`` non-negative priors summing to 1.
    available : numpy.ndarray
        ``(c,)`` number of images of each class in the pool.
    size : int
        Requested split size.

    Returns
    -------
    numpy.ndarray
        ``(c,)`` ``int64`` counts, each at most ``available``, summing to
        ``min(size, floor(min_c available_c / priors_c))`` (largest-remainder rounding).

    Raises
    ------
    ValueError
        If a class with a positive prior has no images, or ``size < 1``.
    """
    priors = np.asarray(priors, dtype=np.float64)
    available = np.asarray(available, dtype=np.int64)
    if size < 1:
        raise ValueError(f"size must be >= 1; got {size!r}.")
    needed = priors > 0
    if np.any(available[needed] == 0):
        empty = np.flatnonzero(needed & (available == 0)).tolist()
        raise ValueError(f"classes {empty} have a positive prior but no images in the pool.")
    limit = np.min(available[needed] / priors[needed])
    n = int(min(size, np.floor(limit)))
    exact = priors * n
    counts = np.floor(exact).astype(np.int64)
    remainder = n - int(counts.sum())
    if remainder > 0:
        order = np.argsort(-(exact - counts), kind="stable")
        counts[order[:remainder]] += 1
    return np.minimum(counts, available)


def label_shift_indices(
    labels: np.ndarray,
    n_classes: int,
    alpha: float,
    size: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a label-shifted sample of the pool and the priors it honours.

    Parameters
    ----------
    labels : numpy.ndarray
        ``(m,)`` labels of the pool, in ``[0, n_classes)``.
    n_classes : int
        Number of classes.
    alpha : float
        Dirichlet concentration.
    size : int
        Requested number of images (fewer when the pool is short, see
        :func:`prior_counts`).
    rng : numpy.random.Generator
        Seeded generator: draws the priors first, then the images.

    Returns
    -------
    indices : numpy.ndarray
        Sorted ``int64`` indices into the pool, no repeats.
    priors : numpy.ndarray
        The drawn priors.
    """
    labels = np.asarray(labels)
    priors = dirichlet_priors(n_classes, alpha, rng)
    available = np.bincount(labels, minlength=n_classes)
    # A class absent from the pool cannot be sampled: its prior mass is spread over the others.
    priors = np.where(available > 0, priors, 0.0)
    priors = priors / priors.sum()
    counts = prior_counts(priors, available, size)
    parts = [
        rng.choice(np.flatnonzero(labels == c), size=int(k), replace=False)
        for c, k in enumerate(counts)
        if k > 0
    ]
    return np.sort(np.concatenate(parts)).astype(np.int64), priors


#: Dirichlet concentrations and draws per concentration of the label-shift family.
LABEL_SHIFT_ALPHAS: tuple[float, ...] = (0.3, 1.0, 5.0)
LABEL_SHIFT_DRAWS: int = 2
LABEL_SHIFT_SIZE: int = 2000


def label_shift_splits(size: int) -> list[TargetSplitSpec]:
    """The family's splits, ``size`` samples each: every alpha of :data:`LABEL_SHIFT_ALPHAS`
    times :data:`LABEL_SHIFT_DRAWS` draws (the text family uses a smaller size)."""
    return [
        TargetSplitSpec(
            f"label_shift-a{alpha:g}-d{draw}",
            "label_shift",
            f"dirichlet-a{alpha:g}",
            None,
            (("alpha", alpha), ("draw", float(draw)), ("size", float(size))),
        )
        for alpha in LABEL_SHIFT_ALPHAS
        for draw in range(1, LABEL_SHIFT_DRAWS + 1)
    ]


def _splits() -> list[TargetSplitSpec]:
    return label_shift_splits(LABEL_SHIFT_SIZE)


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    candidates = clean_indices(pool)
    local, _ = label_shift_indices(
        pool.labels[candidates], pool.n_classes, split.param("alpha"), int(split.param("size")),
        rng,
    )
    idx = candidates[local]
    return pool.samples[idx], pool.labels[idx]


#: Dirichlet-resampled class priors over the clean pool.
FAMILIES: tuple[ShiftFamily, ...] = (
    ShiftFamily("label_shift", 2, ("image",), _splits, _generate),
)
