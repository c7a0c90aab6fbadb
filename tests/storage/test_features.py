"""Feature files: content-addressed float16 .npy files, named by the logits footer and DuckDB."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from storage.db import connect
from storage.features import (
    FeatureEntry,
    FeatureFileError,
    feature_entries,
    feature_path,
    read_features,
    write_features,
)
from storage.logits import SplitInfo
from storage.results import ingest, read_logits_file, write_logits_file
from storage.runs import RunInfo


def test_round_trip_is_float16_and_named_by_its_bytes(tmp_path):
    x = np.random.default_rng(0).normal(size=(20, 6)).astype(np.float32)
    entry = write_features(tmp_path, "noise-3", "target", x)
    path = feature_path(tmp_path, entry.sha256)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256
    got, labels = read_features(tmp_path, entry)
    assert labels is None and got.dtype == np.float16
    np.testing.assert_array_equal(got, x.astype(np.float16))
    # equal content is one file; no temporary file is left behind
    assert write_features(tmp_path, "other", "target", x).sha256 == entry.sha256
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_training_subsample_keeps_its_labels(tmp_path):
    x, y = np.ones((5, 3)), np.array([0, 1, 2, 1, 0])
    entry = write_features(tmp_path, "train", "train", x, y)
    got, labels = read_features(tmp_path, entry)
    np.testing.assert_array_equal(labels, y)
    assert entry.labels_sha256 is not None and FeatureEntry.from_json(entry.to_json()) == entry


@pytest.mark.parametrize("kwargs,match", [
    ({"split": ""}, "split must be a non-empty string"),
    ({"role": "test"}, r"role must be one of \['val', 'target', 'train'\]; got 'test'"),
    ({"features": np.ones(4)}, r"must be a numeric \(n >= 1, d >= 1\) matrix; got dtype float64, shape \(4,\)"),
    ({"features": np.full((2, 2), np.nan)}, "must be finite in float16"),
    ({"features": np.full((2, 2), 1e6)}, r"finite in float16 \(\|x\| < 65504\)"),
    ({"features": np.array([["a", "b"]])}, "numeric"),
    ({"labels": np.array([0, 1])}, "labels are stored only for role 'train'"),
    ({"role": "train"}, "labels are required for the training subsample"),
    ({"role": "train", "labels": np.array([0.5, 1.0])}, "labels must be 2 integers"),
])
def test_bad_input_is_refused_by_name_and_writes_nothing(tmp_path, kwargs, match):
    args = {"split": "val", "role": "val", "features": np.ones((2, 2)), "labels": None, **kwargs}
    with pytest.raises(ValueError, match=match):
        write_features(tmp_path, args.pop("split"), args.pop("role"), args.pop("features"),
                       args.pop("labels"))
    assert not (tmp_path / "features").exists() or not any((tmp_path / "features").iterdir())


def test_missing_changed_or_misdescribed_files_are_refused(tmp_path):
    entry = write_features(tmp_path, "val", "val", np.ones((3, 2)))
    with pytest.raises(FeatureFileError, match=r"holds float16 \(3, 2\), not float16 \(4, 2\)"):
        read_features(tmp_path, FeatureEntry("val", "val", entry.sha256, 4, 2))
    path = feature_path(tmp_path, entry.sha256)
    path.write_bytes(path.read_bytes() + b"x")
    with pytest.raises(FeatureFileError, match="does not match its name"):
        read_features(tmp_path, entry)
    path.unlink()
    with pytest.raises(FeatureFileError, match="is missing; re-run the extract stage"):
        read_features(tmp_path, entry)


def _run(tmp_path, x_val, *, train_seconds=1.0):
    rng = np.random.default_rng(1)
    root = tmp_path / "results"
    val = (SplitInfo("val", "val", None, None, None), rng.normal(size=(4, 3)), [0, 1, 2, 0])
    tgt = (SplitInfo("t", "target", "f", "s", None), rng.normal(size=(2, 3)), [1, 1])
    entries = [write_features(root, "val", "val", x_val),
               write_features(root, "t", "target", np.ones((2, 5))),
               write_features(root, "train", "train", np.zeros((3, 5)), np.array([0, 1, 2]))]
    run = RunInfo("r", "s", "d", "b", 0, 3, train_seconds=train_seconds)
    return root, entries, write_logits_file(run, [val, tgt], root, entries)


def test_ingest_records_the_files_and_drops_those_only_a_superseded_file_named(tmp_path):
    db = tmp_path / "bench.duckdb"
    root, entries, first = _run(tmp_path, np.ones((4, 5)))
    with connect(db) as con:
        ingest(con, first.path)
        assert sorted(feature_entries(con, "r"), key=str) == sorted(entries, key=str)
    assert read_logits_file(first.path).features.entries == tuple(entries)
    # the same run recomputed elsewhere: the same logits, other val features (another device
    # rounds differently) and another training time: the first file is superseded, and the val
    # file only it named goes with it
    _, again, second = _run(tmp_path, np.full((4, 5), 2.0), train_seconds=2.0)
    with connect(db) as con:
        ingest(con, second.path)
        assert sorted(feature_entries(con, "r"), key=str) == sorted(again, key=str)
    names = {p.stem for p in (root / "features").iterdir()}
    assert names == {s for e in again for s in (e.sha256, e.labels_sha256) if s}
    assert entries[0].sha256 not in names and not __import__("pathlib").Path(first.path).exists()


def test_a_footer_entry_that_disagrees_with_its_split_is_refused(tmp_path):
    root = tmp_path / "results"
    entry = write_features(root, "val", "val", np.ones((3, 2)))
    val = (SplitInfo("val", "val", None, None, None), np.zeros((4, 2)), [0, 1, 0, 1])
    with pytest.raises(ValueError, match="features of split 'val' have 3 rows; the split has 4"):
        write_logits_file(RunInfo("r", "s", "d", "b", 0, 2), [val], root, [entry])
