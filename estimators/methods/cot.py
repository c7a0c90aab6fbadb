"""COT: Confidence Optimal Transport (Lu et al., NeurIPS 2023), solved exactly as an n x c problem.

COT predicts the target error as half the 1-Wasserstein (earth mover's) distance, under the L1
ground cost, between the empirical measure of target softmax vectors and the source label marginal
placed on the one-hot vertices of the simplex:

.. math:: \\widehat{\\mathrm{err}}_{COT} = \\tfrac12 W_1\\Big(\\tfrac1m \\sum_{i} \\delta_{p_i},\\;
          \\sum_k \\pi_k \\delta_{e_k}\\Big), \\qquad
          \\widehat{\\mathrm{acc}}_{COT} = 1 - \\widehat{\\mathrm{err}}_{COT}

**Exact n x c reduction.** On the simplex :math:`\\tfrac12\\lVert p - e_k \\rVert_1 = 1 - p_k`, and
every one-hot atom of class :math:`k` costs the same, so the official m x m problem (m sampled
one-hot labels against m target rows) has the same optimal value as the transport problem with
m rows and c columns

.. math:: \\widehat{\\mathrm{err}}_{COT} = \\min_{\\Gamma \\ge 0,\\; \\Gamma 1 = \\frac1m 1,\\;
          \\Gamma^\\top 1 = \\pi} \\sum_{i,k} \\Gamma_{ik} (1 - P_{ik}),

i.e. each target sample is assigned to classes so that class :math:`k` receives mass
:math:`\\pi_k` and the total confidence in the assigned classes is maximal. It is solved exactly
with POT's network simplex (:func:`ot.emd`) in O(m c) memory: m = 50,000, c = 100 takes seconds,
where the official construction needs an m x m matrix and batches above 10,000 samples.
Consequences used by the tests: :math:`\\widehat{\\mathrm{acc}}_{COT} \\le \\mathrm{AC}`
(dropping the column constraint gives AC), with equality when the predicted-class histogram equals
:math:`\\pi`; the value is invariant to the order of target rows; when every :math:`m \\pi_k` is an
integer the plan is integral (entries of :math:`m\\Gamma` in {0, 1}).

**Official sampled construction (``mode="sampled"``), for parity.** ``luyuzhe111/COT``
(``run_estimation.py``, ``metric == 'COT'``) draws m labels from :math:`\\pi`
(``sample_label_dist``: :math:`\\lfloor \\pi_k m \\rfloor` copies of each class plus the remainder
drawn at random with weights :math:`\\pi`), builds the m x m L1 cost between their one-hots and the
target softmax rows, halves it and calls ``ot.emd2`` with uniform weights. Above 10,000 target
samples it runs :math:`\\lceil m / 10000 \\rceil` batches, each on 10,000 target rows resampled
*with replacement* and 10,000 freshly drawn labels, and averages the batch values (a Monte-Carlo
estimate, O(10^8) memory per batch). Here the randomness comes from a seeded
:class:`numpy.random.Generator` instead of Python's global ``random`` module.

**Label marginal.** The official code uses the "expected label distribution": uniform for
CIFAR/ImageNet/BREEDS, the empirical validation label frequencies for WILDS. The default here is
the validation label frequencies (``label_marginal="val"``); ``"uniform"`` and an explicit vector
are available. COT assumes the target label marginal equals :math:`\\pi` and is biased downward
under label shift.

References
----------
.. [1] Lu, Y., Qin, Y., Zhai, R., Shen, A., Chen, K., Wang, Z., Kolouri, S., Stepputtis, S.,
   Campbell, J. and Sycara, K. "Characterizing Out-of-Distribution Error via Optimal
   Transport", NeurIPS 2023 (first as "Predicting Out-of-Distribution Error with Confidence
   Optimal Transport", ICLR 2023 workshop).
.. [2] Flamary, R. et al. "POT: Python Optimal Transport", JMLR 22(78), 2021.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import ot
from numpy.typing import ArrayLike, NDArray

from ..maths._softmax import TEMPERATURE_SCALING, SoftmaxEstimator
from ..core._validation import check_in_choices, check_number
from ..core.exceptions import ConvergenceWarning
from ..core.params import Param
from ..core.registry import register
from ..maths.confidence import check_probs

__all__ = [
    "COT",
    "CotMode",
    "CotTransport",
    "cot_accuracy",
    "cot_cost_matrix",
    "cot_transport",
    "sample_expected_labels",
]

CotMode = Literal["exact", "sampled"]
_MODES = ("exact", "sampled")
#: Network-simplex iteration cap (the official code passes ``numItermax=1e8`` too).
NUM_ITER_MAX = 100_000_000
#: Batch size of the official sampled construction.
OFFICIAL_BATCH_SIZE = 10_000
_MARGINAL_ATOL = 1e-6


@dataclass(frozen=True)
class CotTransport:
    """Exact COT solution on ``m`` target rows and ``c`` classes.

    Attributes
    ----------
    accuracy : float
        :math:`1 - \\text{cost}`, the COT accuracy estimate.
    cost : float
        Optimal transport cost :math:`\\sum_{ik} \\Gamma_{ik} (1 - P_{ik})` (the COT error).
    plan : ndarray of shape (m, c)
        Optimal coupling :math:`\\Gamma` (rows sum to ``1/m``, columns to ``pi``).
    """

    accuracy: float
    cost: float
    plan: NDArray[np.float64] = field(repr=False)


def cot_cost_matrix(probs: ArrayLike) -> NDArray[np.float64]:
    """Half the L1 distance from each probability vector to each one-hot vertex.

    .. math:: C_{ik} = \\tfrac12 \\lVert p_i - e_k \\rVert_1 = 1 - P_{ik}

    (on the simplex: :math:`(1 - p_k) + \\sum_{j \\ne k} p_j = 2(1 - p_k)`).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Row-stochastic probabilities.

    Returns
    -------
    ndarray of shape (n_samples, n_classes)

    Examples
    --------
    >>> cot_cost_matrix([[0.7, 0.2, 0.1]]).round(2).tolist()
    [[0.3, 0.8, 0.9]]
    """
    return 1.0 - check_probs(probs, "probs")


def _check_marginal(
    label_marginal: Any, n_classes: int | None, name: str = "label_marginal"
) -> NDArray[np.float64]:
    """Validate a class-probability vector (length ``n_classes`` if given); return it normalised."""
    try:
        pi = np.asarray(label_marginal, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a 1-D array of class probabilities; could not convert it: {exc}"
        ) from exc
    expected = "n_classes" if n_classes is None else str(n_classes)
    if pi.ndim != 1 or pi.shape[0] < 1 or (n_classes is not None and pi.shape[0] != n_classes):
        raise ValueError(
            f"{name} must have shape ({expected},), one probability per class; "
            f"got shape {pi.shape}."
        )
    if not np.all(np.isfinite(pi)) or pi.min() < 0.0:
        raise ValueError(f"{name} must be finite and non-negative; got {pi.tolist()[:10]}.")
    total = float(pi.sum())
    if abs(total - 1.0) > _MARGINAL_ATOL:
        raise ValueError(f"{name} must sum to 1 (within {_MARGINAL_ATOL:g}); got sum {total!r}.")
    # Renormalise only a visible deviation: dividing 1/c by a sum of 1 + 1e-16 would move
    # pi_k * n off an integer.
    return pi / total if abs(total - 1.0) > 1e-12 else pi


def _solve_exact(probs: NDArray[np.float64], pi: NDArray[np.float64]) -> CotTransport:
    m, c = probs.shape
    keep = np.flatnonzero(pi > 0.0)
    # C_ik = ½‖p_i − e_k‖₁ = 1 − P_ik, on the columns with positive mass only.
    cost_matrix = 1.0 - probs[:, keep]
    a = np.full(m, 1.0 / m)
    b = pi[keep] * (a.sum() / pi[keep].sum())
    sub_plan, log = ot.emd(a, b, cost_matrix, numItermax=NUM_ITER_MAX, log=True)
    if log.get("warning"):
        warnings.warn(
            f"COT: the network simplex stopped before optimality ({log['warning']}); the "
            "estimate may be inexact.",
            ConvergenceWarning,
            stacklevel=3,
        )
    cost = float(np.einsum("ik,ik->", sub_plan, cost_matrix))
    cost = min(max(cost, 0.0), 1.0)
    if keep.size == c:
        plan = sub_plan
    else:
        plan = np.zeros((m, c))
        plan[:, keep] = sub_plan
    return CotTransport(accuracy=1.0 - cost, cost=cost, plan=plan)


def sample_expected_labels(
    label_marginal: ArrayLike, n_samples: int, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Draw labels the way the official COT code does (``sample_label_dist``).

    :math:`\\lfloor \\pi_k n \\rfloor` copies of each class ``k`` (in class order), then the
    remaining :math:`n - \\sum_k \\lfloor \\pi_k n \\rfloor` labels drawn i.i.d. with weights
    :math:`\\pi`.

    Parameters
    ----------
    label_marginal : array-like of shape (n_classes,)
        Class probabilities summing to 1.
    n_samples : int
        Number of labels to draw (``>= 1``).
    rng : numpy.random.Generator
        Source of randomness for the remainder.

    Returns
    -------
    ndarray of shape (n_samples,), int64

    Examples
    --------
    >>> sample_expected_labels([0.5, 0.5], 4, np.random.default_rng(0)).tolist()
    [0, 0, 1, 1]
    """
    pi = _check_marginal(label_marginal, None)
    check_number(n_samples, "n_samples", "sample_expected_labels", low=1, integer=True)
    raw = pi * n_samples
    counts = np.floor(raw)
    # pi_k * n that is an integer up to rounding (e.g. 0.00999...9 * 500) counts as that integer.
    counts[raw - counts > 1.0 - 1e-9] += 1.0
    counts = counts.astype(np.int64)
    labels = np.repeat(np.arange(pi.size), counts)
    remainder = int(n_samples - counts.sum())
    if remainder > 0:
        labels = np.concatenate([labels, rng.choice(pi.size, size=remainder, p=pi)])
    return labels.astype(np.int64)


