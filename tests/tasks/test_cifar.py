"""CIFAR-10/100 loaders on tiny files written in the exact format of the official releases.

The batches are written as the release's Python 2 pickles: a dict with ``bytes`` keys, ``b"data"``
a ``uint8`` array ``(n, 3072)`` of red, green and blue 32x32 planes, labels as a list of ints;
byte strings as Python 2 ``str`` opcodes and numpy under its ``numpy.core`` name, as numpy 1
pickles it. CIFAR-10.1 is two ``.npy`` files, CIFAR-10.2 an ``.npz`` with ``images``/``labels``,
CIFAR-C one ``(5 k, 32, 32, 3)`` array per corruption and ``labels.npy``.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.synth_release import py2_dumps
from tasks.models.backbones import get_backbone, get_backbone_spec
from tasks.data.datasets import cifar
from tasks.data.errors import DatasetUnavailableError
from tasks.data.spec import imbalanced_counts
from tasks.models.modalities import get_adapter
from tasks.data.families import split_rng

N_TEST = 20  # test images per tiny test set (and rows per CIFAR-C severity block)


def _images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)


def _rows(images: np.ndarray) -> np.ndarray:
    """Independent encoding: ``row[c*1024 + y*32 + x] = image[y, x, c]``, element by element."""
    n = images.shape[0]
    out = np.empty((n, 3072), dtype=np.uint8)
    for c in range(3):
        for y in range(32):
            out[:, c * 1024 + y * 32 : c * 1024 + y * 32 + 32] = images[:, y, :, c]
    return out


def _batch(images: np.ndarray, labels: np.ndarray, key: bytes) -> bytes:
    return py2_dumps({
        b"batch_label": b"training batch 1 of 5",
        key: [int(v) for v in labels],
        b"data": _rows(images),
        b"filenames": [f"img_{i}.png".encode() for i in range(len(labels))],
    })


def _labels(n: int, n_classes: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(np.arange(n) % n_classes)


def _write_c(folder: Path, n_classes: int, test_labels: np.ndarray) -> dict[str, np.ndarray]:
    folder.mkdir(parents=True)
    arrays = {}
    for i, name in enumerate(cifar.CORRUPTIONS):
        arr = _images(5 * N_TEST, 100 + i)
        np.save(folder / f"{name}.npy", arr)
        arrays[name] = arr
    np.save(folder / "labels.npy", np.tile(test_labels, 5).astype(np.uint8))
    return arrays


@pytest.fixture
def cifar10_root(tmp_path: Path) -> tuple[Path, dict]:
    root = tmp_path / "data"
    folder = root / cifar.CIFAR10_DIR
    folder.mkdir(parents=True)
    truth: dict = {"train_x": [], "train_y": []}
    for i, name in enumerate(cifar.CIFAR10_TRAIN_FILES):
        x, y = _images(100, i), _labels(100, 10, i)
        (folder / name).write_bytes(_batch(x, y, b"labels"))
        truth["train_x"].append(x)
        truth["train_y"].append(y)
    truth["test_x"], truth["test_y"] = _images(N_TEST, 50), _labels(N_TEST, 10, 50)
    (folder / "test_batch").write_bytes(_batch(truth["test_x"], truth["test_y"], b"labels"))
    (folder / "batches.meta").write_bytes(py2_dumps(
        {b"label_names": [n.encode() for n in cifar.CIFAR10_CLASSES], b"num_vis": 3072}))
    v1 = root / cifar.CIFAR10_1_DIR
    v1.mkdir()
    truth["v1_x"], truth["v1_y"] = _images(12, 60), _labels(12, 10, 60)
    np.save(v1 / cifar.CIFAR10_1_FILES[0], truth["v1_x"])
    np.save(v1 / cifar.CIFAR10_1_FILES[1], truth["v1_y"].astype(np.int32))
    v2 = root / cifar.CIFAR10_2_DIR
    v2.mkdir()
    truth["v2_x"], truth["v2_y"] = _images(8, 70), _labels(8, 10, 70)
    np.savez(v2 / cifar.CIFAR10_2_FILE, images=truth["v2_x"], labels=truth["v2_y"])
    truth["c"] = _write_c(root / cifar.CIFAR10_C_DIR, 10, truth["test_y"])
    return root, truth


def test_batches_decode_to_the_right_pixels_labels_and_imbalance(cifar10_root) -> None:
    root, truth = cifar10_root
    x, y = cifar.read_batch(root / cifar.CIFAR10_DIR / "test_batch", b"labels", 10)
    assert x.dtype == np.uint8 and x.shape == (N_TEST, 32, 32, 3) and x.flags.c_contiguous
    np.testing.assert_array_equal(x, truth["test_x"])
    np.testing.assert_array_equal(y, truth["test_y"])
    # orientation: the first 32 bytes of a row are the top row of the red plane
    raw = _rows(truth["test_x"][:1])[0]
    assert x[0, 0, :, 0].tolist() == raw[:32].tolist()
    assert x[0, 1, 0, 2] == raw[2048 + 32]

    src = cifar.load_source_cifar10(root)
    meta = root / cifar.CIFAR10_DIR / "batches.meta"
    good_meta = meta.read_bytes()
    meta.write_bytes(py2_dumps({b"label_names": [b"cat", b"dog"]}))
    with pytest.raises(ValueError, match=r"batches\.meta' must list the 10 class names"):
        cifar.load_source_cifar10(root)
    meta.write_bytes(good_meta)
    all_x = np.concatenate(truth["train_x"])
    all_y = np.concatenate(truth["train_y"])
    counts = np.bincount(src.train_y, minlength=10)
    # 50 images per class here: the plan (4000+1000 for class 9) is scaled to fit, 1:3 kept
    assert counts[9] / counts[0] == pytest.approx(3.0, rel=0.1)
    assert np.all(np.diff(counts) >= 0)
    val_counts = np.bincount(src.val_y, minlength=10)
    assert val_counts[9] > val_counts[0]
    # every sample is a training image with its own label, and train/val are disjoint
    flat = all_x.reshape(len(all_x), -1)
    index = {row.tobytes(): i for i, row in enumerate(flat)}
    tr = [index[r.tobytes()] for r in src.train_x.reshape(src.n_train, -1)]
    va = [index[r.tobytes()] for r in src.val_x.reshape(src.n_val, -1)]
    assert not set(tr) & set(va)
    np.testing.assert_array_equal(all_y[tr], src.train_y)
    np.testing.assert_array_equal(all_y[va], src.val_y)


def test_full_size_plan_is_the_papers_imbalance() -> None:
    n_train = imbalanced_counts(10, cifar.CIFAR10_TRAIN_LARGEST)
    n_val = imbalanced_counts(10, cifar.CIFAR10_VAL_LARGEST)
    assert n_train[0] == 1333 and n_train[-1] == 4000 and int(n_train.sum()) == 26_667
    assert int((n_train + n_val).max()) <= 5000  # CIFAR-10 has 5,000 training images per class
    assert int((imbalanced_counts(100, 400) + imbalanced_counts(100, 100)).max()) <= 500


def test_target_pool_marks_each_test_set_and_clean_is_the_test_batch(cifar10_root) -> None:
    root, truth = cifar10_root
    pool = cifar.load_target_pool_cifar10(root)
    np.testing.assert_array_equal(
        pool.samples, np.concatenate([truth["test_x"], truth["v1_x"], truth["v2_x"]]))
    np.testing.assert_array_equal(
        pool.labels, np.concatenate([truth["test_y"], truth["v1_y"], truth["v2_y"]]))
    assert pool.labels.dtype == np.int64
    assert np.bincount(pool.subgroups).tolist() == [N_TEST, 12, 8]
    np.testing.assert_array_equal(pool.in_distribution_indices(), np.arange(N_TEST))
    assert isinstance(pool.extras["fog"], np.memmap)  # lazy: nothing read yet


def test_splits_are_the_release_files(cifar10_root) -> None:
    from tasks.data import families

    root, truth = cifar10_root
    pool = cifar.load_target_pool_cifar10(root)
    splits = cifar.CIFAR_C_FAMILY.splits_of("cifar10")
    assert len(splits) == 19 * 5 and len({s.name for s in splits}) == 95
    assert {s.severity for s in splits} == {1, 2, 3, 4, 5}
    assert {"saturate-5", "gaussian_noise-1"} <= {s.name for s in splits}
    by_name = {s.name: s for s in splits}
    for name, sev in (("fog", 1), ("saturate", 3), ("jpeg_compression", 5)):
        x, y = cifar.CIFAR_C_FAMILY.generate("cifar10", by_name[f"{name}-{sev}"], pool,
                                             split_rng("cifar10", name))
        block = slice((sev - 1) * N_TEST, sev * N_TEST)
        np.testing.assert_array_equal(x, truth["c"][name][block])
        np.testing.assert_array_equal(y, truth["test_y"])
        assert type(x) is np.ndarray and y.dtype == np.int64
    fam = families.test_set_family("natural", 7, cifar.SPECS[0].natural_targets)
    for split, key in zip(fam.splits_of("cifar10"), ("v1", "v2"), strict=True):
        x, y = fam.generate("cifar10", split, pool, split_rng("cifar10", split.name))
        np.testing.assert_array_equal(x, truth[f"{key}_x"])
        np.testing.assert_array_equal(y, truth[f"{key}_y"])


def test_registry_lists_every_split(cifar10_root) -> None:
    from tasks.data.targets import family_implementation, generate_split, target_splits

    assert family_implementation("synthetic", "image", "cifar10").module == "tasks.data.datasets.cifar"

    names = [s.name for s in target_splits("cifar10")]
    assert names[0] == "clean" and names[-2:] == ["cifar10.1", "cifar10.2"]
    assert len(names) == 1 + 95 + 2 and len(target_splits("cifar100")) == 1 + 95
    root, truth = cifar10_root
    pool = cifar.load_target_pool_cifar10(root)
    by_name = {s.name: s for s in target_splits("cifar10")}
    x, y = generate_split("cifar10", by_name["clean"], pool)
    np.testing.assert_array_equal(x, truth["test_x"])
    np.testing.assert_array_equal(y, truth["test_y"])
    x, _ = generate_split("cifar10", by_name["fog-2"], pool)
    np.testing.assert_array_equal(x, truth["c"]["fog"][N_TEST : 2 * N_TEST])
    x, y = generate_split("cifar10", by_name["cifar10.2"], pool)
    np.testing.assert_array_equal(x, truth["v2_x"])


def test_cifar100_reads_fine_labels(tmp_path: Path) -> None:
    root = tmp_path / "data"
    folder = root / cifar.CIFAR100_DIR
    folder.mkdir(parents=True)
    tx, ty = _images(400, 1), _labels(400, 100, 1)
    ex, ey = _images(N_TEST, 2), _labels(N_TEST, 100, 2)
    for name, x, y in (("train", tx, ty), ("test", ex, ey)):
        blob = py2_dumps({b"fine_labels": [int(v) for v in y], b"coarse_labels": [0] * len(y),
                           b"data": _rows(x), b"filenames": [b"a.png"] * len(y)})
        (folder / name).write_bytes(blob)
    (folder / "meta").write_bytes(py2_dumps(
        {b"fine_label_names": [n.encode() for n in cifar.CIFAR100_CLASSES]}))
    c = _write_c(root / cifar.CIFAR100_C_DIR, 100, ey)
    src = cifar.load_source_cifar100(root)
    assert src.n_train > 0 and src.train_y.max() < 100
    pool = cifar.load_target_pool_cifar100(root)
    np.testing.assert_array_equal(pool.samples, ex)
    np.testing.assert_array_equal(pool.labels, ey)
    assert pool.subgroups is None and pool.n_classes == 100
    split = {s.name: s for s in cifar.CIFAR_C_FAMILY.splits_of("cifar100")}["snow-2"]
    x, _ = cifar.CIFAR_C_FAMILY.generate("cifar100", split, pool, split_rng("cifar100", "x"))
    np.testing.assert_array_equal(x, c["snow"][N_TEST : 2 * N_TEST])
    assert len(cifar.CIFAR100_CLASSES) == 100 and cifar.CIFAR100_CLASSES[-1] == "worm"


def test_to_inputs_normalises_per_channel() -> None:
    images = _images(3, 9)
    x = cifar.cifar10_inputs(images)
    assert x.shape == (3, 3, 32, 32) and x.dtype == np.float32
    for c in range(3):
        want = (images[..., c] / 255.0 - cifar.CIFAR10_MEAN[c]) / cifar.CIFAR10_STD[c]
        np.testing.assert_allclose(x[:, c], want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"images must be uint8 of shape \(n, 32, 32, 3\)"):
        cifar.cifar100_inputs(images.astype(np.float32))


@pytest.mark.parametrize("fn", [cifar.cifar10_inputs, cifar.cifar100_inputs],
                         ids=["cifar10", "cifar100"])
def test_the_torch_twin_of_to_inputs_is_equal_bit_for_bit(fn) -> None:
    # every uint8 value in every channel, plus random rows: the CUDA path of the image adapter
    # converts with on_device, so its inputs must be exactly the CPU conversion's
    ramp = np.broadcast_to(np.arange(256, dtype=np.uint8)[:, None, None, None], (256, 32, 32, 3))
    images = np.concatenate([ramp, _images(7, 3)])
    want = fn(images)
    got = fn.on_device(torch.from_numpy(np.ascontiguousarray(images)))
    assert got.dtype == torch.float32 and tuple(got.shape) == want.shape
    assert got.contiguous().numpy().view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
    with pytest.raises(ValueError, match=r"uint8 tensor of shape \(n, 32, 32, 3\); got dtype "
                                         r"torch.float32, shape \(2, 32, 32, 3\)"):
        fn.on_device(torch.zeros(2, 32, 32, 3))


def test_the_image_adapter_converts_on_the_device_only_on_cuda(monkeypatch) -> None:
    # CPU batches keep the CPU conversion (the stored logits of every CPU run are unchanged);
    # a CUDA batch of a dataset with an on_device twin is sent as uint8 and converted there
    from tasks.models.modalities import image

    calls: list[tuple[str, object]] = []
    spec = next(s for s in cifar.SPECS if s.name == "cifar10")

    class _Spy:
        def __call__(self, x):
            calls.append(("cpu", x.dtype))
            return cifar.cifar10_inputs(x)

        def on_device(self, t):
            calls.append(("device", t.dtype))
            return cifar.cifar10_inputs.on_device(t)

    spied = dataclasses.replace(spec, to_inputs=_Spy())
    images = _images(4, 5)
    xb = image._batch(spied, images, torch.device("cpu"))
    assert calls == [("cpu", np.uint8)]
    assert xb.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(xb.numpy(), cifar.cifar10_inputs(images))
    calls.clear()
    moved: list[torch.device] = []
    real_to = torch.Tensor.to

    def fake_to(self, *args, **kwargs):  # stands in for the copy to a GPU this machine lacks
        if args and isinstance(args[0], torch.device) and args[0].type == "cuda":
            moved.append(args[0])
            return self
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", fake_to)
    xb = image._batch(spied, images, torch.device("cuda"))
    assert calls == [("device", torch.uint8)] and moved == [torch.device("cuda")]
    assert xb.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(xb.numpy(), cifar.cifar10_inputs(images))


class _Evil:
    def __reduce__(self):  # noqa: ANN204
        return (os.system, (f"touch {self.flag}",))

    def __init__(self, flag: Path) -> None:
        self.flag = flag


class _Eval:
    def __init__(self, flag: Path) -> None:
        self.flag = flag

    def __reduce__(self):  # noqa: ANN204
        return (eval, (f"__import__('pathlib').Path({str(self.flag)!r}).touch()",))


def test_malicious_pickle_is_refused_without_running(tmp_path: Path) -> None:
    flag = tmp_path / "pwned"
    path = tmp_path / "data_batch_1"
    path.write_bytes(py2_dumps({b"data": _Evil(flag), b"labels": [0]}))
    with pytest.raises(ValueError, match=r"refusing global (posix|os)\.system") as info:
        cifar.read_batch(path, b"labels", 10)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert not flag.exists()
    # builtins are refused too (protocol 2 spells them __builtin__), and so is a
    # Python 3 pickle, whose byte strings go through _codecs.encode
    path.write_bytes(py2_dumps([_Eval(flag)]))
    with pytest.raises(ValueError, match=r"refusing global (__builtin__|builtins)\.eval"):
        cifar.read_batch(path, b"labels", 10)
    assert not flag.exists()
    path.write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8)}, protocol=2))
    with pytest.raises(ValueError, match=r"refusing global _codecs\.encode"):
        cifar.read_batch(path, b"labels", 10)
    path.write_bytes(py2_dumps([1, 2]))
    with pytest.raises(ValueError, match=r"must be a dict with keys b'data' and b'labels'"):
        cifar.read_batch(path, b"labels", 10)
    path.write_bytes(py2_dumps({b"data": np.zeros((2, 5), np.uint8), b"labels": [0, 1]}))
    with pytest.raises(ValueError, match=r"b'data' must be a uint8 array \(n, 3072\)"):
        cifar.read_batch(path, b"labels", 10)
    good = py2_dumps({b"data": _rows(_images(2, 0)), b"labels": [0, 1]})
    path.write_bytes(good[: len(good) // 2])  # an interrupted copy
    with pytest.raises(ValueError, match=r"cannot read CIFAR batch .*official release"):
        cifar.read_batch(path, b"labels", 10)
    path.write_bytes(py2_dumps({b"data": _rows(_images(2, 0)), b"labels": [0, 10]}))
    with pytest.raises(ValueError, match=r"labels in \[0, 10\); got values from 0 to 10"):
        cifar.read_batch(path, b"labels", 10)


def test_object_arrays_are_refused(cifar10_root) -> None:
    root, _ = cifar10_root
    bad = np.array([{"x": 1}, None], dtype=object)
    np.save(root / cifar.CIFAR10_1_DIR / cifar.CIFAR10_1_FILES[1], bad, allow_pickle=True)
    with pytest.raises(ValueError, match="as a plain numpy array"):
        cifar.load_target_pool_cifar10(root)
    np.save(root / cifar.CIFAR10_1_DIR / cifar.CIFAR10_1_FILES[1], np.zeros(12, np.int64))
    np.savez(root / cifar.CIFAR10_2_DIR / cifar.CIFAR10_2_FILE, images=bad, labels=bad)
    with pytest.raises(ValueError, match="as a plain numpy archive"):
        cifar.load_target_pool_cifar10(root)
    (root / cifar.CIFAR10_2_DIR / cifar.CIFAR10_2_FILE).unlink()
    np.save(root / cifar.CIFAR10_C_DIR / "fog.npy", bad, allow_pickle=True)
    with pytest.raises(DatasetUnavailableError):
        cifar.load_target_pool_cifar10(root)  # the missing .npz is named first
    np.savez(root / cifar.CIFAR10_2_DIR / cifar.CIFAR10_2_FILE,
             images=_images(8, 70), labels=np.zeros(8, np.int64))
    with pytest.raises(ValueError, match=r"fog\.npy.*as a plain numpy array"):
        cifar.load_target_pool_cifar10(root)
    np.save(root / cifar.CIFAR10_C_DIR / "fog.npy", np.zeros((5 * N_TEST, 32, 32), np.uint8))
    with pytest.raises(ValueError, match=r"fog\.npy' must be uint8 images of shape"):
        cifar.load_target_pool_cifar10(root)


def test_missing_files_give_one_line_with_the_fetch_command(tmp_path: Path, cifar10_root) -> None:
    for stage, name in ((cifar.stage_cifar10, "cifar10"), (cifar.stage_cifar100, "cifar100")):
        with pytest.raises(DatasetUnavailableError) as info:
            stage(tmp_path / "empty")
        msg = str(info.value)
        assert "\n" not in msg and f"alsa-bench fetch {name}" in msg and "missing" in msg
    root, _ = cifar10_root
    assert cifar.stage_cifar10(root) == cifar.raw_files_cifar10(root)
    assert len(cifar.raw_files_cifar10(root)) == 7 + 2 + 1 + 1
    (root / cifar.CIFAR10_C_DIR / "spatter.npy").unlink()
    with pytest.raises(DatasetUnavailableError, match=r"spatter\.npy"):
        cifar.stage_cifar10(root)
    with pytest.raises(DatasetUnavailableError, match="alsa-bench fetch cifar10"):
        cifar.load_source_cifar10(tmp_path / "empty")


def test_sources_are_pinned_to_published_checksums() -> None:
    from torchvision.datasets import CIFAR10, CIFAR100

    assert (cifar.CIFAR10_ARCHIVE.url, cifar.CIFAR10_ARCHIVE.md5) == (CIFAR10.url, CIFAR10.tgz_md5)
    assert (cifar.CIFAR100_ARCHIVE.url, cifar.CIFAR100_ARCHIVE.md5) == (
        CIFAR100.url, CIFAR100.tgz_md5)
    names = {f.filename for f in cifar.SOURCES_CIFAR10}
    weights = {"resnet18-f37072fd.pth", "resnet50-0676ba61.pth"}  # the COT backbones' (fetched)
    assert names == {"cifar-10-python.tar.gz", *cifar.CIFAR10_1_FILES, cifar.CIFAR10_2_FILE,
                     "CIFAR-10-C.tar", *weights}
    assert {f.filename for f in cifar.SOURCES_CIFAR100} == {
        "cifar-100-python.tar.gz", "CIFAR-100-C.tar", *weights}
    spec10, spec100 = cifar.SPECS
    assert spec10.online and spec10.recipes["resnet18"]["optimizer"] == "sgd-step"
    assert spec10.recipes["resnet18"]["batch_size"] == 200
    assert spec10.backbones == spec100.backbones == ("resnet18", "resnet18-ft", "resnet50",
                                                     "vgg11")
    assert spec100.target_families == ("clean", "synthetic")


def test_resnet18_recipe_trains_on_the_loaded_source(cifar10_root) -> None:
    """The dataset's recipe applies to the backbone's entry as train.py applies it, and one
    epoch of ResNet18 runs through the image adapter on the decoded images, early stopping on."""
    root, _ = cifar10_root
    spec = cifar.SPECS[0]
    recipe = dataclasses.replace(get_backbone_spec("resnet18"), **dict(spec.recipes["resnet18"]))
    assert (recipe.optimizer, recipe.lr, recipe.patience, recipe.epochs) == (
        "sgd-step", 0.1, 10, 200)
    src = cifar.load_source_cifar10(root)
    torch.manual_seed(0)
    model = get_backbone("resnet18", spec.n_classes, spec.input_shape)
    report = get_adapter("image").fit(
        model, dataclasses.replace(recipe, batch_size=64), spec, (src.train_x, src.train_y),
        (src.val_x, src.val_y), epochs=1, seed=0, device=torch.device("cpu"), progress=False,
        key="cifar10.resnet18.s0")
    assert report.epochs_run == 1 and report.best_epoch == 1
    assert 0.0 <= report.best_val_accuracy <= 1.0 and np.isfinite(report.final_train_loss)


def test_release_views_are_not_copied_into_the_shift_cache():
    from tasks.data.targets import family_implementation

    assert family_implementation("synthetic", "image", "cifar10").cache is False
    assert family_implementation("natural", "image", "cifar10").cache is False
    assert family_implementation("synthetic", "image", "fmnist").cache is True
