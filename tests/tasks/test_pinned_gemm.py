"""The reproducible mode's linear products (tasks/runtime/pinned_gemm.py): the same values as
torch's ``linear`` and its gradients, the same bits whatever the thread count, fixed blocks
chosen by the shape alone, and torch's own function back after the block."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tasks.runtime import pinned_gemm as pg
from tasks.runtime.reproducible import deterministic_torch

ROOT = Path(__file__).resolve().parents[2]


def test_linear_matches_torch_and_a_hand_written_product() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 7))
    w = rng.standard_normal((4, 7))
    b = rng.standard_normal(4)
    got = pg.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)).numpy()
    expected = np.einsum("abk,ok->abo", x, w) + b  # the definition, not torch's kernel
    assert got.shape == (3, 5, 4)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    no_bias = pg.linear(torch.from_numpy(x[0, 0]), torch.from_numpy(w)).numpy()  # 1-D input
    np.testing.assert_allclose(no_bias, w @ x[0, 0], rtol=1e-12)


def test_gradients_match_finite_differences() -> None:
    torch.manual_seed(0)
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(pg.linear, (x, w, b))
    assert torch.autograd.gradcheck(lambda a, c: pg.linear(a, c), (x, w))


@pytest.mark.parametrize("rows", [3, 255, 256, 1000, 4099])
def test_row_blocks_are_fixed_by_the_row_count_and_give_one_threads_bits(rows) -> None:
    blas = pg.numpy_openblas()
    if blas is None:
        pytest.skip("numpy does not use OpenBLAS here")
    rng = np.random.default_rng(rows)
    a = torch.from_numpy(rng.standard_normal((rows, 384)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((384, 700)).astype(np.float32))
    bounds = pg._row_bounds(rows)
    assert bounds[0] == 0 and bounds[-1] == rows and bounds == sorted(bounds)
    assert len(bounds) - 1 == (1 if rows < 2 * pg._MIN_ROWS else pg.PARTS)
    assert all(x % 16 == 0 for x in bounds[1:-1])
    before, torch_before = blas.num_threads, torch.get_num_threads()
    blas.set_num_threads(1)  # the reference: each block on one OpenBLAS thread, by hand
    expected = np.concatenate([a.numpy()[lo:hi] @ b.numpy()
                               for lo, hi in zip(bounds, bounds[1:])])
    blas.set_num_threads(max(2, before))
    try:
        for threads in (1, 2):  # one after the other, or side by side: the same bits
            torch.set_num_threads(threads)
            np.testing.assert_array_equal(pg.matmul(a, b).numpy(), expected)
        assert blas.num_threads == max(2, before)  # OpenBLAS's count given back
    finally:
        blas.set_num_threads(before)
        torch.set_num_threads(torch_before)
    np.testing.assert_allclose(pg.matmul(a, b).numpy(), a.numpy().astype(np.float64)
                               @ b.numpy().astype(np.float64), rtol=1e-4, atol=1e-3)


def test_transposed_operands_need_no_copy_and_give_the_same_product() -> None:
    rng = np.random.default_rng(2)
    a = torch.from_numpy(rng.standard_normal((300, 40)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((50, 40)).astype(np.float32))
    assert pg._np(b.t()).base is not None or pg._np(b.t()).flags.f_contiguous
    np.testing.assert_array_equal(pg.matmul(a, b.t()).numpy(),
                                  pg.matmul(a, b.t().contiguous()).numpy())


def test_other_dtypes_and_mixed_dtypes_go_to_torch_unchanged() -> None:
    x = torch.randn(4, 3).to(torch.bfloat16)
    w = torch.randn(2, 3).to(torch.bfloat16)
    assert torch.equal(pg.linear(x, w), F.linear(x, w))
    with pytest.raises(RuntimeError, match="same dtype"):  # torch's own answer, not ours
        pg.linear(torch.randn(4, 3), torch.randn(2, 3, dtype=torch.float64))


def test_the_block_sends_nn_linear_through_the_products_and_gives_torch_back() -> None:
    if not pg.products_available():
        pytest.skip("numpy's OpenBLAS with the pinned kernel set is not available here")
    layer = torch.nn.Linear(5, 3)
    x = torch.randn(7, 5)
    torch_out = layer(x)
    with pg.pinned_products():
        assert F.linear is pg.linear
        ours = layer(x)
    assert F.linear is not pg.linear
    torch.testing.assert_close(ours, torch_out)
    with pytest.raises(RuntimeError, match="boom"):
        with pg.pinned_products():
            raise RuntimeError("boom")
    assert F.linear is not pg.linear  # given back after an error too
    with deterministic_torch():
        assert F.linear is pg.linear
    with deterministic_torch(products=False):
        assert F.linear is not pg.linear


def _numpy_linked_openblas() -> str | None:
    """The OpenBLAS file numpy's compiled core links, read from its ELF dependencies (ldd)."""
    core = np._core if hasattr(np, "_core") else np.core
    ext = next(Path(core.__file__).parent.glob("_multiarray_umath*.so"), None)
    if ext is None:
        return None
    done = subprocess.run(["ldd", str(ext)], capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if "openblas" in line and "=>" in line:
            return str(Path(line.split("=>")[1].split("(")[0].strip()).resolve())
    return None


def test_the_library_is_the_one_numpy_links_not_scipys() -> None:
    import scipy.linalg  # noqa: F401 - loads scipy's own OpenBLAS beside numpy's

    linked = _numpy_linked_openblas()
    if linked is None:
        pytest.skip("numpy's core links no OpenBLAS here (ldd)")
    blas = pg.numpy_openblas()
    assert blas is not None
    assert str(Path(blas.filepath).resolve()) == linked


def test_each_product_runs_on_one_thread_of_numpys_openblas_and_gives_the_count_back(
        monkeypatch) -> None:
    blas = pg.numpy_openblas()
    if blas is None or not pg.products_available():
        with pg.pinned_products():  # nothing to pin: torch's function stays
            assert F.linear is not pg.linear
        return
    seen: list[int] = []
    real = np.matmul

    def recording(*args, **kwargs):
        seen.append(blas.num_threads)
        return real(*args, **kwargs)

    before = blas.num_threads
    blas.set_num_threads(2)
    try:
        with pg.pinned_products():
            assert blas.num_threads == 2  # numpy's own products keep the task's threads
            monkeypatch.setattr(pg.np, "matmul", recording)
            torch.nn.Linear(64, 32)(torch.randn(600, 64)).sum().backward()
            monkeypatch.setattr(pg.np, "matmul", real)
            assert blas.num_threads == 2
        assert seen and set(seen) == {1}  # forward and backward blocks, one thread each
    finally:
        blas.set_num_threads(before)


def test_without_the_pinned_kernel_set_the_block_changes_nothing(monkeypatch) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "NoSuchCore")
    assert not pg.products_available()
    with pg.pinned_products():
        assert F.linear is not pg.linear


