"""The COT paper's backbones (ResNet18, ResNet50, VGG11 from ImageNet weights), offline.

Random initialisation (``ALSA_BENCH_RANDOM_INIT=1``) stands in for the published weights, except
where weight files are written here: a ResNet18 state dict saved from ``weights=None`` under the
real file name, its digest pinned by monkeypatching the table. Training runs one or two steps on
a few images; the 224-pixel inputs are checked where the network receives them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.models as tvm

from tasks.data import finetune_weights as fw
from tasks.data.datasets import get_dataset_spec
from tasks.data.errors import ChecksumError, DatasetUnavailableError
from tasks.data.synthetic import write_marker
from tasks.models.backbones import get_backbone, get_backbone_spec
from tasks.models.backbones.finetuned import COT_RECIPE, build_finetuned, replace_head
from tasks.models.modalities import get_adapter
from tasks.stages.versions import PROJECT_ROOT, stage_files

NAMES = ("resnet18-ft", "resnet50", "vgg11")


@pytest.fixture
def random_init(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty state folder (no weights) and random initialisation allowed."""
    monkeypatch.setenv("ALSA_BENCH_HOME", str(tmp_path / "state"))
    monkeypatch.setenv(fw.RANDOM_INIT_ENV, "1")
    return tmp_path / "state" / "data"


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------- architectures
@pytest.mark.parametrize(("name", "builder", "head"), [
    ("resnet18-ft", tvm.resnet18, "fc"), ("resnet50", tvm.resnet50, "fc"),
    ("vgg11", tvm.vgg11, "classifier.6"),
])
def test_torchvision_architecture_with_a_new_head(random_init, name, builder, head) -> None:
    """Built on the meta device (shapes, no memory: VGG11 has 129 M parameters)."""
    with torch.device("meta"):
        model = get_backbone(name, 7, (3, 32, 32))
        reference = builder(weights=None, num_classes=7)  # torchvision's own, 7 outputs
    assert _count(model) == _count(reference)
    assert [(k, p.shape) for k, p in model.named_parameters()] == [
        (k, p.shape) for k, p in reference.named_parameters()]
    assert model.get_submodule(head).out_features == 7 and model.training
    out = model.eval()(torch.empty(2, 3, 32, 32, device="meta"))
    assert out.shape == (2, 7)


def test_same_seed_same_network(random_init) -> None:
    torch.manual_seed(3)
    a = get_backbone("resnet18-ft", 5, (3, 224, 224)).state_dict()
    torch.manual_seed(3)
    b = get_backbone("resnet18-ft", 5, (3, 224, 224)).state_dict()
    torch.manual_seed(4)
    c = get_backbone("resnet18-ft", 5, (3, 224, 224)).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["fc.weight"], c["fc.weight"])


def test_recipe_is_the_authors_and_inputs_must_be_rgb(random_init) -> None:
    for name in NAMES:
        spec = get_backbone_spec(name)
        assert (spec.optimizer, spec.lr, spec.weight_decay, spec.batch_size, spec.epochs,
                spec.patience, spec.pretrained) == ("sgd-step", 1e-3, 0.0, 64, 20, None, False)
        assert spec.modalities == ("image",)
    assert COT_RECIPE["optimizer"] == "sgd-step"
    with pytest.raises(ValueError, match=r"RGB inputs .* >= 32; got input_shape=\(1, 28, 28\)"):
        get_backbone("resnet50", 10, (1, 28, 28))
    with pytest.raises(TypeError, match="ResNet .* or VGG"):
        replace_head(torch.nn.Linear(2, 2), 3)


# ----------------------------------------------------------------------------------- weights
def _write_resnet18(folder: Path, monkeypatch: pytest.MonkeyPatch, *,
                    full: bool) -> tuple[Path, dict]:
    """A ResNet18 ImageNet-shaped state dict under the real file name, pinned in the table."""
    torch.manual_seed(11)
    state = tvm.resnet18(weights=None).state_dict()
    path = folder / "imagenet" / "weights" / "resnet18-f37072fd.pth"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    entry = dataclasses.replace(fw.FINETUNE_WEIGHTS["resnet18-ft"],
                                sha256=digest if full else "", size=None)
    if not full:  # a prefix-only entry (as VGG11's): the name carries the digest's prefix
        named = path.with_name(f"resnet18-{digest[:8]}.pth")
        path.rename(named)
        path, entry = named, dataclasses.replace(entry, filename=named.name)
    monkeypatch.setitem(fw.FINETUNE_WEIGHTS, "resnet18-ft", entry)
    return path, state


