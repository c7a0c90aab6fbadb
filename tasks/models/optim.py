"""Adam and AdamW as every trainer of the pipeline builds them: torch's fused kernel on the CPU.

Why fused
---------
``torch.optim.Adam``'s default (for-loop) step on the CPU divides by ``exp_avg_sq.sqrt()``,
and ATen computes a float tensor's ``sqrt`` with MKL's vector maths (``vsSqrt``, its
high-accuracy mode: within 1 ulp, not correctly rounded), whose code path depends on the CPU's
vendor and model. The same inputs then give other last bits on another CPU, and training
carries the first differing bit into every digit of the model. Measured in the reproducible
mode (``benchmarks/cpu_fingerprint.py``, torch 2.11.0 on both machines): on an AMD EPYC (Zen 5)
and an Intel Xeon (family 6, model 207), float32 and float64 ``torch.sqrt`` differ
(``benchmarks/cpu_primitives.py``), and in the MLP's and GraphSAGE's first training steps it is
the first operation whose output differs while its inputs are identical; ``exp``, ``log``,
``tanh``, ``erf``, ``sigmoid``, ``rsqrt`` and row norms were identical. The fused step (``fused=True``) computes the square root with
the CPU's square-root instruction (correctly rounded, IEEE 754), and with it the six networks
of ``benchmarks/bench_reproducible.py`` (MLP, LeNet, ResNet, GCN, GraphSAGE, GAT; 40 steps and a
forward pass) trained bit-identical models on both CPUs (``docs/PERFORMANCE.md``, "Evidence
across real CPUs"). It is also one kernel per parameter instead of about six.

On a GPU the default (foreach) step is kept: its determinism was measured that way
(``docs/PERFORMANCE.md``, "The GPU").
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["adam"]


def adam(params: Iterable[torch.nn.Parameter], *, lr: float, weight_decay: float = 0.0,
         decoupled: bool = False) -> torch.optim.Optimizer:
    """Adam (``decoupled=False``) or AdamW, fused on the CPU.

    Parameters
    ----------
    params : iterable of Parameter
        The parameters to train, all on one device.
    lr : float
        Learning rate, > 0.
    weight_decay : float, default 0.0
        L2 penalty (Adam) or decoupled weight decay (AdamW, Loshchilov & Hutter 2019), >= 0.
    decoupled : bool, default False
        AdamW instead of Adam.

    Returns
    -------
    torch.optim.Optimizer
        ``torch.optim.Adam`` or ``torch.optim.AdamW`` with betas (0.9, 0.999) and eps 1e-8;
        ``fused=True`` where every parameter is on the CPU.

    Raises
    ------
    ValueError
        If ``params`` is empty, spans several devices, or ``lr`` / ``weight_decay`` is out of
        range.

    Examples
    --------
    >>> net = torch.nn.Linear(3, 2)
    >>> opt = adam(net.parameters(), lr=1e-3, weight_decay=0.01, decoupled=True)
    >>> type(opt).__name__, opt.defaults["fused"]
    ('AdamW', True)
    """
    params = list(params)
    if not params:
        raise ValueError("params must hold at least one parameter to train; got none.")
    devices = sorted({str(p.device) for p in params})
    if len(devices) > 1:
        raise ValueError(f"params must all be on one device; got parameters on {devices}.")
    if not lr > 0:
        raise ValueError(f"lr must be > 0; got {lr!r}.")
    if not weight_decay >= 0:
        raise ValueError(f"weight_decay must be >= 0; got {weight_decay!r}.")
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    fused = True if params[0].device.type == "cpu" else None
    return cls(params, lr=lr, weight_decay=weight_decay, fused=fused)
