"""Shift registry: the target splits of every dataset, and how each is generated.

Every target split is a :class:`TargetSplitSpec` (name, shift family, shift, severity,
parameters). :func:`target_splits` lists a dataset's splits from the families its
:class:`~tasks.datasets.DatasetSpec` names; :func:`generate_split` makes one from the dataset's
test pool, deterministically: its random generator is seeded by :data:`SHIFT_SEED` and a CRC-32
of ``"<dataset>/<split name>"`` (:func:`split_rng`). Generated splits are cached on disk by
:mod:`tasks.shifts.cache`.

Families (exactly these five; docs/SHIFTS.md has the full table):

=================  ==================================================  ==========================
family             splits                                              module
=================  ==================================================  ==========================
``clean``          ``clean``: the in-distribution test pool            :mod:`.clean`
``synthetic``      ``<corruption>-<severity>``, 18 x 5                 :mod:`.synthetic`
``label_shift``    ``label_shift-a<alpha>-d<draw>``, Dirichlet priors  :mod:`.label_shift`
``subpopulation``  ``subpop-novel<percent>``, novel sub-classes         :mod:`.subpopulation`
``domain``         ``mnistm-photo-<severity>``, photo-patch blend      :mod:`.domain`
=================  ==================================================  ==========================

Examples
--------
>>> names = [s.name for s in target_splits("fmnist-coarse")]
>>> names[:3]
['clean', 'subpop-novel25', 'subpop-novel50']
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Final

import numpy as np

from tasks.datasets import get_dataset_spec
from tasks.datasets.base import TargetPool

from .clean import clean_indices, stratified_subset
from .domain import mnistm_blend
from .label_shift import label_shift_indices
from .subpopulation import subpopulation_indices
from .synthetic import CORRUPTIONS, SEVERITIES, available_corruptions, corrupt

__all__ = [
    "CORRUPTIONS",
    "SHIFT_FAMILIES",
    "TargetSplitSpec",
    "available_corruptions",
    "corrupt",
    "generate_split",
    "get_target_split",
    "split_rng",
    "target_splits",
]

#: The shift families, in report order.
SHIFT_FAMILIES: Final[tuple[str, ...]] = (
    "clean",
    "synthetic",
    "label_shift",
    "subpopulation",
    "domain",
)

#: Base of every split's seed.
SHIFT_SEED: Final[int] = 0

#: Size of the class-stratified base subset that corruptions and photo blends are applied to.
BASE_SUBSET_SIZE: Final[int] = 2000

#: Dirichlet concentrations and draws per concentration of the label-shift family.
LABEL_SHIFT_ALPHAS: Final[tuple[float, ...]] = (0.3, 1.0, 5.0)
LABEL_SHIFT_DRAWS: Final[int] = 2
LABEL_SHIFT_SIZE: Final[int] = 2000

#: Fractions of novel sub-population images (severities 1 to 4) and images per class.
SUBPOP_FRACTIONS: Final[tuple[float, ...]] = (0.25, 0.5, 0.75, 1.0)
SUBPOP_PER_CLASS: Final[int] = 1000

#: Photo-patch intensity of domain severities 1 to 3.
DOMAIN_INTENSITIES: Final[tuple[float, ...]] = (0.4, 0.7, 1.0)


@dataclass(frozen=True)
class TargetSplitSpec:
    """One target split of a dataset.

    Attributes
    ----------
    name : str
        Unique within a run, e.g. ``"gaussian_noise-3"``, ``"label_shift-a0.3-d1"``.
    shift_family : str
        One of :data:`SHIFT_FAMILIES`.
    shift : str
        The shift within its family (``"gaussian_noise"``, ``"dirichlet-a0.3"``,
        ``"novel_subclasses"``, ``"mnistm-photo"``, ``"clean"``).
    severity : int or None
        1 (mild) upwards for graded shifts; None for ``clean`` and ``label_shift``.
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