@pytest.mark.parametrize("full", [True, False])
def test_published_weights_are_checked_and_loaded(tmp_path, monkeypatch, full) -> None:
    monkeypatch.delenv(fw.RANDOM_INIT_ENV, raising=False)
    path, state = _write_resnet18(tmp_path, monkeypatch, full=full)
    torch.manual_seed(0)
    model = build_finetuned("resnet18-ft", 10, (3, 224, 224), root=tmp_path)
    loaded = model.state_dict()
    body = [k for k in state if not k.startswith("fc.")]
    assert all(torch.equal(loaded[k], state[k]) for k in body)
    assert loaded["fc.weight"].shape == (10, 512)  # the new head, not the file's 1,000 classes
    path.write_bytes(path.read_bytes() + b"tampered")
    with pytest.raises(ChecksumError, match="expected SHA-256"):
        build_finetuned("resnet18-ft", 10, (3, 224, 224), root=tmp_path)


def test_absent_weights_say_how_to_get_them(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(fw.RANDOM_INIT_ENV, raising=False)
    with pytest.raises(DatasetUnavailableError) as info:
        build_finetuned("resnet50", 10, (3, 224, 224), root=tmp_path)
    message = str(info.value)
    assert "'resnet50-0676ba61.pth'" in message and "alsa-bench fetch cifar10" in message
    assert str(tmp_path / "imagenet" / "weights") in message and "\n" not in message
    with pytest.raises(DatasetUnavailableError) as info:
        build_finetuned("vgg11", 10, (3, 224, 224), root=tmp_path)
    message = str(info.value)
    assert "https://download.pytorch.org/models/vgg11-8a719046.pth" in message
    assert "no full SHA-256" in message and "8a719046" in message


def test_a_run_is_checked_before_it_starts(tmp_path, monkeypatch) -> None:
    root = tmp_path / "data"
    monkeypatch.delenv(fw.RANDOM_INIT_ENV, raising=False)
    fw.check_weights(["resnet18", "cnn3"], "cifar10", root)  # not COT backbones: nothing to check
    with pytest.raises(DatasetUnavailableError, match="alsa-bench fetch tinyimagenet"):
        fw.check_weights(["resnet50"], "tinyimagenet", root)
    monkeypatch.setenv(fw.RANDOM_INIT_ENV, "1")
    with pytest.raises(ValueError, match="real release: random initialisation of 'resnet50'"):
        fw.check_weights(["resnet50"], "tinyimagenet", root)
    write_marker(root, "tinyimagenet", {"generator": "test"})
    fw.check_weights(["resnet50", "vgg11"], "tinyimagenet", root)  # a generated release: allowed
    monkeypatch.setenv(fw.RANDOM_INIT_ENV, "maybe")
    with pytest.raises(ValueError, match="ALSA_BENCH_RANDOM_INIT must be 0 or 1"):
        fw.check_weights(["resnet50"], "tinyimagenet", root)
    monkeypatch.delenv(fw.RANDOM_INIT_ENV)
    path = fw.weights_path("resnet50", root)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"present: its digest is checked when it loads")
    fw.check_weights(["resnet50"], "tinyimagenet", root)


def test_fetch_lists_the_weights_with_full_digests_only() -> None:
    files = {f.filename: f for f in fw.remote_files()}
    assert set(files) == {"resnet18-f37072fd.pth", "resnet50-0676ba61.pth"}
    for name, remote in files.items():
        assert remote.sha256.startswith(name.split("-")[1].split(".")[0])
        assert remote.url == "https://download.pytorch.org/models/" + name
        assert (remote.dest, remote.extract) == ("imagenet/weights", False)
    assert (files["resnet18-f37072fd.pth"].size, files["resnet50-0676ba61.pth"].size) == (
        46_830_571, 102_530_333)
    assert fw.FINETUNE_WEIGHTS["vgg11"].sha256 == ""  # none published: never fetched
    for dataset in fw.FETCHED_BY:
        names = {f.filename for f in get_dataset_spec(dataset).sources}
        assert set(files) <= names and "vgg11-8a719046.pth" not in names


