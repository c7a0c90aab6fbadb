"""Shift-family registry: every implementation of a shift family, by (family, modality).

A family implementation (:class:`~tasks.data.families.ShiftFamily`) lists its target splits
and makes one from a dataset's target pool. This package knows no dataset: which families a
dataset uses, and which implementation serves it (a dataset may bring its own, such as
CIFAR-10-C), is :mod:`tasks.data.targets`' job.

The families are collected from the modules of this package (each defines ``FAMILIES``), so a
new family is one module; docs/SHIFTS.md has the full table.

=================  =========  ===================================================  ===============
family             modality   splits                                               module
=================  =========  ===================================================  ===============
``clean``          image      ``clean``: the in-distribution test pool             :mod:`.clean`
``clean``          graph      ``clean``: held-out year 2011 on its snapshot        :mod:`.structural`
``synthetic``      image      ``<corruption>-<severity>``, 18 x 5                  :mod:`.synthetic`
``label_shift``    image      ``label_shift-a<alpha>-d<draw>``, Dirichlet priors   :mod:`.label_shift`
``subpopulation``  image      ``subpop-novel<percent>``, novel sub-classes         :mod:`.subpopulation`
``domain``         image      ``mnistm-photo-<severity>``, photo-patch blend       :mod:`.domain`
``temporal``       graph      ``temporal-<year>``, 2015-2020 snapshots             :mod:`.temporal`
``structural``     graph      edge drop / feature noise / class priors, x 5        :mod:`.structural`
(7 families)       tabular    clean, covariate, noise and missing values, label    :mod:`.tabular`
                              shift, group reweighting, natural temporal/domain
=================  =========  ===================================================  ===============

Examples
--------
>>> SHIFT_FAMILIES[:3]
('clean', 'synthetic', 'label_shift')
>>> implementation("temporal", "graph").name
'temporal'
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Final

from tasks.data.families import SHIFT_SEED, ShiftFamily, TargetSplitSpec, split_rng

#: Names re-exported from family modules, resolved on first access (PEP 562) so that this
#: registry does not import image code for a graph dataset (and its code version stays apart).
_LAZY: Final[dict[str, str]] = {
    "BASE_SUBSET_SIZE": "clean",
    "base_subset": "clean",
    "CORRUPTIONS": "synthetic",
    "SEVERITIES": "synthetic",
    "available_corruptions": "synthetic",
    "corrupt": "synthetic",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "BASE_SUBSET_SIZE",
    "CORRUPTIONS",
    "SEVERITIES",
    "SHIFT_FAMILIES",
    "SHIFT_SEED",
    "ShiftFamily",
    "TargetSplitSpec",
    "available_corruptions",
    "base_subset",
    "corrupt",
    "implementation",
    "split_rng",
]

_NOT_FAMILY_MODULES: Final[frozenset[str]] = frozenset()


def _collect() -> dict[tuple[str, str], ShiftFamily]:
    found: dict[tuple[str, str], ShiftFamily] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in _NOT_FAMILY_MODULES:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for family in getattr(module, "FAMILIES", ()):
            for modality in family.modalities:
                if (family.name, modality) in found:
                    raise RuntimeError(
                        f"shift family {family.name!r} is implemented twice for {modality}."
                    )
                found[(family.name, modality)] = family
    return found


_IMPLEMENTATIONS: Final[dict[tuple[str, str], ShiftFamily]] = _collect()

#: The shift families, in report order.
SHIFT_FAMILIES: Final[tuple[str, ...]] = tuple(
    name
    for _, name in sorted({(f.order, f.name) for f in _IMPLEMENTATIONS.values()})
)


def implementation(family: str, modality: str) -> ShiftFamily:
    """The registered implementation of ``family`` for ``modality`` (not a dataset's own one:
    :func:`tasks.data.targets.family_implementation` looks at the dataset first).

    Raises
    ------
    ValueError
        If the family is unknown or has no implementation for the modality.
    """
    if family not in SHIFT_FAMILIES:
        raise ValueError(
            f"shift family must be one of {', '.join(SHIFT_FAMILIES)}; got {family!r}."
        )
    try:
        return _IMPLEMENTATIONS[(family, modality)]
    except KeyError:
        served = sorted(f for f, m in _IMPLEMENTATIONS if m == modality)
        raise ValueError(
            f"shift family {family!r} has no {modality} implementation; {modality} datasets "
            f"can use {', '.join(served)}."
        ) from None
