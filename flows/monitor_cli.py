"""``alsa-bench monitor``: estimate accuracy on every new batch of production logits.

Registered on the CLI's Typer app by ``flows/cli.py``. The interface is a contract (issue 33)::

    alsa-bench monitor --reference REF --production PATH
                       [--chunk file|ROWS|1d|1w] [-m METHOD ...] [--alert-below FRACTION]
                       [--alert-drop POINTS] [--labels PATH] [--json] [--plot FILE]
    alsa-bench monitor --demo [-m METHOD ...] [--json] [--plot FILE]

plus ``--wait SECONDS`` (as ``run``, ``report`` and ``doctor``: how long to wait for a state
folder another command holds).

Without ``PREFECT_API_URL`` the command runs :func:`tasks.monitor.run_monitor` directly (no
Prefect server, a few seconds): alerts go to stderr (``alert: ...``), the figure to the state
folder's reports (and ``--plot``). With ``PREFECT_API_URL`` set it runs the ``monitor`` flow
against that server, so the alerts are also Prefect events (automations can notify) and the run
gets its artifacts.

Output: a table of the current chunks (estimate, band, realized accuracy, alerts; ``*`` marks
the chunks this run estimated), the band's realized coverage next to its nominal level, and
where the history is (DuckDB view ``monitor_history``, its Parquet export, the figure);
``--json`` prints the same as one JSON object. User mistakes print one line ``error: ...`` and
exit 2, as do refused production files (after the good ones are stored); nothing prints a
traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

__all__ = ["monitor_command"]

#: Exit status of a user mistake or a refused production file.
EXIT_USAGE = 2
#: Exit status of a failure while running.
EXIT_FAILURE = 1
#: At most this many chunks are listed in the table (the latest ones).
TABLE_CHUNKS = 40


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    text = " ".join(str(message).split()) or "unknown error"
    typer.echo(f"error: {text}", err=True)
    raise typer.Exit(code)


def _fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{float(value):.{digits}f}"


def _print_table(record: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    history = record["history"]
    new = set(record["new_chunks"])
    chunks = list(dict.fromkeys(r["chunk_key"] for r in history))
    shown = set(chunks[-TABLE_CHUNKS:])
    multi = len(record["methods"]) > 1
    table = Table(title=f"Estimated accuracy per chunk of {record['stream']} (chunk "
                        f"{record['chunking']}; * = estimated by this run)",
                  caption=f"band = the {100 * record['level']:.0f} % shift-aware band (the "
                          "sampling interval where the calibration has none); realized = the "
                          "accuracy once labels arrived; ▼ = alert")
    table.add_column("chunk")
    table.add_column("period", justify="right")
    table.add_column("rows", justify="right")
    if multi:
        table.add_column("method")
    table.add_column("estimate", justify="right")
    table.add_column("band", justify="right")
    table.add_column("realized", justify="right")
    table.add_column("alert")
    for r in history:
        if r["chunk_key"] not in shown:
            continue
        alerts = r.get("alerts") or []
        cells = [("* " if r["chunk_name"] in new else "  ") + str(r["chunk_name"]),
                 (r["period_start"] or "")[:10], str(r["n_rows"])]
        if multi:
            cells.append(r["method"])
        band = ("–" if r["shift_low"] is None
                else f"[{r['shift_low']:.3f}, {r['shift_high']:.3f}]")
        cells += [_fmt(r["estimated_accuracy"]), band, _fmt(r["realized_accuracy"]),
                  " ".join(f"▼ {a['kind']}" for a in alerts)]
        table.add_row(*cells)
    console = Console(soft_wrap=True)
    if len(chunks) > TABLE_CHUNKS:
        console.print(f"({len(chunks) - TABLE_CHUNKS} earlier chunks are in the history)")
    Console(soft_wrap=True, width=max(console.width, 110)).print(table)


def _alert_lines(alerts: list[dict[str, Any]]) -> list[str]:
    """One line per chunk and method: its alerts' messages joined (the rule part of each)."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for alert in alerts:
        head, _, rule = alert["message"].partition(": ")
        grouped.setdefault((alert["chunk_key"], head), []).append(rule)
    return [f"{head}: {'; '.join(rules)}" for (_, head), rules in grouped.items()]


