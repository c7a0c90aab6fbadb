"""Production files: listing, completeness, reading and refusing a batch, timestamps, labels."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.monitor.files import (
    BatchError,
    is_complete,
    list_files,
    read_batch,
    read_label_array,
    read_timestamps,
)
from tasks.monitor.keys import logits_digest


def logits(n: int = 40, c: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, c)) * 2


def test_folder_lists_logit_files_in_natural_order_without_hidden_or_temp(tmp_path):
    for name in ("day-10.npz", "day-2.npz", "day-1.parquet", ".day-3.npz", "day-4.npz.tmp",
                 "day-5.part", "notes.txt", "day-6.npz~"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "day-7.npz").write_bytes(b"x")
    stream, files = list_files(str(tmp_path))
    assert stream == str(tmp_path.resolve())
    assert [f.name for f in files] == ["day-1.parquet", "day-2.npz", "day-10.npz"]


def test_glob_and_single_file(tmp_path):
    (tmp_path / "a").mkdir()
    for name in ("x-1.npz", "x-2.npz", "y-1.npz"):
        (tmp_path / "a" / name).write_bytes(b"x")
    stream, files = list_files(str(tmp_path / "a" / "x-*.npz"))
    assert stream == str(tmp_path.resolve() / "a" / "x-*.npz")
    assert [f.name for f in files] == ["x-1.npz", "x-2.npz"]
    _, files = list_files(str(tmp_path / "**" / "*.npz"))
    assert len(files) == 3
    stream, files = list_files(str(tmp_path / "a" / "y-1.npz"))
    assert [f.name for f in files] == ["y-1.npz"]


@pytest.mark.parametrize("spec, message", [
    ("nope", "no such folder or file, and not a glob"),
    ("missing/*.npz", "the folder 'missing' of this glob does not exist"),
])
def test_a_production_path_that_names_nothing_is_refused(tmp_path, monkeypatch, spec, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=re.escape(f"--production {spec!r}: ") + message):
        list_files(spec)


def test_a_half_written_parquet_or_npz_is_not_complete(tmp_path):
    z = logits()
    pq.write_table(pa.table({"logits": z.tolist()}), tmp_path / "a.parquet")
    np.savez(tmp_path / "b.npz", logits=z)
    for path in (tmp_path / "a.parquet", tmp_path / "b.npz"):
        assert is_complete(path)
        data = path.read_bytes()
        partial = path.with_name("partial" + path.suffix)
        for cut in (0, 4, len(data) // 2, len(data) - 1):
            partial.write_bytes(data[:cut])
            assert not is_complete(partial), (path.name, cut)


def test_a_batch_is_read_as_float64_with_its_digest_and_labels(tmp_path):
    z = logits()
    y = z.argmax(axis=1)
    np.savez(tmp_path / "a.npz", logits=z.astype(np.float32), labels=y)
    batch = read_batch(tmp_path / "a.npz", 3)
    assert batch.logits.dtype == np.float64 and batch.n_rows == 40
    assert batch.digest == logits_digest(z) and batch.labels.tolist() == y.tolist()
    assert batch.timestamps is None and batch.warnings == ()


def test_class_count_other_than_the_reference_is_refused(tmp_path):
    np.savez(tmp_path / "a.npz", logits=logits(c=5))
    with pytest.raises(BatchError, match=r"a.npz: 5 classes, but the reference has 3"):
        read_batch(tmp_path / "a.npz", 3)


def test_probabilities_instead_of_logits_are_refused_with_the_fix(tmp_path):
    z = logits()
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    np.savez(tmp_path / "a.npz", logits=p)
    with pytest.raises(BatchError, match=r"a.npz.*probabilities.*np.log\(p\)"):
        read_batch(tmp_path / "a.npz", 3)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_rows_refuse_the_whole_file(tmp_path, bad):
    z = logits()
    z[[3, 7], 1] = bad
    np.savez(tmp_path / "a.npz", logits=z)
    with pytest.raises(BatchError, match=r"2 row\(s\) hold NaN or infinite logits \(row 3, 7\)"):
        read_batch(tmp_path / "a.npz", 3)


def test_labels_outside_the_classes_are_dropped_with_a_warning(tmp_path):
    z = logits()
    y = z.argmax(axis=1)
    y[0] = 7
    np.savez(tmp_path / "a.npz", logits=z, labels=y)
    batch = read_batch(tmp_path / "a.npz", 3)
    assert batch.labels is None
    assert "labels outside 0..2 (e.g. 7)" in batch.warnings[0]


def test_an_empty_file_is_an_empty_batch(tmp_path):
    np.savez(tmp_path / "a.npz", logits=np.zeros((0, 3)))
    pq.write_table(pa.table({"logits": pa.array([], pa.list_(pa.float64()))}),
                   tmp_path / "b.parquet")
    for name in ("a.npz", "b.parquet"):
        batch = read_batch(tmp_path / name, 3)
        assert batch.n_rows == 0 and batch.logits.shape == (0, 3)


def _epoch_ns(*dates: datetime) -> list[int]:
    return [int(d.timestamp()) * 10**9 for d in dates]


def test_timestamps_in_every_accepted_form(tmp_path):
    t = [datetime(2026, 3, 1, 12, tzinfo=UTC), datetime(2026, 3, 2, 6, 30, tzinfo=UTC)]
    want = _epoch_ns(*t)
    z = logits(n=2)
    np.savez(tmp_path / "dt.npz", logits=z,
             timestamp=np.array(["2026-03-01T12:00", "2026-03-02T06:30"], "datetime64[m]"))
    np.savez(tmp_path / "sec.npz", logits=z, timestamp=np.array([w // 10**9 for w in want]))
    pq.write_table(pa.table({"logits": z.tolist(),
                             "timestamp": pa.array(t, pa.timestamp("us", tz="UTC"))}),
                   tmp_path / "tz.parquet")
    naive = [d.replace(tzinfo=None) for d in t]
    pq.write_table(pa.table({"logits": z.tolist(), "timestamp": pa.array(naive,
                                                                          pa.timestamp("ms"))}),
                   tmp_path / "naive.parquet")
    berlin = pa.array(t, pa.timestamp("s", tz="Europe/Berlin"))  # same instants
    pq.write_table(pa.table({"logits": z.tolist(), "timestamp": berlin}),
                   tmp_path / "berlin.parquet")
    for name in ("dt.npz", "sec.npz", "tz.parquet", "naive.parquet", "berlin.parquet"):
        assert read_timestamps(tmp_path / name, 2).tolist() == want, name


@pytest.mark.parametrize("column, message", [
    (pa.array(["a", "b"]), "must be a timestamp, a date or seconds"),
    (pa.array([1.0, None]), "1 missing value"),
])
def test_bad_timestamps_are_refused(tmp_path, column, message):
    pq.write_table(pa.table({"logits": logits(n=2).tolist(), "timestamp": column}),
                   tmp_path / "a.parquet")
    with pytest.raises(BatchError, match=message):
        read_batch(tmp_path / "a.parquet", 3)


def test_period_chunking_needs_timestamps(tmp_path):
    np.savez(tmp_path / "a.npz", logits=logits())
    with pytest.raises(BatchError, match="no 'timestamp' column; --chunk 1d/1w"):
        read_batch(tmp_path / "a.npz", 3, need_timestamps=True)


def test_label_files_with_and_without_logits(tmp_path):
    z = logits()
    y = z.argmax(axis=1)
    np.savez(tmp_path / "only.npz", labels=y)
    pq.write_table(pa.table({"logits": z.tolist(), "label": y}), tmp_path / "both.parquet")
    labels, digest = read_label_array(tmp_path / "only.npz")
    assert labels.tolist() == y.tolist() and digest is None
    labels, digest = read_label_array(tmp_path / "both.parquet")
    assert labels.tolist() == y.tolist() and digest == logits_digest(z)
    np.savez(tmp_path / "none.npz", logits=z)
    with pytest.raises(BatchError, match="no array 'labels'"):
        read_label_array(tmp_path / "none.npz")
    (tmp_path / "junk.npz").write_bytes(os.urandom(64))
    with pytest.raises(BatchError, match="not a readable label file"):
        read_label_array(tmp_path / "junk.npz")


def test_a_stray_end_record_signature_in_the_data_is_not_a_complete_archive(tmp_path):
    # the bytes of a half-written .npz may contain the end-record signature by chance;
    # zipfile.is_zipfile would accept that, the completeness rule does not
    np.savez(tmp_path / "a.npz", logits=logits(n=400))
    data = (tmp_path / "a.npz").read_bytes()
    cut = len(data) // 2
    fake_end = b"PK\x05\x06" + bytes(16) + (200).to_bytes(2, "little")  # "200-byte comment"
    partial = data[:cut] + fake_end + bytes(300)  # more bytes follow than the comment holds
    (tmp_path / "b.npz").write_bytes(partial)
    assert not is_complete(tmp_path / "b.npz")
    with_comment = tmp_path / "c.npz"
    import zipfile

    with zipfile.ZipFile(tmp_path / "a.npz") as src, zipfile.ZipFile(with_comment, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.comment = b"written by a tool that comments its archives"
    assert is_complete(with_comment) and read_batch(with_comment, 3).n_rows == 400
