"""Compute anywhere, write once: immutable, content-addressed Parquet result files.

Workers (a Dask worker, another machine) never open the DuckDB file. A stage that computes a
result writes it as one Parquet file named by the SHA-256 of its bytes::

    <root>/logits/<sha256>.parquet      every split of one run: logits, labels, split rows, run row
    <root>/estimates/<sha256>.parquet   one method's estimates of every target split of a run
                                        (the pipeline: one file per run and method; an
                                        ablation's file holds several variants)
    <root>/anchors/<sha256>.parquet     ALSA's fitted anchors (named by the estimates file)

and the single writer (the flow process) ingests it with :func:`ingest`: the name is checked
against the bytes, then the run's partition is replaced in **one** transaction with the
ordinary writers (:func:`storage.logits.write_split`, :func:`storage.estimates.write_estimates`,
:func:`storage.anchors.write_anchors`) and the hash is recorded in the ``ingested`` table
(schema v3, :mod:`storage.schema`; one row per file whose rows the database holds; the latest
``ingested_at`` of a ``(kind, run_key)`` is the file ingested last). Ingesting a file whose
rows the database already holds (:func:`holds_file`) changes nothing. A file whose every row
newer ingests replaced (the run's earlier logits file of the same content, e.g. one recomputed
by healing; an earlier estimates file of the same methods, and the anchors file only it named;
a file gone from disk) loses its ``ingested`` row and is deleted, so the results folder and
``ingested`` hold one file per distinct content the database holds, however often a stage was
recomputed.

The root is ``results_root`` when given, else ``$ALSA_BENCH_RESULTS``, else ``results/`` beside
the database file. It can be any folder every worker and the flow process see (NFS, a cluster
file system). An object store would plug in at :func:`_publish` and :func:`_read_bytes`: write the
temporary file locally, hash it, then upload with ``pyarrow.fs.FileSystem.from_uri(url)``
(``open_output_stream``) or fsspec under ``<url>/<kind>/<sha256>.parquet``; names are content
hashes, so uploads need no locking or atomic rename.

Same content gives the same bytes (and so the same name): writer options are fixed
(:data:`PARQUET_OPTIONS`), metadata holds no time or host, and JSON metadata is written with sorted
keys. The bytes depend on the pyarrow version (it names itself in the footer).
"""

from __future__ import annotations

import math

import json
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, cast

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numpy.typing import NDArray

from .anchors import write_anchors
from .db import checkpoint, transaction
from .errors import StorageError
from .estimates import EstimateRow, write_estimates
from .features import FeatureEntry, RunFeatures, feature_path, write_feature_entries
from .hashing import file_sha256
from .logits import SplitInfo, write_split
from .runs import RunInfo, upsert_run

__all__ = [
    "KINDS",
    "PARQUET_OPTIONS",
    "RESULTS_ENV",
    "EstimatesContent",
    "LogitsContent",
    "ResultCorruptError",
    "ResultFile",
    "anchors_named",
    "current_file",
    "holds_file",
    "file_sha256",
    "ingest",
    "is_current",
    "read_estimates_file",
    "read_logits_file",
    "results_root",
    "verify_file",
    "write_estimates_file",
    "write_logits_file",
]

#: Environment variable naming the results root (a folder every worker can reach).
RESULTS_ENV: Final[str] = "ALSA_BENCH_RESULTS"
#: Kinds of result file, each in its own sub-folder of the root.
KINDS: Final[tuple[str, ...]] = ("logits", "estimates", "anchors")
#: Version of the file layout, stored in each file's metadata.
FORMAT_VERSION: Final[int] = 1
#: ``pyarrow.parquet.write_table`` options: fixed so that equal content gives equal bytes.
PARQUET_OPTIONS: Final[dict[str, Any]] = {
    "version": "2.6",
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": False,
    "write_statistics": False,
    "data_page_version": "1.0",
    "write_page_index": False,
    "write_page_checksum": False,
    "store_schema": True,
}
_META_KEY: Final[bytes] = b"alsa_bench"


logger = logging.getLogger("storage.results")


class ResultCorruptError(StorageError):
    """A result file's bytes do not match its name, or it is not a readable result file."""


@dataclass(frozen=True)
class ResultFile:
    """A published result file.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    run_key : str
        Run the result belongs to.
    path : str
        ``<root>/<kind>/<sha256>.parquet``.
    sha256 : str
        SHA-256 of the file's bytes (its name).
    """

    kind: str
    run_key: str
    path: str
    sha256: str


