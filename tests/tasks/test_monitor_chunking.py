"""Chunking a stream: one chunk per file, fixed row counts across files, UTC days and ISO
weeks; incomplete chunks wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from tasks.monitor.chunking import format_period, make_chunker, part_rows, period_bounds
from tasks.monitor.files import Batch
from tasks.monitor.keys import chunk_content, logits_digest
from tasks.monitor.options import parse_chunk

NOW = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1e9)


def batch(n: int, seed: int, times: list[datetime] | None = None) -> Batch:
    z = np.random.default_rng(seed).normal(size=(n, 3))
    ts = None if times is None else np.array([int(t.timestamp() * 1e9) for t in times])
    return Batch(Path(f"f{seed}.npz"), z, None, ts, logits_digest(z))


def feed(rule: str, batches: list[Batch], now: int = NOW):
    chunker = make_chunker(parse_chunk(rule))
    for i, b in enumerate(batches):
        chunker.add(i, b, b.path.name)
    return chunker.finish(now), chunker.notes, batches


def test_one_chunk_per_file():
    plans, notes, bs = feed("file", [batch(5, 0), batch(0, 1), batch(3, 2)])
    assert [(p.name, p.n_rows) for p in plans] == [("f0.npz", 5), ("f1.npz", 0), ("f2.npz", 3)]
    assert plans[0].content == chunk_content([bs[0].digest]) and not notes


def test_rows_cross_file_boundaries_and_the_tail_waits():
    plans, notes, bs = feed("4", [batch(3, 0), batch(6, 1), batch(2, 2)])  # 11 rows
    assert [p.name for p in plans] == ["rows 0-3", "rows 4-7"]
    assert [[(q.file, q.start, q.stop) for q in p.parts] for p in plans] == [
        [(0, 0, 3), (1, 0, 1)], [(1, 1, 5)]]
    assert notes == ["3 row(s) after the last full chunk of 4 wait for more files (a chunk is "
                     "estimated once it is complete)"]
    # the content of a chunk is that of its rows, whatever the files were
    rows = np.concatenate([b.logits for b in bs])
    assert plans[1].content == chunk_content([logits_digest(rows[4:8])])


def test_days_gather_rows_of_several_files_and_the_open_day_waits():
    d = datetime(2026, 3, 1, tzinfo=UTC)
    b0 = batch(4, 0, [d + timedelta(hours=h) for h in (1, 5, 25, 26)])  # days 1, 1, 2, 2
    b1 = batch(3, 1, [d + timedelta(hours=h) for h in (23, 30, 50)])  # days 1, 2, 3
    now = int((d + timedelta(days=2, hours=12)).timestamp() * 1e9)  # during day 3
    plans, notes, bs = feed("1d", [b0, b1], now)
    assert [p.name for p in plans] == ["2026-03-01", "2026-03-02"]
    first = plans[0]
    assert first.n_rows == 3 and first.period() == (datetime(2026, 3, 1), datetime(2026, 3, 2))
    rows = part_rows(first.parts[1], bs[1], parse_chunk("1d"))
    assert rows.tolist() == [0]
    assert first.content == chunk_content([logits_digest(b0.logits[[0, 1]]),
                                           logits_digest(b1.logits[[0]])])
    assert notes == ["period 2026-03-03 is not over yet (1 row(s) so far): estimated once it "
                     "ends"]


@pytest.mark.parametrize("day", [datetime(2026, 1, 1) + timedelta(days=k)
                                 for k in range(0, 400, 9)])
def test_iso_weeks_match_python_isocalendar(day):
    stamp = int(day.replace(tzinfo=UTC).timestamp() * 1e9)
    [index], length = period_bounds("1w", np.array([stamp]))
    year, week, weekday = day.isocalendar()  # the independent reference
    assert format_period("1w", int(index)) == f"{year}-W{week:02d}"
    monday = day - timedelta(days=weekday - 1)
    plans, _, _ = feed("1w", [batch(1, 0, [day.replace(tzinfo=UTC)])])
    assert plans[0].period()[0] == monday and length == 7 * 86_400 * 10**9


def test_days_are_utc_days():
    [k], _ = period_bounds("1d", np.array([int(datetime(2026, 3, 5, 23, 59, 59,
                                                        tzinfo=UTC).timestamp() * 1e9)]))
    assert format_period("1d", int(k)) == "2026-03-05"
