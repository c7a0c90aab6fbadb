"""What every shift family provides, and the seeding every split shares.

A family module defines ``FAMILIES``: a tuple of :class:`ShiftFamily`, each the implementation
of one family name for some modalities (``clean`` has one for arrays of images in
:mod:`.clean` and one for graphs in :mod:`.structural`). The registry
(:mod:`tasks.data.shifts`) collects them, so a dataset's splits depend on exactly the modules that
implement its families for its modality, which is what its cache keys hash.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from tasks.data.spec import TargetPool

__all__ = ["SHIFT_SEED", "ShiftFamily", "TargetSplitSpec", "split_rng"]

#: Base of every split's seed.
SHIFT_SEED: Final[int] = 0


@dataclass(frozen=True)
class TargetSplitSpec:
    """One target split of a dataset.

    Attributes
    ----------
    name : str
        Unique within a run, e.g. ``"gaussian_noise-3"``, ``"label_shift-a0.3-d1"``, ``"2017"``.
    shift_family : str
        A family of :data:`tasks.data.shifts.SHIFT_FAMILIES`.
    shift : str
        The shift within its family (``"gaussian_noise"``, ``"dirichlet-a0.3"``,
        ``"novel_subclasses"``, ``"mnistm-photo"``, ``"clean"``, ``"2017"``, ``"edge_drop"``).
    severity : int or None
        1 (mild) upwards for graded shifts; None for ``clean``, ``label_shift`` and
        ``temporal``.
    params : tuple of (str, float) pairs
        The generator's parameters, for documentation and reports.
    """

    name: str
    shift_family: str
    shift: str
    severity: int | None
    params: tuple[tuple[str, float], ...] = ()

    def param(self, key: str) -> float:
        """Value of parameter ``key``.

        Raises
        ------
        KeyError
            If the split has no such parameter.
        """
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(f"split {self.name!r} has no parameter {key!r}; it has {dict(self.params)}.")


@dataclass(frozen=True)
class ShiftFamily:
    """One family's implementation for some modalities.

    Attributes
    ----------
    name : str
        Family name, as stored in ``splits.shift_family``.
    order : int
        Position in reports (lower first).
    modalities : tuple of str
        Modalities this implementation serves.
    splits : callable
        ``splits() -> list[TargetSplitSpec]``: the family's splits (read at call time, so
        module constants can be patched in tests).
    generate : callable
        ``generate(dataset, split, pool, rng) -> (samples, labels)``: make one split from the
        dataset's target pool with the split's seeded generator.
    per_dataset : bool, default False
        True when the splits depend on the dataset: ``splits`` is then called as
        ``splits(spec)`` with the dataset's :class:`~tasks.data.spec.DatasetSpec` (the
        ``natural`` family lists each dataset's own test sets).
    cache : bool, default True
        Whether the shift cache (:mod:`tasks.stages.splits`) stores the generated splits. False
        for families whose splits are views of released files (CIFAR-10-C's blocks, a natural
        test set): storing them would only copy the release (2.9 GB for CIFAR-10-C).
    natural : bool, default False
        True when the splits are real data from another time, place or collection (a later
        year, another region), not rows generated or resampled here.
    concept_shift : bool, default False
        True when the family does not hold ``p(y | x)`` fixed: the labels may change meaning,
        or their relation to the inputs may drift (a later era of speeches; a later year or
        another region of a survey). Generated families (corruptions, selections on ``x``,
        class priors, sub-population weights over an input column) hold it fixed by
        construction and say False. Reports can show their figures with and without these
        rows.
    """

    name: str
    order: int
    modalities: tuple[str, ...]
    splits: Callable[..., list[TargetSplitSpec]]
    generate: Callable[[str, TargetSplitSpec, TargetPool, np.random.Generator], tuple[Any, np.ndarray]]
    per_dataset: bool = False
    cache: bool = True
    natural: bool = False
    concept_shift: bool = False

    def splits_of(self, dataset: Any) -> list[TargetSplitSpec]:
        """The family's splits for ``dataset``, a :class:`~tasks.data.spec.DatasetSpec` (the
        same for every dataset unless :attr:`per_dataset`)."""
        return list(self.splits(dataset) if self.per_dataset else self.splits())

    @property
    def module(self) -> str:
        """Dotted name of the module that implements the family (for code versions)."""
        return str(getattr(self.generate, "__module__", "") or "")


def split_rng(dataset: str, name: str) -> np.random.Generator:
    """The seeded generator of one split: ``SeedSequence([SHIFT_SEED, crc32(dataset/name)])``.

    Parameters
    ----------
    dataset, name : str
        Dataset key and split name (or ``"base"`` for the base subset).

    Returns
    -------
    numpy.random.Generator
    """
    return np.random.default_rng([SHIFT_SEED, zlib.crc32(f"{dataset}/{name}".encode())])


def subgroup_split(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The split whose samples are every pool sample of the split's ``subgroup`` parameter, in
    pool order (a released test set: CIFAR-10.1, ImageNetV2, MNIST-M, Office-31's DSLR, ...)."""
    if pool.subgroups is None:
        raise ValueError(
            f"split {split.name!r} needs a target pool whose subgroups mark each natural test "
            f"set; dataset {dataset!r} has none."
        )
    group = int(split.param("subgroup"))
    idx = np.flatnonzero(np.asarray(pool.subgroups) == group).astype(np.int64)
    if idx.size == 0:
        present = sorted(int(g) for g in np.unique(pool.subgroups))
        raise ValueError(
            f"split {split.name!r} needs the samples of pool sub-population {group}; the pool "
            f"of dataset {dataset!r} has none (it has sub-populations {present})."
        )
    return np.asarray(pool.samples)[idx], np.asarray(pool.labels)[idx]


def test_set_family(
    family: str, order: int, targets: tuple[tuple[str, str, int], ...]
) -> ShiftFamily:
    """A dataset's own implementation of ``family`` whose splits are released test sets.

    For :attr:`~tasks.data.datasets.DatasetSpec.own_families`: the paper files MNIST-M under
    ``synthetic`` and Office-31's DSLR/Webcam under ``domain``, yet both are test sets read from
    disk like a natural shift, not images corrupted here.

    Parameters
    ----------
    family : str
        Family name (one of :data:`tasks.data.shifts.SHIFT_FAMILIES`).
    order : int
        Report position of the family (the registry's order for that name).
    targets : tuple of (str, str, int)
        ``(split name, shift name, pool sub-population)`` of every split.

    Returns
    -------
    ShiftFamily
        An image family whose split ``name`` is every pool sample of its sub-population.
    """
    if not targets:
        raise ValueError(f"targets must list at least one (split, shift, subgroup); got {targets!r}.")
    fixed = tuple((str(n), str(s), int(g)) for n, s, g in targets)

    def splits() -> list[TargetSplitSpec]:
        return [
            TargetSplitSpec(name, family, shift, None, (("subgroup", float(group)),))
            for name, shift, group in fixed
        ]

    return ShiftFamily(family, order, ("image",), splits, subgroup_split, cache=False)
