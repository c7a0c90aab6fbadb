"""The stages on a graph dataset: train full batch, extract every split, estimate with every
method including GNNEvaluator; bad input stops before anything is written."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch
import pytest

from storage.db import connect
from storage.estimates import read_estimates
from storage.logits import list_splits, read_val
from tasks.data.datasets import DATASETS
from tasks.stages.download import stage_dataset
from tests.tasks._stages import estimate, extract
from tasks.data.targets import target_splits
from tasks.runtime.checkpoints import load_checkpoint
from tasks.stages.train import train_classifier
from tests.tasks._graph_fake import tiny_graph_spec


@pytest.fixture
def tiny_graph(monkeypatch: pytest.MonkeyPatch, state_home: Path) -> str:
    monkeypatch.setitem(DATASETS, "tiny-graph", tiny_graph_spec())
    return "tiny-graph"


def test_graph_run_end_to_end(tiny_graph: str, state_home: Path) -> None:
    ref = stage_dataset(tiny_graph)
    ckpt = train_classifier(ref, "sage", 0, epochs=60, progress=False)
    _, meta = load_checkpoint(ckpt.path)
    assert meta["modality"] == "graph" and meta["epochs_run"] <= 60
    again = train_classifier(ref, "sage", 0, epochs=60, progress=False)
    assert again.sha256 == ckpt.sha256  # bit-identical on the CPU

    db = state_home / "bench.duckdb"
    logits_ref = extract(ckpt, suite="tiny-graph", db=db)
    with connect(db, read_only=True) as con:
        splits = {s.split: s for s in list_splits(con, ckpt.run_key, role="target")}
        val_logits, val_labels = read_val(con, ckpt.run_key)
    assert set(splits) == {s.name for s in target_splits(tiny_graph)}
    assert splits["temporal-2015"].shift_family == "temporal"
    assert splits["temporal-2015"].n_samples == 40  # the tiny graph has 40 papers a year
    assert val_logits.shape == (120, 3) and float(np.mean(val_logits.argmax(1) == val_labels)) > 0.5

    params = {"gnnevaluator": {"n_meta": 8, "epochs": 5, "n_reference": 16}}
    estimate(logits_ref, methods=["atc-mc", "gnnevaluator"], method_params=params,
             checkpoint=ckpt)
    with connect(db, read_only=True) as con:
        rows = read_estimates(con, ckpt.run_key)
    gnn = [r for r in rows if r.method == "gnnevaluator"]
    assert len(gnn) == len(splits) and len(rows) == 2 * len(splits)
    for row in gnn:
        assert 0.0 <= row.estimated_accuracy <= 1.0
        assert row.true_accuracy == pytest.approx(splits[row.split].true_accuracy)
    assert logits_ref.run_key == ckpt.run_key
    # the stored features are the split's rows of NodeClassifier.embed on its snapshot
    from storage.results import read_logits_file
    from tasks.models.backbones import get_backbone
    from tasks.models.modalities.graph import graph_tensors
    from tasks.stages.extract import open_checkpoint
    from tasks.stages.splits import iter_target_splits

    content = read_logits_file(logits_ref.path)
    state, meta, _, dataset_ref = open_checkpoint(ckpt)
    model = get_backbone("sage", int(meta["n_classes"]), tuple(meta["input_shape"]))
    model.load_state_dict(state)
    model.eval()
    for split, samples, _ in iter_target_splits(dataset_ref):
        x, edges = graph_tensors(samples.graph, torch.device("cpu"))
        with torch.inference_mode():
            want = model.embed(x, edges)[torch.from_numpy(samples.nodes)].numpy()
        np.testing.assert_allclose(content.features.split(split.name).astype(np.float32), want,
                                   atol=2e-2, rtol=1e-2)
    train_x, train_y = content.features.train()
    assert train_x.shape == (len(train_y), want.shape[1]) and train_x.dtype == np.float16


def test_gnnevaluator_needs_a_graph_run_and_its_checkpoint(tiny_graph: str, state_home) -> None:
    ref = stage_dataset(tiny_graph)
    ckpt = train_classifier(ref, "gcn", 1, epochs=5, progress=False)
    db = state_home / "bench.duckdb"
    logits = extract(ckpt, suite="tiny-graph", db=db)
    with pytest.raises(ValueError, match="'gnnevaluator' needs the trained model.*no checkpoint"):
        estimate(logits, methods=["gnnevaluator"])
    # by default (no methods named) it is skipped without a checkpoint
    estimate(logits, methods=None)
    with connect(db, read_only=True) as con:
        assert "gnnevaluator" not in {r.method for r in read_estimates(con, ckpt.run_key)}


def test_image_backbone_on_a_graph_is_refused_before_training(tiny_graph, state_home) -> None:
    ref = stage_dataset(tiny_graph)
    with pytest.raises(ValueError, match="'lenet' takes image inputs, but dataset 'tiny-graph'"):
        train_classifier(ref, "lenet", 0, epochs=1, progress=False)
    assert not list(state_home.rglob("*.pt"))


def test_class_count_mismatch_writes_nothing(tiny_graph, monkeypatch, state_home) -> None:
    """A target graph whose labels exceed the model's classes: clear error, empty database."""
    ref = stage_dataset(tiny_graph)
    ckpt = train_classifier(ref, "gcn", 0, epochs=3, progress=False)
    spec = DATASETS[tiny_graph]
    from tasks.data.spec import TargetPool

    def pool_with_a_new_class(root: Path) -> TargetPool:
        pool = spec.load_target_pool(root)
        labels = pool.samples.y.copy()
        labels[pool.samples.year == 2016] = 3  # a fourth class appears in 2016
        graph = dataclasses.replace(pool.samples, y=labels)
        return TargetPool(samples=graph, labels=labels, n_classes=3)

    monkeypatch.setitem(DATASETS, tiny_graph,
                        dataclasses.replace(spec, load_target_pool=pool_with_a_new_class))
    db = state_home / "bench.duckdb"
    with pytest.raises(ValueError, match="split 'temporal-2016' has label 3, outside 0..2"):
        extract(ckpt, suite="tiny-graph", db=db)
    assert not db.exists()


def test_gnnevaluator_refuses_a_checkpoint_that_changed(tiny_graph: str, state_home) -> None:
    ref = stage_dataset(tiny_graph)
    ckpt = train_classifier(ref, "gcn", 2, epochs=3, progress=False)
    db = state_home / "bench.duckdb"
    logits = extract(ckpt, suite="tiny-graph", db=db)
    stale = dataclasses.replace(ckpt, sha256="0" * 64)  # the file is not what was extracted
    with pytest.raises(ValueError, match="has SHA-256 .* not the 000000000000"):
        estimate(logits, methods=["gnnevaluator"], checkpoint=stale)
