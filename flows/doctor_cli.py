"""``alsa-bench doctor``: check the state folder, and repair what can safely be recomputed.

Registered on the CLI's Typer app by ``flows/cli.py`` with
``app.command("doctor")(doctor_command)``::

    alsa-bench doctor              # one line per finding, exit 1; "healthy", exit 0
    alsa-bench doctor --repair     # also quarantine/delete what the pipeline recomputes, say each
    alsa-bench doctor --json       # machine output: {"folder", "healthy", "checked", "findings"}
    alsa-bench doctor --wait 60    # a folder in use: wait up to 60 s for its holder

The checks are those of :mod:`storage.doctor` (database opens, schema version, duplicate keys,
orphan rows and files, checkpoint and Parquet hashes, temporary files, staging folders, Prefect
cache records, stale lock records). The doctor takes the state folder's lock first
(:func:`storage.lock.state_lock`), so it never judges files a running pipeline is writing; a
folder in use gives the one "in use" line and exit status 1, at once, or after waiting up to
``--wait SECONDS`` for the holder (as ``run`` and ``report``; the "waiting for" line goes to
stderr, so ``--json`` output stays one JSON object). No traceback is ever printed.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from storage.doctor import DoctorReport, examine
from storage.errors import StateBusyError
from storage.lock import state_lock
from storage.paths import state_dir

__all__ = ["EXIT_FINDINGS", "doctor_command", "render"]

#: Exit status when something was found (and not repaired), or the doctor could not look.
EXIT_FINDINGS = 1


def render(report: DoctorReport) -> list[str]:
    """The lines ``alsa-bench doctor`` prints for ``report``.

    Parameters
    ----------
    report : DoctorReport

    Returns
    -------
    list of str
        ``"<folder>: healthy (...)"`` when there is nothing to fix; otherwise one line per
        finding, then a summary line.
    """
    checked = report.checked
    what = (f"schema v{checked.get('schema_version')}, {checked.get('runs', 0)} runs, "
            f"{checked.get('checkpoints', 0)} checkpoints, {checked.get('results', 0)} results, "
            f"{checked.get('cache_records', 0)} cache records")
    lines = [f.line() for f in report.findings]
    if not report.findings:
        return [f"{report.folder}: healthy ({what})"]
    repaired = sum(f.repaired for f in report.findings)
    left = len(report.findings) - repaired
    if left:
        lines.append(f"{report.folder}: {len(report.findings)} findings, {repaired} repaired, "
                     f"{left} left" + ("" if repaired else "; `alsa-bench doctor --repair` "
                                       "fixes those marked safe to recompute"))
    else:
        lines.append(f"{report.folder}: healthy after repair ({repaired} repaired; {what})")
    return lines


def doctor_command(
    repair: Annotated[
        bool,
        typer.Option(
            "--repair",
            help="Set right what the pipeline recomputes: move damaged checkpoints, Parquet "
            "results, cache records and a damaged database to quarantine/ (bytes untouched); "
            "delete temporary files, staging folders and stale lock records.",
        ),
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Machine output: one JSON object.")
    ] = False,
    wait: Annotated[
        float,
        typer.Option(
            "--wait", metavar="SECONDS", min=0,
            help="If another alsa-bench command is using the state folder, wait up to this "
            "long for it (0: fail at once).",
        ),
    ] = 0,
) -> None:
    """Check the state folder ($ALSA_BENCH_HOME): database, schema, duplicates, orphans, hashes,
    cache records and locks. Exit 0 when healthy, 1 with one line per finding otherwise."""
    folder = state_dir()
    if not folder.is_dir():
        typer.echo(f"error: no state folder at {folder}; point ALSA_BENCH_HOME at the folder "
                   "that holds bench.duckdb", err=True)
        raise typer.Exit(EXIT_FINDINGS)
    try:
        with state_lock(folder, wait=wait, purpose="doctor",
                        on_wait=lambda line: typer.echo(line, err=True)) as lock:
            report = examine(folder, repair=repair, stale_lock=lock.stale)
    except StateBusyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_FINDINGS) from None
    except Exception as exc:  # the doctor must never print a traceback
        first = (str(exc).strip().splitlines() or [""])[0]
        typer.echo(f"error: doctor could not examine {folder}: {type(exc).__name__}: {first}",
                   err=True)
        raise typer.Exit(EXIT_FINDINGS) from None
    if json_out:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        for line in render(report):
            typer.echo(line)
    if not report.healthy:
        raise typer.Exit(EXIT_FINDINGS)
