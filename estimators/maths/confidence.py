"""Softmax helpers and the confidence scores every softmax baseline uses, in one place.

The reference codes disagree on exactly these details (ATC_code: natural log with ``+1e-20`` and
a function named "entropy" that returns the *negative* entropy; COT: ``log2`` with no epsilon,
which gives NaN at ``p = 0``). This module fixes one convention and documents it:

* probabilities come from a numerically stable ``log_softmax``, then ``exp``;
* **max confidence** (MC) is :math:`s_i = \\max_k P_{ik}`, in ``[1/c, 1]``;
* **negative entropy** (NE) is :math:`s_i = \\sum_k P_{ik} \\log P_{ik}` in **natural log**, in
  ``[-\\log c, 0]``, with :math:`0 \\log 0 = 0` (computed as ``exp(logp) * logp`` from the finite
  log-probabilities, or with :func:`scipy.special.xlogy` when only probabilities are at hand), so
  it never produces NaN.

Every score is "higher = more confident", which is what ATC's threshold rule assumes. The log base
does not change ATC (a positive rescaling of the score moves the threshold with it).

References
----------
.. [1] Garg, S., Balakrishnan, S., Lipton, Z. C., Neyshabur, B. and Sedghi, H. "Leveraging
   Unlabeled Data to Predict Out-of-Distribution Performance", ICLR 2022 (MC and NE scores).
"""

from __future__ import annotations

from typing import Any, Callable, Literal, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import xlogy

from ..core._validation import check_logits

__all__ = [
    "SCORES",
    "ScoreName",
    "check_correct",
    "check_probs",
    "check_scores",
    "compute_score",
    "log_softmax",
    "max_confidence",
    "max_confidence_from_probs",
    "negative_entropy",
    "negative_entropy_from_probs",
    "softmax",
]

ScoreName = Literal["max_confidence", "negative_entropy"]

#: Tolerance on ``|sum_k p_ik - 1|`` accepted by :func:`check_probs`.
PROB_SUM_ATOL = 1e-6
_LOG_FLOOR = -np.finfo(np.float64).max


# --------------------------------------------------------------------------- core (unchecked)
def _log_softmax(logits: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-wise ``log_softmax`` of an already validated float64 array (no copy of the input)."""
    with np.errstate(over="ignore"):
        shifted = logits - logits.max(axis=1, keepdims=True)
    # Rows spanning more than the float range overflow to -inf; floor them so exp gives 0 and
    # p * log p stays 0 (finite logits always give finite log-probabilities).
    np.maximum(shifted, _LOG_FLOOR, out=shifted)
    lse = np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    shifted -= lse
    return cast("NDArray[np.float64]", shifted)


def _max_confidence_from_log_probs(log_probs: NDArray[np.float64]) -> NDArray[np.float64]:
    return cast("NDArray[np.float64]", np.exp(log_probs.max(axis=1)))


def _negative_entropy_from_log_probs(log_probs: NDArray[np.float64]) -> NDArray[np.float64]:
    # log_probs are finite for finite logits, so exp(lp) * lp is 0 (not NaN) where exp underflows.
    return cast("NDArray[np.float64]", np.einsum("ij,ij->i", np.exp(log_probs), log_probs))


_SCORE_FROM_LOG_PROBS: dict[str, Callable[[NDArray[np.float64]], NDArray[np.float64]]] = {
    "max_confidence": _max_confidence_from_log_probs,
    "negative_entropy": _negative_entropy_from_log_probs,
}


# --------------------------------------------------------------------------- public helpers
def log_softmax(logits: ArrayLike) -> NDArray[np.float64]:
    """Row-wise log-probabilities, computed stably.

    .. math:: \\log P_{ik} = Z_{ik} - \\max_j Z_{ij}
              - \\log \\sum_j \\exp(Z_{ij} - \\max_j Z_{ij})

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes)
        Raw, finite logits.

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
        Finite log-probabilities (float64); each row's ``exp`` sums to 1.

    Raises
    ------
    ValueError
        If ``logits`` is not a finite 2-D numeric array with at least 2 classes and one row.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(np.exp(log_softmax([[0.0, 0.0], [0.0, np.log(3.0)]])), 3)
    array([[0.5 , 0.5 ],
           [0.25, 0.75]])
    """
    return _log_softmax(check_logits(logits, "logits"))


def softmax(logits: ArrayLike) -> NDArray[np.float64]:
    """Row-wise softmax probabilities, ``exp(log_softmax(logits))``.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes)
        Raw, finite logits.

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
        Probabilities in ``[0, 1]`` whose rows sum to 1.
    """
    return np.exp(log_softmax(logits))


def max_confidence(logits: ArrayLike) -> NDArray[np.float64]:
    """Max-softmax confidence (the MC score of ATC and the per-sample term of AC).

    .. math:: s_i = \\max_k \\operatorname{softmax}(Z_i)_k \\in [1/c, 1]

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes)
        Raw, finite logits (divide by a temperature first if the caller wants scaled scores).

    Returns
    -------
    ndarray of shape (n_samples,)

    Examples
    --------
    >>> float(max_confidence([[0.0, 0.0, 0.0]])[0])  # doctest: +ELLIPSIS
    0.333...
    """
    return _max_confidence_from_log_probs(log_softmax(logits))


def negative_entropy(logits: ArrayLike) -> NDArray[np.float64]:
    """Negative Shannon entropy of the softmax, in nats (the NE score of ATC).

    .. math:: s_i = \\sum_k P_{ik} \\log P_{ik} \\in [-\\log c, 0],
              \\qquad 0 \\log 0 := 0

    Computed from ``log_softmax`` (no epsilon), so saturated rows give exactly 0 and no NaN.
    ATC_code adds ``1e-20`` inside ``log``; COT uses ``log2`` without an epsilon (NaN at p = 0).

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes)
        Raw, finite logits.

    Returns
    -------
    ndarray of shape (n_samples,)
        Values ``<= 0``; higher means more confident.

    Examples
    --------
    >>> import numpy as np
    >>> bool(np.isclose(negative_entropy([[0.0, 0.0]])[0], -np.log(2)))
    True
    >>> float(negative_entropy([[0.0, 1e4]])[0]) == 0.0  # saturated row: no NaN
    True
    """
    return _negative_entropy_from_log_probs(log_softmax(logits))


def check_probs(probs: Any, name: str, n_classes: int | None = None) -> NDArray[np.float64]:
    """Return ``probs`` as a float64 array of row-stochastic probabilities.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)
        Probabilities: finite, in ``[0, 1]``, rows summing to 1 within ``1e-6``.
    name : str
        Argument name used in error messages.
    n_classes : int, optional
        Required class count.

    Raises
    ------
    ValueError
        If the array has the wrong shape, is not finite, has entries outside ``[0, 1]`` or rows
        that do not sum to 1.
    """
    arr = check_logits(probs, name, n_classes=n_classes, allow_binary=False,
                       reject_probabilities=False)
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError(
            f"{name} must hold probabilities in [0, 1]; got values in "
            f"[{arr.min():.6g}, {arr.max():.6g}]. Pass softmax outputs, not logits."
        )
    row_sums = arr.sum(axis=1)
    bad = np.flatnonzero(np.abs(row_sums - 1.0) > PROB_SUM_ATOL)
    if bad.size:
        raise ValueError(
            f"{name} rows must sum to 1 (within {PROB_SUM_ATOL:g}); {bad.size} row(s) do not, "
            f"first few: {bad[:5].tolist()} with sums {np.round(row_sums[bad[:5]], 6).tolist()}."
        )
    return arr


def max_confidence_from_probs(probs: ArrayLike) -> NDArray[np.float64]:
    """Max confidence ``max_k P_ik`` of row-stochastic probabilities (validated).

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    return cast("NDArray[np.float64]", check_probs(probs, "probs").max(axis=1))


