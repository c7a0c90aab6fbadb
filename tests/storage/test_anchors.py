"""Anchors: round trip, replace partition, missing anchors named, validation."""

from __future__ import annotations

import numpy as np
import pytest

from storage import NotFoundError, connect, read_anchors, write_anchors

RUN = "toy.mlp.s0"


@pytest.fixture
def con(tmp_path):
    with connect(tmp_path / "bench.duckdb") as con:
        yield con


def _anchors(rng, k, c):
    return (
        rng.normal(size=(k, c)).astype(np.float32),
        rng.choice([-6.0, 6.0], size=k) + rng.normal(size=k),
        rng.uniform(1, 10, size=k),
    )


def test_round_trip(con, rng):
    positions, peaks, variances = _anchors(rng, 25, 7)
    assert write_anchors(con, RUN, "alsa-g", positions, peaks, variances) == 25
    got = read_anchors(con, RUN, "alsa-g")
    assert got[0].dtype == np.float32 and got[1].dtype == np.float64
    np.testing.assert_array_equal(got[0], positions)
    np.testing.assert_array_equal(got[1], peaks)
    np.testing.assert_array_equal(got[2], variances)


def test_rewrite_replaces_only_its_partition(con, rng):
    write_anchors(con, RUN, "alsa-g", *_anchors(rng, 30, 3))
    keep = _anchors(rng, 4, 3)
    write_anchors(con, RUN, "alsa-e", *keep)
    write_anchors(con, "other.run.s0", "alsa-g", *_anchors(rng, 2, 3))
    new = _anchors(rng, 10, 3)
    write_anchors(con, RUN, "alsa-g", *new)
    np.testing.assert_array_equal(read_anchors(con, RUN, "alsa-g")[0], new[0])
    np.testing.assert_array_equal(read_anchors(con, RUN, "alsa-e")[1], keep[1])
    counts = dict(
        con.sql("SELECT run_key || '/' || method, count(*) FROM anchors GROUP BY ALL").fetchall()
    )
    assert counts == {f"{RUN}/alsa-g": 10, f"{RUN}/alsa-e": 4, "other.run.s0/alsa-g": 2}


def test_missing_anchors_are_named(con, rng):
    write_anchors(con, RUN, "alsa-e", *_anchors(rng, 3, 3))
    with pytest.raises(NotFoundError, match=r"method 'alsa-g' on run 'toy.mlp.s0'.*\['alsa-e'\]"):
        read_anchors(con, RUN, "alsa-g")
    with pytest.raises(LookupError, match="none"):
        read_anchors(con, "nope", "alsa-g")


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ((np.zeros(3), np.zeros(3), np.zeros(3)), r"positions must be a numeric 2-D array"),
        ((np.zeros((0, 3)), np.zeros(0), np.zeros(0)), "at least one anchor"),
        (
            (np.zeros((3, 2)), np.zeros(2), np.zeros(3)),
            r"peaks must be .* shape \(3,\).* got .* shape \(2,\)",
        ),
        ((np.zeros((3, 2)), np.zeros(3), np.zeros((3, 1))), r"variances must be .* shape \(3,\)"),
        ((np.full((1, 2), np.inf), np.zeros(1), np.zeros(1)), "positions must be finite"),
    ],
)
def test_bad_arrays_are_rejected(con, arrays, message):
    with pytest.raises(ValueError, match=message):
        write_anchors(con, RUN, "alsa-g", *arrays)


def test_empty_keys_are_rejected(con, rng):
    with pytest.raises(ValueError, match="method must be a non-empty string"):
        write_anchors(con, RUN, "", *_anchors(rng, 2, 2))
