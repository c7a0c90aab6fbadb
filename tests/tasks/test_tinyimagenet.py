"""Tiny ImageNet and Tiny-ImageNet-C on tiny files written here in the releases' exact layouts.

The fakes (:func:`write_release`): ``tiny-imagenet-200/`` with the real ``wnids.txt``, three
training classes of solid-colour 64 x 64 JPEGs (one greyscale) and their ``_boxes.txt``, six
validation images with ``val_annotations.txt``, two test images; ``Tiny-ImageNet-C/`` with every
corruption and severity folder, two images each. Solid colours survive JPEG within a few levels,
so decoded pixels are checked against the colours written. The fetch runs against a local HTTP
server on 127.0.0.1 serving a zip and a tar built from those files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tasks.catalog import dataset_status
from tasks.data.datasets import DATASETS, get_dataset_spec, imagenet
from tasks.data.datasets import tinyimagenet as tiny
from tasks.data.errors import DatasetUnavailableError
from tasks.data.fetch import fetch_dataset
from tasks.data.spec import RemoteFile
from tasks.data.targets import generate_split, get_target_split, target_splits
from tests.tasks.test_fetch import server  # noqa: F401  (the fixture)

#: Training classes of the fake release (labels 0, 22 and 199 of wnids.txt).
TRAIN_CLASSES = (0, 22, 199)
TRAIN_PER_CLASS = 4
#: Validation images: (label, RGB colour).
VAL = ((22, (200, 30, 30)), (0, (30, 200, 30)), (199, (30, 30, 200)), (0, (120, 120, 120)),
       (22, (250, 250, 10)), (199, (10, 250, 250)))
C_LABELS = (0, 199)


def _solid(path: Path, colour: tuple[int, int, int], grey: bool = False,
           side: int = tiny.SIDE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.new("RGB", (side, side), colour)
    (img.convert("L") if grey else img).save(path, format="JPEG", quality=95)


def _colour(label: int, k: int) -> tuple[int, int, int]:
    return (label % 256, (37 * k) % 256, 255 - label % 256)


def write_release(root: Path) -> None:
    """The fake releases under the data root ``root`` (see the module docstring)."""
    base = root / tiny.DATASET_DIR
    base.mkdir(parents=True)
    (base / "wnids.txt").write_text("".join(f"{w}\n" for w in tiny.WNIDS))
    (base / "words.txt").write_text("n00001740\tentity\n" + "".join(
        f"{w}\t{n}\n" for w, n in zip(tiny.WNIDS, tiny.CLASS_NAMES)))
    for label in TRAIN_CLASSES:
        wnid = tiny.WNIDS[label]
        for k in range(TRAIN_PER_CLASS):
            _solid(base / "train" / wnid / "images" / f"{wnid}_{k}.JPEG", _colour(label, k),
                   grey=(label, k) == (22, 1))
        (base / "train" / wnid / f"{wnid}_boxes.txt").write_text("".join(
            f"{wnid}_{k}.JPEG\t0\t0\t63\t63\n" for k in range(TRAIN_PER_CLASS)))
    for k, (label, colour) in enumerate(VAL):
        _solid(base / "val" / "images" / f"val_{k}.JPEG", colour)
    (base / "val" / "val_annotations.txt").write_text("".join(
        f"val_{k}.JPEG\t{tiny.WNIDS[label]}\t1\t2\t60\t61\n" for k, (label, _) in enumerate(VAL)))
    for k in range(2):
        _solid(base / "test" / "images" / f"test_{k}.JPEG", (9, 9, 9))
    for c, corruption in enumerate(tiny.CORRUPTIONS):
        for severity in tiny.SEVERITIES:
            for j, label in enumerate(C_LABELS):
                _solid(root / tiny.C_DIR / corruption / str(severity) / tiny.WNIDS[label]
                       / f"test_{j}.JPEG", (10 * c, 40 * severity, label))


@pytest.fixture
def release(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    write_release(root)
    return root


def _close(decoded: np.ndarray, colour: tuple[int, int, int], tol: int = 4) -> bool:
    return bool(np.abs(decoded.astype(int) - np.array(colour)).max() <= tol)


# --------------------------------------------------------------------------- classes and layout
def test_wnids_are_the_releases_and_names_are_torchvisions() -> None:
    assert len(tiny.WNIDS) == len(set(tiny.WNIDS)) == 200
    assert tiny.WNIDS[:3] == ("n02124075", "n04067472", "n04540053")  # wnids.txt's first lines
    assert tiny.WNIDS[-2:] == ("n07715103", "n02504458")
    index = {w: i for i, w in enumerate(imagenet.WNIDS)}
    assert tiny.CLASS_NAMES == tuple(imagenet.CLASS_NAMES[index[w]] for w in tiny.WNIDS)
    assert tiny.CLASS_NAMES[:2] == ("Egyptian cat", "reel")
    assert len(tiny.CORRUPTIONS) == 15 and tiny.SEVERITIES == (1, 2, 3, 4, 5)


def test_readers_follow_the_release_layout(release: Path) -> None:
    paths, labels = tiny.read_train(release)
    assert len(paths) == len(TRAIN_CLASSES) * TRAIN_PER_CLASS
    rel = [Path(p).relative_to(release).as_posix() for p in paths]
    assert rel == sorted(rel)  # the COT authors' sorted(glob(train/*/*/*.JPEG)) order
    first = min(tiny.WNIDS[c] for c in TRAIN_CLASSES)  # n01443537, label 22
    assert rel[0] == f"tiny-imagenet-200/train/{first}/images/{first}_0.JPEG"
    assert [tiny.WNIDS[y] for y in labels] == [r.split("/")[2] for r in rel]
    images = tiny.decode_images(paths)
    assert images.shape == (12, 64, 64, 3) and images.dtype == np.uint8
    for image, path, label in zip(images, rel, labels):
        k = int(path.rsplit("_", 1)[1].split(".")[0])
        if (label, k) == (22, 1):  # written greyscale: three equal channels
            assert np.array_equal(image[..., 0], image[..., 2])
        else:
            assert _close(image, _colour(int(label), k))

    val_paths, val_labels = tiny.read_val(release)
    assert [Path(p).name for p in val_paths] == sorted(f"val_{k}.JPEG" for k in range(6))
    by_name = {Path(p).name: int(y) for p, y in zip(val_paths, val_labels)}
    assert by_name == {f"val_{k}.JPEG": label for k, (label, _) in enumerate(VAL)}
    decoded = tiny.decode_images(val_paths)
    for image, path in zip(decoded, val_paths):
        assert _close(image, VAL[int(Path(path).stem.split("_")[1])][1])

    c_paths, c_labels = tiny.read_corrupted(release, "fog", 3)
    assert c_labels.tolist() == [0, 199] or sorted(c_labels.tolist()) == [0, 199]
    c_index = tiny.CORRUPTIONS.index("fog")
    for image, label in zip(tiny.decode_images(c_paths), c_labels):
        assert _close(image, (10 * c_index, 120, int(label)))


def test_threaded_decoding_gives_the_same_array(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    paths = []
    for k in range(300):  # above the threaded path's threshold
        path = tmp_path / f"{k}.JPEG"
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    assert np.array_equal(tiny.decode_images(paths, threads=0),
                          tiny.decode_images(paths, threads=3))


def test_source_is_a_seeded_tenth_of_the_training_images(release: Path) -> None:
    train_idx, val_idx = tiny.split_source(100_000)
    assert (train_idx.size, val_idx.size) == (90_000, 10_000)  # the COT authors' 90k / 10k
    assert np.intersect1d(train_idx, val_idx).size == 0
    assert np.array_equal(np.union1d(train_idx, val_idx), np.arange(100_000))
    again = tiny.split_source(100_000)
    assert np.array_equal(again[1], val_idx)
    assert not np.array_equal(tiny.split_source(100_000, seed=1)[1], val_idx)
    assert [a.size for a in tiny.split_source(2)] == [1, 1]
    with pytest.raises(ValueError, match="n must be an integer >= 2"):
        tiny.split_source(1)

    source = tiny.load_source(release)
    assert (source.n_train, source.n_val) == (11, 1)  # round(0.1 * 12) = 1
    assert source.train_x.shape == (11, 64, 64, 3) and source.train_x.dtype == np.uint8
    assert set(source.train_y.tolist()) | set(source.val_y.tolist()) == set(TRAIN_CLASSES)


def test_target_splits_are_the_val_set_and_each_c_folder(release: Path) -> None:
    names = [s.name for s in target_splits("tinyimagenet")]
    assert names[0] == "clean" and len(names) == 1 + 75
    assert names[1:] == [f"{c}-{s}" for c in tiny.CORRUPTIONS for s in tiny.SEVERITIES]
    pool = tiny.load_target_pool(release)
    x, y = generate_split("tinyimagenet", get_target_split("tinyimagenet", "clean"), pool)
    assert x.shape == (6, 64, 64, 3) and sorted(y.tolist()) == sorted(lb for lb, _ in VAL)
    split = get_target_split("tinyimagenet", "jpeg_compression-5")
    assert (split.shift_family, split.shift, split.severity) == ("synthetic", "jpeg_compression", 5)
    x, y = generate_split("tinyimagenet", split, pool)
    assert x.shape == (2, 64, 64, 3) and sorted(y.tolist()) == list(C_LABELS)
    assert _close(x[0], (10 * 14, 200, int(y[0])))
    assert tiny.TINY_C_FAMILY.cache is False  # views of the release: never copied


def test_stage_writes_the_manifest_once(release: Path) -> None:
    files = tiny.stage(release)
    manifest = release / tiny.MANIFEST
    assert files[0] == manifest and all(Path(f).is_file() for f in files)
    lines = manifest.read_text().splitlines()
    assert len(lines) == 12 + 6
    first = lines[0].split("\t")
    assert first[0] == f"tiny-imagenet-200/train/{tiny.WNIDS[22]}/images/{tiny.WNIDS[22]}_0.JPEG"
    assert int(first[1]) == (release / first[0]).stat().st_size
    stamp = manifest.stat().st_mtime_ns
    tiny.stage(release)
    assert manifest.stat().st_mtime_ns == stamp  # unchanged data: not rewritten
    assert get_dataset_spec("tinyimagenet").raw_files(release) == files


def test_missing_and_malformed_releases_say_what_is_wrong(release: Path, tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailableError) as info:
        tiny.stage(tmp_path / "empty")
    message = str(info.value)
    assert "alsa-bench fetch tinyimagenet" in message and "wnids.txt" in message
    assert "\n" not in message

    folder = release / tiny.C_DIR / "snow" / "4"
    folder.rename(folder.with_name("4-moved"))
    with pytest.raises(DatasetUnavailableError, match=r"snow/4.*fetch tinyimagenet"):
        tiny.stage(release)
    folder.with_name("4-moved").rename(folder)

    wnids = release / tiny.DATASET_DIR / "wnids.txt"
    wnids.write_text("".join(f"{w}\n" for w in reversed(tiny.WNIDS)))
    with pytest.raises(ValueError, match="release's order.*line 1"):
        tiny.read_train(release)
    wnids.write_text("".join(f"{w}\n" for w in tiny.WNIDS))

    notes = release / tiny.DATASET_DIR / "val" / "val_annotations.txt"
    good = notes.read_text()
    notes.write_text(good.replace(tiny.WNIDS[199], "n99999999"))
    with pytest.raises(ValueError, match="'n99999999'.*not one of the 200"):
        tiny.read_val(release)
    notes.write_text("\n".join(good.splitlines()[1:]) + "\n")
    with pytest.raises(ValueError, match="'val_0.JPEG' has no line"):
        tiny.read_val(release)
    notes.write_text(good)

    _solid(release / tiny.DATASET_DIR / "val" / "images" / "val_0.JPEG", (1, 2, 3), side=32)
    with pytest.raises(ValueError, match=r"val_0.JPEG' is 32 x 32 pixels"):
        tiny.decode_images(tiny.read_val(release)[0])
    (release / tiny.DATASET_DIR / "val" / "images" / "val_0.JPEG").write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match="cannot be decoded"):
        tiny.decode_images(tiny.read_val(release)[0])
    with pytest.raises(DatasetUnavailableError, match="does not exist.*fetch tinyimagenet --force"):
        tiny.decode_images([str(release / "gone.JPEG")])

    stray = release / tiny.C_DIR / "fog" / "1" / "n00000000"
    stray.mkdir()
    with pytest.raises(ValueError, match="'n00000000'"):
        tiny.read_corrupted(release, "fog", 1)
    with pytest.raises(ValueError, match="corruption must be one of"):
        tiny.read_corrupted(release, "speckle_noise", 1)  # an extra one, not in the 15


# --------------------------------------------------------------------------------------- inputs
def _authors_transform(images: np.ndarray) -> np.ndarray:
    """The COT authors' ``Resize(224), ToTensor(), Normalize(mean, std)`` with PIL and NumPy."""
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    out = []
    for image in images:
        big = Image.fromarray(image).resize((224, 224), Image.Resampling.BILINEAR)
        x = np.asarray(big, np.float32).transpose(2, 0, 1) / 255.0
        out.append((x - mean) / std)
    return np.stack(out)