# ---------------------------------------------------------------------------------- training
def test_one_step_of_fine_tuning_on_224_pixel_inputs(random_init) -> None:
    """The dataset's inputs for the backbone are 224 pixels; one SGD step of the authors' recipe
    changes the weights; prediction gives finite logits (ResNet18, the cheapest of the three)."""
    name = "resnet18-ft"
    spec = get_dataset_spec("tinyimagenet").for_backbone(name)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    y = np.array([0, 1], dtype=np.int64)
    torch.manual_seed(0)
    model = get_backbone(name, spec.n_classes, spec.input_shape)
    seen: list[tuple[int, ...]] = []
    first_conv = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    first_conv.register_forward_pre_hook(lambda m, args: seen.append(tuple(args[0].shape)))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    recipe = dataclasses.replace(get_backbone_spec(name), batch_size=2)
    report = get_adapter("image").fit(model, recipe, spec, (x, y), (x, y), epochs=1, seed=0,
                                      device=torch.device("cpu"), progress=False, key="t")
    assert seen[0] == (2, 3, 224, 224) and report.epochs_run == 1
    assert np.isfinite(report.final_train_loss)
    after = model.state_dict()
    assert not torch.equal(before[next(iter(before))], after[next(iter(after))])
    logits = get_adapter("image").predict(model, spec, x, torch.device("cpu"), 4)
    assert logits.shape == (2, spec.n_classes) and np.isfinite(logits).all()


def test_cifar_resnet18_keeps_its_own_inputs_and_recipe() -> None:
    spec = get_dataset_spec("cifar10")
    assert spec.backbones == ("resnet18", "resnet18-ft", "resnet50", "vgg11")
    assert spec.for_backbone("resnet18").to_inputs is spec.to_inputs  # CIFAR statistics, 32 px
    assert spec.for_backbone("resnet50").to_inputs(
        np.zeros((1, 32, 32, 3), np.uint8)).shape == (1, 3, 224, 224)
    assert spec.recipes["resnet18"]["lr"] == 0.1 and "resnet50" not in spec.recipes


# ------------------------------------------------------------------------------- cache keys
def test_the_new_backbones_move_only_their_datasets_keys() -> None:
    """No other dataset's train or extract version hashes the new modules."""
    new = {"tasks/models/backbones/finetuned.py", "tasks/data/finetune_weights.py",
           "tasks/data/datasets/tinyimagenet.py", "tasks/data/datasets/_upsample.py"}
    for dataset in ("fmnist", "imagenet"):
        for stage in ("train", "extract"):
            files = {p.relative_to(PROJECT_ROOT).as_posix()
                     for p in stage_files(stage, dataset=dataset)}
            assert not files & new, (dataset, stage, files & new)
    files = {p.relative_to(PROJECT_ROOT).as_posix()
             for p in stage_files("train", dataset="cifar10")}
    assert {"tasks/models/backbones/finetuned.py", "tasks/data/finetune_weights.py",
            "tasks/data/datasets/_upsample.py"} <= files


def test_alsa_bench_run_checks_the_weights_before_prefect_starts(state_home, monkeypatch) -> None:
    """``alsa-bench run``'s check of online data (flows/cli.py), on a generated release."""
    from benchmarks import synth_release
    from flows.cli import _check_online
    from tasks.plan import make_plans

    synth_release.generate("tinyimagenet", state_home / "data", scale=0.001, jobs=1)
    plans = make_plans(["tinyimagenet"], backbones=["resnet50"])
    monkeypatch.delenv(fw.RANDOM_INIT_ENV, raising=False)
    with pytest.raises(DatasetUnavailableError) as info:
        _check_online(plans)
    assert "alsa-bench fetch tinyimagenet" in str(info.value) and "\n" not in str(info.value)
    monkeypatch.setenv(fw.RANDOM_INIT_ENV, "1")
    _check_online(plans)  # a generated release may start from random weights
