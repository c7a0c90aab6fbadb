"""The reproducible mode's convolutions (tasks/runtime/pinned_conv.py): the definition's values
and gradients, the same bits whatever the thread count, chunks fixed by the shapes alone,
torch's own function wherever it does not apply, and torch's function back after the block."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tasks.runtime import pinned_conv as pc
from tasks.runtime import pinned_gemm as pg
from tasks.runtime.reproducible import deterministic_torch


def _definition(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple[int, int],
                padding: tuple[int, int]) -> np.ndarray:
    """The convolution by its sum, tap by tap (no torch kernel)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * padding[0], wd + 2 * padding[1]))
    xp[:, :, padding[0]:padding[0] + h, padding[1]:padding[1] + wd] = x
    ho = (xp.shape[2] - kh) // stride[0] + 1
    wo = (xp.shape[3] - kw) // stride[1] + 1
    out = np.zeros((n, o, ho, wo))
    for dh in range(kh):
        for dw in range(kw):
            window = xp[:, :, dh:dh + stride[0] * ho:stride[0], dw:dw + stride[1] * wo:stride[1]]
            out += np.einsum("nchw,oc->nohw", window, w[:, :, dh, dw])
    return out if b is None else out + b[None, :, None, None]


CASES = [  # (n, c, h, w, o, kernel, stride, padding, bias)
    (3, 2, 7, 6, 4, (3, 3), (1, 1), (1, 1), True),   # the ResNet's 3x3
    (5, 3, 9, 9, 2, (3, 3), (2, 2), (1, 1), False),  # its strided 3x3
    (2, 4, 5, 5, 3, (1, 1), (2, 2), (0, 0), False),  # its 1x1 shortcut
    (4, 1, 28, 28, 6, (5, 5), (1, 1), (2, 2), True),  # LeNet's first
    (2, 3, 8, 7, 5, (3, 1), (2, 1), (1, 0), True),   # uneven kernel, stride and padding
    (2, 1, 4, 4, 1, (2, 2), (2, 2), (0, 0), False),  # one channel in and out
]


@pytest.mark.parametrize("case", CASES)
def test_conv2d_matches_the_definition_with_and_without_gradients(case) -> None:
    n, c, h, w, o, kernel, stride, padding, bias = case
    rng = np.random.default_rng(sum(kernel) + n)
    x = rng.standard_normal((n, c, h, w))
    weight = rng.standard_normal((o, c, *kernel))
    b = rng.standard_normal(o) if bias else None
    expected = _definition(x, weight, b, stride, padding)
    args = (torch.from_numpy(weight), None if b is None else torch.from_numpy(b))
    with torch.inference_mode():
        got = pc.conv2d(torch.from_numpy(x), *args, stride=stride, padding=padding)
    assert got.permute(0, 2, 3, 1).is_contiguous()  # channels-last storage
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
    # where a gradient is wanted torch's own kernel computes (ATen's in the mode)
    xt = torch.from_numpy(x).requires_grad_()
    with_grad = pc.conv2d(xt, *args, stride=stride, padding=padding)
    np.testing.assert_allclose(with_grad.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    with_grad.sum().backward()
    assert xt.grad is not None and xt.grad.shape == xt.shape


def test_an_inference_output_takes_in_place_operations() -> None:
    conv = torch.nn.Conv2d(2, 4, 3, padding=1)
    with torch.inference_mode():
        out = pc.conv2d(torch.randn(3, 2, 5, 5), conv.weight, conv.bias, 1, 1)
        torch.relu_(out)  # a view of a custom function's output would refuse this
    assert bool((out >= 0).all())


@pytest.mark.parametrize("call", [
    dict(groups=2), dict(dilation=2), dict(dilation=(1, 2)), dict(padding="same"),
])
def test_what_it_does_not_compute_goes_to_torch(call, monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(pc, "_TORCH_CONV2D", lambda *a: seen.append(a) or F.conv2d(*a))
    x, w = torch.randn(2, 4, 7, 7), torch.randn(4, 4 // call.get("groups", 1), 3, 3)
    with torch.inference_mode():
        pc.conv2d(x, w, None, **{"stride": 1, "padding": 1, **call})
    assert len(seen) == 1


def test_other_dtypes_and_training_go_to_torch(monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(pc, "_TORCH_CONV2D", lambda *a: seen.append(a) or F.conv2d(*a))
    conv = torch.nn.Conv2d(2, 3, 3)
    with torch.inference_mode():
        pc.conv2d(torch.randn(1, 2, 5, 5, dtype=torch.float16),
                  conv.weight.half(), None)  # float16
        pc.conv2d(torch.randn(2, 5, 5), conv.weight, None)  # unbatched
    assert len(seen) == 2
    pc.conv2d(torch.randn(1, 2, 5, 5), conv.weight, conv.bias)  # the weights want gradients
    assert len(seen) == 3


def test_chunks_are_fixed_by_the_shapes_alone() -> None:
    assert pc._chunks(10, pc.CHUNK_BYTES // 2) == [0, 2, 4, 6, 8, 10]
    assert pc._chunks(3, pc.CHUNK_BYTES * 4) == [0, 1, 2, 3]  # one image over the budget
    assert pc._chunks(7, 1) == [0, 7]


@pytest.mark.parametrize("threads", [1, 2])
def test_the_bits_are_those_of_one_thread_per_chunk_whatever_the_threads(threads) -> None:
    blas = pg.numpy_openblas()
    if blas is None:
        pytest.skip("numpy does not use OpenBLAS here")
    rng = np.random.default_rng(7)
    x = torch.from_numpy(rng.standard_normal((300, 16, 14, 14)).astype(np.float32))
    w = torch.from_numpy(rng.standard_normal((32, 16, 3, 3)).astype(np.float32))
    padded = pc._padded(x, (1, 1)).numpy()
    columns = pc._kernel_columns(w)
    geo = pc._Geometry(padded, tuple(w.shape), (2, 2))
    assert len(geo.bounds) > 2 and geo.macs >= pc._PARALLEL_MACS  # chunks side by side
    before_blas, before_torch = blas.num_threads, torch.get_num_threads()
    blas.set_num_threads(1)  # the reference: each chunk one call on one thread, by hand
    expected = np.concatenate([geo.patches(padded, a, z) @ columns
                               for a, z in zip(geo.bounds, geo.bounds[1:])])
    blas.set_num_threads(max(2, before_blas))
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            got = pc.conv2d(x, w, None, stride=2, padding=1)
        assert blas.num_threads == max(2, before_blas)  # its thread count given back
    finally:
        blas.set_num_threads(before_blas)
        torch.set_num_threads(before_torch)
    rows = got.permute(0, 2, 3, 1).reshape(-1, 32).numpy()
    assert rows.tobytes() == expected.tobytes()


def test_the_mode_sends_convolutions_here_and_gives_torchs_function_back() -> None:
    torch_conv = F.conv2d
    with deterministic_torch():
        inside = F.conv2d
    assert F.conv2d is torch_conv
    if pg.products_available():
        assert inside is pc.conv2d
    else:  # nothing to pin with: torch's function stays
        assert inside is torch_conv
    with deterministic_torch(products=False):
        assert F.conv2d is torch_conv
