"""``alsa-bench calibrate``: refit the shift-aware bands and ``auto`` from a benchmark database.

The package ships a calibration fit from ``make bench``'s database; a user with their own models
and shifts refits it from their benchmark (``alsa-bench run`` into a state folder, then this
command), and every later ``estimate`` and ``run`` of that state folder uses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(2)


def calibrate_command(
    db: Annotated[
        Path | None,
        typer.Option("--db", metavar="PATH", show_default=False,
                     help="Benchmark database to learn from (default: the state folder's "
                          "bench.duckdb)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="FILE", show_default=False,
                     help="Where to write the calibration (default: the state folder's "
                          "calibration.json, used from then on)."),
    ] = None,
    evaluate: Annotated[
        bool,
        typer.Option("--evaluate/--no-evaluate",
                     help="Also print the leave-one-dataset-out evidence (coverage, width, "
                          "auto's MAE against the best single method)."),
    ] = True,
) -> None:
    """Fit the shift-aware bands and auto's combination from a benchmark database."""
    import duckdb

    from storage.paths import calibration_path, db_path
    from tasks.report.trust_calibration import calibrate_database, calibration_table, trust_tables

    source = db if db is not None else db_path()
    target = out if out is not None else calibration_path()
    try:
        calibration = calibrate_database(source)
    except (FileNotFoundError, ValueError, duckdb.Error) as exc:
        raise _fail(f"alsa-bench calibrate --db {source}: {exc}") from None
    written = calibration.save(target)
    rows = calibration.source.get("rows_per_dataset", {})
    typer.echo(f"wrote {written} ({calibration.source.get('rows')} target splits from "
               f"{len(rows)} datasets: {', '.join(f'{k} {v}' for k, v in rows.items())})")
    if evaluate:
        con = duckdb.connect(str(source), read_only=True)
        try:
            table, _ = calibration_table(con)
        finally:
            con.close()
        tables = trust_tables(table)
        typer.echo("\nLeave-one-dataset-out: auto against the best single method (MAE, pp)")
        typer.echo(tables["auto"].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        band = tables["band"]
        typer.echo("\nThe shift band of auto, held out (coverage, mean width in pp)")
        typer.echo(band[band.method == "auto"][["dataset", "coverage", "width_pp", "mae_pp"]]
                   .to_string(index=False, float_format=lambda v: f"{v:.2f}"))
