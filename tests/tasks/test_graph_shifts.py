"""Graph shift families: temporal snapshots by year, the held-out base split, structural damage."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.data.datasets import DATASETS
from tasks.data.temporal import PROTOCOL, temporal_source_splits, temporal_target_pool
from tasks.data.graphs import GraphSplit
from tasks.data.targets import generate_split, target_splits
from tasks.data.shifts.structural import STRUCTURAL_LEVELS
from tests.tasks._graph_fake import TINY_GRAPH_CLASSES, make_graph, tiny_graph_spec


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(DATASETS, "tiny-graph", tiny_graph_spec())
    graph = make_graph()
    return graph, temporal_target_pool(graph, TINY_GRAPH_CLASSES)


def test_protocol_eras() -> None:
    graph = make_graph()
    source = temporal_source_splits(graph, TINY_GRAPH_CLASSES)
    train, val = source.train_x, source.val_x
    assert train.graph.year.max() == 2010 and set(train.graph.year[train.nodes]) <= set(
        range(2005, 2011))
    assert val.graph.year.max() == 2014
    assert set(val.graph.year[val.nodes]) == {2012, 2013, 2014}
    assert 2011 not in set(val.graph.year[val.nodes]) | set(train.graph.year[train.nodes])


def test_graph_split_names_and_families(tiny) -> None:
    names = [s.name for s in target_splits("tiny-graph")]
    assert names[0] == "clean"
    assert names[1:7] == [f"temporal-{y}" for y in PROTOCOL.test_years]
    assert len(names) == 1 + 6 + 15
    fams = {s.shift_family for s in target_splits("tiny-graph")}
    assert fams == {"clean", "temporal", "structural"}


def test_temporal_split_is_the_years_papers_on_its_snapshot(tiny) -> None:
    graph, pool = tiny
    for split in target_splits("tiny-graph"):
        if split.shift_family != "temporal":
            continue
        samples, labels = generate_split("tiny-graph", split, pool)
        year = int(split.shift)
        assert isinstance(samples, GraphSplit)
        assert samples.graph.year.max() == year
        assert set(samples.graph.year[samples.nodes]) == {year}
        assert len(samples) == int(np.sum(graph.year == year))
        np.testing.assert_array_equal(labels, samples.labels)
        # edges existed then: both ends published by the split's year
        assert samples.graph.n_edges == int(np.sum(
            (graph.year[graph.edge_index[0]] <= year) & (graph.year[graph.edge_index[1]] <= year)
        ))


def test_clean_is_the_held_out_year(tiny) -> None:
    _, pool = tiny
    samples, _ = generate_split("tiny-graph", target_splits("tiny-graph")[0], pool)
    assert set(samples.graph.year[samples.nodes]) == {PROTOCOL.held_out_year}


def _by(shift: str) -> list:
    return [s for s in target_splits("tiny-graph") if s.shift == shift]


def test_structural_damage_grows_with_severity_and_is_seeded(tiny) -> None:
    _, pool = tiny
    clean, _ = generate_split("tiny-graph", target_splits("tiny-graph")[0], pool)
    kept = [generate_split("tiny-graph", s, pool)[0].graph.n_edges for s in _by("edge_drop")]
    assert all(a > b for a, b in zip(kept, kept[1:])) and kept[0] < clean.graph.n_edges
    assert kept[-1] == pytest.approx(clean.graph.n_edges * 0.1, rel=0.3)
    noise = [
        float(np.abs(generate_split("tiny-graph", s, pool)[0].graph.x - clean.graph.x).mean())
        for s in _by("feature_noise")
    ]
    assert all(a < b for a, b in zip(noise, noise[1:]))
    prior = _by("class_prior")
    for s in prior:
        out, labels = generate_split("tiny-graph", s, pool)
        assert len(out) == len(clean) // 2 or len(out) < len(clean)
        assert set(out.nodes) <= set(clean.nodes)
    a, _ = generate_split("tiny-graph", prior[-1], pool)
    b, _ = generate_split("tiny-graph", prior[-1], pool)
    np.testing.assert_array_equal(a.nodes, b.nodes)
    assert set(STRUCTURAL_LEVELS) == {s.shift for s in target_splits("tiny-graph")
                                     if s.shift_family == "structural"}


def test_image_families_refuse_graph_datasets_and_vice_versa(monkeypatch) -> None:
    from tasks.data.datasets import get_dataset_spec

    spec = tiny_graph_spec()
    bad = type(spec)(**{**spec.__dict__, "name": "bad-graph", "target_families": ("synthetic",)})
    monkeypatch.setitem(DATASETS, "bad-graph", bad)
    with pytest.raises(ValueError, match="'synthetic' has no graph implementation"):
        target_splits("bad-graph")
    img = get_dataset_spec("fmnist")
    wrong = type(img)(**{**img.__dict__, "name": "bad-img", "target_families": ("temporal",)})
    monkeypatch.setitem(DATASETS, "bad-img", wrong)
    with pytest.raises(ValueError, match="'temporal' has no image implementation"):
        target_splits("bad-img")


def test_class_count_mismatch_between_train_and_target_is_named() -> None:
    graph = make_graph()
    with pytest.raises(ValueError, match="label 2, but the dataset has 2 classes"):
        temporal_target_pool(graph, 2)