@dataclass
class LogitsContent:
    """What a logits file holds: the run row and every split's logits and labels.

    Use :meth:`val` for the labelled validation split and :meth:`target_logits` for a target
    split (no labels: what an estimator may see).
    """

    run: RunInfo
    splits: list[SplitInfo]
    arrays: dict[str, tuple[NDArray[np.float32], NDArray[np.int64]]] = field(repr=False)
    #: The run's penultimate-feature files (:mod:`storage.features`), or None when the
    #: extract stage stored none (a backbone without a linear output layer, an older file).
    features: RunFeatures | None = None

    def val(self) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
        """Logits and labels of the validation split."""
        [info] = [s for s in self.splits if s.role == "val"]
        return self.arrays[info.split]

    def targets(self) -> list[SplitInfo]:
        """The target splits, in file order."""
        return [s for s in self.splits if s.role == "target"]

    def target_logits(self, split: str) -> NDArray[np.float32]:
        """Logits of one target split, without labels.

        Raises
        ------
        ValueError
            If ``split`` is not a target split of the file.
        """
        names = [s.split for s in self.targets()]
        if split not in names:
            raise ValueError(f"split must be one of the target splits {names}; got {split!r}.")
        return self.arrays[split][0]


@dataclass
class EstimatesContent:
    """What an estimates file (and the anchors file it names) holds."""

    run_key: str
    rows: list[EstimateRow]
    anchors: dict[str, tuple[NDArray[np.float32], NDArray[np.float64], NDArray[np.float64]]]
    anchors_sha256: str | None


# ------------------------------------------------------------------------------------ paths
def results_root(results_root: str | Path | None = None, *, db: str | Path | None = None) -> Path:
    """Folder result files are published under.

    Parameters
    ----------
    results_root : str or Path, optional
        Explicit root; wins over everything else.
    db : str or Path, optional
        The database file; without ``results_root`` and ``$ALSA_BENCH_RESULTS`` the root is
        ``results/`` beside it (default :func:`storage.paths.db_path`).

    Returns
    -------
    Path
    """
    if results_root is not None and str(results_root):
        return Path(results_root)
    env = os.environ.get(RESULTS_ENV)
    if env:
        return Path(env)
    if db is None:
        from .paths import db_path

        db = db_path()
    return Path(db).parent / "results"


def verify_file(path: str | Path) -> str:
    """Check that a result file exists and that its bytes hash to its name.

    Returns
    -------
    str
        The SHA-256.

    Raises
    ------
    ResultCorruptError
        If the file is missing, misnamed, or its content does not match its name (one line,
        naming the file and the remedy).
    """
    p = Path(path)
    if not p.is_file():
        raise ResultCorruptError(
            f"result file {str(p)!r} does not exist; rerun the stage that writes it."
        )
    name = p.name.removesuffix(".parquet")
    if len(name) != 64 or any(ch not in "0123456789abcdef" for ch in name):
        raise ResultCorruptError(
            f"result file {str(p)!r} is not named <sha256>.parquet; it was not written by "
            f"alsa-bench: delete it."
        )
    sha = file_sha256(p)
    if sha != name:
        raise ResultCorruptError(
            f"result file {str(p)!r} does not match its hash (content {sha[:12]}...); delete it "
            f"and rerun: the stage recomputes it."
        )
    return sha


def _publish(table: pa.Table, root: Path, kind: str, run_key: str) -> ResultFile:
    """Write ``table`` to a temporary file in ``<root>/<kind>/``, hash it, rename to its hash."""
    folder = root / kind
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet", dir=folder)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        pq.write_table(table, tmp, **PARQUET_OPTIONS)
        sha = file_sha256(tmp)
        final = folder / f"{sha}.parquet"
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return ResultFile(kind=kind, run_key=run_key, path=str(final), sha256=sha)


def _with_meta(table: pa.Table, meta: Mapping[str, Any]) -> pa.Table:
    payload = json.dumps({"format": FORMAT_VERSION, **meta}, sort_keys=True)
    return table.replace_schema_metadata({_META_KEY: payload.encode("utf-8")})


def _read_table(path: Path, kind: str) -> tuple[pa.Table, dict[str, Any]]:
    """Read a verified file and its metadata; anything unreadable is a ResultCorruptError."""
    try:
        table = pq.read_table(path)
        raw = (table.schema.metadata or {}).get(_META_KEY)
        meta = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ResultCorruptError(
            f"result file {str(path)!r} is not a readable Parquet file ({type(exc).__name__}); "
            f"delete it and rerun: the stage recomputes it."
        ) from None
    if not isinstance(meta, dict) or meta.get("kind") != kind:
        found = meta.get("kind") if isinstance(meta, dict) else None
        raise ResultCorruptError(
            f"result file {str(path)!r} is not an alsa-bench {kind} file (kind {found!r}); "
            f"delete it and rerun: the stage recomputes it."
        )
    if meta.get("format") != FORMAT_VERSION:
        raise ResultCorruptError(
            f"result file {str(path)!r} has layout version {meta.get('format')!r}, this code reads "
            f"{FORMAT_VERSION}; delete it and rerun: the stage recomputes it."
        )
    return table, meta


