"""``arxiv-sim``: a seeded, synthetic, growing citation graph in the shape of ogbn-arxiv.

The dataset is **generated, not downloaded**: :func:`generate_arxiv_sim` draws a citation graph
of papers with a publication year, a subject class and a 128-d embedding-like feature vector
(like ogbn-arxiv's averaged word2vec), in which the class priors, the class signal of the
features, the shared vocabulary, and the citation homophily all drift with time. A GNN trained
on the early graph therefore loses accuracy year by year on later papers, which is what the
temporal shift of the benchmark measures.

Generative model
----------------
Years run over ``t = first_year .. last_year``; write ``tau(t) = (t - first_year) / (last_year -
first_year)`` in ``[0, 1]``. Everything below is drawn from one
:class:`numpy.random.Generator` seeded with ``seed``, in a fixed order, so one seed gives
identical arrays.

**Growth.** Year ``t`` publishes ``n_t`` papers, ``n_t`` proportional to ``growth ** (t -
first_year)`` (largest-remainder rounding so that ``sum_t n_t = n_nodes``). With ``growth = 1.1``
most papers are recent, as on arXiv.

**Class priors.** Each class ``c`` has a logit that moves linearly in time,
``l_c(t) = b_c + prior_drift * s_c * (tau(t) - 1/2)``, with ``b_c ~ N(0, prior_spread^2)`` and
slopes ``s_c`` a seeded permutation of ``linspace(-1, 1, n_classes)``, so some fields grow and
others shrink. The papers of year ``t`` get labels ``y ~ Categorical(softmax(l(t)))``.

**Features.** Class ``c`` has two orthogonal unit directions ``u_c, v_c`` in ``R^n_features``
(random, Gram-Schmidt per class) and its centroid rotates from one to the other,
``mu_c(t) = cos(feature_drift * tau) u_c + sin(feature_drift * tau) v_c`` (``feature_drift`` in
radians over the whole span: the class signal drifts). A shared vocabulary direction ``w``
(unit, random) enters every paper with weight ``vocab_drift * tau`` (words that become common
in every field), and a per-dimension vocabulary scale ``exp(vocab_scale_drift * (tau - 1/2)
r_d)``, ``r ~ N(0, 1)``, reweights the dimensions (words entering and leaving use). A paper
``i`` of class ``c`` and year ``t`` has

    ``x_i = D(t) (signal * mu_c(t) + noise * eps_i) + vocab_drift * tau(t) * w``,

with ``eps_i ~ N(0, I / n_features)`` (so ``||eps_i|| ~ 1``) and ``D(t)`` the diagonal scale.

**Citations.** Paper ``i`` of year ``t`` cites ``k_i = min(1 + Poisson(mean_citations - 1),
n_<t)`` earlier papers (those of years ``< t``; papers of ``first_year`` cite nothing). With
homophily ``h(t) = homophily_start + (homophily_end - homophily_start) tau(t)`` and a
cross-class affinity ``M(t) = (1 - tau) M_0 + tau M_1`` (rows of ``M_0``, ``M_1`` Dirichlet over
the other classes, so which foreign fields a field cites also shifts), a paper of class ``c``
picks each cited paper ``j`` independently with probability

    ``P(j) = F_c(y_j) * a_j / S_{y_j}``,  ``a_j = (indeg_j + 1) ** attachment * exp(-(t -
    year_j) / recency)``,  ``S_k = sum_{j: y_j = k} a_j``,

where ``F_c(c) = h(t)`` and ``F_c(k) = (1 - h(t)) M(t)[c, k]`` for ``k != c`` (renormalised over
the classes present). So ``h(t)`` is the expected fraction of same-class citations, and within
a class the choice is preferential attachment on the in-degree at the end of year ``t - 1``,
discounted by age. Repeated (citing, cited) pairs are dropped, so the mean out-degree is
slightly below ``mean_citations``.

Protocol
--------
The benchmark trains on the papers of years ``<= 2010`` (forward pass on ``snapshot(2010)``),
validates on 2012-2014 and tests one split per year 2015-2020, each on ``snapshot(year)``; 2011
is the in-distribution held-out year.

Staging
-------
:func:`stage_arxiv_sim` writes the default graph (seed :data:`DATASET_SEED`) to
``<root>/arxiv-sim/arxiv-sim-v1.npz`` unless a readable copy is there; :func:`load_graph` reads
it back. Changing the default configuration must change the file name's version.
"""

