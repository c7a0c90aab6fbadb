"""Extraction end to end on tiny data into a temporary DuckDB file."""

from __future__ import annotations

import dataclasses

import duckdb
import pytest

from storage.db import connect
from storage.logits import list_splits, read_val, run_digest
from tests.tasks._stages import extract
from tasks.stages import splits as shift_cache
from tasks.data.targets import target_splits
from tasks.stages.train import train_classifier
from tests.tasks.test_fmnist import stage_tiny


def _few_splits(dataset: str):
    """Two splits per shift family: every code path, a fraction of the writes."""
    out, seen = [], {}
    for split in target_splits(dataset):
        seen[split.shift_family] = seen.get(split.shift_family, 0) + 1
        if seen[split.shift_family] <= 2:
            out.append(split)
    return tuple(out)


@pytest.mark.parametrize("dataset", ["fmnist-coarse", "fmnist"])
def test_extract_writes_every_split(dataset, tmp_path, monkeypatch, state_home):
    ref = stage_tiny(tmp_path, monkeypatch, dataset)
    if dataset == "fmnist":  # 100 target splits: extract a subset to keep the test fast
        monkeypatch.setattr(shift_cache, "target_splits", _few_splits)
    ckpt = train_classifier(ref, "mlp", 0, epochs=1, device="cpu", progress=False)
    db = tmp_path / "bench.duckdb"

    out = extract(ckpt, db=db, device="cpu", code_version="abc")

    assert out.run_key == f"{dataset}.mlp.s0" and out.db_path == str(db)
    expected = {s.name: s for s in shift_cache.target_splits(dataset)}
    with connect(db) as con:
        stored = {s.split: s for s in list_splits(con, out.run_key)}
        assert out.digest == run_digest(con, out.run_key)
        logits, labels = read_val(con, out.run_key)
        run = con.execute(
            "SELECT suite, n_classes, code_version, checkpoint_sha256 FROM runs WHERE run_key = ?",
            [out.run_key],
        ).fetchone()
    assert set(stored) == set(expected) | {"val"}
    val = stored["val"]
    assert (val.role, val.shift_family, val.shift, val.severity) == ("val", "source", "val", None)
    for name, spec in expected.items():
        s = stored[name]
        assert (s.role, s.shift_family, s.shift, s.severity) == (
            "target", spec.shift_family, spec.shift, spec.severity,
        )
        assert s.n_samples > 0 and 0.0 <= s.true_accuracy <= 1.0
    n_classes = 3 if dataset == "fmnist-coarse" else 10
    assert logits.shape == (labels.shape[0], n_classes)
    assert run == ("fmnist", n_classes, "abc", ckpt.sha256)


def test_extract_is_idempotent_and_checks_inputs(tmp_path, monkeypatch, state_home):
    ref = stage_tiny(tmp_path, monkeypatch, "fmnist-coarse")
    ckpt = train_classifier(ref, "lenet", 0, epochs=1, device="cpu", progress=False)

    first = extract(ckpt, device="cpu")
    second = extract(ckpt, device="cpu")
    assert first == second
    with duckdb.connect(first.db_path, read_only=True) as con:
        rows = con.execute(
            "SELECT count(*) FROM splits WHERE run_key = ?", [first.run_key]
        ).fetchone()
    assert rows[0] == len(target_splits("fmnist-coarse")) + 1

    with pytest.raises(ValueError, match="suite"):
        extract(ckpt, suite="cifar", device="cpu")
    with pytest.raises(ValueError, match="SHA-256"):
        extract(dataclasses.replace(ckpt, sha256="0" * 64), device="cpu")
    with pytest.raises(FileNotFoundError, match="train stage"):
        extract(dataclasses.replace(ckpt, path=str(tmp_path / "gone.pt")), device="cpu")


