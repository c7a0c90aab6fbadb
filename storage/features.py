"""Penultimate features of a run: content-addressed ``float16`` ``.npy`` files, named in DuckDB.

The extract stage (:mod:`tasks.stages.extract`) writes, beside a run's logits, the features its
classifier's output layer reads (:mod:`tasks.models.penultimate`) for the validation split,
every target split and a seeded subsample (at most :data:`TRAIN_SUBSAMPLE` rows) of the
training set, for the feature-aware estimators (``distcs``, ``aline-s``, ``aline-d``,
``dispersion``). Features are wide (512 numbers a row for a ResNet18 against 10 logits), so they
are files, not DuckDB rows::

    <results root>/features/<sha256>.npy     one split's (n, d) float16 matrix
    <results root>/features/<sha256>.npy     the training subsample's int64 labels

Each file is named by the SHA-256 of its bytes (``numpy.save`` of a C-contiguous array, no
pickle), written to a temporary file and renamed, so equal content is one file, a name always
matches its bytes, and a crash leaves no half file under a real name. The logits file of the
run lists its feature files (:class:`FeatureEntry`, in the Parquet footer, so the estimate stage
reads them on any worker); ingesting it records them in the ``feature_files`` table (schema 5,
:mod:`storage.schema`), which is the database's reference to them.

Examples
--------
>>> import tempfile, numpy as np
>>> root = tempfile.mkdtemp()
>>> entry = write_features(root, "val", "val", np.ones((3, 4), np.float32))
>>> entry.n_rows, entry.dim, read_features(root, entry)[0].dtype
(3, 4, dtype('float16'))
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import duckdb
import numpy as np
from numpy.typing import NDArray

from .errors import StorageError

__all__ = [
    "FEATURE_ROLES",
    "TRAIN_SUBSAMPLE",
    "FeatureEntry",
    "FeatureFileError",
    "RunFeatures",
    "feature_entries",
    "feature_path",
    "read_features",
    "write_feature_entries",
    "write_features",
]

#: Sub-folder of the results root that holds feature files.
FEATURES_DIR: Final[str] = "features"
#: Roles a feature file can have: the labelled validation split, a target split, or the
#: training subsample (the reference set of DistCS and the heads of ALine).
FEATURE_ROLES: Final[tuple[str, ...]] = ("val", "target", "train")
#: Most training rows whose features are stored (a seeded subsample beyond it).
TRAIN_SUBSAMPLE: Final[int] = 10_000
#: Name of the training subsample's entry.
TRAIN_SPLIT: Final[str] = "train"


class FeatureFileError(StorageError):
    """A feature file is missing, does not match its name, or is not the matrix it should be."""


@dataclass(frozen=True)
class FeatureEntry:
    """One split's feature file, as the logits footer and ``feature_files`` record it.

    Attributes
    ----------
    split : str
        The split (``"val"``, a target split's name, or ``"train"`` for the subsample).
    role : str
        One of :data:`FEATURE_ROLES`.
    sha256 : str
        The features file's name (``<root>/features/<sha256>.npy``).
    n_rows, dim : int
        Shape of the ``float16`` matrix.
    labels_sha256 : str or None
        The training subsample's labels file; None for the other roles.
    """

    split: str
    role: str
    sha256: str
    n_rows: int
    dim: int
    labels_sha256: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FeatureEntry:
        entry = cls(**data)
        if entry.role not in FEATURE_ROLES:
            raise ValueError(f"role must be one of {list(FEATURE_ROLES)}; got {entry.role!r}")
        return entry


def feature_path(root: str | Path, sha256: str) -> Path:
    """``<root>/features/<sha256>.npy``."""
    return Path(root) / FEATURES_DIR / f"{sha256}.npy"


def _publish(root: Path, array: np.ndarray, created: list[Path] | None = None) -> str:
    """Write ``array`` as a content-addressed ``.npy`` file; return its SHA-256 (and append
    the path to ``created`` when this call wrote it)."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    data = buffer.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    final = feature_path(root, sha)
    if final.is_file() and final.stat().st_size == len(data):
        return sha
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".tmp-", suffix=".npy")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if created is not None:
        created.append(final)
    return sha


def write_features(
    root: str | Path,
    split: str,
    role: str,
    features: Any,
    labels: Any | None = None,
    *,
    created: list[Path] | None = None,
) -> FeatureEntry:
    """Publish one split's features (and, for the training subsample, its labels).

    Parameters
    ----------
    root : str or Path
        Results root (:func:`storage.results.results_root`).
    split : str
        Split name.
    role : str
        One of :data:`FEATURE_ROLES`.
    features : array-like of shape (n, d)
        Finite numbers; stored as ``float16`` (values beyond its range are refused).
    labels : array-like of shape (n,), optional
        Integer labels; required for role ``"train"``, refused otherwise.
    created : list of Path, optional
        Receives the paths this call wrote (not those that existed already), so a caller that
        fails later can remove what it published.

    Returns
    -------
    FeatureEntry

    Raises
    ------
    ValueError
        If an argument is malformed (the message names it); nothing is written then.
    """
    if not isinstance(split, str) or not split:
        raise ValueError(f"split must be a non-empty string; got {split!r}.")
    if role not in FEATURE_ROLES:
        raise ValueError(f"role must be one of {list(FEATURE_ROLES)}; got {role!r}.")
    arr = np.asarray(features)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1 or not np.issubdtype(
            arr.dtype, np.number):
        raise ValueError(
            f"features of split {split!r} must be a numeric (n >= 1, d >= 1) matrix; got "
            f"dtype {arr.dtype}, shape {arr.shape}.")
    with np.errstate(over="ignore", invalid="ignore"):
        half = arr.astype(np.float16)
    if not np.isfinite(half).all():
        raise ValueError(
            f"features of split {split!r} must be finite in float16 (|x| < 65504); got "
            f"{int(np.count_nonzero(~np.isfinite(half)))} NaN/inf value(s).")
    labels_sha = None
    if role == "train":
        if labels is None:
            raise ValueError("labels are required for the training subsample (role 'train').")
        lab = np.asarray(labels)
        if lab.shape != (arr.shape[0],) or not np.issubdtype(lab.dtype, np.integer):
            raise ValueError(
                f"labels must be {arr.shape[0]} integers, one per feature row; got dtype "
                f"{lab.dtype}, shape {lab.shape}.")
    elif labels is not None:
        raise ValueError(f"labels are stored only for role 'train'; got some for {role!r}.")
    root = Path(root)
    sha = _publish(root, half, created)
    if role == "train":
        labels_sha = _publish(root, np.asarray(labels, dtype=np.int64), created)
    return FeatureEntry(split, role, sha, int(arr.shape[0]), int(arr.shape[1]), labels_sha)