from __future__ import annotations

import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.graphs import Graph
from tasks.data.files import atomic_target
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.temporal import PROTOCOL, temporal_source_splits, temporal_target_pool

logger = logging.getLogger(__name__)

__all__ = [
    "CLASS_NAMES",
    "DATASET_SEED",
    "FILE_NAME",
    "N_CLASSES",
    "N_FEATURES",
    "TEST_YEARS",
    "TRAIN_LAST_YEAR",
    "VAL_YEARS",
    "ID_YEAR",
    "ArxivSimConfig",
    "class_priors_by_year",
    "generate_arxiv_sim",
    "load_graph",
    "raw_files",
    "stage_arxiv_sim",
]

#: Invented subject classes, index = label.
CLASS_NAMES: Final[tuple[str, ...]] = (
    "theory",
    "systems",
    "learning",
    "vision",
    "language",
    "databases",
    "networking",
    "security",
    "graphics",
    "robotics",
)
N_CLASSES: Final[int] = len(CLASS_NAMES)
N_FEATURES: Final[int] = 128

#: Seed of the staged default graph.
DATASET_SEED: Final[int] = 0
#: Folder under the dataset root, and the staged file's name (bump the version on any change
#: of the default configuration or of the generator).
FOLDER: Final[str] = "arxiv-sim"
FILE_NAME: Final[str] = "arxiv-sim-v1.npz"

#: Temporal protocol: train on years <= TRAIN_LAST_YEAR, in-distribution year, validation and
#: test years.
TRAIN_LAST_YEAR: Final[int] = PROTOCOL.train_last_year
ID_YEAR: Final[int] = PROTOCOL.held_out_year
VAL_YEARS: Final[tuple[int, ...]] = tuple(range(PROTOCOL.val_years[0], PROTOCOL.val_years[1] + 1))
TEST_YEARS: Final[tuple[int, ...]] = PROTOCOL.test_years


