r"""ALine-S and ALine-D: agreement-on-the-line with peer models and cheap linear heads.

Baek et al. observe that, across a family of models, in-distribution (ID) versus
out-of-distribution (OOD) **agreement** between pairs of models lies on a line in probit space
whenever ID versus OOD **accuracy** does, with the same slope and bias:

.. math:: \Phi^{-1}(\mathrm{agr}_{T}(h, h')) = a\,\Phi^{-1}(\mathrm{agr}_{S}(h, h')) + b
          \quad\Longleftrightarrow\quad
          \Phi^{-1}(\mathrm{acc}_{T}(h)) = a\,\Phi^{-1}(\mathrm{acc}_{S}(h)) + b,

with :math:`\Phi` the standard normal CDF. Agreement needs no labels, so :math:`(\hat a, \hat b)`
are fitted by least squares on the agreements of every pair, and

* **ALine-S**: :math:`\widehat{\mathrm{acc}}_T(h) = \Phi\big(\hat a\,\Phi^{-1}(\mathrm{acc}_S(h))
  + \hat b\big)`;
* **ALine-D**: for every pair, the two lines give
  :math:`\tfrac12\big(\Phi^{-1}(\mathrm{acc}_T(h)) + \Phi^{-1}(\mathrm{acc}_T(h'))\big) =
  \Phi^{-1}(\mathrm{agr}_T(h,h')) + \hat a\big[\tfrac12\big(\Phi^{-1}(\mathrm{acc}_S(h)) +
  \Phi^{-1}(\mathrm{acc}_S(h'))\big) - \Phi^{-1}(\mathrm{agr}_S(h,h'))\big]`, an
  over-determined linear system in the unknowns :math:`\Phi^{-1}(\mathrm{acc}_T(h))`, solved
  by least squares (:func:`aline_solve`).

The paper's family is many independently trained models (the authors' recipe,
``kebaek/agreement-on-the-line``: every pair of a model zoo). Here the family is the backbone
(the classifier whose logits are given, model 0), then its **peers** when they are given
(``fit(..., peer_val_logits=...)``, ``estimate(..., peer_target_logits=...)``: the same
architecture trained on the same data with other seeds, :mod:`estimators.core._peers`; the
benchmark passes every other seed of a run), then :math:`K` cheap multinomial
logistic-regression heads trained on the backbone's features (each on a seeded random projection
of them, :class:`LinearHeads`), each on a seeded subsample of the training features
(``train_features`` / ``train_labels``; without them, on half of the validation rows, the other
half then measuring the ID accuracies and agreements, with a
:class:`~estimators.core.exceptions.FeatureFallbackWarning`). ``n_heads=0`` keeps the backbone
and its peers alone, the authors' recipe on the models at hand. The estimate is the backbone's.

References
----------
.. [1] Baek, C., Jiang, Y., Raghunathan, A. and Kolter, Z. "Agreement-on-the-Line: Predicting
   the Performance of Neural Networks under Distribution Shift", NeurIPS 2022.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.stats import norm

from ..core._features import FeatureArray, FeatureOnly
from ..core._peers import PeerPredictions
from ..core.base import Estimator
from ..core.exceptions import FeatureFallbackWarning
from ..core.params import Param, with_defaults
from ..core.registry import register

__all__ = ["ALine", "ALineD", "ALineS", "LinearHeads", "agreement_pairs", "aline_solve",
           "probit"]


def probit(p: NDArray[np.float64] | float, n: int) -> NDArray[np.float64]:
    r""":math:`\Phi^{-1}(p)` with :math:`p` clipped to :math:`[\frac{1}{2n}, 1 - \frac{1}{2n}]`
    (a rate measured on ``n`` rows), so that 0 and 1 stay finite.

    >>> float(probit(0.5, 100)), round(float(probit(1.0, 100)), 4)
    (0.0, 2.5758)
    """
    eps = 0.5 / max(n, 1)
    return np.asarray(norm.ppf(np.clip(np.asarray(p, dtype=np.float64), eps, 1.0 - eps)),
                      dtype=np.float64)


def agreement_pairs(predictions: NDArray[np.int64]) -> tuple[NDArray[np.float64],
                                                             list[tuple[int, int]]]:
    """Agreement rate of every pair of columns of ``predictions`` (rows x models), and the pairs.

    >>> agreement_pairs(np.array([[0, 0, 1], [1, 1, 1]]))
    (array([1. , 0.5, 0.5]), [(0, 1), (0, 2), (1, 2)])
    """
    pairs = list(combinations(range(predictions.shape[1]), 2))
    agr = np.array([np.mean(predictions[:, i] == predictions[:, j]) for i, j in pairs],
                   dtype=np.float64)
    return agr, pairs


def aline_solve(
    acc_id: NDArray[np.float64],
    agr_id: NDArray[np.float64],
    agr_ood: NDArray[np.float64],
    pairs: list[tuple[int, int]],
    *,
    n_id: int,
    n_ood: int,
) -> dict[str, Any]:
    r"""Fit the agreement line and return ALine-S and ALine-D for every model.

    Parameters
    ----------
    acc_id : ndarray of shape (n_models,)
        ID accuracies.
    agr_id, agr_ood : ndarray of shape (n_pairs,)
        ID and OOD agreement of each pair.
    pairs : list of (int, int)
        The models of each pair.
    n_id, n_ood : int
        Rows the ID and OOD rates were measured on (:func:`probit`'s clip).

    Returns
    -------
    dict
        ``slope`` :math:`\hat a`, ``bias`` :math:`\hat b`, ``r2`` of the agreement line,
        ``aline_s`` and ``aline_d`` (arrays of shape (n_models,), accuracies).

    Examples
    --------
    >>> acc = np.array([0.9, 0.8, 0.7])
    >>> out = aline_solve(acc, np.array([0.85, 0.8, 0.75]), np.array([0.85, 0.8, 0.75]),
    ...                   [(0, 1), (0, 2), (1, 2)], n_id=10**6, n_ood=10**6)
    >>> round(out["slope"], 6), round(out["bias"], 6), np.round(out["aline_s"], 6).tolist()
    (1.0, 0.0, [0.9, 0.8, 0.7])
    """
    x = probit(agr_id, n_id)
    y = probit(agr_ood, n_ood)
    if x.size >= 2 and np.ptp(x) > 1e-12:
        slope, bias = (float(v) for v in np.polyfit(x, y, 1))
        resid = y - (slope * x + bias)
        sst = float(np.sum((y - y.mean()) ** 2))
        r2 = 1.0 - float(np.sum(resid ** 2)) / sst if sst > 0 else 1.0
    else:  # every pair agrees equally in distribution: a shift of the probits alone
        slope, bias, r2 = 1.0, float(np.mean(y - x)), math.nan
    pa = probit(acc_id, n_id)
    aline_s = norm.cdf(slope * pa + bias)
    design = np.zeros((len(pairs), acc_id.size))
    rhs = np.empty(len(pairs))
    for row, (i, j) in enumerate(pairs):
        design[row, i] = design[row, j] = 0.5
        rhs[row] = y[row] + slope * (0.5 * (pa[i] + pa[j]) - x[row])
    solution = np.linalg.lstsq(design, rhs, rcond=None)[0]
    return {"slope": slope, "bias": bias, "r2": r2, "aline_s": np.asarray(aline_s),
            "aline_d": np.asarray(norm.cdf(solution))}


class LinearHeads:
    r"""``K`` multinomial logistic-regression heads on standardised, randomly projected features.

    Head :math:`k` sees :math:`u = R_k^\top \tilde x`, the standardised features
    :math:`\tilde x = (x - \mu)/\sigma` (statistics of all rows) times a seeded Gaussian
    projection :math:`R_k \in \mathbb{R}^{d \times p}` (entries :math:`N(0, 1/p)`; none when
    ``head_dim`` is None or :math:`\ge d`), and minimises
    :math:`\frac{1}{|B_k|}\sum_{i \in B_k} -\log \mathrm{softmax}(W_k^\top u_i + b_k)_{y_i}
    + \frac{\lambda}{2}\lVert W_k\rVert_F^2` (L-BFGS) over a seeded subsample :math:`B_k`.
    The projection makes the heads cheap (:math:`p \times c` weights) and diverse (each sees
    other directions); at prediction the projection is folded into the weights,
    :math:`R_k W_k`, so all heads are one matrix product.
    """

    def __init__(self, n_heads: int, subsample: float, l2: float, max_iter: int,
                 seed: int, head_dim: int | None = 64) -> None:
        self.n_heads, self.subsample, self.l2 = n_heads, subsample, l2
        self.max_iter, self.seed, self.head_dim = max_iter, seed, head_dim

    def fit(self, x: FeatureArray, y: NDArray[np.int64], n_classes: int) -> LinearHeads:
        xf = np.asarray(x, dtype=np.float32)
        self.mean_ = xf.mean(axis=0, dtype=np.float64).astype(np.float32)
        std = xf.std(axis=0, dtype=np.float64)
        self.scale_ = (1.0 / np.where(std > 1e-12, std, 1.0)).astype(np.float32)
        n, d = xf.shape
        p = d if self.head_dim is None or self.head_dim >= d else int(self.head_dim)
        rng = np.random.default_rng(self.seed)
        size = max(n_classes, min(n, int(round(self.subsample * n))))
        w_all = np.empty((self.n_heads, d, n_classes), dtype=np.float32)
        b_all = np.empty((self.n_heads, n_classes), dtype=np.float32)
        self.converged_ = 0
        with _one_blas_thread():
            self._fit_heads(xf, y, n_classes, p, size, rng, w_all, b_all)
        # all heads in one matrix product: (d, K * c) and (K * c,)
        self.w_ = np.ascontiguousarray(w_all.transpose(1, 0, 2).reshape(d, -1))
        self.b_ = b_all.reshape(-1)
        self.n_classes_ = n_classes
        return self

    def _fit_heads(self, xf: NDArray[np.float32], y: NDArray[np.int64], n_classes: int, p: int,
                   size: int, rng: np.random.Generator, w_all: NDArray[np.float32],
                   b_all: NDArray[np.float32]) -> None:
        n, d = xf.shape
        for k in range(self.n_heads):
            rows = np.sort(rng.choice(n, size, replace=False))
            xb = (xf[rows] - self.mean_) * self.scale_
            proj = None
            if p < d:
                proj = (rng.standard_normal((d, p)) / np.sqrt(p)).astype(np.float32)
                xb = xb @ proj
            theta = _fit_softmax_regression(xb, y[rows], n_classes, self.l2, self.max_iter)
            self.converged_ += int(theta[1])
            w = theta[0]
            w_all[k] = w[:p] if proj is None else proj @ w[:p]
            b_all[k] = w[p]

    def predict(self, x: FeatureArray, block: int = 16_384) -> NDArray[np.int64]:
        """Predicted class of every head, shape (n, K)."""
        n = int(x.shape[0])
        out = np.empty((n, self.n_heads), dtype=np.int64)
        for s in range(0, n, block):
            xs = (np.asarray(x[s:s + block], dtype=np.float32) - self.mean_) * self.scale_
            z = xs @ self.w_ + self.b_
            out[s:s + block] = z.reshape(-1, self.n_heads, self.n_classes_).argmax(axis=2)
        return out


def _one_blas_thread() -> Any:
    """One BLAS thread for the heads' small matrix products: their L-BFGS steps are far too
    small to share (on the 2-core machine with a busy core, 2 threads made a head 20x slower:
    2.8 s against 0.13 s for 5,000 rows x 64 dimensions)."""
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    return threadpool_limits(limits=1, user_api="blas")


def _fit_softmax_regression(
    x: NDArray[np.float32], y: NDArray[np.int64], n_classes: int, l2: float, max_iter: int
) -> tuple[NDArray[np.float32], bool]:
    """L2-penalised multinomial logistic regression by L-BFGS; weights of shape (p + 1, c)
    (the last row the biases) and whether L-BFGS reported convergence."""
    n, p = x.shape
    onehot = np.zeros((n, n_classes), dtype=np.float32)
    onehot[np.arange(n), y] = 1.0

    def loss(theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        w64 = theta.reshape(p + 1, n_classes)
        w = w64.astype(np.float32)
        z = x @ w[:p] + w[p]
        z -= z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        value = -float(np.mean(np.sum(onehot * logp, axis=1)))
        g = (np.exp(logp) - onehot) / np.float32(n)
        grad = np.empty((p + 1, n_classes), dtype=np.float64)
        grad[:p] = x.T @ g
        grad[p] = g.sum(axis=0)
        value += 0.5 * l2 * float(np.sum(w64[:p] ** 2))
        grad[:p] += l2 * w64[:p]
        return value, grad.reshape(-1)

    res = minimize(loss, np.zeros((p + 1) * n_classes), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter})
    return res.x.reshape(p + 1, n_classes).astype(np.float32), bool(res.success)


class ALine(FeatureOnly, Estimator):
    r"""Agreement-on-the-line (ALine-S / ALine-D) with ``n_heads`` linear heads.

    .. math:: \widehat{\mathrm{acc}}_{S} = \Phi\big(\hat a\,\Phi^{-1}(\mathrm{acc}_S) +
              \hat b\big), \qquad
              \Phi^{-1}(\mathrm{agr}_T) \approx \hat a\,\Phi^{-1}(\mathrm{agr}_S) + \hat b

    and ALine-D from the pairwise linear system (module docstring). The registered variants are
    :class:`ALineS` (``"aline-s"``) and :class:`ALineD` (``"aline-d"``).

    Parameters
    ----------
    variant : {"s", "d"}
        ALine-S or ALine-D.
    n_heads : int, default 10
        Linear heads :math:`K` (the family is the backbone, its peers when given, and the
        heads); 0 keeps the backbone and its peers alone (refused without peers).
    subsample : float in (0, 1], default 0.5
        Fraction of the training rows each head is fitted on (seeded per head).
    l2 : float, default 1e-3
        L2 penalty :math:`\lambda` of the heads' weights (standardised features).
    max_iter : int, default 100
        L-BFGS iterations per head.
    head_dim : int or None, default 64
        Each head sees a seeded random projection of the standardised features to this many
        dimensions (cheaper and more diverse heads); None: the features themselves.
    seed : int, default 0
        Seed of the subsamples (and of the validation split of the fallback).

    Notes
    -----
    ``diagnostics``: ``slope``, ``bias``, ``r2`` (agreement line), ``aline_s``, ``aline_d``,
    ``heads_fit_on`` (``"train"``, ``"val"`` or ``"none"``), ``head_id_accuracy`` (mean; None
    without heads), ``n_peers``, ``peer_id_accuracy`` (mean; None without peers), ``n_pairs``.
    ``per_sample`` is None.
    """

    name: ClassVar[str] = "aline"
    needs_features: ClassVar[bool] = True
    reads_peers: ClassVar[bool] = True
    has_per_sample: ClassVar[bool] = False

    PARAMS: ClassVar[tuple[Param, ...]] = (
        Param("variant", "choice", "s", "ALine-S (map the backbone's ID accuracy through the "
              "agreement line) or ALine-D (pairwise linear system).", choices=("s", "d")),
        Param("n_heads", "int", 10, "Logistic-regression heads trained on the features (0: "
              "none, the peer models alone; needs peers).", low=0),
        Param("subsample", "float", 0.5, "Fraction of the training rows each head sees.",
              low=0.0, high=1.0, low_open=True),
        Param("l2", "float", 1e-3, "L2 penalty of the heads' weights.", low=0.0),
        Param("max_iter", "int", 100, "L-BFGS iterations per head.", low=1),
        Param("head_dim", "int", 64, "Random projection of the features each head sees (None: "
              "the features themselves).", low=1, special=(None,)),
        Param("seed", "int", 0, "Seed of the heads' subsamples.", low=0),
    )

    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        features = self.fit_features_
        assert features is not None  # fit() refuses a call without them
        peers = self.fit_peers_
        if int(self.n_heads) == 0 and peers is None:
            raise ValueError(
                f"The 'n_heads' parameter of {type(self).__name__} may be 0 only with peer "
                "models (fit(..., peer_val_logits=...)): the family needs at least 2 models; "
                "got n_heads=0 and no peer.")
        c = int(val_logits.shape[1])
        id_rows = np.arange(val_labels.size)
        self.heads_: LinearHeads | None = None
        self.heads_fit_on_ = "none"
        if int(self.n_heads) > 0:
            if features.train is not None and features.train_labels is not None:
                self.heads_fit_on_ = "train"
                fx, fy = features.train, features.train_labels
            else:
                self.heads_fit_on_ = "val"
                missing = "train_labels" if features.train is not None else "train_features"
                warnings.warn(
                    f"{type(self).__name__} ({self.name!r}) got no {missing}: its heads are "
                    "fitted on half of the validation rows and the other half measures the "
                    "in-distribution agreement, so both rest on half as many rows; pass "
                    "train_features and train_labels for the method as published.",
                    FeatureFallbackWarning, stacklevel=4,
                )
                perm = np.random.default_rng(self.seed).permutation(val_labels.size)
                half = val_labels.size // 2
                head_rows, id_rows = np.sort(perm[:half]), np.sort(perm[half:])
                fx, fy = features.val[head_rows], val_labels[head_rows]
            self.heads_ = LinearHeads(
                self.n_heads, float(self.subsample), float(self.l2), int(self.max_iter),
                int(self.seed), None if self.head_dim is None else int(self.head_dim),
            ).fit(fx, fy, c)
        preds = self._family(val_logits[id_rows], features.val[id_rows],
                             None if peers is None else peers.predictions[:, id_rows])
        self.acc_id_ = (preds == val_labels[id_rows, None]).mean(axis=0)
        self.agr_id_, self.pairs_ = agreement_pairs(preds)
        self.n_id_ = int(id_rows.size)

    def _family(self, logits: NDArray[np.float64], features: FeatureArray,
                peers: NDArray[np.int64] | None) -> NDArray[np.int64]:
        """Predictions of the family on some rows, one column per model: the backbone, then
        the peers (when given), then the heads."""
        columns = [logits.argmax(axis=1)[:, None]]
        if peers is not None:
            columns.append(peers.T)
        if self.heads_ is not None:
            columns.append(self.heads_.predict(features))
        return np.column_stack(columns).astype(np.int64, copy=False)

    def _estimate_with_features(
        self, target_logits: NDArray[np.float64], target_features: FeatureArray
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        return self._estimate_family(self._family(target_logits, target_features, None))

    def _estimate_with_peers(
        self, target_logits: NDArray[np.float64], target_features: FeatureArray | None,
        target_peers: PeerPredictions | None,
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        assert target_features is not None and target_peers is not None
        return self._estimate_family(
            self._family(target_logits, target_features, target_peers.predictions))

    def _estimate_family(
        self, preds: NDArray[np.int64]
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        agr_ood, _ = agreement_pairs(preds)
        out = aline_solve(self.acc_id_, self.agr_id_, agr_ood, self.pairs_, n_id=self.n_id_,
                          n_ood=int(preds.shape[0]))
        s, d = float(out["aline_s"][0]), float(out["aline_d"][0])
        n_peers = 0 if self.fit_peers_ is None else self.fit_peers_.n_peers
        heads = self.acc_id_[1 + n_peers:]
        peer_acc = self.acc_id_[1:1 + n_peers]
        return (s if self.variant == "s" else d), None, {
            "slope": out["slope"], "bias": out["bias"], "r2": out["r2"],
            "aline_s": s, "aline_d": d, "heads_fit_on": self.heads_fit_on_,
            "head_id_accuracy": float(np.mean(heads)) if heads.size else None,
            "n_peers": n_peers,
            "peer_id_accuracy": float(np.mean(peer_acc)) if peer_acc.size else None,
            "n_pairs": len(self.pairs_),
        }


@register("aline-s")
class ALineS(ALine):
    """ALine-S (registry key ``"aline-s"``); see :class:`ALine`.

    Parameters
    ----------
    variant : {"s", "d"}, default "s"
    n_heads, subsample, l2, max_iter, head_dim, seed
        As :class:`ALine`.
    """

    PARAMS = ALine.PARAMS


@register("aline-d")
class ALineD(ALine):
    """ALine-D (registry key ``"aline-d"``); see :class:`ALine`.

    Parameters
    ----------
    variant : {"s", "d"}, default "d"
    n_heads, subsample, l2, max_iter, head_dim, seed
        As :class:`ALine`.
    """

    PARAMS = with_defaults(ALine.PARAMS, variant="d")
