"""Dis² lower bound (estimators/trust/dis2.py) against labels it never sees."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.trust.dis2 import dis2_lower_bound


def _data(rng: np.random.Generator, n: int, c: int = 4, sep: float = 2.5, noise: float = 0.0):
    y = rng.integers(0, c, n)
    x = rng.normal(size=(n, c)) + sep * np.eye(c)[y]
    return x + rng.normal(scale=noise, size=x.shape), y


def _subpopulation(rng: np.random.Generator, n: int, share: float):
    """Target: the source mixture plus a new sub-population of class 0 whose logits sit where
    the classifier says class 1 and no validation point lies (a region a linear critic on the
    logits can find: the paper's assumption holds)."""
    x, y = _data(rng, n)
    k = int(share * n)
    x[:k] = rng.normal(scale=0.3, size=(k, x.shape[1])) + np.array([3.0, 4.5, -3.0, -3.0])
    y[:k] = 0
    return x, y


def test_bound_holds_under_a_subpopulation_shift_and_reports_its_terms() -> None:
    rng = np.random.default_rng(0)
    val_x, val_y = _data(rng, 1500)
    for share in (0.0, 0.2, 0.4):
        tgt_x, tgt_y = _subpopulation(rng, 1200, share)
        truth = float(np.mean(tgt_x.argmax(1) == tgt_y))
        b = dis2_lower_bound(val_x, val_y, tgt_x, repeats=6, epochs=15, seed=1)
        assert b.lower <= truth
        # the finite-sample term of the paper, computed from the halves' sizes (750, 600)
        eps = math.sqrt((750 + 4 * 600) * math.log(100.0) / (2 * 750 * 600))
        assert b.epsilon == pytest.approx(eps)
        assert b.lower == pytest.approx(max(b.val_accuracy - b.discrepancy - b.epsilon, 0.0))
        if share:
            # the critic finds the new region: the discrepancy reaches most of its share
            assert b.discrepancy > 0.5 * share


def test_no_shift_gives_a_bound_near_validation_accuracy_minus_epsilon() -> None:
    rng = np.random.default_rng(1)
    val_x, val_y = _data(rng, 4000)
    tgt_x, _ = _data(rng, 4000)
    b = dis2_lower_bound(val_x, val_y, tgt_x, repeats=6, epochs=15)
    # the max over critics and epochs of a held-out difference of agreement rates: small
    # without a shift (0.055 at this seed), far below a real shift's (test above)
    assert abs(b.discrepancy) < 0.08
    assert b.lower > b.val_accuracy - b.epsilon - 0.08


def test_a_larger_shift_lowers_the_bound() -> None:
    rng = np.random.default_rng(2)
    val_x, val_y = _data(rng, 2000)
    mild = dis2_lower_bound(val_x, val_y, _subpopulation(rng, 2000, 0.1)[0], repeats=6,
                            epochs=15)
    strong = dis2_lower_bound(val_x, val_y, _subpopulation(rng, 2000, 0.4)[0], repeats=6,
                              epochs=15)
    assert strong.lower < mild.lower - 0.1


@pytest.mark.parametrize("kwargs, match", [
    ({"repeats": 0}, "'repeats'"), ({"epochs": 1.5}, "'epochs'"), ({"delta": 1.0}, "'delta'"),
])
def test_bad_arguments_are_named(kwargs, match) -> None:
    rng = np.random.default_rng(3)
    x, y = _data(rng, 50)
    with pytest.raises(ValueError, match=match):
        dis2_lower_bound(x, y, x, **kwargs)


def test_too_few_rows_is_refused() -> None:
    rng = np.random.default_rng(4)
    x, y = _data(rng, 50)
    with pytest.raises(ValueError, match="at least 4"):
        dis2_lower_bound(x, y, x[:3])
