"""The synthetic ``arxiv-sim`` citation graph: determinism, structure, drift, staging.

Most tests use a small configuration (:data:`SMALL`, same years and drift as the default, fewer
papers) so the file runs in seconds on one thread.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tasks.data.datasets import arxiv_sim
from tasks.data.datasets.arxiv_sim import (
    CLASS_NAMES,
    DATASET_SEED,
    N_CLASSES,
    N_FEATURES,
    TEST_YEARS,
    TRAIN_LAST_YEAR,
    VAL_YEARS,
    ArxivSimConfig,
    class_priors_by_year,
    generate_arxiv_sim,
    load_graph,
    raw_files,
    stage_arxiv_sim,
)
from tasks.data.graphs import Graph, to_undirected

SMALL = ArxivSimConfig(n_nodes=6000)


@pytest.fixture(scope="module")
def small() -> Graph:
    return generate_arxiv_sim(SMALL, seed=0)


def _same_class_fraction(graph: Graph, years: range) -> float:
    src, dst = graph.edge_index
    made = np.isin(graph.year[src], list(years))
    return float(np.mean(graph.y[src[made]] == graph.y[dst[made]]))


def _priors(graph: Graph, years: range) -> np.ndarray:
    counts = np.bincount(graph.y[np.isin(graph.year, list(years))], minlength=N_CLASSES)
    return counts / counts.sum()


def test_constants_and_default_shape() -> None:
    config = ArxivSimConfig()
    assert len(CLASS_NAMES) == N_CLASSES == config.n_classes == 10
    assert len(set(CLASS_NAMES)) == N_CLASSES
    assert config.n_features == N_FEATURES == 128
    assert (config.first_year, config.last_year) == (1991, 2020)
    assert 20000 <= config.n_nodes <= 40000
    assert config.first_year < TRAIN_LAST_YEAR < min(VAL_YEARS) <= max(VAL_YEARS)
    assert max(VAL_YEARS) < min(TEST_YEARS) and max(TEST_YEARS) == config.last_year


def test_small_graph_arrays(small: Graph) -> None:
    assert small.n_nodes == SMALL.n_nodes
    assert small.x.dtype == np.float32 and small.x.shape == (SMALL.n_nodes, N_FEATURES)
    assert small.edge_index.dtype == np.int64 and small.y.dtype == np.int64
    assert small.year.dtype == np.int64
    assert set(np.unique(small.y)) == set(range(N_CLASSES))
    assert small.year.min() == SMALL.first_year and small.year.max() == SMALL.last_year
    assert np.all(np.diff(small.year) >= 0)  # publication order
    # No repeated (citing, cited) pair; mean out-degree near mean_citations.
    key = small.edge_index[0] * small.n_nodes + small.edge_index[1]
    assert np.unique(key).size == key.size
    cites = small.year > SMALL.first_year
    assert 4.5 <= small.n_edges / cites.sum() <= SMALL.mean_citations


def test_same_seed_identical_other_seed_different(small: Graph) -> None:
    again = generate_arxiv_sim(SMALL, seed=0)
    for name in ("x", "edge_index", "y", "year"):
        np.testing.assert_array_equal(getattr(small, name), getattr(again, name))
    other = generate_arxiv_sim(SMALL, seed=1)
    assert not np.array_equal(small.x, other.x)
    assert not np.array_equal(small.y, other.y)
    assert small.edge_index.shape != other.edge_index.shape or not np.array_equal(
        small.edge_index, other.edge_index
    )


def test_edges_cite_earlier_papers(small: Graph) -> None:
    src, dst = small.edge_index
    assert np.all(src != dst)
    assert np.all(small.year[src] >= small.year[dst])
    assert np.all(small.year[src] > small.year[dst])  # the generator cites strictly earlier years
    assert not np.any(small.year[src] == SMALL.first_year)  # the first year cites nothing
    # A snapshot keeps every citation its papers made.
    snap, ids = small.snapshot(2005)
    made = small.year[src] <= 2005
    assert snap.n_edges == int(made.sum())
    np.testing.assert_array_equal(ids, np.flatnonzero(small.year <= 2005))


def test_node_counts_grow_with_year(small: Graph) -> None:
    counts = np.bincount(small.year - SMALL.first_year)
    assert counts.size == SMALL.last_year - SMALL.first_year + 1
    assert np.all(np.diff(counts) > 0)
    assert counts[-1] / counts[0] == pytest.approx(SMALL.growth ** (counts.size - 1), rel=0.1)
    # Most papers are recent, as on arXiv: the last decade holds well over half.
    assert counts[-10:].sum() > 0.55 * counts.sum()


def test_class_priors_drift(small: Graph) -> None:
    early, late = _priors(small, range(1991, 2001)), _priors(small, range(2011, 2021))
    tv = 0.5 * np.abs(early - late).sum()
    assert tv > 0.1
    planned = class_priors_by_year(SMALL, seed=0)
    assert planned.shape == (30, N_CLASSES)
    np.testing.assert_allclose(planned.sum(axis=1), 1.0)
    # Some fields grow and others shrink, as planned.
    grow = planned[-1] - planned[0]
    assert (grow > 0.02).any() and (grow < -0.02).any()
    assert np.all(np.sign(late - early)[np.abs(grow) > 0.05] == np.sign(grow)[np.abs(grow) > 0.05])
    # Without prior drift, the late and early priors agree.
    flat = generate_arxiv_sim(dataclasses.replace(SMALL, prior_drift=0.0), seed=0)
    tv_flat = 0.5 * np.abs(_priors(flat, range(1991, 2001)) - _priors(flat, range(2011, 2021)))
    assert tv_flat.sum() < 0.5 * tv


def test_class_centroids_drift() -> None:
    """A class's mean feature moves between eras far more than sampling noise explains.

    Low per-paper noise so that the eras' centroids are sharp on a small graph.
    """
    config = dataclasses.replace(SMALL, noise=1.0)
    graph = generate_arxiv_sim(config, seed=0)
    still = generate_arxiv_sim(
        dataclasses.replace(config, feature_drift=0.0, vocab_drift=0.0, vocab_scale_drift=0.0),
        seed=0,
    )
    early = np.isin(graph.year, range(1991, 2006))
    late = np.isin(graph.year, range(2016, 2021))
    halves = np.arange(graph.n_nodes) % 2 == 0

    def centroid(g: Graph, mask: np.ndarray, c: int) -> np.ndarray:
        return g.x[mask & (g.y == c)].mean(axis=0)

    def shift(g: Graph, a: np.ndarray, b: np.ndarray) -> float:
        gaps = [np.linalg.norm(centroid(g, a, c) - centroid(g, b, c)) for c in range(N_CLASSES)]
        return float(np.mean(gaps))

    across = shift(graph, early, late)
    within = shift(graph, early & halves, early & ~halves)
    still_across = shift(still, early, late)
    assert across > 4.0 * within
    # Without feature and vocabulary drift the centroids stay put (up to sampling noise).
    assert still_across < 0.3 * across

    # The class signal itself rotates: early and late centroids of a class, centred on their
    # era's mean, point in clearly different directions.
    def centred(g: Graph, mask: np.ndarray) -> np.ndarray:
        cents = np.stack([centroid(g, mask, c) for c in range(N_CLASSES)])
        return cents - cents.mean(axis=0)

    ce, cl = centred(graph, early), centred(graph, late)
    cosine = np.sum(ce * cl, axis=1) / np.linalg.norm(ce, axis=1) / np.linalg.norm(cl, axis=1)
    assert cosine.mean() < 0.6
    se, sl = centred(still, early), centred(still, late)
    still_cos = np.sum(se * sl, axis=1) / np.linalg.norm(se, axis=1) / np.linalg.norm(sl, axis=1)
    assert still_cos.mean() > 0.85


def test_homophily_follows_config(small: Graph) -> None:
    # Early years of a small graph have tiny citation pools, where de-duplicating repeated
    # citations thins out same-class ones; from 2000 on the pools are large enough.
    early = _same_class_fraction(small, range(2000, 2005))
    late = _same_class_fraction(small, range(2016, 2021))
    tau_early = SMALL.tau(np.arange(2000, 2005)).mean()
    tau_late = SMALL.tau(np.arange(2016, 2021)).mean()

    def h(tau: float) -> float:
        return SMALL.homophily_start + (SMALL.homophily_end - SMALL.homophily_start) * tau

    assert early == pytest.approx(h(tau_early), abs=0.05)
    assert late == pytest.approx(h(tau_late), abs=0.04)
    assert early - late > 0.12
    # Constant homophily when start == end.
    flat = generate_arxiv_sim(
        dataclasses.replace(SMALL, homophily_start=0.6, homophily_end=0.6), seed=0
    )
    assert _same_class_fraction(flat, range(2000, 2005)) == pytest.approx(0.6, abs=0.05)
    assert _same_class_fraction(flat, range(2016, 2021)) == pytest.approx(0.6, abs=0.04)


def test_preferential_attachment(small: Graph) -> None:
    """In-degrees are heavy-tailed: the most cited papers gather far more than the mean."""
    indeg = np.bincount(small.edge_index[1], minlength=small.n_nodes)
    old = small.year <= 2000
    assert indeg[old].max() > 8 * indeg[old].mean()


def test_fixed_feature_classifier_loses_accuracy_with_year(small: Graph) -> None:
    """Nearest class centroid fit on <= 2010: clearly worse on 2019-2020 than on 2012-2014."""
    train = small.year <= TRAIN_LAST_YEAR
    centroids = np.stack([small.x[train & (small.y == c)].mean(axis=0) for c in range(N_CLASSES)])
    dist = ((small.x[:, None, :] - centroids[None]) ** 2).sum(axis=-1)
    correct = dist.argmin(axis=1) == small.y

    def acc(years: range) -> float:
        return float(correct[np.isin(small.year, list(years))].mean())

    val, late = acc(range(2012, 2015)), acc(range(2019, 2021))
    assert val > 0.3  # well above chance (0.1)
    assert val - late > 0.1
    by_year = [acc(range(y, y + 1)) for y in range(2011, 2021)]
    assert np.corrcoef(np.arange(10), by_year)[0, 1] < -0.8  # falls roughly monotonically


def test_gcn_loses_accuracy_with_year() -> None:
    """A tiny GCN trained on snapshot(2010) does worse on 2019-2020 than on 2012-2014."""
    torch = pytest.importorskip("torch")
    from torch_geometric.nn import GCNConv

    torch.set_num_threads(1)
    torch.manual_seed(0)
    graph = generate_arxiv_sim(dataclasses.replace(SMALL, n_nodes=4000), seed=0)

    def tensors(year: int) -> tuple[Graph, object, object]:
        snap, _ = graph.snapshot(year)
        ei = to_undirected(snap.edge_index, snap.n_nodes)
        return snap, torch.from_numpy(snap.x), torch.from_numpy(ei)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1, self.c2 = GCNConv(N_FEATURES, 32), GCNConv(32, N_CLASSES)

        def forward(self, x, ei):  # type: ignore[no-untyped-def]
            return self.c2(torch.relu(self.c1(x, ei)), ei)

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
    snap, x, ei = tensors(TRAIN_LAST_YEAR)
    y = torch.from_numpy(snap.y)
    for _ in range(40):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x, ei), y).backward()
        opt.step()

    def acc(years: range) -> float:
        hits, total = 0, 0
        with torch.no_grad():
            for year in years:
                snap, x, ei = tensors(year)
                mask = snap.year == year
                hits += int((model(x, ei).argmax(1).numpy()[mask] == snap.y[mask]).sum())
                total += int(mask.sum())
        return hits / total

    val, late = acc(range(2012, 2015)), acc(range(2019, 2021))
    assert val > 0.5
    assert val - late > 0.08


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="last_year"):
        ArxivSimConfig(first_year=2000, last_year=2000)
    with pytest.raises(ValueError, match="homophily_end"):
        ArxivSimConfig(homophily_end=1.5)
    with pytest.raises(ValueError, match="mean_citations"):
        ArxivSimConfig(mean_citations=0.5)
    with pytest.raises(ValueError, match="n_nodes"):
        ArxivSimConfig(n_nodes=10)


def test_other_shapes_generate() -> None:
    config = ArxivSimConfig(
        n_nodes=500, first_year=2000, last_year=2009, n_classes=4, n_features=16, growth=1.0
    )
    graph = generate_arxiv_sim(config, seed=3)
    assert graph.x.shape == (500, 16)
    assert set(np.unique(graph.y)) <= set(range(4))
    assert np.all(np.bincount(graph.year - 2000) == 50)
    assert np.all(graph.year[graph.edge_index[0]] > graph.year[graph.edge_index[1]])


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Graph]:
    root = tmp_path_factory.mktemp("arxiv-sim-root")
    paths = stage_arxiv_sim(root)
    assert paths == raw_files(root) == [root / "arxiv-sim" / "arxiv-sim-v1.npz"]
    return root, generate_arxiv_sim(ArxivSimConfig(), seed=DATASET_SEED)


def test_stage_load_round_trip(staged: tuple[Path, Graph]) -> None:
    root, expected = staged
    graph = load_graph(root)
    for name in ("x", "edge_index", "y", "year"):
        np.testing.assert_array_equal(getattr(graph, name), getattr(expected, name))
    assert graph.n_nodes == ArxivSimConfig().n_nodes
    assert not list((root / "arxiv-sim").glob(".*.tmp"))  # no temporary left behind


def test_stage_keeps_a_readable_file(
    staged: tuple[Path, Graph], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = staged

    def boom(*args: object, **kwargs: object) -> Graph:
        raise AssertionError("a readable staged file must not be regenerated")

    monkeypatch.setattr(arxiv_sim, "generate_arxiv_sim", boom)
    assert stage_arxiv_sim(root) == raw_files(root)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing-array"])
def test_stage_regenerates_a_corrupted_file(
    staged: tuple[Path, Graph], tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, expected = staged
    path = raw_files(tmp_path)[0]
    path.parent.mkdir(parents=True)
    if damage == "garbage":
        path.write_bytes(b"not an npz at all")
    elif damage == "truncated":
        with open(path, "wb") as handle:
            np.savez(handle, x=expected.x, edge_index=expected.edge_index, y=expected.y,
                     year=expected.year)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        with open(path, "wb") as handle:
            np.savez(handle, x=expected.x, y=expected.y, year=expected.year)
    with pytest.raises(ValueError):
        load_graph(tmp_path)
    with caplog.at_level("WARNING", logger="tasks.data.datasets.arxiv_sim"):
        assert stage_arxiv_sim(tmp_path) == [path]
    [said] = [r.getMessage() for r in caplog.records]  # regenerating a damaged file is said
    assert said.startswith(f"{path} is damaged (") and said.endswith("; generating it again.")
    np.testing.assert_array_equal(load_graph(tmp_path).x, expected.x)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="stage_arxiv_sim"):
        load_graph(tmp_path)
