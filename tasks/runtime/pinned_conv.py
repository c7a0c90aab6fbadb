"""The reproducible mode's inference convolutions: im2col of a few images at a time, then a
pinned product.

In the reproducible mode a convolution must add in the same order on every CPU. oneDNN's and
NNPACK's kernels pick their blocking from the CPU's caches, so the mode keeps them off; ATen's
own kernel (``slow_conv2d``: im2col of one image, then MKL's ``COMPATIBLE`` GEMM) is fixed but
slow: for the fmnist suite's narrow ResNet, MKL spends most of the forward pass packing the
small per-image operands (``sgemm_copybn``), and the extract stage, a forward pass over 213,000
images per run, was the largest stage of ``make bench``.

Where no gradient is wanted (the extract stage, the validation passes of training, the
model-aware methods' forward passes), :func:`conv2d` computes the same convolution as

.. math:: Y[i, o, h, w] = b_o + \\sum_{(d_h, d_w, c)} X_p[i, s_h h + d_h, s_w w + d_w, c]
          \\, W[o, c, d_h, d_w],

the sum over the kernel's taps and channels as **one** matrix product per chunk of images: the
zero-padded input in channels-last order (``X_p``), viewed as its patch matrix (rows
``(image, h, w)``, columns ``(d_h, d_w, c)``, copied once by numpy), times the weights as a
``(d_h d_w c, o)`` matrix. A chunk holds as many images as fit :data:`CHUNK_BYTES` of patches
(so the copy is still in the cache when the product reads it), a function of the shapes alone,
and its product is one call of numpy's OpenBLAS on **one** thread, pinned to its Haswell kernels
by the mode (:mod:`tasks.runtime.pinned_gemm`). So the bits depend on the shapes and the kernel
set only, not on the thread count; the chunks run side by side on two threads where torch has
two.

Measured (pinned environment, 2 threads, forward passes over 8,192 images in batches of
2,048; ``docs/PERFORMANCE.md``, "Same numbers on any machine"): the narrow ResNet 2.0 s on ATen's
kernel, 0.55-0.7 s here; LeNet 0.58 s, 0.23-0.25 s.

Training stays on ATen's kernel. The same products with the textbook backward (the weights'
gradient from the patches, the input's as a convolution of the padded output gradient with the
flipped kernel) trained the narrow ResNet 1.2x faster but LeNet 1.6x slower (its 5x5 kernels
over 6 and 16 channels make patch matrices of 150-400 columns, copied twice a step), so it was
not kept.

Anything else (grouped or dilated convolutions, string padding, unbatched input, tensors other
than float32 or float64 CPU tensors of one dtype, or any tensor that wants a gradient) goes to
torch's own function, which the mode still pins through ATen's kernel.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import numpy as np
import torch
import torch.nn.functional as F

from tasks.runtime.pinned_gemm import one_thread_blocks, products_available

__all__ = ["CHUNK_BYTES", "conv2d", "pinned_convolutions"]

_TORCH_CONV2D: Final = F.conv2d

#: Bytes of patches per chunk: small enough to stay in the cache between the copy and the
#: product (the narrow ResNet's forward: 0.75 s at 512 KiB, 0.55-0.71 s at 2 MiB, 0.68-0.71 s
#: at 8 MiB over 8,192 images). Part of the bits: the chunks are where the products' rows are
#: cut.
CHUNK_BYTES: Final[int] = 2 << 20

#: Convolutions of at least this many multiply-adds run their chunks on two threads; smaller
#: ones in order (handing them over costs more than it saves). Not part of the bits.
_PARALLEL_MACS: Final[int] = 1 << 22


def _pair(value: Any) -> tuple[int, int] | None:
    """``(a, b)`` from an int or a pair of ints; None for anything else (``"same"``, say)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value, value
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return int(value[0]), int(value[1])
    return None