@dataclass(frozen=True)
class ArxivSimConfig:
    """Parameters of the ``arxiv-sim`` generator (see the module docstring for the equations).

    Parameters
    ----------
    n_nodes : int, default 30000
        Total number of papers.
    first_year, last_year : int, default 1991, 2020
        Publication years span (inclusive).
    n_classes : int, default 10
        Number of subject classes (at most ``len(CLASS_NAMES)`` for named classes; any number
        works for the generator).
    n_features : int, default 128
        Feature width.
    growth : float, default 1.1
        Yearly growth factor of the number of papers.
    mean_citations : float, default 6.0
        Mean number of references drawn per paper (``1 + Poisson(mean_citations - 1)``).
    homophily_start, homophily_end : float, default 0.7, 0.35
        Expected fraction of same-class citations in the first and the last year (linear in
        between).
    cross_concentration : float, default 0.5
        Dirichlet concentration of the rows of the cross-class affinities ``M_0``, ``M_1``
        (small = a field cites few foreign fields).
    attachment : float, default 1.0
        Preferential-attachment exponent on ``in-degree + 1``.
    recency : float, default 8.0
        Age scale (years) of the exponential discount of older papers as citation targets.
    signal : float, default 1.0
        Length of the class centroid ``mu_c(t)``.
    noise : float, default 5.0
        Scale of the isotropic per-paper noise (``||eps|| ~ 1``).
    feature_drift : float, default 2.0
        Rotation angle (radians) of every class centroid from ``first_year`` to ``last_year``.
    vocab_drift : float, default 0.5
        Length, in the last year, of the shared vocabulary shift added to every paper.
    vocab_scale_drift : float, default 0.5
        Log-scale spread of the per-dimension vocabulary reweighting over the span.
    prior_drift : float, default 2.5
        Total change over the span of the class logits of the fastest-growing and -shrinking
        classes (slopes ``prior_drift * linspace(-1, 1)``).
    prior_spread : float, default 0.3
        Standard deviation of the classes' base logits.
    """

    n_nodes: int = 30000
    first_year: int = 1991
    last_year: int = 2020
    n_classes: int = N_CLASSES
    n_features: int = N_FEATURES
    growth: float = 1.1
    mean_citations: float = 6.0
    homophily_start: float = 0.7
    homophily_end: float = 0.35
    cross_concentration: float = 0.5
    attachment: float = 1.0
    recency: float = 8.0
    signal: float = 1.0
    noise: float = 5.0
    feature_drift: float = 2.0
    vocab_drift: float = 0.5
    vocab_scale_drift: float = 0.5
    prior_drift: float = 2.5
    prior_spread: float = 0.3

    def __post_init__(self) -> None:
        if self.last_year <= self.first_year:
            raise ValueError(
                f"last_year ({self.last_year}) must be after first_year ({self.first_year})."
            )
        if self.first_year < 0:
            raise ValueError(f"first_year must be >= 0; got {self.first_year}.")
        n_years = self.last_year - self.first_year + 1
        if self.n_nodes < n_years:
            raise ValueError(f"n_nodes ({self.n_nodes}) must be at least the years ({n_years}).")
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be >= 2; got {self.n_classes}.")
        if self.n_features < 2:
            raise ValueError(f"n_features must be >= 2; got {self.n_features}.")
        if self.growth <= 0:
            raise ValueError(f"growth must be > 0; got {self.growth}.")
        if self.mean_citations < 1:
            raise ValueError(f"mean_citations must be >= 1; got {self.mean_citations}.")
        for name in ("homophily_start", "homophily_end"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]; got {value}.")
        for name in ("cross_concentration", "recency"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0; got {getattr(self, name)}.")
        for name in ("noise", "signal", "prior_spread"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0; got {getattr(self, name)}.")

    @property
    def years(self) -> np.ndarray:
        """``int64`` publication years, ``first_year .. last_year``."""
        return np.arange(self.first_year, self.last_year + 1, dtype=np.int64)

    def tau(self, year: np.ndarray | int) -> np.ndarray:
        """Normalised time ``(year - first_year) / (last_year - first_year)``."""
        return (np.asarray(year, dtype=np.float64) - self.first_year) / (
            self.last_year - self.first_year
        )


def _year_counts(config: ArxivSimConfig) -> np.ndarray:
    """Papers per year, proportional to ``growth ** k``, largest remainders, summing to n."""
    n_years = config.last_year - config.first_year + 1
    weights = config.growth ** np.arange(n_years, dtype=np.float64)
    share = config.n_nodes * weights / weights.sum()
    counts = np.maximum(np.floor(share).astype(np.int64), 1)
    remainder = config.n_nodes - int(counts.sum())
    if remainder > 0:
        order = np.argsort(-(share - np.floor(share)), kind="stable")
        counts[order[:remainder]] += 1
    elif remainder < 0:
        order = np.argsort(-counts, kind="stable")
        counts[order[:-remainder]] -= 1
    return counts


def _prior_logits(
    config: ArxivSimConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Base logits ``b`` and slopes ``s`` of the class priors."""
    base = rng.normal(0.0, config.prior_spread, size=config.n_classes)
    slopes = rng.permutation(np.linspace(-1.0, 1.0, config.n_classes))
    return base, slopes


def _priors(config: ArxivSimConfig, base: np.ndarray, slopes: np.ndarray) -> np.ndarray:
    """``(n_years, n_classes)`` class priors ``softmax(b + prior_drift s (tau - 1/2))``."""
    tau = config.tau(config.years)[:, None]
    logits = base[None, :] + config.prior_drift * slopes[None, :] * (tau - 0.5)
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def class_priors_by_year(config: ArxivSimConfig = ArxivSimConfig(), seed: int = 0) -> np.ndarray:
    """The class priors the generator uses, one row per year.

    Parameters
    ----------
    config : ArxivSimConfig
        Generator parameters.
    seed : int, default 0
        Generator seed (the slopes are a seeded permutation).

    Returns
    -------
    numpy.ndarray
        ``(n_years, n_classes)`` ``float64``; row ``k`` is the prior of year ``first_year + k``.
    """
    rng = np.random.default_rng(seed)
    base, slopes = _prior_logits(config, rng)
    return _priors(config, base, slopes)


def _orthonormal_pairs(
    rng: np.random.Generator, n_classes: int, d: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per class, two orthogonal unit vectors ``u_c``, ``v_c``."""
    u = rng.normal(size=(n_classes, d))
    v = rng.normal(size=(n_classes, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    v -= np.sum(v * u, axis=1, keepdims=True) * u
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return u, v


def _cross_affinity(rng: np.random.Generator, n_classes: int, alpha: float) -> np.ndarray:
    """Row-stochastic matrix with zero diagonal, rows Dirichlet(alpha) over the other classes."""
    m = np.zeros((n_classes, n_classes))
    for c in range(n_classes):
        others = np.delete(np.arange(n_classes), c)
        m[c, others] = rng.dirichlet(np.full(n_classes - 1, alpha))
    return m


def generate_arxiv_sim(config: ArxivSimConfig = ArxivSimConfig(), seed: int = 0) -> Graph:
    """Generate the synthetic citation graph (model in the module docstring).

    Parameters
    ----------
    config : ArxivSimConfig, default ArxivSimConfig()
        Generator parameters.
    seed : int, default 0
        Seed of every random draw; the same ``(config, seed)`` gives identical arrays.

    Returns
    -------
    Graph
        Nodes in publication order (years non-decreasing); ``x`` ``float32`` ``(n_nodes,
        n_features)``, ``edge_index`` directed citing -> cited (every cited paper is from an
        earlier year), ``y`` in ``[0, n_classes)``, ``year`` in ``[first_year, last_year]``.
    """
    rng = np.random.default_rng(seed)
    c_n, d = config.n_classes, config.n_features
    years = config.years
    counts = _year_counts(config)
    n = int(counts.sum())

    # World parameters.
    base, slopes = _prior_logits(config, rng)
    priors = _priors(config, base, slopes)
    u, v = _orthonormal_pairs(rng, c_n, d)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    r = rng.normal(size=d)
    m0 = _cross_affinity(rng, c_n, config.cross_concentration)
    m1 = _cross_affinity(rng, c_n, config.cross_concentration)

    # Nodes: years, labels.
    year = np.repeat(years, counts)
    y = np.concatenate([rng.choice(c_n, size=int(k), p=p) for k, p in zip(counts, priors)])
    tau = config.tau(year)

    # Features.
    angle = config.feature_drift * tau[:, None]
    mu = np.cos(angle) * u[y] + np.sin(angle) * v[y]
    eps = rng.normal(size=(n, d)) / np.sqrt(d)
    scale = np.exp(config.vocab_scale_drift * (tau[:, None] - 0.5) * r[None, :])
    x = scale * (config.signal * mu + config.noise * eps) + config.vocab_drift * tau[:, None] * w
    x = x.astype(np.float32)

    # Citations, year by year.
    n_refs = 1 + rng.poisson(config.mean_citations - 1.0, size=n)
    indeg = np.zeros(n, dtype=np.float64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    sources: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    for k, t in enumerate(years):
        lo, hi = int(starts[k]), int(starts[k + 1])
        if lo == 0:
            continue
        tt = float(config.tau(t))
        h = config.homophily_start + (config.homophily_end - config.homophily_start) * tt
        cross = (1.0 - tt) * m0 + tt * m1
        earlier_y = y[:lo]
        attract = (indeg[:lo] + 1.0) ** config.attachment * np.exp(
            -(float(t) - year[:lo]) / config.recency
        )
        class_mass = np.bincount(earlier_y, weights=attract, minlength=c_n)
        present = class_mass > 0
        refs = np.minimum(n_refs[lo:hi], lo)
        new_y = y[lo:hi]
        year_targets: list[np.ndarray] = []
        for c in range(c_n):
            citing = np.flatnonzero(new_y == c) + lo
            if citing.size == 0:
                continue
            factor = (1.0 - h) * cross[c]
            factor[c] = h
            factor = np.where(present, factor, 0.0)
            if factor.sum() <= 0:  # only foreign or only own class present with zero weight
                factor = present.astype(np.float64)
            factor /= factor.sum()
            per_class = np.divide(factor, class_mass, out=np.zeros(c_n), where=present)
            p = per_class[earlier_y] * attract
            p /= p.sum()
            k_refs = refs[citing - lo]
            sources.append(np.repeat(citing, k_refs))
            year_targets.append(rng.choice(lo, size=int(k_refs.sum()), p=p))
        if year_targets:
            targets.extend(year_targets)
            # In-degree at the end of year t (repeats counted: close enough and cheap).
            indeg[:lo] += np.bincount(np.concatenate(year_targets), minlength=lo)

    if sources:
        src = np.concatenate(sources).astype(np.int64)
        dst = np.concatenate(targets).astype(np.int64)
        key = np.unique(src * np.int64(n) + dst)
        edge_index = np.stack([key // n, key % n]).astype(np.int64)
    else:
        edge_index = np.empty((2, 0), dtype=np.int64)
    return Graph(x=x, edge_index=edge_index, y=y.astype(np.int64), year=year.astype(np.int64))


def raw_files(root: Path | str) -> list[Path]:
    """Where :func:`stage_arxiv_sim` writes the graph: ``[<root>/arxiv-sim/arxiv-sim-v1.npz]``."""
    return [Path(root) / FOLDER / FILE_NAME]


def load_graph(root: Path | str) -> Graph:
    """Read the staged graph and validate it.

    Parameters
    ----------
    root : Path or str
        Dataset root given to :func:`stage_arxiv_sim`.

    Returns
    -------
    Graph

    Raises
    ------
    FileNotFoundError
        If the file is not staged.
    ValueError
        If the file is not a readable ``.npz`` with ``x``, ``edge_index``, ``y`` and ``year``,
        or the arrays do not form a valid graph of :data:`N_FEATURES` features and
        :data:`N_CLASSES` classes.
    """
    path = raw_files(root)[0]
    if not path.is_file():
        raise FileNotFoundError(
            f"arxiv-sim is not staged: {str(path)!r} is missing; run stage_arxiv_sim(root)."
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: np.array(data[key]) for key in ("x", "edge_index", "y", "year")}
    except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"Could not read arxiv-sim from {str(path)!r}: {exc}") from exc
    graph = Graph(**arrays)
    if graph.n_features != N_FEATURES or (graph.y.size and int(graph.y.max()) >= N_CLASSES):
        raise ValueError(
            f"{str(path)!r} is not the arxiv-sim graph: {graph.n_features} features and labels "
            f"up to {int(graph.y.max()) if graph.y.size else -1}; expected {N_FEATURES} features "
            f"and labels below {N_CLASSES}."
        )
    return graph


def stage_arxiv_sim(root: Path | str) -> list[Path]:
    """Generate the default graph into ``<root>/arxiv-sim/arxiv-sim-v1.npz`` unless it is there.

    A file that is missing or unreadable (not an ``.npz``, truncated, missing arrays, invalid
    graph) is (re)generated with :func:`generate_arxiv_sim` (default config, seed
    :data:`DATASET_SEED`) and written atomically; a readable one is kept as is.

    Parameters
    ----------
    root : Path or str
        Dataset root.

    Returns
    -------
    list of Path
        ``[path]`` of the staged file.
    """
    path = raw_files(root)[0]
    if path.is_file():
        try:
            load_graph(root)
            return [path]
        except ValueError as exc:
            logger.warning("%s is damaged (%s); generating it again.", path, exc)
    graph = generate_arxiv_sim(ArxivSimConfig(), seed=DATASET_SEED)
    with atomic_target(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, x=graph.x, edge_index=graph.edge_index, y=graph.y, year=graph.year)
    return [path]


def load_source_arxiv_sim(root: Path | str) -> SourceSplits:
    """Training (year <= 2010) and validation (2012-2014) nodes on their snapshots.

    See :mod:`tasks.data.temporal` for the protocol.
    """
    return temporal_source_splits(load_graph(Path(root)), N_CLASSES)


def load_target_pool_arxiv_sim(root: Path | str) -> TargetPool:
    """The whole generated graph; the temporal and structural families cut their splits."""
    return temporal_target_pool(load_graph(Path(root)), N_CLASSES)


#: Registry position of this module's datasets.
ORDER: Final[int] = 10

#: The offline graph dataset of suite ``graph``.
SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name="arxiv-sim",
        suite="graph",
        source_package="generated (seeded; numpy)",
        licence="generated here (project licence)",
        description=(
            "synthetic growing citation graph shaped like ogbn-arxiv (30k papers 1991-2020, "
            "10 classes, drifting features, homophily and priors)"
        ),
        modality="graph",
        n_classes=N_CLASSES,
        class_names=CLASS_NAMES,
        input_shape=(N_FEATURES,),
        target_families=("clean", "temporal", "structural"),
        stage=stage_arxiv_sim,
        raw_files=raw_files,
        load_source=load_source_arxiv_sim,
        load_target_pool=load_target_pool_arxiv_sim,
        paper_row="ogbn-arxiv (Table 2, Table 3), as an offline stand-in",
    ),
)
