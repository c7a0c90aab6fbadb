"""Input checks at the public boundary of every estimator.

Every message follows one template: which argument, what was expected, what arrived.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .exceptions import DegenerateValidationWarning, SmallSampleWarning

FloatArray = NDArray[np.floating[Any]]
IntArray = NDArray[np.integer[Any]]


#: How ``(n,)`` / ``(n, 1)`` positive-class logits ``s`` of a binary classifier become the
#: ``(n, 2)`` matrix every estimator works on: ``[0, s]``, the logistic-regression convention
#: (``sigmoid(s) = softmax([0, s])[1]``). Any ``[b, b + s]`` gives the same softmax, hence (by the
#: shift-invariance contract) the same estimate.
BINARY_CONVENTION = "[0, s]"


#: Rows whose entries are all >= 0 and sum to 1 within this are read as probabilities (softmax
#: output saved in float32 or rounded to 4 decimals stays well inside it; logits essentially never
#: satisfy it on every row).
PROBABILITY_SUM_ATOL = 1e-3
#: Below this many target rows :meth:`~estimators.core.base.Estimator.estimate` warns that the
#: target's own sampling noise dominates (:class:`~estimators.core.exceptions.SmallSampleWarning`).
MIN_TARGET_ROWS = 30


def looks_like_probabilities(arr: NDArray[Any]) -> bool:
    """Whether ``arr`` reads as probabilities rather than logits.

    A 2-D ``(n, c)`` array with ``c >= 2`` does when *every* row is non-negative and sums to 1
    within :data:`PROBABILITY_SUM_ATOL` (softmax output). A binary ``(n,)`` / ``(n, 1)`` column
    does when every value lies in [0, 1] (sigmoid output): read as positive-class logits ``s``,
    such a column would say that the model predicts class 1 on every row (``s > 0``), so it is
    taken as the much likelier mistake. The first row is tested first, so logits cost ``O(c)``.

    Examples
    --------
    >>> looks_like_probabilities(np.array([[0.2, 0.8], [0.5, 0.5]]))
    True
    >>> looks_like_probabilities(np.array([[0.2, 0.8], [1.5, -0.5]]))
    False
    >>> looks_like_probabilities(np.array([0.1, 0.9, 0.4]))
    True
    >>> looks_like_probabilities(np.array([-2.0, 0.9, 0.4]))
    False
    """
    a = np.asarray(arr)
    if a.size == 0 or not np.issubdtype(a.dtype, np.number) or np.issubdtype(
        a.dtype, np.complexfloating
    ):
        return False
    if is_binary_shape(a.shape):
        s = a.reshape(-1)
        if not 0.0 <= s[0] <= 1.0:
            return False
        return bool(np.all((s >= 0.0) & (s <= 1.0)))
    if a.ndim != 2 or a.shape[1] < 2:
        return False
    first = a[0].astype(np.float64)
    if not (np.all(first >= 0.0) and abs(float(first.sum()) - 1.0) <= PROBABILITY_SUM_ATOL):
        return False
    if not bool(np.all(a >= 0)):
        return False
    sums = a.sum(axis=1, dtype=np.float64)
    return bool(np.all(np.abs(sums - 1.0) <= PROBABILITY_SUM_ATOL))


def probabilities_message(name: str, shape: tuple[int, ...]) -> str:
    """The one-line refusal of probabilities passed where logits are expected."""
    if is_binary_shape(shape):
        return (
            f"{name} look like sigmoid probabilities, not logits: every value lies in [0, 1] "
            f"(shape {shape}); pass the positive-class logit log(p) - log(1 - p) "
            "(scipy.special.logit, or estimators.logits_from_probabilities(p)). If these really "
            "are logits (a model that predicts class 1 on every row), pass them as two columns "
            "[0, s]."
        )
    return (
        f"{name} look like softmax probabilities, not logits: every row is non-negative and "
        f"sums to 1 (shape {shape}); pass logits, e.g. np.log(p) "
        "(estimators.logits_from_probabilities(p) also handles zeros)."
    )


def logits_from_probabilities(probabilities: Any, name: str = "probabilities") -> NDArray[np.float64]:
    r"""Logits whose softmax gives ``probabilities``: ``log(p)`` per entry, zeros floored.

    A 2-D ``(n, c)`` array of rows that sum to 1 becomes :math:`\log p` (an entry 0 becomes
    :math:`\log` of the smallest positive float64, about -708, whose softmax weight is 0 to
    float precision). A binary ``(n,)`` / ``(n, 1)`` column of positive-class probabilities
    becomes the positive-class logit :math:`\log p - \log(1 - p)` (same shape), clipped to
    +-708 for ``p`` of exactly 0 or 1. Estimates depend only on the softmax, so these give the
    same estimates as the model's own logits (every method but MaNo, which reads the logits'
    level).

    Raises
    ------
    ValueError
        If ``probabilities`` are not probabilities (a negative entry, a row not summing to 1
        within :data:`PROBABILITY_SUM_ATOL`, a binary value outside [0, 1], NaN).

    Examples
    --------
    >>> z = logits_from_probabilities(np.array([[0.25, 0.75]]))
    >>> np.round(np.exp(z), 2).tolist()
    [[0.25, 0.75]]
    >>> np.round(logits_from_probabilities(np.array([0.5, 0.9])), 3).tolist()
    [0.0, 2.197]
    """
    arr = np.asarray(probabilities, dtype=np.float64) if np.ndim(probabilities) else None
    if arr is None or arr.size == 0 or not np.all(np.isfinite(arr)) or not (
        looks_like_probabilities(arr)
    ):
        what = "values in [0, 1]" if arr is not None and is_binary_shape(arr.shape) else (
            "non-negative rows that sum to 1"
        )
        raise ValueError(
            f"{name} must be probabilities ({what}, within {PROBABILITY_SUM_ATOL:g}); got "
            f"{'an empty or scalar array' if arr is None or arr.size == 0 else 'other values'}"
            f"{'' if arr is None else f' of shape {arr.shape}'}."
        )
    tiny = np.finfo(np.float64).tiny
    if is_binary_shape(arr.shape):
        p = np.clip(arr, tiny, 1.0)
        q = np.clip(1.0 - arr, tiny, 1.0)
        return np.log(p) - np.log(q)
    return np.log(np.maximum(arr, tiny))


def is_binary_shape(shape: tuple[int, ...]) -> bool:
    """Whether an array of this shape holds positive-class logits of a binary model.

    ``(n,)`` and ``(n, 1)`` are binary positive-class logits; anything else is not.
    """
    return len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)


def binary_to_two_class(scores: NDArray[np.floating[Any]]) -> NDArray[np.float64]:
    r"""Turn positive-class logits ``s`` of shape ``(n,)`` or ``(n, 1)`` into ``(n, 2)`` logits.

    Row ``i`` becomes :math:`[0, s_i]`, so that :math:`\mathrm{softmax}([0, s_i])_1 =
    \sigma(s_i)`: the probability the binary model gives the positive class (label 1) is kept,
    and class 1 is predicted exactly when :math:`s_i > 0` (a tie :math:`s_i = 0` predicts class 0,
    numpy's ``argmax`` rule).
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    out = np.zeros((s.shape[0], 2), dtype=np.float64)
    out[:, 1] = s
    return out


def check_logits(
    logits: Any,
    name: str,
    n_classes: int | None = None,
    *,
    allow_binary: bool = True,
    keep_float32: bool = False,
    reject_probabilities: bool = True,
) -> NDArray[np.float64]:
    """Return ``logits`` as a finite float64 array of shape ``(n_samples, n_classes)``.

    With ``keep_float32=True`` a float32 ``(n, c)`` array is checked and returned as it is
    (no float64 copy; ALSA converts the rows it uses itself, which gives the same numbers since
    float32 -> float64 is exact); every other dtype and the binary shapes still become float64.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_classes), (n_samples,) or (n_samples, 1)
        Raw (pre-softmax) classifier outputs. A 1-D array or a single column holds the
        positive-class logits ``s`` of a binary classifier and becomes ``[0, s]`` per row
        (:func:`binary_to_two_class`); ``n_classes`` is then 2.
    name : str
        Argument name used in error messages, e.g. ``"val_logits"``.
    n_classes : int, optional
        Class count the array must have (the count seen at ``fit``).
    allow_binary : bool, default True
        Accept the binary ``(n,)`` / ``(n, 1)`` shapes. False for arrays that are not logits
        (probabilities, anchor positions).
    keep_float32 : bool, default False
        Return a float32 ``(n, c)`` input without converting it (see above).
    reject_probabilities : bool, default True
        Refuse an array that reads as probabilities (:func:`looks_like_probabilities`: every
        row non-negative and summing to 1, or a binary column inside [0, 1]) with a message
        that says how to pass logits. False for arrays that are not logits.

    Raises
    ------
    ValueError
        If the array is not 2-D (or binary 1-D), has fewer than 2 classes or no rows, holds
        NaN/inf, is not numeric, has a class count other than ``n_classes``, or (with
        ``reject_probabilities``) holds probabilities instead of logits.
    """
    try:
        arr = np.asarray(logits)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} must be a numeric array; could not convert it: {exc}") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must be a numeric array; got dtype {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real-valued; got dtype {arr.dtype}.")
    binary = allow_binary and is_binary_shape(arr.shape)
    if binary:
        if arr.shape[0] == 0:
            raise ValueError(f"{name} must have at least one row (sample); got shape {arr.shape}.")
        if n_classes is not None and n_classes != 2:
            raise ValueError(
                f"{name} has shape {arr.shape}, the positive-class logits of a binary model "
                f"(2 classes), but the estimator was fitted on {n_classes} classes; pass an "
                f"array of shape (n_samples, {n_classes})."
            )
    elif arr.ndim != 2:
        expected = (
            "a 2-D array of shape (n_samples, n_classes), or binary positive-class logits of "
            "shape (n_samples,) or (n_samples, 1)"
            if allow_binary
            else "a 2-D array of shape (n_samples, n_classes)"
        )
        raise ValueError(f"{name} must be {expected}; got shape {arr.shape}.")
    else:
        if arr.shape[0] == 0:
            raise ValueError(f"{name} must have at least one row (sample); got shape {arr.shape}.")
        if arr.shape[1] < 2:
            raise ValueError(
                f"{name} must have at least 2 classes (columns); got shape {arr.shape}."
            )
        if n_classes is not None and arr.shape[1] != n_classes:
            raise ValueError(
                f"{name} has {arr.shape[1]} classes but the estimator was fitted on {n_classes}."
            )
    if not (keep_float32 and arr.dtype == np.float32 and not binary):
        arr = arr.astype(np.float64, copy=False)
    finite = np.isfinite(arr)
    if not finite.all():
        bad_rows = np.flatnonzero(~finite.reshape(arr.shape[0], -1).all(axis=1))
        raise ValueError(
            f"{name} must be finite; got NaN or inf in {bad_rows.size} row(s), "
            f"first few: {bad_rows[:5].tolist()}."
        )
    if reject_probabilities and looks_like_probabilities(arr):
        raise ValueError(probabilities_message(name, tuple(np.shape(logits))))
    return binary_to_two_class(arr) if binary else arr