def _chunks(images: int, row_bytes: int) -> list[int]:
    """Where a batch's images are cut: a function of the shapes alone.

    >>> _chunks(10, 1 << 20), _chunks(3, 1 << 30)
    ([0, 2, 4, 6, 8, 10], [0, 1, 2, 3])
    """
    per = max(1, CHUNK_BYTES // max(1, row_bytes))
    return list(range(0, images, per)) + [images]


class _Geometry:
    """Shapes of one convolution: padded input ``(n, hp, wp, c)``, kernel, strides, output."""

    def __init__(self, padded: np.ndarray, weight_shape: tuple[int, ...],
                 stride: tuple[int, int]) -> None:
        if not padded.flags.c_contiguous:
            raise ValueError("padded must be a C-contiguous (n, h, w, c) array.")
        self.n, self.hp, self.wp, self.c = padded.shape
        self.o, _, self.kh, self.kw = weight_shape
        self.sh, self.sw = stride
        self.ho = (self.hp - self.kh) // self.sh + 1
        self.wo = (self.wp - self.kw) // self.sw + 1
        self.k = self.kh * self.kw * self.c
        self.bounds = _chunks(self.n, self.ho * self.wo * self.k * padded.itemsize)
        self.macs = self.n * self.ho * self.wo * self.k * self.o

    def patches(self, padded: np.ndarray, a: int, z: int) -> np.ndarray:
        """The patch matrix of images ``a:z``: ``((z - a) ho wo, kh kw c)``, a copy (or a view
        where the patches are already rows, as for a 1x1 convolution of stride 1)."""
        # the strides of a C-contiguous array, computed: numpy (as torch) reports any stride
        # for a dimension of size 1, and one channel is such a dimension
        sc = padded.itemsize
        sw = sc * self.c
        sh = sw * self.wp
        sn = sh * self.hp
        view = np.lib.stride_tricks.as_strided(
            padded[a:], (z - a, self.ho, self.wo, self.kh, self.kw * self.c),
            (sn, sh * self.sh, sw * self.sw, sh, sc), writeable=False)
        return view.reshape((z - a) * self.ho * self.wo, self.k)


def _padded(x: torch.Tensor, padding: tuple[int, int]) -> torch.Tensor:
    """``x`` ``(n, c, h, w)`` in channels-last order, zero-padded: ``(n, h + 2p_h, w + 2p_w, c)``,
    contiguous."""
    xl = x.detach().permute(0, 2, 3, 1)
    if padding != (0, 0):
        xl = F.pad(xl, (0, 0, padding[1], padding[1], padding[0], padding[0]))
    return xl.contiguous()


def _kernel_columns(weight: torch.Tensor) -> np.ndarray:
    """``W`` ``(o, c, k_h, k_w)`` as the product's right operand: ``(k_h k_w c, o)``."""
    o = weight.shape[0]
    return np.ascontiguousarray(weight.detach().permute(0, 2, 3, 1).reshape(o, -1).t().numpy())


def _convolve(padded: np.ndarray, columns: np.ndarray, kernel: tuple[int, int],
              stride: tuple[int, int]) -> torch.Tensor:
    """The convolution of a padded channels-last batch ``(n, h_p, w_p, c)`` with a kernel given
    as its columns ``(k_h k_w c, o)``: ``(n, o, h_out, w_out)`` in channels-last storage,
    chunk by chunk (the module docstring)."""
    geo = _Geometry(padded, (columns.shape[1], padded.shape[3], *kernel), stride)
    nhwc = np.empty((geo.n, geo.ho, geo.wo, geo.o), dtype=padded.dtype)
    rows = nhwc.reshape(geo.n * geo.ho * geo.wo, geo.o)  # a view: nhwc is C-contiguous
    per_image = geo.ho * geo.wo

    def chunk(i: int) -> None:
        a, z = geo.bounds[i], geo.bounds[i + 1]
        np.matmul(geo.patches(padded, a, z), columns, out=rows[a * per_image:z * per_image])

    one_thread_blocks(chunk, len(geo.bounds) - 1, parallel=geo.macs >= _PARALLEL_MACS)
    return torch.from_numpy(nhwc).permute(0, 3, 1, 2)


def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1) -> torch.Tensor:
    """``torch.nn.functional.conv2d`` with its products through numpy's pinned OpenBLAS.

    .. math:: Y[i, o, h, w] = b_o + \\sum_{c, d_h, d_w} X_p[i, c, s_h h + d_h, s_w w + d_w]
              \\, W[o, c, d_h, d_w]

    Parameters
    ----------
    input : torch.Tensor
        ``(n, c, h, w)``.
    weight : torch.Tensor
        ``(o, c, k_h, k_w)``.
    bias : torch.Tensor, optional
        ``(o,)``.
    stride, padding : int or pair of int
        As torch's (zero padding).
    dilation, groups
        Anything but 1 goes to torch's own function.

    Returns
    -------
    torch.Tensor
        ``(n, o, h_out, w_out)`` in channels-last memory order; torch's own result where the
        call is not one this function computes (the module docstring), gradients included.

    Examples
    --------
    >>> x, w = torch.arange(16.0).reshape(1, 1, 4, 4), torch.ones(1, 1, 2, 2)
    >>> conv2d(x, w, stride=2)
    tensor([[[[10., 18.],
              [42., 50.]]]])
    """
    stride_pair, padding_pair = _pair(stride), _pair(padding)
    tensors = (input, weight) if bias is None else (input, weight, bias)
    if (stride_pair is None or padding_pair is None or _pair(dilation) != (1, 1)
            or groups != 1 or input.dim() != 4 or weight.dim() != 4
            or min(stride_pair) < 1 or min(padding_pair) < 0
            or any(t.device.type != "cpu" or t.layout != torch.strided
                   or t.dtype not in (torch.float32, torch.float64) for t in tensors)
            or len({t.dtype for t in tensors}) != 1
            or input.shape[1] != weight.shape[1]
            or input.shape[2] + 2 * padding_pair[0] < weight.shape[2]
            or input.shape[3] + 2 * padding_pair[1] < weight.shape[3]
            or input.shape[0] == 0
            or (torch.is_grad_enabled() and (input.requires_grad or weight.requires_grad
                                             or (bias is not None and bias.requires_grad)))):
        return _TORCH_CONV2D(input, weight, bias, stride, padding, dilation, groups)
    kernel = (int(weight.shape[2]), int(weight.shape[3]))
    out = _convolve(_padded(input, padding_pair).numpy(), _kernel_columns(weight), kernel,
                    stride_pair)
    if bias is not None:
        out.permute(0, 2, 3, 1).add_(bias.detach())
    return out


@contextmanager
def pinned_convolutions() -> Iterator[None]:
    """Send ``torch.nn.functional.conv2d`` (every ``nn.Conv2d``) through :func:`conv2d` for a
    block; torch's function is put back after.

    Where :func:`tasks.runtime.pinned_gemm.products_available` is false (numpy without
    OpenBLAS, or an OpenBLAS that ignores the pinned kernel set) the block changes nothing:
    ATen's own kernel computes the convolutions, slower and as fixed, and the run records
    ``convolutions: aten`` (:func:`tasks.runtime.reproducible.effective_settings`). The switch
    is process-wide, as torch's deterministic switch is.
    """
    if not products_available():
        yield
        return
    saved = F.conv2d
    F.conv2d = conv2d  # type: ignore[assignment]
    try:
        yield
    finally:
        F.conv2d = saved
