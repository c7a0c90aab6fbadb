"""Square roots with one result on every CPU: the IEEE 754 correctly rounded ones.

``torch.sqrt`` of a float CPU tensor goes through MKL's vector maths (``vsSqrt``/``vdSqrt`` in
its high-accuracy mode: within 1 ulp, not correctly rounded), and MKL picks that code path by
the CPU's vendor and model. On identical inputs an AMD EPYC (Zen 5) and an Intel Xeon (family 6,
model 207) gave other last bits, float32 and float64 alike, in the reproducible mode
(``benchmarks/cpu_fingerprint.py``; ``docs/PERFORMANCE.md``, "Evidence across real CPUs").
ALSA's anchor optimiser divides by such roots in every epoch of a fit: on one machine,
replacing ``torch.sqrt``'s roots by the exact ones moved ALSA-E's estimates by up to 1.5e-4
(ALSA-G's by 5.6e-8), the scale at which a vendor's last bits move them. numpy's ``np.sqrt``
is the processor's square-root instruction, which IEEE 754 requires to be correctly rounded:
one result on any CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["exact_sqrt"]


def exact_sqrt(x: torch.Tensor) -> torch.Tensor:
    r"""The correctly rounded :math:`\sqrt{x}` of a tensor, the same bits on every CPU.

    Parameters
    ----------
    x : Tensor
        Floating-point tensor without autograd (``requires_grad`` False). Negative entries give
        NaN, as ``torch.sqrt`` does. A tensor on another device than the CPU, or of another
        dtype than float32 and float64, goes to ``torch.sqrt`` (not measured across GPUs).

    Returns
    -------
    Tensor
        A new tensor of ``x``'s shape, dtype and device.

    Raises
    ------
    TypeError
        If ``x`` is not a floating-point tensor.
    ValueError
        If ``x`` requires a gradient (this function is outside autograd).

    Examples
    --------
    >>> import torch
    >>> exact_sqrt(torch.tensor([4.0, 2.0], dtype=torch.float64)).tolist()
    [2.0, 1.4142135623730951]
    """
    import torch

    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError("x must be a floating-point torch.Tensor; got "
                        f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}.")
    if x.requires_grad:
        raise ValueError("x must not require a gradient: exact_sqrt is outside autograd "
                         "(use torch.sqrt where a gradient is wanted); got requires_grad=True.")
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
        return torch.sqrt(x)
    with np.errstate(invalid="ignore"):
        return torch.from_numpy(np.sqrt(x.numpy()))
