"""``alsa-bench doctor``: healthy folders pass; each kind of damage is one line with its remedy.

Every test builds a real state folder (a DuckDB file written by the storage functions, a
checkpoint written by ``torch.save``, a Prefect cache record serialised by Prefect, a Parquet
result named by its SHA-256), damages one thing, and runs the command through Typer.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import typer
from typer.testing import CliRunner

from flows.doctor_cli import doctor_command
from storage import (
    SCHEMA_VERSION,
    EstimateRow,
    RunInfo,
    SplitInfo,
    connect,
    upsert_run,
    write_estimates,
    write_split,
)
from storage.doctor import examine

from .fixtures.make_v1_fixture import FIXTURE

ROOT = Path(__file__).resolve().parents[2]
RUN = "fmnist.mlp.s0"

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command("doctor")(doctor_command)


@app.command("noop")
def _noop() -> None:  # a second command keeps "doctor" a sub-command, as in alsa-bench
    """Unused."""


def _checkpoint_bytes(seed: int = 0) -> bytes:
    buffer = io.BytesIO()
    torch.manual_seed(seed)
    torch.save({"format": 1, "state_dict": {"w": torch.randn(8, 4)}, "meta": {"n": 3}}, buffer)
    return buffer.getvalue()


def _cache_record(path: Path, result: object) -> None:
    from prefect._internal.result_records import ResultRecord, ResultRecordMetadata
    from prefect.serializers import PickleSerializer

    record = ResultRecord(
        metadata=ResultRecordMetadata(storage_key=str(path), serializer=PickleSerializer()),
        result=result,
    )
    path.write_bytes(record.serialize())


def _parquet_result(folder: Path, kind: str = "logits") -> Path:
    table = pa.table({"run_key": [RUN] * 3, "x": [1.0, 2.0, 3.0]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    data = buffer.getvalue()
    path = folder / "results" / kind / f"{hashlib.sha256(data).hexdigest()}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def healthy(state_home) -> Path:
    """A state folder as one finished run leaves it."""
    from tasks.runtime.refs import CheckpointRef

    ckpt = state_home / "checkpoints" / f"{RUN}.pt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(_checkpoint_bytes())
    sha = hashlib.sha256(ckpt.read_bytes()).hexdigest()
    rng = np.random.default_rng(0)
    with connect(state_home / "bench.duckdb") as con:
        upsert_run(con, RunInfo(RUN, "fmnist", "fmnist", "mlp", 0, 4, checkpoint_sha256=sha))
        for name, role in (("val", "val"), ("clean", "target")):
            write_split(con, RUN, SplitInfo(name, role, "clean", "clean", None),
                        rng.normal(size=(50, 4)).astype(np.float32), rng.integers(0, 4, 50))
        write_estimates(con, RUN, [EstimateRow(
            RUN, "clean", "ac", "{}", 0.5, 0.55, 0.05, 0.1, 0.01, "{}", "v1",
            interval_low=0.4, interval_high=0.6, interval_level=0.9, per_class_json=None)])
    cache = state_home / "prefect-results"
    cache.mkdir()
    _cache_record(cache / "0123456789abcdef0123456789abcdef",
                  CheckpointRef(RUN, "fmnist", "mlp", 0, str(ckpt), sha))
    return state_home


def _doctor(*args: str):
    result = CliRunner().invoke(app, ["doctor", *args])
    assert "Traceback" not in result.output and "Traceback" not in (result.stderr or "")
    return result


def _lines(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.strip()]


def test_a_healthy_folder_exits_0(healthy) -> None:
    result = _doctor()
    assert result.exit_code == 0, result.output
    assert _lines(result) == [
        f"{healthy}: healthy (schema v{SCHEMA_VERSION}, 1 runs, 1 checkpoints, 0 results, "
        "1 cache records)"
    ]


def test_json_output(healthy) -> None:
    (healthy / ".x.tmp").write_text("half")
    result = _doctor("--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["healthy"] is False and data["checked"]["schema_version"] == SCHEMA_VERSION
    assert [(f["check"], f["path"], f["repaired"]) for f in data["findings"]] == [
        ("temp-file", str(healthy / ".x.tmp"), False)]


def test_a_garbage_database_is_one_line_and_repair_quarantines_it_intact(healthy) -> None:
    db = healthy / "bench.duckdb"
    db.write_bytes(os.urandom(50_000))
    before = db.read_bytes()
    result = _doctor()
    assert result.exit_code == 1
    [line, summary] = _lines(result)
    assert line.startswith(f"database: {db}: {db} is damaged and cannot be read")
    assert f"move it aside: mv {db} {db}.damaged, then rerun `alsa-bench run`" in line
    assert "re-ingests the results under results/" in line
    assert "healthy" not in summary
    assert db.read_bytes() == before

    repaired = _doctor("--repair")
    assert repaired.exit_code == 0, repaired.output
    assert not db.exists()
    [moved] = (healthy / "quarantine").iterdir()
    assert moved.name.endswith(".bench.duckdb") and moved.read_bytes() == before
    assert _doctor().exit_code == 0  # no database: the next run creates one


def test_duplicates_are_reported_per_table_with_the_rebuilding_command(healthy) -> None:
    db = healthy / "bench.duckdb"
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO logits SELECT * FROM logits WHERE split = 'clean' AND "
                "sample_index < 3")
    con.close()
    before = db.read_bytes()
    result = _doctor("--repair")
    assert result.exit_code == 1
    [line, _] = _lines(result)
    assert line == (f"duplicates: {db}: table logits: 3 keys (run_key, split, sample_index) "
                    "stored more than once (3 extra rows); rebuild the rows with `alsa-bench run "
                    "--refresh extract` (same suite, backbones and seeds); the doctor never "
                    "rewrites the database")
    assert db.read_bytes() == before


def test_rows_of_a_run_missing_from_runs_are_orphans(healthy) -> None:
    con = duckdb.connect(str(healthy / "bench.duckdb"))
    con.execute("DELETE FROM runs")
    con.close()
    lines = _lines(_doctor())
    for table in ("splits", "logits", "estimates"):
        assert any(line.startswith(f"orphan-rows: {healthy / 'bench.duckdb'}: table {table} "
                                   f"holds rows of run '{RUN}'") and
                   "`alsa-bench run -d fmnist -b mlp --seed 0 --refresh extract`" in line
                   for line in lines), lines


@pytest.mark.parametrize("damage", ["truncated", "other-bytes"])
def test_a_damaged_checkpoint_is_found_and_repaired_by_deleting_it(healthy, damage) -> None:
    ckpt = healthy / "checkpoints" / f"{RUN}.pt"
    data = ckpt.read_bytes()
    ckpt.write_bytes(data[: len(data) // 2] if damage == "truncated" else _checkpoint_bytes(1))
    result = _doctor()
    assert result.exit_code == 1
    [line, _] = _lines(result)
    assert line.startswith(f"checkpoint: {ckpt}: ")
    expected = "not a readable checkpoint" if damage == "truncated" else "differs from the"
    assert expected in line
    assert line.endswith("delete it and rerun: `alsa-bench run -d fmnist -b mlp --seed 0 "
                         "--refresh train` retrains it")
    repaired = _doctor("--repair")
    assert repaired.exit_code == 0 and not ckpt.exists()
    assert _lines(repaired)[0].startswith(f"checkpoint: {ckpt}: ")
    assert "; repaired: delete it and rerun" in _lines(repaired)[0]
    assert "healthy after repair (1 repaired" in _lines(repaired)[1]


def test_checkpoint_of_no_run_is_an_orphan_and_kept(healthy) -> None:
    extra = healthy / "checkpoints" / "fmnist.lenet.s1.pt"
    extra.write_bytes(_checkpoint_bytes(2))
    result = _doctor("--repair")
    assert result.exit_code == 1 and extra.exists()
    assert _lines(result)[0] == (
        f"orphan-file: {extra}: checkpoint of run 'fmnist.lenet.s1', which is not in runs; "
        "`alsa-bench run -d fmnist -b lenet --seed 1 --refresh extract` uses it; or delete it "
        "if the run is gone")


def test_parquet_results_checked_against_their_name_and_the_ingested_table(healthy) -> None:
    good = _parquet_result(healthy)
    bad = _parquet_result(healthy, "estimates")
    bad.write_bytes(bad.read_bytes()[:-10] + b"0123456789")
    lines = _lines(_doctor())
    assert any(line.startswith(f"orphan-file: {good}: logits result never ingested")
               for line in lines)
    assert any(line.startswith(f"result-hash: {bad}: content hashes to ") and
               line.endswith("delete it and rerun: the stage recomputes it") for line in lines)
    con = duckdb.connect(str(healthy / "bench.duckdb"))
    con.execute("CREATE TABLE IF NOT EXISTS ingested (sha256 VARCHAR PRIMARY KEY, kind VARCHAR, "
                "run_key VARCHAR, ingested_at TIMESTAMP)")  # schema >= 3 has it already
    con.execute("INSERT INTO ingested VALUES (?, 'logits', ?, now())", [good.stem, RUN])
    con.close()
    result = _doctor("--repair")
    assert result.exit_code == 0, result.output
    assert good.exists() and not bad.exists()


def test_feature_files_checked_against_their_name_and_feature_files(healthy) -> None:
    from storage.features import write_feature_entries, write_features

    root = healthy / "results"
    named = write_features(root, "clean", "target", np.ones((50, 3)))
    orphan = write_features(root, "val", "val", np.zeros((50, 3)))
    changed = write_features(root, "train", "train", np.full((4, 3), 2.0), np.arange(4))
    with connect(healthy / "bench.duckdb") as con:
        write_feature_entries(con, RUN, [named, changed])
    bad = root / "features" / f"{changed.sha256}.npy"
    bad.write_bytes(bad.read_bytes()[:-2] + b"\x00\x7f")
    lines = _lines(_doctor())
    orphan_path = root / "features" / f"{orphan.sha256}.npy"
    assert any(line.startswith(f"orphan-file: {orphan_path}: features result never ingested")
               for line in lines)
    assert any(line.startswith(f"result-hash: {bad}: content hashes to ") for line in lines)
    assert not any(f"{named.sha256}.npy" in line for line in lines)
    assert not any(f"{changed.labels_sha256}.npy" in line for line in lines)


def test_leftovers_of_killed_writes_are_removed_by_repair(healthy) -> None:
    tmp = healthy / "checkpoints" / f".{RUN}.pt.k3j2.tmp"
    tmp.write_bytes(b"half a checkpoint")
    part = healthy / "results" / "logits" / ".tmp-ab12.parquet"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"PAR1")
    staging = healthy / "data" / ".staging-x81"
    (staging / "inner").mkdir(parents=True)
    (staging / "inner" / "f.gz").write_bytes(b"x")
    lines = _lines(_doctor())
    assert f"temp-file: {tmp}: temporary file of a write that never finished (the process was " \
           "killed); delete it" in lines
    assert any(line.startswith(f"temp-file: {part}:") for line in lines)
    assert any(line.startswith(f"staging: {staging}: folder of an interrupted fetch")
               for line in lines)
    result = _doctor("--repair")
    assert result.exit_code == 0
    assert not tmp.exists() and not part.exists() and not staging.exists()
    assert (healthy / "checkpoints" / f"{RUN}.pt").exists()
    assert _doctor().exit_code == 0


@pytest.mark.parametrize("content", [b"not json at all", b'{"metadata": {}, "result": "x"}',
                                     b""])
def test_a_cache_record_that_does_not_deserialize_is_found_and_removed(healthy, content) -> None:
    bad = healthy / "prefect-results" / "ffffffffffffffffffffffffffffffff"
    bad.write_bytes(content)
    result = _doctor()
    assert result.exit_code == 1
    [line, _] = _lines(result)
    assert line.startswith(f"cache-record: {bad}: Prefect cache record does not deserialize (")
    assert _doctor("--repair").exit_code == 0
    assert not bad.exists()
    assert len(list((healthy / "prefect-results").iterdir())) == 1  # the good record stays


def test_a_stale_lock_record_is_reported_then_cleared(healthy) -> None:
    record = {"pid": 999999, "host": "h", "command": "alsa-bench run", "purpose": "run",
              "started_at": 1.0e9}
    (healthy / ".lock").write_text(json.dumps(record))
    result = _doctor()
    assert result.exit_code == 1
    line = _lines(result)[0]
    assert line.startswith(f"stale-lock: {healthy / '.lock'}: owner record of pid 999999 "
                           "(`alsa-bench run`, since ")
    assert _doctor().exit_code == 0  # taking the lock replaced the record


@pytest.mark.parametrize("version", ["older", "newer"])
def test_schema_versions_are_reported_and_the_database_left_alone(healthy, version) -> None:
    db = healthy / "bench.duckdb"
    if version == "older":
        shutil.copyfile(FIXTURE, db)
        con = duckdb.connect(str(db))
        con.execute("UPDATE runs SET checkpoint_sha256 = ?",
                    [hashlib.sha256((healthy / "checkpoints" / f"{RUN}.pt").read_bytes())
                     .hexdigest()])
        con.close()
        expected = (f"schema: {db}: schema version 1, older than {SCHEMA_VERSION} and migratable; "
                    "the next `alsa-bench run` migrates it in place")
    else:
        con = duckdb.connect(str(db))
        con.execute("UPDATE schema_meta SET value = ? WHERE key = 'schema_version'",
                    [str(SCHEMA_VERSION + 1)])
        con.close()
        expected = (f"schema: {db}: schema version {SCHEMA_VERSION + 1} is newer than this "
                    f"alsa-bench's {SCHEMA_VERSION}; upgrade alsa-bench")
    before = db.read_bytes()
    result = _doctor("--repair")
    assert result.exit_code == 1
    assert _lines(result)[0].startswith(expected), _lines(result)
    assert db.read_bytes() == before


def test_a_folder_in_use_gives_the_busy_line(healthy) -> None:
    code = ("import os, sys\nfrom storage.lock import state_lock\n"
            "with state_lock(os.environ['ALSA_BENCH_HOME'], purpose='run'):\n"
            "    print('locked', flush=True)\n    sys.stdin.readline()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT),
                                 "ALSA_BENCH_HOME": str(healthy)},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        result = _doctor()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()
    assert result.exit_code == 1 and result.stdout == ""
    [line] = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert line.startswith(f"error: state folder {healthy} is in use by pid {proc.pid} (`")


def test_a_missing_folder_is_one_line(state_home) -> None:
    result = _doctor()
    assert result.exit_code == 1 and not state_home.exists()
    assert result.stderr.strip() == (f"error: no state folder at {state_home}; point "
                                     "ALSA_BENCH_HOME at the folder that holds bench.duckdb")


def test_examine_refuses_a_file_for_a_folder(tmp_path) -> None:
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(ValueError, match="folder must be a state folder"):
        examine(path)
