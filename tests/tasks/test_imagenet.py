"""ImageNet -> ImageNetV2 with pretrained torchvision models, on tiny files in the real layouts.

The fakes: ``imagenet/val/<wnid>/*.JPEG`` for three wnids (torchvision classes 0, 1 and 999),
the three ImageNetV2 folders ``<set>-format-val/<class>/*.jpeg``, a flat
``ILSVRC2012_img_val.tar`` with a devkit, and weight files saved from ``weights=None`` models.
No AlexNet is built (61 M parameters); the pretrained path runs on MobileNetV2.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import tarfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch
import torchvision.models as tvm
from PIL import Image

from storage.db import connect
from storage.logits import list_splits
from tasks.models.backbones import get_backbone, get_backbone_spec, pretrained
from tasks.data.datasets import get_dataset_spec, imagenet
from tasks.data.errors import ChecksumError, DatasetUnavailableError
from tasks.stages.download import stage_dataset
from tests.tasks._stages import extract
from tasks.data.targets import generate_split, target_splits
from tasks.runtime.checkpoints import load_checkpoint, read_sidecar
from tasks.stages.train import train_classifier

#: Fake classes: wnid -> torchvision class index.
FAKE = {"n01440764": 0, "n01443537": 1, "n15075141": 999}
PER_CLASS = 5
V2_PER_CLASS = 2


def _jpeg(path: Path, rng: np.random.Generator, size: tuple[int, int] = (8, 8)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format="JPEG")


def make_imagenet(root: Path) -> Path:
    """The tiny ImageNet val + ImageNetV2 folders under ``root/imagenet``."""
    rng = np.random.default_rng(0)
    folder = root / "imagenet"
    for wnid in FAKE:
        for i in range(PER_CLASS):
            size = (8, 8) if i % 2 else (11, 7)
            _jpeg(folder / "val" / wnid / f"ILSVRC2012_val_{i:08d}_{wnid}.JPEG", rng, size)
    for _, _, _, v2_folder, *_ in imagenet.V2_SETS:
        for label in FAKE.values():
            for i in range(V2_PER_CLASS):
                _jpeg(folder / v2_folder / str(label) / f"{i}-{label}.jpeg", rng, (9, 12))
    return folder


def _dummy_weights(root: Path) -> None:
    for name in pretrained.WEIGHTS:
        path = pretrained.weights_path(name, root)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_bytes(b"not read by stage")


def _save_named(obj: object, folder: Path, stem: str) -> Path:
    """``torch.save`` ``obj`` under a torchvision-style name carrying its SHA-256 prefix."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    digest = hashlib.sha256(buffer.getvalue()).hexdigest()
    path = folder / f"{stem}-{digest[:8]}.pth"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return path


def _save_state(model: torch.nn.Module, folder: Path, stem: str) -> Path:
    return _save_named(model.state_dict(), folder, stem)


def _use_weights(monkeypatch, name: str, path: Path, full: bool = False) -> None:
    entry = dataclasses.replace(
        pretrained.WEIGHTS[name], filename=path.name,
        sha256=hashlib.sha256(path.read_bytes()).hexdigest() if full else "",
    )
    monkeypatch.setitem(pretrained.WEIGHTS, name, entry)


# --- dataset ---------------------------------------------------------------------------------


def test_wnids_and_class_names_are_torchvision_order():
    categories = tvm.MobileNet_V2_Weights.IMAGENET1K_V1.meta["categories"]
    assert len(imagenet.WNIDS) == 1000 and list(imagenet.WNIDS) == sorted(imagenet.WNIDS)
    assert imagenet.CLASS_NAMES == tuple(categories)
    assert (imagenet.WNIDS[0], imagenet.CLASS_NAMES[0]) == ("n01440764", "tench")
    assert (imagenet.WNIDS[1], imagenet.CLASS_NAMES[1]) == ("n01443537", "goldfish")
    assert (imagenet.WNIDS[999], imagenet.CLASS_NAMES[999]) == ("n15075141", "toilet tissue")


