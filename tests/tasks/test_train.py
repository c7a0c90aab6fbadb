"""Training on tiny Fashion-MNIST files: checkpoint layout, determinism, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tasks.models.backbones import get_backbone
from storage.hashing import file_sha256
from tasks.runtime.checkpoints import load_checkpoint, run_key
from tasks.runtime.devices import resolve_device
from tasks.stages.train import train_classifier
from tests.tasks.test_fmnist import stage_tiny


@pytest.fixture
def tiny(tmp_path, monkeypatch, state_home):
    return stage_tiny(tmp_path, monkeypatch)


def test_one_epoch_writes_a_checkpoint(tiny, tmp_path):
    ref = train_classifier(tiny, "lenet", 0, epochs=1, device="cpu", progress=False)

    path = Path(ref.path)
    assert ref.run_key == "fmnist.lenet.s0" == run_key("fmnist", "lenet", 0)
    assert (ref.dataset, ref.backbone, ref.seed) == ("fmnist", "lenet", 0)
    assert path.name == "fmnist.lenet.s0.pt" and path.parent.parent == tmp_path / "state"
    assert ref.sha256 == file_sha256(path)
    assert not list(path.parent.glob(".*.tmp"))

    blob = torch.load(path, weights_only=True)
    assert blob["format"] == 1
    assert all(t.device.type == "cpu" for t in blob["state_dict"].values())
    state, meta = load_checkpoint(path)
    assert meta["dataset_sha256"] == tiny.sha256 and meta["epochs"] == 1
    net = get_backbone("lenet", meta["n_classes"], tuple(meta["input_shape"]))
    net.load_state_dict(state, strict=True)

    side = json.loads(path.with_suffix(".json").read_text())
    assert side["train_seconds"] > 0 and 0.0 <= side["val_accuracy"] <= 1.0
    assert side["dataset_root"] == tiny.root


def test_same_seed_same_checkpoint_hash(tiny, tmp_path):
    def train(seed: int, folder: str):
        return train_classifier(
            tiny, "mlp", seed, epochs=1, checkpoint_dir=tmp_path / folder, progress=False,
            device="cpu",
        )

    a, b, c = train(1, "a"), train(1, "b"), train(2, "c")

    assert a.sha256 == b.sha256
    assert c.sha256 != a.sha256


def test_max_train_samples_and_threads_restored(tiny, tmp_path):
    before = torch.get_num_threads()
    ref = train_classifier(
        tiny, "resnet", 0, epochs=1, max_train_samples=50, checkpoint_dir=tmp_path, progress=False,
        device="cpu",
    )
    assert load_checkpoint(ref.path)[1]["n_train"] == 50
    assert torch.get_num_threads() == before


def test_bad_arguments(tiny, tmp_path):
    with pytest.raises(ValueError, match="backbone must be one of"):
        train_classifier(tiny, "vgg", 0, checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match="seed"):
        train_classifier(tiny, "mlp", -1, checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match="epochs"):
        train_classifier(tiny, "mlp", 0, epochs=0, checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match="device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            resolve_device("cuda")
    assert resolve_device("auto").type in ("cpu", "cuda")


def test_not_a_checkpoint(tmp_path):
    bogus = tmp_path / "x.pt"
    torch.save({"format": 99}, bogus)
    with pytest.raises(ValueError, match="format"):
        load_checkpoint(bogus)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt")
