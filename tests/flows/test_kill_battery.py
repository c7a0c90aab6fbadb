"""The kill battery: SIGKILL at every stage boundary, then a plain rerun equals a clean run.

Each case runs the real ``alsa-bench run`` (``tests/flows/_tiny_cli.py``: the CLI with the
test-only ``tiny`` dataset registered) in a child process with its own process group
(``start_new_session=True``) and ``ALSA_BENCH_KILL_AT=<stage>``: :func:`tasks.runtime.faults.kill_point`
SIGKILLs the group at that boundary, exactly as ``kill -9`` would, at a known point (never
after a sleep). A plain rerun must exit 0 and leave a database equal to a clean run's: the same
row count per table, no duplicates on any natural key, the same estimates to 1e-12, and
``alsa-bench doctor`` finds nothing wrong with the folder.

Every child talks to the session's Prefect test server (``PREFECT_API_URL``), so none pays the
ephemeral server's start. ``train`` and ``estimate`` run in ``make test``; the other
boundaries are marked ``reliability`` (``make test-reliability``). Damaged state: a truncated
checkpoint is retrained and the user is told; a garbage database is refused in one line with
no traceback, and its bytes are left as they were.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from storage.doctor import NATURAL_KEYS
from tasks.runtime.faults import KILL_AFTER_ENV, KILL_AT_ENV

pytestmark = [
    pytest.mark.flow,
    pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL and process groups"),
]

ROOT = Path(__file__).resolve().parents[2]
RUN_ARGS: tuple[str, ...] = (
    "run", "--suite", "tiny", "-b", "mlp", "--epochs", "1", "--max-train-samples", "200",
    "-m", "ac", "-m", "atc-mc", "--device", "cpu", "--no-artifacts",
)
#: Boundaries killed in ``make test``; the others run in ``make test-reliability``.
REPRESENTATIVE: tuple[str, ...] = ("train", "estimate")
STAGES: tuple[str, ...] = ("download", "train", "extract", "estimate", "report")
RUN_KEY = "tiny.mlp.s0"


@pytest.fixture(scope="module")
def api_url(prefect_server) -> str:
    """The session's Prefect test server, for the child processes."""
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    assert url and url.startswith("http://127.0.0.1"), url
    return url


def _cli(
    home: Path, api_url: str, kill_at: str | None = None, extra: tuple[str, ...] = (),
    command: tuple[str, ...] = RUN_ARGS, kill_after: int = 0,
) -> subprocess.CompletedProcess:
    """``alsa-bench run`` on the tiny suite (or ``command``) with state folder ``home``, in its
    own session."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ALSA_BENCH_HOME": str(home),
        "ALSA_BENCH_REPORTS": str(home / "reports"),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "prefect-results"),
        "PREFECT_API_URL": api_url,
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.pop(KILL_AFTER_ENV, None)
    env.pop(KILL_AT_ENV, None)
    if kill_at is not None:
        env[KILL_AT_ENV] = kill_at
        env[KILL_AFTER_ENV] = str(kill_after)
    return subprocess.run(
        [sys.executable, "-m", "tests.flows._tiny_cli", *command, *extra], cwd=ROOT, env=env,
        capture_output=True, text=True, start_new_session=True, timeout=600,
    )


def _show(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def _snapshot(db: Path) -> dict[str, Any]:
    """Row counts per table, duplicate keys per table, and every estimate, of one database."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = {name for (name,) in con.sql(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
        counts, duplicates = {}, {}
        for table, keys in NATURAL_KEYS.items():
            if table not in tables:
                continue
            # table and key names are constants of storage.doctor.NATURAL_KEYS
            counts[table] = con.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            duplicates[table] = con.sql(
                f"SELECT count(*) FROM (SELECT {', '.join(keys)} FROM {table} "
                f"GROUP BY ALL HAVING count(*) > 1)").fetchall()[0][0]
        estimates = {
            (run, split, method): (estimate, truth)
            for run, split, method, estimate, truth in con.sql(
                "SELECT run_key, split, method, estimated_accuracy, true_accuracy "
                "FROM estimates").fetchall()
        }
    finally:
        con.close()
    return {"counts": counts, "duplicates": duplicates, "estimates": estimates}


def _assert_same_database(db: Path, clean: dict[str, Any]) -> None:
    got = _snapshot(db)
    assert got["counts"] == clean["counts"]
    assert got["duplicates"] == dict.fromkeys(clean["counts"], 0)
    assert set(got["estimates"]) == set(clean["estimates"])
    for key, (estimate, truth) in clean["estimates"].items():
        assert got["estimates"][key][0] == pytest.approx(estimate, abs=1e-12, rel=0), key
        assert got["estimates"][key][1] == pytest.approx(truth, abs=1e-12, rel=0), key


@pytest.fixture(scope="module")
def clean(tmp_path_factory, api_url) -> dict[str, Any]:
    """One clean run: its state folder and the snapshot of its database (taken once)."""
    home = tmp_path_factory.mktemp("clean") / "state"
    proc = _cli(home, api_url)
    assert proc.returncode == 0, _show(proc)
    snapshot = _snapshot(home / "bench.duckdb")
    assert snapshot["counts"]["estimates"] == 4  # 2 target splits x 2 methods
    assert snapshot["duplicates"] == dict.fromkeys(snapshot["counts"], 0)
    return {"home": home, "snapshot": snapshot}


