"""The monitor's time-series figure: estimate, band, reference range, realized accuracy, alerts.

One panel per method, chunks in time order (their period start where every chunk has one,
else their order of arrival, labelled by name):

* the estimate (line and dots) inside its shift-aware band (light fill) and its sampling
  interval (darker fill);
* the reference range: the reference's own estimate (dashed grey line) and its band (grey
  stripe);
* the alert thresholds: ``--alert-below`` (red dashed) and ``--alert-drop`` below the
  reference's estimate (orange dotted);
* the realized accuracy where labels arrived (black crosses), and the band's realized coverage
  next to its nominal level in the panel's title;
* alerts (triangles pointing down, at the estimate: red where the band lies below
  ``--alert-below``, orange where only ``--alert-drop`` fired).

The same figure goes to ``<reports>/monitor/<stream>/monitor.png`` each run (embedded in the
flow run's markdown artifact) and to ``--plot FILE`` (PNG, SVG or PDF by its suffix).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

__all__ = ["FORMATS", "check_plot_path", "render", "save_figure"]

#: Suffixes ``--plot`` accepts (matplotlib's writers for them ship with it).
FORMATS: Final[tuple[str, ...]] = (".png", ".svg", ".pdf")


def check_plot_path(path: Path) -> Path:
    """``--plot FILE``: a ``.png``, ``.svg`` or ``.pdf`` path whose folder exists.

    Raises
    ------
    ValueError
        Naming ``--plot``, what it accepts and what came.
    """
    target = Path(path).expanduser()
    if target.suffix.lower() not in FORMATS:
        raise ValueError(f"--plot must name a {', '.join(FORMATS)} file; got {str(target)!r}.")
    if not target.parent.is_dir():
        raise ValueError(f"--plot {str(target)!r}: the folder {str(target.parent)!r} does not "
                         "exist.")
    if target.is_dir():
        raise ValueError(f"--plot {str(target)!r} is a folder; name a file.")
    return target


def render(
    rows: Sequence[Mapping[str, Any]],
    *,
    title: str,
    references: Mapping[str, tuple[float, tuple[float, float]]],
    alert_below: float | None,
    alert_drop: float | None,
    coverage: Mapping[str, str] | None = None,
) -> Any:
    """Draw the history rows (one stream, one reference) into a matplotlib figure.

    Parameters
    ----------
    rows : sequence of mapping
        ``monitor_history`` rows, oldest first (:func:`storage.monitor.read_history`).
    title : str
    references : mapping
        Per method: ``(reference estimate, (band low, band high))``.
    alert_below, alert_drop : float or None
        The alert rules (fraction, percentage points).
    coverage : mapping, optional
        Per method, a short coverage text for the panel title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import numpy as np

    methods = list(dict.fromkeys(r["method"] for r in rows)) or list(references) or ["-"]
    chunks = list(dict.fromkeys(r["chunk_key"] for r in rows))
    dated = bool(rows) and all(r["period_start"] is not None for r in rows)
    first: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        first.setdefault(r["chunk_key"], r)
    xs: dict[str, Any] = {k: (first[k]["period_start"] if dated else i)
                          for i, k in enumerate(chunks)}
    fig, axes = plt.subplots(len(methods), 1, figsize=(12, 3.2 * len(methods) + 0.8),
                             squeeze=False, sharex=True)
    for ax, method in zip(axes[:, 0], methods, strict=True):
        mine = [r for r in rows if r["method"] == method]
        x = [xs[r["chunk_key"]] for r in mine]

        def col(name: str, rows_: Sequence[Mapping[str, Any]] = mine) -> Any:
            return np.array([np.nan if r[name] is None else float(r[name]) for r in rows_])

        if method in references:
            ref, (rlow, rhigh) = references[method]
            ax.axhspan(rlow, rhigh, color="0.85", zorder=0, label="reference range (its band)")
            ax.axhline(ref, color="0.45", linestyle="--", linewidth=1, label="reference estimate")
            if alert_drop is not None:
                ax.axhline(ref - alert_drop / 100.0, color="tab:orange", linestyle=":",
                           linewidth=1.5, label=f"reference - {alert_drop:g} points")
        if alert_below is not None:
            ax.axhline(alert_below, color="tab:red", linestyle="--", linewidth=1.2,
                       label=f"--alert-below {alert_below:g}")
        if mine:
            ax.fill_between(x, col("shift_low"), col("shift_high"), color="tab:blue",
                            alpha=0.18, step=None, label="band (shift-aware)")
            ax.fill_between(x, col("interval_low"), col("interval_high"), color="tab:blue",
                            alpha=0.35, label="sampling interval")
            ax.plot(x, col("estimated_accuracy"), "o-", color="tab:blue", markersize=3.5,
                    linewidth=1.2, label="estimate")
            real = col("realized_accuracy")
            if np.isfinite(real).any():
                ax.plot(x, real, "x", color="black", markersize=6, mew=1.5,
                        label="realized accuracy")
            kinds = [_kinds(r) for r in mine]
            below = [i for i, k in enumerate(kinds) if "below" in k]
            drop = [i for i, k in enumerate(kinds) if k and "below" not in k]
            if below:
                ax.plot([x[i] for i in below], col("estimated_accuracy")[below], "v",
                        color="tab:red", markersize=9, label="alert: band below")
            if drop:
                ax.plot([x[i] for i in drop], col("estimated_accuracy")[drop], "v",
                        color="tab:orange", markersize=8, label="alert: drop only")
        head = f"{method}"
        if coverage and method in coverage:
            head += f" — {coverage[method]}"
        ax.set_title(head, fontsize=9, loc="left")
        ax.set_ylabel("accuracy")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=max(0.0, ax.get_ylim()[0]), top=min(1.02, ax.get_ylim()[1]))
    last = axes[-1, 0]
    if not dated and chunks:
        names = [str(first[k]["chunk_name"]) for k in chunks]
        step = max(1, len(names) // 20)
        last.set_xticks(list(range(0, len(names), step)))
        last.set_xticklabels(names[::step], rotation=60, ha="right", fontsize=7)
    elif dated:
        fig.autofmt_xdate()
    axes[0, 0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _kinds(row: Mapping[str, Any]) -> set[str]:
    """The alert kinds of a history row (``below``, ``drop``)."""
    import json

    if not row.get("alert"):
        return set()
    alerts = row.get("alerts")
    if alerts is None:
        alerts = json.loads(row["alerts_json"]) if row.get("alerts_json") else []
    return {a["kind"] for a in alerts} or {"drop"}


def save_figure(fig: Any, path: Path, *, dpi: int = 90) -> Path:
    """Write ``fig`` to ``path`` (format by suffix) atomically: a reader never sees half a
    file. Readable by others (a dashboard's user), as any file the umask allows."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        fig.savefig(tmp, format=target.suffix.lower().lstrip(".") or "png", dpi=dpi)
        os.chmod(tmp, 0o644)  # mkstemp made it private
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
