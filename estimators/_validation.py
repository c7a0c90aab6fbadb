"""Input checks at the public boundary of every estimator.

Every message follows one template: which argument, what was expected, what arrived.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .exceptions import DegenerateValidationWarning

FloatArray = NDArray[np.floating[Any]]
IntArray = NDArray[np.integer[Any]]


#: How ``(n,)`` / ``(n, 1)`` positive-class logits ``s`` of a binary classifier become the
#: ``(n, 2)`` matrix every estimator works on: ``[0, s]``, the logistic-regression convention
#: (``sigmoid(s) = softmax([0, s])[1]``). Any ``[b, b + s]`` gives the same softmax, hence (by the
#: shift-invariance contract) the same estimate.
BINARY_CONVENTION = "[0, s]"


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

    Raises
    ------
    ValueError
        If the array is not 2-D (or binary 1-D), has fewer than 2 classes or no rows, holds
        NaN/inf, is not numeric, or has a class count other than ``n_classes``.
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
            f"{name} contains {int(out.sum())} values outside [0, {n_classes}); "
            f"first few: {arr[out][:5].tolist()}."
        )
    return arr


def check_val_inputs(
    val_logits: Any, val_labels: Any, *, keep_float32: bool = False
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Validate a labelled validation set; warn if it is all correct or all wrong.

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
