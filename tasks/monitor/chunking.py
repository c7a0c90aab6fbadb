"""Cutting a stream of production files into chunks (``--chunk file | ROWS | 1d | 1w``).

The files are fed in stream order (natural name order, duplicates left out) to a chunker,
one file at a time, so only one file's logits are in memory while the chunks are planned. Each
file gives one *part* to each chunk it has rows in; a part remembers its rows (a range, or the
rows of one period) and the digest of their logits, so a chunk's content
(:func:`tasks.monitor.keys.chunk_content`) is known without keeping its rows.

Rules:

``file`` (the default)
    One chunk per file, named by the file (its path under the stream's folder); an empty file
    is an empty chunk.
``ROWS``
    Chunks of exactly ``ROWS`` rows across file boundaries, in stream order, named
    ``rows A-B``. The rows after the last full chunk wait for more files (a note says how
    many): a chunk is estimated once it is complete.
``1d`` / ``1w``
    The rows of one UTC day, or one ISO week (Monday 00:00 UTC to the next Monday), over all
    files, named ``2026-03-05`` / ``2026-W10``. A period is estimated once it is over (its
    end is not after the run's time); rows of the current period wait. Rows that arrive for a
    period already estimated make a new chunk of that period, which supersedes the old one.

Examples
--------
>>> day = 86_400 * 10**9
>>> period_bounds("1d", np.array([day + 5, 3 * day]))[0].tolist()
[1, 3]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from tasks.monitor.files import Batch
from tasks.monitor.keys import chunk_content, logits_digest
from tasks.monitor.options import ChunkRule

__all__ = [
    "ChunkPlan", "Chunker", "Part", "display_names", "format_period", "make_chunker",
    "part_rows", "period_bounds",
]

_DAY_NS: Final[int] = 86_400 * 10**9
_WEEK_NS: Final[int] = 7 * _DAY_NS
#: 1970-01-01 was a Thursday: ISO weeks start 3 days before the epoch's week boundary.
_MONDAY_OFFSET_NS: Final[int] = 3 * _DAY_NS


@dataclass(frozen=True)
class Part:
    """The rows one file gives one chunk.

    Attributes
    ----------
    file : int
        Index of the file in the run's list of stream files.
    start, stop : int
        Row range in the file (``kind`` ``file`` / ``rows``).
    period : int or None
        Period index (``1d`` / ``1w``): the part is the file's rows of that period.
    digest : str
        :func:`~tasks.monitor.keys.logits_digest` of the part's logits.
    n_rows : int
    first_ns, last_ns : int or None
        First and last timestamp of the part's rows (None without timestamps).
    """

    file: int
    start: int
    stop: int
    period: int | None
    digest: str
    n_rows: int
    first_ns: int | None
    last_ns: int | None


@dataclass
class ChunkPlan:
    """One chunk: its name, its parts in stream order, its period.

    Attributes
    ----------
    name : str
    parts : list of Part
    period_start_ns, period_end_ns : int or None
        The period (``1d``/``1w``), or the first and last timestamp of the rows.
    """

    name: str
    parts: list[Part] = field(default_factory=list)
    period_start_ns: int | None = None
    period_end_ns: int | None = None

    @property
    def n_rows(self) -> int:
        return sum(p.n_rows for p in self.parts)

    @property
    def content(self) -> str:
        """:func:`~tasks.monitor.keys.chunk_content` of the parts."""
        return chunk_content([p.digest for p in self.parts])

    @property
    def files(self) -> list[int]:
        """Indices of the files the rows come from, in order, once each."""
        return list(dict.fromkeys(p.file for p in self.parts))

    def period(self) -> tuple[datetime | None, datetime | None]:
        """``(start, end)`` as naive UTC datetimes (None where unknown)."""
        return _as_datetime(self.period_start_ns), _as_datetime(self.period_end_ns)


def _as_datetime(ns: int | None) -> datetime | None:
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, UTC).replace(tzinfo=None)


def period_bounds(period: str, timestamps: NDArray[np.int64]) -> tuple[NDArray[np.int64], int]:
    """Period index of each timestamp and the period's length (ns).

    ``1d``: ``floor(t / day)``; ``1w``: ISO weeks, Monday to Monday UTC,
    ``floor((t + 3 days) / week)``. Period ``k`` starts at ``k * length`` (minus 3 days for
    weeks).
    """
    ts = np.asarray(timestamps, dtype=np.int64)
    if period == "1d":
        return np.floor_divide(ts, _DAY_NS), _DAY_NS
    if period == "1w":
        return np.floor_divide(ts + _MONDAY_OFFSET_NS, _WEEK_NS), _WEEK_NS
    raise ValueError(f"period must be '1d' or '1w'; got {period!r}.")


def _period_start(period: str, index: int) -> int:
    if period == "1d":
        return index * _DAY_NS
    return index * _WEEK_NS - _MONDAY_OFFSET_NS


def format_period(period: str, index: int) -> str:
    """``2026-03-05`` (a day) or ``2026-W10`` (an ISO week) of period ``index``."""
    start = datetime.fromtimestamp(_period_start(period, index) / 1e9, UTC)
    if period == "1d":
        return start.strftime("%Y-%m-%d")
    year, week, _ = start.isocalendar()
    return f"{year}-W{week:02d}"


def _first_last(ts: NDArray[np.int64] | None) -> tuple[int | None, int | None]:
    if ts is None or ts.size == 0:
        return None, None
    return int(ts.min()), int(ts.max())


class Chunker(ABC):
    """Feed files in stream order (:meth:`add`), then take the complete chunks
    (:meth:`finish`); ``notes`` says what waits. Subclasses implement one ``--chunk`` rule."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    @abstractmethod
    def add(self, index: int, batch: Batch, name: str) -> None:
        """Cut file number ``index`` (displayed as ``name``) into parts of chunks."""

    @abstractmethod
    def finish(self, now_ns: int) -> list[ChunkPlan]:
        """The complete chunks, in stream order; what waits is said in :attr:`notes`."""


