"""Splits and logits: exact round trip, replace-partition writes, no labels for targets, digest."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from storage import (
    NotFoundError,
    RunInfo,
    SplitInfo,
    connect,
    list_splits,
    read_target_labels,
    read_target_logits,
    read_val,
    run_digest,
    upsert_run,
    write_split,
)
from storage.errors import StorageError

from ._helpers import RUN_KEY, add_run, make_split


@pytest.fixture
def con(tmp_path):
    with connect(tmp_path / "bench.duckdb") as con:
        yield con


def _count(con, run_key=RUN_KEY, split=None):
    return con.sql(
        "SELECT count(*), count(DISTINCT sample_index) FROM logits "
        "WHERE run_key = ? AND (? IS NULL OR split = ?)",
        params=[run_key, split, split],
    ).fetchall()[0]


def test_round_trip_is_exact_float32_in_order(con, rng):
    arrays = add_run(con, rng)
    logits, labels = read_val(con, RUN_KEY)
    assert logits.dtype == np.float32 and labels.dtype == np.int64
    np.testing.assert_array_equal(logits, arrays["val"][0])
    np.testing.assert_array_equal(labels, arrays["val"][1])
    target = read_target_logits(con, RUN_KEY, "noise-3")
    np.testing.assert_array_equal(target, arrays["noise-3"][0])
    np.testing.assert_array_equal(read_target_labels(con, RUN_KEY, "noise-3"), arrays["noise-3"][1])
    assert logits.flags.writeable and target.flags.writeable


def test_float64_input_is_stored_as_its_float32_rounding(con, rng):
    upsert_run(con, RunInfo(RUN_KEY, "toy", "toy", "mlp", 0, 3))
    logits = rng.normal(size=(50, 3)) * 1e3
    labels = rng.integers(0, 3, size=50)
    write_split(con, RUN_KEY, SplitInfo("val", "val", None, None, None), logits, labels)
    got, _ = read_val(con, RUN_KEY)
    np.testing.assert_array_equal(got, logits.astype(np.float32))


def test_write_split_computes_size_and_true_accuracy(con, rng):
    logits, labels = make_split(rng, 300, 5, 0.7)
    info = SplitInfo("gaussian_noise-3", "target", "synthetic", "gaussian_noise", 3, 9, 0.123)
    stored = write_split(con, RUN_KEY, info, logits, labels)
    expected = float(np.mean(logits.argmax(1) == labels))
    assert stored == SplitInfo(
        "gaussian_noise-3", "target", "synthetic", "gaussian_noise", 3, 300, expected
    )
    assert list_splits(con, RUN_KEY) == [stored]


def test_rewrite_replaces_partition_without_duplicates(con, rng):
    add_run(con, rng)
    before_val = read_val(con, RUN_KEY)
    new_logits, new_labels = make_split(rng, 77, 4, 0.3)
    info = SplitInfo("clean", "target", "clean", "clean", None)
    write_split(con, RUN_KEY, info, new_logits, new_labels)
    write_split(con, RUN_KEY, info, new_logits, new_labels)
    assert _count(con, split="clean") == (77, 77)
    np.testing.assert_array_equal(read_target_logits(con, RUN_KEY, "clean"), new_logits)
    assert [s.n_samples for s in list_splits(con, RUN_KEY) if s.split == "clean"] == [77]
    assert con.sql("SELECT count(*) FROM splits WHERE split = 'clean'").fetchall() == [(1,)]
    # other splits are untouched
    np.testing.assert_array_equal(read_val(con, RUN_KEY)[0], before_val[0])
    assert _count(con, split="noise-3") == (120, 120)


def test_failed_write_rolls_back_and_keeps_previous_data(con, rng):
    arrays = add_run(con, rng)

    class FailingInsert:
        """Forwards to the connection but fails the logits INSERT, after the DELETEs ran."""

        def __init__(self, inner):
            self.inner = inner

        def execute(self, query, *args):
            if query.startswith("INSERT INTO logits"):
                raise RuntimeError("disk full (simulated)")
            return self.inner.execute(query, *args)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    new_logits, new_labels = make_split(rng, 10, 4)
    with pytest.raises(RuntimeError, match="simulated"):
        write_split(
            FailingInsert(con),
            RUN_KEY,
            SplitInfo("clean", "target", "c", "c", None),
            new_logits,
            new_labels,
        )
    np.testing.assert_array_equal(read_target_logits(con, RUN_KEY, "clean"), arrays["clean"][0])
    assert _count(con, split="clean") == (150, 150)
    con.execute("BEGIN TRANSACTION")  # no transaction was left open
    con.execute("ROLLBACK")


def test_read_target_logits_returns_logits_only(con, rng):
    add_run(con, rng)
    out = read_target_logits(con, RUN_KEY, "clean")
    assert isinstance(out, np.ndarray) and out.shape == (150, 4)
    assert list(inspect.signature(read_target_logits).parameters) == ["con", "run_key", "split"]


def test_target_readers_refuse_the_validation_split(con, rng):
    add_run(con, rng)
    with pytest.raises(ValueError, match="has role 'val'"):
        read_target_logits(con, RUN_KEY, "val")
    with pytest.raises(ValueError, match="has role 'val'"):
        read_target_labels(con, RUN_KEY, "val")


def test_missing_split_and_run_are_named(con, rng):
    add_run(con, rng)
    listed = r"'fog-1'.*stored splits: \['val', 'clean', 'noise-3'\]"
    with pytest.raises(NotFoundError, match=listed):
        read_target_logits(con, RUN_KEY, "fog-1")
    with pytest.raises(LookupError, match="no validation split"):
        read_val(con, "other.run.s0")
    assert list_splits(con, "other.run.s0") == []


def test_list_splits_orders_val_first_and_filters_role(con, rng):
    add_run(con, rng, targets=(("noise-3", 10, 0.5), ("clean", 10, 0.5), ("noise-1", 10, 0.5)))
    assert [s.split for s in list_splits(con, RUN_KEY)] == ["val", "clean", "noise-1", "noise-3"]
    assert [s.split for s in list_splits(con, RUN_KEY, role="val")] == ["val"]
    assert all(s.role == "target" for s in list_splits(con, RUN_KEY, role="target"))
    with pytest.raises(ValueError, match="role must be None or one of"):
        list_splits(con, RUN_KEY, role="test")


def test_digest_is_stable_and_tracks_changes(tmp_path, rng):
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        arrays = add_run(con, rng)
        add_run(con, np.random.default_rng(5), "other.mlp.s0")
        first = run_digest(con, RUN_KEY)
        assert first == run_digest(con, RUN_KEY)
        assert len(first) == 64 and first != run_digest(con, "other.mlp.s0")
    with connect(db, read_only=True) as con:  # a fresh connection agrees
        assert run_digest(con, RUN_KEY) == first

    logits, labels = (a.copy() for a in arrays["clean"])
    info = SplitInfo("clean", "target", "clean", "clean", None)
    with connect(db) as con:
        write_split(con, RUN_KEY, info, logits, labels)  # identical content: same digest
        assert run_digest(con, RUN_KEY) == first
        seen = {first}
        logits[17, 2] = np.nextafter(logits[17, 2], np.float32(np.inf))
        write_split(con, RUN_KEY, info, logits, labels)
        seen.add(run_digest(con, RUN_KEY))
        labels[3] = (labels[3] + 1) % 4
        write_split(con, RUN_KEY, info, logits, labels)
        seen.add(run_digest(con, RUN_KEY))
        write_split(con, RUN_KEY, SplitInfo("clean", "target", "clean", "clean", 1), logits, labels)
        seen.add(run_digest(con, RUN_KEY))
        extra = SplitInfo("extra", "target", "x", "x", None)
        write_split(con, RUN_KEY, extra, *make_split(rng, 5, 4))
        seen.add(run_digest(con, RUN_KEY))
        assert len(seen) == 5


@pytest.mark.parametrize(
    ("logits", "labels", "message"),
    [
        (np.zeros((4,)), np.zeros(4, int), r"2-D array .* got shape \(4,\)"),
        (np.zeros((0, 3)), np.zeros(0, int), r"got shape \(0, 3\)"),
        (np.zeros((4, 1)), np.zeros(4, int), r"n_classes >= 2"),
        (np.array([[0.0, np.nan]] * 2), np.zeros(2, int), "must be finite .* 2 NaN/inf"),
        (np.array([[1e39, 0.0]] * 2), np.zeros(2, int), "must be finite \\(as float32\\)"),
        (np.array([["a", "b"]]), np.zeros(1, int), "numeric array; got dtype <U1"),
        (np.zeros((4, 3)), np.zeros(3, int), r"length 4 .* got shape \(3,\)"),
        (np.zeros((4, 3)), np.array([0, 1, 2, 3]), r"in \[0, 3\) .* got values in \[0, 3\]"),
        (np.zeros((2, 3)), np.array([0.5, 1.0]), "labels must be integers; got dtype float64"),
    ],
)
def test_write_split_rejects_bad_arrays(con, logits, labels, message):
    with pytest.raises(ValueError, match=message):
        write_split(con, RUN_KEY, SplitInfo("val", "val", None, None, None), logits, labels)
    assert _count(con) == (0, 0)


def test_write_split_rejects_bad_info_and_class_mismatch(con, rng):
    logits, labels = make_split(rng, 10, 4)
    role_message = r"SplitInfo.role must be one of \['val', 'target'\]; got 'test'"
    with pytest.raises(ValueError, match=role_message):
        write_split(con, RUN_KEY, SplitInfo("x", "test", None, None, None), logits, labels)
    with pytest.raises(ValueError, match="SplitInfo.severity must be an integer or None"):
        write_split(con, RUN_KEY, SplitInfo("x", "target", "a", "b", "3"), logits, labels)
    with pytest.raises(ValueError, match="run_key must be a non-empty string"):
        write_split(con, "", SplitInfo("x", "target", "a", "b", None), logits, labels)
    upsert_run(con, RunInfo(RUN_KEY, "toy", "toy", "mlp", 0, 5))
    with pytest.raises(ValueError, match=r"have 4 classes but run .* has 5 \(runs.n_classes\)"):
        write_split(con, RUN_KEY, SplitInfo("x", "target", "a", "b", None), logits, labels)
    write_split(con, "no.run.row", SplitInfo("x", "target", "a", "b", None), logits, labels)
    with pytest.raises(ValueError, match=r"have 3 classes .* has 4 \(stored split 'x'\)"):
        y_info = SplitInfo("y", "target", "a", "b", None)
        write_split(con, "no.run.row", y_info, *make_split(rng, 5, 3))


def test_a_run_has_one_validation_split(con, rng):
    add_run(con, rng)
    with pytest.raises(ValueError, match="already has validation split 'val'"):
        val2 = SplitInfo("val2", "val", None, None, None)
        write_split(con, RUN_KEY, val2, *make_split(rng, 5, 4))
    # a target may take over the role's name only by replacing the same split
    write_split(con, RUN_KEY, SplitInfo("val", "val", None, None, None), *make_split(rng, 5, 4))
    assert [s.n_samples for s in list_splits(con, RUN_KEY, role="val")] == [5]


def test_inconsistent_partition_is_reported(con, rng):
    add_run(con, rng)
    con.execute("DELETE FROM logits WHERE split = 'clean' AND sample_index < 3")
    with pytest.raises(StorageError, match="has 147 logits rows but its splits row says 150"):
        read_target_logits(con, RUN_KEY, "clean")


def test_read_run_targets_matches_the_per_split_readers(con, rng):
    from storage.logits import read_run_targets

    # split names whose byte order differs from the order list_splits gives (family, shift)
    arrays = add_run(con, rng, targets=(("noise-3", 40, 0.5), ("Zoom", 30, 0.7),
                                        ("clean", 50, 0.8), ("noise-10", 20, 0.4)))
    add_run(con, rng, "toy.mlp.s1", seed=1)  # another run's rows are not read
    got = read_run_targets(con, RUN_KEY, with_labels=True)
    assert sorted(got) == ["Zoom", "clean", "noise-10", "noise-3"]
    for split, (logits, labels) in got.items():
        np.testing.assert_array_equal(logits, read_target_logits(con, RUN_KEY, split))
        np.testing.assert_array_equal(labels, read_target_labels(con, RUN_KEY, split))
        np.testing.assert_array_equal(labels, arrays[split][1])
        assert logits.dtype == np.float32 and labels.dtype == np.int64
    assert all(lab is None for _, lab in read_run_targets(con, RUN_KEY).values())
    assert read_run_targets(con, "other.run.s0") == {}


def test_read_run_targets_reports_an_inconsistent_partition(con, rng):
    from storage.logits import read_run_targets

    add_run(con, rng)
    con.execute("DELETE FROM logits WHERE split = 'clean' AND sample_index < 3")
    with pytest.raises(StorageError, match="has 267 target logits rows but its splits rows "
                                           "say 270"):
        read_run_targets(con, RUN_KEY)
    # the same count, rows moved from one split to another: caught by the split check
    con.execute("UPDATE splits SET n_samples = 147 WHERE split = 'clean'")
    con.execute("UPDATE splits SET n_samples = 120 WHERE split = 'noise-3'")
    con.execute("UPDATE logits SET split = 'clean' WHERE split = 'noise-3' AND sample_index = 0")
    with pytest.raises(StorageError, match="another number of logits rows"):
        read_run_targets(con, RUN_KEY)


def test_split_info_defaults():
    info = SplitInfo("val", "val", None, None, None)
    assert info.n_samples == 0 and math.isnan(info.true_accuracy)
