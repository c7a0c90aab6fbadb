"""Realized accuracy, label files matched by name or content, the band's realized coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tasks.monitor.files import BatchError
from tasks.monitor.keys import logits_digest
from tasks.monitor.realized import LabelIndex, band_coverage, realized_accuracy


def test_realized_accuracy_is_the_argmax_hit_rate():
    z = np.array([[3.0, 1.0], [0.0, 2.0], [1.0, 0.5], [0.2, 0.1]])
    assert realized_accuracy(z, np.array([0, 1, 1, 1])) == 0.5
    with pytest.raises(ValueError, match="one label per row"):
        realized_accuracy(z, np.array([0, 1]))


def test_label_files_match_by_stem_then_by_content(tmp_path):
    rng = np.random.default_rng(0)
    z1, z2 = rng.normal(size=(6, 3)), rng.normal(size=(4, 3))
    np.savez(tmp_path / "day-1.npz", labels=z1.argmax(axis=1))
    np.savez(tmp_path / "whatever.npz", logits=z2, labels=z2.argmax(axis=1))
    index = LabelIndex(str(tmp_path))
    assert index.match(["day-1"], logits_digest(z1)).name == "day-1.npz"
    assert index.match(["day-9", "day-2"], logits_digest(z2)).name == "whatever.npz"
    assert index.match(["day-3"], logits_digest(z1[:2])) is None
    assert index.read(tmp_path / "day-1.npz", 6, 3, logits_digest(z1)).tolist() == \
        z1.argmax(axis=1).tolist()


def test_label_files_that_do_not_fit_are_refused(tmp_path):
    z = np.random.default_rng(0).normal(size=(6, 3))
    np.savez(tmp_path / "a.npz", labels=np.zeros(5, int))
    np.savez(tmp_path / "b.npz", labels=np.full(6, 4))
    np.savez(tmp_path / "c.npz", logits=z + 1, labels=np.zeros(6, int))
    index = LabelIndex(str(tmp_path))
    with pytest.raises(BatchError, match="5 labels for a production file of 6 rows"):
        index.read(tmp_path / "a.npz", 6, 3, logits_digest(z))
    with pytest.raises(BatchError, match=r"class indices in 0..2"):
        index.read(tmp_path / "b.npz", 6, 3, logits_digest(z))
    with pytest.raises(BatchError, match="its logits differ"):
        index.read(tmp_path / "c.npz", 6, 3, logits_digest(z))


def test_no_labels_option_means_no_label_files():
    assert LabelIndex(None).files == [] and LabelIndex(None).match(["x"], "d") is None


def _row(est, low, high, real, method="ac"):
    return {"method": method, "estimated_accuracy": est, "shift_low": low, "shift_high": high,
            "realized_accuracy": real}


def test_band_coverage_counts_the_labelled_chunks_inside_their_band():
    rows = [_row(0.8, 0.7, 0.9, 0.85), _row(0.8, 0.7, 0.9, 0.95), _row(0.6, 0.5, 0.7, 0.5),
            _row(0.6, 0.5, 0.7, None), _row(0.1, 0.0, 0.2, 0.1, method="other")]
    cov = band_coverage(rows, "ac", 0.9, recent=2)
    assert (cov.n_chunks, cov.covered, cov.rate) == (3, 2, pytest.approx(2 / 3))
    assert (cov.recent_n, cov.recent_rate) == (2, 0.5)  # the last two: 0.95 out, 0.5 in
    assert cov.mean_abs_error == pytest.approx(100 * (0.05 + 0.15 + 0.1) / 3)
    assert cov.mean_width == pytest.approx(20.0)
    assert "2 of 3 labelled chunks (67 %; nominal 90 %)" in cov.line()


def test_coverage_without_labels_is_unknown_not_zero():
    cov = band_coverage([_row(0.8, 0.7, 0.9, None)], "ac", 0.9)
    assert cov.n_chunks == 0 and math.isnan(cov.rate)
    assert cov.to_record()["rate"] is None and "not known" in cov.line()