def check_labels(
    labels: Any, name: str, n_samples: int, n_classes: int, *, binary_logits: bool = False
) -> NDArray[np.int64]:
    """Return ``labels`` as an int64 vector of length ``n_samples`` with values in ``[0, n_classes)``.

    Float arrays are accepted only when every value is integral (e.g. ``3.0``).
    ``binary_logits=True`` says the logits came as binary positive-class logits (``(n,)`` or
    ``(n, 1)``), so the labels must be 0 or 1 and the message says so.

    Raises
    ------
    ValueError
        If the array is not 1-D, has the wrong length, holds non-integers or values out of range.
    """
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of shape (n_samples,); got shape {arr.shape}.")
    if arr.shape[0] != n_samples:
        raise ValueError(
            f"{name} must have one label per logit row ({n_samples}); got {arr.shape[0]}."
        )
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must hold integer class indices; got dtype {arr.dtype}.")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            bad = arr[~(np.isfinite(arr) & (arr == np.round(arr)))]
            raise ValueError(
                f"{name} must hold integer class indices; got non-integer values, "
                f"first few: {bad[:5].tolist()}."
            )
    arr = arr.astype(np.int64)
    out = (arr < 0) | (arr >= n_classes)
    if out.any() and binary_logits:
        raise ValueError(
            f"{name} must be 0 or 1 with binary positive-class logits of shape (n_samples,) or "
            f"(n_samples, 1); got {int(out.sum())} values outside {{0, 1}}, "
            f"first few: {arr[out][:5].tolist()}."
        )
    if out.any():
        raise ValueError(
            f"{name} must hold class indices in [0, {n_classes}); got {int(out.sum())} "
            f"value{'s' if int(out.sum()) != 1 else ''} outside it; "
            f"first few: {arr[out][:5].tolist()}."
        )
    return arr


