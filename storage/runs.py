"""The ``runs`` table: one row per trained classifier (dataset × backbone × seed), with how and
where it was computed."""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb

_SELECT = (
    "SELECT run_key, suite, dataset, backbone, seed, n_classes, checkpoint_sha256, code_version, "
    "train_seconds, created_at, compute_mode, compute_settings, cpu_model, cpu_flags FROM runs"
)

#: ``compute_mode`` values (:mod:`tasks.runtime.reproducible`): the pinned, CPU-independent
#: kernels, or the ones the host picked.
COMPUTE_MODES: tuple[str, ...] = ("reproducible", "fast")


@dataclass(frozen=True)
class RunInfo:
    """One row of the ``runs`` table.

    Attributes
    ----------
    run_key : str
        Readable unique key, ``"{dataset}.{backbone}.s{seed}"`` (e.g. ``"fmnist.lenet.s0"``).
    suite : str
        Benchmark suite the run belongs to (``"fmnist"``).
    dataset : str
        Dataset registry key.
    backbone : str
        Classifier architecture key.
    seed : int
        Training seed; ALSA estimators of the run are seeded with it too.
    n_classes : int
        Number of classes (width of every logit vector of the run), at least 2.
    checkpoint_sha256 : str or None
        Digest of the trained checkpoint file.
    code_version : str or None
        Version of the code that produced the run.
    train_seconds : float or None
        Wall time of training.
    created_at : datetime or None
        UTC time the row was written; :func:`upsert_run` fills it in when None.
    compute_mode : {"reproducible", "fast"} or None
        How the classifier was trained: with the reproducible mode's pinned kernels, or with the
        host's own (None: a row written before schema 7).
    compute_settings : str or None
        JSON object of what the training process computed with, read back from the libraries
        (:func:`tasks.runtime.reproducible.effective_settings`: ATen's CPU capability, oneDNN's
        ISA, MKL's CNR branch, OpenBLAS's core, deterministic algorithms, threads, versions).
    cpu_model : str or None
        The training host's CPU model name.
    cpu_flags : str or None
        Its CPU flags, space-separated, as Linux names them (``/proc/cpuinfo``).
    """

    run_key: str
    suite: str
    dataset: str
    backbone: str
    seed: int
    n_classes: int
    checkpoint_sha256: str | None = None
    code_version: str | None = None
    train_seconds: float | None = None
    created_at: datetime | None = None
    compute_mode: str | None = None
    compute_settings: str | None = None
    cpu_model: str | None = None
    cpu_flags: str | None = None


def _check_text(value: object, name: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string; got {value!r}.")


def _validate(info: RunInfo) -> None:
    if not isinstance(info, RunInfo):
        raise TypeError(f"info must be a RunInfo; got {type(info).__name__}.")
    for name in ("run_key", "suite", "dataset", "backbone"):
        _check_text(getattr(info, name), f"RunInfo.{name}")
    if isinstance(info.seed, bool) or not isinstance(info.seed, numbers.Integral):
        raise ValueError(f"RunInfo.seed must be an integer; got {info.seed!r}.")
    n_classes = info.n_classes
    if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or (
        n_classes < 2
    ):
        raise ValueError(f"RunInfo.n_classes must be an integer >= 2; got {info.n_classes!r}.")
    if info.train_seconds is not None and not (
        isinstance(info.train_seconds, numbers.Real) and math.isfinite(info.train_seconds)
    ):
        raise ValueError(
            f"RunInfo.train_seconds must be a finite number or None; got {info.train_seconds!r}."
        )
    if info.compute_mode is not None and info.compute_mode not in COMPUTE_MODES:
        raise ValueError(f"RunInfo.compute_mode must be one of {', '.join(COMPUTE_MODES)} or "
                         f"None; got {info.compute_mode!r}.")
    if info.compute_settings is not None:
        try:
            settings = json.loads(info.compute_settings)
        except (TypeError, ValueError):
            settings = None
        if not isinstance(settings, dict):
            raise ValueError(f"RunInfo.compute_settings must be a JSON object or None; got "
                             f"{info.compute_settings!r}.")
    for name in ("cpu_model", "cpu_flags"):
        value = getattr(info, name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"RunInfo.{name} must be a string or None; got {value!r}.")


def upsert_run(con: duckdb.DuckDBPyConnection, info: RunInfo) -> RunInfo:
    """Insert the run, or replace the stored row with the same ``run_key``.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Writable connection.
    info : RunInfo
        The row; ``created_at=None`` is stored as the current UTC time.

    Returns
    -------
    RunInfo
        The row as stored (``created_at`` filled in).

    Raises
    ------
    ValueError
        If a field is empty or of the wrong type, or ``n_classes < 2``.
    """
    _validate(info)
    created = info.created_at or datetime.now(UTC).replace(tzinfo=None)
    stored = RunInfo(
        run_key=info.run_key,
        suite=info.suite,
        dataset=info.dataset,
        backbone=info.backbone,
        seed=int(info.seed),
        n_classes=int(info.n_classes),
        checkpoint_sha256=info.checkpoint_sha256,
        code_version=info.code_version,
        train_seconds=None if info.train_seconds is None else float(info.train_seconds),
        created_at=created,
        compute_mode=info.compute_mode,
        compute_settings=info.compute_settings,
        cpu_model=info.cpu_model,
        cpu_flags=info.cpu_flags,
    )
    con.execute(
        "INSERT OR REPLACE INTO runs (run_key, suite, dataset, backbone, seed, n_classes, "
        "checkpoint_sha256, code_version, train_seconds, created_at, compute_mode, "
        "compute_settings, cpu_model, cpu_flags) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            stored.run_key,
            stored.suite,
            stored.dataset,
            stored.backbone,
            stored.seed,
            stored.n_classes,
            stored.checkpoint_sha256,
            stored.code_version,
            stored.train_seconds,
            stored.created_at,
            stored.compute_mode,
            stored.compute_settings,
            stored.cpu_model,
            stored.cpu_flags,
        ],
    )
    return stored


def get_run(con: duckdb.DuckDBPyConnection, run_key: str) -> RunInfo | None:
    """The stored run ``run_key``, or None.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_key : str
        Key of the run.

    Returns
    -------
    RunInfo or None
    """
    rows = con.sql(_SELECT + " WHERE run_key = ?", params=[run_key]).fetchall()
    return RunInfo(*rows[0]) if rows else None


def list_runs(con: duckdb.DuckDBPyConnection, suite: str | None = None) -> list[RunInfo]:
    """Stored runs, optionally of one suite, ordered by ``run_key``.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    suite : str, optional
        Only runs of this suite.

    Returns
    -------
    list of RunInfo
    """
    rows = con.sql(
        _SELECT + " WHERE $suite::VARCHAR IS NULL OR suite = $suite ORDER BY run_key",
        params={"suite": suite},
    ).fetchall()
    return [RunInfo(*row) for row in rows]
