"""The temporary Prefect API server of ``alsa-bench run``: it dies with the run (``kill -9``
included), and two runs never share one.

The processes are found through ``/proc`` (Linux): the server is the run's child whose command
line is ``python -m flows.server --fd N --port P --parent PID``. Each run waits for a line the
run prints (never a sleep); the only clock is a generous bound on how long an orphaned server
may live (:data:`GONE_WITHIN_S`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.server import PrefectServerError, prefect_api, start_server

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc and relies on SIGKILL")

ROOT = Path(__file__).resolve().parents[2]
#: Seconds an orphaned server may take to go (its watchdog alone needs about 5.5).
GONE_WITHIN_S = 10.0
RUN_ARGS: tuple[str, ...] = (
    "run", "--suite", "tiny", "-b", "mlp", "--epochs", "1", "--max-train-samples", "200",
    "-m", "ac", "--device", "cpu", "--no-artifacts",
)


# ------------------------------------------------------------------------------------ helpers
def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_gone(pid: int, within: float = GONE_WITHIN_S) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return not _alive(pid)


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _server_of(parent: int) -> tuple[int, int]:
    """``(pid, port)`` of the ``flows.server`` child of process ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        args = _cmdline(int(entry.name))
        if "flows.server" in args and args[args.index("--parent") + 1] == str(parent):
            found.append((int(entry.name), int(args[args.index("--port") + 1])))
    assert len(found) == 1, f"expected one server child of {parent}; found {found}"
    return found[0]


def _env(home: Path, prefect_home: Path) -> dict[str, str]:
    """A run's environment: its own state folder, no configured Prefect API."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ALSA_BENCH_HOME": str(home),
        "ALSA_BENCH_REPORTS": str(home / "reports"),
        "PREFECT_HOME": str(prefect_home),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "prefect-results"),
        "PREFECT_LOGGING_LEVEL": "INFO",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "240",
        "OMP_NUM_THREADS": "1",
    }
    env.pop("PREFECT_API_URL", None)
    return env


def _start_run(home: Path, prefect_home: Path) -> subprocess.Popen[str]:
    """``alsa-bench run`` on the tiny suite, in its own session, output merged on stdout."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.flows._tiny_cli", *RUN_ARGS], cwd=ROOT,
        env=_env(home, prefect_home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )


def _read_until(proc: subprocess.Popen[str], marker: str, seen: list[str]) -> str:
    """Read the run's output until a line containing ``marker``; that line."""
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            return line
    raise AssertionError(f"the run ended (exit {proc.wait()}) before printing {marker!r}:\n"
                         + "".join(seen))


