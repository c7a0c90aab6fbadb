"""The cross-fitted ensemble of ``threshold_rule="quantile"`` (``n <= max_fit_rows``): folds and
the combination of the members into one :class:`~estimators.methods.alsa.ALSAFit`."""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import NDArray

from .model import ALSAAnchors, ALSAFit

#: Folds of the cross-fitted ensemble that ``threshold_rule="quantile"`` fits when
#: ``n <= max_fit_rows`` (``docs/ALSA.md``, "ALSA at any validation size").
CROSS_FIT_FOLDS = 3


def fold_assignment(n_all: int, rng: np.random.Generator, folds: int = CROSS_FIT_FOLDS
                    ) -> NDArray[np.int64]:
    """Fold of every row: a random permutation dealt round-robin into ``folds`` folds."""
    fold = np.empty(n_all, dtype=np.int64)
    fold[rng.permutation(n_all)] = np.arange(n_all) % folds
    return fold


def _combine_members(members: list[ALSAFit], accuracy: float, n_all: int) -> ALSAFit:
    """The cross-fitted ensemble of ``members`` (one per fold) as one :class:`ALSAFit`.

    :func:`alsa_predict` averages the members' ``q``. The top-level anchor fields are the
    members' anchors concatenated with peaks divided by the member count, the mean offset and the
    mean cut-off over the member count: one anchor set whose total influence is the members' mean
    influence, an approximation of the ensemble for readers that store a single set.
    """
    K = len(members)
    anchors = [m.anchors for m in members]
    thresholds = [a.threshold for a in anchors]
    threshold = None if thresholds[0] is None else float(np.mean(cast(list[float], thresholds))) / K
    first = anchors[0]
    combined = ALSAAnchors(
        np.concatenate([a.positions for a in anchors]).astype(np.float32),
        (np.concatenate([a.peaks for a in anchors]) / K).astype(np.float32),
        np.concatenate([a.variances for a in anchors]).astype(np.float32),
        kernel=first.kernel,
        center=first.center,
        space=first.space,
        tau=first.tau,
        bias=float(np.mean([a.bias for a in anchors])),
        threshold=threshold,
        rectify=first.rectify,
        members=tuple(anchors),
    )
    reasons = [m.stop_reason for m in members]
    n_ref = sum(m.n_reference_rows for m in members)
    return ALSAFit(
        anchors=combined,
        n_epochs=max(m.n_epochs for m in members),
        stop_reason="max_epochs" if "max_epochs" in reasons else reasons[0],
        train_gap=max(m.train_gap for m in members),
        history=members[0].history,
        val_accuracy=accuracy,
        scale=members[0].scale,
        seconds=sum(m.seconds for m in members),
        n_fit_rows=int(n_all),
        n_reference_rows=int(n_ref),
        reference="cross-fit",
        reference_rectified=float(
            sum(m.reference_rectified * m.n_reference_rows for m in members) / max(n_ref, 1)
        ),
    )
