"""After any successful run the state folder is healthy, and a state folder can move.

On the tiny suite: damaged Parquet results and garbled cache records are moved to
``<state>/quarantine/`` and recomputed, ``ingested`` keeps one row per file the database holds
(5: logits, one estimates file per method, ALSA's anchors), killed writers' temporary files are
removed by the next run, a failed task leaves no pickled exception among the cache records and
says its exception once, and a copied state folder (the original deleted) reruns with every
stage cached and the same database.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from storage.doctor import examine

pytestmark = [pytest.mark.flow, pytest.mark.filterwarnings("ignore::UserWarning")]

METHODS = ["ac", "atc-mc", "alsa-g"]
PARAMS = {"alsa-g": {"n_anchors": 20, "max_epochs": 30}}


@pytest.fixture(autouse=True)
def _records_in_the_state_folder(state_home, monkeypatch):
    """Prefect's cache records inside this test's state folder, as ``alsa-bench`` keeps them
    (keys are relative to the state folder, so a shared records folder would serve one test's
    records to the next)."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    records = state_home / "prefect-results"
    monkeypatch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(records))
    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(records)}):
        yield records


def _run(name: str):
    from flows.benchmark import benchmark

    return benchmark(suite="tiny", backbones=["mlp"], seeds=1, epochs=1, max_train_samples=200,
                     device="cpu", methods=METHODS, method_params=PARAMS, run_name=name,
                     publish_artifacts=False)


def _rows():
    from storage import connect, read_report_rows

    with connect(read_only=True) as con:
        rows = read_report_rows(con, suite="tiny").sort_values(["split", "method"])
        ingested = sorted(con.sql("SELECT kind FROM ingested").fetchall())
    return rows.reset_index(drop=True), ingested


CLEAN_INGESTED = [("anchors",), *[("estimates",)] * len(METHODS), ("logits",)]
#: The result files of a clean run: the logits, one estimates file per method, ALSA's anchors.
CLEAN_FILES = 1 + len(METHODS) + 1


def _result_files(home: Path) -> list[Path]:
    return sorted((home / "results").glob("*/*.parquet"))


