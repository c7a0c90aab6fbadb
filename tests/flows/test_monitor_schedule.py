"""The ``monitor`` deployment on a real Prefect server: its schedule creates runs, each run
estimates exactly the files that are new, and an alert reaches a webhook on 127.0.0.1.

What the README and docs/MONITOR.md promise, end to end: ``prefect --no-prompt deploy`` of
``prefect.yaml``'s ``monitor-hourly`` (its parameters pointed at a temporary stream), an interval
schedule added with ``prefect deployment schedule create``, the automation of
:func:`flows.monitor.notify_alerts_by_webhook`, and ``prefect worker start``. The scheduler's
loop is shortened to 5 s and the worker polls every 2 s, so the first scheduled run starts within
seconds; the whole test takes two to three minutes on 2 busy cores. Marked ``reliability``
(``make test-reliability``, CI's reliability tier).

Which run estimated what is read from the history's Parquet export (``<state>/monitor/
history.parquet``, rewritten atomically by every run), so the test never opens the DuckDB file a
worker's run may be writing.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.flows.test_schedules import ROOT, SERVER_START_S, Server, _child_env, _free_port, \
    _poll, _prefect

pytestmark = [pytest.mark.flow, pytest.mark.reliability,
              pytest.mark.skipif(sys.platform == "win32", reason="needs process groups")]

#: Bounds for a busy 2-core machine; every wait polls and returns as soon as it holds.
RUN_WAIT_S = 240.0
HOOK_WAIT_S = 120.0
DEPLOYMENT = "monitor/monitor-hourly"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``prefect server start`` with a 5-second scheduler loop."""
    home = tmp_path_factory.mktemp("monitor-server")
    port = _free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = _child_env(PREFECT_HOME=str(home / "prefect-home"), PREFECT_API_URL=api_url,
                     PREFECT_SERVER_UI_ENABLED="false",
                     PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="5")
    log = home / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port)],
            cwd=home, env={k: v for k, v in env.items() if k != "PREFECT_API_URL"},
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    srv = Server(api_url=api_url, home=home, log=log, env=env)

    def healthy() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"prefect server start exited {proc.returncode}:\n{srv.log_tail()}")
        try:
            return httpx.get(f"{api_url}/health", timeout=5.0).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        _poll(healthy, SERVER_START_S, "the Prefect server's /api/health", srv, every=1.0)
        yield srv
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


