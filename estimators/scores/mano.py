r"""MaNo: the scaled matrix p-norm of normalised logits, a label-free score of accuracy.

Given the target logits :math:`Z \in \mathbb{R}^{n \times K}` (rows :math:`q_i`), MaNo

1. **chooses a normalisation** by the criterion
   :math:`\Phi = \frac1n \sum_i \mathrm{CE}(q_i, u) = \frac1n \sum_i \big(\log\sum_k e^{q_{ik}}
   - \frac1K \sum_k q_{ik}\big)`, the cross-entropy between the softmax and the uniform
   distribution :math:`u`: softmax when :math:`\Phi > \delta` (``delta``, default 5), else the
   second-order Taylor form :math:`\sigma(q)_k = v_k / \sum_j v_j` with
   :math:`v = 1 + q + q^2/2` (entrywise; :math:`v_k = ((q_k + 1)^2 + 1)/2 > 0`), which is less
   over-confident on poorly calibrated models;
2. fills the prediction matrix :math:`P` with the rows :math:`\sigma(q_i)`;
3. returns the scaled entrywise p-norm (``norm_order`` :math:`p`, default 4)

   .. math:: S = \frac{\lVert P \rVert_p}{(nK)^{1/p}}
             = \Big(\frac{1}{nK}\sum_{i,k} |P_{ik}|^p\Big)^{1/p}.

:math:`S` grows with the confidence of the predictions; it is a score, not an accuracy: the
paper reports its correlation with accuracy, and a :class:`~estimators.maths.score_map.ScoreMap` fitted
on a labelled meta-set turns it into one.

**The official code differs** (``Renchunzi-Xie/MaNo``, ``algs/mano.py``); ``form="code"``
reproduces it:

* the :math:`\Phi > \delta` branch is :math:`P = \exp(Z)`, *without* row normalisation (the
  norm is computed in log space here, so it does not overflow before the final ``exp``);
* the Taylor branch subtracts each row's minimum of :math:`v` and L1-normalises:
  :math:`P_{ik} = (v_{ik} - \min_j v_{ij}) / \max(\sum_j (v_{ij} - \min_j v_{ij}), 10^{-12})`
  (``torch.nn.functional.normalize(p=1)``); a row with equal logits becomes 0;
* :math:`\Phi` is taken from the first five batches of the evaluated set (mean of the
  per-batch mean cross-entropies; the code's ``torch.Tensor(loss)`` keeps only the last of
  them, an evident slip that we do not reproduce);
* the score is the mean over consecutive batches of ``batch_size`` rows of the per-batch
  :math:`S`, so it depends on the row order and on ``batch_size``.

Only the softmax branch of the paper form is invariant to adding a constant to a row of logits:
the Taylor branch of both forms reads the logits' level (:math:`v = 1 + q + q^2/2` is not
shift-equivariant; the code subtracts the row minimum of :math:`v`, not of :math:`q`), and so
does the code form's ``exp`` branch. The common estimator checks exempt MaNo from the
per-row-constant and ``[b, b + s]`` binary checks for that reason.

References
----------
.. [1] Xie, R., Odonnat, A., Feofanov, V., Deng, W., Zhang, J. and An, B. "MaNo: Exploiting
   Matrix Norm for Unsupervised Accuracy Estimation Under Distribution Shifts", NeurIPS 2024.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..core._validation import check_in_choices, check_logits, check_number
from ..core.params import Param
from ..core.registry import register
from ..maths.score_map import SCORE_MAP, ScoreEstimator

__all__ = ["MaNo", "mano_criterion", "mano_score"]

MaNoForm = Literal["paper", "code"]
#: Batches the official code reads to compute the criterion (``form="code"``).
CODE_CRITERION_BATCHES = 5


def _row_lse(z: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                               NDArray[np.float64]]:
    """Row max ``m``, ``e = exp(z - m)`` and ``log sum_k exp(z_k)`` per row."""
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    lse = m[:, 0] + np.log(e.sum(axis=1))
    return m, e, lse


def mano_criterion(logits: ArrayLike) -> float:
    r"""The criterion :math:`\Phi`: mean cross-entropy between softmax rows and uniform.

    .. math:: \Phi = \frac1n \sum_i \Big(\log\sum_k e^{q_{ik}} - \frac1K\sum_k q_{ik}\Big)
              \in [0, \infty)

    0 for uniform predictions; grows with the confidence (:math:`\to \infty` one-hot).

    Examples
    --------
    >>> mano_criterion([[0.0, 0.0]])
    0.6931471805599453
    """
    z = check_logits(logits, "logits")
    _, _, lse = _row_lse(z)
    return float(np.mean(lse - z.mean(axis=1)))


def _power_sum(x: NDArray[np.float64], p: float) -> NDArray[np.float64]:
    """Row sums of ``|x|**p`` (x >= 0), with the p = 4 / p = 2 cases as products."""
    if p == 4.0:
        x2 = x * x
        return cast("NDArray[np.float64]", np.einsum("ij,ij->i", x2, x2))
    if p == 2.0:
        return cast("NDArray[np.float64]", np.einsum("ij,ij->i", x, x))
    return cast("NDArray[np.float64]", (np.abs(x) ** p).sum(axis=1))


def _paper_score(z: NDArray[np.float64], p: float, delta: float) -> tuple[float, float, str]:
    m, e, lse = _row_lse(z)
    phi = float(np.mean(lse - z.mean(axis=1)))
    if phi > delta:
        e /= e.sum(axis=1, keepdims=True)
        prob, branch = e, "softmax"
    else:
        del e
        v = z * z
        v *= 0.5
        v += z
        v += 1.0
        v /= v.sum(axis=1, keepdims=True)
        prob, branch = v, "taylor"
    total = float(_power_sum(prob, p).sum())
    score = (total / (z.shape[0] * z.shape[1])) ** (1.0 / p)
    return score, phi, branch


def _code_score(z: NDArray[np.float64], p: float, delta: float,
                batch_size: int) -> tuple[float, float, str]:
    n, k = z.shape
    starts = np.arange(0, n, batch_size)
    sizes = np.diff(np.append(starts, n)).astype(np.float64)
    # criterion: mean over the first five batches of the per-batch mean cross-entropy
    head = starts[:CODE_CRITERION_BATCHES]
    n_head = min(n, CODE_CRITERION_BATCHES * batch_size)
    _, _, lse = _row_lse(z[:n_head])
    ce = lse - z[:n_head].mean(axis=1)
    phi = float(np.mean(np.add.reduceat(ce, head) / sizes[: head.size]))
    if phi > delta:
        # ||exp(Z_b)||_p^p = sum exp(p z), in log space per batch (no overflow before the end)
        pz = p * z
        row_max = pz.max(axis=1)
        batch_max = np.maximum.reduceat(row_max, starts)
        shift = np.repeat(batch_max, sizes.astype(np.int64))
        sums = np.add.reduceat(np.exp(pz - shift[:, None]).sum(axis=1), starts)
        log_norm = (batch_max + np.log(sums) - np.log(sizes * k)) / p
        with np.errstate(over="ignore"):
            scores = np.exp(log_norm)
        branch = "exp"
    else:
        v = z * z
        v *= 0.5
        v += z
        v += 1.0
        v -= v.min(axis=1, keepdims=True)
        v /= np.maximum(v.sum(axis=1, keepdims=True), 1e-12)
        sums = np.add.reduceat(_power_sum(v, p), starts)
        scores = (sums / (sizes * k)) ** (1.0 / p)
        branch = "taylor"
    return float(np.mean(scores)), phi, branch


def mano_score(
    logits: ArrayLike,
    *,
    norm_order: float = 4.0,
    delta: float = 5.0,
    form: MaNoForm = "paper",
    batch_size: int = 128,
) -> float:
    r"""MaNo score of a set of logits (see the module docstring for both forms).

    Parameters
    ----------
    logits : array-like of shape (n, K)
        Raw logits (binary ``(n,)`` / ``(n, 1)`` become ``[0, s]``).
    norm_order : float >= 1, default 4
        :math:`p`.
    delta : float, default 5.0
        Threshold :math:`\delta` on :math:`\Phi` (softmax, or ``exp`` in the code form, above it).
    form : {"paper", "code"}, default "paper"
    batch_size : int, default 128
        Rows per batch in the code form (ignored by the paper form).

    Returns
    -------
    float
        :math:`S`, in :math:`[K^{-1}, K^{-1/p}]` for the paper form (uniform rows give
        :math:`1/K`, one-hot rows :math:`K^{-1/p}`).

    Examples
    --------
    >>> round(mano_score([[0.0, 0.0, 0.0]]), 6)
    0.333333
    """
    _check_mano_params(norm_order, delta, form, batch_size, "mano_score")
    z = check_logits(logits, "logits")
    if form == "paper":
        return _paper_score(z, float(norm_order), float(delta))[0]
    return _code_score(z, float(norm_order), float(delta), int(batch_size))[0]


def _check_mano_params(norm_order: Any, delta: Any, form: Any, batch_size: Any,
                       owner: str) -> None:
    check_number(norm_order, "norm_order", owner, low=1.0)
    check_number(delta, "delta", owner)
    check_in_choices(form, "form", owner, ("paper", "code"))
    check_number(batch_size, "batch_size", owner, low=1, integer=True)


@register("mano")
class MaNo(ScoreEstimator):
    r"""MaNo score (Xie et al., NeurIPS 2024); an accuracy only through ``score_map``.

    ``diagnostics``: ``score`` (:math:`S`), ``criterion`` (:math:`\Phi`) and ``normalisation``
    (``"softmax"`` / ``"taylor"``, or ``"exp"`` / ``"taylor"`` in the code form).

    Parameters
    ----------
    norm_order : float >= 1, default 4
        :math:`p` of the entrywise matrix norm.
    delta : float, default 5.0
        Threshold on the criterion :math:`\Phi`.
    form : {"paper", "code"}, default "paper"
        The paper's definition, or the official code's (module docstring).
    batch_size : int, default 128
        Rows per batch, code form only.
    score_map : ScoreMap or (slope, intercept) or None, default None
        Map from the score to accuracy; without it ``accuracy`` is NaN.

    Examples
    --------
    >>> est = MaNo(score_map=(1.0, 0.0)).fit([[2.0, 0.0], [0.0, 2.0]], [0, 0])
    >>> res = est.estimate([[0.0, 0.0]])
    >>> res.diagnostics["score"], res.accuracy
    (0.5, 0.5)
    """

    PARAMS = (
        Param("norm_order", "float", 4.0, "p of the entrywise matrix norm.", low=1.0),
        Param("delta", "float", 5.0, "Threshold on the criterion Phi that picks the "
              "normalisation."),
        Param("form", "choice", "paper", "The paper's definition or the official code's.",
              choices=("paper", "code")),
        Param("batch_size", "int", 128, "Rows per batch.", low=1, acts='form="code"',
              active=lambda v, n: v["form"] == "code",
              instead='form="paper" normalises the whole target at once'),
        SCORE_MAP,
    )

    def _score(self, logits: NDArray[np.float64]) -> tuple[float, dict[str, Any]]:
        if self.form == "paper":
            score, phi, branch = _paper_score(logits, float(self.norm_order), float(self.delta))
        else:
            score, phi, branch = _code_score(logits, float(self.norm_order), float(self.delta),
                                             int(self.batch_size))
        return score, {"criterion": phi, "normalisation": branch}