class _FileChunker(Chunker):
    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[ChunkPlan] = []

    def add(self, index: int, batch: Batch, name: str) -> None:
        first, last = _first_last(batch.timestamps)
        part = Part(index, 0, batch.n_rows, None, batch.digest, batch.n_rows, first, last)
        self.chunks.append(ChunkPlan(name, [part], first, last))

    def finish(self, now_ns: int) -> list[ChunkPlan]:
        return self.chunks


class _RowsChunker(Chunker):
    def __init__(self, rows: int) -> None:
        super().__init__()
        self.rows = rows
        self.offset = 0
        self.chunks: list[ChunkPlan] = []

    def _chunk(self, number: int) -> ChunkPlan:
        while len(self.chunks) <= number:
            k = len(self.chunks)
            self.chunks.append(ChunkPlan(f"rows {k * self.rows}-{(k + 1) * self.rows - 1}"))
        return self.chunks[number]

    def add(self, index: int, batch: Batch, name: str) -> None:
        start = 0
        while start < batch.n_rows:
            number = (self.offset + start) // self.rows
            stop = min(batch.n_rows, (number + 1) * self.rows - self.offset)
            ts = None if batch.timestamps is None else batch.timestamps[start:stop]
            first, last = _first_last(ts)
            self._chunk(number).parts.append(Part(
                index, start, stop, None, logits_digest(batch.logits[start:stop]), stop - start,
                first, last))
            start = stop
        self.offset += batch.n_rows

    def finish(self, now_ns: int) -> list[ChunkPlan]:
        done = [c for c in self.chunks if c.n_rows == self.rows]
        waiting = sum(c.n_rows for c in self.chunks if c.n_rows < self.rows)
        if waiting:
            self.notes.append(f"{waiting} row(s) after the last full chunk of {self.rows} wait "
                              "for more files (a chunk is estimated once it is complete)")
        for chunk in done:
            firsts = [p.first_ns for p in chunk.parts]
            lasts = [p.last_ns for p in chunk.parts]
            if all(v is not None for v in firsts + lasts):
                chunk.period_start_ns = min(v for v in firsts if v is not None)
                chunk.period_end_ns = max(v for v in lasts if v is not None)
        return done


class _PeriodChunker(Chunker):
    def __init__(self, period: str) -> None:
        super().__init__()
        self.period = period
        self.chunks: dict[int, ChunkPlan] = {}
        self.length = _DAY_NS if period == "1d" else _WEEK_NS

    def add(self, index: int, batch: Batch, name: str) -> None:
        if batch.n_rows == 0:
            return
        assert batch.timestamps is not None  # read_batch(need_timestamps=True) refuses others
        periods, _ = period_bounds(self.period, batch.timestamps)
        for k in np.unique(periods).tolist():
            rows = periods == k
            ts = batch.timestamps[rows]
            chunk = self.chunks.get(int(k))
            if chunk is None:
                start = _period_start(self.period, int(k))
                chunk = ChunkPlan(format_period(self.period, int(k)), [], start,
                                  start + self.length)
                self.chunks[int(k)] = chunk
            chunk.parts.append(Part(index, 0, batch.n_rows, int(k),
                                    logits_digest(batch.logits[rows]), int(rows.sum()),
                                    int(ts.min()), int(ts.max())))

    def finish(self, now_ns: int) -> list[ChunkPlan]:
        done, waiting = [], []
        for k in sorted(self.chunks):
            chunk = self.chunks[k]
            assert chunk.period_end_ns is not None
            (done if chunk.period_end_ns <= now_ns else waiting).append(chunk)
        for chunk in waiting:
            self.notes.append(f"period {chunk.name} is not over yet ({chunk.n_rows} row(s) so "
                              "far): estimated once it ends")
        return done


def make_chunker(rule: ChunkRule) -> Chunker:
    """The chunker of ``rule``."""
    if rule.kind == "file":
        return _FileChunker()
    if rule.kind == "rows":
        assert rule.rows is not None
        return _RowsChunker(rule.rows)
    if rule.kind == "period":
        assert rule.period is not None
        return _PeriodChunker(rule.period)
    raise ValueError(f"unknown chunk rule {rule!r}")


def part_rows(part: Part, batch: Batch, rule: ChunkRule) -> NDArray[np.intp] | slice:
    """The rows of ``batch`` (the part's file, read again) that ``part`` stands for."""
    if part.period is None:
        return slice(part.start, part.stop)
    assert batch.timestamps is not None and rule.period is not None
    periods, _ = period_bounds(rule.period, batch.timestamps)
    return np.flatnonzero(periods == part.period)


def display_names(files: list[Path], stream_folder: Path | None) -> list[str]:
    """Each file's name in the history: its path under the stream's folder, else its name."""
    names = []
    for path in files:
        try:
            names.append(str(path.resolve().relative_to(stream_folder))
                         if stream_folder is not None else path.name)
        except ValueError:
            names.append(path.name)
    return names
