"""Bring-your-own logit files: every accepted layout and every rejected one."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage.logit_files import load_logit_file


@pytest.fixture
def arrays(rng):
    return rng.normal(size=(7, 3)), rng.integers(0, 3, 7)


def test_npz_with_and_without_labels(tmp_path, arrays):
    logits, labels = arrays
    path = tmp_path / "val.npz"
    np.savez(path, logits=logits.astype(np.float32), labels=labels.astype(np.int32))
    got_logits, got_labels = load_logit_file(path, require_labels=True)
    assert got_logits.dtype == np.float64 and got_labels.dtype == np.int64
    np.testing.assert_allclose(got_logits, logits.astype(np.float32))
    np.testing.assert_array_equal(got_labels, labels)
    bare = tmp_path / "target.npz"
    np.savez_compressed(bare, logits=logits)
    got_logits, got_labels = load_logit_file(str(bare), require_labels=False)
    np.testing.assert_array_equal(got_logits, logits)
    assert got_labels is None


def test_parquet_list_column(tmp_path, arrays):
    logits, labels = arrays
    path = tmp_path / "val.parquet"
    pq.write_table(pa.table({"logits": logits.tolist(), "label": labels}), path)
    got_logits, got_labels = load_logit_file(path, require_labels=True)
    np.testing.assert_array_equal(got_logits, logits)
    np.testing.assert_array_equal(got_labels, labels)
    fixed = tmp_path / "fixed.parquet"
    column = pa.FixedSizeListArray.from_arrays(pa.array(logits.ravel()), 3)
    pq.write_table(pa.table({"logits": column, "labels": labels.astype(float)}), fixed)
    got_logits, got_labels = load_logit_file(fixed, require_labels=True)
    np.testing.assert_array_equal(got_logits, logits)
    np.testing.assert_array_equal(got_labels, labels)


def test_parquet_wide_columns_in_numeric_order(tmp_path, rng):
    logits = rng.normal(size=(5, 12))
    path = tmp_path / "target.parquet"
    # Columns deliberately out of order (logit_10 sorts before logit_2 as text).
    names = sorted(f"logit_{k}" for k in range(12))
    table = pa.table({name: logits[:, int(name.split("_")[1])] for name in names})
    pq.write_table(table, path)
    got_logits, got_labels = load_logit_file(path, require_labels=False)
    np.testing.assert_array_equal(got_logits, logits)
    assert got_labels is None


@pytest.mark.parametrize(
    "setup,message",
    [
        ("missing", "file not found"),
        ("directory", "not a regular file"),
        ("csv", "unsupported file type '.csv'; expected one of .npz, .parquet"),
        ("no_logits_npz", "no array named 'logits'; found \\['scores'\\]"),
        ("no_labels_npz", "no labels found; a validation file needs them"),
        ("corrupt_npz", "not a readable .npz archive"),
        ("npy_as_npz", "not a readable .npz archive|expected an .npz archive"),
        ("pickled_npz", "cannot read the arrays"),
        ("three_d_logits", "logits must be a 2-D array \\(n_samples, n_classes\\), or a binary"),
        ("string_logits", "logits must be numeric"),
        ("label_count", "6 labels for 7 logit rows"),
        ("float_labels", "labels must be integer class indices; got non-integer values"),
        ("ragged", "ragged 'logits' lists: row 0 has 3 values but row 1 has 2"),
        ("null_row", "column 'logits' has 1 missing row"),
        ("string_lists", "column 'logits' must hold numbers"),
        ("no_logit_columns", "no logits found; expected a list column 'logits'"),
        ("gap_columns", "without gaps; missing \\['logit_1'\\]"),
        ("corrupt_parquet", "not a readable .parquet file"),
        ("no_labels_parquet", "no labels found"),
        ("empty", "logits has no rows"),
    ],
)
def test_rejected_files_name_the_file_and_the_problem(tmp_path, arrays, setup, message):
    logits, labels = arrays
    path = tmp_path / "data.npz"
    if setup == "missing":
        path = tmp_path / "nope.npz"
    elif setup == "directory":
        path = tmp_path / "dir.npz"
        path.mkdir()
    elif setup == "csv":
        path = tmp_path / "data.csv"
        path.write_text("a,b\n1,2\n")
    elif setup == "no_logits_npz":
        np.savez(path, scores=logits)
    elif setup == "no_labels_npz":
        np.savez(path, logits=logits)
    elif setup == "corrupt_npz":
        path.write_bytes(b"this is not a zip archive")
    elif setup == "npy_as_npz":
        with open(path, "wb") as fh:
            np.save(fh, logits)
    elif setup == "pickled_npz":
        np.savez(path, logits=np.array([[1, 2], [3]], dtype=object), labels=labels[:2])
    elif setup == "three_d_logits":
        np.savez(path, logits=logits[None], labels=labels)
    elif setup == "string_logits":
        np.savez(path, logits=np.full((7, 3), "x"), labels=labels)
    elif setup == "label_count":
        np.savez(path, logits=logits, labels=labels[:-1])
    elif setup == "float_labels":
        np.savez(path, logits=logits, labels=labels + 0.5)
    elif setup == "empty":
        np.savez(path, logits=np.zeros((0, 3)), labels=np.zeros(0, int))
    else:
        path = tmp_path / "data.parquet"
        if setup == "ragged":
            pq.write_table(pa.table({"logits": [[1.0, 2.0, 3.0], [1.0, 2.0]]}), path)
        elif setup == "null_row":
            pq.write_table(pa.table({"logits": [[1.0, 2.0], None]}), path)
        elif setup == "string_lists":
            pq.write_table(pa.table({"logits": [["a", "b"], ["c", "d"]]}), path)
        elif setup == "no_logit_columns":
            pq.write_table(pa.table({"score": [1.0, 2.0]}), path)
        elif setup == "gap_columns":
            pq.write_table(pa.table({"logit_0": [1.0], "logit_2": [2.0]}), path)
        elif setup == "corrupt_parquet":
            path.write_bytes(b"PAR1 garbage")
        elif setup == "no_labels_parquet":
            pq.write_table(pa.table({"logits": logits.tolist()}), path)
    with pytest.raises(ValueError, match=message) as info:
        load_logit_file(path, require_labels=True)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("shape", ["(n,)", "(n, 1)"])
def test_binary_positive_class_logits_become_two_columns(tmp_path, shape):
    s = np.array([-1.5, 0.0, 2.0, 0.25])
    path = tmp_path / "binary.npz"
    np.savez(path, logits=s if shape == "(n,)" else s[:, None], labels=np.array([0, 0, 1, 1]))
    logits, labels = load_logit_file(path, require_labels=True)
    np.testing.assert_array_equal(logits, np.stack([np.zeros(4), s], axis=1))  # [0, s]
    assert labels.tolist() == [0, 0, 1, 1]


def test_unreadable_npz_has_our_message_not_numpys_pickle_advice(tmp_path):
    path = tmp_path / "text.npz"
    path.write_text("hello")
    with pytest.raises(ValueError, match="not a readable .npz archive; expected") as info:
        load_logit_file(path, require_labels=False)
    assert "allow_pickle" not in str(info.value)
    objects = tmp_path / "objects.npz"
    np.savez(objects, logits=np.array([[1, "a"]], dtype=object))
    with pytest.raises(ValueError, match="cannot read the arrays") as info:
        load_logit_file(objects, require_labels=False)
    assert "allow_pickle" not in str(info.value)


@pytest.mark.parametrize("shape", ["softmax", "sigmoid (n,)", "sigmoid (n, 1)"])
def test_probabilities_are_refused_or_converted_on_request(tmp_path, rng, shape):
    z = rng.normal(size=(9, 3))
    if shape == "softmax":
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    else:
        s = z[:, 0]
        p = 1.0 / (1.0 + np.exp(-s))
        p = p if shape == "sigmoid (n,)" else p[:, None]
    path = tmp_path / "p.npz"
    np.savez(path, logits=p)
    with pytest.raises(ValueError, match=r"p\.npz: logits look like .* probabilities.*--inputs"):
        load_logit_file(path, require_labels=False)
    logits, _ = load_logit_file(path, require_labels=False, inputs="probabilities")
    if shape == "softmax":
        np.testing.assert_allclose(logits - logits[:, :1], z - z[:, :1], atol=1e-9)
    else:
        np.testing.assert_allclose(logits, np.column_stack([np.zeros(9), z[:, 0]]), atol=1e-9)


def test_probabilities_mode_refuses_logits_and_bad_mode(tmp_path, arrays):
    logits, labels = arrays
    path = tmp_path / "z.npz"
    np.savez(path, logits=logits, labels=labels)
    with pytest.raises(ValueError, match="must be probabilities"):
        load_logit_file(path, require_labels=True, inputs="probabilities")
    with pytest.raises(ValueError, match="inputs must be 'logits' or 'probabilities'; got 'x'"):
        load_logit_file(path, require_labels=True, inputs="x")
