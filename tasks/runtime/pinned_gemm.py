"""The reproducible mode's matrix products: OpenBLAS's pinned kernels instead of MKL's.

In the reproducible mode every GEMM must add in the same order on every CPU. MKL does that
only on its ``COMPATIBLE`` branch (``MKL_CBWR``), the one branch it honours on a non-Intel
CPU, and that branch is slow: 85 GFLOP/s against 176 on MKL's own choice, for a
8,192 x 384 x 1,536 float32 product on 2 threads of the AMD EPYC that generated
``docs/BENCHMARK.md``. numpy's OpenBLAS, pinned to its Haswell kernels
(``OPENBLAS_CORETYPE=Haswell``, which the mode sets), computes the same product at 238
GFLOP/s on 2 threads, 128 on one. Its order of addition follows the kernel set (pinned), its
blocking constants (compiled in per kernel set, not read from the CPU's caches), the shapes and
the thread count: measured on OpenBLAS 0.3.31, one product on 1 and on 2 threads, or cut into
row blocks, differs in the last bits, so :func:`matmul` computes every product in fixed row
blocks on one OpenBLAS thread each (``docs/PERFORMANCE.md``, "Same numbers on any machine",
has the measurements).

So, inside a reproducible stage task on the CPU (:func:`pinned_products`),
``torch.nn.functional.linear`` (every ``nn.Linear``, the text encoder's projections,
torch-geometric's ``Linear``) computes its forward and backward products through numpy
(:func:`linear`); ``benchmarks/bench_reproducible.py`` measures what it gains (``pinned``
against ``pinned-aten``, the mode with MKL's products).

Convolutions: where no gradient is wanted, :mod:`tasks.runtime.pinned_conv` computes them on the
same library (im2col of a few images, one product per chunk: 2.4-3.7x faster than ATen's kernel);
in training they stay on ATen's own kernel (im2col and MKL's ``COMPATIBLE`` GEMM, one image at
a time). The same im2col computed as one OpenBLAS product over the whole batch gave nothing
in training: the ResNet's 1.64 s against 1.60 s (40 steps; the fast mode's oneDNN: 0.43 s).

Anything but float32 or float64 CPU tensors of one dtype goes to torch's own function,
unchanged: the mode still pins it through MKL's ``COMPATIBLE`` branch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["PARTS", "linear", "matmul", "numpy_openblas", "one_thread_blocks",
           "pinned_products", "products_available"]

#: The dtypes OpenBLAS computes (sgemm, dgemm); every other dtype keeps torch's function.
_DTYPES: Final[frozenset[torch.dtype]] = frozenset({torch.float32, torch.float64})

_TORCH_LINEAR: Final = F.linear


def _np(t: torch.Tensor) -> np.ndarray:
    """A numpy view of a 2-D CPU tensor that BLAS takes as it is: row-major, or a transposed
    row-major matrix (BLAS's transpose flag); anything else is copied first (numpy would
    otherwise fall back to its own slow loop)."""
    t = t.detach()
    if not (t.is_contiguous() or t.t().is_contiguous()):
        t = t.contiguous()
    return t.numpy()


@lru_cache(maxsize=1)
def numpy_openblas() -> Any:
    """threadpoolctl's handle on the OpenBLAS that **numpy** computes with, or None.

    A process can load several OpenBLAS libraries: numpy's wheel ships
    ``numpy.libs/libscipy_openblas64_*.so`` and scipy's ``scipy.libs/libscipy_openblas*.so``,
    and threadpoolctl lists scipy's first. Setting the thread count of the wrong one leaves
    numpy's products on its default threads (the first version of this module did that, and
    pinned LeNet checkpoints then came out in two versions across identical runs). So the
    library is numpy's own: the one in numpy's wheel folder, else the only OpenBLAS whose
    version is the one numpy was built against. None where numpy uses another BLAS (MKL, a
    system library that cannot be told apart): the products then stay with torch.
    """
    import numpy
    from threadpoolctl import ThreadpoolController

    found = ThreadpoolController().select(internal_api="openblas").lib_controllers
    wheel_libs = Path(numpy.__file__).resolve().parent.parent / "numpy.libs"
    own = [c for c in found if Path(c.filepath).resolve().parent == wheel_libs]
    if len(own) == 1:
        return own[0]
    try:
        blas = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except Exception:  # noqa: BLE001 - an old numpy without the dict form
        return None
    if "openblas" not in str(blas.get("name", "")).lower():
        return None
    same = [c for c in found if str(c.version) == str(blas.get("version"))]
    return same[0] if len(same) == 1 else None


def products_available() -> bool:
    """Whether :func:`pinned_products` can send the products to numpy's OpenBLAS: it is found
    (:func:`numpy_openblas`) and runs the kernel set the mode pins (``OPENBLAS_CORETYPE``,
    which only a ``DYNAMIC_ARCH`` build honours)."""
    blas = numpy_openblas()
    wanted = os.environ.get("OPENBLAS_CORETYPE", "")
    return blas is not None and bool(wanted) and \
        str(getattr(blas, "architecture", "")).lower() == wanted.lower()


#: Row blocks of a product with at least ``2 * _MIN_ROWS`` rows: fixed, so that the bits do not
#: depend on how many threads compute them (OpenBLAS sums a row in another order where it falls
#: at the edge of a call's rows, and on another thread count).
PARTS: Final[int] = 2
_MIN_ROWS: Final[int] = 128
#: Products of at least this many multiply-adds run their blocks side by side on torch's second
#: thread; smaller ones one after the other (handing them over costs more than it saves).
_PARALLEL_MACS: Final[int] = 1 << 27


@lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=PARTS, thread_name_prefix="pinned-gemm")


def _row_bounds(rows: int) -> list[int]:
    """Where a product's rows are cut: a function of the row count alone.

    >>> _row_bounds(100), _row_bounds(1000)
    ([0, 100], [0, 512, 1000])
    """
    if rows < PARTS * _MIN_ROWS:
        return [0, rows]
    step = -(-rows // PARTS)
    step += -step % 16  # a multiple of every kernel's row unroll
    return [min(rows, i * step) for i in range(PARTS)] + [rows]


def one_thread_blocks(block: Callable[[int], None], count: int, *, parallel: bool) -> None:
    """``block(i)`` for ``i < count``, with numpy's OpenBLAS on **one** thread in each call
    (set, and given back after, so numpy's products elsewhere keep their threads).

    The blocks run side by side on two threads where ``parallel`` holds and torch has two
    threads or more, else one after the other: which one is not part of the bits, since each
    block is one call on one OpenBLAS thread either way.
    """
    blas = numpy_openblas()
    before = blas.num_threads if blas is not None else None
    if blas is not None and before != 1:
        blas.set_num_threads(1)
    try:
        if count > 1 and parallel and torch.get_num_threads() > 1:
            list(_pool().map(block, range(count)))
        else:
            for i in range(count):
                block(i)
    finally:
        if blas is not None and before != 1:
            blas.set_num_threads(before)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` of two 2-D CPU tensors, computed by numpy's OpenBLAS (no autograd).

    The rows are cut into :data:`PARTS` fixed blocks (:func:`_row_bounds`, by the row count
    alone), each computed by a one-thread OpenBLAS call; a large product's blocks run side by
    side where torch has two threads or more, a small one's one after the other. OpenBLAS's
    bits depend on its thread count and on where a row falls in a call, so both are fixed and
    the bits depend on the shapes and the kernel set alone (``OPENBLAS_CORETYPE``), not on the
    threads a task is given. OpenBLAS's own threads are not used for these products: they wait
    busily for the next call, and beside torch's OpenMP threads on 2 cores that made training
    4-13x slower at random (the mode also shortens that wait, ``OPENBLAS_THREAD_TIMEOUT``, for
    the estimators' numpy calls). A transposed view goes to BLAS as a transposed operand,
    without a copy.

    Examples
    --------
    >>> a, b = torch.arange(6.0).reshape(2, 3), torch.ones(3, 2)
    >>> matmul(a, b)
    tensor([[ 3.,  3.],
            [12., 12.]])
    """
    x, y = _np(a), _np(b)
    out = np.empty((x.shape[0], y.shape[1]), dtype=np.result_type(x, y))
    bounds = _row_bounds(x.shape[0])

    def block(i: int) -> None:
        np.matmul(x[bounds[i]:bounds[i + 1]], y, out=out[bounds[i]:bounds[i + 1]])

    one_thread_blocks(block, len(bounds) - 1,
                      parallel=x.shape[0] * x.shape[1] * y.shape[1] >= _PARALLEL_MACS)
    return torch.from_numpy(out)


def _eligible(*tensors: torch.Tensor | None) -> bool:
    return all(t is None or (t.device.type == "cpu" and t.dtype in _DTYPES
                             and t.layout == torch.strided) for t in tensors) \
        and len({t.dtype for t in tensors if t is not None}) == 1


class _Linear(torch.autograd.Function):
    """``y = x W^T + b`` with every product through :func:`matmul`.

    The backward is the textbook one: ``dx = dy W``, ``dW = dy^T x``, ``db = sum_rows dy``.
    """

    @staticmethod
    def forward(ctx: Any, x2: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x2, weight)
        ctx.has_bias = bias is not None
        out = matmul(x2, weight.t())
        if bias is not None:
            out += bias
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        x2, weight = ctx.saved_tensors
        grad = grad.contiguous()
        gx = matmul(grad, weight) if ctx.needs_input_grad[0] else None
        gw = matmul(grad.t(), x2) if ctx.needs_input_grad[1] else None
        gb = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb


def linear(input: torch.Tensor, weight: torch.Tensor,
           bias: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.nn.functional.linear`` with its products through numpy's BLAS.

    .. math:: y = x W^\\top + b

    Parameters
    ----------
    input : torch.Tensor
        ``(..., in_features)``.
    weight : torch.Tensor
        ``(out_features, in_features)``.
    bias : torch.Tensor, optional
        ``(out_features,)``.

    Returns
    -------
    torch.Tensor
        ``(..., out_features)``; torch's own ``linear`` where the inputs are not float32 or
        float64 CPU tensors of one dtype.

    Examples
    --------
    >>> x, w, b = torch.ones(4, 3), torch.full((2, 3), 0.5), torch.tensor([1.0, -1.0])
    >>> linear(x, w, b)
    tensor([[2.5000, 0.5000],
            [2.5000, 0.5000],
            [2.5000, 0.5000],
            [2.5000, 0.5000]])
    """
    if not _eligible(input, weight, bias) or weight.dim() != 2 or input.dim() < 1:
        return _TORCH_LINEAR(input, weight, bias)
    lead = input.shape[:-1]
    x2 = input.reshape(-1, input.shape[-1])
    if not x2.is_contiguous():
        x2 = x2.contiguous()
    out = _Linear.apply(x2, weight, bias)
    return out.reshape(*lead, weight.shape[0])


@contextmanager
def pinned_products() -> Iterator[None]:
    """Send ``torch.nn.functional.linear`` through :func:`linear` for a block (every module
    that calls it: ``nn.Linear``, the text encoder's projections, torch-geometric's
    ``Linear``); torch's function is put back after. Each product runs on one thread of numpy's
    OpenBLAS (:func:`numpy_openblas`, set and given back around the call in :func:`matmul`),
    so numpy's own products elsewhere in the task (the estimators') keep the task's threads
    and their bits.

    Where :func:`products_available` is false (numpy without OpenBLAS, or an OpenBLAS that
    ignores the pinned kernel set) the block changes nothing: torch computes the products on
    MKL's ``COMPATIBLE`` branch, slower and as fixed, and the run records
    ``linear_products: torch`` (:func:`tasks.runtime.reproducible.effective_settings`).

    The switch is process-wide, as torch's own deterministic switch is: one process computes
    in one mode (:mod:`tasks.runtime.reproducible`).
    """
    if not products_available():
        yield
        return
    saved = F.linear
    F.linear = linear
    try:
        yield
    finally:
        F.linear = saved
