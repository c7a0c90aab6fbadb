"""Production files: which ones a run reads, whether they are complete, and reading one batch.

Rules (each one a test in ``tests/tasks/test_monitor_files.py``):

* ``--production`` is a folder (its ``.npz`` and ``.parquet`` files, not its sub-folders), a
  glob (``'batches/*.parquet'``, ``'**'`` recursive), or one file. Files are taken in *natural*
  name order (``day-2`` before ``day-10``); name them so that they sort in arrival order.
* Hidden files (a leading dot) and temporary names (``*.tmp``, ``*.part``, ``*.partial``,
  ``*~``) are never read.
* **A file still being written is skipped until it is complete**: complete means its format's
  end marker is there (a Parquet file starts and ends with ``PAR1``; an ``.npz`` archive ends
  with a zip end-of-central-directory record). Both writers (pyarrow, ``np.savez``) put that
  marker last, so a half-written file never passes; it is read by a later run.
* A batch whose class count differs from the reference's, that holds softmax probabilities
  instead of logits, or has a NaN or infinite logit, is **refused**: one line naming the file and
  the problem, nothing of it is stored, and the run goes on with the other files (then exits
  non-zero). A label column with values outside the classes is dropped with a warning (the
  logits are still estimated).
* An empty file is an empty chunk (a warning; see :mod:`tasks.monitor.estimation`).

Timestamps, for ``--chunk 1d`` / ``1w`` and for the periods of the history: an array
``timestamp`` in ``.npz`` (``datetime64``, or numbers of seconds since 1970-01-01 UTC) or a
column ``timestamp`` in ``.parquet`` (a timestamp type, with or without time zone; naive ones are
UTC; a date; or numbers of seconds since the epoch).
"""

from __future__ import annotations

import glob
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from storage.logit_files import SUPPORTED_SUFFIXES, load_logit_file
from tasks.monitor.keys import logits_digest

__all__ = [
    "Batch",
    "BatchError",
    "TIMESTAMP",
    "is_complete",
    "list_files",
    "read_batch",
    "read_label_array",
    "read_timestamps",
]

#: Name of the timestamp array (``.npz``) or column (``.parquet``).
TIMESTAMP: Final[str] = "timestamp"
_TEMP_SUFFIXES: Final[tuple[str, ...]] = (".tmp", ".part", ".partial", "~")
_GLOB_CHARS: Final = re.compile(r"[*?\[]")
_DIGITS: Final = re.compile(r"(\d+)")
#: What a refused batch of probabilities is told to do (the monitor takes logits only).
_PROBABILITIES_HINT: Final[str] = (
    " The monitor takes logits: store np.log(p) instead (for a binary model's positive-class "
    "probability p, np.log(p / (1 - p)))."
)


class BatchError(ValueError):
    """A production or label file that cannot be used: one line naming the file."""


@dataclass(frozen=True)
class Batch:
    """One production file, read and checked.

    Attributes
    ----------
    path : Path
    logits : ndarray of shape (n, c), float64
    labels : ndarray of shape (n,), int64, or None
        The file's own label column, when it has a valid one.
    timestamps : ndarray of shape (n,), int64 nanoseconds since the epoch (UTC), or None
    digest : str
        :func:`tasks.monitor.keys.logits_digest` of the logits.
    warnings : tuple of str
        What was dropped (invalid labels).
    """

    path: Path
    logits: NDArray[np.float64]
    labels: NDArray[np.int64] | None
    timestamps: NDArray[np.int64] | None
    digest: str
    warnings: tuple[str, ...] = ()

    @property
    def n_rows(self) -> int:
        return int(self.logits.shape[0])


def _natural_key(path: Path) -> tuple[Any, ...]:
    parts = _DIGITS.split(str(path))
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


def _ignored(name: str) -> bool:
    return name.startswith(".") or name.endswith(_TEMP_SUFFIXES)


