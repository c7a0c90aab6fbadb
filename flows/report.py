"""The ``report`` flow: tables, plots and Prefect artifacts from the estimates in DuckDB.

Reads whatever the database holds (all runs, or the ones named) and always writes a fresh
report; the ``benchmark`` flow instead caches its report on the estimates it covers.
"""

from __future__ import annotations

from prefect import flow

from flows.benchmark import print_report
from storage.paths import db_path, reports_dir
from tasks.runtime.refs import ReportRef
from tasks.stages.report import report_fingerprint, report_task
from tasks.stages.versions import stage_code_version


@flow(name="report",
      description="Write <state>/reports/<run>/ and publish the report artifacts")
def report(
    run_name: str | None = None,
    run_keys: list[str] | None = None,
    methods: list[str] | None = None,
    publish_artifacts: bool = True,
) -> ReportRef:
    """Write ``<state>/reports/<run_name>/`` from ``report_rows`` and publish it as artifacts.

    Parameters
    ----------
    run_name : str, optional
        Report folder name; default the suite names of the rows reported.
    run_keys : list of str, optional
        Only these runs; default every run in the database.
    methods : list of str, optional
        Only these methods; default every method that is not an ablation variant.
    publish_artifacts : bool, default True
        Publish tables ``<run>-mae``, ``<run>-correlation``, ``<run>-coverage`` (where
        intervals are stored) and markdown ``<run>-report``.

    Returns
    -------
    ReportRef
    """
    name = run_name or _default_name(run_keys)
    return report_task.with_options(refresh_cache=True)(
        report_fingerprint([], run_keys, methods), run_keys, str(db_path().resolve()),
        str(reports_dir().resolve()), name, methods, publish_artifacts,
        stage_code_version("report"),
    )


def _default_name(run_keys: list[str] | None) -> str:
    from storage.db import connect
    from storage.runs import list_runs

    wanted = set(run_keys or [])
    with connect(db_path(), read_only=True) as con:
        suites = sorted({r.suite for r in list_runs(con) if not wanted or r.run_key in wanted})
    return "-".join(suites) or "report"


if __name__ == "__main__":
    print_report(report())
