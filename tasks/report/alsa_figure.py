"""ALSA's anchors and probability surface for a 3-class run (paper Fig. 4 and Fig. 1d/5d).

:func:`anchor_figures` reads a run's stored anchors and hyper-parameters from DuckDB and draws
them with :func:`plot_alsa_anchors`; the fitted surface :math:`q(z)` comes from
:func:`estimators.methods.alsa.anchors_surface`, which owns ALSA's defaults.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tasks.report.figures import pyplot
from tasks.report.names import is_variant, methods_in_order

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["anchor_figures", "plot_alsa_anchors", "simplex_plane_basis"]


def simplex_plane_basis() -> np.ndarray:
    """Orthonormal basis (2, 3) of the plane orthogonal to (1, 1, 1) in 3-class logit space.

    Adding a constant to every logit moves a point along (1, 1, 1) and leaves the softmax
    unchanged, so this plane shows what a classifier's confidence sees.

    Examples
    --------
    >>> B = simplex_plane_basis()
    >>> np.allclose(B @ B.T, np.eye(2)), np.allclose(B @ np.ones(3), 0)
    (True, True)
    """
    return np.array(
        [[1.0, -1.0, 0.0], [1.0, 1.0, -2.0]], dtype=float
    ) / np.array([[math.sqrt(2.0)], [math.sqrt(6.0)]])


def plot_alsa_anchors(
    *,
    positions: np.ndarray,
    peaks: np.ndarray,
    variances: np.ndarray,
    val_logits: np.ndarray,
    val_labels: np.ndarray,
    surface: Any,
    title: str,
    grid_size: int = 160,
) -> "Figure":
    """ALSA's anchors (paper Fig. 4) and probability surface (Fig. 1d/5d) for a 3-class run.

    Parameters
    ----------
    positions : ndarray of shape (k, 3)
        Fitted anchor positions in logit space.
    peaks, variances : ndarray of shape (k,)
        Fitted peak influences (sign = pushes towards correct / incorrect) and variances (a
        smaller magnitude spreads the influence further).
    val_logits : ndarray of shape (n, 3)
        Validation logits the anchors were fitted on.
    val_labels : ndarray of shape (n,)
        Their labels (to color points correct / incorrect).
    surface : callable
        ``surface(logits (m, 3)) -> (m,)``: the fitted estimator's probability of a correct
        prediction, e.g. ``ALSA.predict_proba_correct``.
    title : str
        Figure title.
    grid_size : int, default=160
        Grid points per axis of the surface.

    Returns
    -------
    matplotlib.figure.Figure
        Left: anchors projected on the plane orthogonal to (1, 1, 1), colored by peak, sized by
        influence extent ``1/|v|``, over the validation logits. Right: the probability of a
        correct prediction over a grid on that plane (shifted to the validation logits' mean
        offset along (1, 1, 1)), with the validation logits colored by correctness.
    """
    plt = pyplot()
    from matplotlib.colors import TwoSlopeNorm

    basis = simplex_plane_basis()
    val_xy = val_logits @ basis.T
    anc_xy = positions @ basis.T
    correct = val_logits.argmax(axis=1) == val_labels
    both = np.vstack([val_xy, anc_xy])
    lo, hi = np.percentile(both, 0.5, axis=0), np.percentile(both, 99.5, axis=0)
    span = np.maximum(hi - lo, 1e-6)
    lo, hi = lo - 0.08 * span, hi + 0.08 * span

    fig, (ax_a, ax_s) = plt.subplots(1, 2, figsize=(11, 4.8))
    ax_a.scatter(val_xy[:, 0], val_xy[:, 1], s=2, color="0.75", alpha=0.4, linewidths=0,
                 label="validation logits")
    vmax = float(np.max(np.abs(peaks))) or 1.0
    extent = 1.0 / np.maximum(np.abs(variances), 1e-12)
    sizes = 6 + 90 * (extent - extent.min()) / max(float(np.ptp(extent)), 1e-12)
    sc = ax_a.scatter(
        anc_xy[:, 0], anc_xy[:, 1], c=peaks, s=sizes, cmap="RdYlGn",
        norm=TwoSlopeNorm(vcenter=0.0, vmin=-vmax, vmax=vmax), edgecolors="k", linewidths=0.2,
    )
    fig.colorbar(sc, ax=ax_a, label="peak influence p")
    ax_a.set_title(f"{len(peaks)} anchors (size ∝ influence extent 1/|v|)", fontsize=9)

    offset = float(np.mean(val_logits.mean(axis=1)))
    gx = np.linspace(lo[0], hi[0], grid_size)
    gy = np.linspace(lo[1], hi[1], grid_size)
    xx, yy = np.meshgrid(gx, gy)
    plane = np.stack([xx.ravel(), yy.ravel()], axis=1) @ basis + offset
    q = np.asarray(surface(plane), dtype=float).reshape(xx.shape)
    im = ax_s.contourf(xx, yy, q, levels=np.linspace(0.0, 1.0, 21), cmap="RdYlGn")
    fig.colorbar(im, ax=ax_s, label="P(correct | z)")
    ax_s.scatter(val_xy[correct, 0], val_xy[correct, 1], s=2, color="tab:green", alpha=0.35,
                 linewidths=0, label="correct")
    ax_s.scatter(val_xy[~correct, 0], val_xy[~correct, 1], s=3, color="tab:red", alpha=0.6,
                 linewidths=0, label="incorrect")
    ax_s.set_title("probability of a correct prediction over the logit plane", fontsize=9)
    for ax in (ax_a, ax_s):
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_xlabel("(z₁ − z₂)/√2", fontsize=8)
        ax.set_ylabel("(z₁ + z₂ − 2z₃)/√6", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(loc="upper right", fontsize=7, markerscale=4)
    fig.suptitle(
        f"{title}\nlogits projected on the plane orthogonal to (1, 1, 1); influence decays with "
        "cosine distance, not the distance drawn",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def anchor_figures(con: Any, rows: pd.DataFrame) -> list[tuple[str, "Figure"]]:
    """Anchor/surface figures for the first seed of every 3-class (dataset, backbone)."""
    from storage.errors import NotFoundError
    from storage.logits import read_val

    figs: list[tuple[str, Figure]] = []
    alsa_methods = [
        m for m in methods_in_order(rows["method"].tolist())
        if m.startswith("alsa") and not is_variant(m)
    ]
    if not alsa_methods:
        return figs
    method = "alsa-g" if "alsa-g" in alsa_methods else alsa_methods[0]
    firsts = (
        rows[rows["method"] == method]
        .sort_values("seed")
        .drop_duplicates(["dataset", "backbone"])["run_key"]
        .tolist()
    )
    for run_key in firsts:
        val_logits, val_labels = read_val(con, run_key)
        if val_logits.shape[1] != 3:
            continue
        try:
            surface, anchors = _fitted_alsa(con, run_key, method)
        except NotFoundError:
            continue
        figs.append((run_key, plot_alsa_anchors(
            # the logit coordinates (an augmented space adds its constant coordinate last)
            positions=np.asarray(anchors.positions, dtype=float)[:, : val_logits.shape[1]],
            peaks=np.asarray(anchors.peaks, dtype=float),
            variances=np.asarray(anchors.variances, dtype=float),
            val_logits=np.asarray(val_logits, dtype=float),
            val_labels=np.asarray(val_labels, dtype=int),
            surface=surface, title=f"{method} on {run_key}",
        )))
    return figs


def _fitted_alsa(con: Any, run_key: str, method: str) -> tuple[Any, Any]:
    """A run's stored ALSA anchors and its q(z) under the hyper-parameters it was fitted with
    (:func:`estimators.methods.alsa.anchors_surface`: ALSA's own defaults for what the row lacks)."""
    import json

    from estimators.methods.alsa import anchors_surface
    from storage.anchors import read_anchors
    from storage.estimates import read_estimates

    positions, peaks, variances = read_anchors(con, run_key, method)
    stored = [r for r in read_estimates(con, run_key) if r.method == method]
    params = json.loads(stored[0].params_json) if stored else {}
    return anchors_surface(positions, peaks, variances, params)