def _report(record: dict[str, Any], json_output: bool, extra: list[str] | None = None) -> None:
    """Print the run: JSON, or the table and the lines; stderr gets notes, alerts, errors."""
    if json_output:
        typer.echo(json.dumps(record, indent=1))
    for line in record["refused"]:
        typer.echo(f"error: {line}", err=True)
    if json_output:
        return
    for line in record["notes"]:
        typer.echo(f"note: {line}", err=True)
    for line in record["warnings"]:
        typer.echo(f"warning: {line}", err=True)
    for line in _alert_lines(record["alerts"]):
        typer.echo(f"alert: {line}", err=True)
    if record["history"]:
        _print_table(record)
    else:
        typer.echo(f"No chunk of {record['stream']} estimated yet ({record['files']} file(s) "
                   "listed).")
    new = record["new_chunks"]
    typer.echo(f"This run: {len(new)} new chunk(s), {record['new_estimates']} estimate(s), "
               f"{len(record['alerts'])} alert(s); realized accuracy joined for "
               f"{len(record['realized_joined'])} chunk(s); fits "
               + ", ".join(f"{m} {'from the cache' if c else 'made'}"
                           for m, c in record["fits_from_cache"].items()) + ".")
    for method, cov in record["coverage"].items():
        if cov["n_chunks"]:
            typer.echo(f"Band coverage [{method}]: the band held the realized accuracy in "
                       f"{cov['covered']} of {cov['n_chunks']} labelled chunks "
                       f"({100 * cov['rate']:.0f} %; nominal {100 * cov['level']:.0f} %).")
        else:
            typer.echo(f"Band coverage [{method}]: no labelled chunk yet.")
    for line in extra or []:
        typer.echo(line)
    from storage.paths import db_path

    typer.echo(f"History: {db_path()} (view monitor_history); Parquet export "
               f"{record['export']}" + (f"; figure {record['figure']}" if record["figure"]
                                       else "") + ".")


def _run_plain(options: Any, plot: Path | None, wait: float) -> dict[str, Any]:
    """The run without Prefect, under the state folder's lock."""
    from storage.errors import StorageError
    from storage.lock import state_lock
    from storage.paths import state_dir
    from tasks.monitor import run_monitor

    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with state_lock(folder, wait=wait, purpose="alsa-bench monitor",
                        on_wait=lambda line: typer.echo(line, err=True)):
            record: dict[str, Any] = run_monitor(options, plot=plot).to_record()
    except StorageError as exc:
        _fail(str(exc), EXIT_FAILURE)
    return record


def _run_flow(options: Any, plot: Path | None, wait: float) -> dict[str, Any]:
    """The run as the ``monitor`` flow against the configured Prefect API."""
    from flows.monitor import MonitorInputError, monitor

    try:
        record: dict[str, Any] = monitor(
            reference=str(options.reference), production=options.production,
            chunk=options.chunk.label, methods=list(options.methods),
            alert_below=options.alert_below, alert_drop=options.alert_drop,
            labels=options.labels, plot=None if plot is None else str(plot), wait=wait,
            include_history=True,
        )
    except MonitorInputError as exc:
        _fail(str(exc))
    return record


