"""Report stage: the Prefect task that writes a report over the runs it is given.

The report itself is :func:`tasks.report.write_report`; :func:`report_fingerprint` says what a
report folder covers, so that a cached report is recomputed when its selection changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from tasks.runtime.refs import EstimatesRef, ReportRef


# ------------------------------------------------------------------------------- the @task
from prefect import task  # noqa: E402  (the plain function above needs no Prefect)

from tasks.stages.common import (  # noqa: E402
    LOCK_RETRY_DELAYS,
    STAGE_CACHE,
    forget_failure_record,
    log_task_failure,
    retry_on_lock,
)

@task(
    name="report",
    cache_policy=STAGE_CACHE,
    on_failure=[log_task_failure, forget_failure_record],
    retries=len(LOCK_RETRY_DELAYS),
    retry_delay_seconds=LOCK_RETRY_DELAYS,
    retry_condition_fn=retry_on_lock,
    task_run_name="report-{run_name}",
)
def report_task(
    fingerprint: str,
    run_keys: list[str] | None,
    db: str,
    out_dir: str,
    run_name: str,
    methods: list[str] | None,
    publish_artifacts: bool,
    code_version: str,
) -> ReportRef:
    """Write ``<out_dir>/<run_name>/`` and the artifacts (:func:`tasks.report.write_report`).

    ``fingerprint`` (:func:`report_fingerprint`) identifies what is reported, so an unchanged
    benchmark keeps its cached report; ``run_keys`` selects the runs (None: every run in the
    database).
    """
    from tasks.report import write_report

    return write_report(
        db, out_dir, run_name, publish_artifacts, run_keys=run_keys, methods=methods,
        fingerprint=fingerprint,
    )


def report_fingerprint(
    estimates: Sequence[EstimatesRef], run_keys: Sequence[str] | None,
    methods: Sequence[str] | None,
) -> str:
    """Digest of what a report covers: the estimates' digests (per run and method), the runs and
    the methods.

    Written into the report folder by :func:`tasks.report.write_report`, so a cached report
    whose folder was since re-written for another selection is recognised as stale.

    Returns
    -------
    str
        24 hexadecimal characters.
    """
    import hashlib
    import json

    payload = {
        "estimates": sorted([e.run_key, e.method, e.digest] for e in estimates),
        "run_keys": None if run_keys is None else sorted(run_keys),
        "methods": None if methods is None else sorted(methods),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]

