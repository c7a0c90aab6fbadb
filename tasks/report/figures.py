"""The report's figures from its target rows: scatter, temporal and ablation plots, and PNGs.

Matplotlib is imported on first use (:func:`pyplot`, the ``Agg`` backend), not on import.
ALSA's anchor figure, which also reads DuckDB, is :mod:`tasks.report.alsa_figure`.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tasks.report.names import artifact_key, family_rank, methods_in_order, parse_variant

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_ablations", "plot_scatter", "plot_temporal", "pyplot", "save_png"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive ``Agg`` backend."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_scatter(rows: pd.DataFrame, *, title: str) -> "Figure":
    """Predicted vs true accuracy, one panel per method (paper Fig. 7–8).

    Parameters
    ----------
    rows : DataFrame
        Target rows (``tables["rows"]``) of one dataset.
    title : str
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        Points colored by shift family, marker by backbone, the identity line dashed, each
        panel titled with the method and its MAE in percentage points.
    """
    plt = pyplot()
    methods = methods_in_order(rows["method"].tolist())
    families = sorted(rows["shift_family"].unique(), key=family_rank)
    backbones = sorted(rows["backbone"].astype(str).unique())
    ncols = min(4, len(methods))
    nrows = math.ceil(len(methods) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(3.0 * ncols, 3.1 * nrows + 0.8), squeeze=False, layout="constrained"
    )
    colors = plt.get_cmap("tab10")
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    lo = float(min(rows["true_accuracy"].min(), rows["estimated_accuracy"].min()))
    hi = float(max(rows["true_accuracy"].max(), rows["estimated_accuracy"].max()))
    pad = 0.05 * max(hi - lo, 0.05)
    lim = (max(0.0, lo - pad), min(1.0, hi + pad)) if lo >= 0.0 else (lo - pad, hi + pad)
    for ax, method in zip(axes.flat, methods):
        sub = rows[rows["method"] == method]
        for fi, family in enumerate(families):
            for bi, backbone in enumerate(backbones):
                mask = (sub["shift_family"] == family) & (sub["backbone"].astype(str) == backbone)
                pts = sub[mask]
                if pts.empty:
                    continue
                ax.scatter(
                    pts["true_accuracy"], pts["estimated_accuracy"], s=16, alpha=0.8,
                    zorder=3 if family == "clean" else 2,
                    color=colors(fi % 10), marker=markers[bi % len(markers)], linewidths=0,
                    label=f"{family} · {backbone}" if len(backbones) > 1 else family,
                )
        ax.plot(lim, lim, ls="--", lw=1, color="0.4")
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        ax.set_aspect("equal")
        ax.set_title(f"{method}  (MAE {sub['abs_error_pp'].mean():.2f})", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(methods):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("estimated accuracy", fontsize=8)
    for ax in axes[-1, :]:
        ax.set_xlabel("true accuracy", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(6, len(labels)), fontsize=7,
               frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def plot_temporal(rows: pd.DataFrame, *, title: str) -> "Figure":
    """True and estimated accuracy by test year, one panel per backbone (paper Fig. 8 style).

    Parameters
    ----------
    rows : DataFrame
        Target rows of the ``temporal`` family of one dataset (``shift`` holds the year, or an
        era ``"first-last"`` whose first year places it).
    title : str
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
        Per backbone: the true accuracy (black, thick) and every method's estimate, each the
        mean over seeds, with the seeds' range of the true accuracy shaded.
    """
    plt = pyplot()
    # a year ("2017", graphs) or an era "first-last" (text), plotted at its first year; a
    # period without a year (a table's months "7,8,9") is plotted at its order instead
    shifts = rows["shift"].astype(str)
    years = shifts.str.extract(r"(\d{4})", expand=False)
    if years.isna().any():
        order = {s: i + 1 for i, s in enumerate(dict.fromkeys(shifts))}
        years = shifts.map(order)
    data = rows.assign(year=years.astype(int))
    xlabel = "test year" if shifts.str.fullmatch(r"\d{4}").all() else "era (first year)"
    backbones = sorted(data["backbone"].astype(str).unique())
    methods = methods_in_order(data["method"].tolist())
    ncols = min(4, len(backbones))
    nrows = math.ceil(len(backbones) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 3.0 * nrows + 0.8),
                             squeeze=False, sharey=True, layout="constrained")
    colors = plt.get_cmap("tab10")
    for ax, backbone in zip(axes.flat, backbones):
        sub = data[data["backbone"].astype(str) == backbone]
        truth = sub.drop_duplicates(["seed", "year"]).groupby("year")["true_accuracy"]
        years = truth.mean().index.to_numpy()
        ax.fill_between(years, truth.min(), truth.max(), color="0.85", zorder=1)
        ax.plot(years, truth.mean(), color="black", lw=2.4, label="true", zorder=4)
        for mi, method in enumerate(methods):
            est = sub[sub["method"] == method].groupby("year")["estimated_accuracy"].mean()
            ax.plot(est.index, est.values, marker="o", ms=3, lw=1.2, color=colors(mi % 10),
                    label=method, zorder=3)
        ax.set_title(backbone, fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.set_xlabel(xlabel, fontsize=8)
    for ax in axes.flat[len(backbones):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(6, len(labels)), fontsize=7,
               frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def plot_ablations(rows: pd.DataFrame) -> list[tuple[str, str, "Figure"]]:
    """Figures of an ablation report: frozen groups (paper Fig. 3) and sweeps (Fig. 9–10).

    Parameters
    ----------
    rows : DataFrame
        Target rows (``tables["rows"]``) whose methods are variant labels
        (``alsa-g[freeze=peaks]``, ``alsa-g[alpha=0.5]``, ``alsa-g[default]``).

    Returns
    -------
    list of (file stem, caption, Figure)
        ``ablation-freeze`` when frozen variants exist, ``sweep-<param>`` for every numeric
        parameter with at least one variant; empty when the rows hold no variants. MAE is over
        every target split of a dataset, averaged over seeds, one line or bar group per
        dataset and backbone.
    """
    plt = pyplot()
    parsed = {m: parse_variant(m) for m in rows["method"].unique()}
    if not any(p for _, p in parsed.values()) and not any(m.endswith("[default]") for m in parsed):
        return []
    per_seed = rows.groupby(["dataset", "backbone", "seed", "method"])["abs_error_pp"].mean()
    mae = per_seed.groupby(["dataset", "backbone", "method"]).mean().reset_index()
    mae["group"] = mae["dataset"].astype(str) + " · " + mae["backbone"].astype(str)
    groups = sorted(mae["group"].unique())
    figs: list[tuple[str, str, Figure]] = []

    freeze = [m for m, (_, p) in parsed.items() if "freeze" in p]
    defaults = [m for m in parsed if m.endswith("[default]")]
    if freeze:
        order = sorted(defaults) + sorted(freeze, key=lambda m: (len(parsed[m][1]["freeze"]), m))
        fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) * len(order) / 3), 3.6))
        width = 0.8 / len(order)
        x = np.arange(len(groups))
        for i, method in enumerate(order):
            label = "learn all" if method in defaults else "fix " + parsed[method][1]["freeze"]
            values = [
                float(mae[(mae["group"] == g) & (mae["method"] == method)]["abs_error_pp"].mean())
                for g in groups
            ]
            ax.bar(x + (i - (len(order) - 1) / 2) * width, values, width, label=label)
        ax.set_xticks(x, groups, fontsize=8, rotation=20, ha="right")
        ax.set_ylabel("MAE (percentage points)", fontsize=8)
        ax.legend(fontsize=7, ncol=len(order), frameon=False)
        ax.set_title("ALSA with parameter groups frozen at initialisation", fontsize=9)
        fig.tight_layout()
        figs.append(("ablation-freeze", "ALSA ablation: frozen parameter groups", fig))

    sweep_keys = sorted({k for _, p in parsed.values() for k in p if k != "freeze"})
    colors = plt.get_cmap("tab10")
    for key in sweep_keys:
        points: list[tuple[str, float]] = []
        for method, (_, params) in parsed.items():
            if set(params) == {key}:
                try:
                    points.append((method, float(params[key])))
                except ValueError:
                    continue
        if not points:
            continue
        fig, ax = plt.subplots(figsize=(6.0, 3.6))
        for gi, group in enumerate(groups):
            sub = mae[mae["group"] == group].set_index("method")["abs_error_pp"]
            xy = sorted((v, float(sub[m])) for m, v in points if m in sub.index)
            color = colors(gi % 10)
            if xy:
                ax.plot([p[0] for p in xy], [p[1] for p in xy], marker="o", color=color,
                        label=group)
            for method in defaults:
                if method in sub.index:
                    ax.axhline(float(sub[method]), color=color, ls="--", lw=1, alpha=0.7)
        if key == "n_anchors":
            ax.set_xscale("log")
        ax.set_xlabel(key, fontsize=8)
        ax.set_ylabel("MAE (percentage points)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, frameon=False)
        ax.set_title(f"MAE against {key} (dashed: the default setting)", fontsize=9)
        fig.tight_layout()
        figs.append((f"sweep-{artifact_key(key)}", f"ALSA sweep over {key}", fig))
    return figs


def save_png(fig: "Figure", path: Path, dpi: int = 110) -> bytes:
    """Write ``fig`` as a PNG to ``path``, close it and return the bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    data = buf.getvalue()
    path.write_bytes(data)
    return data