def monitor_command(
    reference: Annotated[
        Path | None,
        typer.Option("--reference", metavar="REF", show_default=False,
                     help="Reference logits with labels (.npz or .parquet), as estimate --val "
                     "takes them. Required (unless --demo)."),
    ] = None,
    production: Annotated[
        str | None,
        typer.Option("--production", metavar="PATH", show_default=False,
                     help="A folder, or a glob of .npz/.parquet files of production logits "
                     "(one batch per file, or a timestamp column). Required (unless --demo)."),
    ] = None,
    chunk: Annotated[
        str,
        typer.Option("--chunk", metavar="file|ROWS|1d|1w",
                     help="One chunk per file (default), a number of rows, or a day/week of "
                     "the timestamp column."),
    ] = "file",
    method: Annotated[
        list[str] | None,
        typer.Option("--method", "-m", metavar="METHOD",
                     help="Estimator key; repeat for several. Default: auto."),
    ] = None,
    alert_below: Annotated[
        str | None,
        typer.Option("--alert-below", metavar="FRACTION", show_default=False,
                     help="Alert when a chunk's band lies wholly below this accuracy, e.g. "
                     "0.75."),
    ] = None,
    alert_drop: Annotated[
        str | None,
        typer.Option("--alert-drop", metavar="POINTS", show_default=False,
                     help="Alert when an estimate is more than this many percentage points "
                     "below the reference's own estimate, e.g. 5."),
    ] = None,
    labels: Annotated[
        str | None,
        typer.Option("--labels", metavar="PATH", show_default=False,
                     help="Labels that arrived later: a file, folder or glob, matched to "
                     "production files by name (or by their logits); realized accuracy is "
                     "joined in."),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of the table.")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", metavar="FILE", show_default=False,
                     help="Also write the time-series figure here (.png, .svg or .pdf)."),
    ] = None,
    demo: Annotated[
        bool,
        typer.Option("--demo", help="Build and monitor a 30-day offline Fashion-MNIST stream "
                     "(rising corruption, a label shift in the middle)."),
    ] = False,
    wait: Annotated[
        float,
        typer.Option("--wait", metavar="SECONDS", min=0,
                     help="If another alsa-bench command is using the state folder, wait up "
                     "to this long for it (0: fail at once)."),
    ] = 0,
) -> None:
    """Estimate accuracy on every new batch of production logits, with bands and alerts.

    Realized accuracy is joined in when labels arrive; the history is kept in DuckDB (view
    monitor_history) and exported to Parquet.
    """
    from tasks.monitor.figure import check_plot_path
    from tasks.monitor.options import make_options

    stream = None
    if demo:
        given = [flag for flag, value in (("--reference", reference),
                                          ("--production", production),
                                          ("--labels", labels)) if value is not None]
        if given:
            _fail(f"--demo builds its own reference, production files and labels; leave out "
                  f"{', '.join(given)}.")
        stream = _build_demo(wait, quiet=json_output)
        reference, production, labels = stream.reference, str(stream.production), str(
            stream.labels)
        from tasks.monitor.demo import ALERT_BELOW, ALERT_DROP

        alert_below = ALERT_BELOW if alert_below is None else alert_below
        alert_drop = ALERT_DROP if alert_drop is None else alert_drop
    elif reference is None or production is None:
        missing = " and ".join(flag for flag, value in (("--reference", reference),
                                                        ("--production", production))
                               if value is None)
        _fail(f"missing option {missing}; usage: alsa-bench monitor --reference REF "
              "--production PATH [--chunk file|ROWS|1d|1w] [-m METHOD ...] [--alert-below "
              "FRACTION] [--alert-drop POINTS] [--labels PATH] [--json] [--plot FILE] "
              "(or alsa-bench monitor --demo)")
    try:
        options = make_options(reference, production, chunk=chunk, methods=method,
                               alert_below=alert_below, alert_drop=alert_drop, labels=labels)
        plot_path = None if plot is None else check_plot_path(plot)
    except ValueError as exc:
        _fail(str(exc))
    runner = _run_flow if os.environ.get("PREFECT_API_URL") else _run_plain
    try:
        record = runner(options, plot_path, wait)
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except ValueError as exc:  # a bad reference, --production or --labels
        _fail(str(exc))
    except Exception as exc:  # a failure while running: one line, no traceback
        _fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)
    extra: list[str] = []
    if stream is not None:
        from tasks.monitor.demo import demo_summary
        from tasks.monitor.realized import Coverage

        coverage = {m: Coverage(**c) for m, c in record["coverage"].items()}
        extra = [f"Demo stream: {stream.folder} (logits from {stream.source})",
                 *demo_summary(stream, record["history"], coverage)]
        record["demo"] = {"folder": str(stream.folder), "source": stream.source,
                          "truth": stream.truth, "summary": extra[1:]}
    _report(record, json_output, extra)
    if record["refused"]:
        raise typer.Exit(EXIT_USAGE)


def _build_demo(wait: float, *, quiet: bool) -> Any:
    """Build (or reuse) the demo stream under ``<state>/monitor-demo``, holding the folder."""
    from storage.errors import StorageError
    from storage.lock import state_lock
    from storage.paths import state_dir
    from tasks.monitor.demo import build_demo

    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)

    def log(line: str) -> None:
        if not quiet:
            typer.echo(line, err=True)

    try:
        with state_lock(folder, wait=wait, purpose="alsa-bench monitor --demo",
                        on_wait=lambda line: typer.echo(line, err=True)):
            return build_demo(folder / "monitor-demo", log=log)
    except StorageError as exc:
        _fail(str(exc), EXIT_FAILURE)
    except (OSError, ValueError) as exc:  # Fashion-MNIST missing, unreadable
        _fail(f"--demo: {exc}", EXIT_FAILURE)