def test_inputs_are_the_authors_upsampling_to_224(release: Path) -> None:
    rng = np.random.default_rng(1)
    smooth = np.kron(rng.integers(0, 256, (3, 16, 16, 3)), np.ones((1, 4, 4, 1))).astype(np.uint8)
    images = np.concatenate([smooth, rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)])
    ours = tiny.to_inputs(images)
    assert ours.shape == (5, 3, 224, 224) and ours.dtype == np.float32
    reference = _authors_transform(images)
    # The same triangle filter; PIL resizes in two passes, rounding the intermediate and the
    # final image to uint8 (half a level each): at most one level apart, over the channel's std
    gap = np.abs(ours - reference) * np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    assert gap.max() <= 1.01 / 255 and gap.mean() < 0.4 / 255  # (PIL: fixed-point weights)
    twin = tiny.to_inputs.on_device(torch.from_numpy(images))
    assert torch.equal(twin, torch.from_numpy(ours))  # the same torch operations
    spec = get_dataset_spec("tinyimagenet")
    assert spec.input_shape == (3, 224, 224) and spec.backbones == ("resnet18-ft", "resnet50",
                                                                    "vgg11")
    with pytest.raises(ValueError, match=r"shape \(n, 64, 64, 3\) and dtype uint8"):
        tiny.to_inputs(images[:, :32, :32])