def _reap(proc: subprocess.Popen[str]) -> None:
    """Kill what is left of a run started here (its own session), then close its pipes."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture
def runs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        _reap(proc)


# ------------------------------------------------------------------------------ the server alone
_PARENT = """
import sys
from flows.server import start_server
server = start_server()
server.wait_healthy(240)
print(server.pid, server.port, flush=True)
sys.stdin.readline()
"""


@pytest.mark.flow
@pytest.mark.reliability
def test_a_server_dies_with_its_parent_even_on_sigkill(tmp_path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT], cwd=ROOT,
        env={**_env(tmp_path / "state", tmp_path / "prefect")},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        line = parent.stdout.readline()
        assert line.strip(), f"the parent exited {parent.wait()} without starting a server"
        pid, port = map(int, line.split())
        assert _server_of(parent.pid) == (pid, port)
        os.kill(parent.pid, signal.SIGKILL)  # the parent only, not its group
        parent.wait(timeout=30)
        assert _wait_gone(pid), f"server {pid} outlived its SIGKILLed parent by {GONE_WITHIN_S} s"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait(timeout=30)
        parent.stdin.close()
        parent.stdout.close()


@pytest.mark.flow
@pytest.mark.reliability
def test_two_servers_get_two_ports_and_each_answers_on_its_own(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    first = start_server()
    second = start_server()
    try:
        assert first.port != second.port and first.pid != second.pid
        first.wait_healthy(240)
        second.wait_healthy(240)
        assert first.healthy() and second.healthy()
        first.stop()
        assert not first.healthy(timeout=2)  # nobody else answers on a stopped server's port
        assert second.healthy()
    finally:
        first.stop()
        second.stop()
    assert first.process.returncode is not None and second.process.returncode is not None


@pytest.mark.flow
@pytest.mark.reliability
def test_a_server_waits_for_the_start_lock_of_its_prefect_home(tmp_path, monkeypatch) -> None:
    """Two servers migrating one fresh SQLite file together race in Alembic (CI saw
    ``NoSuchTableError: block``); the start lock makes the second wait for the first."""
    import fcntl

    from flows.server import START_LOCK_NAME

    home = tmp_path / "prefect"
    home.mkdir()
    monkeypatch.setenv("PREFECT_HOME", str(home))
    holder = os.open(home / START_LOCK_NAME, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # as a server that is still migrating would
    server = start_server()
    try:
        time.sleep(8)  # longer than the app takes to start on a warm machine
        assert server.process.poll() is None and not server.healthy(timeout=1)
        assert not (home / "prefect.db").exists()  # it has not touched the database
        os.close(holder)
        server.wait_healthy(240)
        assert server.healthy()
        with open(home / START_LOCK_NAME) as f:  # released once uvicorn reports it started
            deadline = time.monotonic() + 10
            while True:
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    assert time.monotonic() < deadline, "the server kept its start lock"
                    time.sleep(0.05)
    finally:
        server.stop()


def test_a_server_that_exits_at_once_is_one_clear_error(tmp_path) -> None:
    server = start_server({**os.environ, "PYTHONPATH": str(tmp_path / "nowhere"),
                           "PYTHONHOME": str(tmp_path / "no-python-here")})
    with pytest.raises(PrefectServerError, match=r"exited with status \d+ before it answered"):
        server.wait_healthy(60)
    assert server.process.poll() is not None


@pytest.mark.parametrize("timeout", [0, -1, "5", True])
def test_bad_timeout_is_refused(timeout) -> None:
    with (pytest.raises(ValueError, match="timeout must be a number of seconds > 0 or None; got"),
          prefect_api(timeout=timeout)):
        pass


def test_a_configured_api_url_is_used_and_no_server_started() -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}),
          prefect_api() as url):
        assert url == "http://127.0.0.1:9/api"


# ------------------------------------------------------------------------------ alsa-bench run
@pytest.mark.flow
@pytest.mark.reliability
def test_kill_9_of_a_run_takes_its_prefect_server_with_it(tmp_path, runs) -> None:
    """The issue's orphan: ``kill -9`` of the run process alone (not its group) used to leave
    uvicorn running with parent 1; now the server goes within seconds."""
    run = _start_run(tmp_path / "state", tmp_path / "prefect")
    runs.append(run)
    seen: list[str] = []
    _read_until(run, "alsa-bench run: suite tiny", seen)  # printed once the server answered
    server_pid, _ = _server_of(run.pid)
    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=30)
    assert _wait_gone(server_pid), (
        f"server {server_pid} outlived the SIGKILLed run by {GONE_WITHIN_S} s:\n" + "".join(seen))


@pytest.mark.flow
@pytest.mark.reliability
def test_two_runs_sharing_a_prefect_home_never_share_a_server(tmp_path, runs) -> None:
    """Two state folders, one ``PREFECT_HOME``: each run talks to its own server (the flow run
    links Prefect prints name the port), never the other's."""
    prefect_home = tmp_path / "prefect"
    ports, servers = [], []
    for name in ("a", "b"):  # b starts while a's server is up: the second run
        run = _start_run(tmp_path / name, prefect_home)
        runs.append(run)
        seen: list[str] = []
        _read_until(run, "alsa-bench run: suite tiny", seen)
        servers.append(_server_of(run.pid))
        ports.append(_read_until(run, "View at http://127.0.0.1:", seen)
                     .split("View at http://127.0.0.1:", 1)[1].split("/", 1)[0])
    (pid_a, port_a), (pid_b, port_b) = servers
    assert pid_a != pid_b and port_a != port_b
    assert ports == [str(port_a), str(port_b)]
    for proc in runs:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert _wait_gone(pid_a) and _wait_gone(pid_b)
