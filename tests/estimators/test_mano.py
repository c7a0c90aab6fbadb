"""MaNo (estimators/scores/mano.py) against plain re-implementations of the paper and of the official
code (Renchunzi-Xie/MaNo, algs/mano.py), closed forms and monotonicity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators import get_estimator
from estimators.scores.mano import MaNo, mano_criterion, mano_score

pytestmark = pytest.mark.filterwarnings(
    "ignore::estimators.core.exceptions.DegenerateValidationWarning")


def paper_reference(z: np.ndarray, p: float = 4.0, delta: float = 5.0) -> tuple[float, float]:
    """The paper's definition, one row and one entry at a time."""
    n, k = z.shape
    ces = []
    for row in z:
        m = max(row)
        lse = m + math.log(sum(math.exp(v - m) for v in row))
        ces.append(sum(lse - v for v in row) / k)  # CE(softmax(row), uniform)
    phi = sum(ces) / n
    total = 0.0
    for row in z:
        if phi > delta:
            m = max(row)
            e = [math.exp(v - m) for v in row]
        else:
            e = [1.0 + v + v * v / 2.0 for v in row]
        s = sum(e)
        total += sum((v / s) ** p for v in e)
    return (total / (n * k)) ** (1.0 / p), phi


def code_reference(z: np.ndarray, p: float = 4.0, delta: float = 5.0,
                   batch_size: int = 128) -> float:
    """A direct port of the official code's evaluate / scaling_method / uniform_cross_entropy
    (torch -> numpy; the criterion as the mean of the first five batches' losses)."""
    n, k = z.shape
    batches = [z[i:i + batch_size] for i in range(0, n, batch_size)]
    losses = []
    for b in batches[:5]:
        logp = b - b.max(1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
        losses.append(np.mean(-(np.full_like(b, 1.0 / k) * logp).sum(1)))  # F.cross_entropy
    loss = float(np.mean(losses))
    scores = []
    for b in batches:
        if loss > delta:
            out = np.exp(b)
        else:
            out = b + 1 + b ** 2 / 2
            out = out - out.min(1, keepdims=True)
            out = out / np.maximum(np.abs(out).sum(1, keepdims=True), 1e-12)
        norm = np.sum(np.abs(out) ** p) ** (1 / p)
        scores.append(norm / (b.shape[0] * b.shape[1]) ** (1 / p))
    return float(np.mean(scores))


def logits(seed: int, n: int, k: int, scale: float) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, k)) * scale


@pytest.mark.parametrize("scale", [0.3, 1.0, 3.0, 12.0])
@pytest.mark.parametrize("n, k", [(1, 2), (57, 3), (300, 10)])
def test_paper_form_matches_the_loop_reference(n, k, scale):
    z = logits(n + k, n, k, scale)
    expected, phi = paper_reference(z)
    assert mano_criterion(z) == pytest.approx(phi, rel=1e-12)
    assert mano_score(z) == pytest.approx(expected, rel=1e-10)
    res = MaNo().fit(z, z.argmax(1)).estimate(z) if n > 1 else None
    if res is not None:
        assert res.diagnostics["score"] == pytest.approx(expected, rel=1e-10)
        assert res.diagnostics["normalisation"] == ("softmax" if phi > 5 else "taylor")


@pytest.mark.parametrize("p", [1.0, 2.0, 3.5, 4.0])
@pytest.mark.parametrize("delta", [0.5, 5.0])
def test_norm_order_and_delta(p, delta):
    z = logits(3, 200, 5, 2.0)
    assert mano_score(z, norm_order=p, delta=delta) == pytest.approx(
        paper_reference(z, p, delta)[0], rel=1e-10)


@pytest.mark.parametrize("scale", [0.5, 2.0, 12.0])
@pytest.mark.parametrize("n, batch_size", [(1000, 128), (1000, 1000), (333, 64), (70, 128),
                                           (640, 128)])
def test_code_form_matches_the_port_of_the_official_code(n, batch_size, scale):
    z = logits(n, n, 10, scale)
    got = mano_score(z, form="code", batch_size=batch_size)
    assert got == pytest.approx(code_reference(z, batch_size=batch_size), rel=1e-9)
    est = MaNo(form="code", batch_size=batch_size).fit(z, z.argmax(1))
    assert est.estimate(z).diagnostics["score"] == pytest.approx(got, rel=1e-12)


def test_code_form_exp_branch_does_not_overflow_before_the_end():
    z = logits(1, 256, 10, 1.0)
    z[:, 0] += 100.0  # Φ > 5 and exp(4·z) far beyond float64 in a naive port
    with np.errstate(over="ignore"):
        naive = code_reference(z)
    assert not np.isfinite(naive) or naive > 1e40
    got = mano_score(z, form="code")
    # ||exp(Z)||_4 scales exactly with e^{shift}: checked against the logits lowered by 100
    assert np.isfinite(got)
    scaled = mano_score(z - 100.0, form="code", delta=-1.0)  # same branch, logits lowered by 100
    assert got == pytest.approx(scaled * math.exp(100.0), rel=1e-9)