def _peek_run_key(path: Path, kind: str) -> str:
    """The run key in a result file's footer, without reading its rows."""
    try:
        raw = (pq.read_schema(path).metadata or {}).get(_META_KEY)
        meta = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ResultCorruptError(
            f"result file {str(path)!r} is not a readable Parquet file ({type(exc).__name__}); "
            f"delete it and rerun: the stage recomputes it."
        ) from None
    run_key = None
    if isinstance(meta, dict) and meta.get("kind") == kind:
        run = meta.get("run") if kind == "logits" else meta
        run_key = run.get("run_key") if isinstance(run, dict) else None
    if not isinstance(run_key, str) or not run_key:
        raise ResultCorruptError(
            f"result file {str(path)!r} is not an alsa-bench {kind} file; delete it and rerun: "
            f"the stage recomputes it."
        )
    return run_key


def _fixed_list(values: NDArray[np.float32]) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), int(values.shape[1]))


def _matrix(column: pa.ChunkedArray, n: int, c: int, dtype: Any) -> NDArray[Any]:
    flat = column.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.array(flat, dtype=dtype).reshape(n, c)


# ------------------------------------------------------------------------------------ logits
#: Run fields that say how and where the classifier was computed (``storage.runs.RunInfo``).
_RUN_HOST_FIELDS: tuple[str, ...] = ("compute_mode", "compute_settings", "cpu_model", "cpu_flags")
#: Run fields that vary between equal computations: timings, the code version, the host.
_RUN_VARYING_FIELDS: tuple[str, ...] = ("train_seconds", "code_version", "compute_settings",
                                        "cpu_model", "cpu_flags")


def _run_meta(run: RunInfo) -> dict[str, Any]:
    return {
        "run_key": run.run_key, "suite": run.suite, "dataset": run.dataset,
        "backbone": run.backbone, "seed": int(run.seed), "n_classes": int(run.n_classes),
        "checkpoint_sha256": run.checkpoint_sha256, "code_version": run.code_version,
        "train_seconds": run.train_seconds,
        # how and where the classifier was computed (schema 7); absent keys read as None, so a
        # file written before them loads unchanged
        **{k: getattr(run, k) for k in _RUN_HOST_FIELDS if getattr(run, k) is not None},
    }


def write_logits_file(
    run: RunInfo,
    splits: Sequence[tuple[SplitInfo, NDArray[Any], NDArray[Any]]],
    root: str | Path,
    features: Sequence[FeatureEntry] = (),
) -> ResultFile:
    """Publish every split of one run as one logits file.

    Parameters
    ----------
    run : RunInfo
        The run row (its ``created_at`` is not stored: the file holds no time).
    splits : sequence of (SplitInfo, logits, labels)
        Exactly one split with role ``"val"``; logits ``(n, run.n_classes)`` finite, stored as
        float32; labels integers in ``[0, n_classes)``. ``n_samples`` and ``true_accuracy`` are
        computed here, as :func:`storage.logits.write_split` does.
    root : str or Path
        Results root (:func:`results_root`).
    features : sequence of FeatureEntry, optional
        The run's feature files, already published under ``root``
        (:func:`storage.features.write_features`); listed in the footer, so a file without
        features has the very bytes it had before features existed.

    Returns
    -------
    ResultFile

    Raises
    ------
    ValueError
        If there is not exactly one validation split, a split name repeats, an array is
        malformed (the messages of :func:`storage.logits.write_split`), or a feature entry
        names a split the file lacks or disagrees with its split's row count.
    """
    from .logits import _check_arrays, _check_info

    if not isinstance(run, RunInfo):
        raise TypeError(f"run must be a RunInfo; got {type(run).__name__}.")
    names = [info.split for info, _, _ in splits]
    if len(set(names)) != len(names):
        raise ValueError(f"splits must have distinct names; got {names}.")
    roles = [info.role for info, _, _ in splits]
    if roles.count("val") != 1:
        raise ValueError(
            f"splits must hold exactly one validation split (role 'val'); got roles {roles}."
        )
    infos: list[dict[str, Any]] = []
    parts: list[pa.Table] = []
    for info, logits, labels in splits:
        _check_info(info)
        flt, lab = _check_arrays(logits, labels)
        if flt.shape[1] != run.n_classes:
            raise ValueError(
                f"logits of split {info.split!r} have {flt.shape[1]} classes but run "
                f"{run.run_key!r} has {run.n_classes}."
            )
        n = flt.shape[0]
        infos.append({
            "split": info.split, "role": info.role, "shift_family": info.shift_family,
            "shift": info.shift, "severity": None if info.severity is None else int(info.severity),
            "n_samples": int(n), "true_accuracy": float(np.mean(flt.argmax(axis=1) == lab)),
        })
        parts.append(pa.table({
            "split": pa.array([info.split] * n, type=pa.string()),
            "sample_index": pa.array(np.arange(n, dtype=np.int64)),
            "label": pa.array(lab),
            "logits": _fixed_list(flt),
        }))
    table = pa.concat_tables(parts) if parts else pa.table({})
    meta: dict[str, Any] = {"kind": "logits", "run": _run_meta(run), "splits": infos}
    if features:
        rows = {i["split"]: i["n_samples"] for i in infos}
        for entry in features:
            if not isinstance(entry, FeatureEntry):
                raise TypeError(f"features must hold FeatureEntry; got {type(entry).__name__}.")
            if entry.role != "train" and rows.get(entry.split) != entry.n_rows:
                raise ValueError(
                    f"features of split {entry.split!r} have {entry.n_rows} rows; the split "
                    f"has {rows.get(entry.split)!r}.")
        meta["features"] = [e.to_json() for e in features]
    return _publish(_with_meta(table, meta), Path(root), "logits", run.run_key)


