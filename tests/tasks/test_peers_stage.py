"""The peers step (GDE in the pipeline; issue 32): pairing, the row check, rows beside the
estimate stage's, and target splits row-identical across training seeds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import storage
from storage.db import connect
from storage.estimates import read_estimates
from storage.results import ingest, read_logits_file, write_logits_file
from storage.runs import RunInfo
from tasks.runtime.refs import LogitsRef
from tasks.stages.download import stage_dataset
from tasks.stages.peers import check_same_rows, compute_peer_estimates, peer_runs
from tasks.stages.train import train_classifier
from tests.flows.conftest import TINY_LABEL_SHIFT, tiny_spec
from tests.tasks._stages import estimate, extract


def test_each_seed_is_paired_with_the_next_and_the_last_with_the_first():
    keys = ["a.mlp.s0", "a.mlp.s1", "a.mlp.s2", "a.lenet.s0", "a.lenet.s1", "b.mlp.s4"]
    pairs = peer_runs(keys)
    assert [pairs[k][0] for k in ("a.mlp.s0", "a.mlp.s1", "a.mlp.s2")] == [
        "a.mlp.s1", "a.mlp.s2", "a.mlp.s0"]
    assert pairs["a.lenet.s0"] == ["a.lenet.s1"] and pairs["a.lenet.s1"] == ["a.lenet.s0"]
    assert "b.mlp.s4" not in pairs  # a run alone has no peer
    assert peer_runs(["x.m.s10", "x.m.s2"])["x.m.s2"] == ["x.m.s10"]  # numeric seed order
    with pytest.raises(ValueError, match="run keys must read"):
        peer_runs(["no-seed"])


def _write(root: Path, run_key: str, seed: int, rng, *, labels_of=None, n_target=90):
    """A run's logits file with a val split and two target splits (3 classes)."""
    y = {name: (labels_of or {}).get(name, np.arange(n) % 3)
         for name, n in (("val", 120), ("clean", n_target), ("noise-2", n_target))}
    splits = []
    for name, labels in y.items():
        z = rng.normal(size=(len(labels), 3)).astype(np.float32) + 1.5 * np.eye(3)[labels]
        role = "val" if name == "val" else "target"
        fam = None if role == "val" else name.split("-")[0]
        splits.append((storage.SplitInfo(name, role, fam, fam, None), z.astype(np.float32),
                       labels))
    dataset, backbone = run_key.split(".")[:2]
    published = write_logits_file(RunInfo(run_key, "toy", dataset, backbone, seed, 3), splits,
                                  root)
    return LogitsRef(run_key=run_key, db_path=str(root.parent / "bench.duckdb"), digest="",
                     path=published.path, sha256=published.sha256), splits


def test_gde_rows_are_the_two_files_disagreement_and_sit_beside_the_estimate_stage(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "results"
    a, splits_a = _write(root, "toy.mlp.s0", 0, rng)
    b, splits_b = _write(root, "toy.mlp.s1", 1, rng)
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        ingest(con, a.path)
    estimate(a, methods=["ac"])
    ref = compute_peer_estimates(a, [b])
    with connect(db) as con:
        ingest(con, ref.path)
        rows = read_estimates(con, "toy.mlp.s0")
    assert {r.method for r in rows} == {"ac", "gde"}  # both files' rows are held
    gde = {r.split: r for r in rows if r.method == "gde"}
    za = {info.split: z for info, z, _ in splits_a}
    zb = {info.split: z for info, z, _ in splits_b}
    for split in ("clean", "noise-2"):
        agree = np.mean([za[split][i].argmax() == zb[split][i].argmax()
                         for i in range(len(za[split]))])
        assert gde[split].estimated_accuracy == pytest.approx(agree, abs=1e-15)
        assert json.loads(gde[split].params_json)["peer_run"] == "toy.mlp.s1"
        assert gde[split].per_class_json is not None


@pytest.mark.parametrize("case", ["other backbone", "same seed", "other labels", "other size"])
def test_runs_that_did_not_see_the_same_rows_are_refused(tmp_path, case):
    rng = np.random.default_rng(1)
    root = tmp_path / "results"
    a, _ = _write(root, "toy.mlp.s0", 0, rng)
    key, seed, kwargs = {
        "other backbone": ("toy.lenet.s1", 1, {}),
        "same seed": ("toy.mlp.s0", 0, {}),
        "other labels": ("toy.mlp.s1", 1, {"labels_of": {"clean": (np.arange(90) + 1) % 3}}),
        "other size": ("toy.mlp.s1", 1, {"n_target": 80}),
    }[case]
    b, _ = _write(tmp_path / "other", key, seed, rng, **kwargs)
    message = {
        "other backbone": "are not peers: a peer is the same dataset and backbone",
        "same seed": "are not peers",
        "other labels": "hold split 'clean' with other labels or another row order",
        "other size": "do not hold the same splits",
    }[case]
    with pytest.raises(ValueError, match=message):
        compute_peer_estimates(a, [b])
    with pytest.raises(ValueError, match="needs at least one peer run"):
        compute_peer_estimates(a, [])
    with pytest.raises(ValueError, match="methods must name methods that read peers"):
        compute_peer_estimates(a, [b], methods=["ac"])


def test_target_splits_are_row_identical_across_training_seeds(monkeypatch, state_home):
    """Two seeds of one dataset and backbone, trained and extracted: every split has the same
    name, size and labels in the same order in both runs' files, and the splits are generated
    from the dataset alone (the generator takes no training seed; generated twice, every split
    is the same array), so GDE compares the two models on the same rows."""
    import tasks.data.datasets as datasets
    import tasks.data.shifts.label_shift as label_shift

    monkeypatch.setitem(datasets.DATASETS, "tiny", tiny_spec())
    for name, value in TINY_LABEL_SHIFT.items():
        monkeypatch.setattr(label_shift, name, value)
    ref = stage_dataset("tiny")
    db = state_home / "bench.duckdb"
    files = []
    for seed in (0, 1):
        ckpt = train_classifier(ref, "mlp", seed, epochs=1, progress=False)
        files.append(read_logits_file(extract(ckpt, suite="tiny", db=db).path))
    a, b = files
    assert {s.split for s in a.splits} == {s.split for s in b.splits}
    for info in a.splits:
        np.testing.assert_array_equal(a.arrays[info.split][1], b.arrays[info.split][1])
    check_same_rows(a, b)  # what the peers step checks before any estimate
    # the samples themselves: generated afresh (no cache) twice, from the dataset alone
    from tasks.stages.splits import iter_target_splits

    first = {s.name: x for s, x, _ in iter_target_splits(ref, cache_root=state_home / "c1")}
    second = {s.name: x for s, x, _ in iter_target_splits(ref, cache_root=state_home / "c2")}
    assert first.keys() == {s.split for s in a.targets()}
    for name in first:
        np.testing.assert_array_equal(first[name], second[name])