def test_flipped_parquet_bytes_are_quarantined_and_the_folder_stays_healthy(
    prefect_server, tiny_suite, state_home
) -> None:
    import logging

    first = _run("tiny-flip")
    expected, ingested = _rows()
    assert ingested == CLEAN_INGESTED
    est = first.estimates[0]
    path = Path(est.path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2: len(data) // 2 + 4] = bytes(b ^ 0xFF for b in data[len(data) // 2:
                                                                          len(data) // 2 + 4])
    path.write_bytes(bytes(data))

    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("storage.doctor").addHandler(handler)
    try:
        second = _run("tiny-flip")
    finally:
        logging.getLogger("storage.doctor").removeHandler(handler)
    logged = "\n".join(lines)
    healed = [o.key for o in second.outcomes if o.healed]
    assert healed == [f"{est.run_key} {est.method}"], second.outcomes
    assert not path.exists()
    [moved] = (state_home / "quarantine").iterdir()
    assert moved.read_bytes() == bytes(data) and moved.name.endswith(path.name)
    assert any(f"quarantined {path} (" in line and line.endswith(f" as {moved}")
               for line in logged.splitlines()), logged
    again, ingested = _rows()
    assert ingested == CLEAN_INGESTED
    assert len(_result_files(state_home)) == CLEAN_FILES
    assert again["estimated_accuracy"].tolist() == expected["estimated_accuracy"].tolist()
    report = examine(state_home)
    assert report.healthy, [f.line() for f in report.findings]


def test_garbled_cache_records_leave_one_row_per_file_and_a_healthy_folder(
    prefect_server, tiny_suite, state_home
) -> None:
    records = Path(os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"])
    before = set(records.iterdir()) if records.is_dir() else set()
    first = _run("tiny-garbled")
    expected, _ = _rows()
    written = sorted(set(records.iterdir()) - before)
    assert len(written) == len(first.outcomes)
    for path in written:
        path.write_text("garbage{", encoding="utf-8")

    from storage.lock import state_lock

    with state_lock(state_home, wait=0, purpose="run"):  # as `alsa-bench run` holds it
        _run("tiny-garbled")
    again, ingested = _rows()
    assert ingested == CLEAN_INGESTED
    assert len(_result_files(state_home)) == CLEAN_FILES
    assert again["estimated_accuracy"].tolist() == expected["estimated_accuracy"].tolist()
    assert all(p.read_bytes() != b"garbage{" for p in written if p.exists())
    quarantined = {p.name.split(".", 1)[1] for p in (state_home / "quarantine").iterdir()}
    assert quarantined == {f"prefect-results__{p.name}" for p in written}
    report = examine(state_home)
    assert report.healthy, [f.line() for f in report.findings]


def test_temp_files_of_killed_writers_are_removed_by_the_next_run(
    prefect_server, tiny_suite, state_home
) -> None:
    from storage.lock import state_lock

    _run("tiny-tmp")
    leftovers = [state_home / "results" / "logits" / ".tmp-k3j2.parquet",
                 state_home / "checkpoints" / ".tiny.mlp.s0.pt.x81.tmp",
                 state_home / "data" / "tiny" / ".tiny.npz.a1.tmp"]
    for path in leftovers:
        path.write_bytes(b"half a file")
    keep = state_home / "quarantine" / ".kept.tmp"  # the quarantine is never swept
    keep.parent.mkdir()
    keep.write_bytes(b"x")
    assert not examine(state_home).healthy

    unlocked = _run("tiny-tmp")  # a flow started without the state lock sweeps nothing
    assert all(p.exists() for p in leftovers) and unlocked.outcomes
    with state_lock(state_home, wait=0, purpose="run"):
        _run("tiny-tmp")
    assert not any(p.exists() for p in leftovers) and keep.exists()
    assert examine(state_home).healthy


def test_a_failed_stage_task_leaves_no_record_of_its_exception(
    prefect_server, tiny_suite, state_home
) -> None:
    from prefect import flow

    from tasks.stages.common import forget_failure_record
    from tasks.stages.download import download_task

    records = Path(os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"])
    records.mkdir(parents=True, exist_ok=True)
    before = set(records.iterdir())

    @flow(on_failure=[forget_failure_record])  # as the benchmark flows
    def failing() -> None:
        download_task("no-such-dataset", str(state_home / "data"), "v1")

    with pytest.raises(ValueError, match="no-such-dataset"):
        failing()
    assert set(records.iterdir()) == before


def test_a_failed_stage_task_is_said_once_by_alsa_bench(
    prefect_server, tiny_suite, state_home, caplog
) -> None:
    """The first exception of a failed stage task is logged by alsa-bench's own logger in one
    line (not only in Prefect's traceback), and a deterministic failure runs once: the estimate
    task is not retried."""
    import logging

    from prefect import flow

    from tasks.stages import estimate as estimate_stage
    from tasks.stages.estimate import estimate_task

    first = _run("tiny-fail")
    [logits] = first.logits
    calls: list[str] = []

    def refuse(*args, **kwargs):
        calls.append(args[1])
        raise ValueError("the method refuses these logits")

    @flow
    def failing() -> None:
        estimate_task(logits, "ac", None, "fresh-version", None, 1)

    original = estimate_stage.compute_method_estimates
    estimate_stage.compute_method_estimates = refuse
    try:
        with caplog.at_level(logging.ERROR, logger="tasks.stages"):
            with pytest.raises(ValueError, match="refuses these logits"):
                failing()
    finally:
        estimate_stage.compute_method_estimates = original
    said = [r.getMessage() for r in caplog.records if r.name == "tasks.stages"]
    assert said == [f"estimate-{logits.run_key}-ac failed: ValueError: the method refuses these "
                    "logits"], said
    assert calls == ["ac"]


def test_a_copied_state_folder_reruns_all_cached_without_the_original(
    prefect_server, tiny_suite, state_home, tmp_path, monkeypatch
) -> None:
    first = _run("tiny-move")
    expected, ingested = _rows()
    moved = tmp_path / "moved"
    shutil.copytree(state_home, moved, symlinks=True)
    shutil.rmtree(state_home)  # nothing may be read from the old folder
    monkeypatch.setenv("ALSA_BENCH_HOME", str(moved))
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    records = moved / "prefect-results"  # where `alsa-bench` points Prefect for this folder
    monkeypatch.setenv("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(records))
    with temporary_settings(updates={PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(records)}):
        second = _run("tiny-move")
    assert [(o.stage, o.state, o.healed) for o in second.outcomes] == [
        (o.stage, "Cached", False) for o in first.outcomes
    ]
    again, ingested_again = _rows()
    assert again.equals(expected) and ingested_again == ingested
    for ref in (*second.datasets, *second.checkpoints, *second.logits, *second.estimates):
        for name in ("root", "path", "db_path"):
            value = getattr(ref, name, None)
            if value:
                assert Path(value).is_relative_to(moved), (ref, name)
    assert not state_home.exists()
    assert examine(moved).healthy