def test_the_forms_differ_where_the_paper_says_they_do():
    z = logits(2, 256, 10, 0.5)  # Taylor branch in both
    assert mano_score(z) != pytest.approx(mano_score(z, form="code"), rel=1e-3)
    z = logits(2, 256, 10, 1.0)
    z[np.arange(256), np.arange(256) % 10] += 15.0  # softmax / exp branch
    assert mano_criterion(z) > 5
    assert mano_score(z) < 1.0 < mano_score(z, form="code")


def test_code_form_depends_on_batches_and_row_order_paper_form_does_not():
    z = logits(4, 500, 10, 1.0)
    perm = np.random.default_rng(0).permutation(500)
    assert mano_score(z[perm]) == pytest.approx(mano_score(z), rel=1e-12)
    assert mano_score(z, form="code", batch_size=500) != pytest.approx(
        mano_score(z, form="code", batch_size=50), rel=1e-6)


def test_closed_forms():
    k = 7
    # uniform rows: P = 1/K everywhere, S = 1/K (Taylor branch, Φ = 0)
    assert mano_score(np.full((5, k), 2.5)) == pytest.approx(1.0 / k, rel=1e-12)
    # one-hot rows (softmax branch): S = (n / (n K))^{1/p} = K^{-1/p}
    z = np.full((9, k), -200.0)
    z[np.arange(9), np.arange(9) % k] = 200.0
    assert mano_score(z) == pytest.approx(k ** -0.25, rel=1e-12)
    # Taylor on a single row [0, q]: v = [1, 1 + q + q²/2]
    q = 1.5
    v = np.array([1.0, 1 + q + q * q / 2])
    expected = (np.sum((v / v.sum()) ** 4) / 2) ** 0.25
    assert mano_score([[0.0, q]]) == pytest.approx(expected, rel=1e-12)


def test_score_increases_with_confidence():
    rng = np.random.default_rng(7)
    base = rng.normal(size=(2000, 10))
    base[np.arange(2000), rng.integers(0, 10, 2000)] += 1.0
    for form in ("paper", "code"):
        scores = [mano_score(base * t, form=form) for t in (0.1, 0.3, 0.6, 1.0)]
        assert np.all(np.diff(scores) > 0), (form, scores)
    # within the softmax branch too
    scores = [mano_score(base * t, delta=0.0) for t in (1.0, 2.0, 4.0, 8.0)]
    assert np.all(np.diff(scores) > 0)


def test_shift_by_a_row_constant_matters_only_in_the_taylor_branch():
    z = logits(5, 300, 10, 1.0)
    c = np.random.default_rng(1).normal(0, 3, (300, 1))
    assert mano_score(z + c, delta=-1.0) == pytest.approx(mano_score(z, delta=-1.0), rel=1e-10)
    assert mano_score(z + c) != pytest.approx(mano_score(z), rel=1e-3)
    # the code form's Taylor branch subtracts the row minimum of v, not of the logits
    assert mano_score(z + c, form="code") != pytest.approx(mano_score(z, form="code"), rel=1e-3)


def test_float32_input_gives_the_float64_numbers():
    z = logits(6, 400, 10, 2.0).astype(np.float32)
    assert mano_score(z) == mano_score(z.astype(np.float64))


@pytest.mark.parametrize("params, message", [
    ({"norm_order": 0.5}, r"'norm_order' parameter of MaNo must be in \[1.0, inf\]"),
    ({"norm_order": "4"}, "'norm_order' parameter of MaNo must be a number"),
    ({"delta": float("nan")}, "'delta' parameter of MaNo must be a number"),
    ({"form": "torch"}, "'form' parameter of MaNo must be one of"),
    ({"batch_size": 0}, r"'batch_size' parameter of MaNo must be in \[1, inf\]"),
    ({"batch_size": 2.5}, "'batch_size' parameter of MaNo must be an integer"),
])
def test_bad_parameters_are_refused_at_fit(params, message):
    z = logits(0, 20, 3, 1.0)
    with pytest.raises(ValueError, match=message):
        get_estimator("mano", **params).fit(z, z.argmax(1))


def test_plain_function_checks_its_input():
    with pytest.raises(ValueError, match="logits must be finite"):
        mano_score([[0.0, np.nan]])
    with pytest.raises(ValueError, match="'form' parameter of mano_score"):
        mano_score([[0.0, 1.0]], form="x")
