"""Shift generators: corruptions, label shift, subpopulation mixtures, photo blends, the cache."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.data.datasets import fmnist
from tasks.data.spec import TargetPool
from tasks.data.shifts import CORRUPTIONS, SHIFT_FAMILIES, corrupt
from tasks.data.targets import generate_split, get_target_split, target_splits
from tasks.stages import splits as shift_cache
from tasks.data.shifts.domain import LUMA, mnistm_blend, photo_patches, sample_photos
from tasks.data.shifts.label_shift import label_shift_indices, prior_counts
from tasks.data.shifts.subpopulation import subpopulation_indices
from tests.tasks.test_fmnist import stage_tiny


@pytest.fixture(scope="module")
def garments() -> np.ndarray:
    """24 garment-like images: a textured bright ellipse on a black background."""
    rng = np.random.default_rng(5)
    yy, xx = np.mgrid[0:28, 0:28]
    out = np.zeros((24, 28, 28), dtype=np.uint8)
    for i in range(24):
        cy, cx = rng.uniform(11, 17, 2)
        ry, rx = rng.uniform(6, 11, 2)
        inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
        texture = rng.integers(120, 255, size=(28, 28))
        out[i][inside] = texture[inside]
    return out


def _change(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.abs(a.astype(np.int16) - b.astype(np.int16))))


def test_registry_has_every_family_and_enough_corruptions():
    assert SHIFT_FAMILIES == (
        "clean", "synthetic", "label_shift", "subpopulation", "domain", "temporal", "structural",
        "natural", "covariate",
    )
    assert len(CORRUPTIONS) >= 12
    assert all(len(c.levels) == 5 for c in CORRUPTIONS.values())


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corruption_keeps_shape_dtype_and_is_deterministic(name, garments):
    out = corrupt(garments, name, 3, np.random.default_rng(1))
    again = corrupt(garments, name, 3, np.random.default_rng(1))

    assert out.shape == garments.shape and out.dtype == np.uint8
    assert 0 <= out.min() and out.max() <= 255
    assert np.array_equal(out, again)
    assert _change(out, garments) > 0.5
    empty = corrupt(garments[:0], name, 1, np.random.default_rng(0))
    assert empty.shape == (0, 28, 28) and empty.dtype == np.uint8


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corruption_change_grows_with_severity(name, garments):
    changes = [
        _change(corrupt(garments, name, s, np.random.default_rng(7)), garments)
        for s in range(1, 6)
    ]
    assert all(b > a for a, b in zip(changes, changes[1:])), changes


def test_corrupt_rejects_bad_arguments(garments):
    with pytest.raises(ValueError, match="gaussian_noise"):
        corrupt(garments, "snow", 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="severity"):
        corrupt(garments, "rotate", 6, np.random.default_rng(0))
    with pytest.raises(ValueError, match="uint8"):
        corrupt(garments.astype(np.float32), "rotate", 1, np.random.default_rng(0))


def test_prior_counts_honour_priors_and_pool_limits():
    priors = np.array([0.7, 0.2, 0.1, 0.0])
    counts = prior_counts(priors, np.array([100, 100, 100, 100]), 1000)
    # class 0 can give only 100 images, so the split shrinks to 100 / 0.7 = 142
    assert counts.sum() == 142 and counts[3] == 0
    np.testing.assert_allclose(counts / counts.sum(), priors, atol=1 / counts.sum())
    assert np.all(counts <= 100)


def test_label_shift_resamples_to_dirichlet_priors():
    labels = np.repeat(np.arange(10), 300)
    idx, priors = label_shift_indices(labels, 10, 1.0, 1000, np.random.default_rng(3))
    again, _ = label_shift_indices(labels, 10, 1.0, 1000, np.random.default_rng(3))

    assert np.array_equal(idx, again) and np.unique(idx).size == idx.size
    freq = np.bincount(labels[idx], minlength=10) / idx.size
    np.testing.assert_allclose(freq, priors, atol=1.0 / idx.size + 1e-12)
    flat, _ = label_shift_indices(labels, 10, 1000.0, 1000, np.random.default_rng(3))
    assert np.bincount(labels[flat], minlength=10).min() >= 80  # large alpha: near uniform


def _coarse_pool(per_fine: int = 40) -> TargetPool:
    fine = np.repeat(np.arange(10), per_fine)
    images = np.zeros((fine.size, 28, 28), dtype=np.uint8)
    images[:, 0, 0] = fine
    return TargetPool(
        samples=images,
        labels=fmnist.FINE_TO_COARSE[fine],
        n_classes=3,
        subgroups=fine,
        source_subgroups=(0, 1, 2, 3, 5, 7),
        novel_subgroups=(4, 6, 8, 9),
    )


@pytest.mark.parametrize("fraction", [0.0, 0.5, 1.0])
def test_subpopulation_mixture(fraction):
    pool = _coarse_pool()
    idx = subpopulation_indices(
        pool.labels, pool.subgroups, pool.source_subgroups, pool.novel_subgroups,
        fraction, 30, np.random.default_rng(0),
    )
    novel = np.isin(pool.subgroups[idx], pool.novel_subgroups)
    for c in range(3):
        in_class = pool.labels[idx] == c
        assert in_class.sum() == 30
        assert novel[in_class].mean() == pytest.approx(fraction, abs=1 / 30)
    np.testing.assert_array_equal(pool.labels[idx], fmnist.FINE_TO_COARSE[pool.subgroups[idx]])


def test_coarse_splits_and_clean_keeps_source_subclasses():
    splits = target_splits("fmnist-coarse")
    assert {s.shift_family for s in splits} == {"clean", "subpopulation"}
    pool = _coarse_pool()
    clean = get_target_split("fmnist-coarse", "clean")
    images, labels = generate_split("fmnist-coarse", clean, pool)
    assert set(images[:, 0, 0].tolist()) == set(pool.source_subgroups)
    assert set(labels.tolist()) == {0, 1, 2}
    novel = get_target_split("fmnist-coarse", "subpop-novel100")
    full, _ = generate_split("fmnist-coarse", novel, pool)
    assert set(full[:, 0, 0].tolist()) == set(pool.novel_subgroups)


def test_fmnist_split_list():
    splits = target_splits("fmnist")
    names = [s.name for s in splits]
    assert len(names) == len(set(names)) and "val" not in names
    assert {s.shift_family for s in splits} == {"clean", "synthetic", "label_shift", "domain"}
    assert sum(s.shift_family == "synthetic" for s in splits) == 5 * len(CORRUPTIONS)
    assert get_target_split("fmnist", "gaussian_noise-3").severity == 3
    with pytest.raises(ValueError, match="gaussian_noise-1"):
        get_target_split("fmnist", "snow-1")


def test_domain_blend_uses_the_sklearn_photographs():
    from sklearn.datasets import load_sample_images

    photos = sample_photos()
    assert photos.shape[0] == 2
    for mine, theirs in zip(photos, load_sample_images().images):
        np.testing.assert_array_equal(mine, theirs)

    black = np.zeros((6, 28, 28), dtype=np.uint8)
    blended = mnistm_blend(black, 1.0, np.random.default_rng(4))
    patches = photo_patches(6, 28, 28, np.random.default_rng(4))
    expected = np.clip(np.rint((patches @ LUMA) * 255), 0, 255)
    assert np.abs(blended.astype(int) - expected).max() <= 1
    assert blended.dtype == np.uint8 and blended.shape == black.shape


def test_domain_blend_grows_with_intensity(garments):
    changes = [
        _change(mnistm_blend(garments, beta, np.random.default_rng(2)), garments)
        for beta in (0.4, 0.7, 1.0)
    ]
    assert changes[0] < changes[1] < changes[2]
    with pytest.raises(ValueError, match="intensity"):
        mnistm_blend(garments, 1.5, np.random.default_rng(0))


def test_cache_writes_once_and_reads_back(tmp_path, monkeypatch, state_home):
    ref = stage_tiny(tmp_path, monkeypatch, "fmnist-coarse")
    stale = shift_cache.shift_cache_dir(ref).parent / ("0" * 12 + "-" + "1" * 12)
    stale.mkdir(parents=True)
    first = {s.name: (x, y) for s, x, y in shift_cache.iter_target_splits(ref)}
    folder = shift_cache.shift_cache_dir(ref)

    assert folder.parent.name == "fmnist-coarse" and folder.name.endswith(ref.sha256[:12])
    assert sorted(p.stem for p in folder.glob("*.npz")) == sorted(first)
    assert not list(folder.glob(".*.tmp"))
    assert not stale.exists()  # another generator version's folder was pruned

    def no_generation(*args, **kwargs):
        raise AssertionError("a cached split was regenerated")

    monkeypatch.setattr(shift_cache, "generate_split", no_generation)
    for split, x, y in shift_cache.iter_target_splits(ref):
        np.testing.assert_array_equal(x, first[split.name][0])
        np.testing.assert_array_equal(y, first[split.name][1])