_TRAIN = """
import hashlib, sys, numpy as np, torch
from threadpoolctl import threadpool_limits
from tasks.runtime.reproducible import deterministic_torch
torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)
# products above pinned_gemm._PARALLEL_MACS (2**27): their row blocks run side by side
net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(1024, 256), torch.randint(0, 10, (1024,))
assert 1024 * 256 * 1024 >= 2**27
with threadpool_limits(int(sys.argv[2]), user_api="blas"), deterministic_torch():
    assert torch.nn.functional.linear.__module__ == "tasks.runtime.pinned_gemm"
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    out = net(x)
print(hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())
                     + out.detach().numpy().tobytes()).hexdigest())
"""


def test_the_bits_do_not_depend_on_the_thread_counts() -> None:
    # the products run on one OpenBLAS thread whatever torch's and OpenBLAS's own counts:
    # neither may change a bit (OpenBLAS alone, on 1 or 2 threads, does change them:
    # tasks/runtime/pinned_gemm.py)
    digests = set()
    for torch_threads, blas_threads in ((1, 1), (2, 2), (2, 1), (1, 2)):
        done = subprocess.run([sys.executable, "-c", _TRAIN, str(torch_threads),
                               str(blas_threads)], cwd=ROOT, capture_output=True, text=True,
                              check=False, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        digests.add(done.stdout.strip().splitlines()[-1])
    assert len(digests) == 1
