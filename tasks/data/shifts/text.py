"""Shift families of the text modality: clean, label shift, domain (snippet to full review), and
temporal (eras of speeches). Text corruptions are in :mod:`.text_synthetic`.

A text dataset's :class:`~tasks.data.datasets.TargetPool` holds an ``object`` array of texts whose
``subgroups`` say where each came from: ``0`` for held-out texts of the source distribution (the
``clean`` pool), other ids for texts of another domain (``rt-reviews``: ``1`` = Pang & Lee full
reviews) or era (``sotu-party``: ``1..4`` = the eras of :data:`tasks.data.texts.TEXT_ERAS`).

=============  ===================================  ==============================================
family         splits                               how
=============  ===================================  ==============================================
``clean``      ``clean``                            every held-out source text (sub-population 0)
``label_shift``  ``label_shift-a<alpha>-d<draw>``   Dirichlet(alpha) class priors, alpha in
                                                    (0.3, 1, 5), 2 draws, 1,000 texts of the clean
                                                    pool (:mod:`.label_shift`'s sampler)
``domain``     ``reviews-<percent>``, severity 1-3  1,500 texts, 25 / 50 / 100 % of them full
                                                    reviews, the rest clean snippets
``temporal``   ``era-<first>-<last>``               every text of one later era
=============  ===================================  ==============================================

The domain mixtures grade the shift the way the image domain family grades its photo blend: the
share of out-of-domain texts rises with the severity, and the 100 % split is the full review set.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from tasks.data.spec import TargetPool
from tasks.data.families import ShiftFamily, TargetSplitSpec
from tasks.data.shifts.clean import clean_indices
from tasks.data.shifts.label_shift import label_shift_indices, label_shift_splits
from tasks.data.texts import TEXT_ERAS, take_texts

__all__ = [
    "DOMAIN_FRACTIONS",
    "DOMAIN_SIZE",
    "FAMILIES",
    "TEXT_LABEL_SHIFT_SIZE",
]

#: Texts per label-shift split (the clean pools of the text datasets hold ~1-2k texts).
TEXT_LABEL_SHIFT_SIZE: Final[int] = 1000
#: Share of full reviews in the domain splits of severity 1, 2, 3.
DOMAIN_FRACTIONS: Final[tuple[float, ...]] = (0.25, 0.5, 1.0)
#: Texts per domain split.
DOMAIN_SIZE: Final[int] = 1500


def _require_subgroups(pool: TargetPool, what: str) -> np.ndarray:
    if pool.subgroups is None:
        raise ValueError(
            f"the {what} split needs a target pool with sub-populations (0 = source texts, "
            "others = domains or eras); this dataset's pool has none."
        )
    return np.asarray(pool.subgroups)


def _clean_splits() -> list[TargetSplitSpec]:
    return [TargetSplitSpec("clean", "clean", "clean", None)]


def _clean(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    idx = clean_indices(pool)
    return take_texts(pool.samples, idx), pool.labels[idx]


def _label_splits() -> list[TargetSplitSpec]:
    return label_shift_splits(TEXT_LABEL_SHIFT_SIZE)


def _label_shift(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    candidates = clean_indices(pool)
    local, _ = label_shift_indices(
        pool.labels[candidates], pool.n_classes, split.param("alpha"),
        int(split.param("size")), rng,
    )
    idx = candidates[local]
    return take_texts(pool.samples, idx), pool.labels[idx]


def _domain_splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(
            f"reviews-{round(100 * f)}", "domain", "full-reviews", sev,
            (("fraction", f), ("size", float(DOMAIN_SIZE))),
        )
        for sev, f in enumerate(DOMAIN_FRACTIONS, start=1)
    ]


def _domain(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    groups = _require_subgroups(pool, "domain")
    novel = np.flatnonzero(np.isin(groups, pool.novel_subgroups))
    clean = clean_indices(pool)
    if novel.size == 0:
        raise ValueError("the domain split needs out-of-domain texts; the pool has none.")
    size = min(int(split.param("size")), novel.size)
    n_novel = int(round(split.param("fraction") * size))
    n_clean = min(size - n_novel, clean.size)
    idx = np.concatenate([
        rng.choice(novel, size=n_novel, replace=False),
        rng.choice(clean, size=n_clean, replace=False),
    ])
    idx = np.sort(idx).astype(np.int64)
    return take_texts(pool.samples, idx), pool.labels[idx]


def _temporal_splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(
            f"era-{first}-{last}", "temporal", f"{first}-{last}", None,
            (("era", float(era)), ("first_year", float(first)), ("last_year", float(last))),
        )
        for era, first, last in TEXT_ERAS
    ]


def _temporal(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    groups = _require_subgroups(pool, "temporal")
    idx = np.flatnonzero(groups == int(split.param("era"))).astype(np.int64)
    if idx.size == 0:
        raise ValueError(f"the pool holds no texts of era {split.shift} (split {split.name!r}).")
    return take_texts(pool.samples, idx), pool.labels[idx]


#: The text implementations of clean, label shift, domain and temporal.
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("clean", 0, ("text",), _clean_splits, _clean),
    ShiftFamily("label_shift", 2, ("text",), _label_splits, _label_shift),
    ShiftFamily("domain", 4, ("text",), _domain_splits, _domain),
    # sotu-party's eras: the party signal of 1853-1912 inverts later (natural, concept shift)
    ShiftFamily("temporal", 5, ("text",), _temporal_splits, _temporal, natural=True,
                concept_shift=True),
)
