"""The closing report of a run over several suites (``make bench``): one report over all of them.

Each suite's report measures "Which estimate to trust" only where it holds at least
:data:`~tasks.report.TRUST_MIN_DATASETS` datasets (leave-one-dataset-out), and a suite of
``make bench`` has three or fewer, so the section is measured here, over every suite the run
covered, and :func:`trust_summary` gives the lines the terminal shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from tasks.report import ReportRef, write_report

__all__ = ["CLOSING_REPORT", "trust_summary", "write_closing_report"]

#: Folder name (under the reports folder) of the report over every suite of a run.
CLOSING_REPORT = "bench-all"


def write_closing_report(
    suites: Sequence[str],
    *,
    db: str | Path | None = None,
    out_dir: str | Path | None = None,
) -> ReportRef:
    """Write the report over every run of ``suites`` (``<reports>/bench-all/``).

    Parameters
    ----------
    suites : sequence of str
        The suites of the run (at least one).
    db, out_dir : path, optional
        As :func:`tasks.report.write_report`.

    Raises
    ------
    ValueError
        If ``suites`` is empty or the database holds no run of them.
    """
    from storage.db import connect
    from storage.estimates import read_report_rows

    if not suites:
        raise ValueError("The 'suites' argument of write_closing_report must name at least one "
                         "suite; got none.")
    with connect(db, read_only=True) as con:
        rows = read_report_rows(con)
    keys = sorted(rows.loc[rows["suite"].isin(list(suites)), "run_key"].unique().tolist())
    if not keys:
        raise ValueError(f"The database holds no run of the suites {', '.join(suites)}; "
                         f"nothing to report.")
    return write_report(db, out_dir, CLOSING_REPORT, publish_artifacts=False, run_keys=keys,
                        title=f"alsa-bench report: {', '.join(suites)} together",
                        anchor_plots=False)


def trust_summary(report: ReportRef) -> str:
    """The terminal's lines of a report's "Which estimate to trust": ``auto`` against the best
    single method per dataset (``trust_auto.csv``), or the line saying why it is not measured."""
    folder = Path(report.folder)
    table = folder / "trust_auto.csv"
    if table.is_file():
        auto = pd.read_csv(table)
        text = auto.to_string(index=False, float_format=lambda v: f"{v:.2f}")
        return ("Which estimate to trust (leave-one-dataset-out, MAE in pp; report.md has the "
                f"band):\n{text}")
    for line in (folder / "mae.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("Which estimate to trust"):
            return line
    return "Which estimate to trust: not measured (no trust table in this report)."
