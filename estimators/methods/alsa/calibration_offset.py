"""The reference pass of an ALSA fit: influence and rectification statistic of rows the anchors
were not fitted to, the leave-anchor-out correction, and the calibration offset ``b``."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import kernels as _k
from .declaration import Kernel


def _reference_stats(
    U: Any, A: Any, p: Any, v: Any, kernel: Kernel, rectify: str, chunk: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Total influence ``I(z_i)`` and the rectification statistic of every row of ``U``.

    The statistic is what :func:`alsa_predict` compares with the cut-off: ``max_j |p_j| K_j``
    (``"per-anchor"``), ``max_j K_j`` (``"kernel"``), ``|I|`` (``"total"``), 0 (``"none"``).
    """
    import torch

    W = A / A.norm(dim=1, keepdim=True).clamp_min(_k.NORM_EPS)
    v2 = v * v
    n = U.shape[0]
    infl = np.empty(n, dtype=np.float64)
    stat = np.zeros(n, dtype=np.float64)
    with torch.no_grad():
        buffers = _k.block_buffers(min(chunk, n), A.shape[0], kernel, U)
        pa = p.abs()
        for s in range(0, n, chunk):
            _, _, K = _k.kernel_block(U[s : s + chunk], W, v2, kernel, buffers)
            I = torch.mv(K, p)
            infl[s : s + chunk] = I.double().cpu().numpy()
            if rectify == "per-anchor":
                stat[s : s + chunk] = (K * pa).amax(dim=1).double().cpu().numpy()
            elif rectify == "kernel":
                stat[s : s + chunk] = K.amax(dim=1).double().cpu().numpy()
            elif rectify == "total":
                stat[s : s + chunk] = I.abs().double().cpu().numpy()
    return infl, stat


def _leave_anchor_out(
    U: Any,
    A: Any,
    p: Any,
    v: Any,
    kernel: Kernel,
    rectify: str,
    rows: NDArray[np.int64],
    infl: NDArray[np.float64],
    stat: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Score each anchor's initial row without that anchor (the training rows as held-out).

    Anchor ``j`` starts on row ``r_j`` with the peak sign of that row's correctness, so on
    ``r_j`` it memorises the label: :math:`I(z_{r_j})` and the rectification statistic are
    optimistic there. With :math:`k/n` up to 1/4 (``n_anchors="auto"``) this biased the
    in-distribution estimate by several points at ``n = 1,000``. Here
    :math:`I_{-j}(z_{r_j}) = I(z_{r_j}) - p_j K_j(z_{r_j})` and the statistic is taken over the
    other anchors; the other rows are unchanged.
    """
    import torch

    infl = infl.copy()
    stat = stat.copy()
    with torch.no_grad():
        W = A / A.norm(dim=1, keepdim=True).clamp_min(_k.NORM_EPS)
        idx = torch.as_tensor(rows, device=U.device)
        _, _, K = _k.kernel_block(U[idx], W, v * v, kernel)  # (k, k): row r_j vs every anchor
        diag = torch.diagonal(K).clone()
        own = (p * diag).double().cpu().numpy()
        infl[rows] = infl[rows] - own
        K.fill_diagonal_(0.0)
        if rectify == "per-anchor":
            stat[rows] = (K * p.abs()).amax(dim=1).double().cpu().numpy()
        elif rectify == "kernel":
            stat[rows] = K.amax(dim=1).double().cpu().numpy()
        elif rectify == "total":
            stat[rows] = np.abs(infl[rows])
    return infl, stat


def _calibration_bias(
    influence: NDArray[np.float64],
    accuracy: float,
    rectified: NDArray[np.bool_] | None = None,
    floor: float = 0.0,
) -> float:
    r"""The ``b`` with :math:`\frac1n \sum_i \tilde q_i(b) = \mathrm{acc}` (bisection).

    :math:`\tilde q_i(b) = 1/c` (``floor``) on ``rectified`` rows, else
    :math:`\sigma(I_i + b)`. The left side increases with ``b``, so the root is unique when it
    exists; 200 bisection steps on ``[-60, 60]`` in float64 reach it to rounding (an
    unreachable ``acc`` gives an end of the bracket); it stops early once the bracket is one
    float64 ulp wide (about 70 steps), where further steps change nothing.
    """
    from scipy.special import expit

    if rectified is None:
        rectified = np.zeros(influence.shape[0], dtype=bool)
    n = influence.shape[0]
    keep = influence[~rectified]
    fixed = float(rectified.sum()) * floor
    lo, hi = -60.0, 60.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:  # the bracket is one ulp wide: later steps change nothing
            break
        if (fixed + float(np.sum(expit(keep + mid)))) / n < accuracy:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
