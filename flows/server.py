"""The temporary Prefect API server of one ``alsa-bench run`` or ``report``: ours, and it dies
with us.

Left alone, Prefect 3.8.8 starts its ephemeral server (``SubprocessASGIServer`` in
``prefect/server/api/server.py``, from ``get_client()`` when no ``PREFECT_API_URL`` is set) as a
plain child process and stops it from an ``atexit`` hook. Two faults follow:

* ``kill -9`` of the command skips ``atexit``, and the ``uvicorn`` child lives on (parent 1,
  about 260 MB) until someone kills it by hand.
* It picks a random port in 8000-8999, checks it is free by binding and *closing* a socket, then
  lets uvicorn bind it. Two commands started together can pick the same port: the second
  uvicorn fails to bind (a 20-line traceback), and the second command's health check is answered
  by the *first* command's server, which it then uses for the whole run.

:func:`prefect_api` replaces that server for the length of a ``with`` block:

* **No port race.** This process binds a listening socket to port 0 (the kernel picks a free
  port, atomically) and hands the bound socket to the server child (``pass_fds``); the server
  serves that very socket, so the port can belong to nobody else, and the URL this process
  talks to can only reach its own server.
* **It dies with us.** The child (:func:`serve`) first asks Linux to send it ``SIGTERM`` when its
  parent dies (``prctl(PR_SET_PDEATHSIG)``, through ``ctypes``), then checks that the parent is
  still the one that started it (closing the fork/prctl race). A watchdog thread in the child
  also polls its parent id every half second (the portable path, and a second line of defence)
  and, once the parent is gone, sends itself ``SIGTERM`` and exits hard 5 s later if uvicorn's
  graceful shutdown has not finished. It runs in its own session, so a Ctrl-C at the terminal
  reaches only the command, which then stops the server itself after its last API call.
* The server is the same Prefect app with the same settings (``PREFECT_HOME``'s SQLite
  database, UI off, ephemeral services), so run history lands where it always did.
* **One start at a time per database.** Each server migrates ``PREFECT_HOME``'s database and
  registers block types while it starts. Two servers starting together on one fresh database
  race in Alembic (the second reflects a table the first is rebuilding: ``NoSuchTableError:
  block``, exit status 3). The child therefore holds an exclusive ``flock`` on
  ``<PREFECT_HOME>/alsa-bench-server-start.lock`` from before the app starts until uvicorn says
  it has started; a second server waits for the first, then finds the schema at head. The lock
  is the kernel's, so a killed server releases it.

A ``PREFECT_API_URL`` that is already set (a real ``prefect server start``, ``prefect config set
PREFECT_API_URL=...``, the test harness) wins: no server is started, as before.

Examples
--------
::

    with prefect_api() as url:      # "http://127.0.0.1:41873/api", or the configured URL
        benchmark(...)              # every Prefect client in this process talks to ``url``
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "PREFECT_SERVER_ENV",
    "PrefectServerError",
    "ServerProcess",
    "prefect_api",
    "serve",
    "start_server",
]

#: Environment Prefect's own ephemeral server runs with (UI off, ephemeral services only).
PREFECT_SERVER_ENV: dict[str, str] = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT__SERVER_FINAL": "1",
}
#: Seconds between two polls of the child's parent id by its watchdog thread.
WATCHDOG_POLL_S = 0.5
#: Seconds the child gives uvicorn's graceful shutdown once its parent is gone.
ORPHAN_GRACE_S = 5.0
#: Seconds :meth:`ServerProcess.stop` waits after SIGTERM before SIGKILL.
STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1
_REPO_ROOT = Path(__file__).resolve().parents[1]


class PrefectServerError(RuntimeError):
    """The temporary Prefect API server did not come up (it exited, or never answered)."""


def _startup_timeout() -> float:
    """``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` (``flows.configure_environment``
    makes it 120), or 120."""
    raw = os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS must be a number of seconds > 0; "
            f"got {raw!r}."
        ) from None
    if not value > 0:
        raise ValueError(
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS must be a number of seconds > 0; "
            f"got {raw!r}."
        )
    return value


class ServerProcess:
    """A running server child started by :func:`start_server`.

    Attributes
    ----------
    process : subprocess.Popen
        The child (``python -m flows.server``, which runs uvicorn in-process).
    port : int
        The port of its listening socket on 127.0.0.1.
    """

    def __init__(self, process: subprocess.Popen[bytes], port: int) -> None:
        self.process = process
        self.port = port

    @property
    def pid(self) -> int:
        """Process id of the server child."""
        return self.process.pid

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:<port>/api``: the value for ``PREFECT_API_URL``."""
        return f"http://127.0.0.1:{self.port}/api"

    def healthy(self, timeout: float = 5.0) -> bool:
        """Whether ``GET <api_url>/health`` answers 200 within ``timeout`` seconds."""
        try:
            with urllib.request.urlopen(f"{self.api_url}/health", timeout=timeout) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def wait_healthy(self, timeout: float) -> None:
        """Block until the server answers its health check.

        Raises
        ------
        PrefectServerError
            If the child exits first, or ``timeout`` seconds pass without an answer.
        """
        deadline = time.monotonic() + timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise PrefectServerError(
                    f"the temporary Prefect API server (pid {self.pid}) exited with status "
                    f"{code} before it answered; its output is above"
                )
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise PrefectServerError(
                    f"the temporary Prefect API server on {self.api_url} did not answer within "
                    f"{timeout:g} s (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS); run "
                    "again, or start one with `prefect server start` and set PREFECT_API_URL"
                )
            if self.healthy(timeout=min(5.0, max(left, 0.1))):
                return
            time.sleep(0.1)

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """SIGTERM the child, wait up to ``grace`` seconds, then SIGKILL; idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _listening_socket() -> socket.socket:
    """A TCP socket bound to ``127.0.0.1:0`` and listening: the kernel chose a free port, and it
    stays ours for as long as the socket (or a copy of it in a child) is open."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    return sock


def start_server(env: dict[str, str] | None = None) -> ServerProcess:
    """Start a Prefect API server child on a port nobody else can hold; do not wait for it.

    Must be called from the thread that outlives the server (the main thread of a command):
    Linux's parent-death signal fires when the *thread* that started the child exits.

    Parameters
    ----------
    env : dict of str to str, optional
        The child's environment (default: this process's), to which :data:`PREFECT_SERVER_ENV`
        and this repository on ``PYTHONPATH`` are added.

    Returns
    -------
    ServerProcess
    """
    base = dict(os.environ if env is None else env)
    base.update(PREFECT_SERVER_ENV)
    base.pop("PREFECT_API_URL", None)
    base["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_REPO_ROOT), base.get("PYTHONPATH", "")) if p
    )
    sock = _listening_socket()
    try:
        fd = sock.fileno()
        port = sock.getsockname()[1]
        process = subprocess.Popen(
            [sys.executable, "-m", "flows.server", "--fd", str(fd), "--port", str(port),
             "--parent", str(os.getpid())],
            env=base, pass_fds=(fd,), stdin=subprocess.DEVNULL, start_new_session=True,
        )
    finally:
        sock.close()  # the child holds its own copy of the listening socket
    return ServerProcess(process, port)


def _api_url_configured() -> str | None:
    """The Prefect API URL already configured (environment, profile, ``prefect.toml``, an
    active ``temporary_settings``), or None."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


def _drain_prefect_workers(timeout: float = 30.0) -> None:
    """Send Prefect's queued logs and events before the server goes away (as
    ``prefect_test_harness`` does), so shutdown prints no connection errors."""
    with contextlib.suppress(Exception):
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=timeout)
    with contextlib.suppress(Exception):
        from prefect.events.worker import EventsWorker

        EventsWorker.drain_all(timeout=timeout)


@contextlib.contextmanager
def prefect_api(*, timeout: float | None = None) -> Iterator[str | None]:
    """Point every Prefect client of this process at a server of its own, for the block.

    If an API URL is configured already, yields it and starts nothing. Otherwise starts
    :func:`start_server`, waits for its health check, makes its URL the process-wide
    ``PREFECT_API_URL`` (the environment, for child processes such as Dask workers, and
    Prefect's global settings context, for every thread), and on exit drains Prefect's log and
    event queues, stops the server and restores the settings. If this process is killed, the
    server follows within seconds (see the module docstring).

    Parameters
    ----------
    timeout : float, optional
        Seconds to wait for the server to answer (default:
        ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``, else 120).

    Yields
    ------
    str or None
        The API URL in use; None when ephemeral mode is off and no URL is set (Prefect then
        reports that itself).

    Raises
    ------
    PrefectServerError
        If the server exits before answering or does not answer in time (one line).
    ValueError
        If ``timeout`` is not a number of seconds > 0.
    """
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        raise ValueError(f"timeout must be a number of seconds > 0 or None; got {timeout!r}.")
    configured = _api_url_configured()
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    if configured is not None or not get_current_settings().server.ephemeral.enabled:
        yield configured
        return
    import prefect.context

    child_env = {**os.environ,
                 **get_current_settings().to_environment_variables(exclude_unset=True)}
    server = start_server(child_env)
    previous_env = os.environ.get("PREFECT_API_URL")
    try:
        server.wait_healthy(_startup_timeout() if timeout is None else float(timeout))
        from prefect.logging import get_logger

        get_logger("alsa_bench").info("Starting temporary server on %s (pid %d)",
                                      server.api_url.removesuffix("/api"), server.pid)
        os.environ["PREFECT_API_URL"] = server.api_url
        with contextlib.ExitStack() as stack:
            stack.enter_context(temporary_settings(updates={PREFECT_API_URL: server.api_url}))
            global_ctx = getattr(prefect.context, "_temporary_global_settings_context", None)
            if global_ctx is not None:
                stack.enter_context(global_ctx(prefect.context.get_settings_context()))
            try:
                yield server.api_url
            finally:
                _drain_prefect_workers()
    finally:
        if previous_env is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous_env
        server.stop()


# ------------------------------------------------------------------------------- the child side
def _die_with_parent(parent: int) -> None:
    """Ask Linux for SIGTERM when the parent dies, then check it has not died already."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            err = ctypes.get_errno()
            print(f"flows.server: prctl(PR_SET_PDEATHSIG) failed: {os.strerror(err)}; relying "
                  "on the watchdog", file=sys.stderr)
    if os.getppid() != parent:
        os._exit(0)  # the parent died between fork and prctl: nothing to serve


def _watchdog(parent: int) -> None:
    """Thread body: once the parent is gone, SIGTERM this process; exit hard if that hangs."""
    while os.getppid() == parent:
        time.sleep(WATCHDOG_POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(ORPHAN_GRACE_S)
    os._exit(1)


def serve(fd: int, port: int, parent: int) -> None:
    """Run Prefect's API app (uvicorn, as ``SubprocessASGIServer`` does) on the listening
    socket ``fd`` for as long as process ``parent`` lives.

    Parameters
    ----------
    fd : int
        A bound, listening TCP socket inherited from the parent.
    port : int
        The port ``fd`` is bound to (checked; it also shows in ``ps``).
    parent : int
        The parent's process id; the server exits when it is gone.

    Raises
    ------
    ValueError
        If ``fd`` is not a listening socket bound to ``port``.
    """
    _die_with_parent(parent)
    threading.Thread(target=_watchdog, args=(parent,), name="parent-watchdog",
                     daemon=True).start()
    sock = socket.socket(fileno=fd)  # family and type read from the descriptor
    bound = sock.getsockname()
    if not isinstance(bound, tuple) or bound[1] != port:
        raise ValueError(f"--fd {fd} must be a socket bound to --port {port}; got {bound!r}.")
    import uvicorn

    config = uvicorn.Config(
        "prefect.server.api.server:create_app", factory=True, log_level="error", lifespan="on",
    )
    server = uvicorn.Server(config)
    lock = _start_lock()
    threading.Thread(target=_release_when_started, args=(server, lock), name="start-lock",
                     daemon=True).start()
    server.run(sockets=[sock])


#: The file whose ``flock`` serialises server starts on one Prefect home (see the module doc).
START_LOCK_NAME = "alsa-bench-server-start.lock"


def _start_lock() -> int:
    """Block until this process holds the exclusive start lock of its Prefect home; return the
    descriptor (closing it, or exiting, releases the lock)."""
    import fcntl

    from prefect.settings import get_current_settings

    home = Path(get_current_settings().home).expanduser()
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / START_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _release_when_started(server: object, lock: int) -> None:
    """Thread body: release the start lock once uvicorn has run the app's startup (migrations,
    block registration) and serves, or once it has given up."""
    while not getattr(server, "started", False) and not getattr(server, "should_exit", False):
        time.sleep(0.05)
    os.close(lock)


def _main(argv: list[str]) -> int:
    """``python -m flows.server --fd N --port P --parent PID`` (:func:`start_server`)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m flows.server")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args(argv)
    serve(args.fd, args.port, args.parent)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
