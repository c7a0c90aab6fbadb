"""Content-addressed Parquet result files and their idempotent, all-or-nothing ingest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import storage.results as results
from storage import (
    EstimateRow,
    RunInfo,
    SplitInfo,
    connect,
    list_splits,
    read_anchors,
    read_estimates,
    read_target_logits,
    read_val,
)
from storage.results import (
    ResultCorruptError,
    current_file,
    holds_file,
    ingest,
    read_logits_file,
    results_root,
    write_estimates_file,
    write_logits_file,
)
from tests.storage._helpers import make_split

RUN = RunInfo("toy.mlp.s0", "toy", "toy", "mlp", 0, 4, "c" * 64, "v1", 1.25)


def _splits(seed: int) -> list[tuple[SplitInfo, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        (SplitInfo("val", "val", "source", "val", None), *make_split(rng, 60, 4, 0.8)),
        (SplitInfo("clean", "target", "clean", "clean", None), *make_split(rng, 50, 4, 0.7)),
        (SplitInfo("noise-3", "target", "noise", "noise", 3), *make_split(rng, 40, 4, 0.5)),
    ]


def _counts(db: Path) -> tuple[int, int, int]:
    with connect(db, read_only=True) as con:
        return tuple(
            con.sql(f"SELECT count(*) FROM {t}").fetchall()[0][0]
            for t in ("splits", "logits", "ingested")
        )


def test_same_content_gives_the_same_bytes_in_another_process(tmp_path):
    first = write_logits_file(RUN, _splits(0), tmp_path)
    again = write_logits_file(RUN, _splits(0), tmp_path)
    other = write_logits_file(RUN, _splits(1), tmp_path)
    assert first == again and first.sha256 != other.sha256
    assert Path(first.path) == tmp_path / "logits" / f"{first.sha256}.parquet"
    assert results.file_sha256(first.path) == first.sha256
    code = (
        "import sys; from pathlib import Path; "
        "from tests.storage.test_results import RUN, _splits; "
        "from storage.results import write_logits_file; "
        "print(write_logits_file(RUN, _splits(0), Path(sys.argv[1])).sha256)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "elsewhere")], capture_output=True,
        text=True, check=True, cwd=Path(__file__).parents[2],
    )
    assert out.stdout.strip() == first.sha256
    assert not list((tmp_path / "logits").glob(".tmp-*"))  # no temporary file left behind


def test_logits_round_trip_and_idempotent_ingest(tmp_path):
    splits = _splits(0)
    published = write_logits_file(RUN, splits, tmp_path / "results")
    content = read_logits_file(published.path)
    assert content.run == RUN and [s.split for s in content.splits] == ["val", "clean", "noise-3"]
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        assert ingest(con, published.path) is True
        first_at = con.sql("SELECT ingested_at FROM ingested").fetchall()
        assert ingest(con, published.path) is False
        assert con.sql("SELECT ingested_at FROM ingested").fetchall() == first_at
        assert current_file(con, "logits", RUN.run_key) == published.sha256
        val_logits, val_labels = read_val(con, RUN.run_key)
        np.testing.assert_array_equal(val_logits, splits[0][1])
        np.testing.assert_array_equal(val_labels, splits[0][2])
        np.testing.assert_array_equal(read_target_logits(con, RUN.run_key, "noise-3"), splits[2][1])
        stored = {s.split: s for s in list_splits(con, RUN.run_key)}
        assert stored == {s.split: s for s in content.splits}
        truth = float(np.mean(splits[1][1].argmax(1) == splits[1][2]))
        assert stored["clean"].true_accuracy == truth
    assert _counts(db) == (3, 150, 1)


def test_the_run_record_of_the_host_travels_to_the_runs_row(tmp_path):
    from dataclasses import replace

    from storage import get_run

    here = replace(RUN, compute_mode="reproducible",
                   compute_settings='{"aten_cpu_capability": "avx2", "threads": 2}',
                   cpu_model="AMD EPYC", cpu_flags="sse4_2 avx avx2 fma")
    published = write_logits_file(here, _splits(0), tmp_path / "results")
    assert read_logits_file(published.path).run == here
    # the same logits of the same checkpoint computed on another host: another file (its footer
    # names the host), the same content, so it replaces the first one's record
    there = replace(here, cpu_model="Intel Xeon", train_seconds=9.0,
                    compute_settings='{"aten_cpu_capability": "avx2", "threads": 2, "x": 1}')
    moved = write_logits_file(there, _splits(0), tmp_path / "results")
    assert moved.sha256 != published.sha256
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        ingest(con, published.path)
        assert get_run(con, RUN.run_key).cpu_model == "AMD EPYC"
        ingest(con, moved.path)
        row = get_run(con, RUN.run_key)
        assert (row.cpu_model, row.compute_mode) == ("Intel Xeon", "reproducible")
        kept = con.sql("SELECT sha256 FROM ingested WHERE kind = 'logits'").fetchall()
    assert kept == [(moved.sha256,)]
    # a file written before the record existed (no such keys) reads with None
    assert read_logits_file(write_logits_file(RUN, _splits(0), tmp_path / "old").path).run \
        .compute_mode is None


def test_estimates_and_anchors_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    rows = [
        EstimateRow(RUN.run_key, split, method, "{}", 0.5 + i / 10, 0.6, abs(i / 10 - 0.1), 0.01,
                    0.002, interval_low=0.4, interval_high=0.7, interval_level=0.9)
        for i, (split, method) in enumerate([("clean", "ac"), ("clean", "alsa-g")])
    ]
    anchors = {"alsa-g": (rng.normal(size=(5, 4)), rng.normal(size=5), rng.random(5) + 0.1)}
    published = write_estimates_file(RUN.run_key, rows, anchors, tmp_path / "results")
    assert len(list((tmp_path / "results" / "anchors").glob("*.parquet"))) == 1
    with connect(tmp_path / "bench.duckdb") as con:
        assert ingest(con, published.path) is True
        assert ingest(con, published.path) is False
        assert read_estimates(con, RUN.run_key) == rows
        positions, peaks, variances = read_anchors(con, RUN.run_key, "alsa-g")
        np.testing.assert_array_equal(positions, anchors["alsa-g"][0].astype(np.float32))
        np.testing.assert_array_equal(peaks, anchors["alsa-g"][1])
        np.testing.assert_array_equal(variances, anchors["alsa-g"][2])


def _method_rows(methods, value):
    return [EstimateRow(RUN.run_key, split, m, "{}", value, 0.6, abs(value - 0.6), 0.01, 0.002)
            for m in methods for split in ("clean", "noise-3")]


def _held(con):
    return {sha for (sha,) in con.sql(
        "SELECT sha256 FROM ingested WHERE kind = 'estimates'").fetchall()}


def test_one_file_per_method_are_all_held_and_replace_a_whole_run_file(tmp_path):
    """The pipeline's layout: one estimates file per (run, method), each held beside the others;
    an older file holding every method of the run is dropped once newer files cover its rows."""
    root = tmp_path / "results"
    whole = write_estimates_file(RUN.run_key, _method_rows(["ac", "doc"], 0.5), {}, root)
    ac = write_estimates_file(RUN.run_key, _method_rows(["ac"], 0.55), {}, root)
    doc = write_estimates_file(RUN.run_key, _method_rows(["doc"], 0.65), {}, root)
    with connect(tmp_path / "bench.duckdb") as con:
        assert ingest(con, whole.path) is True
        assert ingest(con, ac.path) is True
        # the whole-run file still holds doc's rows: it stays on record and on disk
        assert _held(con) == {whole.sha256, ac.sha256} and Path(whole.path).is_file()
        assert holds_file(con, whole.path) is False  # its ac rows were replaced
        assert ingest(con, doc.path) is True
        # ac and doc together cover every pair of the whole-run file: it is gone
        assert _held(con) == {ac.sha256, doc.sha256} and not Path(whole.path).exists()
        before = con.sql("SELECT ingested_at FROM ingested ORDER BY sha256").fetchall()
        # a file whose rows the database holds is not ingested again, though another method's
        # file came after it
        assert holds_file(con, ac.path) and holds_file(con, doc.path)
        assert ingest(con, ac.path) is False and ingest(con, doc.path) is False
        assert con.sql("SELECT ingested_at FROM ingested ORDER BY sha256").fetchall() == before
        got = {(r.split, r.method): r.estimated_accuracy for r in read_estimates(con, RUN.run_key)}
        assert got == {("clean", "ac"): 0.55, ("noise-3", "ac"): 0.55,
                       ("clean", "doc"): 0.65, ("noise-3", "doc"): 0.65}
        # a re-run of one method replaces that method's file only
        ac2 = write_estimates_file(RUN.run_key, _method_rows(["ac"], 0.45), {}, root)
        assert ingest(con, ac2.path) is True
        assert _held(con) == {ac2.sha256, doc.sha256} and not Path(ac.path).exists()


def test_a_file_partly_replaced_is_ingested_again(tmp_path):
    root = tmp_path / "results"
    both = write_estimates_file(RUN.run_key, _method_rows(["ac", "doc"], 0.5), {}, root)
    ac = write_estimates_file(RUN.run_key, _method_rows(["ac"], 0.55), {}, root)
    with connect(tmp_path / "bench.duckdb") as con:
        ingest(con, both.path)
        ingest(con, ac.path)
        assert ingest(con, both.path) is True  # its ac rows had been replaced: they come back
        assert {r.estimated_accuracy for r in read_estimates(con, RUN.run_key)} == {0.5}
        assert holds_file(con, both.path) and not Path(ac.path).exists()


def test_hash_mismatch_is_refused_in_one_line_and_writes_nothing(tmp_path):
    published = write_logits_file(RUN, _splits(0), tmp_path / "results")
    path = Path(published.path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        with pytest.raises(ResultCorruptError) as info:
            ingest(con, path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert "does not match its hash" in message and "delete it and rerun" in message
    assert _counts(db) == (0, 0, 0)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_garbage_or_partial_parquet_named_by_its_hash_is_refused(tmp_path, damage):
    folder = tmp_path / "results" / "logits"
    folder.mkdir(parents=True)
    if damage == "garbage":
        data = b"PAR1 not really a parquet file"
    else:
        good = Path(write_logits_file(RUN, _splits(0), tmp_path / "other").path).read_bytes()
        data = good[: len(good) // 2]
    import hashlib

    path = folder / f"{hashlib.sha256(data).hexdigest()}.parquet"
    path.write_bytes(data)
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        with pytest.raises(ResultCorruptError, match="not a readable Parquet file") as info:
            ingest(con, path)
    assert "\n" not in str(info.value)
    assert _counts(db) == (0, 0, 0)


def test_failed_ingest_rolls_back_to_the_old_partition(tmp_path, monkeypatch):
    old, new = _splits(0), _splits(1)
    old_file = write_logits_file(RUN, old, tmp_path / "results")
    new_file = write_logits_file(RUN, new[:2], tmp_path / "results")  # one split fewer
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        ingest(con, old_file.path)

    calls = []
    real = results.write_split

    def failing(con, run_key, info, logits, labels):
        calls.append(info.split)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(con, run_key, info, logits, labels)

    monkeypatch.setattr(results, "write_split", failing)
    with connect(db) as con:
        with pytest.raises(OSError, match="disk full"):
            ingest(con, new_file.path)
        assert current_file(con, "logits", RUN.run_key) == old_file.sha256
        val_logits, _ = read_val(con, RUN.run_key)
        np.testing.assert_array_equal(val_logits, old[0][1])
        assert {s.split for s in list_splits(con, RUN.run_key)} == {"val", "clean", "noise-3"}
    assert _counts(db) == (3, 150, 1)
    monkeypatch.setattr(results, "write_split", real)
    with connect(db) as con:
        assert ingest(con, new_file.path) is True
        assert {s.split for s in list_splits(con, RUN.run_key)} == {"val", "clean"}
        assert current_file(con, "logits", RUN.run_key) == new_file.sha256
        # The old file again: it becomes current once more, and its partition comes back.
        assert ingest(con, old_file.path) is True
        assert current_file(con, "logits", RUN.run_key) == old_file.sha256
        assert {s.split for s in list_splits(con, RUN.run_key)} == {"val", "clean", "noise-3"}
        assert con.sql("SELECT count(*) FROM ingested").fetchall() == [(2,)]  # both on record


def test_results_root_precedence_and_bad_paths(tmp_path, monkeypatch):
    monkeypatch.delenv(results.RESULTS_ENV, raising=False)
    assert results_root(db=tmp_path / "bench.duckdb") == tmp_path / "results"
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path / "shared"))
    assert results_root(db=tmp_path / "bench.duckdb") == tmp_path / "shared"
    assert results_root(tmp_path / "explicit") == tmp_path / "explicit"
    with connect(tmp_path / "bench.duckdb") as con:
        with pytest.raises(ValueError, match="logits/ or <root>/estimates/"):
            ingest(con, tmp_path / "x.parquet")
        with pytest.raises(ResultCorruptError, match="does not exist"):
            ingest(con, tmp_path / "logits" / f"{'0' * 64}.parquet")
    with pytest.raises(ValueError, match="exactly one validation split"):
        write_logits_file(RUN, _splits(0)[1:], tmp_path)