def read_logits_file(path: str | Path, *, verify: bool = True) -> LogitsContent:
    """Read a logits file (after checking its hash unless ``verify=False``).

    Raises
    ------
    ResultCorruptError
        If the file is missing, does not match its hash, or is not a readable logits file.
    """
    p = Path(path)
    if verify:
        verify_file(p)
    table, meta = _read_table(p, "logits")
    try:
        run = RunInfo(**meta["run"])
        infos = [SplitInfo(**s) for s in meta["splits"]]
        c = run.n_classes
        arrays: dict[str, tuple[NDArray[np.float32], NDArray[np.int64]]] = {}
        offset = 0
        for info in infos:
            part = table.slice(offset, info.n_samples)
            offset += info.n_samples
            names = pc.unique(part.column("split")).to_pylist()
            if part.num_rows != info.n_samples or names not in ([], [info.split]):
                raise ValueError(f"rows of split {info.split!r} are not where the footer says")
            logits = _matrix(part.column("logits"), info.n_samples, c, np.float32)
            labels = part.column("label").to_numpy().astype(np.int64)
            arrays[info.split] = (logits, labels)
        if offset != table.num_rows:
            raise ValueError("more rows than the splits describe")
        entries = tuple(FeatureEntry.from_json(e) for e in meta.get("features") or ())
    except (KeyError, TypeError, ValueError, pa.ArrowException) as exc:
        raise ResultCorruptError(
            f"result file {str(p)!r} is not a consistent logits file ({exc}); delete it and "
            f"rerun: the stage recomputes it."
        ) from None
    features = RunFeatures(str(p.parent.parent), entries) if entries else None
    return LogitsContent(run=run, splits=infos, arrays=arrays, features=features)


# ------------------------------------------------------------------------------------ estimates
_ESTIMATE_SCHEMA = pa.schema([
    ("split", pa.string()), ("method", pa.string()), ("params_json", pa.string()),
    ("estimated_accuracy", pa.float64()), ("true_accuracy", pa.float64()),
    ("abs_error", pa.float64()), ("fit_seconds", pa.float64()),
    ("estimate_seconds", pa.float64()), ("diagnostics_json", pa.string()),
    ("code_version", pa.string()), ("interval_low", pa.float64()),
    ("interval_high", pa.float64()), ("interval_level", pa.float64()),
    ("per_class_json", pa.string()), ("shift_low", pa.float64()), ("shift_high", pa.float64()),
])


#: Columns added with schema 4 (absent from older estimates files).
_BAND_COLUMNS = frozenset({"shift_low", "shift_high"})


