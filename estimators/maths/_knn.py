r"""k-nearest-neighbour distances in bounded memory: exact (blocked matrix products) and IVF.

What DistCS (:mod:`estimators.features.distcs`) needs of a neighbour search is, for every query row
:math:`x`, the mean Euclidean distance to its :math:`k` nearest rows of a reference set
:math:`R`,

.. math:: \bar d_k(x) = \frac1k \sum_{j=1}^{k} \lVert x - r_{(j)}(x) \rVert_2,

with :math:`r_{(j)}(x)` the :math:`j`-th nearest reference row.

* :func:`knn_mean_distance` is exact: the squared distances
  :math:`\lVert x\rVert^2 + \lVert r\rVert^2 - 2x^\top r` of one block of queries against the
  whole reference set come from one float32 matrix product, whose block height keeps the
  distance matrix under ``block_bytes`` (16 MiB by default); the :math:`k` smallest per row are
  selected (a two-level ``torch.topk`` where torch is installed, else ``numpy.partition``).
  Memory is :math:`O(\text{block} \times |R|)` whatever the number of queries.
* :class:`IVFIndex` is approximate (an inverted-file index, numpy only): k-means
  (:math:`L \approx 4\sqrt{|R|}` lists, trained on a seeded sample) partitions :math:`R`; a
  query scans the ``n_probe`` lists whose centroids are nearest. Missed neighbours can only
  *raise* :math:`\bar d_k`. ``benchmarks/bench_feature_methods.py`` measures its recall and time
  at 1M rows (``docs/PERFORMANCE.md``).

Float32 distances are accurate to about :math:`10^{-3}` relative (the expansion cancels for
near-duplicate rows, where the distance is then a small positive number instead of 0).
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BLOCK_BYTES",
    "EXACT_MAX_ROWS",
    "KNN_BLOCK_BYTES",
    "IVFIndex",
    "knn_mean_distance",
    "smallest_k",
]

#: Bytes of the distance block of one pass (queries x reference rows, float32).
BLOCK_BYTES = 64 * 2**20
#: The exact search's block: small enough to stay in cache between the product and the
#: selection (419 query rows against 10,000 reference rows; 64 MiB blocks were about 1.3x
#: slower end to end, ``docs/PERFORMANCE.md``).
KNN_BLOCK_BYTES = 16 * 2**20
#: Interleaved slices per row in the two-level k-smallest selection.
_GROUP = 16
#: Above this many reference rows ``index="auto"`` builds an :class:`IVFIndex`.
EXACT_MAX_ROWS = 100_000

F32 = NDArray[np.float32]


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of the project
        return None
    return torch


def smallest_k(d2: F32, k: int, *, sort: bool = False) -> F32:
    """The ``k`` smallest entries of every row of ``d2`` (ascending when ``sort``).

    >>> smallest_k(np.array([[3.0, 1.0, 2.0]], np.float32), 2, sort=True).tolist()
    [[1.0, 2.0]]
    """
    k = min(k, d2.shape[1])
    torch = _torch()
    if torch is not None:
        t = torch.from_numpy(np.ascontiguousarray(d2))
        if d2.shape[1] // _GROUP >= 2 * k:
            values = _grouped_smallest_k(torch, t, k)
            return cast(F32, np.sort(values.numpy(), axis=1) if sort else values.numpy())
        values = torch.topk(t, k, dim=1, largest=False, sorted=sort).values
        return cast(F32, values.numpy())
    part = np.partition(d2, k - 1, axis=1)[:, :k] if k < d2.shape[1] else d2.copy()
    return np.sort(part, axis=1) if sort else part


def _grouped_smallest_k(torch: Any, d: Any, k: int) -> Any:
    """The ``k`` smallest values of every row of the tensor ``d`` (unsorted), in two levels.

    Each row is cut into :data:`_GROUP` interleaved slices of ``w = n // _GROUP`` columns (the
    ``n % _GROUP`` last entries join the candidates directly). The ``k`` columns with the
    smallest minimum across the slices hold the ``k`` smallest values: a value among the ``k``
    smallest that sat in another column would have ``k`` other columns each holding a value no
    larger, so at least ``k`` values would precede it. One ``topk`` over those ``k * _GROUP``
    candidates finishes; the selection is exact, and on 10,000 columns about 1.4x faster than
    one ``topk`` over the row (``docs/PERFORMANCE.md``, "Feature methods").
    """
    rows, n = d.shape
    width = n // _GROUP
    view = d[:, :width * _GROUP].view(rows, _GROUP, width)
    cols = torch.topk(view.amin(dim=1), k, dim=1, largest=False, sorted=False).indices
    cand = torch.gather(view, 2, cols[:, None, :].expand(rows, _GROUP, k)).reshape(rows, -1)
    if width * _GROUP < n:
        cand = torch.cat([cand, d[:, width * _GROUP:]], dim=1)
    return torch.topk(cand, k, dim=1, largest=False, sorted=False).values


def _as_f32(x: NDArray[Any]) -> F32:
    return np.ascontiguousarray(x, dtype=np.float32)


def _sq_norms(x: F32) -> F32:
    return cast(F32, np.einsum("ij,ij->i", x, x))


def _block_rows(n_ref: int, block_bytes: int) -> int:
    return max(1, min(65_536, block_bytes // (4 * max(n_ref, 1))))


def _squared_block(q: F32, q_sq: F32, ref: F32, ref_sq: F32) -> F32:
    torch = _torch()
    if torch is not None and q.shape[0] * ref.shape[0] >= 1 << 20:
        # one fused product ||r||^2 - 2 q r (torch's GEMM was about 1.6x numpy's here)
        t = torch.addmm(torch.from_numpy(ref_sq), torch.from_numpy(np.ascontiguousarray(q)),
                        torch.from_numpy(ref).T, beta=1, alpha=-2)
        t += torch.from_numpy(q_sq)[:, None]
        t.clamp_(min=0.0)
        return cast(F32, t.numpy())
    d2 = q @ ref.T
    d2 *= -2.0
    d2 += ref_sq[None, :]
    d2 += q_sq[:, None]
    np.maximum(d2, 0.0, out=d2)
    return d2


def knn_mean_distance(
    queries: NDArray[Any],
    reference: NDArray[Any],
    k: int,
    *,
    exclude_self: bool = False,
    block_bytes: int = KNN_BLOCK_BYTES,
) -> NDArray[np.float64]:
    r"""Exact mean distance of each query row to its ``k`` nearest reference rows.

    Parameters
    ----------
    queries : ndarray of shape (m, d)
    reference : ndarray of shape (n, d)
    k : int
        Neighbours averaged (at most ``n``, or ``n - 1`` with ``exclude_self``).
    exclude_self : bool, default False
        The queries are the reference rows themselves: take the ``k + 1`` nearest and drop the
        nearest (the row itself), as the DistCS reference code does when it calibrates on the
        set it indexes.
    block_bytes : int, default 16 MiB
        Bound on the float32 distance block of one pass.

    Returns
    -------
    ndarray of shape (m,), float64

    Examples
    --------
    >>> ref = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
    >>> knn_mean_distance(np.array([[0.0, 0.0]]), ref, 2).round(4).tolist()
    [2.5]
    """
    ref = _as_f32(reference)
    ref_sq = _sq_norms(ref)
    q_all = _as_f32(queries)
    kk = min(k + int(exclude_self), ref.shape[0])
    out = np.empty(q_all.shape[0], dtype=np.float64)
    step = _block_rows(ref.shape[0], block_bytes)
    for start in range(0, q_all.shape[0], step):
        q = q_all[start:start + step]
        d2 = _squared_block(q, _sq_norms(q), ref, ref_sq)
        near = smallest_k(d2, kk, sort=exclude_self)
        if exclude_self:
            near = near[:, 1:]
        out[start:start + step] = np.sqrt(near.astype(np.float64)).mean(axis=1)
    return out


class IVFIndex:
    r"""Approximate k-NN: an inverted-file index over k-means lists (numpy only).

    Parameters
    ----------
    n_lists : int or None, default None
        Number of k-means lists :math:`L`; None: :math:`\lceil 4\sqrt{n}\rceil`.
    n_probe : int, default 16
        Lists scanned per query (more: higher recall, slower).
    n_iter : int, default 8
        Lloyd iterations of the k-means, on a seeded sample of at most :math:`64 L` rows.
    seed : int, default 0
    block_bytes : int, default 64 MiB

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ref = rng.normal(size=(2000, 8)).astype(np.float32)
    >>> index = IVFIndex(n_lists=16, n_probe=16).fit(ref)
    >>> bool(np.allclose(index.mean_distance(ref[:5], 3), knn_mean_distance(ref[:5], ref, 3),
    ...                  atol=1e-4))
    True
    """

    def __init__(self, *, n_lists: int | None = None, n_probe: int = 16, n_iter: int = 8,
                 seed: int = 0, block_bytes: int = BLOCK_BYTES) -> None:
        self.n_lists = n_lists
        self.n_probe = n_probe
        self.n_iter = n_iter
        self.seed = seed
        self.block_bytes = block_bytes

    def _assign(self, x: F32) -> NDArray[np.int64]:
        c_sq = _sq_norms(self.centroids_)
        out = np.empty(x.shape[0], dtype=np.int64)
        step = _block_rows(self.centroids_.shape[0], self.block_bytes)
        for s in range(0, x.shape[0], step):
            q = x[s:s + step]
            out[s:s + step] = _squared_block(q, _sq_norms(q), self.centroids_, c_sq).argmin(1)
        return out

    def fit(self, reference: NDArray[Any]) -> IVFIndex:
        """Train the k-means lists on ``reference`` and file every row in its list."""
        ref = _as_f32(reference)
        n = ref.shape[0]
        lists = self.n_lists or int(math.ceil(4.0 * math.sqrt(n)))
        lists = max(1, min(lists, n))
        rng = np.random.default_rng(self.seed)
        sample = ref[np.sort(rng.choice(n, min(n, 64 * lists), replace=False))]
        self.centroids_ = sample[rng.choice(sample.shape[0], lists, replace=False)].copy()
        for _ in range(self.n_iter):
            assign = self._assign(sample)
            counts = np.bincount(assign, minlength=lists).astype(np.float32)
            sums = np.zeros_like(self.centroids_)
            np.add.at(sums, assign, sample)
            filled = counts > 0
            self.centroids_[filled] = sums[filled] / counts[filled, None]
        assign = self._assign(ref)
        order = np.argsort(assign, kind="stable")
        self.rows_ = ref[order]
        self.rows_sq_ = _sq_norms(self.rows_)
        self.offsets_ = np.concatenate([[0], np.cumsum(np.bincount(assign, minlength=lists))])
        return self

    def search_squared(self, queries: NDArray[Any], k: int) -> F32:
        """Approximate ``k`` smallest squared distances of each query, ascending (``inf`` where
        the probed lists hold fewer than ``k`` rows)."""
        q = _as_f32(queries)
        m, lists = q.shape[0], self.centroids_.shape[0]
        probe = min(self.n_probe, lists)
        c_sq = _sq_norms(self.centroids_)
        q_sq = _sq_norms(q)
        probes = np.empty((m, probe), dtype=np.int64)
        step = _block_rows(lists, self.block_bytes)
        for s in range(0, m, step):
            d2 = _squared_block(q[s:s + step], q_sq[s:s + step], self.centroids_, c_sq)
            probes[s:s + step] = np.argpartition(d2, probe - 1, axis=1)[:, :probe] if (
                probe < lists) else np.arange(lists)[None, :]
        cand = np.full((m, probe, k), np.inf, dtype=np.float32)
        flat = probes.reshape(-1)
        order = np.argsort(flat, kind="stable")
        bounds = np.searchsorted(flat[order], np.arange(lists + 1))
        for lst in range(lists):
            lo, hi = bounds[lst], bounds[lst + 1]
            a, b = self.offsets_[lst], self.offsets_[lst + 1]
            if lo == hi or a == b:
                continue
            pairs = order[lo:hi]
            rows, slot = pairs // probe, pairs % probe
            d2 = _squared_block(q[rows], q_sq[rows], self.rows_[a:b], self.rows_sq_[a:b])
            kk = min(k, b - a)
            cand[rows, slot, :kk] = smallest_k(d2, kk)
        return smallest_k(cand.reshape(m, probe * k), k, sort=True)

    def mean_distance(self, queries: NDArray[Any], k: int, *,
                      exclude_self: bool = False) -> NDArray[np.float64]:
        """Approximate :func:`knn_mean_distance` (same arguments)."""
        kk = k + int(exclude_self)
        near = self.search_squared(queries, kk)
        if exclude_self:
            near = near[:, 1:]
        return cast(NDArray[np.float64], np.sqrt(near.astype(np.float64)).mean(axis=1))
