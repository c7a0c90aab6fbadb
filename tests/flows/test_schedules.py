"""The deployment path, end to end: schedules fire, worker runs keep to the state folder.

What ``docs/PIPELINE.md`` and the README promise, checked against a real ``prefect server
start`` (127.0.0.1, a free port, its own ``PREFECT_HOME``, its output in a log file):

* ``prefect --no-prompt deploy`` of ``prefect.yaml``'s ``nightly`` deployment, and the server's
  scheduler creates its scheduled flow runs (the 02:00 UTC cron, and one more schedule due in a
  minute or two). With SQLAlchemy 2.1 beside Prefect 3.8.8 the scheduler failed every loop
  (``Can't evaluate bulk DML statement``) and no run was ever scheduled (3.9.1 is not
  affected); ``pyproject.toml`` pins ``sqlalchemy<2.1``.
* a run started by ``prefect worker start`` (Prefect imported before ``flows``) with
  ``ALSA_BENCH_HOME`` set writes nothing under its working directory: the task cache follows
  the state folder. Its stage log lines (``tasks.*`` loggers) reach the server.

Both start a server and take minutes on 2 busy cores: they are marked ``reliability``
(``make test-reliability``). The unit checks at the end (Prefect imported first, in a child
process) run in ``make test``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs process groups")

ROOT = Path(__file__).resolve().parents[2]
#: Generous bounds for a busy 2-core machine; the checks poll and return as soon as they hold.
SERVER_START_S = 240.0
SCHEDULE_WAIT_S = 180.0
WORKER_RUN_S = 540.0
#: Variables of the test process that must not leak into the children (tests/conftest.py sets
#: some of them; a real worker does not have them).
_DROPPED_ENV = (
    "PREFECT_API_URL", "PREFECT_HOME", "PREFECT_PROFILE", "PREFECT_RESULTS_LOCAL_STORAGE_PATH",
    "PREFECT_LOGGING_EXTRA_LOGGERS", "PREFECT_LOGGING_LEVEL", "ALSA_BENCH_HOME",
    "ALSA_BENCH_REPORTS", "ALSA_BENCH_RESULTS", "PYTEST_CURRENT_TEST",
)


@dataclass(frozen=True)
class Server:
    """A ``prefect server start`` child: its API URL, home, log file and environment."""

    api_url: str
    home: Path
    log: Path
    env: dict[str, str]

    def get(self, path: str) -> Any:
        """GET ``path`` of the API; the decoded JSON body."""
        response = httpx.get(f"{self.api_url}{path}", timeout=30.0)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to ``path`` of the API; the decoded JSON body."""
        response = httpx.post(f"{self.api_url}{path}", json=body, timeout=30.0)
        response.raise_for_status()
        return response.json()

    def log_tail(self, n: int = 4000) -> str:
        """The last ``n`` characters of the server's log."""
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _child_env(**extra: str) -> dict[str, str]:
    """The test process's environment without its Prefect/state overrides, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(PYTHONPATH=str(ROOT), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **extra)
    return env


def _prefect(server: Server, *args: str, cwd: Path, env: dict[str, str] | None = None,
             timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """Run ``prefect ARGS`` (this interpreter's) against ``server``; fail with its output."""
    result = subprocess.run(
        [sys.executable, "-m", "prefect", *args], cwd=cwd, env=env or server.env,
        capture_output=True, text=True, timeout=timeout, check=False,
    )
    assert result.returncode == 0, (
        f"prefect {' '.join(args)} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
        f"{result.stderr[-3000:]}"
    )
    return result


def _poll(check: Callable[[], Any], timeout: float, what: str, server: Server,
          every: float = 2.0) -> Any:
    """Call ``check`` until it returns something truthy or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: nothing after {timeout:.0f} s. Server log:\n{server.log_tail()}")
        time.sleep(every)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real ``prefect server start`` on a free port, logging to ``<home>/server.log``."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = _free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = _child_env(PREFECT_HOME=str(home / "prefect-home"), PREFECT_API_URL=api_url,
                     PREFECT_SERVER_UI_ENABLED="false")
    log = home / "server.log"
    server_env = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port)],
            cwd=home, env=server_env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
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


def _scheduled_runs(server: Server, deployment_id: str) -> list[dict[str, Any]]:
    return server.post("/flow_runs/filter", {
        "deployments": {"id": {"any_": [deployment_id]}},
        "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}},
        "limit": 50,
    })


def _start_times(runs: list[dict[str, Any]]) -> set[datetime]:
    return {datetime.fromisoformat(run["expected_start_time"]).astimezone(UTC)
            for run in runs}


@pytest.mark.flow
@pytest.mark.reliability
def test_deployed_schedule_creates_scheduled_runs(server: Server) -> None:
    """The README's commands: pool, ``prefect --no-prompt deploy`` of ``nightly`` from
    ``prefect.yaml``, one more cron due soon; the scheduler must create runs for both."""
    started = time.monotonic()
    _prefect(server, "work-pool", "create", "alsa-bench", "--type", "process", cwd=server.home)
    _prefect(server, "--no-prompt", "deploy", "--name", "nightly", cwd=ROOT)
    deployment = server.get("/deployments/name/benchmark/nightly")
    assert [s["schedule"]["cron"] for s in deployment["schedules"]] == ["0 2 * * *"]

    # a second cron, due in two to three minutes (UTC), on the deployed deployment
    soon = (datetime.now(UTC) + timedelta(minutes=3)).replace(second=0, microsecond=0)
    _prefect(server, "deployment", "schedule", "create", "benchmark/nightly",
             "--cron", f"{soon.minute} {soon.hour} * * *", "--timezone", "UTC", cwd=server.home)

    now = datetime.now(UTC)
    next_two_am = now.replace(hour=2, minute=0, second=0, microsecond=0)
    if next_two_am <= now:
        next_two_am += timedelta(days=1)

    def both_scheduled() -> set[datetime] | None:
        times = _start_times(_scheduled_runs(server, deployment["id"]))
        return times if {next_two_am, soon} <= times else None

    times = _poll(both_scheduled, SCHEDULE_WAIT_S, "scheduled runs of benchmark/nightly", server)
    log = server.log_tail(10**6)
    assert "InvalidRequestError" not in log and "bulk DML" not in log, log[-4000:]
    print(f"\nscheduled {len(times)} runs of benchmark/nightly "
          f"{time.monotonic() - started:.0f} s after the deploy began")


_TINY_FLOW = """\
# Entrypoint of the worker test: the benchmark flow with the test-only `tiny` dataset.
from tests.flows._tiny_cli import register_tiny

register_tiny()

from flows.benchmark import benchmark  # noqa: E402
"""


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.flow
@pytest.mark.reliability
def test_worker_run_keeps_to_alsa_bench_home(server: Server, tmp_path: Path) -> None:
    """A deployment run by ``prefect worker start`` in a folder holding only the repository's
    ``prefect.toml`` (as the repository root does), with ``ALSA_BENCH_HOME`` elsewhere: nothing
    is written into the folder, the cache records land in the state folder, and the stages'
    ``INFO`` lines reach the server."""
    workdir, state, entry = tmp_path / "cwd", tmp_path / "state", tmp_path / "entry"
    for folder in (workdir, entry):
        folder.mkdir()
    (workdir / "prefect.toml").write_text((ROOT / "prefect.toml").read_text())
    (entry / "tiny_flow.py").write_text(_TINY_FLOW)
    env = {**server.env, "ALSA_BENCH_HOME": str(state), "PYTHONDONTWRITEBYTECODE": "1",
           "PREFECT_LOGGING_EXTRA_LOGGERS": "tasks,storage"}
    params = {"suite": "tiny", "backbones": ["mlp"], "epochs": 1, "max_train_samples": 200,
              "methods": ["ac"], "device": "cpu", "publish_artifacts": False}

    _prefect(server, "work-pool", "create", "tiny-pool", "--type", "process", cwd=server.home)
    _prefect(server, "--no-prompt", "deploy", f"{entry / 'tiny_flow.py'}:benchmark",
             "--name", "tiny", "--pool", "tiny-pool", "--params", json.dumps(params),
             cwd=workdir, env=env)
    assert _tree(workdir) == ["prefect.toml"], "prefect deploy wrote into the working directory"
    _prefect(server, "deployment", "run", "benchmark/tiny", cwd=server.home)
    deployment = server.get("/deployments/name/benchmark/tiny")
    [flow_run] = server.post("/flow_runs/filter",
                             {"deployments": {"id": {"any_": [deployment["id"]]}}})

    started = time.monotonic()
    # the worker and the flow-run process it starts share a new session: a timeout kills both
    worker = subprocess.Popen(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", "tiny-pool",
         "--run-once", "--limit", "1"],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )
    try:
        output, _ = worker.communicate(timeout=WORKER_RUN_S)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        output, _ = worker.communicate()
    elapsed = time.monotonic() - started
    final = server.get(f"/flow_runs/{flow_run['id']}")
    assert final["state"]["type"] == "COMPLETED", (
        f"flow run {final['state']['type']} after {elapsed:.0f} s (worker exit "
        f"{worker.returncode}):\n{output[-6000:]}"
    )

    assert _tree(workdir) == ["prefect.toml"], (
        f"the run wrote into its working directory: {_tree(workdir)}")
    records = state / "prefect-results"
    assert records.is_dir() and any(records.iterdir()), (
        f"no cache records in {records}; the state folder holds {_tree(state)}")
    assert (state / "bench.duckdb").is_file()

    logs = server.post("/logs/filter", {"logs": {"flow_run_id": {"any_": [flow_run["id"]]}},
                                        "limit": 200})
    stage_lines = [line for line in logs if line["name"].split(".")[0] in {"tasks", "storage"}]
    assert stage_lines, "no tasks.*/storage.* log line reached the server: " + repr(
        sorted({line["name"] for line in logs}))
    assert min(line["level"] for line in stage_lines) <= 20  # INFO lines, not only warnings


_PROBE = """\
import json, logging, os, sys
import prefect.main  # what `python -m prefect.engine` does first: settings + logging set up
from prefect.logging.handlers import APILogHandler
from prefect.settings import get_current_settings

seen = []
APILogHandler.emit = lambda self, record: seen.append((record.name, record.levelno))
before = str(get_current_settings().results.local_storage_path)
import flows  # noqa: E402  (the entrypoint's imports reach the package here)
logging.getLogger("tasks.stages.probe").info("probe line")
logging.getLogger("storage.probe").debug("not shown at INFO")
print(json.dumps({"before": before,
                  "after": str(get_current_settings().results.local_storage_path),
                  "seen": seen, "cwd": sorted(os.listdir("."))}))
"""


def _probe(tmp_path: Path, **extra: str) -> dict[str, Any]:
    """Run :data:`_PROBE` in an empty working directory holding the repository's prefect.toml."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    (workdir / "prefect.toml").write_text((ROOT / "prefect.toml").read_text())
    env = _child_env(PREFECT_HOME=str(tmp_path / "prefect-home"), PYTHONDONTWRITEBYTECODE="1",
                     **extra)
    result = subprocess.run([sys.executable, "-c", _PROBE], cwd=workdir, env=env,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_prefect_imported_first_still_caches_under_alsa_bench_home(tmp_path: Path) -> None:
    """Prefect read its settings (``<PREFECT_HOME>/storage``) before ``flows`` was imported;
    importing ``flows`` moves the live setting to ``$ALSA_BENCH_HOME/prefect-results``."""
    state = tmp_path / "state"
    out = _probe(tmp_path, ALSA_BENCH_HOME=str(state))
    assert out["before"] == str(tmp_path / "prefect-home" / "storage")
    assert out["after"] == str((state / "prefect-results").resolve())
    assert out["cwd"] == ["prefect.toml"]


def test_explicit_results_path_wins(tmp_path: Path) -> None:
    """An explicit ``PREFECT_RESULTS_LOCAL_STORAGE_PATH`` is kept as it is."""
    mine = tmp_path / "mine"
    out = _probe(tmp_path, ALSA_BENCH_HOME=str(tmp_path / "state"),
                 PREFECT_RESULTS_LOCAL_STORAGE_PATH=str(mine))
    assert out["before"] == out["after"] == str(mine)


def test_extra_loggers_info_reaches_api_handler(tmp_path: Path) -> None:
    """With ``PREFECT_LOGGING_EXTRA_LOGGERS=tasks,storage`` an ``INFO`` line of a ``tasks.*``
    logger reaches Prefect's API log handler (Prefect alone attaches it, but drops ``INFO``)."""
    out = _probe(tmp_path, ALSA_BENCH_HOME=str(tmp_path / "state"),
                 PREFECT_LOGGING_EXTRA_LOGGERS="tasks,storage")
    assert ["tasks.stages.probe", 20] in out["seen"]
    assert all(name != "storage.probe" for name, _ in out["seen"])


def test_no_extra_loggers_no_api_lines(tmp_path: Path) -> None:
    """Without ``PREFECT_LOGGING_EXTRA_LOGGERS`` the stage loggers stay out of Prefect's API."""
    out = _probe(tmp_path, ALSA_BENCH_HOME=str(tmp_path / "state"))
    assert out["seen"] == []
