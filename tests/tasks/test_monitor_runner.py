"""One monitor run, end to end on small synthetic streams: incremental work, the fit cache,
every bad-input rule of issue 33 (item 6), labels arriving later, chunkings, alerts, figure."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from estimators import get_estimator
from storage.db import connect
from storage.monitor import read_history
from tasks.monitor import make_options, run_monitor

C = 3
LATER = datetime(2030, 1, 1, tzinfo=UTC)


def make(n: int, seed: int, signal: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, C, n)
    return rng.normal(size=(n, C)) + signal * np.eye(C)[y], y


@pytest.fixture
def stream(state_home, tmp_path):
    """A reference of 600 rows and a production folder of three 200-row days."""
    root = tmp_path / "stream"
    (root / "prod").mkdir(parents=True)
    (root / "labels").mkdir()
    z, y = make(600, 0)
    np.savez(root / "ref.npz", logits=z, labels=y)
    for day, signal in ((1, 2.0), (2, 1.5), (3, 0.8)):
        z, y = make(200, day, signal)
        np.savez(root / "prod" / f"day-{day}.npz", logits=z)
        np.savez(root / "labels" / f"day-{day}.npz", labels=y)
    return root


def truth(root: Path) -> dict[str, float]:
    """Each day's accuracy, computed here from the files (the independent reference)."""
    out = {}
    for day in (1, 2, 3):
        z = np.load(root / "prod" / f"day-{day}.npz")["logits"]
        y = np.load(root / "labels" / f"day-{day}.npz")["labels"]
        out[f"day-{day}.npz"] = float(np.mean(z.argmax(axis=1) == y))
    return out


def options(root: Path, **kw):
    kw.setdefault("methods", ["ac"])
    return make_options(root / "ref.npz", str(root / "prod"), **kw)


def history(root: Path, **kw) -> list[dict]:
    with connect() as con:
        return read_history(con, stream=str((root / "prod").resolve()), **kw)


def test_first_run_estimates_every_file_then_only_new_ones(stream):
    first = run_monitor(options(stream))
    assert first.new_chunks == ["day-1.npz", "day-2.npz", "day-3.npz"]
    assert first.fits_from_cache == {"ac": False} and not first.refused
    # the stored estimate is the estimator's own, computed independently here
    ref = np.load(stream / "ref.npz")
    day2 = np.load(stream / "prod" / "day-2.npz")["logits"]
    direct = get_estimator("ac").fit(ref["logits"], ref["labels"]).estimate(day2)
    row = next(r for r in first.history if r["chunk_name"] == "day-2.npz")
    assert row["estimated_accuracy"] == pytest.approx(direct.accuracy)
    assert (row["shift_low"], row["shift_high"]) == pytest.approx(direct.shift_interval)
    assert (row["interval_low"], row["interval_high"]) == pytest.approx(direct.interval)
    assert row["reference_accuracy"] == pytest.approx(
        get_estimator("ac").fit(ref["logits"], ref["labels"]).estimate(ref["logits"]).accuracy)
    assert row["signals_json"] and "confidence_drop" in row["signals_json"]

    again = run_monitor(options(stream))
    assert again.new_chunks == [] and again.new_estimates == 0
    assert again.fits_from_cache == {"ac": True}
    z, _ = make(200, 4)
    np.savez(stream / "prod" / "day-4.npz", logits=z)
    one = run_monitor(options(stream))
    assert one.new_chunks == ["day-4.npz"] and one.new_estimates == 1
    assert len(history(stream)) == 4


def test_a_run_with_a_cached_fit_never_fits(stream, monkeypatch):
    run_monitor(options(stream, methods=["ac", "alsa-g"]))
    from estimators import Estimator

    def refuse(*args, **kwargs):
        raise AssertionError("fit called although the fit is cached")

    monkeypatch.setattr(Estimator, "fit", refuse)
    z, _ = make(200, 9)
    np.savez(stream / "prod" / "day-9.npz", logits=z)
    result = run_monitor(options(stream, methods=["ac", "alsa-g"]))
    assert result.fits_from_cache == {"ac": True, "alsa-g": True}
    assert result.new_chunks == ["day-9.npz"] and result.new_estimates == 2


