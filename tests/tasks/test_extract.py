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