def _load(root: Path, sha: str, what: str) -> np.ndarray:
    path = feature_path(root, sha)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FeatureFileError(
            f"feature file {str(path)!r} ({what}) is missing; re-run the extract stage "
            f"(alsa-bench run --refresh extract).") from None
    if hashlib.sha256(data).hexdigest() != sha:
        raise FeatureFileError(
            f"feature file {str(path)!r} ({what}) does not match its name (changed on disk); "
            f"delete it and re-run the extract stage.")
    loaded: np.ndarray = np.load(io.BytesIO(data), allow_pickle=False)
    return loaded


def read_features(
    root: str | Path, entry: FeatureEntry
) -> tuple[NDArray[np.float16], NDArray[np.int64] | None]:
    """One entry's features (and labels for the training subsample), hashes checked.

    Raises
    ------
    FeatureFileError
        If a file is missing, changed, or not the ``(n_rows, dim)`` matrix the entry records.
    """
    root = Path(root)
    features = _load(root, entry.sha256, f"features of {entry.split!r}")
    if features.shape != (entry.n_rows, entry.dim) or features.dtype != np.float16:
        raise FeatureFileError(
            f"feature file of split {entry.split!r} holds {features.dtype} {features.shape}, "
            f"not float16 ({entry.n_rows}, {entry.dim}); re-run the extract stage.")
    labels = None
    if entry.labels_sha256 is not None:
        labels = _load(root, entry.labels_sha256, f"labels of {entry.split!r}")
        if labels.shape != (entry.n_rows,):
            raise FeatureFileError(
                f"labels file of split {entry.split!r} holds shape {labels.shape}, not "
                f"({entry.n_rows},); re-run the extract stage.")
    return features, labels


@dataclass(frozen=True)
class RunFeatures:
    """The feature files of one run: read lazily, one split at a time.

    Attributes
    ----------
    root : str
        Results root the files lie under.
    entries : tuple of FeatureEntry
        One per stored split (validation, every target split, the training subsample).
    """

    root: str
    entries: tuple[FeatureEntry, ...]

    def _entry(self, split: str) -> FeatureEntry:
        for entry in self.entries:
            if entry.split == split:
                return entry
        raise KeyError(split)

    def has(self, split: str) -> bool:
        """Whether ``split``'s features are stored."""
        return any(e.split == split for e in self.entries)

    def split(self, split: str) -> NDArray[np.float16]:
        """Features of one split (validation or target)."""
        return read_features(self.root, self._entry(split))[0]

    def train(self) -> tuple[NDArray[np.float16], NDArray[np.int64]] | None:
        """The training subsample's features and labels, or None when not stored."""
        if not self.has(TRAIN_SPLIT):
            return None
        features, labels = read_features(self.root, self._entry(TRAIN_SPLIT))
        assert labels is not None
        return features, labels

    @property
    def dim(self) -> int:
        return self.entries[0].dim

    def shas(self) -> set[str]:
        """Every file the run's features name (features and labels)."""
        return {s for e in self.entries for s in (e.sha256, e.labels_sha256) if s}


# ------------------------------------------------------------------------------------- DuckDB
def write_feature_entries(
    con: duckdb.DuckDBPyConnection, run_key: str, entries: tuple[FeatureEntry, ...] | list[
        FeatureEntry]
) -> None:
    """Replace the run's ``feature_files`` rows (inside the caller's transaction)."""
    con.execute("DELETE FROM feature_files WHERE run_key = ?", [run_key])
    for e in entries:
        con.execute(
            "INSERT INTO feature_files (run_key, split, role, sha256, labels_sha256, n_rows, dim)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [run_key, e.split, e.role, e.sha256, e.labels_sha256, e.n_rows, e.dim],
        )


def feature_entries(con: duckdb.DuckDBPyConnection, run_key: str) -> list[FeatureEntry]:
    """The run's feature files as the database records them (empty when none)."""
    rows = con.execute(
        "SELECT split, role, sha256, n_rows, dim, labels_sha256 FROM feature_files "
        "WHERE run_key = ? ORDER BY split", [run_key]).fetchall()
    return [FeatureEntry(s, r, h, int(n), int(d), lab) for s, r, h, n, d, lab in rows]