def write_estimates_file(
    run_key: str,
    rows: Sequence[EstimateRow],
    anchors: Mapping[str, tuple[NDArray[Any], NDArray[Any], NDArray[Any]]],
    root: str | Path,
) -> ResultFile:
    """Publish a run's estimates (and its anchors, as a second file the first one names).

    Parameters
    ----------
    run_key : str
        Run the rows belong to.
    rows : sequence of EstimateRow
        At least one; one per (split, method), every ``run_key`` equal to ``run_key``.
    anchors : mapping of method to (positions, peaks, variances)
        Fitted anchors to store (may be empty).
    root : str or Path
        Results root (:func:`results_root`).

    Returns
    -------
    ResultFile
        The estimates file; its metadata holds the anchors file's SHA-256 (or null).

    Raises
    ------
    ValueError
        If there are no rows, or rows or anchors are malformed (the messages of
        :func:`storage.estimates.write_estimates` and :func:`storage.anchors.write_anchors`).
    """
    from .anchors import _check_anchor_arrays
    from .estimates import _check_rows

    if not isinstance(run_key, str) or not run_key:
        raise ValueError(f"run_key must be a non-empty string; got {run_key!r}.")
    rows = list(rows)
    if not rows:
        raise ValueError(f"rows must hold at least one estimate of run {run_key!r}; got none.")
    _check_rows(run_key, rows)
    root = Path(root)
    anchors_sha: str | None = None
    if anchors:
        parts = []
        for method in sorted(anchors):
            pos, peak, var = _check_anchor_arrays(*anchors[method])
            k = pos.shape[0]
            parts.append(pa.table({
                "method": pa.array([method] * k, type=pa.string()),
                "anchor_index": pa.array(np.arange(k, dtype=np.int32)),
                "peak": pa.array(peak), "variance": pa.array(var),
                "position": pa.ListArray.from_arrays(
                    pa.array(np.arange(k + 1, dtype=np.int32) * pos.shape[1]),
                    pa.array(pos.reshape(-1)),
                ),
            }))
        meta: dict[str, Any] = {"kind": "anchors", "run_key": run_key,
                "methods": {m: list(np.asarray(anchors[m][0]).shape) for m in sorted(anchors)}}
        anchors_sha = _publish(
            _with_meta(pa.concat_tables(parts), meta), root, "anchors", run_key
        ).sha256
    columns = {
        name: pa.array([getattr(r, name) for r in rows], type=_ESTIMATE_SCHEMA.field(name).type)
        for name in _ESTIMATE_SCHEMA.names
    }
    table = pa.table(columns, schema=_ESTIMATE_SCHEMA)
    # the methods in the footer let the writer tell which held file a method's rows come from
    # without reading the rows (:func:`holds_file`)
    meta = {"kind": "estimates", "run_key": run_key, "anchors": anchors_sha,
            "methods": sorted({r.method for r in rows})}
    return _publish(_with_meta(table, meta), root, "estimates", run_key)


def read_estimates_file(path: str | Path, *, verify: bool = True) -> EstimatesContent:
    """Read an estimates file and the anchors file it names (``<root>/anchors/<sha>.parquet``).

    Raises
    ------
    ResultCorruptError
        If either file is missing, does not match its hash, or is not readable.
    """
    p = Path(path)
    if verify:
        verify_file(p)
    table, meta = _read_table(p, "estimates")
    run_key = cast(str, meta.get("run_key"))
    try:
        # Files written before schema 4 have no shift-aware band: NaN, as the migration leaves it.
        cols = {name: table.column(name).to_pylist() if name in table.column_names
                or name not in _BAND_COLUMNS else [math.nan] * table.num_rows
                for name in _ESTIMATE_SCHEMA.names}
        rows = [
            EstimateRow(run_key=run_key, **{k: v[i] for k, v in cols.items()})  # type: ignore[arg-type]
            for i in range(table.num_rows)
        ]
    except (KeyError, TypeError, pa.ArrowException) as exc:
        raise ResultCorruptError(
            f"result file {str(p)!r} is not a consistent estimates file ({exc}); delete it and "
            f"rerun: the stage recomputes it."
        ) from None
    anchors: dict[str, tuple[NDArray[np.float32], NDArray[np.float64], NDArray[np.float64]]] = {}
    sha = meta.get("anchors")
    if sha:
        a_path = p.parent.parent / "anchors" / f"{sha}.parquet"
        if verify:
            verify_file(a_path)
        a_table, a_meta = _read_table(a_path, "anchors")
        try:
            for method, (k, c) in sorted(a_meta["methods"].items()):
                part = a_table.filter(pc.equal(a_table.column("method"), method))
                if part.num_rows != k:
                    raise ValueError(f"method {method!r} has {part.num_rows} anchors, not {k}")
                anchors[method] = (
                    _matrix(part.column("position"), k, c, np.float32),
                    part.column("peak").to_numpy().astype(np.float64),
                    part.column("variance").to_numpy().astype(np.float64),
                )
        except (KeyError, TypeError, ValueError, pa.ArrowException) as exc:
            raise ResultCorruptError(
                f"result file {str(a_path)!r} is not a consistent anchors file ({exc}); delete "
                f"it and {str(p)!r}, and rerun: the stage recomputes them."
            ) from None
    return EstimatesContent(run_key=run_key, rows=rows, anchors=anchors, anchors_sha256=sha)


