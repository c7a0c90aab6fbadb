r"""Nuclear norm of the softmax prediction matrix (Deng et al., ICML 2023), a label-free score.

With :math:`P = \operatorname{softmax}(Z) \in [0, 1]^{n \times K}` the target's prediction
matrix, the score is

.. math:: S = \frac{\lVert P \rVert_*}{\sqrt{\min(n, K)\, n}}, \qquad
          \lVert P \rVert_* = \sum_j \sigma_j(P) = \sum_j \sqrt{\lambda_j(P^\top P)},

normalised by the upper bound :math:`\lVert P \rVert_* \le \sqrt{\operatorname{rank} P}\,
\lVert P \rVert_F \le \sqrt{\min(n, K)}\sqrt{n}` (each row has :math:`\lVert p_i \rVert_2 \le
1`). It is large when predictions are both confident (rows close to one-hot) and dispersed
(spread over the classes), which is why it tracks accuracy under shift. Closed forms: with
one-hot rows whose predicted classes have counts :math:`n_k`, the columns of :math:`P` are
orthogonal with norms :math:`\sqrt{n_k}`, so :math:`\lVert P\rVert_* = \sum_k \sqrt{n_k}` and,
balanced over :math:`D` classes, :math:`S = \sqrt{D/\min(n, K)}`; uniform rows give the rank-one
:math:`P = \frac1K \mathbf{1}\mathbf{1}^\top` with :math:`S = 1/\sqrt{K \min(n, K)}`.

The singular values come from the eigenvalues of the :math:`K \times K` Gram matrix
:math:`P^\top P` (or the :math:`n \times n` one when :math:`n < K`) in float64, not from an SVD
of the :math:`n \times K` matrix, at a fraction of the cost. Eigenvalues below
:math:`10\,d\,\epsilon\,\lambda_{\max}` (:math:`d` the Gram matrix's size) are rounding noise
and count as zero singular values, so rank-deficient closed forms come out exact; the score
agrees with ``np.linalg.svd`` to about :math:`10^{-7}` relative.

References
----------
.. [1] Deng, W., Suh, Y., Gould, S. and Zheng, L. "Confidence and Dispersity Speak:
   Characterising Prediction Matrix for Unsupervised Accuracy Estimation", ICML 2023.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..core._validation import check_logits
from ..core.registry import register
from ..maths.score_map import SCORE_MAP, ScoreEstimator

__all__ = ["NuclearNorm", "nuclear_norm_score"]


def _softmax_inplace(z: NDArray[np.float64]) -> NDArray[np.float64]:
    p = z - z.max(axis=1, keepdims=True)
    np.exp(p, out=p)
    p /= p.sum(axis=1, keepdims=True)
    return cast("NDArray[np.float64]", p)


def _nuclear_norm(p: NDArray[np.float64]) -> float:
    """Sum of singular values of ``p`` from the eigenvalues of its smaller Gram matrix."""
    gram = p.T @ p if p.shape[0] >= p.shape[1] else p @ p.T
    eig = np.linalg.eigvalsh(gram)
    # eigenvalues within the Gram matrix's rounding (about dim * eps * lambda_max) are zero
    # singular values: left in, each would add ~sqrt(dim * eps) * sigma_max of noise
    tol = 10.0 * gram.shape[0] * np.finfo(np.float64).eps * max(float(eig[-1]), 0.0)
    return float(np.sqrt(eig[eig > tol]).sum())


def nuclear_norm_score(logits: ArrayLike) -> float:
    r"""Normalised nuclear norm :math:`\lVert \operatorname{softmax}(Z)\rVert_* /
    \sqrt{\min(n, K)\,n}` of a set of logits, in :math:`(0, 1]`.

    Parameters
    ----------
    logits : array-like of shape (n, K)
        Raw logits (binary ``(n,)`` / ``(n, 1)`` become ``[0, s]``).

    Examples
    --------
    >>> round(nuclear_norm_score([[50.0, 0.0], [0.0, 50.0]]), 6)   # one-hot, both classes
    1.0
    >>> round(nuclear_norm_score([[0.0, 0.0], [0.0, 0.0]]), 6)     # uniform: 1/sqrt(K min(n,K))
    0.5
    """
    z = check_logits(logits, "logits")
    n, k = z.shape
    return _nuclear_norm(_softmax_inplace(z)) / math.sqrt(min(n, k) * n)


@register("nuclear-norm")
class NuclearNorm(ScoreEstimator):
    r"""Nuclear-norm score (Deng et al., ICML 2023); an accuracy only through ``score_map``.

    ``diagnostics``: ``score`` (:math:`S`) and ``nuclear_norm`` (:math:`\lVert P\rVert_*`).

    Parameters
    ----------
    score_map : ScoreMap or (slope, intercept) or None, default None
        Map from the score to accuracy; without it ``accuracy`` is NaN.

    Examples
    --------
    >>> est = NuclearNorm().fit([[2.0, 0.0], [0.0, 2.0]], [0, 0])
    >>> res = est.estimate([[50.0, 0.0], [0.0, 50.0]])
    >>> round(res.diagnostics["score"], 6), res.accuracy
    (1.0, nan)
    """

    PARAMS = (SCORE_MAP,)

    def _score(self, logits: NDArray[np.float64]) -> tuple[float, dict[str, Any]]:
        n, k = logits.shape
        nuc = _nuclear_norm(_softmax_inplace(logits))
        return nuc / math.sqrt(min(n, k) * n), {"nuclear_norm": nuc}
