"""The demo stream: its schedule, its label shift, its build from a stored benchmark run (the
path ``make bench`` leaves behind; the training path is exercised by ``alsa-bench monitor
--demo`` itself, about a minute), reuse, and its summary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tasks.monitor import demo
from tasks.monitor.demo import (
    ALERT_BELOW,
    DAYS,
    HARD_CLASSES,
    LABEL_SHIFT_DAYS,
    ROWS_PER_DAY,
    SPLITS,
    build_demo,
    demo_schedule,
    demo_summary,
)


def test_severity_rises_and_the_label_shift_sits_in_the_middle():
    days = demo_schedule()
    assert len(days) == DAYS == 30 and days[0].date == "2026-03-01"
    severities = [d.severity for d in days]
    assert severities == sorted(severities) and severities[0] == 0 and severities[-1] == 5
    shifted = [d.day for d in days if d.label_shift]
    assert shifted == list(LABEL_SHIFT_DAYS) and 10 < shifted[0] and shifted[-1] < 20
    assert {d.split for d in days} == set(SPLITS)


def _stored_run(n_classes: int = 10):
    """A fake ``fmnist.lenet.s0`` in the state's database: val + the demo's splits."""
    from storage.db import connect
    from storage.logits import SplitInfo, write_split
    from storage.runs import RunInfo, upsert_run

    rng = np.random.default_rng(0)

    def split(n: int, signal: float):
        y = np.repeat(np.arange(n_classes), n // n_classes)
        return (rng.normal(size=(y.size, n_classes)) + signal * np.eye(n_classes)[y]).astype(
            np.float32), y

    with connect() as con:
        upsert_run(con, RunInfo("fmnist.lenet.s0", "fmnist", "fmnist", "lenet", 0, n_classes))
        z, y = split(2000, 3.0)
        write_split(con, "fmnist.lenet.s0", SplitInfo("val", "val", "source", "val", None, 0,
                                                     0.0), z, y)
        for name in SPLITS:
            severity = 0 if name == "clean" else int(name.rsplit("-", 1)[1])
            z, y = split(10_000 if name == "clean" else 2000, 3.0 - 0.4 * severity)
            write_split(con, "fmnist.lenet.s0",
                        SplitInfo(name, "target", "synthetic", name, severity or None, 0, 0.0),
                        z, y)


def test_the_stream_is_built_from_a_stored_benchmark_run_then_reused(state_home, monkeypatch):
    _stored_run()

    def no_training(log):
        raise AssertionError("the stored run should have been used")

    monkeypatch.setattr(demo, "_pools_from_training", no_training)
    lines: list[str] = []
    stream = build_demo(state_home / "monitor-demo", log=lines.append)
    assert stream.source == "the benchmark database (run fmnist.lenet.s0)"
    files = sorted(p.name for p in stream.production.iterdir())
    assert files == [f"day-{d:02d}.npz" for d in range(1, 31)]
    assert len(list(stream.labels.iterdir())) == 27  # labels lag 3 days
    with np.load(stream.production / "day-14.npz") as day:
        assert day["logits"].shape == (ROWS_PER_DAY, 10)
        stamps = day["timestamp"].astype("datetime64[D]")
        assert set(stamps.tolist()) == {np.datetime64("2026-03-14").astype(object)}
    with np.load(stream.labels / "day-14.npz") as labels, \
            np.load(stream.production / "day-14.npz") as day:
        y = labels["labels"]
        acc = float(np.mean(day["logits"].argmax(axis=1) == y))
    assert stream.truth["day-14.npz"] == pytest.approx(acc)
    # the label shift: 4 hard classes of weight 4 among 10 -> 16/22 of the rows
    assert np.isin(y, HARD_CLASSES).mean() == pytest.approx(16 / 22, abs=0.01)
    with np.load(stream.labels / "day-03.npz") as labels:
        assert np.isin(labels["labels"], HARD_CLASSES).mean() == pytest.approx(0.4, abs=0.06)
    marker = json.loads((stream.folder / "stream.json").read_text())
    assert marker["corruption"] == "zoom_blur"
    again = build_demo(state_home / "monitor-demo", log=lines.append)
    assert again.truth == stream.truth and "reusing" in lines[-1]


def test_an_incomplete_stream_is_rebuilt(state_home, monkeypatch):
    _stored_run()
    monkeypatch.setattr(demo, "_pools_from_training", lambda log: pytest.fail("no training"))
    stream = build_demo(state_home / "monitor-demo")
    (stream.production / "day-30.npz").unlink()
    lines: list[str] = []
    rebuilt = build_demo(state_home / "monitor-demo", log=lines.append)
    assert (rebuilt.production / "day-30.npz").is_file()
    assert not any("reusing" in line for line in lines)


def test_summary_compares_alert_days_with_the_truth():
    from tasks.monitor.demo import DemoStream
    from tasks.monitor.realized import band_coverage

    truth = {d.file: (0.85 if d.day < 20 else 0.7) for d in demo_schedule()}
    stream = DemoStream(None, None, None, None, "test", truth, 0.86)  # type: ignore[arg-type]
    rows = []
    for d in demo_schedule():
        kinds = [{"kind": "below"}] if d.day >= 22 else []
        if d.day == 5:
            kinds = [{"kind": "drop"}]
        rows.append({"method": "auto", "chunk_name": d.file, "alert": bool(kinds),
                     "alerts": kinds, "estimated_accuracy": truth[d.file],
                     "shift_low": truth[d.file] - 0.05, "shift_high": truth[d.file] + 0.05,
                     "realized_accuracy": truth[d.file]})
    lines = demo_summary(stream, rows, {"auto": band_coverage(rows, "auto", 0.9)})
    below = f"true accuracy below {ALERT_BELOW:g} on days 20, 21, 22"
    assert lines[0].startswith("[auto] --alert-below fired on days 22, 23") and below in lines[0]
    assert lines[0].endswith("false alarms none; missed 20, 21")
    assert "--alert-drop fired on days 5;" in lines[1] and "false alarms 5;" in lines[1]
    assert "30 of 30 labelled chunks (100 %; nominal 90 %)" in lines[2]