def negative_entropy_from_probs(probs: ArrayLike) -> NDArray[np.float64]:
    """Negative entropy ``sum_k xlogy(P_ik, P_ik)`` (natural log, ``0 log 0 = 0``) of probabilities.

    Parameters
    ----------
    probs : array-like of shape (n_samples, n_classes)

    Returns
    -------
    ndarray of shape (n_samples,)
        Values ``<= 0``; exactly 0 for one-hot rows.
    """
    arr = check_probs(probs, "probs")
    return cast("NDArray[np.float64]", xlogy(arr, arr).sum(axis=1))


def check_scores(values: Any, name: str) -> NDArray[np.float64]:
    """Return ``values`` as a finite, non-empty float64 vector (per-sample scores).

    Raises
    ------
    ValueError
        If the array is not 1-D, is empty, is not numeric or holds NaN/inf.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a 1-D numeric array; could not convert it: {exc}"
        ) from exc
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array of shape (n_samples,); got shape {arr.shape}."
        )
    if arr.size == 0:
        raise ValueError(f"{name} must have at least one element; got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; got {int((~np.isfinite(arr)).sum())} NaN/inf.")
    return arr


def check_correct(values: Any, name: str, n_samples: int) -> NDArray[np.bool_]:
    """Return ``values`` as a boolean correctness vector of length ``n_samples``.

    Accepts booleans or the integers/floats 0 and 1.

    Raises
    ------
    ValueError
        If the array is not 1-D, has the wrong length or holds values other than 0/1.
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array of shape (n_samples,); got shape {arr.shape}."
        )
    if arr.shape[0] != n_samples:
        raise ValueError(
            f"{name} must have one entry per score ({n_samples}); got {arr.shape[0]}."
        )
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isin(arr, (0, 1))):
            raise ValueError(
                f"{name} must be boolean (or 0/1) correctness indicators; got dtype {arr.dtype}"
                f" with values outside {{0, 1}}."
            )
    return arr.astype(bool)


#: Score functions on logits, by name.
SCORES: dict[str, Callable[[ArrayLike], NDArray[np.float64]]] = {
    "max_confidence": max_confidence,
    "negative_entropy": negative_entropy,
}


def compute_score(log_probs: NDArray[np.float64], score: str) -> NDArray[np.float64]:
    """Score rows of already computed log-probabilities (internal fast path, no validation).

    Parameters
    ----------
    log_probs : ndarray of shape (n_samples, n_classes)
        Output of :func:`log_softmax` (finite).
    score : {"max_confidence", "negative_entropy"}

    Returns
    -------
    ndarray of shape (n_samples,)
    """
    try:
        fn = _SCORE_FROM_LOG_PROBS[score]
    except KeyError:
        raise ValueError(
            f"score must be one of {sorted(_SCORE_FROM_LOG_PROBS)}; got {score!r}."
        ) from None
    return fn(log_probs)
