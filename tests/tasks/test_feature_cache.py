"""The per-text feature cache (tasks/data/feature_cache.py): content addressed, append-only, atomic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tasks.data.feature_cache import FeatureCache


def test_put_then_get_returns_the_arrays_in_order(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path / "c", np.float16)
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    b = np.ones((1, 2), dtype=np.float32)
    cache.put(["ka", "kb"], [a, b])
    got = cache.get(["kb", "ka", "kb"])
    assert [g.shape for g in got] == [(1, 2), (3, 2), (1, 2)]
    assert got[1].dtype == np.float16
    np.testing.assert_array_equal(got[1], a.astype(np.float16))
    assert cache.missing(["ka", "kc", "kc", "kd"]) == ["kc", "kd"]


def test_a_fresh_instance_reads_what_another_wrote(tmp_path: Path) -> None:
    FeatureCache(tmp_path).put(["k1"], [np.full((2, 3), 7.0)])
    other = FeatureCache(tmp_path)
    assert len(other) == 1
    np.testing.assert_array_equal(other.get(["k1"])[0], np.full((2, 3), 7.0, np.float32))


def test_known_keys_are_not_written_again(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path)
    cache.put(["k1"], [np.zeros((1, 2))])
    cache.put(["k1"], [np.ones((1, 2))])  # already there: skipped, first value kept
    assert len(list(tmp_path.glob("*.keys.npy"))) == 1
    np.testing.assert_array_equal(cache.get(["k1"])[0], np.zeros((1, 2), np.float32))


def test_a_shard_without_its_keys_file_is_invisible(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path)
    cache.put(["k1"], [np.zeros((1, 2))])
    (next(tmp_path.glob("*.keys.npy"))).unlink()  # as if the writer died before the last file
    assert FeatureCache(tmp_path).missing(["k1"]) == ["k1"]


def test_bad_input_is_refused(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path)
    with pytest.raises(ValueError, match="keys and arrays must pair up; got 2 and 1"):
        cache.put(["a", "b"], [np.zeros((1, 2))])
    with pytest.raises(ValueError, match="2-d"):
        cache.put(["a", "b"], [np.zeros((1, 2)), np.zeros((1, 3))])
    with pytest.raises(KeyError, match="no cached features for text key nope"):
        cache.get(["nope"])
    assert not list(tmp_path.glob("*"))