# ------------------------------------------------------------------------------------ ingest
class _JoinedConnection:
    """A connection whose own BEGIN/COMMIT/ROLLBACK/CHECKPOINT are no-ops.

    Lets the ordinary writers (which open their own transaction) run inside the one
    transaction of :func:`ingest`: their statements join it, and an error they raise rolls the
    whole ingest back.
    """

    _SKIPPED = frozenset({"BEGIN TRANSACTION", "COMMIT", "ROLLBACK", "CHECKPOINT"})

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def execute(self, query: str, *args: Any, **kwargs: Any) -> Any:
        if query.strip().upper() in self._SKIPPED:
            return self._con
        return self._con.execute(query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def _has_ingested_table(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.sql(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND table_name = 'ingested'"
    ).fetchall()[0][0])


def current_file(con: duckdb.DuckDBPyConnection, kind: str, run_key: str) -> str | None:
    """SHA-256 of the ``kind`` file the database currently holds for ``run_key``, or None."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}; got {kind!r}.")
    if not _has_ingested_table(con):
        return None
    rows = con.sql(
        "SELECT sha256 FROM ingested WHERE kind = ? AND run_key = ? "
        "ORDER BY ingested_at DESC LIMIT 1",
        params=[kind, run_key],
    ).fetchall()
    return rows[0][0] if rows else None


def _ingest_time(con: duckdb.DuckDBPyConnection, kind: str, run_key: str) -> datetime:
    """Now (UTC), but strictly after the latest ingest of ``(kind, run_key)``, so that the
    latest row names the current file even if the clock stepped back."""
    now = datetime.now(UTC).replace(tzinfo=None)
    latest = con.sql(
        "SELECT max(ingested_at) FROM ingested WHERE kind = ? AND run_key = ?",
        params=[kind, run_key],
    ).fetchall()[0][0]
    if latest is not None and now <= latest:
        now = latest + timedelta(microseconds=1)
    return now


def is_current(con: duckdb.DuckDBPyConnection, result: ResultFile) -> bool:
    """Whether ``result`` is the file the database holds for its kind and run."""
    return current_file(con, result.kind, result.run_key) == result.sha256


#: Methods of the estimates files read so far, by path: a file's name is the hash of its bytes,
#: so what a name holds never changes (a file that could not be read is not remembered).
_METHODS_OF: dict[str, frozenset[str]] = {}


def _file_methods(path: Path) -> frozenset[str] | None:
    """The methods of an estimates file: from its footer, else its ``method`` column; None
    when the file is gone or unreadable."""
    known = _METHODS_OF.get(str(path))
    if known is not None:
        return known
    try:
        raw = (pq.read_schema(path).metadata or {}).get(_META_KEY)
        meta = json.loads(raw.decode("utf-8")) if raw is not None else None
        if isinstance(meta, dict) and isinstance(meta.get("methods"), list):
            found = frozenset(str(m) for m in meta["methods"])
        else:
            found = frozenset(pq.read_table(path, columns=["method"]).column("method")
                              .to_pylist())
    except (pa.ArrowException, OSError, ValueError):
        return None
    if len(_METHODS_OF) > 100_000:
        _METHODS_OF.clear()
    _METHODS_OF[str(path)] = found
    return found


def _holds_estimates(con: duckdb.DuckDBPyConnection, path: Path, run_key: str, sha: str) -> bool:
    """Whether the database holds the rows of the estimates file ``path`` (named ``sha``).

    A run may hold several estimates files (one per method in the pipeline, an ablation's
    variants): the file is on record, and no file of the run ingested after it shares a method
    with it (that file's rows would have replaced some of its rows). A later file that cannot
    be read counts as sharing one: the ingest then simply runs again.
    """
    if not _has_ingested_table(con):
        return False
    shas = [s for (s,) in con.sql(
        "SELECT sha256 FROM ingested WHERE kind = 'estimates' AND run_key = ? "
        "ORDER BY ingested_at", params=[run_key]).fetchall()]
    if sha not in shas:
        return False
    later = shas[shas.index(sha) + 1:]
    if not later:
        return True
    mine = _file_methods(path)
    if mine is None:
        return False
    for other in later:
        theirs = _file_methods(path.parent / f"{other}.parquet")
        if theirs is None or theirs & mine:
            return False
    return True


def holds_file(con: duckdb.DuckDBPyConnection, path: str | Path) -> bool:
    """Whether the database holds the rows of the result file ``path`` as they are in it.

    A logits file: it is the run's current file (:func:`current_file`). An estimates file: it
    is on record and no estimates file of the run ingested after it holds one of its methods
    (a run holds one estimates file per method, and an ablation's). The file's bytes are not
    hashed here (:func:`verify_file` does that).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
    path : str or Path
        ``<root>/logits/<sha256>.parquet`` or ``<root>/estimates/<sha256>.parquet``.

    Returns
    -------
    bool
        False also when the file is not a readable result file.

    Raises
    ------
    ValueError
        If the file's folder is not ``logits`` or ``estimates``.
    """
    p = Path(path)
    kind = p.parent.name
    if kind not in ("logits", "estimates"):
        raise ValueError(
            f"path must be a file under <root>/logits/ or <root>/estimates/; got {str(p)!r}."
        )
    sha = p.name.removesuffix(".parquet")
    try:
        run_key = _peek_run_key(p, kind)
    except ResultCorruptError:
        return False
    if kind == "logits":
        return current_file(con, kind, run_key) == sha
    return _holds_estimates(con, p, run_key, sha)


def ingest(con: duckdb.DuckDBPyConnection, path: str | Path) -> bool:
    """Ingest a logits or estimates file into the database, idempotently, in one transaction.

    The file's hash is checked against its name first; then, unless the database already holds
    this very file for its run, the run's partition is replaced: for a logits file, the run
    row and every split (splits of the run not in the file are dropped); for an estimates file,
    its (split, method) rows and the anchors of its methods. The file's ``ingested`` row (and
    its anchors file's) is written or refreshed in the same transaction, with a time after
    every earlier ingest of the run, then the database is checkpointed.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Writable connection with no transaction open.
    path : str or Path
        ``<root>/logits/<sha256>.parquet`` or ``<root>/estimates/<sha256>.parquet``.

    Returns
    -------
    bool
        True if the database changed, False if it already held this file.

    Raises
    ------
    ResultCorruptError
        If the file (or the anchors file it names) is missing, does not match its hash or is
        not a readable result file; nothing is written then.
    ValueError
        If the file's folder is not ``logits`` or ``estimates``.
    """
    p = Path(path)
    kind = p.parent.name
    if kind not in ("logits", "estimates"):
        raise ValueError(
            f"path must be a file under <root>/logits/ or <root>/estimates/; got {str(p)!r}."
        )
    sha = verify_file(p)
    run_key = _peek_run_key(p, kind)
    if (current_file(con, kind, run_key) == sha if kind == "logits"
            else _holds_estimates(con, p, run_key, sha)):
        return False
    if kind == "logits":
        logits = read_logits_file(p, verify=False)
        run_key = logits.run.run_key
    else:
        estimates = read_estimates_file(p)
        run_key = estimates.run_key
    now = _ingest_time(con, kind, run_key)
    root = p.parent.parent
    if kind == "logits":
        stale = _superseded_logits(con, root, run_key, sha, p)
    else:
        stale = _superseded_estimates(con, root, run_key, sha, estimates)
    joined: Any = _JoinedConnection(con)
    with transaction(con):
        for old_sha, old_kind in stale:
            con.execute(
                "DELETE FROM ingested WHERE sha256 = ? AND kind = ? AND run_key = ?",
                [old_sha, old_kind, run_key],
            )
        records = [(sha, kind)]
        if kind == "logits":
            upsert_run(con, logits.run)
            con.execute("DELETE FROM logits WHERE run_key = ?", [run_key])
            con.execute("DELETE FROM splits WHERE run_key = ?", [run_key])
            for info in logits.splits:
                write_split(joined, run_key, info, *logits.arrays[info.split])
            write_feature_entries(
                con, run_key, () if logits.features is None else logits.features.entries)
        else:
            write_estimates(joined, run_key, estimates.rows)
            for method, (positions, peaks, variances) in estimates.anchors.items():
                write_anchors(joined, run_key, method, positions, peaks, variances)
            if estimates.anchors_sha256:
                records.append((estimates.anchors_sha256, "anchors"))
        for digest, what in records:
            con.execute(
                "INSERT OR REPLACE INTO ingested (sha256, kind, run_key, ingested_at) "
                "VALUES (?, ?, ?, ?)",
                [digest, what, run_key, now],
            )
    checkpoint(con)
    if kind == "logits":
        _drop_unnamed_features(con, root, run_key, [s for s, k in stale if k == "logits"])
    for old_sha, old_kind in stale:  # after the commit: the database no longer names them
        old_path = root / old_kind / f"{old_sha}.parquet"
        if old_path.is_file():
            old_path.unlink(missing_ok=True)
            logger.info("removed %s: every row it held was replaced by %s", old_path, p.name)
    return True


def _footer_feature_shas(path: Path) -> set[str]:
    """The feature files a logits file's footer names (empty when unreadable or none)."""
    try:
        raw = (pq.read_schema(path).metadata or {}).get(_META_KEY)
        meta = json.loads(raw.decode("utf-8")) if raw is not None else {}
        return {s for e in meta.get("features") or () for s in (e.get("sha256"),
                                                                 e.get("labels_sha256")) if s}
    except (pa.ArrowException, OSError, ValueError, AttributeError, TypeError):
        return set()


def _drop_unnamed_features(
    con: duckdb.DuckDBPyConnection, root: Path, run_key: str, stale_logits: list[str]
) -> None:
    """Delete the feature files only superseded logits files named: not in ``feature_files``,
    and not named by a logits file of the run that stays on record."""
    doomed: set[str] = set()
    for sha in stale_logits:
        doomed |= _footer_feature_shas(root / "logits" / f"{sha}.parquet")
    if not doomed:
        return
    named = {r[0] for r in con.execute("SELECT sha256 FROM feature_files").fetchall()}
    named |= {r[0] for r in con.execute(
        "SELECT labels_sha256 FROM feature_files WHERE labels_sha256 IS NOT NULL").fetchall()}
    kept = con.execute(
        "SELECT sha256 FROM ingested WHERE kind = 'logits' AND run_key = ?", [run_key]
    ).fetchall()
    for (sha,) in kept:
        if sha not in stale_logits:
            named |= _footer_feature_shas(root / "logits" / f"{sha}.parquet")
    for sha in sorted(doomed - named):
        path = feature_path(root, sha)
        if path.is_file():
            path.unlink(missing_ok=True)
            logger.info("removed %s: no logits file on record names it", path)


def _content_meta(path: Path) -> dict[str, Any] | None:
    """A logits file's footer without what varies between equal computations (timings, the
    feature files it lists)."""
    try:
        raw = (pq.read_schema(path).metadata or {}).get(_META_KEY)
        meta = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (pa.ArrowException, OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("run"), dict):
        return None
    run = {k: v for k, v in meta["run"].items() if k not in _RUN_VARYING_FIELDS}
    # the feature files a file lists are derived from the same checkpoint: a file that differs
    # only there (features added to an older file, recomputed on another device) replaces it
    return {**{k: v for k, v in meta.items() if k != "features"}, "run": run}


def _superseded_logits(
    con: duckdb.DuckDBPyConnection, root: Path, run_key: str, sha: str, new: Path
) -> list[tuple[str, str]]:
    """Earlier logits files of the run that the new one replaces for good: gone from disk, or
    the same content (same run, checkpoint and splits; only the recorded training time
    differs, as after a recomputed stage). A file of other content stays on record, so that
    ingesting it again brings its partition back."""
    rows = con.sql(
        "SELECT sha256 FROM ingested WHERE kind = 'logits' AND run_key = ? AND sha256 <> ?",
        params=[run_key, sha],
    ).fetchall()
    mine = _content_meta(new)
    stale = []
    for (old,) in rows:
        path = root / "logits" / f"{old}.parquet"
        if not path.is_file() or (mine is not None and _content_meta(path) == mine):
            stale.append((old, "logits"))
    return stale


def _estimate_keys(path: Path) -> set[tuple[str, str]] | None:
    """The (split, method) pairs of an estimates file, or None if it cannot be read."""
    try:
        table = pq.read_table(path, columns=["split", "method"])
    except (pa.ArrowException, OSError, ValueError):
        return None
    return set(zip(table.column("split").to_pylist(), table.column("method").to_pylist(),
                   strict=True))


def anchors_named(path: str | Path) -> str | None:
    """The SHA-256 of the anchors file an estimates file names in its footer.

    Parameters
    ----------
    path : str or Path
        An estimates file.

    Returns
    -------
    str or None
        None if it names none or its footer cannot be read.
    """
    try:
        raw = (pq.read_schema(path).metadata or {}).get(_META_KEY)
        meta = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (pa.ArrowException, OSError, ValueError):
        return None
    named = meta.get("anchors") if isinstance(meta, dict) else None
    return named if isinstance(named, str) else None


def _superseded_estimates(
    con: duckdb.DuckDBPyConnection, root: Path, run_key: str, sha: str,
    content: EstimatesContent,
) -> list[tuple[str, str]]:
    """Earlier estimates (and anchors) files of the run whose every row newer ones replace.

    An estimates ingest replaces the run's rows of the (split, method) pairs it holds, so an
    earlier file whose pairs are all among those of the new file and of the files ingested
    after it that are still held (a re-run of the same methods; a run's one-file-per-run
    estimates replaced by its one-file-per-method ones) is no longer held by the database; one
    with other methods (an ablation's variants) still is. A file that is gone (quarantined,
    deleted) is no longer held either. An anchors file is held while a held estimates file
    names it.
    """
    covered = {(r.split, r.method) for r in content.rows}
    rows = con.sql(
        "SELECT sha256, kind FROM ingested WHERE run_key = ? AND kind IN ('estimates', "
        "'anchors') AND sha256 <> ? ORDER BY ingested_at DESC",
        params=[run_key, sha],
    ).fetchall()
    stale: list[tuple[str, str]] = []
    named = {content.anchors_sha256}
    for old, what in rows:  # newest first: a held file's pairs cover the older files' ones
        if what != "estimates":
            continue
        path = root / "estimates" / f"{old}.parquet"
        keys = _estimate_keys(path) if path.is_file() else set()
        if keys is not None and keys <= covered:
            stale.append((old, "estimates"))
        else:
            named.add(anchors_named(path))
            covered |= keys or set()
    stale += [(old, "anchors") for old, what in rows if what == "anchors" and old not in named]
    return stale