def test_val_labels_map_to_torchvision_indices(tmp_path):
    make_imagenet(tmp_path)
    paths, labels = imagenet.read_imagenet_val(tmp_path)

    assert paths.shape == labels.shape == (3 * PER_CLASS,)
    for path, label in zip(paths, labels, strict=True):
        assert FAKE[Path(path).parent.name] == label and Path(path).is_absolute()
    (tmp_path / "imagenet" / "val" / "n99999999").mkdir()
    with pytest.raises(ValueError, match="n99999999"):
        imagenet.read_imagenet_val(tmp_path)


def test_validation_subset_is_seeded_stratified_and_disjoint_from_clean(tmp_path):
    make_imagenet(tmp_path)
    source = imagenet.load_source(tmp_path)
    again = imagenet.load_source(tmp_path)
    pool = imagenet.load_target_pool(tmp_path)

    assert source.n_train == 0 and source.n_val == 3  # round(0.2 * 5) = 1 per class
    assert np.array_equal(source.val_x, again.val_x)
    clean = pool.samples[pool.in_distribution_indices()]
    assert not set(source.val_x) & set(clean)
    all_val, _ = imagenet.read_imagenet_val(tmp_path)
    assert sorted(set(source.val_x) | set(clean)) == sorted(all_val)

    # at the real size: 50 per class -> 10 per class in val, 40 in clean
    labels = np.repeat(np.arange(1000), 50)
    val_idx, clean_idx = imagenet.split_val(labels)
    assert val_idx.size == 10_000 and clean_idx.size == 40_000
    assert np.all(np.bincount(labels[val_idx], minlength=1000) == 10)
    assert np.intersect1d(val_idx, clean_idx).size == 0
    other, _ = imagenet.split_val(labels, seed=1)
    assert not np.array_equal(other, val_idx)


def test_to_inputs_matches_torchvision_transforms(tmp_path):
    rng = np.random.default_rng(1)
    files = []
    for i, size in enumerate([(8, 8), (37, 23), (20, 300)]):
        files.append(tmp_path / f"{i}.jpeg")
        _jpeg(files[-1], rng, size)
    paths = np.array([str(f) for f in files])

    for backbone, weights in (
        ("alexnet", tvm.AlexNet_Weights.IMAGENET1K_V1),
        ("mobilenet_v2", tvm.MobileNet_V2_Weights.IMAGENET1K_V1),
        ("efficientnet_b0", tvm.EfficientNet_B0_Weights.IMAGENET1K_V1),
    ):
        transform = weights.transforms()
        expected = torch.stack([transform(Image.open(f).convert("RGB")) for f in files]).numpy()
        got = imagenet.to_inputs_for(backbone)(paths)
        assert got.shape == (3, 3, 224, 224) and got.dtype == np.float32
        np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=backbone)
    # bilinear and bicubic differ: the per-backbone filter matters
    bicubic = imagenet.BACKBONE_INPUTS["efficientnet_b0"](paths)
    assert not np.allclose(imagenet.to_inputs(paths), bicubic)
    assert set(imagenet.BACKBONE_INPUTS) == {"efficientnet_b0"}
    with pytest.raises(ValueError, match="interpolation"):
        imagenet.to_inputs(paths, interpolation="nearest")
    (tmp_path / "bad.jpeg").write_bytes(b"no image")
    with pytest.raises(ValueError, match="bad.jpeg"):
        imagenet.to_inputs(np.array([str(tmp_path / "bad.jpeg")]))


def test_natural_splits_are_the_imagenetv2_folders(tmp_path):
    make_imagenet(tmp_path)
    pool = imagenet.load_target_pool(tmp_path)
    splits = {s.name: s for s in target_splits("imagenet")}

    assert {"clean", "imagenetv2-mf", "imagenetv2-t07", "imagenetv2-top"} <= set(splits)
    for name, _, _, folder, *_ in imagenet.V2_SETS:
        samples, labels = generate_split("imagenet", splits[name], pool)
        assert samples.shape == (3 * V2_PER_CLASS,)
        assert all(f"/{folder}/" in s for s in samples)
        assert [int(Path(s).parent.name) for s in samples] == labels.tolist()
        assert sorted(set(labels.tolist())) == [0, 1, 999]
    clean, clean_labels = generate_split("imagenet", splits["clean"], pool)
    assert clean.size == 3 * (PER_CLASS - 1) and all("/val/" in s for s in clean)
    assert [FAKE[Path(s).parent.name] for s in clean] == clean_labels.tolist()