# ------------------------------------------------------------------------------ features
def test_extract_stores_penultimate_features_and_leaves_logits_unchanged(
        tmp_path, monkeypatch, state_home):
    """The features are the output layer's input (checked against a forward pass of the body
    without the layer), one row per logits row, float16, content-addressed and recorded in
    ``feature_files``; the logits equal those of an extract without features, bit for bit."""
    import numpy as np
    import torch

    from storage.features import feature_entries, feature_path
    from storage.results import read_logits_file
    from tasks.models.backbones import get_backbone
    from tasks.runtime.checkpoints import load_checkpoint
    from tasks.stages.extract import train_subsample

    ref = stage_tiny(tmp_path, monkeypatch, "fmnist-coarse")
    ckpt = train_classifier(ref, "mlp", 0, epochs=1, device="cpu", progress=False)
    with_features = extract(ckpt, db=tmp_path / "a.duckdb", device="cpu")
    without = extract(ckpt, db=tmp_path / "b.duckdb", device="cpu", features=False)
    content = read_logits_file(with_features.path)
    plain = read_logits_file(without.path)
    assert plain.features is None and content.features is not None
    for name, (logits, labels) in plain.arrays.items():
        np.testing.assert_array_equal(content.arrays[name][0], logits)
        x = content.features.split(name)
        assert x.dtype == np.float16 and x.shape[0] == logits.shape[0]
    with connect(with_features.db_path, read_only=True) as con:
        entries = feature_entries(con, with_features.run_key)
    assert {e.split for e in entries} == set(content.arrays) | {"train"}
    assert all(feature_path(tmp_path / "results", e.sha256).is_file() for e in entries)
    # the val features are the input of the MLP's last linear layer
    state, meta = load_checkpoint(ckpt.path)
    model = get_backbone("mlp", int(meta["n_classes"]), tuple(meta["input_shape"]))
    model.load_state_dict(state)
    model.eval()
    last = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
    seen = []
    last.register_forward_hook(lambda m, i, o: seen.append(i[0].detach()))
    from tasks.data.datasets import get_dataset_spec
    from tasks.models.modalities import get_adapter

    spec = get_dataset_spec(ckpt.dataset)
    from pathlib import Path

    source = spec.load_source(Path(ref.root))
    get_adapter(spec.modality).predict(model, spec, source.val_x, torch.device("cpu"), 64)
    want = torch.cat(seen).numpy().astype(np.float16)
    assert want.shape[1] < content.arrays["val"][0].shape[1] * 100  # the hidden width, not pixels
    np.testing.assert_array_equal(content.features.split("val"), want)
    # the training subsample: every row up to the limit, a seeded subsample beyond
    train_x, train_y = content.features.train()
    assert train_x.shape[0] == train_y.shape[0] <= 10_000
    big = train_subsample(50_000, 3)
    assert len(big) == 10_000 and len(set(big.tolist())) == 10_000 and (np.diff(big) > 0).all()
    assert (big == train_subsample(50_000, 3)).all() and not (big == train_subsample(50_000, 4)).all()


def test_a_failed_extract_leaves_no_feature_file(tmp_path, monkeypatch, state_home):
    from tasks.stages import extract as stage

    ref = stage_tiny(tmp_path, monkeypatch, "fmnist-coarse")
    ckpt = train_classifier(ref, "mlp", 0, epochs=1, device="cpu", progress=False)
    calls = {"n": 0}
    real = stage._checked

    def fail_on_third(info, logits, labels, n_classes):
        calls["n"] += 1
        if calls["n"] == 3:
            raise ValueError(f"split {info.split!r}: the model produced NaN or infinite logits.")
        return real(info, logits, labels, n_classes)

    monkeypatch.setattr(stage, "_checked", fail_on_third)
    with pytest.raises(ValueError, match="NaN or infinite"):
        extract(ckpt, db=tmp_path / "bench.duckdb", device="cpu")
    folder = tmp_path / "results" / "features"
    assert not folder.exists() or not any(folder.iterdir())
