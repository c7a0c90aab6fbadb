"""``alsa-bench calibrate``: refit the shift-aware bands and ``auto`` from benchmark databases.

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
        list[Path] | None,
        typer.Option("--db", metavar="PATH", show_default=False,
                     help="Benchmark database to learn from; repeat for several (default: the "
                          "state folder's bench.duckdb). Only the development groups are fit "
                          "on: the sealed groups (estimators/trust/sealed.py) never are."),
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
                     help="Also print the leave-one-group-out evidence on the development "
                          "groups (coverage, width, auto's MAE against the best single "
                          "method)."),
    ] = True,
) -> None:
    """Fit the shift-aware bands and auto's combination from one or more benchmark databases."""
    import duckdb

    from storage.paths import calibration_path, db_path
    from tasks.report.trust_calibration import (
        CALIBRATED_METHODS, _complete, calibrate_databases, trust_tables,
    )
    from tasks.report.trust_rows import read_trust_rows, split_development

    sources = list(db) if db else [db_path()]
    if not db and not sources[0].is_file():
        raise _fail(f"alsa-bench calibrate: the state folder holds no benchmark database "
                    f"({sources[0]}); run `alsa-bench run` first, or name databases with --db "
                    f"PATH.")
    target = out if out is not None else calibration_path()
    where = " ".join(f"--db {s}" for s in sources)
    try:
        calibration = calibrate_databases(sources)
    except (FileNotFoundError, ValueError, duckdb.Error) as exc:
        raise _fail(f"alsa-bench calibrate {where}: {exc}") from None
    written = calibration.save(target)
    rows = calibration.source.get("rows_per_group", {})
    sealed = calibration.source.get("sealed_groups_left_out", [])
    typer.echo(f"wrote {written} ({calibration.source.get('rows')} target splits from "
               f"{len(rows)} development groups: {', '.join(f'{k} {v}' for k, v in rows.items())};"
               f" sealed groups left out: {', '.join(sealed) or 'none'})")
    if evaluate:
        dev, _ = split_development(read_trust_rows(sources))
        table, keys = _complete(dev, CALIBRATED_METHODS)
        if len(set(table.groups.tolist())) < 4:
            typer.echo("(no leave-one-group-out evidence: it needs at least 4 development "
                       "groups)")
            return
        tables = trust_tables(table, concept=keys["concept"].to_numpy(dtype=bool), keys=keys)
        typer.echo("\nLeave-one-group-out: auto against the best single method (MAE, pp)")
        typer.echo(tables["auto"].to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        band = tables["band"]
        typer.echo("\nThe shift band of auto, held out (coverage, mean width in pp)")
        typer.echo(band[band.method == "auto"][["dataset", "coverage", "width_pp", "mae_pp"]]
                   .to_string(index=False, float_format=lambda v: f"{v:.2f}"))
