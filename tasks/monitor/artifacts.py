"""A monitor run in Prefect: the table and figure artifacts, and each alert as an event, a log
line and an artifact.

Prefect is imported inside the functions that need a Prefect API (:func:`publish`,
:func:`emit_alerts`); :func:`history_table` and :func:`alerts_markdown` are plain.

Artifacts (keys are lowercase-dash; the same key across runs forms a version history):

``monitor-<stream>``
    Table: one row per current chunk and method (period, rows, estimate, band, sampling
    interval, realized accuracy, alert).
``monitor-<stream>-figure``
    Markdown with the time-series figure (a small PNG inline) and the band's coverage.
``monitor-<stream>-alerts``
    Markdown listing this run's alerts (only when some fired).

Event ``alsa-bench.monitor.alert``, one per alert: resource ``alsa-bench.monitor.<stream>``
(name: the stream's path), labels ``alsa-bench.chunk``, ``alsa-bench.method``,
``alsa-bench.kind`` (``below`` / ``drop``) and ``alsa-bench.direction`` (``down``); the payload
is the alert's record, with a one-line ``message``. An automation on this event (docs/MONITOR.md)
turns it into a notification.
"""

from __future__ import annotations

import base64
from typing import Any

from tasks.monitor.alerts import ALERT_EVENT
from tasks.monitor.runner import MonitorResult

__all__ = ["alerts_markdown", "emit_alerts", "history_table", "publish", "resource_id"]


def resource_id(result: MonitorResult) -> str:
    """The Prefect resource of a stream: ``alsa-bench.monitor.<stream slug>``."""
    return f"alsa-bench.monitor.{result.slug}"


def _num(value: Any, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def history_table(result: MonitorResult) -> list[dict[str, Any]]:
    """The table artifact's rows (native Python types only)."""
    new = set(result.new_chunks)
    rows = []
    for r in result.history:
        rows.append({
            "chunk": r["chunk_name"],
            "period_start": None if r["period_start"] is None else r["period_start"].isoformat(),
            "rows": int(r["n_rows"]),
            "method": r["method"],
            "estimate": _num(r["estimated_accuracy"]),
            "band_low": _num(r["shift_low"]),
            "band_high": _num(r["shift_high"]),
            "interval_low": _num(r["interval_low"]),
            "interval_high": _num(r["interval_high"]),
            "realized": _num(r["realized_accuracy"]),
            "alert": bool(r["alert"]),
            "new_this_run": r["chunk_name"] in new,
        })
    return rows


def alerts_markdown(result: MonitorResult) -> str:
    """This run's alerts as markdown (an empty string when none fired)."""
    if not result.alerts:
        return ""
    lines = [f"# Accuracy alerts: {result.stream}", "",
             "| chunk | method | kind | direction | estimate | band | threshold |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for a in result.alerts:
        x = a.alert
        lines.append(f"| {a.chunk_name} | {a.method} | {x.kind} | {x.direction} | "
                     f"{x.estimate:.3f} | [{x.band[0]:.3f}, {x.band[1]:.3f}] | "
                     f"{x.threshold:.3f} ({x.option}) |")
    lines += ["", *(f"- {a.message}" for a in result.alerts)]
    return "\n".join(lines)


def _figure_markdown(result: MonitorResult) -> str:
    lines = [f"# Monitor: {result.stream}", "",
             f"Chunking `{result.chunking}`, reference `{result.reference}`, methods "
             f"{', '.join(result.methods)}; this run estimated {len(result.new_chunks)} new "
             f"chunk(s) and raised {len(result.alerts)} alert(s).", ""]
    lines += [f"- {c.line()}" for c in result.coverage.values()]
    if result.figure is not None and result.figure.is_file():
        data = base64.b64encode(result.figure.read_bytes()).decode("ascii")
        lines += ["", f"![monitor](data:image/png;base64,{data})", "",
                  f"Figure file: `{result.figure}`"]
    return "\n".join(lines)


def publish(result: MonitorResult) -> None:
    """Create the run's artifacts (needs a Prefect API, inside a flow run)."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    key = f"monitor-{result.slug}"
    create_table_artifact(key=key, table=history_table(result),
                          description=f"Estimated accuracy per chunk of {result.stream}")
    create_markdown_artifact(key=f"{key}-figure", markdown=_figure_markdown(result),
                             description=f"Accuracy over time of {result.stream}")
    if result.alerts:
        create_markdown_artifact(key=f"{key}-alerts", markdown=alerts_markdown(result),
                                 description=f"{len(result.alerts)} accuracy alert(s) of "
                                 f"{result.stream}")


def emit_alerts(result: MonitorResult) -> int:
    """Emit one ``alsa-bench.monitor.alert`` event per alert of this run.

    Returns
    -------
    int
        How many events were handed to Prefect's events client.
    """
    from prefect.events import emit_event

    sent = 0
    for a in result.alerts:
        event = emit_event(
            event=ALERT_EVENT,
            resource={
                "prefect.resource.id": resource_id(result),
                "prefect.resource.name": result.stream,
                "alsa-bench.chunk": a.chunk_name,
                "alsa-bench.method": a.method,
                "alsa-bench.kind": a.alert.kind,
                "alsa-bench.direction": a.alert.direction,
            },
            payload=a.to_record(),
        )
        sent += event is not None
    return sent
