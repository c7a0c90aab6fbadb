"""Checks of the optional peer-model arrays that ``fit`` / ``estimate`` take, and their holder.

A *peer* is another classifier of the same architecture, trained on the same data with another
seed (GDE, Jiang et al. 2022; agreement-on-the-line, Baek et al. 2022). Every estimator accepts,
keyword-only, ``peer_val_logits`` at ``fit`` and ``peer_target_logits`` at ``estimate``: the
peers' logits on the very rows of ``val_logits`` and ``target_logits``, in the same order. They
are validated for every method, as feature arrays are (:mod:`estimators.core._features`); the
methods that declare ``needs_peer = True`` (``gde``) refuse a call without them in one line
(:func:`require_peer`), the ones that declare ``reads_peers = True`` (``aline-s``, ``aline-d``)
add the peers to their family of models when given, and every other method ignores them.

One peer is one logit array: ``(n, c)``, or a binary model's ``(n,)`` / ``(n, 1)`` positive-class
logits. Several peers are a list or tuple of such arrays, or one 3-D array ``(k, n, c)``. What the
methods read of a peer is its predicted class (an argmax, which a per-row constant, a
temperature or float32 rounding of the logits does not change), so the holder keeps the
predictions only: ``k x n`` integers instead of ``k x n x c`` floats.

>>> import numpy as np
>>> p = check_peer_logits(np.array([[2.0, 0.0], [0.0, 1.0]]), "peer_val_logits", n_rows=2,
...                       rows_of="val_logits", n_classes=2)
>>> p.predictions.tolist(), p.n_peers
([[0, 1]], 1)
>>> check_peer_logits(np.ones((3, 2)), "peer_val_logits", n_rows=2, rows_of="val_logits",
...                   n_classes=2)
Traceback (most recent call last):
...
ValueError: peer_val_logits must have one row per row of val_logits (2); got 3 rows (peer 0, shape (3, 2)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["PeerPredictions", "check_peer_logits", "require_peer"]


@dataclass(frozen=True)
class PeerPredictions:
    """The validated peers of one set of rows: each peer's predicted class per row.

    Attributes
    ----------
    predictions : ndarray of shape (n_peers, n_rows), int64
        ``predictions[j, i] = argmax_k z^{(j)}_{ik}``, the class peer ``j`` predicts for row ``i``.
    """

    predictions: NDArray[np.int64]

    @property
    def n_peers(self) -> int:
        """How many peers."""
        return int(self.predictions.shape[0])

    @property
    def n_rows(self) -> int:
        """How many rows each peer predicted."""
        return int(self.predictions.shape[1])


def _peer_list(peers: Any, name: str) -> list[Any]:
    """The peers of ``peers`` as a list of per-peer arrays (see the module docstring)."""
    if isinstance(peers, (list, tuple)) and peers and all(
            isinstance(p, np.ndarray) for p in peers):
        return list(peers)
    if isinstance(peers, (list, tuple)) and not peers:
        raise ValueError(f"{name} must hold at least one peer's logits; got an empty "
                         f"{type(peers).__name__}.")
    try:
        arr = np.asarray(peers)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name} must be a numeric array of logits (one peer), a 3-D array "
                         f"(n_peers, n_samples, n_classes) or a list of arrays; could not "
                         f"convert it: {exc}") from None
    if arr.ndim == 3:
        if arr.shape[0] == 0:
            raise ValueError(f"{name} must hold at least one peer's logits; got shape "
                             f"{arr.shape}.")
        return [arr[j] for j in range(arr.shape[0])]
    return [arr]


def check_peer_logits(
    peers: Any,
    name: str,
    *,
    n_rows: int,
    rows_of: str,
    n_classes: int,
    n_peers: int | None = None,
) -> PeerPredictions:
    """Validate one or several peers' logits and return their predicted classes.

    Parameters
    ----------
    peers : array-like or list of array-like
        One peer's logits ``(n, c)`` (or binary ``(n,)`` / ``(n, 1)``), a 3-D array
        ``(k, n, c)`` of ``k`` peers, or a list/tuple of ``k`` arrays.
    name : str
        The argument's name for messages (``"peer_val_logits"``).
    n_rows : int
        The row count every peer must have (that of ``rows_of``).
    rows_of : str
        The argument whose rows the peers' rows are, for the message.
    n_classes : int
        The class count of the classifier (every peer predicts the same classes).
    n_peers : int, optional
        The number of peers there must be (those given at ``fit``).

    Raises
    ------
    ValueError
        A peer that :func:`~estimators.core._validation.check_logits` refuses (not numeric,
        NaN/inf, probabilities instead of logits, another class count), another row count than
        ``n_rows``, or another number of peers than ``n_peers``; the message names the argument
        and the peer.
    """
    from ._validation import check_logits

    arrays = _peer_list(peers, name)
    if n_peers is not None and len(arrays) != n_peers:
        raise ValueError(f"{name} must hold as many peers as peer_val_logits did at fit "
                         f"({n_peers}); got {len(arrays)}.")
    out = np.empty((len(arrays), n_rows), dtype=np.int64)
    for j, arr in enumerate(arrays):
        label = name if len(arrays) == 1 else f"{name}[{j}]"
        try:
            z = check_logits(arr, label, keep_float32=True)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        if z.shape[0] != n_rows:
            raise ValueError(f"{name} must have one row per row of {rows_of} ({n_rows}); got "
                             f"{z.shape[0]} rows (peer {j}, shape {np.shape(arr)}).")
        if z.shape[1] != n_classes:
            raise ValueError(f"{name} must have the class count of {rows_of} ({n_classes}); "
                             f"got {z.shape[1]} (peer {j}, shape {np.shape(arr)}).")
        out[j] = z.argmax(axis=1)
    return PeerPredictions(out)


def require_peer(owner: str, key: str, argument: str, call: str) -> ValueError:
    """The one-line refusal of a peer method called without its peer.

    >>> str(require_peer("GDE", "gde", "peer_val_logits", "fit"))
    "GDE ('gde') needs a peer model: pass fit(..., peer_val_logits=...) (the logits of a second model of the same architecture, trained on the same data with another seed, on the same rows)."
    """
    return ValueError(f"{owner} ({key!r}) needs a peer model: pass {call}(..., {argument}=...) "
                      "(the logits of a second model of the same architecture, trained on the "
                      "same data with another seed, on the same rows).")