def list_files(spec: str, option: str = "--production") -> tuple[str, list[Path]]:
    """The ``.npz`` / ``.parquet`` files named by a folder, glob or file, in natural order.

    Parameters
    ----------
    spec : str
        A folder, a glob, or one file.
    option : str, default "--production"
        The option named in errors.

    Returns
    -------
    stream : str
        The absolute folder, glob or file: the stream's name in the history.
    files : list of Path
        Matching files (hidden and temporary names left out), natural name order.

    Raises
    ------
    ValueError
        If ``spec`` is neither an existing folder or file nor a glob whose folder exists.
    """
    text = os.path.expanduser(str(spec).strip())
    path = Path(text)
    if path.is_dir():
        stream = str(path.resolve())
        candidates = [p for p in path.iterdir() if p.is_file()]
    elif path.is_file():
        stream = str(path.resolve())
        candidates = [path]
    elif _GLOB_CHARS.search(text):
        prefix = _GLOB_CHARS.split(text, maxsplit=1)[0]
        base = Path(os.path.dirname(prefix) or ".")
        if not base.is_dir():
            raise ValueError(f"{option} {spec!r}: the folder {str(base)!r} of this glob does "
                             "not exist.")
        stream = os.path.join(str(base.resolve()), os.path.relpath(text, str(base)))
        candidates = [Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file()]
    else:
        raise ValueError(f"{option} {spec!r}: no such folder or file, and not a glob "
                         "(e.g. 'batches/*.parquet').")
    files = [p for p in candidates
             if not _ignored(p.name) and p.suffix.lower() in SUPPORTED_SUFFIXES]
    return stream, sorted(files, key=_natural_key)


def is_complete(path: Path) -> bool:
    """Whether a file's format end marker is there (it is not being written any more).

    Parquet: at least 12 bytes, ``PAR1`` at both ends. ``.npz``: a zip end-of-central-directory
    record (:func:`zipfile.is_zipfile`). An empty file is not complete (a writer just opened it).
    """
    try:
        size = path.stat().st_size
    except OSError:
        return False
    if size == 0:
        return False
    if path.suffix.lower() == ".parquet":
        if size < 12:
            return False
        with path.open("rb") as handle:
            head = handle.read(4)
            handle.seek(-4, os.SEEK_END)
            tail = handle.read(4)
        return head == b"PAR1" and tail == b"PAR1"
    return _zip_ends_here(path, size)


def _zip_ends_here(path: Path, size: int) -> bool:
    """Whether a zip end-of-central-directory record ends exactly at the end of the file.

    The record is 22 bytes (signature ``PK\\x05\\x06`` ... comment length) plus its comment, so
    it starts at most 22 + 65,535 bytes before the end. :func:`zipfile.is_zipfile` accepts the
    signature anywhere in that window, which the float bytes of a half-written archive can
    contain by chance; here the record must account for every byte up to the end.
    """
    window = min(size, 22 + 0xFFFF)
    with path.open("rb") as handle:
        handle.seek(size - window)
        data = handle.read(window)
    start = data.rfind(b"PK\x05\x06")
    while start >= 0:
        if start + 22 <= len(data):
            comment = int.from_bytes(data[start + 20:start + 22], "little")
            if start + 22 + comment == len(data):
                return zipfile.is_zipfile(path)
        start = data.rfind(b"PK\x05\x06", 0, start)
    return False


def _epoch_ns(values: NDArray[Any], file: Path) -> NDArray[np.int64]:
    """Seconds since the epoch, or ``datetime64``, as int64 nanoseconds."""
    if np.issubdtype(values.dtype, np.datetime64):
        stamps = values.astype("datetime64[ns]")
        if np.isnat(stamps).any():
            raise BatchError(f"{file}: {TIMESTAMP!r} holds {int(np.isnat(stamps).sum())} "
                             "missing time(s) (NaT); every row needs one.")
        return stamps.astype(np.int64)
    if values.dtype == bool or not np.issubdtype(values.dtype, np.number):
        raise BatchError(f"{file}: {TIMESTAMP!r} must hold times (datetime64 or a timestamp "
                         "column) or numbers of seconds since 1970-01-01 UTC; got "
                         f"dtype {values.dtype}.")
    seconds = values.astype(np.float64)
    if not np.isfinite(seconds).all():
        raise BatchError(f"{file}: {TIMESTAMP!r} holds NaN or infinite seconds; every row "
                         "needs a time.")
    return np.round(seconds * 1e9).astype(np.int64)


