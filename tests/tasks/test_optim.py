"""``tasks/models/optim.py``: the pipeline's Adam/AdamW, fused on the CPU.

The reference is torch's Adam written out in float64 (Kingma & Ba 2015, Algorithm 1; AdamW's
decoupled decay, Loshchilov & Hutter 2019), independent of torch.optim: the fused float32 step
must agree with it to float32 rounding. That the fused step gives the same bits on other CPUs
(the reason the module exists) is measured, not unit-tested: docs/PERFORMANCE.md, "Evidence
across real CPUs".
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tasks.models.optim import adam


def _reference(p0: np.ndarray, grads: list[np.ndarray], lr: float, wd: float,
               decoupled: bool) -> np.ndarray:
    p, m, v = p0.astype(np.float64), np.zeros_like(p0, np.float64), np.zeros_like(p0, np.float64)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        mhat, vhat = m / (1 - 0.9**t), v / (1 - 0.999**t)
        p = p - lr * mhat / (np.sqrt(vhat) + 1e-8)
    return p


@pytest.mark.parametrize("decoupled", [False, True])
def test_steps_match_the_written_out_rule(decoupled: bool) -> None:
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal(500).astype(np.float32)
    grads = [rng.standard_normal(500).astype(np.float32) for _ in range(5)]
    param = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = adam([param], lr=1e-2, weight_decay=0.1, decoupled=decoupled)
    assert type(opt) is (torch.optim.AdamW if decoupled else torch.optim.Adam)
    assert opt.defaults["fused"] is True
    for g in grads:
        param.grad = torch.from_numpy(g.copy())
        opt.step()
    ref = _reference(p0, grads, 1e-2, 0.1, decoupled)
    np.testing.assert_allclose(param.detach().numpy(), ref, rtol=0, atol=2e-6)
    # the other rule is measurably elsewhere: the test can tell Adam from AdamW
    other = _reference(p0, grads, 1e-2, 0.1, not decoupled)
    assert np.abs(param.detach().numpy() - other).max() > 1e-4


def test_the_first_step_is_the_learning_rate_against_the_gradient() -> None:
    # from m = v = 0 the bias-corrected step is g / sqrt(g^2) = sign(g), up to eps
    g = torch.tensor([3.0e-3, -7.1e-4, 1.3e-2, -2.2e-1], dtype=torch.float32)
    param = torch.nn.Parameter(torch.zeros(4))
    opt = adam([param], lr=0.5)
    param.grad = g.clone()
    opt.step()
    expected = [-0.5 * gi / (abs(gi) + 1e-8) for gi in g.double().tolist()]
    np.testing.assert_allclose(param.detach().double().numpy(), expected, rtol=3e-7)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="params must hold at least one"):
        adam([], lr=1e-3)
    p = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="lr must be > 0; got 0"):
        adam([p], lr=0)
    with pytest.raises(ValueError, match="weight_decay must be >= 0; got -1"):
        adam([p], lr=1e-3, weight_decay=-1)
    meta = torch.nn.Parameter(torch.zeros(2, device="meta"))
    with pytest.raises(ValueError, match=r"params must all be on one device; "
                                         r"got parameters on \['cpu', 'meta'\]"):
        adam([p, meta], lr=1e-3)


def test_every_trainer_builds_its_adam_here() -> None:
    # a trainer that constructs torch.optim.Adam/AdamW itself would bring back the CPU's
    # vector-maths square root (tasks/models/optim.py says why)
    from pathlib import Path

    import re

    root = Path(__file__).resolve().parents[2]
    calls = {str(f.relative_to(root)): re.findall(r"optim\.AdamW?\(([^)]*)\)", f.read_text())
             for d in ("tasks", "flows", "estimators") for f in (root / d).rglob("*.py")
             if f.name != "optim.py"}
    assert "estimators/trust/dis2.py" in {k for k, v in calls.items() if v}  # the search works
    offenders = sorted(k for k, found in calls.items() if any("fused=True" not in c for c in found))
    assert offenders == []