# ---------------------------------------------------------------------------------------- fetch
def test_sources_pin_the_published_checksums() -> None:
    by_name = {f.filename: f for f in tiny.SOURCES}
    archive = by_name["tiny-imagenet-200.zip"]
    assert (archive.url, archive.md5, archive.size) == (
        "http://cs231n.stanford.edu/tiny-imagenet-200.zip", "90528d7ca1a48142e341f4ef8d21d0de",
        248_100_043)
    c = by_name["Tiny-ImageNet-C.tar"]
    assert c.url == "https://zenodo.org/records/2536630/files/Tiny-ImageNet-C.tar"
    assert (c.md5, c.size, c.extract) == ("f9c9a9dbdc11469f0b850190f7ad8be1", 1_794_775_040, True)
    weights = {f.filename: f for f in tiny.SOURCES if f.dest == "imagenet/weights"}
    assert set(weights) == {"resnet18-f37072fd.pth", "resnet50-0676ba61.pth"}  # not vgg11
    for name, remote in weights.items():
        assert remote.sha256.startswith(name.split("-")[1][:8]) and not remote.extract


def _archives(root: Path) -> tuple[bytes, bytes]:
    """``tiny-imagenet-200.zip`` and ``Tiny-ImageNet-C.tar`` of the fake release under ``root``."""
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as zf:
        for path in sorted((root / tiny.DATASET_DIR).rglob("*")):
            zf.write(path, path.relative_to(root).as_posix())
    tbuf = io.BytesIO()
    with tarfile.open(fileobj=tbuf, mode="w") as tar:
        tar.add(root / tiny.C_DIR, arcname=tiny.C_DIR)
    return zbuf.getvalue(), tbuf.getvalue()


