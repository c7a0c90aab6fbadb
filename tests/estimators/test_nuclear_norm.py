"""Nuclear-norm score (estimators/scores/nuclear_norm.py) against np.linalg.svd and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators import get_estimator
from estimators.scores.nuclear_norm import NuclearNorm, nuclear_norm_score

pytestmark = pytest.mark.filterwarnings(
    "ignore::estimators.core.exceptions.DegenerateValidationWarning")


def reference(z: np.ndarray) -> float:
    """softmax row by row, then the full SVD."""
    p = np.array([np.exp(r - r.max()) / np.exp(r - r.max()).sum() for r in z])
    n, k = p.shape
    return float(np.linalg.svd(p, compute_uv=False).sum()) / math.sqrt(min(n, k) * n)


@pytest.mark.parametrize("scale", [0.1, 1.0, 4.0, 30.0])
@pytest.mark.parametrize("n, k", [(1, 2), (3, 10), (50, 3), (500, 20), (40, 100)])
def test_matches_the_svd(n, k, scale):
    z = np.random.default_rng(n * k).normal(size=(n, k)) * scale
    assert nuclear_norm_score(z) == pytest.approx(reference(z), rel=1e-7, abs=1e-9)


def test_estimator_reports_score_and_nuclear_norm():
    z = np.random.default_rng(1).normal(size=(300, 6)) * 2
    res = NuclearNorm().fit(z, z.argmax(1)).estimate(z)
    assert res.diagnostics["score"] == pytest.approx(reference(z), rel=1e-9)
    assert res.diagnostics["nuclear_norm"] == pytest.approx(
        reference(z) * math.sqrt(6 * 300), rel=1e-9)


def one_hot_logits(pred: np.ndarray, k: int) -> np.ndarray:
    z = np.full((pred.size, k), -500.0)
    z[np.arange(pred.size), pred] = 500.0
    return z


@pytest.mark.parametrize("k, d, per_class", [(10, 10, 30), (10, 4, 25), (5, 1, 7), (3, 2, 1)])
def test_one_hot_balanced_predictions(k, d, per_class):
    """Orthogonal columns of norms sqrt(n_k): ||P||_* = D sqrt(n/D) = sqrt(D n), so
    S = sqrt(D / min(n, K))."""
    pred = np.repeat(np.arange(d), per_class)
    n = pred.size
    assert nuclear_norm_score(one_hot_logits(pred, k)) == pytest.approx(
        math.sqrt(d / min(n, k)), rel=1e-9)


def test_one_hot_unbalanced_predictions():
    counts = np.array([50, 30, 15, 4, 1])
    pred = np.repeat(np.arange(5), counts)
    expected = np.sqrt(counts).sum() / math.sqrt(min(100, 8) * 100)
    assert nuclear_norm_score(one_hot_logits(pred, 8)) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("n, k", [(100, 10), (4, 10), (1, 3)])
def test_uniform_predictions(n, k):
    """Rank one, P = 11ᵀ/K with singular value sqrt(nK)/K: S = 1/sqrt(K min(n, K))."""
    assert nuclear_norm_score(np.zeros((n, k))) == pytest.approx(
        1.0 / math.sqrt(k * min(n, k)), rel=1e-9)


def test_bounds_and_monotone_in_confidence():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 10, 3000)
    base = rng.normal(size=(3000, 10))
    base[np.arange(3000), y] += 1.0
    scores = [nuclear_norm_score(base * t) for t in (0.05, 0.3, 1.0, 3.0, 10.0)]
    assert np.all(np.diff(scores) > 0), scores
    assert 1.0 / math.sqrt(10 * 10) - 1e-12 <= scores[0] and scores[-1] <= 1.0


def test_invariant_to_row_constants_order_and_float32():
    rng = np.random.default_rng(4)
    z = rng.normal(size=(1000, 10)) * 2
    base = nuclear_norm_score(z)
    assert nuclear_norm_score(z + rng.normal(0, 5, (1000, 1))) == pytest.approx(base, rel=1e-10)
    assert nuclear_norm_score(z[rng.permutation(1000)]) == pytest.approx(base, rel=1e-10)
    z32 = z.astype(np.float32)
    assert nuclear_norm_score(z32) == nuclear_norm_score(z32.astype(np.float64))


def test_wide_and_large_inputs_match_svd():
    rng = np.random.default_rng(5)
    z = rng.normal(size=(20_000, 50)) * 3
    assert nuclear_norm_score(z) == pytest.approx(reference(z), rel=1e-8)


def test_mapped_accuracy_and_bad_input():
    z = np.random.default_rng(6).normal(size=(200, 4))
    est = get_estimator("nuclear-norm", score_map=(2.0, -0.5)).fit(z, z.argmax(1))
    res = est.estimate(z)
    assert res.accuracy == pytest.approx(min(max(2.0 * res.diagnostics["score"] - 0.5, 0), 1))
    with pytest.raises(ValueError, match="target_logits has 3 classes"):
        est.estimate(z[:, :3])
    with pytest.raises(ValueError, match="logits must be a 2-D array"):
        nuclear_norm_score(np.zeros((2, 2, 2)))