def test_a_method_added_later_estimates_only_what_is_missing(stream):
    run_monitor(options(stream))
    result = run_monitor(options(stream, methods=["ac", "atc-mc"]))
    assert result.new_estimates == 3
    assert sorted({r["method"] for r in result.history}) == ["ac", "atc-mc"]


def test_the_same_content_arriving_twice_is_estimated_once(stream):
    run_monitor(options(stream))
    z = np.load(stream / "prod" / "day-2.npz")["logits"]
    pq.write_table(pa.table({"logits": z.astype(np.float32).tolist()}),
                   stream / "prod" / "day-2-resent.parquet")
    result = run_monitor(options(stream))
    assert result.new_chunks == [] and result.new_estimates == 0
    # the first of the two in name order is read, the other is its duplicate
    assert [set(pair) for pair in result.duplicates] == [
        {str(stream / "prod" / "day-2-resent.parquet"), str(stream / "prod" / "day-2.npz")}]
    assert any("same logits as" in n and "estimated once" in n for n in result.notes)


def test_a_file_still_being_written_waits_until_it_is_complete(stream):
    z, _ = make(200, 5)
    np.savez(stream / "day-5.npz", logits=z)
    data = (stream / "day-5.npz").read_bytes()
    (stream / "prod" / "day-5.npz").write_bytes(data[: len(data) // 2])  # mid-write
    result = run_monitor(options(stream))
    assert "day-5.npz" not in result.new_chunks and not result.refused
    assert result.incomplete == [str(stream / "prod" / "day-5.npz")]
    assert any("not complete yet" in n for n in result.notes)
    (stream / "prod" / "day-5.npz").write_bytes(data)  # the writer finished
    assert run_monitor(options(stream)).new_chunks == ["day-5.npz"]


def test_refused_files_store_nothing_and_the_others_go_on(stream):
    z, _ = make(50, 7)
    np.savez(stream / "prod" / "a-classes.npz", logits=np.hstack([z, z]))
    np.savez(stream / "prod" / "b-probs.npz", logits=np.exp(z) / np.exp(z).sum(1, keepdims=True))
    bad = z.copy()
    bad[3, 0] = np.nan
    np.savez(stream / "prod" / "c-nan.npz", logits=bad)
    result = run_monitor(options(stream))
    assert result.new_chunks == ["day-1.npz", "day-2.npz", "day-3.npz"]
    assert len(result.refused) == 3
    assert "a-classes.npz: 6 classes, but the reference has 3" in result.refused[0]
    assert "b-probs.npz" in result.refused[1] and "probabilities" in result.refused[1]
    assert "c-nan.npz: 1 row(s) hold NaN or infinite logits (row 3)" in result.refused[2]
    names = {r["chunk_name"] for r in history(stream, current_only=False)}
    assert names == {"day-1.npz", "day-2.npz", "day-3.npz"}


def test_an_empty_chunk_and_a_small_one_warn_and_say_how_wide_their_band_is(stream):
    np.savez(stream / "prod" / "day-6.npz", logits=np.zeros((0, C)))
    z, _ = make(12, 6)
    np.savez(stream / "prod" / "day-7.npz", logits=z)
    result = run_monitor(options(stream, alert_below=0.99))
    rows = {r["chunk_name"]: r for r in result.history}
    empty, small = rows["day-6.npz"], rows["day-7.npz"]
    assert empty["n_rows"] == 0 and empty["estimated_accuracy"] is None
    assert (empty["shift_low"], empty["shift_high"]) == (0.0, 1.0) and not empty["alert"]
    assert any("day-6.npz: empty chunk (0 rows): no estimate; its band is [0, 1]" in w
               for w in result.warnings)
    width = 100 * (small["shift_high"] - small["shift_low"])
    [line] = [w for w in result.warnings if w.startswith("day-7.npz: 12 row(s)")]
    assert f"is {width:.1f} points wide" in line and "under 30" in line
    assert small["estimated_accuracy"] is not None


def test_a_changed_reference_keeps_the_old_history_and_keys_the_new_apart(stream):
    old = run_monitor(options(stream))
    z, y = make(600, 42)
    np.savez(stream / "ref.npz", logits=z, labels=y)
    new = run_monitor(options(stream))
    assert new.reference_sha256 != old.reference_sha256
    assert new.new_chunks == ["day-1.npz", "day-2.npz", "day-3.npz"]
    assert any("the reference changed" in n for n in new.notes)
    assert len(history(stream, reference_sha256=old.reference_sha256)) == 3
    assert len(history(stream, reference_sha256=new.reference_sha256)) == 3
    assert {r["chunk_key"] for r in new.history} == {r["chunk_key"] for r in old.history}


def test_labels_arriving_later_are_joined_in_and_coverage_reported(stream):
    run_monitor(options(stream))
    result = run_monitor(options(stream, labels=str(stream / "labels")))
    assert result.new_estimates == 0
    assert result.realized_joined == ["day-1.npz", "day-2.npz", "day-3.npz"]
    got = {r["chunk_name"]: r["realized_accuracy"] for r in result.history}
    assert got == pytest.approx(truth(stream))
    cov = result.coverage["ac"]
    inside = sum(r["shift_low"] <= r["realized_accuracy"] <= r["shift_high"]
                 for r in result.history)
    assert (cov.n_chunks, cov.covered, cov.level) == (3, inside, 0.9)
    assert run_monitor(options(stream, labels=str(stream / "labels"))).realized_joined == []


def test_a_later_file_with_a_label_column_labels_the_earlier_chunk(stream):
    run_monitor(options(stream))
    z = np.load(stream / "prod" / "day-3.npz")["logits"]
    y = np.load(stream / "labels" / "day-3.npz")["labels"]
    np.savez(stream / "prod" / "day-3-labelled.npz", logits=z, labels=y)
    result = run_monitor(options(stream))
    assert result.new_estimates == 0 and result.realized_joined == ["day-3.npz"]
    row = next(r for r in result.history if r["chunk_name"] == "day-3.npz")
    assert row["realized_accuracy"] == pytest.approx(truth(stream)["day-3.npz"])


def test_bad_label_files_are_refused_and_the_estimates_kept(stream):
    np.savez(stream / "labels" / "day-2.npz", labels=np.zeros(7, int))
    result = run_monitor(options(stream, labels=str(stream / "labels")))
    assert result.new_chunks == ["day-1.npz", "day-2.npz", "day-3.npz"]
    assert any("7 labels for a production file of 200 rows" in r for r in result.refused)
    assert result.realized_joined == ["day-1.npz", "day-3.npz"]


def _timed(root: Path, name: str, start: datetime, hours: list[float], seed: int) -> None:
    z, y = make(len(hours), seed)
    stamps = np.array([np.datetime64((start + timedelta(hours=h)).replace(tzinfo=None), "s")
                       for h in hours])
    np.savez(root / "prod" / name, logits=z, timestamp=stamps, labels=y)


def test_days_across_files_late_rows_supersede_and_the_open_day_waits(stream):
    for f in (stream / "prod").iterdir():
        f.unlink()
    d = datetime(2026, 3, 1, tzinfo=UTC)
    _timed(stream, "a.npz", d, [1 + 0.05 * i for i in range(60)], 1)  # day 1
    _timed(stream, "b.npz", d, [20 + 0.1 * i for i in range(80)], 2)  # days 1 and 2
    now = d + timedelta(days=1, hours=12)
    first = run_monitor(options(stream, chunk="1d"), now=now)
    assert first.new_chunks == ["2026-03-01"]
    assert first.history[0]["n_rows"] == 60 + 40 and first.history[0]["source"] == "a.npz, b.npz"
    assert first.realized_joined == ["2026-03-01"]  # every row came with its label
    assert any("period 2026-03-02 is not over yet" in n for n in first.notes)
    _timed(stream, "c.npz", d, [5.0, 6.0], 3)  # late rows of day 1
    later = run_monitor(options(stream, chunk="1d"), now=LATER)
    assert later.new_chunks == ["2026-03-01", "2026-03-02"]
    assert any("2026-03-01: its content changed" in n for n in later.notes)
    every = history(stream, chunking="1d", current_only=False)
    assert sorted((r["chunk_name"], r["is_current"], r["n_rows"]) for r in every) == [
        ("2026-03-01", False, 100), ("2026-03-01", True, 102), ("2026-03-02", True, 40)]


def test_fixed_row_chunks_wait_for_a_full_chunk(stream):
    result = run_monitor(options(stream, chunk="250"))
    assert result.new_chunks == ["rows 0-249", "rows 250-499"]
    assert result.history[0]["source"] == "day-1.npz, day-2.npz"
    assert any("100 row(s) after the last full chunk of 250 wait" in n for n in result.notes)


def test_alerts_know_their_direction_and_the_figure_and_export_are_written(stream, tmp_path):
    plot = tmp_path / "plot.svg"
    result = run_monitor(options(stream, alert_below=0.99, alert_drop=1), plot=plot)
    assert result.alerts and {a.alert.direction for a in result.alerts} == {"down"}
    kinds = {(a.chunk_name, a.alert.kind) for a in result.alerts}
    assert ("day-3.npz", "below") in kinds and ("day-3.npz", "drop") in kinds
    assert all(r["alert"] for r in result.history)
    assert plot.read_text().lstrip().startswith("<?xml")
    assert result.figure.is_file() and result.figure.suffix == ".png"
    assert pq.read_table(result.export).num_rows == 3
    # alerts fire once: a rerun estimates nothing and raises nothing
    assert run_monitor(options(stream, alert_below=0.99)).alerts == []


def test_a_glob_stream_and_parquet_batches(stream):
    z, _ = make(100, 11)
    pq.write_table(pa.table({f"logit_{k}": z[:, k] for k in range(C)}),
                   stream / "prod" / "extra.parquet")
    result = run_monitor(make_options(stream / "ref.npz", str(stream / "prod" / "*.parquet"),
                                      methods=["ac"]))
    assert result.new_chunks == ["extra.parquet"]
    assert result.stream.endswith("prod/*.parquet")


def test_bad_reference_or_paths_raise_one_line(stream):
    z, _ = make(30, 1)
    np.savez(stream / "nolabels.npz", logits=z)
    with pytest.raises(ValueError, match=r"--reference: .*no labels found"):
        run_monitor(make_options(stream / "nolabels.npz", str(stream / "prod")))
    shutil.rmtree(stream / "labels")
    with pytest.raises(ValueError, match="--labels"):
        run_monitor(options(stream, labels=str(stream / "labels")))


def test_labels_by_name_follow_the_rows_of_row_chunks(stream):
    result = run_monitor(options(stream, chunk="250", labels=str(stream / "labels")))
    z = np.concatenate([np.load(stream / "prod" / f"day-{d}.npz")["logits"] for d in (1, 2, 3)])
    y = np.concatenate([np.load(stream / "labels" / f"day-{d}.npz")["labels"]
                        for d in (1, 2, 3)])
    want = [float(np.mean(z[a:a + 250].argmax(axis=1) == y[a:a + 250])) for a in (0, 250)]
    assert [r["realized_accuracy"] for r in result.history] == pytest.approx(want)


def test_an_upgrade_of_the_estimators_refits_but_keeps_the_estimates(stream, monkeypatch):
    import tasks.monitor.estimation as estimation

    run_monitor(options(stream))
    monkeypatch.setattr(estimation, "estimators_code_version", lambda: "another version")
    result = run_monitor(options(stream))
    assert result.fits_from_cache == {"ac": False}  # a fit of other code is not trusted
    assert result.new_estimates == 0  # the estimates' keys do not hold the code version


def test_doctor_accepts_the_state_folder_a_run_leaves(stream, state_home):
    from storage.doctor import examine

    run_monitor(options(stream, labels=str(stream / "labels"), alert_below=0.99))
    assert (state_home / "monitor" / "fits" / ".key").is_file()
    report = examine(state_home)
    assert report.healthy, [f"{f.check}: {f.path}: {f.problem}" for f in report.findings]