def test_missing_data_says_where_and_how(tmp_path):
    with pytest.raises(DatasetUnavailableError) as info:
        imagenet.load_source(tmp_path)
    message = str(info.value)
    assert "\n" not in message and str(tmp_path / "imagenet" / "val") in message
    assert "ILSVRC2012_img_val.tar" in message and "prepare_val" in message
    assert "alsa-bench fetch imagenet" in message

    make_imagenet(tmp_path)
    folder = tmp_path / "imagenet" / "imagenetv2-top-images-format-val"
    for sub in sorted(folder.rglob("*"), reverse=True):
        sub.unlink() if sub.is_file() else sub.rmdir()
    folder.rmdir()
    with pytest.raises(DatasetUnavailableError, match="top-images-format-val.*fetch imagenet"):
        imagenet.load_target_pool(tmp_path)


def test_stage_checks_weights_and_fingerprints_the_images(tmp_path):
    make_imagenet(tmp_path)
    with pytest.raises(DatasetUnavailableError, match="alexnet-owt-7be5be79.pth"):
        imagenet.stage(tmp_path)
    _dummy_weights(tmp_path)

    first = stage_dataset("imagenet", tmp_path)
    manifest = (tmp_path / "imagenet" / "manifest.tsv").read_text().splitlines()
    assert len(manifest) == 3 * PER_CLASS + 3 * 3 * V2_PER_CLASS
    assert "val/n15075141/ILSVRC2012_val_00000000_n15075141.JPEG\t" in "\n".join(manifest)
    assert stage_dataset("imagenet", tmp_path).sha256 == first.sha256
    _jpeg(tmp_path / "imagenet" / "val" / "n01440764" / "extra.JPEG", np.random.default_rng(5))
    assert stage_dataset("imagenet", tmp_path).sha256 != first.sha256


def test_sources_pin_imagenetv2_and_the_weights():
    spec = get_dataset_spec("imagenet")
    by_name = {s.filename: s for s in spec.sources}
    mf = by_name["imagenetv2-matched-frequency.tar.gz"]
    assert mf.url.startswith("https://huggingface.co/datasets/vaishaal/ImageNetV2/")
    assert mf.sha256.startswith("f0c37fdf") and mf.extract and mf.dest == "imagenet"
    for name, weights in (("alexnet", tvm.AlexNet_Weights), ("efficientnet_b0",
                                                               tvm.EfficientNet_B0_Weights)):
        remote = by_name[pretrained.WEIGHTS[name].filename]
        assert remote.url == weights.IMAGENET1K_V1.url and not remote.extract
        assert remote.dest == pretrained.WEIGHTS_DIR
        assert remote.sha256.startswith(pretrained.WEIGHTS[name].prefix)
    assert pretrained.WEIGHTS["mobilenet_v2"].url == tvm.MobileNet_V2_Weights.IMAGENET1K_V1.url
    assert spec.backbones == ("alexnet", "mobilenet_v2", "efficientnet_b0")
    assert spec.online and spec.n_classes == 1000 and spec.input_shape == (3, 224, 224)


def _val_tar(path: Path, names: list[str]) -> None:
    rng = np.random.default_rng(2)
    with tarfile.open(path, "w") as tar:
        for name in names:
            buffer = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(buffer, "JPEG")
            info = tarfile.TarInfo(name)
            info.size = buffer.tell()
            buffer.seek(0)
            tar.addfile(info, buffer)


