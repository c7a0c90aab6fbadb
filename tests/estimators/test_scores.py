"""Confidence scores and softmax helpers against naive references written here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from estimators.maths.confidence import (
    SCORES,
    check_correct,
    check_probs,
    check_scores,
    compute_score,
    log_softmax,
    max_confidence,
    max_confidence_from_probs,
    negative_entropy,
    negative_entropy_from_probs,
    softmax,
)


def naive_softmax(z: np.ndarray) -> np.ndarray:
    """Textbook softmax, row by row, with Python's math module (fine for moderate logits)."""
    out = np.empty_like(z, dtype=float)
    for i, row in enumerate(z):
        exps = [math.exp(v - max(row)) for v in row]
        total = sum(exps)
        out[i] = [e / total for e in exps]
    return out


def naive_negative_entropy(p: np.ndarray) -> np.ndarray:
    return np.array([sum(v * math.log(v) for v in row if v > 0) for row in p])


def test_softmax_matches_naive(rng):
    z = rng.normal(size=(50, 7)) * 3
    np.testing.assert_allclose(softmax(z), naive_softmax(z), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.exp(log_softmax(z)).sum(axis=1), 1.0, rtol=1e-12)


def test_log_softmax_is_stable_for_huge_logits():
    z = np.array([[1e308, 0.0, -1e308], [1000.0, 1000.0, 1000.0]])
    lp = log_softmax(z)
    assert np.all(np.isfinite(lp))
    np.testing.assert_allclose(np.exp(lp[1]), [1 / 3] * 3, rtol=1e-12)
    assert lp[0, 0] == 0.0


def test_max_confidence_and_negative_entropy_match_reference(rng):
    z = rng.normal(size=(40, 5)) * 2
    p = naive_softmax(z)
    np.testing.assert_allclose(max_confidence(z), p.max(axis=1), rtol=1e-12)
    np.testing.assert_allclose(negative_entropy(z), naive_negative_entropy(p), rtol=1e-10)
    np.testing.assert_allclose(max_confidence_from_probs(p), p.max(axis=1), rtol=1e-15)
    np.testing.assert_allclose(negative_entropy_from_probs(p), naive_negative_entropy(p),
                               rtol=1e-10)


def test_negative_entropy_uses_natural_log_and_is_bounded():
    c = 4
    np.testing.assert_allclose(negative_entropy(np.zeros((1, c))), [-math.log(c)], rtol=1e-14)
    # The ATC_code convention differs only by its 1e-20 epsilon; COT's log2 by a factor log(2).
    p = naive_softmax(np.array([[0.3, -1.0, 2.0, 0.0]]))
    np.testing.assert_allclose(negative_entropy_from_probs(p) / math.log(2),
                               np.sum(p * np.log2(p), axis=1), rtol=1e-12)


def test_saturated_probabilities_give_zero_entropy_not_nan():
    z = np.array([[0.0, 2000.0, -2000.0]])
    assert negative_entropy(z)[0] == 0.0
    assert max_confidence(z)[0] == 1.0
    onehot = np.array([[0.0, 1.0, 0.0]])
    assert negative_entropy_from_probs(onehot)[0] == 0.0
    # The COT reference computes sum(p * log2(p)), which is NaN here.
    with np.errstate(divide="ignore", invalid="ignore"):
        assert np.isnan(np.sum(onehot * np.log2(onehot)))


@settings(max_examples=40, deadline=None)
@given(
    arrays(np.float64, (6, 4), elements=st.floats(-50, 50)),
    st.floats(-1e3, 1e3),
)
def test_scores_invariant_to_row_constant_shift(z, shift):
    np.testing.assert_allclose(max_confidence(z + shift), max_confidence(z), rtol=1e-9)
    np.testing.assert_allclose(negative_entropy(z + shift), negative_entropy(z),
                               rtol=1e-7, atol=1e-9)
    assert np.all(max_confidence(z) >= 1 / 4 - 1e-15)
    assert np.all(negative_entropy(z) <= 0.0)
    assert np.all(negative_entropy(z) >= -math.log(4) - 1e-12)


def test_compute_score_matches_public_functions(rng):
    z = rng.normal(size=(10, 3))
    lp = log_softmax(z)
    for name, fn in SCORES.items():
        np.testing.assert_allclose(compute_score(lp, name), fn(z), rtol=1e-14)
    with pytest.raises(ValueError, match="score must be one of"):
        compute_score(lp, "entropy")


def test_scores_reject_bad_logits():
    with pytest.raises(ValueError, match=r"logits must be a 2-D array"):
        max_confidence(np.zeros((1, 2, 3)))  # 1-D is binary, accepted
    with pytest.raises(ValueError, match=r"logits must be finite"):
        negative_entropy(np.array([[0.0, np.nan]]))


def test_check_probs_rejects_logits_and_unnormalised_rows():
    with pytest.raises(ValueError, match=r"probs must hold probabilities in \[0, 1\]"):
        check_probs(np.array([[2.0, -1.0]]), "probs")
    with pytest.raises(ValueError, match=r"probs rows must sum to 1"):
        check_probs(np.array([[0.5, 0.4]]), "probs")
    np.testing.assert_array_equal(check_probs([[0.25, 0.75]], "probs"), [[0.25, 0.75]])


def test_check_scores_and_correct_messages():
    with pytest.raises(ValueError, match=r"scores must be a 1-D array"):
        check_scores(np.zeros((2, 2)), "scores")
    with pytest.raises(ValueError, match=r"scores must have at least one element"):
        check_scores([], "scores")
    with pytest.raises(ValueError, match=r"scores must be finite"):
        check_scores([0.1, np.inf], "scores")
    with pytest.raises(ValueError, match=r"correct must have one entry per score \(3\); got 2"):
        check_correct([1, 0], "correct", 3)
    with pytest.raises(ValueError, match=r"correct must be boolean"):
        check_correct([0, 2], "correct", 2)
    np.testing.assert_array_equal(check_correct([1.0, 0.0], "correct", 2), [True, False])
