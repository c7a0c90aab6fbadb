"""ProjNorm (issue 32): the pipeline's score against a fine-tune written out by hand, step by step.

The hand-written version below uses none of :mod:`tasks.models.projnorm`: it rebuilds the run's
initialisation, draws the documented batch order with its own ``torch.Generator``, applies
momentum SGD and the cosine learning rate from their formulas (no ``torch.optim``), labels the
target rows with the trained model's argmax and takes the parameter distance over
``named_parameters`` itself.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from storage.db import connect
from storage.estimates import read_estimates
from tasks.data.datasets.fmnist import images_to_inputs
from tasks.models.backbones import get_backbone
from tasks.models.projnorm import (
    CPU_STEPS,
    GPU_STEPS,
    ProjNormConfig,
    batch_order,
    fit_projnorm,
    parameter_distance,
)
from tasks.runtime.checkpoints import load_checkpoint
from tasks.stages.download import stage_dataset
from tasks.stages.model_aware import projnorm_rows
from tasks.stages.splits import iter_target_splits
from tasks.stages.train import train_classifier
from tests.flows.conftest import TINY_LABEL_SHIFT, tiny_spec
from tests.tasks._stages import estimate, extract

STEPS, BATCH, LR, MOMENTUM = 7, 64, 0.05, 0.9


def hand_finetune(model: nn.Module, x: np.ndarray, labels, seed: int) -> nn.Module:
    """``STEPS`` steps of momentum SGD with a cosine learning rate, written out."""
    torch.manual_seed(seed)
    order = torch.Generator().manual_seed(seed)
    params = [p for p in model.parameters()]
    velocity = [torch.zeros_like(p) for p in params]
    batches: list[np.ndarray] = []
    while len(batches) < STEPS:
        perm = torch.randperm(len(x), generator=order).numpy()
        batches += [perm[i:i + BATCH] for i in range(0, len(x), BATCH)]
    for t, rows in enumerate(batches[:STEPS]):
        lr = LR * (1 + math.cos(math.pi * t / STEPS)) / 2
        model.train()
        xb = torch.from_numpy(images_to_inputs(x[rows]))
        loss = nn.functional.cross_entropy(model(xb), labels(rows, xb))
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, v, g in zip(params, velocity, grads, strict=True):
                v.mul_(MOMENTUM).add_(g) if t else v.copy_(g)
                p.add_(v, alpha=-lr)
    return model


@pytest.fixture
def tiny_run(monkeypatch, state_home: Path):
    import tasks.data.datasets as datasets
    import tasks.data.shifts.label_shift as label_shift

    monkeypatch.setitem(datasets.DATASETS, "tiny", tiny_spec())
    for name, value in TINY_LABEL_SHIFT.items():
        monkeypatch.setattr(label_shift, name, value)
    ref = stage_dataset("tiny")
    ckpt = train_classifier(ref, "mlp", 3, epochs=2, progress=False)
    return ref, ckpt


def test_pipeline_score_is_the_hand_written_finetune(tiny_run, state_home: Path):
    ref, ckpt = tiny_run
    db = state_home / "bench.duckdb"
    logits = extract(ckpt, suite="tiny", db=db)
    params = {"projnorm": {"steps": STEPS, "batch_size": BATCH, "lr": LR}}
    estimate(logits, methods=["ac", "projnorm"], method_params=params, checkpoint=ckpt)
    with connect(db, read_only=True) as con:
        rows = {r.split: r for r in read_estimates(con, ckpt.run_key) if r.method == "projnorm"}
    assert set(rows) == {"clean", *(s for s in rows if s.startswith("label_shift"))}

    state, meta = load_checkpoint(ckpt.path)
    base = get_backbone("mlp", 3, (1, 28, 28))
    base.load_state_dict(state)
    base.eval()
    torch.manual_seed(3)  # the train stage's initialisation
    init = get_backbone("mlp", 3, (1, 28, 28)).state_dict()
    source = tiny_spec().load_source(Path(ref.root))

    def fresh() -> nn.Module:
        model = get_backbone("mlp", 3, (1, 28, 28))
        model.load_state_dict(init)
        return model

    train_y = torch.from_numpy(np.asarray(source.train_y))
    reference = hand_finetune(fresh(), source.train_x, lambda rows, xb: train_y[rows], 3)
    for split, samples, _ in iter_target_splits(ref):
        def pseudo(rows, xb):
            with torch.no_grad():
                return base(xb).argmax(1)

        pseudo_model = hand_finetune(fresh(), samples, pseudo, 3)
        total = sum(float(((a.double() - b.double()) ** 2).sum()) for a, b in zip(
            [p for _, p in reference.named_parameters()],
            [p for _, p in pseudo_model.named_parameters()], strict=True))
        row = rows[split.name]
        assert json.loads(row.diagnostics_json)["score"] == pytest.approx(math.sqrt(total),
                                                                          rel=1e-5)
        assert math.isnan(row.estimated_accuracy)  # a score: the report maps it
        stored = json.loads(row.params_json)
        assert stored["steps"] == STEPS and stored["steps_scale"] == STEPS / GPU_STEPS


def test_each_split_is_cached_and_a_change_recomputes(tiny_run, state_home: Path, monkeypatch):
    ref, ckpt = tiny_run
    logits = extract(ckpt, suite="tiny", db=state_home / "bench.duckdb")
    from storage.results import read_logits_file

    targets = read_logits_file(logits.path).targets()
    params = {"steps": 3, "batch_size": 32}
    first = projnorm_rows(ckpt, targets, params=params)
    folder = state_home / "cache" / "projnorm" / ckpt.run_key
    assert len(list(folder.glob("*.json"))) == len(targets)
    import tasks.models.projnorm as projnorm

    calls = []
    real = projnorm.FittedProjNorm.score
    monkeypatch.setattr(projnorm.FittedProjNorm, "score",
                        lambda self, s: calls.append(1) or real(self, s))
    again = projnorm_rows(ckpt, targets, params=params)
    assert calls == []  # every split from the cache, no reference fine-tune either
    assert [r.diagnostics_json for r in again] == [
        r.diagnostics_json.replace('"cached": false', '"cached": true') for r in first]
    assert all(r.fit_seconds == 0.0 for r in again)
    # one damaged entry: that split alone is recomputed, to the same score
    victim = sorted(folder.glob("*.json"))[0]
    victim.write_text("not json")
    third = projnorm_rows(ckpt, targets, params=params)
    assert len(calls) == 1
    assert [json.loads(r.diagnostics_json)["score"] for r in third] == [
        json.loads(r.diagnostics_json)["score"] for r in first]
    # other steps: a new key for every split
    projnorm_rows(ckpt, targets, params={"steps": 2, "batch_size": 32})
    assert len(calls) == 1 + len(targets)


def test_the_default_steps_are_the_authors_on_a_gpu_and_a_tenth_on_the_cpu():
    assert ProjNormConfig().resolved_steps(torch.device("cpu")) == CPU_STEPS == GPU_STEPS // 10
    assert ProjNormConfig().resolved_steps(torch.device("cuda")) == GPU_STEPS == 500
    assert ProjNormConfig(steps=9).resolved_steps(torch.device("cuda")) == 9
    for bad, message in (({"steps": 0}, "steps must be an integer >= 1"),
                         ({"lr": 0.0}, "lr must be a finite number > 0"),
                         ({"batch_size": 1.5}, "batch_size must be an integer >= 1"),
                         ({"seed": -1}, "seed must be an integer >= 0")):
        with pytest.raises(ValueError, match=message):
            ProjNormConfig(**bad)


def test_batch_order_is_shuffled_passes_and_distance_reads_parameters_only():
    order = [b.tolist() for b in batch_order(5, 2, 7, seed=4)]
    g = torch.Generator().manual_seed(4)
    first, second = torch.randperm(5, generator=g).tolist(), torch.randperm(5, generator=g).tolist()
    assert order == [first[0:2], first[2:4], first[4:5], second[0:2], second[2:4], second[4:5],
                     torch.randperm(5, generator=g).tolist()[0:2]]
    a, b = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)), None
    b = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    b.load_state_dict(a.state_dict())
    b[1].running_mean += 5.0  # a buffer: not a parameter
    assert parameter_distance(a, b) == 0.0
    with torch.no_grad():
        b[0].weight[0, 0] += 3.0
        b[0].bias[1] -= 4.0
    assert parameter_distance(a, b) == pytest.approx(5.0)
    with pytest.raises(ValueError, match="same parameters"):
        parameter_distance(a, nn.Linear(3, 2))


def test_reference_finetune_leaves_the_base_model_alone():
    torch.manual_seed(0)
    base = nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
    init = {k: v.clone() for k, v in base.state_dict().items()}
    with torch.no_grad():
        base[1].weight += 1.0
    trained = {k: v.clone() for k, v in base.state_dict().items()}
    x = np.random.default_rng(0).normal(size=(40, 4)).astype(np.float32)
    y = np.arange(40) % 3
    fitted = fit_projnorm(base, init, lambda s: torch.from_numpy(s), x, y,
                          ProjNormConfig(steps=4, batch_size=8), torch.device("cpu"))
    assert all(torch.equal(trained[k], v) for k, v in base.state_dict().items())
    score, report = fitted.score(x)
    assert report["steps"] == 4 and score > 0.0
    assert fitted.params()["steps_scale"] == 4 / 500
    with pytest.raises(ValueError, match="one label per row"):
        fit_projnorm(base, init, lambda s: torch.from_numpy(s), x, y[:5],
                     ProjNormConfig(steps=1), torch.device("cpu"))