def _devkit(path: Path, truth: list[int]) -> None:
    """A devkit whose meta.mat gives ids 1..3 to three leaf wnids (not in sorted order)."""
    synsets = np.zeros(4, dtype=[("ILSVRC2012_ID", "O"), ("WNID", "O"), ("num_children", "O")])
    for row, (i, wnid, children) in enumerate(
        [(1, "n15075141", 0), (2, "n01440764", 0), (3, "n01443537", 0), (1001, "n00001740", 3)]
    ):
        synsets[row] = (i, wnid, children)
    meta = io.BytesIO()
    scipy.io.savemat(meta, {"synsets": synsets})
    files = {
        "ILSVRC2012_devkit_t12/data/meta.mat": meta.getvalue(),
        "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt":
            "".join(f"{t}\n" for t in truth).encode(),
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_prepare_val_sorts_the_flat_tar_by_the_devkit(tmp_path):
    truth = [2, 1, 3, 2]
    _devkit(tmp_path / "devkit.tar.gz", truth)
    names = [f"ILSVRC2012_val_{i:08d}.JPEG" for i in range(1, 5)]
    _val_tar(tmp_path / "val.tar", names)

    folder = imagenet.prepare_val(tmp_path / "val.tar", tmp_path / "devkit.tar.gz", tmp_path / "d")
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.JPEG")) == sorted([
        f"n01440764/{names[0]}", f"n15075141/{names[1]}", f"n01443537/{names[2]}",
        f"n01440764/{names[3]}",
    ])
    _, labels = imagenet.read_imagenet_val(tmp_path / "d")
    assert sorted(labels.tolist()) == [0, 0, 1, 999]
    with pytest.raises(FileExistsError):
        imagenet.prepare_val(tmp_path / "val.tar", tmp_path / "devkit.tar.gz", tmp_path / "d")


@pytest.mark.parametrize("names, match", [
    ([f"ILSVRC2012_val_{i:08d}.JPEG" for i in (1, 2, 3)], "holds 3 images"),
    (["ILSVRC2012_val_00000001.JPEG", "../evil.JPEG"], "evil"),
    (["ILSVRC2012_val_00000009.JPEG"], "no ground truth"),
])
def test_prepare_val_refuses_bad_archives_and_leaves_nothing(tmp_path, names, match):
    _devkit(tmp_path / "devkit.tar.gz", [2, 1, 3, 2])
    _val_tar(tmp_path / "val.tar", names)
    with pytest.raises(ValueError, match=match):
        imagenet.prepare_val(tmp_path / "val.tar", tmp_path / "devkit.tar.gz", tmp_path / "d")
    assert list((tmp_path / "d" / "imagenet").iterdir()) == []
    assert not (tmp_path / "evil.JPEG").exists()


# --- pretrained backbones --------------------------------------------------------------------


def test_pretrained_backbone_loads_the_saved_state_dict(state_home, monkeypatch):
    torch.manual_seed(0)
    reference = tvm.mobilenet_v2(weights=None, num_classes=3).eval()
    folder = state_home / "data" / pretrained.WEIGHTS_DIR
    _use_weights(monkeypatch, "mobilenet_v2", _save_state(reference, folder, "mobilenet_v2"))

    torch.manual_seed(1)  # a different initialisation: only the file can make them equal
    model = get_backbone("mobilenet_v2", 3, (3, 32, 32))
    for key, value in reference.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x))
    assert get_backbone_spec("mobilenet_v2").pretrained
    assert not get_backbone_spec("lenet").pretrained
    with pytest.raises(ValueError, match="does not fit"):
        get_backbone("mobilenet_v2", 5, (3, 32, 32))
    with pytest.raises(ValueError, match="RGB inputs"):
        get_backbone("mobilenet_v2", 3, (1, 28, 28))


def test_pretrained_weights_errors(state_home, monkeypatch):
    folder = state_home / "data" / pretrained.WEIGHTS_DIR
    with pytest.raises(DatasetUnavailableError) as info:
        pretrained.build_pretrained("efficientnet_b0", 1000, (3, 224, 224))
    message = str(info.value)
    assert "efficientnet_b0_rwightman-7f5810bc.pth" in message and str(folder) in message
    assert "alsa-bench fetch imagenet" in message and "\n" not in message
    with pytest.raises(DatasetUnavailableError, match="download https://download.pytorch.org"):
        pretrained.build_pretrained("mobilenet_v2", 1000, (3, 224, 224))

    for not_state in ([torch.zeros(2)], {"features.0.0.weight": 3}):
        _use_weights(monkeypatch, "mobilenet_v2", _save_named(not_state, folder, "mobilenet_v2"))
        with pytest.raises(ValueError, match="must hold a state dict"):
            pretrained.build_pretrained("mobilenet_v2", 3, (3, 32, 32))

    garbage = folder / "garbage.pth"
    garbage.write_bytes(b"\x00not a torch file")
    _use_weights(monkeypatch, "mobilenet_v2", garbage, full=True)
    with pytest.raises(ValueError, match="not a readable torch state dict"):
        pretrained.build_pretrained("mobilenet_v2", 3, (3, 32, 32))

    wrong = folder / "mobilenet_v2-00000000.pth"
    wrong.write_bytes(b"other bytes")
    _use_weights(monkeypatch, "mobilenet_v2", wrong)
    with pytest.raises(ChecksumError, match="00000000"):
        pretrained.build_pretrained("mobilenet_v2", 3, (3, 32, 32))
    with pytest.raises(ValueError, match="pretrained backbone must be one of"):
        pretrained.weights_path("resnet")