def test_fetch_installs_both_releases_and_the_weights(
        server, monkeypatch, tmp_path) -> None:  # noqa: F811 (the imported fixture)
    made = tmp_path / "made"
    write_release(made)
    zipped, tarred = _archives(made)
    weights = b"stand-in for resnet50-0676ba61.pth"
    served = {}
    for path, data in (("/cs231n/tiny-imagenet-200.zip", zipped),
                       ("/zenodo/Tiny-ImageNet-C.tar", tarred), ("/models/r50.pth", weights)):
        server.files[path] = data
        served[path] = hashlib.sha256(data).hexdigest()
    spec = get_dataset_spec("tinyimagenet")
    sources = (
        dataclasses.replace(tiny.ZIP_ARCHIVE, url=server.url("/cs231n/tiny-imagenet-200.zip"),
                            md5=hashlib.md5(zipped).hexdigest(), size=len(zipped)),
        RemoteFile(url=server.url("/zenodo/Tiny-ImageNet-C.tar"), filename="Tiny-ImageNet-C.tar",
                   sha256=served["/zenodo/Tiny-ImageNet-C.tar"], size=len(tarred)),
        RemoteFile(url=server.url("/models/r50.pth"), filename="resnet50-0676ba61.pth",
                   sha256=served["/models/r50.pth"], extract=False, dest="imagenet/weights"),
    )
    monkeypatch.setitem(DATASETS, "tinyimagenet", dataclasses.replace(spec, sources=sources))
    root = tmp_path / "data"

    installed = fetch_dataset("tinyimagenet", root, progress=False)

    assert installed == [root, root, root / "imagenet" / "weights" / "resnet50-0676ba61.pth"]
    assert (root / "imagenet" / "weights" / "resnet50-0676ba61.pth").read_bytes() == weights
    assert (root / tiny.MANIFEST).is_file()  # verify_fetched ran the loader's check
    paths, labels = tiny.read_train(root)
    assert len(paths) == 12 and sorted(set(labels.tolist())) == list(TRAIN_CLASSES)
    assert tiny.read_corrupted(root, "zoom_blur", 2)[0].size == 2
    status = dataset_status("tinyimagenet", root)
    assert status.present and status.fetchable and not status.synthetic
    fetch_dataset("tinyimagenet", root, progress=False)  # the markers match: no download
    assert len(server.requests) == 3


