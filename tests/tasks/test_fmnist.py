"""Fashion-MNIST staging and the source protocol, on tiny files in the exact idx/gz format.

The helpers here (:func:`write_tiny_fashion_mnist`, :func:`stage_tiny`) are shared with the
train, extract and shift tests: they never touch the Debian files or the network.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest
from torchvision.datasets import FashionMNIST

from tasks.data.datasets import available_datasets, get_dataset_spec, imbalanced_counts
from tasks.data.datasets import fmnist
from tasks.data.datasets.fmnist import ChecksumError, DatasetUnavailableError
from tasks.stages.download import stage_dataset
from tasks.runtime.refs import DatasetRef

TRAIN_PER_CLASS = 60
TEST_PER_CLASS = 30


def tiny_images(per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Class-dependent, learnable 28x28 images; pixel (0, 0) encodes the label, (0, 1..2) the index.

    Class ``c`` is a bright 8x8 square at one of ten positions plus noise.
    """
    rng = np.random.default_rng(seed)
    n = 10 * per_class
    labels = np.repeat(np.arange(10, dtype=np.uint8), per_class)
    rng.shuffle(labels)
    images = rng.integers(0, 40, size=(n, 28, 28), dtype=np.uint8)
    for i, c in enumerate(labels):
        r, col = 3 + 6 * (c // 4), 2 + 6 * (c % 4)
        images[i, r : r + 8, col : col + 8] = rng.integers(170, 255, size=(8, 8), dtype=np.uint8)
        images[i, 0, 0] = 20 * c + 5
        images[i, 0, 1], images[i, 0, 2] = i // 256, i % 256
    return images, labels


def idx_bytes(array: np.ndarray) -> bytes:
    """Serialise a uint8 array in the idx format (magic 0x08 0x0N, big-endian sizes)."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim)
    header += b"".join(struct.pack(">I", d) for d in array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_tiny_fashion_mnist(folder: Path) -> dict[str, str]:
    """Write the four ``*.gz`` files of a tiny Fashion-MNIST into ``folder``.

    Returns
    -------
    dict
        MD5 of every decompressed file, keyed like :data:`fmnist.RAW_MD5`.
    """
    folder.mkdir(parents=True, exist_ok=True)
    train_x, train_y = tiny_images(TRAIN_PER_CLASS, seed=1)
    test_x, test_y = tiny_images(TEST_PER_CLASS, seed=2)
    arrays = {
        "train-images-idx3-ubyte": train_x,
        "train-labels-idx1-ubyte": train_y,
        "t10k-images-idx3-ubyte": test_x,
        "t10k-labels-idx1-ubyte": test_y,
    }
    md5 = {}
    for name, array in arrays.items():
        raw = idx_bytes(array)
        (folder / f"{name}.gz").write_bytes(gzip.compress(raw, mtime=0))
        md5[name] = hashlib.md5(raw).hexdigest()
    return md5


def stage_tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "fmnist") -> DatasetRef:
    """Stage the tiny files through the public :func:`stage_dataset`, as the pipeline does."""
    source = tmp_path / "tiny-source"
    md5 = write_tiny_fashion_mnist(source)
    monkeypatch.setenv(fmnist.ENV_VAR, str(source))
    for key, value in md5.items():
        monkeypatch.setitem(fmnist.RAW_MD5, key, value)
    return stage_dataset(name, tmp_path / "data")


def test_tiny_files_staged_and_read_by_torchvision(tmp_path):
    source = tmp_path / "src"
    md5 = write_tiny_fashion_mnist(source)
    files = fmnist.stage_fashion_mnist(tmp_path / "root", source_dir=source, checksums=md5)

    assert [p.name for p in files] == list(fmnist.RAW_FILES)
    assert all(p.parent == tmp_path / "root" / "FashionMNIST" / "raw" for p in files)
    train = FashionMNIST(str(tmp_path / "root"), train=True, download=False)
    test = FashionMNIST(str(tmp_path / "root"), train=False, download=False)
    expected_x, expected_y = tiny_images(TRAIN_PER_CLASS, seed=1)
    assert len(train) == 10 * TRAIN_PER_CLASS and len(test) == 10 * TEST_PER_CLASS
    np.testing.assert_array_equal(train.data.numpy(), expected_x)
    np.testing.assert_array_equal(train.targets.numpy(), expected_y)
    # no temporary files are left beside the staged ones
    assert sorted(p.name for p in files[0].parent.iterdir()) == sorted(fmnist.RAW_FILES)


def test_stage_dataset_returns_a_stable_ref(tmp_path, monkeypatch):
    ref = stage_tiny(tmp_path, monkeypatch)
    again = stage_dataset("fmnist", tmp_path / "data")
    coarse = stage_dataset("fmnist-coarse", tmp_path / "data")

    assert ref.name == "fmnist" and Path(ref.root) == (tmp_path / "data").resolve()
    assert len(ref.sha256) == 64 and again == ref
    assert coarse.sha256 == ref.sha256 and coarse.name == "fmnist-coarse"


def test_corrupt_staged_file_is_restaged(tmp_path, monkeypatch, caplog):
    ref = stage_tiny(tmp_path, monkeypatch)
    staged = fmnist.raw_files(ref.root)[0]
    staged.write_bytes(b"broken")

    with caplog.at_level("WARNING", logger="tasks.data.datasets.fmnist"):
        assert stage_dataset("fmnist", ref.root).sha256 == ref.sha256
    [said] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said.startswith(f"{staged} is damaged (its MD5 is not the published one); staging "
                           "it again from ")


def test_checksum_mismatch_names_file_and_checksums(tmp_path):
    source = tmp_path / "src"
    write_tiny_fashion_mnist(source)  # tiny files cannot match the published checksums

    with pytest.raises(ChecksumError) as info:
        fmnist.stage_fashion_mnist(tmp_path / "root", source_dir=source)
    message = str(info.value)
    assert "train-images-idx3-ubyte.gz" in message
    assert fmnist.RAW_MD5["train-images-idx3-ubyte"] in message
    assert fmnist.ARCHIVE_MD5["train-images-idx3-ubyte.gz"] in message
    assert "got MD5" in message
    raw = fmnist.raw_folder(tmp_path / "root")
    assert not raw.exists() or list(raw.iterdir()) == []  # nothing half-written


def test_missing_file_in_source_folder(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(fmnist.ENV_VAR, str(empty))

    with pytest.raises(DatasetUnavailableError) as info:
        fmnist.stage_fashion_mnist(tmp_path / "root")
    message = str(info.value)
    assert str(empty) in message and f"${fmnist.ENV_VAR}" in message
    assert "apt-get install dataset-fashion-mnist" in message


def test_no_source_and_failed_download(tmp_path, monkeypatch):
    monkeypatch.delenv(fmnist.ENV_VAR, raising=False)
    monkeypatch.setattr(fmnist, "DEBIAN_DIR", tmp_path / "not-installed")

    def offline(*args, **kwargs):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz: no network")

    monkeypatch.setattr("torchvision.datasets.FashionMNIST", offline)
    with pytest.raises(DatasetUnavailableError) as info:
        fmnist.stage_fashion_mnist(tmp_path / "root")
    message = str(info.value)
    assert "download failed" in message and "no network" in message
    assert "apt-get install dataset-fashion-mnist" in message and fmnist.ENV_VAR in message
    assert not any((tmp_path / "root" / "FashionMNIST").glob(".download-*"))

    with pytest.raises(DatasetUnavailableError, match="downloading is disabled"):
        fmnist.stage_fashion_mnist(tmp_path / "root", allow_download=False)


def test_load_without_staging_explains(tmp_path):
    with pytest.raises(DatasetUnavailableError, match="stage_dataset"):
        fmnist.load_fashion_mnist(tmp_path, train=True)


def test_imbalanced_counts_follow_the_paper_ratio():
    counts = imbalanced_counts(10, 3000)
    assert counts[0] == 1000 and counts[-1] == 3000
    assert np.all(np.diff(counts) > 0)
    np.testing.assert_allclose(np.diff(counts), 2000 / 9, atol=1)
    assert imbalanced_counts(3, 600).tolist() == [200, 400, 600]
    with pytest.raises(ValueError, match="n_classes"):
        imbalanced_counts(1, 10)


def test_fmnist_source_is_imbalanced_and_disjoint(tmp_path, monkeypatch):
    ref = stage_tiny(tmp_path, monkeypatch)
    src = get_dataset_spec("fmnist").load_source(Path(ref.root))

    train_counts = np.bincount(src.train_y, minlength=10)
    val_counts = np.bincount(src.val_y, minlength=10)
    assert np.all(np.diff(train_counts) >= 0)
    assert train_counts[-1] / train_counts[0] == pytest.approx(3, rel=0.15)
    assert np.all(val_counts >= 1) and val_counts[-1] > val_counts[0]
    ids = lambda x: set((x[:, 0, 1].astype(int) * 256 + x[:, 0, 2]).tolist())  # noqa: E731
    assert not ids(src.train_x) & ids(src.val_x)
    assert np.array_equal(src.train_x[:, 0, 0] // 20, src.train_y)  # labels stay with images


def test_coarse_source_uses_only_source_subclasses(tmp_path, monkeypatch):
    ref = stage_tiny(tmp_path, monkeypatch, "fmnist-coarse")
    spec = get_dataset_spec("fmnist-coarse")
    src = spec.load_source(Path(ref.root))
    fine = src.train_x[:, 0, 0] // 20

    assert set(fine.tolist()) == {0, 2, 5, 7, 1, 3}
    np.testing.assert_array_equal(src.train_y, fmnist.FINE_TO_COARSE[fine])
    counts = np.bincount(src.train_y, minlength=3)
    assert counts[0] < counts[1] < counts[2]
    pool = spec.load_target_pool(Path(ref.root))
    assert set(pool.labels[pool.in_distribution_indices()].tolist()) == {0, 1, 2}
    assert set(pool.novel_subgroups) == {4, 6, 9, 8}


def test_coarse_mapping_covers_every_class_once():
    fine = sorted(c for group in fmnist.COARSE_GROUPS for c in group)
    assert fine == list(range(10))
    for groups in (fmnist.COARSE_SOURCE_SUBCLASSES, fmnist.COARSE_NOVEL_SUBCLASSES):
        for coarse, subs in enumerate(groups):
            assert set(subs) <= set(fmnist.COARSE_GROUPS[coarse])


def test_unknown_dataset_lists_names():
    with pytest.raises(ValueError) as info:
        get_dataset_spec("cifar")
    for name in available_datasets():
        assert name in str(info.value)
    assert "'cifar'" in str(info.value)


def test_archive_md5_copy_matches_torchvision():
    from torchvision.datasets import FashionMNIST

    from tasks.data.datasets.fmnist import ARCHIVE_MD5

    assert ARCHIVE_MD5 == dict(FashionMNIST.resources)