@pytest.mark.parametrize("stage", [
    pytest.param(s, marks=() if s in REPRESENTATIVE else pytest.mark.reliability) for s in STAGES
])
def test_sigkill_at_a_stage_boundary_then_rerun_equals_a_clean_run(
    tmp_path, api_url, clean, stage
) -> None:
    home = tmp_path / "state"
    killed = _cli(home, api_url, kill_at=stage)
    assert killed.returncode == -signal.SIGKILL, _show(killed)

    rerun = _cli(home, api_url)
    assert rerun.returncode == 0, _show(rerun)
    assert "Traceback" not in rerun.stdout + rerun.stderr, _show(rerun)
    _assert_same_database(home / "bench.duckdb", clean["snapshot"])
    doctor = _cli(home, api_url, command=("doctor",))
    assert doctor.returncode == 0 and "healthy" in doctor.stdout, _show(doctor)


@pytest.mark.reliability
def test_sigkill_between_two_methods_of_a_run_then_rerun_equals_a_clean_run(
    tmp_path, api_url, clean
) -> None:
    """The estimate stage runs one task per method: killed after the first method's estimates
    were published and ingested, the rerun computes the second method's only."""
    home = tmp_path / "state"
    killed = _cli(home, api_url, kill_at="estimate", kill_after=1)
    assert killed.returncode == -signal.SIGKILL, _show(killed)
    rerun = _cli(home, api_url)
    assert rerun.returncode == 0, _show(rerun)
    assert "estimate 1 ran, 1 cached" in rerun.stdout, _show(rerun)
    _assert_same_database(home / "bench.duckdb", clean["snapshot"])
    doctor = _cli(home, api_url, command=("doctor",))
    assert doctor.returncode == 0 and "healthy" in doctor.stdout, _show(doctor)


def test_a_truncated_checkpoint_is_retrained_and_the_user_told(api_url, clean) -> None:
    home = clean["home"]  # the snapshot is already taken: this test may change the folder
    checkpoint = home / "checkpoints" / f"{RUN_KEY}.pt"
    data = checkpoint.read_bytes()
    checkpoint.write_bytes(data[: len(data) // 2])

    rerun = _cli(home, api_url)
    assert rerun.returncode == 0, _show(rerun)
    assert "Traceback" not in rerun.stdout + rerun.stderr, _show(rerun)
    # said once, when it happens (tasks.stages.healing.settle), not again at the end
    said = f"Stage 'train' ({RUN_KEY}) has a cached result whose output is missing or damaged; " \
        "recomputing it."
    assert (rerun.stdout + rerun.stderr).count(said) == 1, _show(rerun)
    assert hashlib.sha256(checkpoint.read_bytes()).digest() == hashlib.sha256(data).digest()
    _assert_same_database(home / "bench.duckdb", clean["snapshot"])


def test_a_garbage_database_is_one_line_without_traceback_and_left_untouched(
    tmp_path, api_url
) -> None:
    home = tmp_path / "state"
    home.mkdir()
    db = home / "bench.duckdb"
    db.write_bytes(bytes(range(256)) * 400)
    before = db.read_bytes()

    proc = _cli(home, api_url)
    assert proc.returncode in (1, 2), _show(proc)
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, _show(proc)
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, _show(proc)
    assert errors[0].startswith(f"error: {db} is damaged and cannot be read as a DuckDB database")
    assert f"move it aside: mv {db} {db}.damaged, then rerun" in errors[0]
    assert db.read_bytes() == before
    assert [p.name for p in home.iterdir() if p.name.startswith("bench.")] == ["bench.duckdb"]


def test_a_run_on_a_folder_in_use_is_one_line_or_waits_visibly(tmp_path, api_url) -> None:
    """A second run on a held folder: one line naming the holder; with --wait, a waiting line
    and the same line once the wait is over. The holder never releases, so no timing matters."""
    home = tmp_path / "state"
    code = ("import os, sys\nfrom storage.lock import state_lock\n"
            "with state_lock(os.environ['ALSA_BENCH_HOME'], purpose='run'):\n"
            "    print('locked', flush=True)\n    sys.stdin.readline()\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", code, "run", "--suite", "tiny"], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "ALSA_BENCH_HOME": str(home)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        busy = _cli(home, api_url)
        waited = _cli(home, api_url, extra=("--wait", "0.5"))
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdin.close()
        holder.stdout.close()
    for proc in (busy, waited):
        assert proc.returncode == 1, _show(proc)
        assert "Traceback" not in proc.stdout + proc.stderr, _show(proc)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert lines[-1].startswith(f"error: state folder {home} is in use by pid {holder.pid} ("), \
            _show(proc)
        assert lines[-1].endswith("wait for it with --wait SECONDS, or use another ALSA_BENCH_HOME")
    assert len([ln for ln in busy.stderr.splitlines() if ln.strip()]) == 1, _show(busy)
    assert f"waiting for {holder.pid} on {home}…" in waited.stderr, _show(waited)
    assert not (home / "bench.duckdb").exists()