def read_timestamps(path: Path, n_rows: int) -> NDArray[np.int64] | None:
    """A file's timestamps as int64 nanoseconds since the epoch (UTC), or None without any.

    Raises
    ------
    BatchError
        For a timestamp of the wrong type, a missing value, or a count other than ``n_rows``.
    """
    file = Path(path)
    values: NDArray[Any] | None = None
    if file.suffix.lower() == ".npz":
        with np.load(file, allow_pickle=False) as archive:
            if TIMESTAMP in archive.files:
                try:
                    values = np.asarray(archive[TIMESTAMP])
                except ValueError:
                    raise BatchError(f"{file}: {TIMESTAMP!r} is not a numeric or datetime64 "
                                     "array (object arrays are refused).") from None
    else:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        schema = pq.read_schema(file)
        if TIMESTAMP in schema.names:
            column = pq.read_table(file, columns=[TIMESTAMP]).column(TIMESTAMP).combine_chunks()
            if column.null_count:
                raise BatchError(f"{file}: column {TIMESTAMP!r} has {column.null_count} "
                                 "missing value(s); every row needs a time.")
            kind = column.type
            if pa.types.is_timestamp(kind):
                values = pc.cast(column, pa.timestamp("ns", tz=kind.tz)).to_numpy(
                    zero_copy_only=False).astype("datetime64[ns]")
            elif pa.types.is_date(kind):
                values = pc.cast(column, pa.timestamp("ns")).to_numpy(
                    zero_copy_only=False).astype("datetime64[ns]")
            elif pa.types.is_integer(kind) or pa.types.is_floating(kind):
                values = column.to_numpy(zero_copy_only=False)
            else:
                raise BatchError(f"{file}: column {TIMESTAMP!r} must be a timestamp, a date or "
                                 f"seconds since 1970-01-01 UTC; got type {kind}.")
    if values is None:
        return None
    if values.ndim != 1 or values.shape[0] != n_rows:
        raise BatchError(f"{file}: {TIMESTAMP!r} must hold one time per row ({n_rows}); got "
                         f"shape {values.shape}.")
    return _epoch_ns(values, file)


def _row_count(file: Path) -> int | None:
    """Rows of the logits, without checking them; None when that cannot be read."""
    try:
        if file.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(file).metadata.num_rows)
        with np.load(file, allow_pickle=False) as archive:
            if "logits" not in archive.files:
                return None
            return int(np.asarray(archive["logits"]).shape[0])
    except Exception:  # an unreadable file: load_logit_file says what is wrong
        return None


