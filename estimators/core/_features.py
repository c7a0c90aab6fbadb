"""Checks of the optional feature arrays that ``fit`` / ``estimate`` take, and their holder.

Every estimator accepts, keyword-only, ``val_features`` / ``train_features`` / ``train_labels``
at ``fit`` and ``target_features`` at ``estimate``; only the methods that declare
``needs_features = True`` (``distcs``, ``aline-s``, ``aline-d``, ``dispersion``) read them, and
they refuse a call without them in one line (:func:`require_features`). Every message follows
the template of :mod:`estimators.core._validation`: which argument, what was expected, what arrived.

Features are the classifier's penultimate-layer embeddings (one row per logit row). A float32
array is kept as it is (no float64 copy of a 100k x 512 array); every other numeric dtype
becomes float64.

>>> import numpy as np
>>> f = check_features(np.ones((3, 2)), "val_features", n_rows=3, rows_of="val_logits")
>>> f.shape, f.dtype.name
((3, 2), 'float64')
>>> check_features(np.ones(3), "val_features", n_rows=3, rows_of="val_logits")
Traceback (most recent call last):
...
ValueError: val_features must be a 2-D array of shape (n_samples, n_features); got shape (3,).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

__all__ = ["FeatureOnly", "FitFeatures", "FeatureArray", "check_features",
           "check_fit_features", "check_target_features", "require_features"]

#: A validated feature array: float32 kept, anything else float64.
FeatureArray = NDArray[np.floating[Any]]


def check_features(
    features: Any,
    name: str,
    *,
    n_rows: int | None = None,
    rows_of: str = "",
    n_dims: int | None = None,
    dims_of: str = "",
) -> FeatureArray:
    """Return ``features`` as a finite 2-D float array of shape ``(n_rows, n_dims)``.

    Parameters
    ----------
    features : array-like of shape (n_samples, n_features)
    name : str
        The argument's name for messages (``"val_features"``).
    n_rows : int, optional
        The row count it must have (one row per row of ``rows_of``).
    rows_of : str
        The argument whose rows it must match, for the message.
    n_dims : int, optional
        The feature dimension it must have (that of ``dims_of``).
    dims_of : str
        The argument whose dimension it must match, for the message.

    Raises
    ------
    ValueError
        Not numeric (or complex, or boolean), not 2-D, no rows or no columns, NaN/inf, another
        row count than ``n_rows`` or another dimension than ``n_dims``; the message names the
        argument, what was expected and what came.
    """
    try:
        arr = np.asarray(features)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} must be a numeric 2-D array; could not convert it: "
                         f"{exc}") from None
    if arr.dtype == object or arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must be a numeric (float) array; got dtype {arr.dtype}.")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real-valued; got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_features); got "
                         f"shape {arr.shape}.")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must have at least one row and one column; got shape "
                         f"{arr.shape}.")
    if n_rows is not None and arr.shape[0] != n_rows:
        raise ValueError(f"{name} must have one row per row of {rows_of} ({n_rows}); got "
                         f"{arr.shape[0]} rows (shape {arr.shape}).")
    if n_dims is not None and arr.shape[1] != n_dims:
        raise ValueError(f"{name} must have the feature dimension of {dims_of} ({n_dims}); got "
                         f"{arr.shape[1]} (shape {arr.shape}).")
    if arr.dtype != np.float32:
        arr = arr.astype(np.float64, copy=False)
    finite = np.isfinite(arr)
    if not finite.all():
        bad = np.flatnonzero(~finite.all(axis=1))
        raise ValueError(f"{name} must be finite; got NaN or inf in {bad.size} row(s), first "
                         f"few: {bad[:5].tolist()}.")
    return arr


@dataclass(frozen=True)
class FitFeatures:
    """The validated feature arrays given to ``fit``.

    Attributes
    ----------
    val : ndarray of shape (n_val, d)
        Features of the validation rows, in the order of ``val_logits``.
    train : ndarray of shape (n_train, d) or None
        Features of (a sample of) the classifier's training set.
    train_labels : ndarray of shape (n_train,) or None
        Their labels (only with ``train``).
    """

    val: FeatureArray
    train: FeatureArray | None = None
    train_labels: NDArray[np.int64] | None = None

    @property
    def dim(self) -> int:
        """The feature dimension ``d``."""
        return int(self.val.shape[1])


def check_fit_features(
    val_features: Any,
    train_features: Any,
    train_labels: Any,
    *,
    n_val: int,
    n_classes: int,
) -> FitFeatures | None:
    """Validate ``fit``'s feature arguments; None when none is given.

    ``train_features`` needs ``val_features`` (the methods calibrate on the validation rows),
    ``train_labels`` needs ``train_features`` (one label per row, in ``[0, n_classes)``), and the
    two feature arrays share one dimension.

    >>> check_fit_features(None, None, None, n_val=3, n_classes=2) is None
    True
    >>> check_fit_features(None, np.ones((4, 2)), None, n_val=3, n_classes=2)
    Traceback (most recent call last):
    ...
    ValueError: train_features needs val_features: pass the validation rows' features too (fit(val_logits, val_labels, val_features=..., train_features=...)).
    """
    from ._validation import check_labels

    if val_features is None:
        if train_features is not None:
            raise ValueError("train_features needs val_features: pass the validation rows' "
                             "features too (fit(val_logits, val_labels, val_features=..., "
                             "train_features=...)).")
        if train_labels is not None:
            raise ValueError("train_labels needs train_features (and val_features); got "
                             "train_labels alone.")
        return None
    val = check_features(val_features, "val_features", n_rows=n_val, rows_of="val_logits")
    if train_features is None:
        if train_labels is not None:
            raise ValueError("train_labels needs train_features: pass the training rows' "
                             "features with their labels; got train_labels alone.")
        return FitFeatures(val)
    train = check_features(train_features, "train_features", n_dims=val.shape[1],
                           dims_of="val_features")
    labels = None
    if train_labels is not None:
        labels = check_labels(train_labels, "train_labels", int(train.shape[0]), n_classes)
    return FitFeatures(val, train, labels)


def check_target_features(
    target_features: Any, *, n_target: int, dim: int | None
) -> FeatureArray | None:
    """Validate ``estimate``'s ``target_features``: one row per target row, the dimension seen
    at ``fit`` (``dim``; None when ``fit`` had no features, then any dimension)."""
    if target_features is None:
        return None
    return check_features(target_features, "target_features", n_rows=n_target,
                          rows_of="target_logits", n_dims=dim, dims_of="val_features at fit")


def require_features(owner: str, key: str, argument: str, call: str) -> ValueError:
    """The one-line refusal of a feature method called without its features.

    >>> str(require_features("DistCS", "distcs", "val_features", "fit"))
    "DistCS ('distcs') needs features: pass fit(..., val_features=...) (the classifier's penultimate-layer embeddings, one row per logit row)."
    """
    return ValueError(f"{owner} ({key!r}) needs features: pass {call}(..., {argument}=...) "
                      "(the classifier's penultimate-layer embeddings, one row per logit row).")


class FeatureOnly:
    """Mixin of the estimators that estimate only from features (``distcs``, ``aline-*``).

    ``Estimator.estimate`` routes them to ``_estimate_with_features``; their logits-only
    ``_estimate``, reached directly, refuses with :func:`require_features`' one line. Put it
    before :class:`~estimators.core.base.Estimator` in the bases.
    """

    name: ClassVar[str]

    def _estimate(self, target_logits: NDArray[np.float64]) -> Any:
        raise require_features(type(self).__name__, self.name, "target_features", "estimate")
