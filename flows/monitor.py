"""The ``monitor`` flow: estimate every new chunk of production logits, alert, keep the history.

Sequencing only: check the options, hold the state folder, run :func:`tasks.monitor.run_monitor`,
then publish: the table and figure artifacts, and each alert three ways (a Prefect event
``alsa-bench.monitor.alert``, a warning in the run's log, the ``monitor-<stream>-alerts``
artifact). A production file that is refused (class count, probabilities, NaN/inf) fails the
run *after* every good chunk is stored and published, so the run shows red until the file is
fixed or removed.

``prefect.yaml`` deploys it on a schedule (``monitor-daily``); :func:`notify_alerts_by_webhook`
creates the automation that posts every alert to a webhook (docs/MONITOR.md). ``alsa-bench
monitor`` runs this flow when ``PREFECT_API_URL`` is set (a server to send events to), and the
same plain function without Prefect otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from storage.lock import state_lock
from storage.paths import state_dir
from tasks.monitor import make_options, run_monitor
from tasks.monitor.alerts import ALERT_EVENT
from tasks.monitor.artifacts import emit_alerts, publish
from tasks.monitor.figure import check_plot_path

__all__ = ["MonitorInputError", "monitor", "notify_alerts_by_webhook"]

#: Name of the webhook block and of the automation :func:`notify_alerts_by_webhook` creates.
WEBHOOK_BLOCK = "alsa-bench-monitor-webhook"
AUTOMATION = "alsa-bench monitor alerts"


class MonitorInputError(ValueError):
    """Production files were refused; the good ones are stored (the message lists the bad)."""


@flow(name="monitor",
      description="Estimate accuracy on every new chunk of production logits: bands, alerts, "
                  "realized accuracy, DuckDB history")
def monitor(
    reference: str,
    production: str,
    chunk: str = "file",
    methods: list[str] | None = None,
    alert_below: float | None = None,
    alert_drop: float | None = None,
    labels: str | None = None,
    plot: str | None = None,
    wait: float = 600.0,
    include_history: bool = False,
) -> dict[str, Any]:
    """One monitor run (``alsa-bench monitor``'s options, as flow parameters).

    Parameters
    ----------
    reference : str
        Logits and labels of the reference (``.npz`` / ``.parquet``).
    production : str
        A folder or a glob of production files.
    chunk : str, default "file"
        ``file``, a row count, ``1d`` or ``1w``.
    methods : list of str, optional
        Estimator keys; default ``["auto"]``.
    alert_below : float, optional
        Alert when a chunk's band lies wholly below this accuracy.
    alert_drop : float, optional
        Alert when an estimate is more than this many points below the reference's own.
    labels : str, optional
        Label files (file, folder or glob).
    plot : str, optional
        Also write the figure to this file.
    wait : float, default 600
        Seconds to wait for the state folder when another command holds it.
    include_history : bool, default False
        Return the history rows too (``alsa-bench monitor`` prints them).

    Returns
    -------
    dict
        :meth:`tasks.monitor.MonitorResult.to_record` (without the history rows unless asked).

    Raises
    ------
    ValueError
        Bad options or reference (before anything is written).
    MonitorInputError
        Refused production files (after the good chunks are stored and published).
    """
    from prefect.runtime import flow_run

    logger = get_run_logger()
    options = make_options(reference, production, chunk=chunk, methods=methods,
                           alert_below=alert_below, alert_drop=alert_drop, labels=labels,
                           run_id=str(flow_run.id) if flow_run.id else None)
    plot_path = check_plot_path(Path(plot)) if plot else None
    with state_lock(state_dir(), wait=wait, purpose="monitor flow",
                    on_wait=lambda line: logger.info("%s", line)):
        result = run_monitor(options, plot=plot_path)
    for line in result.notes:
        logger.info("note: %s", line)
    for line in result.warnings:
        logger.warning("%s", line)
    logger.info("%s: %d new chunk(s) (%s), %d estimate(s); realized accuracy joined for %d",
                result.stream, len(result.new_chunks), ", ".join(result.new_chunks) or "none",
                result.new_estimates, len(result.realized_joined))
    publish(result)
    for alert in result.alerts:
        logger.warning("%s", alert.message)
    emitted = emit_alerts(result)
    if result.alerts:
        logger.info("emitted %d %s event(s)", emitted, ALERT_EVENT)
    for coverage in result.coverage.values():
        logger.info("%s", coverage.line())
    if result.refused:
        for line in result.refused:
            logger.error("%s", line)
        raise MonitorInputError(f"{len(result.refused)} production file(s) refused (the "
                                f"others are stored): {result.refused[0]}")
    summary = result.to_record()
    if not include_history:
        summary.pop("history")
    return summary


def notify_alerts_by_webhook(
    url: str, *, block_name: str = WEBHOOK_BLOCK, automation_name: str = AUTOMATION,
) -> str:
    """Create the automation that posts every monitor alert to a webhook; its id.

    A Prefect ``CustomWebhookNotificationBlock`` named ``block_name`` (saved, overwriting one of
    the same name) receives a JSON body ``{"text": ..., "subject": ..., "body": ...}``; the
    automation fires on each ``alsa-bench.monitor.alert`` event of any stream
    (``alsa-bench.monitor.*``) and sends the alert's one-line message. Needs ``PREFECT_API_URL``
    (a running server: the automation lives there).

    Parameters
    ----------
    url : str
        The webhook (Slack, Teams and most chat tools take ``{"text": ...}``).
    block_name, automation_name : str

    Returns
    -------
    str
        The automation's id.
    """
    from datetime import timedelta

    from prefect.automations import Automation, EventTrigger, Posture, SendNotification
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    block = CustomWebhookNotificationBlock(
        name=block_name, url=url, method="POST",
        json_data={"text": "{{subject}}: {{body}}", "subject": "{{subject}}", "body": "{{body}}"},
    )
    block_id = block.save(block_name, overwrite=True)
    automation = Automation(
        name=automation_name,
        description="Posts each alsa-bench monitor alert to a webhook",
        trigger=EventTrigger(
            expect={ALERT_EVENT}, match={"prefect.resource.id": "alsa-bench.monitor.*"},
            posture=Posture.Reactive, threshold=1, within=timedelta(0),
        ),
        actions=[SendNotification(
            block_document_id=block_id,
            subject="alsa-bench monitor alert ({{ event.resource['alsa-bench.direction'] }})",
            body="{{ event.payload.message }}",
        )],
    )
    return str(automation.create().id)