def _sampled_cost(
    probs: NDArray[np.float64], pi: NDArray[np.float64], batch_size: int, seed: int | None
) -> tuple[float, int]:
    """Official m x m construction; returns ``(mean transport cost, number of batches)``."""
    rng = np.random.default_rng(seed)
    m = probs.shape[0]
    size = min(batch_size, m)
    n_batches = math.ceil(m / size)
    total = 0.0
    for _ in range(n_batches):
        rows = probs if n_batches == 1 else probs[rng.integers(0, m, size=size)]
        labels = sample_expected_labels(pi, size, rng)
        # M[j, l] = ½‖e_{y_j} − p_l‖₁ = 1 − p_{l, y_j}: one-hot atoms × target rows.
        cost_matrix = 1.0 - rows[:, labels].T
        total += float(ot.emd2([], [], cost_matrix, numItermax=NUM_ITER_MAX))
    return min(max(total / n_batches, 0.0), 1.0), n_batches


def cot_transport(target_probs: ArrayLike, label_marginal: ArrayLike) -> CotTransport:
    """Solve the exact n x c COT transport problem and return value and plan.

    .. math:: \\min_{\\Gamma \\ge 0,\\; \\Gamma 1 = \\frac1m 1,\\; \\Gamma^\\top 1 = \\pi}
              \\sum_{i,k} \\Gamma_{ik} (1 - P_{ik})

    Parameters
    ----------
    target_probs : array-like of shape (n_target, n_classes)
        Target softmax probabilities (temperature-scaled for the paper's protocol).
    label_marginal : array-like of shape (n_classes,)
        Source label marginal :math:`\\pi` (non-negative, sums to 1).

    Returns
    -------
    CotTransport
        ``accuracy = 1 - cost`` and the optimal plan of shape ``(n_target, n_classes)``.

    Examples
    --------
    >>> res = cot_transport([[0.9, 0.1], [0.2, 0.8]], [0.5, 0.5])
    >>> round(res.accuracy, 6), (res.plan * 2).round(6).tolist()
    (0.85, [[1.0, 0.0], [0.0, 1.0]])
    """
    probs = check_probs(target_probs, "target_probs")
    pi = _check_marginal(label_marginal, probs.shape[1])
    return _solve_exact(probs, pi)


