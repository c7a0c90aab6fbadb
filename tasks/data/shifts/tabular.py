"""Shift families of the tabular modality: clean, covariate, noise and missing values, label
shift, sub-population weights, and the natural temporal and domain splits.

A tabular dataset's :class:`~tasks.data.spec.TargetPool` holds a :class:`~tasks.data.tables.Table`
whose ``subgroups`` say where each row came from: ``0`` for held-out rows of the source
distribution (the *clean pool*), other ids for rows of a later period or another place (the
dataset's :attr:`~tasks.data.spec.DatasetSpec.natural_targets`). Every generated family works on
the clean pool only, so its splits differ from ``clean`` by the one mechanism it names.

=================  =====================================  =========================================
family             splits                                 how (on the clean pool)
=================  =====================================  =========================================
``clean``          ``clean``                              every clean row
``covariate``      ``cov-<col>-top50`` (severity 1),      rows whose value of a declared numeric
                   ``-top25`` (2), ``-bottom25`` (2)      column is at or above the pool's 50th /
                                                          75th percentile, or at or below its 25th
                   ``cluster-<k>``, k = 1..3              the rows of one of 3 k-means clusters of
                                                          the numeric columns' ranks
                                                          (largest first)
``synthetic``      ``noise-<s>``, ``missing-<s>``,        noise: Gaussian noise of
                   s = 1..3                               ``(0.25, 0.5, 1.0)`` column standard
                                                          deviations on numeric cells, and a
                                                          categorical cell replaced by a random
                                                          level with probability ``(0.1, 0.2,
                                                          0.4)``; missing: each cell made missing
                                                          with probability ``(0.1, 0.25, 0.5)``
``label_shift``    ``label_shift-a<alpha>-d<draw>``       Dirichlet(alpha) class priors, alpha in
                                                          (0.3, 1, 5), 2 draws, up to 1,000 rows
                                                          (:mod:`.label_shift`'s sampler)
``subpopulation``  ``subpop-<col>=<level>-<pct>``,        rows drawn so that ``pct`` % come from
                   pct in (75, 100)                       one level of a declared categorical
                                                          input column (group reweighting)
``temporal``       the dataset's ``natural_targets``      every row of one later period
``domain``         the dataset's ``natural_targets``      every row of one other place or site
=================  =====================================  =========================================

Severities are nested: the noise of severity ``s`` is the same draw scaled up, and the cells
made missing (or swapped) at severity ``s`` are a subset of those at ``s + 1`` (one uniform draw
per cell compared against a rising threshold), so a corruption never gets milder as ``s`` rises.

Concept shift
-------------
Every generated family holds ``p(y | x)`` fixed by construction: covariate and cluster splits
select rows by their inputs, sub-population splits reweight a column the model reads, label
shift keeps ``p(x | y)``, and noise and missing values corrupt the inputs of rows whose labels
are kept. The natural families do not: arrest-release practice, voting intentions or insurance
take-up relate to the same inputs differently in another year or another region, so ``temporal``
and ``domain`` declare ``natural=True`` and ``concept_shift=True`` (partly concept: the labels
keep their names, the relation to the inputs may drift). Reports can show their figures with and
without those rows.
"""

from __future__ import annotations

import re
from typing import Any, Final

import numpy as np
from scipy.stats import rankdata

from tasks.data.families import ShiftFamily, TargetSplitSpec, split_rng
from tasks.data.shifts.clean import clean_indices
from tasks.data.shifts.label_shift import label_shift_indices, label_shift_splits
from tasks.data.spec import TargetPool
from tasks.data.tables import Table

__all__ = [
    "CLUSTERS",
    "FAMILIES",
    "MISSING_RATES",
    "NOISE_SCALES",
    "SUBPOP_SHARES",
    "SWAP_RATES",
    "TABULAR_LABEL_SHIFT_SIZE",
    "corrupt_missing",
    "corrupt_noise",
    "kmeans_labels",
    "quantile_rows",
    "subpop_rows",
]