def check_val_inputs(
    val_logits: Any, val_labels: Any, *, keep_float32: bool = False
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Validate a labelled validation set; warn if it is all correct or all wrong, or if its
    labels are all one class (:class:`~estimators.core.exceptions.DegenerateValidationWarning`).

    ``val_logits`` may be binary positive-class logits (``(n,)`` / ``(n, 1)``, see
    :func:`check_logits`); the labels must then be 0 or 1.

    Returns
    -------
    val_logits : ndarray of shape (n_samples, n_classes), float64
    val_labels : ndarray of shape (n_samples,), int64
    """
    try:
        binary = is_binary_shape(np.shape(val_logits))
    except ValueError:  # ragged input: check_logits reports it
        binary = False
    logits = check_logits(val_logits, "val_logits", keep_float32=keep_float32)
    labels = check_labels(
        val_labels, "val_labels", logits.shape[0], logits.shape[1], binary_logits=binary
    )
    present = np.unique(labels)
    if present.size == 1:
        n_classes = int(logits.shape[1])
        warnings.warn(
            f"The validation labels are all one class: only class {int(present[0])} is present "
            f"among the {n_classes} classes of val_logits ({logits.shape[0]} samples). How the "
            "model fares on the other classes cannot be learned from it, so estimates for a "
            "target holding them are unreliable; validate on labels of every class.",
            DegenerateValidationWarning,
            stacklevel=3,
        )
    acc = float(np.mean(logits.argmax(axis=1) == labels))
    if acc in (0.0, 1.0):
        warnings.warn(
            f"The validation set is degenerate: validation accuracy is {acc:.0%} "
            f"({logits.shape[0]} samples). Estimates stay finite but carry little information.",
            DegenerateValidationWarning,
            stacklevel=3,
        )
    return logits, labels


def check_in_choices(value: Any, name: str, owner: str, choices: set[Any] | tuple[Any, ...]) -> None:
    """Raise a ``ValueError`` if ``value`` is not one of ``choices``."""
    if value not in choices:
        raise ValueError(
            f"The {name!r} parameter of {owner} must be one of {sorted(map(repr, choices))}; "
            f"got {value!r}."
        )


def check_number(
    value: Any,
    name: str,
    owner: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
) -> None:
    """Raise a ``ValueError`` unless ``value`` is a (possibly integer) number inside the bounds."""
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, (int, np.integer)) if integer else isinstance(
        value, (int, float, np.integer, np.floating)
    )
    if isinstance(value, bool) or not ok_type or (not integer and not np.isfinite(value)):
        raise ValueError(f"The {name!r} parameter of {owner} must be {kind}; got {value!r}.")
    lo_txt = "(" if low_open else "["
    hi_txt = ")" if high_open else "]"
    interval = f"{lo_txt}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_txt}"
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"The {name!r} parameter of {owner} must be in {interval}; got {value!r}.")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"The {name!r} parameter of {owner} must be in {interval}; got {value!r}.")


def warn_small_target(n_rows: int, name: str = "target_logits", stacklevel: int = 3) -> None:
    r"""Warn (:class:`~estimators.core.exceptions.SmallSampleWarning`) below :data:`MIN_TARGET_ROWS`.

    The accuracy realised on ``n`` rows has a binomial standard error of up to
    :math:`\sqrt{0.25 / n}` (9 points at ``n = 30``), whatever the estimator does.
    """
    if n_rows < MIN_TARGET_ROWS:
        se = 100.0 * float(np.sqrt(0.25 / max(n_rows, 1)))
        warnings.warn(
            f"{name} has only {n_rows} row(s) (fewer than {MIN_TARGET_ROWS}): the accuracy of so "
            f"few rows carries sampling noise of up to {se:.0f} points (one binomial standard "
            "error) whatever the estimate; read the result's interval, or score more rows.",
            SmallSampleWarning,
            stacklevel=stacklevel,
        )
