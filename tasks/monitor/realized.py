"""Realized accuracy once labels arrive, and how often the band held it: the tool checks itself.

Where a chunk's labels come from, for each production file (first match wins):

1. the file's own label column (``labels`` in ``.npz``, ``label``/``labels`` in ``.parquet``);
2. a later production file with the same logits and a label column: it is the same content
   (:mod:`tasks.monitor.keys`), so it is not estimated again, and its labels are joined in;
3. ``--labels PATH`` (a file, folder or glob): a label file named like the production file
   (same stem: ``labels/day-05.npz`` labels ``production/day-05.parquet``), holding one label
   per row in the same order; or a label file that also holds the logits, matched by their
   content whatever its name. A label file whose logits differ from its namesake's, or whose row
   count differs, is refused with one line.

A chunk's realized accuracy is the fraction of its rows whose predicted class (the argmax of
the logits) is the label, once *every* row of the chunk has a label; it is joined into the
history (``monitor_chunks`` and every estimate of the chunk). The band's realized coverage is
then the fraction of labelled chunks whose realized accuracy lies inside the band, reported
next to the band's nominal level (:func:`band_coverage`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from storage.logit_files import load_logit_file
from tasks.monitor.files import BatchError, list_files, read_label_array
from tasks.monitor.keys import logits_digest

__all__ = ["Coverage", "LabelIndex", "band_coverage", "realized_accuracy"]


def realized_accuracy(logits: NDArray[np.float64], labels: NDArray[np.int64]) -> float:
    """Fraction of rows whose argmax is the label.

    Examples
    --------
    >>> realized_accuracy(np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]]), np.array([0, 1, 1]))
    0.6666666666666666
    """
    if logits.shape[0] != labels.shape[0] or logits.shape[0] == 0:
        raise ValueError(f"realized_accuracy needs one label per row and at least one row; got "
                         f"{logits.shape[0]} rows and {labels.shape[0]} labels.")
    return float(np.mean(logits.argmax(axis=1) == labels))


class LabelIndex:
    """The label files of ``--labels``, matched to production files by stem or by content.

    Parameters
    ----------
    spec : str or None
        A file, folder or glob of ``.npz`` / ``.parquet`` label files; None for none.
    """

    def __init__(self, spec: str | None) -> None:
        self.files: list[Path] = []
        if spec is not None:
            _, self.files = list_files(spec, option="--labels")
        self.by_stem: dict[str, Path] = {}
        for path in self.files:
            self.by_stem.setdefault(path.stem, path)
        self._digests: dict[Path, str | None] = {}

    def _logits_digest(self, path: Path) -> str | None:
        if path not in self._digests:
            try:
                logits, _ = load_logit_file(path, require_labels=False)
                self._digests[path] = logits_digest(logits)
            except ValueError:  # labels only: no logits to match by content
                self._digests[path] = None
        return self._digests[path]

    def match(self, names: Iterable[str], digest: str) -> Path | None:
        """The label file for a production file known by ``names`` (its stem and those of its
        duplicates) and logits ``digest``: by stem first, then by content."""
        for stem in names:
            if stem in self.by_stem:
                return self.by_stem[stem]
        for path in self.files:
            if self._logits_digest(path) == digest:
                return path
        return None

    def read(self, path: Path, n_rows: int, n_classes: int, digest: str) -> NDArray[np.int64]:
        """The labels of ``path`` for a production file of ``n_rows`` rows and logits
        ``digest``.

        Raises
        ------
        BatchError
            Unreadable, no labels, a row count or class range that does not fit, or logits that
            differ from the production file's.
        """
        labels, own_digest = read_label_array(path)
        if own_digest is not None and own_digest != digest:
            raise BatchError(f"{path}: its logits differ from those of the production file it "
                             "is named after; labels must come with the same rows.")
        if labels.shape[0] != n_rows:
            raise BatchError(f"{path}: {labels.shape[0]} labels for a production file of "
                             f"{n_rows} rows; need one per row, in the same order.")
        if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
            raise BatchError(f"{path}: labels must be class indices in 0..{n_classes - 1}; got "
                             f"values from {int(labels.min())} to {int(labels.max())}.")
        return labels


@dataclass(frozen=True)
class Coverage:
    """How often the band held the realized accuracy, for one method.

    Attributes
    ----------
    method : str
    level : float
        The band's nominal coverage.
    n_chunks : int
        Chunks with a realized accuracy and a band.
    covered : int
        Of those, chunks whose realized accuracy lies inside the band.
    rate : float
        ``covered / n_chunks`` (NaN without labelled chunks).
    recent_n, recent_rate : int, float
        The same over the last ``recent`` labelled chunks.
    mean_abs_error : float
        Mean |estimate - realized| in percentage points.
    mean_width : float
        Mean band width in percentage points.
    """

    method: str
    level: float
    n_chunks: int
    covered: int
    rate: float
    recent_n: int
    recent_rate: float
    mean_abs_error: float
    mean_width: float

    def line(self) -> str:
        """``auto: band held the realized accuracy in 21 of 23 labelled chunks (91 %; nominal
        90 %), ...``"""
        if not self.n_chunks:
            return f"{self.method}: no labelled chunk yet: the band's coverage is not known"
        return (f"{self.method}: the band held the realized accuracy in {self.covered} of "
                f"{self.n_chunks} labelled chunks ({100 * self.rate:.0f} %; nominal "
                f"{100 * self.level:.0f} %); last {self.recent_n}: {100 * self.recent_rate:.0f} "
                f"%; mean |estimate - realized| {self.mean_abs_error:.1f} points, mean band "
                f"width {self.mean_width:.1f} points")

    def to_record(self) -> dict[str, Any]:
        """JSON-safe dict (NaN as None)."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = None if isinstance(value, float) and not math.isfinite(value) else value
        return out


def band_coverage(
    rows: Sequence[Mapping[str, Any]], method: str, level: float, recent: int = 10
) -> Coverage:
    """The band's realized coverage over history rows of one method, oldest first.

    Parameters
    ----------
    rows : sequence of mapping
        ``monitor_history`` rows (:func:`storage.monitor.read_history`).
    method : str
    level : float
    recent : int, default 10

    Returns
    -------
    Coverage
    """
    labelled = [r for r in rows if r["method"] == method
                and r.get("realized_accuracy") is not None
                and r.get("estimated_accuracy") is not None
                and r.get("shift_low") is not None and r.get("shift_high") is not None]
    inside = [r["shift_low"] <= r["realized_accuracy"] <= r["shift_high"] for r in labelled]
    tail = inside[-recent:]
    n = len(labelled)
    return Coverage(
        method=method, level=float(level), n_chunks=n, covered=int(sum(inside)),
        rate=float(np.mean(inside)) if n else math.nan, recent_n=len(tail),
        recent_rate=float(np.mean(tail)) if tail else math.nan,
        mean_abs_error=(float(np.mean([abs(r["estimated_accuracy"] - r["realized_accuracy"])
                                       for r in labelled])) * 100 if n else math.nan),
        mean_width=(float(np.mean([r["shift_high"] - r["shift_low"] for r in labelled])) * 100
                    if n else math.nan),
    )
