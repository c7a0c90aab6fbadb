"""``estimators/maths/exact.py``: square roots that are the same on every CPU.

Independent reference: Python's ``math.sqrt`` (C's ``sqrt``, correctly rounded by IEEE 754) in
float64, rounded once to float32 (float64 carries more than 2 x 24 + 2 bits, so that double
rounding is exact for square roots).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from estimators.maths.exact import exact_sqrt


def test_float32_roots_are_correctly_rounded() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.random(20000) * 1e-3, rng.random(20000) * 1e6,
                        [0.0, 1.0, 2.0, 1e-38, 3.4e38]]).astype(np.float32)
    got = exact_sqrt(torch.from_numpy(x))
    assert got.dtype == torch.float32 and got.shape == (x.size,)
    ref = np.array([math.sqrt(float(v)) for v in x]).astype(np.float32)
    assert np.array_equal(got.numpy(), ref)


def test_float64_roots_are_correctly_rounded() -> None:
    rng = np.random.default_rng(1)
    x = rng.random(5000) * 10.0 ** rng.integers(-30, 30, 5000)
    got = exact_sqrt(torch.from_numpy(x))
    assert got.dtype == torch.float64
    assert got.numpy().tolist() == [math.sqrt(v) for v in x.tolist()]


def test_shape_and_negatives_follow_torch() -> None:
    x = torch.tensor([[4.0, -1.0], [0.25, 9.0]])
    got = exact_sqrt(x)
    assert got.shape == (2, 2) and math.isnan(got[0, 1].item())
    assert got[0, 0].item() == 2.0 and got[1, 0].item() == 0.5
    half = exact_sqrt(torch.tensor([4.0], dtype=torch.float16))  # not numpy's: torch's root
    assert half.dtype == torch.float16 and half.item() == 2.0


def test_bad_input_is_named() -> None:
    with pytest.raises(TypeError, match="x must be a floating-point torch.Tensor; got torch.int64"):
        exact_sqrt(torch.tensor([4]))
    with pytest.raises(TypeError, match="got ndarray"):
        exact_sqrt(np.ones(3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="x must not require a gradient"):
        exact_sqrt(torch.ones(3, requires_grad=True))