#: Rows per label-shift split (fewer when the clean pool is short).
TABULAR_LABEL_SHIFT_SIZE: Final[int] = 1000
#: Gaussian noise of each severity, in column standard deviations.
NOISE_SCALES: Final[tuple[float, ...]] = (0.25, 0.5, 1.0)
#: Probability that a categorical cell takes a random level, per severity (``noise-<s>``).
SWAP_RATES: Final[tuple[float, ...]] = (0.1, 0.2, 0.4)
#: Probability that a cell is made missing, per severity.
MISSING_RATES: Final[tuple[float, ...]] = (0.1, 0.25, 0.5)
#: Share of rows from the over-represented level, per severity.
SUBPOP_SHARES: Final[tuple[float, ...]] = (0.75, 1.0)
#: k of the k-means clustering of the covariate family.
CLUSTERS: Final[int] = 3
#: Quantile selections of the covariate family: (suffix, side, quantile, severity).
_QUANTILE_SPLITS: Final[tuple[tuple[str, str, float, int], ...]] = (
    ("top50", "top", 0.5, 1), ("top25", "top", 0.75, 2), ("bottom25", "bottom", 0.25, 2),
)
_KMEANS_ITERATIONS: Final[int] = 100


def _slug(text: str) -> str:
    """``text`` for a split name: runs of characters other than letters, digits, ``.`` and
    ``>``/``<`` become one ``_`` (``"mean radius"`` -> ``"mean_radius"``)."""
    return re.sub(r"[^A-Za-z0-9.<>]+", "_", text).strip("_") or "_"


def _table(pool: TargetPool, where: str) -> Table:
    if not isinstance(pool.samples, Table):
        raise ValueError(
            f"the {where} split needs a tabular target pool (a Table); got "
            f"{type(pool.samples).__name__}."
        )
    return pool.samples


def _params(spec: Any, key: str) -> Any:
    params = getattr(spec, "shift_params", {}) or {}
    if key not in params:
        raise ValueError(
            f"dataset {getattr(spec, 'name', '?')!r} lists a tabular family that needs "
            f"shift_params[{key!r}]; its shift_params have {sorted(params)}."
        )
    return params[key]


# ----------------------------------------------------------------------------------- clean
def _clean_splits() -> list[TargetSplitSpec]:
    return [TargetSplitSpec("clean", "clean", "clean", None)]


def _clean(dataset: str, split: TargetSplitSpec, pool: TargetPool,
           rng: np.random.Generator) -> tuple[Table, np.ndarray]:
    idx = clean_indices(pool)
    return _table(pool, "clean").take(idx), pool.labels[idx]


# ------------------------------------------------------------------------------- covariate
def quantile_rows(values: np.ndarray, side: str, q: float) -> np.ndarray:
    """Positions of the rows at or above (``side="top"``) or at or below (``"bottom"``) the
    ``q``-quantile of ``values`` (missing values are never selected).

    Raises
    ------
    ValueError
        If ``side`` is unknown, ``q`` is outside ``[0, 1]`` or every value is missing.

    Examples
    --------
    >>> quantile_rows(np.array([1.0, 5.0, np.nan, 3.0, 4.0]), "top", 0.5).tolist()
    [1, 4]
    """
    if side not in ("top", "bottom"):
        raise ValueError(f"side must be 'top' or 'bottom'; got {side!r}.")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1]; got {q!r}.")
    values = np.asarray(values, dtype=np.float64)
    present = ~np.isnan(values)
    if not present.any():
        raise ValueError("the column holds no value to select rows by (every value is missing).")
    cut = float(np.quantile(values[present], q))
    # NaN compares False either way, so a missing value is never selected
    keep = values >= cut if side == "top" else values <= cut
    return np.flatnonzero(keep).astype(np.int64)