def test_train_classifier_on_a_pretrained_backbone_does_not_train(
    tmp_path, state_home, monkeypatch, caplog
):
    root = state_home / "data"
    make_imagenet(root)
    torch.manual_seed(0)
    reference = tvm.mobilenet_v2(weights=None, num_classes=1000).eval()
    path = _save_state(reference, root / pretrained.WEIGHTS_DIR, "mobilenet_v2")
    _use_weights(monkeypatch, "mobilenet_v2", path)
    _dummy_weights(root)
    monkeypatch.setattr(torch.optim.Optimizer, "step", lambda *a, **k: pytest.fail("stepped"))
    dataset = stage_dataset("imagenet", root)

    with caplog.at_level(logging.INFO, logger="tasks.stages.train"):
        ref = train_classifier(dataset, "mobilenet_v2", 0, epochs=3, device="cpu", progress=False)
    assert "ignored" in caplog.text

    state, meta = load_checkpoint(ref.path)
    for key, value in reference.state_dict().items():
        assert torch.equal(state[key], value), key
    assert (meta["epochs"], meta["epochs_run"], meta["n_train"]) == (0, 0, 0)
    assert meta["n_classes"] == 1000 and meta["max_train_samples"] is None
    source = imagenet.load_source(root)
    inputs = torch.from_numpy(imagenet.to_inputs(source.val_x))
    with torch.no_grad():
        expected = float((reference(inputs).argmax(1).numpy() == source.val_y).mean())
    side = read_sidecar(ref.path)
    assert side["val_accuracy"] == pytest.approx(expected) and side["final_train_loss"] is None
    assert json.loads(Path(ref.path).with_suffix(".json").read_text())["n_val"] == source.n_val

    again = train_classifier(dataset, "mobilenet_v2", 0, device="cpu", progress=False,
                             checkpoint_dir=tmp_path / "again")
    assert again.sha256 == ref.sha256  # the ignored epochs left no trace in the checkpoint

    # extraction reads the checkpoint like a trained one: val, clean and the ImageNetV2 sets
    out = extract(ref, suite="imagenet", db=tmp_path / "bench.duckdb", device="cpu",
                         batch_size=8)
    with connect(tmp_path / "bench.duckdb") as con:
        stored = {s.split: s for s in list_splits(con, out.run_key)}
    assert {name: s.n_samples for name, s in stored.items()} == {
        "val": 3, "clean": 3 * (PER_CLASS - 1),
        **{name: 3 * V2_PER_CLASS for name, *_ in imagenet.V2_SETS},
    }
    assert stored["val"].true_accuracy == pytest.approx(expected)
    assert stored["imagenetv2-mf"].shift_family == "natural"


def test_each_backbone_sees_its_own_transform():
    from tasks.data.datasets import get_dataset_spec

    spec = get_dataset_spec("imagenet")
    assert spec.for_backbone("efficientnet_b0").to_inputs is imagenet.BACKBONE_INPUTS[
        "efficientnet_b0"]
    assert spec.for_backbone("alexnet") is spec  # bilinear: the dataset's own transform
    fm = get_dataset_spec("fmnist")
    assert fm.for_backbone("lenet") is fm


def test_class_names_copy_matches_torchvision():
    from torchvision.models import AlexNet_Weights

    assert imagenet.CLASS_NAMES == tuple(AlexNet_Weights.IMAGENET1K_V1.meta["categories"])