def _family_splits(family: str) -> list[TargetSplitSpec]:
    if family == "clean":
        return [TargetSplitSpec("clean", "clean", "clean", None)]
    if family == "synthetic":
        return [
            TargetSplitSpec(
                f"{name}-{sev}",
                "synthetic",
                name,
                sev,
                (("level", float(c.levels[sev - 1])), ("size", float(BASE_SUBSET_SIZE))),
            )
            for name, c in CORRUPTIONS.items()
            for sev in SEVERITIES
        ]
    if family == "label_shift":
        return [
            TargetSplitSpec(
                f"label_shift-a{alpha:g}-d{draw}",
                "label_shift",
                f"dirichlet-a{alpha:g}",
                None,
                (("alpha", alpha), ("draw", float(draw)), ("size", float(LABEL_SHIFT_SIZE))),
            )
            for alpha in LABEL_SHIFT_ALPHAS
            for draw in range(1, LABEL_SHIFT_DRAWS + 1)
        ]
    if family == "subpopulation":
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
    if family == "domain":
        return [
            TargetSplitSpec(
                f"mnistm-photo-{sev}",
                "domain",
                "mnistm-photo",
                sev,
                (("intensity", beta), ("size", float(BASE_SUBSET_SIZE))),
            )
            for sev, beta in enumerate(DOMAIN_INTENSITIES, start=1)
        ]
    raise ValueError(f"shift family must be one of {', '.join(SHIFT_FAMILIES)}; got {family!r}.")


def target_splits(dataset: str) -> tuple[TargetSplitSpec, ...]:
    """Every target split of a dataset, families in :data:`SHIFT_FAMILIES` order.

    Parameters
    ----------
    dataset : str
        Dataset registry key.

    Returns
    -------
    tuple of TargetSplitSpec
        Names are unique; none is ``"val"``.

    Raises
    ------
    ValueError
        If the dataset is unknown or lists an unknown family.
    """
    spec = get_dataset_spec(dataset)
    unknown = [f for f in spec.target_families if f not in SHIFT_FAMILIES]
    if unknown:
        raise ValueError(
            f"dataset {dataset!r} lists unknown shift families {unknown}; expected a subset of "
            f"{', '.join(SHIFT_FAMILIES)}."
        )
    out: list[TargetSplitSpec] = []
    for family in SHIFT_FAMILIES:
        if family in spec.target_families:
            out.extend(_family_splits(family))
    return tuple(out)


def get_target_split(dataset: str, name: str) -> TargetSplitSpec:
    """Look up one target split of a dataset by name.

    Raises
    ------
    ValueError
        If the dataset has no split of that name; the message lists a few valid names.
    """
    splits = target_splits(dataset)
    for split in splits:
        if split.name == name:
            return split
    examples = ", ".join(s.name for s in splits[:6])
    raise ValueError(
        f"split must be a target split of {dataset!r} ({len(splits)} splits, e.g. {examples}); "
        f"got {name!r}."
    )


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


def generate_split(
    dataset: str, split: TargetSplitSpec, pool: TargetPool
) -> tuple[np.ndarray, np.ndarray]:
    """Make one target split from the dataset's test pool.

    Parameters
    ----------
    dataset : str
        Dataset key (part of the seed).
    split : TargetSplitSpec
        The split to make (from :func:`target_splits`).
    pool : TargetPool
        Test pool of the dataset.

    Returns
    -------
    images : numpy.ndarray
        Samples in the pool's raw form and dtype.
    labels : numpy.ndarray
        ``int64`` labels in the model's label space.

    Raises
    ------
    ValueError
        If the split's family is unknown, or a subpopulation split is asked of a pool without
        sub-populations.
    """
    rng = split_rng(dataset, split.name)
    family = split.shift_family
    if family == "clean":
        idx = clean_indices(pool)
        return pool.images[idx], pool.labels[idx]
    if family == "synthetic":
        idx = base_subset(dataset, pool)
        images = corrupt(pool.images[idx], split.shift, int(split.severity or 0), rng)
        return images, pool.labels[idx]
    if family == "domain":
        idx = base_subset(dataset, pool)
        return mnistm_blend(pool.images[idx], split.param("intensity"), rng), pool.labels[idx]
    if family == "label_shift":
        candidates = clean_indices(pool)
        local, _ = label_shift_indices(
            pool.labels[candidates],
            pool.n_classes,
            split.param("alpha"),
            int(split.param("size")),
            rng,
        )
        idx = candidates[local]
        return pool.images[idx], pool.labels[idx]
    if family == "subpopulation":
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
        return pool.images[idx], pool.labels[idx]
    raise ValueError(
        f"split.shift_family must be one of {', '.join(SHIFT_FAMILIES)}; got {family!r}."
    )