class _Hook(http.server.BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _batch(path: Path, seed: int, signal: float, scale: float = 1.0) -> None:
    """A production file written under a temporary name and renamed (complete when seen)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, 300)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as handle:
        np.savez(handle, logits=scale * rng.normal(size=(300, 3)) + signal * np.eye(3)[y])
    os.replace(tmp, path)


def _export(state: Path) -> list[dict[str, Any]]:
    """The history's Parquet export (written atomically by every run), as rows."""
    export = state / "monitor" / "history.parquet"
    if not export.exists():
        return []
    return pq.read_table(export, columns=["run_id", "chunk_name", "alert"]).to_pylist()


def _estimated_by_run(state: Path) -> dict[str, set[str]]:
    """Chunk names estimated by each run id, from the history's Parquet export."""
    table = _export(state)
    out: dict[str, set[str]] = {}
    for row in table:
        out.setdefault(row["run_id"], set()).add(row["chunk_name"])
    return out


def test_scheduled_runs_estimate_exactly_the_new_files_and_alerts_reach_the_webhook(
    server: Server, tmp_path: Path,
) -> None:
    started = time.monotonic()
    state, prod = tmp_path / "state", tmp_path / "prod"
    prod.mkdir()
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    np.savez(tmp_path / "ref.npz", logits=rng.normal(size=(600, 3)) + 2.0 * np.eye(3)[y],
             labels=y)
    _batch(prod / "day-1.npz", 1, 2.0)
    _batch(prod / "day-2.npz", 2, 2.0)

    handler = type("Hook", (_Hook,), {"received": []})
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    hook_url = f"http://127.0.0.1:{hook.server_address[1]}/hook"

    env = {**server.env, "ALSA_BENCH_HOME": str(state), "PYTHONDONTWRITEBYTECODE": "1",
           "PREFECT_WORKER_QUERY_SECONDS": "2", "PREFECT_WORKER_PREFETCH_SECONDS": "5"}
    params = {"reference": str(tmp_path / "ref.npz"), "production": str(prod),
              "methods": ["ac"], "alert_below": 0.7, "alert_drop": None, "labels": None}
    worker = None
    try:
        _prefect(server, "work-pool", "create", "alsa-bench", "--type", "process",
                 cwd=server.home)
        _prefect(server, "--no-prompt", "deploy", "--name", "monitor-hourly", "--params",
                 json.dumps(params), cwd=ROOT, env=env)
        deployment = server.get("/deployments/name/" + DEPLOYMENT)
        assert deployment["parameters"]["production"] == str(prod)
        assert [s["schedule"]["cron"] for s in deployment["schedules"]] == ["5 * * * *"]
        made = subprocess.run(
            [sys.executable, "-c", "import sys; from flows.monitor import "
             "notify_alerts_by_webhook as n; print(n(sys.argv[1]))", hook_url],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert made.returncode == 0, made.stderr[-3000:]
        _prefect(server, "deployment", "schedule", "create", DEPLOYMENT, "--interval", "20",
                 cwd=server.home)
        worker = subprocess.Popen(
            [sys.executable, "-m", "prefect", "worker", "start", "--pool", "alsa-bench",
             "--limit", "1"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )

        def completed() -> list[dict[str, Any]]:
            return server.post("/flow_runs/filter", {
                "deployments": {"id": {"any_": [deployment["id"]]}},
                "flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}},
                "sort": "START_TIME_ASC", "limit": 50,
            })

        def failed() -> None:
            bad = server.post("/flow_runs/filter", {
                "deployments": {"id": {"any_": [deployment["id"]]}},
                "flow_runs": {"state": {"type": {"any_": ["FAILED", "CRASHED"]}}}})
            if bad:
                logs = server.post("/logs/filter", {
                    "logs": {"flow_run_id": {"any_": [bad[0]["id"]]}}, "limit": 50})
                pytest.fail(f"a monitor run {bad[0]['state']['type']}: "
                            + "\n".join(line["message"] for line in logs)[-3000:])

        def first_run() -> list[dict[str, Any]] | None:
            failed()
            runs = completed()
            return runs if runs and _estimated_by_run(state) else None

        runs = _poll(first_run, RUN_WAIT_S, "a completed scheduled run of " + DEPLOYMENT,
                     server)
        assert all(run["auto_scheduled"] for run in runs), "runs not made by the scheduler"
        by_run = _estimated_by_run(state)
        assert by_run == {runs[0]["id"]: {"day-1.npz", "day-2.npz"}}

        # a bad day: logits close to uniform, so even the band's top lies below 0.7
        _batch(prod / "day-3.npz", 3, 0.0, scale=0.2)
        new_at = datetime.now(UTC)

        def estimated_day_3() -> dict[str, set[str]] | None:
            failed()
            found = _estimated_by_run(state)
            return found if any("day-3.npz" in names for names in found.values()) else None

        by_run = _poll(estimated_day_3, RUN_WAIT_S, "a scheduled run that estimates day-3.npz",
                       server)
        [later] = [run_id for run_id, names in by_run.items() if run_id != runs[0]["id"]]
        assert by_run[later] == {"day-3.npz"}  # exactly the new file, nothing again
        assert {r["chunk_name"]: r["alert"] for r in _export(state)} == {
            "day-1.npz": False, "day-2.npz": False, "day-3.npz": True}
        later_run = server.get(f"/flow_runs/{later}")
        assert later_run["auto_scheduled"] and later_run["deployment_id"] == deployment["id"]
        # every other completed run found nothing new: no estimate carries its run id
        assert set(by_run) == {runs[0]["id"], later}

        def delivered() -> list[dict[str, Any]] | None:
            got = [r for r in handler.received if "day-3.npz" in r.get("body", "")]
            return got or None

        [post] = _poll(delivered, HOOK_WAIT_S, f"the alert's webhook POST to {hook_url}",
                       server)[:1]
        assert "accuracy alert (down) on day-3.npz [ac]" in post["body"]
        assert "--alert-below 0.7" in post["body"]
        assert post["subject"] == "alsa-bench monitor alert (down)"
        assert not any("day-1.npz" in r.get("body", "") for r in handler.received)
        print(f"\nmonitor schedule: {len(completed())} runs completed, day-3 estimated "
              f"{(datetime.now(UTC) - new_at).total_seconds():.0f} s after it landed, "
              f"{time.monotonic() - started:.0f} s in all")
    finally:
        hook.shutdown()
        hook.server_close()
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.communicate()