def test_the_adapter_upsamples_on_the_device_for_cuda_batches(monkeypatch) -> None:
    """A CUDA batch of the COT backbones' inputs goes to the device as small uint8 rows and is
    upsampled there (the copy to a GPU this machine lacks is faked); CPU batches convert here."""
    from tasks.models.modalities import image

    spec = get_dataset_spec("cifar10").for_backbone("resnet50")
    images = np.random.default_rng(2).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    sent: list[tuple[torch.device, torch.dtype, tuple[int, ...]]] = []
    real_to = torch.Tensor.to

    def fake_to(self, *args, **kwargs):
        if args and isinstance(args[0], torch.device) and args[0].type == "cuda":
            sent.append((args[0], self.dtype, tuple(self.shape)))
            return self
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", fake_to)
    xb = image._batch(spec, images, torch.device("cuda"))
    assert sent == [(torch.device("cuda"), torch.uint8, (3, 32, 32, 3))]
    assert tuple(xb.shape) == (3, 3, 224, 224)
    assert xb.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(xb.numpy(), spec.to_inputs(images))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_upsampling_on_cuda_matches_the_cpu() -> None:
    images = np.random.default_rng(3).integers(0, 256, (64, 64, 64, 3), dtype=np.uint8)
    gpu = tiny.to_inputs.on_device(torch.from_numpy(images).cuda()).cpu().numpy()
    np.testing.assert_allclose(gpu, tiny.to_inputs(images), rtol=0, atol=1e-5)
