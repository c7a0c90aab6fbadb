"""Zoo graph sources: two seeded generators of kinds other than arxiv-sim's citation graph.

Both are **generated, not downloaded** (one :class:`numpy.random.Generator` seeded per dataset,
a fixed order of draws, so one seed gives the same arrays), both grow year by year over 2000-2020
so that the paper's temporal protocol (:mod:`tasks.data.temporal`: train <= 2010, 2011 held out,
validation 2012-2014, one ``temporal`` split per year 2015-2020) and the graph families
``clean``, ``temporal``, ``structural`` and ``label_shift``
(:mod:`tasks.data.shifts.graph_label_shift`) apply. What makes them sources of their own is the
mechanism, which differs from arxiv-sim's (homophilous citations chosen by preferential
attachment, embedding-like Gaussian features) and from each other's:

``zoo-geo``: a spatial network (a random geometric graph that grows outward)
    Node ``i`` of year ``t`` is a point ``p_i ~ N(c(t), s^2 I_2)`` whose centre moves away from
    the origin, ``c(t) = R tau(t) (cos a, sin a)`` (``tau(t) = (t - 2000) / 20``): the network
    spreads into new territory. Its class is the argmax of :data:`GEO_CLASSES` smooth random
    fields over the plane (random Fourier features, the same fields everywhere), with 8 % of
    labels redrawn at random: land use of a site from its location. It links to its
    :data:`GEO_LINKS` nearest nodes among those of the same or earlier years (by distance only:
    no class enters the wiring), so edges join neighbours in space, and spatial smoothness of the
    class field is what makes a neighbour informative. Features (16): the position scaled to the
    unit box and 14 noisy sensor readings ``W[:, y] + bias(t) + noise(t)``, the bias a fixed
    direction growing with ``tau``, the noise scale growing from 1 to 1.6 (sensors age).
``zoo-sbm``: a degree-corrected stochastic block model with heterophily (a social network)
    :data:`SBM_CLASSES` communities whose priors drift. Node ``i`` of year ``t`` has a
    propensity ``theta_i ~ Pareto(2.5)`` and makes ``1 + Poisson(5)`` links to earlier nodes
    ``j`` drawn with weights ``theta_j B(t)[y_i, y_j]``: degree correction by a fixed
    propensity, not preferential attachment on the degree reached. The block matrix moves from
    heterophily (``B(0)``: class ``c`` links mostly to class ``c + 1 mod K``, its
    "complement"; 25 % of its weight stays in ``c``) to mild homophily (``B(1)``: 55 % in
    ``c``): neighbourhoods first say "the other class", later "the same class". Features are
    bags of interests: counts of 48 interests from a class profile (a Dirichlet draw per
    class) whose mass drifts toward shared interests, 20 draws per node, ``log(1 + counts)``.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.files import atomic_target
from tasks.data.graphs import Graph
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.temporal import temporal_source_splits, temporal_target_pool

__all__ = ["SPECS", "generate_geo", "generate_sbm"]

ORDER: Final[int] = 640
SUITE: Final[str] = "zoo-graph"
FIRST_YEAR: Final[int] = 2000
LAST_YEAR: Final[int] = 2020
#: Nodes per year (the same every year: the temporal splits have ~this many nodes).
PER_YEAR: Final[int] = 400
GEO_CLASSES: Final[int] = 6
GEO_LINKS: Final[int] = 6
GEO_FEATURES: Final[int] = 16
SBM_CLASSES: Final[int] = 5
SBM_INTERESTS: Final[int] = 48
SBM_DRAWS: Final[int] = 20


def _years() -> np.ndarray:
    return np.repeat(np.arange(FIRST_YEAR, LAST_YEAR + 1, dtype=np.int64), PER_YEAR)


def _tau(year: np.ndarray) -> np.ndarray:
    return (year - FIRST_YEAR) / (LAST_YEAR - FIRST_YEAR)


def generate_geo(seed: int = 0) -> Graph:
    """The ``zoo-geo`` graph (module docstring)."""
    rng = np.random.default_rng(seed)
    year = _years()
    n = year.size
    tau = _tau(year)
    angle = rng.uniform(0, 2 * np.pi)
    centre = 3.0 * tau[:, None] * np.array([np.cos(angle), np.sin(angle)])
    pos = centre + rng.normal(0.0, 1.0, size=(n, 2))
    freqs = rng.normal(0.0, 0.9, size=(GEO_CLASSES, 8, 2))
    phases = rng.uniform(0, 2 * np.pi, size=(GEO_CLASSES, 8))
    field = np.cos(np.einsum("kfd,nd->nkf", freqs, pos) + phases[None]).sum(axis=2)
    y = field.argmax(axis=1).astype(np.int64)
    flip = rng.random(n) < 0.08
    y[flip] = rng.integers(0, GEO_CLASSES, size=int(flip.sum()))
    src, dst = [], []
    for i in range(1, n):
        d = np.sum((pos[:i] - pos[i]) ** 2, axis=1)
        k = min(GEO_LINKS, i)
        near = np.argpartition(d, k - 1)[:k]
        src.append(np.full(k, i))
        dst.append(near)
    edge_index = np.stack([np.concatenate(src), np.concatenate(dst)]).astype(np.int64)
    weights = rng.normal(0.0, 1.0, size=(GEO_FEATURES - 2, GEO_CLASSES))
    bias_dir = rng.normal(0.0, 1.0, size=GEO_FEATURES - 2)
    noise = rng.normal(0.0, 1.0, size=(n, GEO_FEATURES - 2)) * (1.0 + 0.6 * tau)[:, None]
    sensors = 0.5 * weights[:, y].T + 1.2 * tau[:, None] * bias_dir + noise
    span = np.abs(pos).max()
    x = np.concatenate([pos / span, sensors], axis=1).astype(np.float32)
    return Graph(x=x, edge_index=edge_index, y=y, year=year)


def generate_sbm(seed: int = 0) -> Graph:
    """The ``zoo-sbm`` graph (module docstring)."""
    rng = np.random.default_rng(seed)
    year = _years()
    n = year.size
    tau = _tau(year)
    k = SBM_CLASSES
    base = rng.normal(0.0, 0.3, size=k)
    slope = rng.permutation(np.linspace(-1.2, 1.2, k))
    logits = base[None] + slope[None] * (tau[:, None] - 0.5)
    priors = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=p) for p in priors], dtype=np.int64)
    theta = rng.pareto(2.5, size=n) + 1.0

    def blocks(t: float) -> np.ndarray:
        same = 0.25 + 0.30 * t
        out = np.full((k, k), (1.0 - same) * 0.25 / (k - 2))
        for c in range(k):
            out[c, c] = same
            out[c, (c + 1) % k] = (1.0 - same) * 0.75
        return out / out.sum(axis=1, keepdims=True)

    src, dst = [], []
    for i in range(1, n):
        m = min(i, 1 + int(rng.poisson(5)))
        w = theta[:i] * blocks(float(tau[i]))[y[i], y[:i]]
        picked = rng.choice(i, size=m, replace=False, p=w / w.sum())
        src.append(np.full(m, i))
        dst.append(picked)
    edge_index = np.stack([np.concatenate(src), np.concatenate(dst)]).astype(np.int64)
    profiles = rng.dirichlet(np.full(SBM_INTERESTS, 0.3), size=k)
    shared = rng.dirichlet(np.full(SBM_INTERESTS, 1.0))
    counts = np.empty((n, SBM_INTERESTS))
    for i in range(n):
        p = (1.0 - 0.6 * tau[i]) * profiles[y[i]] + 0.6 * tau[i] * shared
        counts[i] = rng.multinomial(SBM_DRAWS, p / p.sum())
    return Graph(x=np.log1p(counts).astype(np.float32), edge_index=edge_index, y=y, year=year)


def _path(root: Path | str, name: str) -> Path:
    return Path(root) / name / f"{name}-v1.npz"


def _load(root: Path | str, name: str, n_classes: int) -> Graph:
    path = _path(root, name)
    if not path.is_file():
        raise FileNotFoundError(
            f"{name} is not staged: {str(path)!r} is missing; run the download stage "
            f"(`alsa-bench run --until download --suite {SUITE}`) to generate it."
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: np.array(data[key]) for key in ("x", "edge_index", "y", "year")}
    except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"Could not read {name} from {str(path)!r}: {exc}") from exc
    graph = Graph(**arrays)
    if graph.y.size and int(graph.y.max()) >= n_classes:
        raise ValueError(f"{str(path)!r} has labels up to {int(graph.y.max())}; {name} has "
                         f"{n_classes} classes.")
    return graph


def _spec(name: str, generate: Callable[[int], Graph], n_classes: int, n_features: int,
          seed: int, description: str) -> DatasetSpec:
    def raw_files(root: Path | str) -> list[Path]:
        return [_path(root, name)]

    def stage(root: Path | str) -> list[Path]:
        path = _path(root, name)
        if path.is_file():
            try:
                _load(root, name, n_classes)
                return [path]
            except ValueError:
                pass
        graph = generate(seed)
        with atomic_target(path) as tmp:
            with open(tmp, "wb") as handle:
                np.savez(handle, x=graph.x, edge_index=graph.edge_index, y=graph.y,
                         year=graph.year)
        return [path]

    @lru_cache(maxsize=2)
    def graph_of(root: str) -> Graph:
        return _load(root, name, n_classes)

    def load_source(root: Path | str) -> SourceSplits:
        return temporal_source_splits(graph_of(str(Path(root).resolve())), n_classes)

    def load_target_pool(root: Path | str) -> TargetPool:
        return temporal_target_pool(graph_of(str(Path(root).resolve())), n_classes)

    for fn in (raw_files, stage, load_source, load_target_pool):
        fn.__module__ = __name__
    return DatasetSpec(
        name=name, suite=SUITE, description=description, modality="graph",
        n_classes=n_classes, class_names=tuple(f"class-{c}" for c in range(n_classes)),
        input_shape=(n_features,),
        target_families=("clean", "label_shift", "temporal", "structural"),
        stage=stage, raw_files=raw_files, load_source=load_source,
        load_target_pool=load_target_pool, backbones=("gcn", "sage"),
        source_package="generated (seeded; numpy)", licence="generated here (project licence)",
        in_default_bench=False,
    )


SPECS: Final[tuple[DatasetSpec, ...]] = (
    _spec("zoo-geo", generate_geo, GEO_CLASSES, GEO_FEATURES, 4242,
          "spatial network growing outward: land-use class of a site, 8,400 nodes 2000-2020"),
    _spec("zoo-sbm", generate_sbm, SBM_CLASSES, SBM_INTERESTS, 5353,
          "degree-corrected SBM, heterophily -> homophily, bag-of-interest features"),
)