def kmeans_labels(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Cluster of every row of ``x`` by Lloyd's k-means with k-means++ seeding, renumbered so
    that cluster 0 is the largest.

    Columns are put on their ranks first (each value becomes its empirical CDF in ``[0, 1]``,
    ties sharing their mean rank; a missing value takes 0.5), so that a heavy-tailed column
    (a job's iteration count, an income) spreads the rows instead of isolating a few outliers
    in a cluster of their own. Lloyd's iterations stop when no assignment changes (at most 100).

    Parameters
    ----------
    x : numpy.ndarray
        ``(n, d)`` values, ``NaN`` allowed.
    k : int
        Number of clusters, ``1 <= k <= n``.
    rng : numpy.random.Generator
        Seeded generator (k-means++ draws).

    Returns
    -------
    numpy.ndarray
        ``(n,)`` ``int64`` cluster ids in ``[0, k)``.

    Raises
    ------
    ValueError
        If ``k`` is out of range or ``x`` has no column.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] == 0:
        raise ValueError(f"x must be (n, d) with d >= 1; got shape {x.shape}.")
    n = x.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..{n} (the number of rows); got {k!r}.")
    z = np.full(x.shape, 0.5)
    for j in range(x.shape[1]):
        present = ~np.isnan(x[:, j])
        if present.sum() > 1:
            z[present, j] = (rankdata(x[present, j]) - 1) / (present.sum() - 1)
    centres = [z[int(rng.integers(n))]]
    for _ in range(1, k):
        d2 = np.min(((z[:, None, :] - np.array(centres)[None]) ** 2).sum(-1), axis=1)
        total = d2.sum()
        pick = int(rng.choice(n, p=d2 / total)) if total > 0 else int(rng.integers(n))
        centres.append(z[pick])
    c = np.array(centres)
    labels = np.full(n, -1, dtype=np.int64)
    for _ in range(_KMEANS_ITERATIONS):
        new = np.argmin(((z[:, None, :] - c[None]) ** 2).sum(-1), axis=1).astype(np.int64)
        if np.array_equal(new, labels):
            break
        labels = new
        c = np.array([z[labels == j].mean(axis=0) if np.any(labels == j) else c[j]
                      for j in range(k)])
    sizes = np.bincount(labels, minlength=k)
    order = np.argsort(-sizes, kind="stable")
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    return rank[labels]


def _covariate_splits(spec: Any) -> list[TargetSplitSpec]:
    columns = tuple(_params(spec, "covariate_columns"))
    out = [
        TargetSplitSpec(f"cov-{_slug(col)}-{suffix}", "covariate", f"{col}-{suffix}", sev,
                        (("quantile", q), ("top", 1.0 if side == "top" else 0.0)))
        for col in columns
        for suffix, side, q, sev in _QUANTILE_SPLITS
    ]
    out += [
        TargetSplitSpec(f"cluster-{j + 1}", "covariate", "kmeans", None,
                        (("cluster", float(j)), ("k", float(CLUSTERS))))
        for j in range(CLUSTERS)
    ]
    return out


def _covariate(dataset: str, split: TargetSplitSpec, pool: TargetPool,
               rng: np.random.Generator) -> tuple[Table, np.ndarray]:
    table = _table(pool, "covariate")
    clean = clean_indices(pool)
    rows = table.take(clean)
    if split.shift == "kmeans":
        # one clustering per dataset (its own seed), whichever cluster split asks
        labels = kmeans_labels(rows.numeric, int(split.param("k")),
                               split_rng(dataset, "kmeans"))
        local = np.flatnonzero(labels == int(split.param("cluster"))).astype(np.int64)
    else:
        col = split.shift.rsplit("-", 1)[0]
        side = "top" if split.param("top") == 1.0 else "bottom"
        local = quantile_rows(rows.numeric_column(col), side, split.param("quantile"))
    if local.size == 0:
        raise ValueError(f"split {split.name!r} of {dataset!r} selects no row of the clean pool.")
    idx = clean[local]
    return table.take(idx), pool.labels[idx]


# ------------------------------------------------------------------------------- synthetic
def corrupt_noise(table: Table, severity: int, rng: np.random.Generator,
                  scale: np.ndarray | None = None) -> Table:
    """Gaussian noise on numeric cells and random level swaps on categorical cells.

    Numeric cell ``(i, j)`` becomes ``x + NOISE_SCALES[s-1] * sd_j * e_ij`` with ``e ~ N(0, 1)``
    (``sd_j`` the column's standard deviation over ``table``, or ``scale``); a categorical cell
    takes a uniformly drawn level when ``u_ij < SWAP_RATES[s-1]``. The draws ``e`` and ``u`` do
    not depend on the severity, so severities are nested. Missing cells stay missing.

    Raises
    ------
    ValueError
        If ``severity`` is not in 1..3.
    """
    s = _severity(severity, NOISE_SCALES)
    e = rng.standard_normal(table.numeric.shape)
    u = rng.random(table.categorical.shape)
    draws = rng.random(table.categorical.shape)
    sd = np.nanstd(table.numeric, axis=0) if scale is None else np.asarray(scale, np.float64)
    sd = np.where(np.isfinite(sd), sd, 0.0)
    numeric = table.numeric + NOISE_SCALES[s - 1] * sd[None, :] * e
    sizes = np.array(table.level_counts, dtype=np.int64)
    new_levels = np.floor(draws * sizes[None, :]).astype(np.int64) if sizes.size else draws.astype(
        np.int64)
    swap = (u < SWAP_RATES[s - 1]) & (table.categorical >= 0)
    categorical = np.where(swap, new_levels, table.categorical)
    return table.replace_values(numeric, categorical)


def corrupt_missing(table: Table, severity: int, rng: np.random.Generator) -> Table:
    """Each cell made missing when ``u_ij < MISSING_RATES[s-1]`` (``u`` one uniform draw per
    cell, the same for every severity, so the missing cells of ``s`` are a subset of ``s+1``'s).

    Raises
    ------
    ValueError
        If ``severity`` is not in 1..3.
    """
    s = _severity(severity, MISSING_RATES)
    u_num = rng.random(table.numeric.shape)
    u_cat = rng.random(table.categorical.shape)
    rate = MISSING_RATES[s - 1]
    numeric = np.where(u_num < rate, np.nan, table.numeric)
    categorical = np.where(u_cat < rate, -1, table.categorical)
    return table.replace_values(numeric, categorical)


def _severity(severity: int, table: tuple[float, ...]) -> int:
    if (isinstance(severity, bool) or not isinstance(severity, int)
            or not 1 <= severity <= len(table)):
        raise ValueError(f"severity must be an integer in 1..{len(table)}; got {severity!r}.")
    return severity


def _synthetic_splits() -> list[TargetSplitSpec]:
    out = []
    for kind, rates in (("noise", NOISE_SCALES), ("missing", MISSING_RATES)):
        for sev, value in enumerate(rates, start=1):
            out.append(TargetSplitSpec(f"{kind}-{sev}", "synthetic", kind, sev,
                                       (("level", value),)))
    return out


def _synthetic(dataset: str, split: TargetSplitSpec, pool: TargetPool,
               rng: np.random.Generator) -> tuple[Table, np.ndarray]:
    table = _table(pool, "synthetic")
    idx = clean_indices(pool)
    rows = table.take(idx)
    # one draw per corruption kind (not per split), so the severities are nested
    draw = split_rng(dataset, f"tabular-{split.shift}")
    if split.shift == "noise":
        out = corrupt_noise(rows, int(split.severity or 0), draw)
    elif split.shift == "missing":
        out = corrupt_missing(rows, int(split.severity or 0), draw)
    else:
        raise ValueError(f"unknown tabular corruption {split.shift!r} (split {split.name!r}).")
    return out, pool.labels[idx]


# ----------------------------------------------------------------------------- label shift
def _label_splits() -> list[TargetSplitSpec]:
    return label_shift_splits(TABULAR_LABEL_SHIFT_SIZE)


def _label_shift(dataset: str, split: TargetSplitSpec, pool: TargetPool,
                 rng: np.random.Generator) -> tuple[Table, np.ndarray]:
    candidates = clean_indices(pool)
    local, _ = label_shift_indices(pool.labels[candidates], pool.n_classes,
                                   split.param("alpha"), int(split.param("size")), rng)
    idx = candidates[local]
    return _table(pool, "label_shift").take(idx), pool.labels[idx]


# --------------------------------------------------------------------------- subpopulation
def subpop_rows(in_group: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """Positions of a sample in which a fraction ``share`` of the rows are in the group.

    As many rows as the pool allows: ``n = min(n_in / share, n_out / (1 - share))`` (``n_in``
    alone when ``share = 1``), ``round(share * n)`` drawn from the group and the rest from
    outside it, without replacement.

    Raises
    ------
    ValueError
        If ``share`` is outside ``(0, 1]`` or the group is empty.

    Examples
    --------
    >>> rows = subpop_rows(np.array([True] * 30 + [False] * 70), 0.75, np.random.default_rng(0))
    >>> len(rows), int((rows < 30).sum())
    (40, 30)
    """
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1]; got {share!r}.")
    in_group = np.asarray(in_group, dtype=bool)
    inside, outside = np.flatnonzero(in_group), np.flatnonzero(~in_group)
    if inside.size == 0:
        raise ValueError("the group has no row in the pool; a sub-population split needs some.")
    n = inside.size / share
    if share < 1.0:
        n = min(n, outside.size / (1.0 - share))
    n_in = min(inside.size, int(round(share * n)))
    n_out = min(outside.size, int(np.floor(n)) - n_in) if share < 1.0 else 0
    parts = [rng.choice(inside, size=n_in, replace=False),
             rng.choice(outside, size=max(n_out, 0), replace=False)]
    return np.sort(np.concatenate(parts)).astype(np.int64)


def _subpop_splits(spec: Any) -> list[TargetSplitSpec]:
    column = str(_params(spec, "subpop_column"))
    levels = tuple(_params(spec, "subpop_levels"))
    return [
        TargetSplitSpec(f"subpop-{_slug(column)}={_slug(level)}-{round(share * 100)}",
                        "subpopulation",
                        f"{column}={level}", sev, (("share", share),))
        for level in levels
        for sev, share in enumerate(SUBPOP_SHARES, start=1)
    ]


def _subpop(dataset: str, split: TargetSplitSpec, pool: TargetPool,
            rng: np.random.Generator) -> tuple[Table, np.ndarray]:
    table = _table(pool, "subpopulation")
    column, level = split.shift.split("=", 1)
    if column not in table.categorical_names:
        raise ValueError(
            f"split {split.name!r} reweights column {column!r}, which is not a categorical "
            f"column of {dataset!r} ({list(table.categorical_names)})."
        )
    levels = table.levels[table.categorical_names.index(column)]
    if level not in levels:
        raise ValueError(f"split {split.name!r}: column {column!r} has no level {level!r} "
                         f"(it has {list(levels)}).")
    clean = clean_indices(pool)
    codes = table.take(clean).categorical_column(column)
    local = subpop_rows(codes == levels.index(level), split.param("share"), rng)
    idx = clean[local]
    return table.take(idx), pool.labels[idx]


# ------------------------------------------------------------------------------- natural
def _natural_splits(family: str) -> Any:
    def splits(spec: Any) -> list[TargetSplitSpec]:
        if not spec.natural_targets:
            raise ValueError(
                f"dataset {spec.name!r} lists the {family} family but no natural_targets "
                "(split name, shift name, pool sub-population) to make its splits from."
            )
        return [TargetSplitSpec(name, family, shift, None, (("subgroup", float(group)),))
                for name, shift, group in spec.natural_targets]

    return splits


def _natural(dataset: str, split: TargetSplitSpec, pool: TargetPool,
             rng: np.random.Generator) -> tuple[Table, np.ndarray]:
    table = _table(pool, split.shift_family)
    if pool.subgroups is None:
        raise ValueError(f"split {split.name!r} needs a pool whose subgroups mark each period "
                         f"or place; dataset {dataset!r} has none.")
    group = int(split.param("subgroup"))
    idx = np.flatnonzero(np.asarray(pool.subgroups) == group).astype(np.int64)
    if idx.size == 0:
        raise ValueError(f"split {split.name!r} needs the rows of pool sub-population {group}; "
                         f"dataset {dataset!r} has none.")
    return table.take(idx), pool.labels[idx]


#: The tabular implementations (docs/SHIFTS.md lists every dataset's splits).
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("clean", 0, ("tabular",), _clean_splits, _clean, cache=False),
    ShiftFamily("synthetic", 1, ("tabular",), _synthetic_splits, _synthetic, cache=False),
    ShiftFamily("label_shift", 2, ("tabular",), _label_splits, _label_shift, cache=False),
    ShiftFamily("subpopulation", 3, ("tabular",), _subpop_splits, _subpop, per_dataset=True,
                cache=False),
    ShiftFamily("domain", 4, ("tabular",), _natural_splits("domain"), _natural,
                per_dataset=True, cache=False, natural=True, concept_shift=True),
    ShiftFamily("temporal", 5, ("tabular",), _natural_splits("temporal"), _natural,
                per_dataset=True, cache=False, natural=True, concept_shift=True),
    ShiftFamily("covariate", 8, ("tabular",), _covariate_splits, _covariate, per_dataset=True,
                cache=False),
)
