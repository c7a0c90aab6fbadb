"""``mnist`` (MNIST -> MNIST-M) on tiny files written in the exact release formats.

MNIST: gzipped idx files in torchvision's ``MNIST/raw`` layout (big-endian header, unsigned
bytes). MNIST-M: the DANN release's ``mnist_m/mnist_m_test/*.png`` with
``mnist_m_test_labels.txt`` lines "<file> <label>". Every image carries its index in two pixels,
so a loaded sample can be traced back to the image written.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tasks.data.datasets import get_dataset_spec, mnist
from tasks.data.errors import DatasetUnavailableError
from tasks.data.targets import generate_split, target_splits

#: Images per class of the fake training file: 10 % of the plan of the largest class (5,000).
PER_CLASS_TRAIN = 500
N_TEST = 30
N_MNISTM = 12


def _idx_bytes(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def write_idx(path: Path, array: np.ndarray, *, gz: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = _idx_bytes(array)
    if gz:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)
    return path


def _tagged_images(n: int, rng: np.random.Generator) -> np.ndarray:
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    images[:, 0, 0] = np.arange(n) % 256
    images[:, 0, 1] = np.arange(n) // 256
    return images


def _tag(images: np.ndarray) -> np.ndarray:
    return images[..., 0, 0].astype(np.int64) + 256 * images[..., 0, 1].astype(np.int64)


def write_fake_mnist(root: Path, *, gz: bool = True, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    train_y = np.repeat(np.arange(10), PER_CLASS_TRAIN)[rng.permutation(10 * PER_CLASS_TRAIN)]
    train_x = _tagged_images(train_y.size, rng)
    test_y = rng.integers(0, 10, size=N_TEST).astype(np.uint8)
    test_x = _tagged_images(N_TEST, rng)
    raw = root / "MNIST" / "raw"
    write_idx(raw / "train-images-idx3-ubyte", train_x, gz=gz)
    write_idx(raw / "train-labels-idx1-ubyte", train_y.astype(np.uint8), gz=gz)
    write_idx(raw / "t10k-images-idx3-ubyte", test_x, gz=gz)
    write_idx(raw / "t10k-labels-idx1-ubyte", test_y, gz=gz)
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}


def write_fake_mnist_m(root: Path, *, seed: int = 1) -> tuple[np.ndarray, np.ndarray, list[Path]]:
    """Half the PNGs 28 x 28 RGB, half 32 x 32 (resized by the loader)."""
    rng = np.random.default_rng(seed)
    folder = root / "mnist_m" / "mnist_m_test"
    folder.mkdir(parents=True, exist_ok=True)
    images, labels, files, lines = [], [], [], []
    for i in range(N_MNISTM):
        side = 28 if i % 2 == 0 else 32
        img = rng.integers(0, 256, size=(side, side, 3), dtype=np.uint8)
        name = f"{i:08d}.png"
        Image.fromarray(img, mode="RGB").save(folder / name)
        label = int(rng.integers(0, 10))
        images.append(img)
        labels.append(label)
        files.append(folder / name)
        lines.append(f"{name} {label}")
    # the release's order is that of the label file, not of the names
    order = rng.permutation(N_MNISTM)
    (root / "mnist_m" / "mnist_m_test_labels.txt").write_text(
        "\n".join(lines[i] for i in order) + "\n"
    )
    return np.asarray([images[i] for i in order], dtype=object), np.asarray(labels)[order], files


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    write_fake_mnist(tmp_path)
    write_fake_mnist_m(tmp_path)
    return tmp_path


def test_registry_entry():
    spec = get_dataset_spec("mnist")
    assert spec.suite == "mnist" and spec.online and spec.modality == "image"
    assert spec.n_classes == 10 and spec.input_shape == (3, 28, 28)
    assert spec.backbones == ("cnn3",)
    assert dict(spec.recipes["cnn3"]) == {
        "optimizer": "adam", "lr": 1e-3, "weight_decay": 0.0, "epochs": 100, "patience": 5,
    }
    assert spec.target_families == ("clean", "synthetic")


def test_archive_md5_copy_matches_torchvision():
    from torchvision.datasets import MNIST

    assert mnist.ARCHIVE_MD5 == dict(MNIST.resources)
    sources = {s.filename: s for s in get_dataset_spec("mnist").sources}
    for name, md5 in MNIST.resources:
        assert sources[name].md5 == md5
        assert sources[name].url == MNIST.mirrors[0] + name
        assert sources[name].dest == "MNIST/raw" and not sources[name].extract
    assert sources["mnist_m.tar.gz"].md5 == "859df31c91afe82e80e5012ba928f279"


def test_read_idx_round_trip(tmp_path: Path):
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(7, 28, 28), dtype=np.uint8)
    for gz in (True, False):
        path = write_idx(tmp_path / f"imgs-{gz}", images, gz=gz)
        out = mnist.read_idx(path, 3)
        assert out.dtype == np.uint8 and out.shape == (7, 28, 28)
        np.testing.assert_array_equal(out, images)


def test_source_is_imbalanced_1_to_100_and_traceable(root: Path):
    fake = write_fake_mnist(root)  # same seed: same files
    src = get_dataset_spec("mnist").load_source(root)
    assert src.train_x.dtype == np.uint8 and src.train_x.shape[1:] == (28, 28, 3)
    assert src.train_y.dtype == np.int64
    # the plan (40 + 440 c train, 10 + 110 c val) scaled by 500 / 5000 for the tiny file
    c = np.arange(10)
    np.testing.assert_array_equal(np.bincount(src.train_y, minlength=10), 4 + 44 * c)
    np.testing.assert_array_equal(np.bincount(src.val_y, minlength=10), 1 + 11 * c)
    assert np.bincount(src.train_y)[9] / np.bincount(src.train_y)[0] == 100
    # grey digits copied to three channels, pixels and labels those written
    for x, y in ((src.train_x, src.train_y), (src.val_x, src.val_y)):
        np.testing.assert_array_equal(x[..., 0], x[..., 1])
        np.testing.assert_array_equal(x[..., 0], x[..., 2])
        idx = _tag(x[..., 0])
        np.testing.assert_array_equal(x[..., 0], fake["train_x"][idx])
        np.testing.assert_array_equal(y, fake["train_y"][idx])
    train_idx, val_idx = _tag(src.train_x[..., 0]), _tag(src.val_x[..., 0])
    assert np.intersect1d(train_idx, val_idx).size == 0
    assert np.unique(train_idx).size == train_idx.size


def test_target_pool_and_splits(root: Path):
    fake = write_fake_mnist(root)
    mnistm_images, mnistm_labels, _ = write_fake_mnist_m(root)
    spec = get_dataset_spec("mnist")
    pool = spec.load_target_pool(root)
    assert pool.samples.shape == (N_TEST + N_MNISTM, 28, 28, 3) and pool.samples.dtype == np.uint8
    np.testing.assert_array_equal(pool.subgroups, [0] * N_TEST + [1] * N_MNISTM)
    assert pool.source_subgroups == (0,) and pool.novel_subgroups == (1,)

    splits = target_splits("mnist")
    assert [(s.name, s.shift_family, s.shift) for s in splits] == [
        ("clean", "clean", "clean"), ("mnist-m", "synthetic", "mnist-m"),
    ]
    x, y = generate_split("mnist", splits[0], pool)
    np.testing.assert_array_equal(x[..., 1], fake["test_x"])
    np.testing.assert_array_equal(y, fake["test_y"])

    x, y = generate_split("mnist", splits[1], pool)
    np.testing.assert_array_equal(y, mnistm_labels)
    for got, want in zip(x, mnistm_images):
        if want.shape[0] == 28:  # stored at 28 x 28: exact round trip
            np.testing.assert_array_equal(got, want)
        else:  # 32 x 32: torchvision's Resize(28) on the PIL image
            from torchvision.transforms import Resize

            ref = np.asarray(Resize(28)(Image.fromarray(want, mode="RGB")))
            np.testing.assert_array_equal(got, ref)


def test_uncompressed_idx_files_are_read(tmp_path: Path):
    fake = write_fake_mnist(tmp_path, gz=False)
    write_fake_mnist_m(tmp_path)
    x, y = mnist.load_mnist(tmp_path, train=False)
    np.testing.assert_array_equal(x[..., 2], fake["test_x"])
    assert all(p.is_file() for p in mnist.raw_files(tmp_path))


def test_to_inputs_shape_and_normalisation(root: Path):
    import torch
    from torchvision.transforms import Normalize, ToTensor

    pool = get_dataset_spec("mnist").load_target_pool(root)
    images = pool.samples[N_TEST - 2 : N_TEST + 2]  # two MNIST, two MNIST-M digits
    out = get_dataset_spec("mnist").to_inputs(images)
    assert out.shape == (4, 3, 28, 28) and out.dtype == np.float32
    norm = Normalize((0.1307,) * 3, (0.3081,) * 3)
    ref = torch.stack([norm(ToTensor()(Image.fromarray(im, mode="RGB"))) for im in images])
    np.testing.assert_allclose(out, ref.numpy(), atol=1e-5)
    with pytest.raises(ValueError, match=r"images must have shape \(n, 28, 28, 3\)"):
        mnist.digits_to_inputs(np.zeros((2, 28, 28), dtype=np.uint8))


def test_stage_and_raw_files(root: Path):
    files = get_dataset_spec("mnist").stage(root)
    assert files == mnist.raw_files(root)
    assert len(files) == 4 + 1 + N_MNISTM and all(p.is_file() for p in files)


@pytest.mark.parametrize(
    "victim",
    ["MNIST/raw/t10k-labels-idx1-ubyte.gz", "mnist_m/mnist_m_test_labels.txt"],
)
def test_missing_file_gives_one_line_fetch_message(root: Path, victim: str):
    (root / victim).unlink()
    spec = get_dataset_spec("mnist")
    for call in (spec.stage, spec.load_target_pool):
        with pytest.raises(DatasetUnavailableError) as info:
            call(root)
        message = str(info.value)
        assert "\n" not in message and "alsa-bench fetch mnist" in message
        assert victim.split("/")[-1] in message


def test_nothing_staged_is_not_present(tmp_path: Path):
    assert not all(p.is_file() for p in mnist.raw_files(tmp_path))
    with pytest.raises(DatasetUnavailableError, match="alsa-bench fetch mnist"):
        get_dataset_spec("mnist").load_source(tmp_path)


def test_label_out_of_range_in_idx_names_the_file(root: Path):
    labels = np.zeros(N_TEST, dtype=np.uint8)
    labels[5] = 10
    path = write_idx(root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte", labels)
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte\.gz.*label 10 at index 5"):
        mnist.load_mnist(root, train=False)
    assert path.is_file()


def test_truncated_and_foreign_idx_files_are_refused(root: Path):
    path = root / "MNIST" / "raw" / "t10k-images-idx3-ubyte.gz"
    data = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(data[:-10]))
    with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte\.gz.*truncated"):
        mnist.load_mnist(root, train=False)
    path.write_bytes(gzip.compress(b"\x00\x00\x0d\x03" + data[4:]))
    with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte\.gz.*magic number"):
        mnist.load_mnist(root, train=False)
    path.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match=r"t10k-images-idx3-ubyte\.gz.*corrupt"):
        mnist.load_mnist(root, train=False)


def test_image_and_label_counts_must_agree(root: Path):
    write_idx(root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte", np.zeros(N_TEST - 1, np.uint8))
    with pytest.raises(ValueError, match=f"{N_TEST} images but {N_TEST - 1} labels"):
        mnist.load_mnist(root, train=False)


def test_mnist_m_bad_label_line_names_file_and_line(root: Path):
    labels = root / "mnist_m" / "mnist_m_test_labels.txt"
    lines = labels.read_text().splitlines()
    lines[3] = lines[3].split()[0] + " 11"
    labels.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"mnist_m_test_labels\.txt', line 4: label must be"):
        mnist.load_mnist_m_test(root)
    lines[3] = "only-one-field"
    labels.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"line 4: expected '<image file> <label>'"):
        mnist.load_mnist_m_test(root)


def test_mnist_m_corrupt_or_missing_png_names_the_file(root: Path):
    png = root / "mnist_m" / "mnist_m_test" / "00000003.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    with pytest.raises(ValueError, match=r"00000003\.png.*cannot be decoded"):
        mnist.load_mnist_m_test(root)
    png.unlink()
    with pytest.raises(DatasetUnavailableError, match=r"00000003\.png.*alsa-bench fetch mnist"):
        mnist.load_mnist_m_test(root)