def cot_accuracy(
    target_probs: ArrayLike,
    label_marginal: ArrayLike,
    *,
    mode: CotMode = "exact",
    batch_size: int = OFFICIAL_BATCH_SIZE,
    seed: int | None = 0,
) -> float:
    """COT accuracy estimate, :math:`1 - \\tfrac12 W_1(\\mu_T, \\sum_k \\pi_k \\delta_{e_k})`.

    Parameters
    ----------
    target_probs : array-like of shape (n_target, n_classes)
        Target softmax probabilities.
    label_marginal : array-like of shape (n_classes,)
        Source label marginal :math:`\\pi`.
    mode : {"exact", "sampled"}, default="exact"
        ``"exact"``: the n x c transport problem (deterministic). ``"sampled"``: the official
        m x m construction with sampled one-hot labels and, above ``batch_size`` target rows,
        batches resampled with replacement (O(batch_size^2) memory).
    batch_size : int, default=10000
        Batch size of the sampled mode (the official value is 10,000).
    seed : int or None, default=0
        Seed of the sampled mode's label draws and resampling.

    Returns
    -------
    float
        Estimated target accuracy in ``[0, 1]``.

    Examples
    --------
    >>> round(cot_accuracy([[0.9, 0.1], [0.2, 0.8]], [0.5, 0.5]), 6)
    0.85
    >>> round(cot_accuracy([[0.9, 0.1], [0.2, 0.8]], [0.5, 0.5], mode="sampled"), 6)
    0.85
    """
    check_in_choices(mode, "mode", "cot_accuracy", _MODES)
    check_number(batch_size, "batch_size", "cot_accuracy", low=1, integer=True)
    probs = check_probs(target_probs, "target_probs")
    pi = _check_marginal(label_marginal, probs.shape[1])
    if mode == "exact":
        return _solve_exact(probs, pi).accuracy
    cost, _ = _sampled_cost(probs, pi, int(batch_size), seed)
    return 1.0 - cost


