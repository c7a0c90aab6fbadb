"""The monitor's incremental keys: what counts as the same content, chunk, estimator, fit."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tasks.monitor.keys import (
    chunk_content,
    chunk_key,
    estimator_key,
    fit_key,
    logits_digest,
    stream_slug,
)


def test_content_is_the_float32_bytes_after_the_shape():
    z = np.random.default_rng(0).normal(size=(5, 3))
    expected = hashlib.sha256(b"alsa-bench-monitor/1|logits|(5, 3)")
    expected.update(z.astype("<f4").tobytes())  # independent: numpy's own bytes
    assert logits_digest(z) == expected.hexdigest()
    assert logits_digest(z.astype(np.float32)) == logits_digest(z)
    assert logits_digest(np.asfortranarray(z)) == logits_digest(z)
    assert logits_digest(z.reshape(3, 5)) != logits_digest(z)  # the shape counts
    z2 = z.copy()
    z2[4, 2] += 1e-3
    assert logits_digest(z2) != logits_digest(z)


def test_chunk_keys_separate_streams_and_chunkings_not_file_names():
    c = chunk_content([logits_digest(np.eye(3))])
    assert chunk_key("/a", "file", c) == chunk_key("/a", "file", c)
    assert len({chunk_key("/a", "file", c), chunk_key("/b", "file", c),
                chunk_key("/a", "1d", c)}) == 3
    assert chunk_content(["x", "y"]) != chunk_content(["y", "x"])  # order counts


@pytest.mark.parametrize("change", [
    {"reference_sha256": "r2"}, {"method": "atc-mc"}, {"params": {"seed": 1}},
    {"calibration_sha256": "c2"}, {"level": 0.8},
])
def test_every_part_of_an_estimator_moves_its_key(change):
    base = {"reference_sha256": "r1", "method": "ac", "params": {"seed": 0},
            "calibration_sha256": "c1", "level": 0.9}
    assert estimator_key(**base) != estimator_key(**{**base, **change})
    assert estimator_key(**base) == estimator_key(**{**base, "params": {"seed": 0}})


def test_fit_keys_follow_the_code_version_and_are_hex():
    assert fit_key("e", "v1") != fit_key("e", "v2")
    assert set(fit_key("e", "v1")) <= set("0123456789abcdef")


def test_stream_slugs_are_artifact_keys():
    slug = stream_slug("/data/Model A/prod/*.parquet")
    assert slug.startswith("prod-parquet-") and len(slug) <= 48
    assert all(ch.islower() or ch.isdigit() or ch == "-" for ch in slug)
    assert stream_slug("/x/prod") != stream_slug("/y/prod")