def read_batch(path: Path, n_classes: int, *, need_timestamps: bool = False) -> Batch:
    """Read and check one production file against the reference's class count.

    Parameters
    ----------
    path : Path
        A complete ``.npz`` or ``.parquet`` file (:func:`is_complete`).
    n_classes : int
        The reference's class count.
    need_timestamps : bool, default False
        Refuse a file without a timestamp column (``--chunk 1d`` / ``1w``).

    Returns
    -------
    Batch
        An empty file gives a batch of ``(0, n_classes)`` logits.

    Raises
    ------
    BatchError
        One line naming the file: unreadable, class count, probabilities, NaN/inf, no
        timestamps where they are needed.
    """
    file = Path(path)
    warnings: list[str] = []
    if _row_count(file) == 0:
        logits = np.zeros((0, n_classes))
        labels: NDArray[np.int64] | None = None
    else:
        try:
            logits, labels = load_logit_file(file, require_labels=False,
                                             probabilities_hint=_PROBABILITIES_HINT)
        except ValueError as exc:
            raise BatchError(" ".join(str(exc).split())) from None
    if logits.shape[1] != n_classes:
        raise BatchError(f"{file}: {logits.shape[1]} classes, but the reference has "
                         f"{n_classes}; a production batch must come from the reference's "
                         "classifier.")
    finite = np.isfinite(logits).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        rows = ", ".join(str(int(i)) for i in bad[:5]) + (", ..." if bad.size > 5 else "")
        raise BatchError(f"{file}: {bad.size} row(s) hold NaN or infinite logits (row {rows}); "
                         "the file is refused whole (nothing of it is stored): fix or drop "
                         "those rows.")
    if labels is not None and labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        warnings.append(f"{file}: labels outside 0..{n_classes - 1} (e.g. "
                        f"{int(labels[(labels < 0) | (labels >= n_classes)][0])}); its label "
                        "column is ignored, the logits are still estimated.")
        labels = None
    try:
        timestamps = read_timestamps(file, int(logits.shape[0]))
    except BatchError:
        raise
    except (OSError, ValueError) as exc:  # pyarrow's and numpy's own read errors
        raise BatchError(f"{file}: cannot read {TIMESTAMP!r}: {' '.join(str(exc).split())}") \
            from None
    if need_timestamps and timestamps is None:
        raise BatchError(f"{file}: no {TIMESTAMP!r} column; --chunk 1d/1w cut the rows by "
                         f"their time (an array {TIMESTAMP!r} in .npz, a column in .parquet).")
    return Batch(file, logits, labels, timestamps, logits_digest(logits), tuple(warnings))


def read_label_array(path: Path) -> tuple[NDArray[np.int64], str | None]:
    """A label file's labels, and the digest of its logits when it holds them too.

    Labels: an array ``labels`` (``.npz``) or a column ``label`` / ``labels`` (``.parquet``),
    integer class indices, one per row.

    Raises
    ------
    BatchError
        Unreadable, no labels, labels that are not integers or not 1-D.
    """
    file = Path(path)
    has_logits = False
    try:
        if file.suffix.lower() == ".npz":
            with np.load(file, allow_pickle=False) as archive:
                if "labels" not in archive.files:
                    raise BatchError(f"{file}: no array 'labels'; a label file holds the labels "
                                     "of a production file, one per row.")
                values = np.asarray(archive["labels"])
                has_logits = "logits" in archive.files
        else:
            import pyarrow.parquet as pq

            names = pq.read_schema(file).names
            column = next((n for n in ("label", "labels") if n in names), None)
            if column is None:
                raise BatchError(f"{file}: no column 'label' or 'labels'; a label file holds "
                                 "the labels of a production file, one per row.")
            table = pq.read_table(file, columns=[column])
            if table.column(column).null_count:
                raise BatchError(f"{file}: column {column!r} has missing labels.")
            values = table.column(column).to_numpy()
            has_logits = "logits" in names or any(n.startswith("logit_") for n in names)
    except BatchError:
        raise
    except Exception as exc:  # numpy's and pyarrow's read errors, said in one line
        raise BatchError(f"{file}: not a readable label file: "
                         f"{' '.join(str(exc).split()) or type(exc).__name__}") from None
    if values.ndim != 1 or values.dtype == bool or not np.issubdtype(values.dtype, np.number):
        raise BatchError(f"{file}: labels must be a 1-D array of class indices; got "
                         f"{values.dtype} of shape {values.shape}.")
    if not np.issubdtype(values.dtype, np.integer) and not np.all(values == np.round(values)):
        raise BatchError(f"{file}: labels must be integer class indices.")
    digest = None
    if has_logits:
        try:
            logits, _ = load_logit_file(file, require_labels=False,
                                        probabilities_hint=_PROBABILITIES_HINT)
        except ValueError as exc:
            raise BatchError(" ".join(str(exc).split())) from None
        digest = logits_digest(logits)
    return values.astype(np.int64), digest