def _check_label_marginal(value: Any, owner: str) -> None:
    """A string must be ``"val"`` or ``"uniform"``; a vector is checked at ``fit``."""
    if isinstance(value, str):
        check_in_choices(value, "label_marginal", owner, ("val", "uniform"))


@register("cot")
class COT(SoftmaxEstimator):
    """Confidence Optimal Transport: 1 minus half the EMD from target softmax to label one-hots.

    .. math:: \\widehat{\\mathrm{acc}}_{COT} = 1 - \\min_{\\Gamma \\in U(\\frac1m 1,\\, \\pi)}
              \\sum_{i,k} \\Gamma_{ik} (1 - P_{ik})

    Parameters
    ----------
    label_marginal : {"val", "uniform"} or array-like of shape (n_classes,), default="val"
        Source label marginal :math:`\\pi`: the validation label frequencies, the uniform
        distribution, or an explicit probability vector (checked at ``fit``).
    mode : {"exact", "sampled"}, default="exact"
        Exact n x c transport, or the official sampled one-hot m x m EMD (for parity; O(m^2)).
    batch_size : int, default=10000
        Batch size of the sampled mode.
    seed : int or None, default=0
        Seed of the sampled mode (the exact mode is deterministic and ignores it).
    temperature_scaling : bool, default=True
        Fit a temperature on the validation set and apply it to the target logits (COT assumes a
        calibrated model).

    Attributes
    ----------
    label_marginal_ : ndarray of shape (n_classes,)
        The marginal :math:`\\pi` used.
    temperature_ : float
        Fitted temperature (1.0 if ``temperature_scaling=False``).

    Notes
    -----
    ``diagnostics["transport_cost"]`` is the optimal cost (the COT error estimate). In exact mode
    ``diagnostics["n_split_samples"]`` counts target rows the plan splits over several classes
    (0 when every :math:`m \\pi_k` is an integer); in sampled mode ``diagnostics["n_batches"]``
    is the number of batches. ``per_sample`` is None.

    References
    ----------
    .. [1] Lu, Y. et al. "Characterizing Out-of-Distribution Error via Optimal Transport",
       NeurIPS 2023.

    Examples
    --------
    >>> import numpy as np
    >>> est = COT(temperature_scaling=False, label_marginal="uniform")
    >>> est = est.fit([[2.0, 0.0], [0.0, 2.0], [1.0, 0.0]], [0, 1, 1])
    >>> res = est.estimate([[2.0, 0.0], [0.0, 2.0]])
    >>> round(res.accuracy, 4)
    0.8808
    """

    has_per_sample = False  # no per-sample probabilities (interval: binomial)

    PARAMS = (
        Param("label_marginal", "any", "val", "Source label marginal: the validation label "
              'frequencies, `"uniform"`, or a probability vector of length c (checked at fit).',
              check=_check_label_marginal,
              accepts='`"val"` or `"uniform"` or a probability vector'),
        Param("mode", "choice", "exact", "Exact n x c transport, or the official sampled m x m "
              "construction (parity only).", choices=_MODES),
        Param("batch_size", "int", OFFICIAL_BATCH_SIZE, "Target rows per batch.", low=1,
              acts='mode="sampled"', active=lambda v, n: v["mode"] == "sampled",
              instead='mode="exact" transports all target rows at once'),
        Param("seed", "int", 0, "Seed of the sampled labels and batches.", low=0, special=(None,),
              acts='mode="sampled"', active=lambda v, n: v["mode"] == "sampled",
              instead='mode="exact" draws nothing at random'),
        TEMPERATURE_SCALING,
    )

    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        # Resolve (and check) the marginal before spending time on temperature scaling.
        c = val_logits.shape[1]
        if isinstance(self.label_marginal, str):
            if self.label_marginal == "val":
                self.label_marginal_ = np.bincount(val_labels, minlength=c) / val_labels.size
            else:
                self.label_marginal_ = np.full(c, 1.0 / c)
        else:
            self.label_marginal_ = _check_marginal(self.label_marginal, c)
        super()._fit(val_logits, val_labels)

    def _fit_log_probs(
        self,
        val_log_probs: NDArray[np.float64],
        val_labels: NDArray[np.int64],
        val_correct: NDArray[np.bool_],
    ) -> None:
        """COT needs nothing from the validation set beyond the temperature and the marginal."""

    def _estimate_log_probs(
        self, target_log_probs: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64] | None, dict[str, Any]]:
        probs = np.exp(target_log_probs)
        if self.mode == "exact":
            solution = _solve_exact(probs, self.label_marginal_)
            n_split = int(np.count_nonzero((solution.plan > 0).sum(axis=1) > 1))
            return solution.accuracy, None, {
                "transport_cost": solution.cost,
                "n_split_samples": n_split,
            }
        cost, n_batches = _sampled_cost(probs, self.label_marginal_, int(self.batch_size),
                                        self.seed)
        return 1.0 - cost, None, {"transport_cost": cost, "n_batches": n_batches}
