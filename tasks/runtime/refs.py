"""Small, hashable references that stages pass to each other instead of arrays.

Prefect hashes task inputs to build cache keys; frozen dataclasses from an importable module
hash identically across processes. Each reference carries a content digest, so a stage whose
upstream output changed gets a new cache key and re-runs, and one whose inputs did not change
stays cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DatasetRef:
    """A staged dataset: registry name, folder, and a digest of its raw files."""

    name: str
    root: str
    sha256: str


@dataclass(frozen=True)
class CheckpointRef:
    """A trained classifier: the run it belongs to, its file and the file's digest."""

    run_key: str
    dataset: str
    backbone: str
    seed: int
    path: str
    sha256: str


@dataclass(frozen=True)
class LogitsRef:
    """Logits of every split of one run: its Parquet result file, and the rows ingested from it.

    Attributes
    ----------
    run_key : str
        The run.
    db_path : str
        The DuckDB file the flow process ingests into (workers never open it).
    digest : str
        :func:`storage.logits.run_digest` of the ingested rows; ``""`` on the reference a worker
        returns before the flow ingested the file (:func:`tasks.stages.extract.compute_logits`).
    path : str
        ``<results>/logits/<sha256>.parquet`` (:mod:`storage.results`).
    sha256 : str
        SHA-256 of that file's bytes.
    """

    run_key: str
    db_path: str
    digest: str
    path: str = ""
    sha256: str = ""


@dataclass(frozen=True)
class EstimatesRef:
    """Estimates of every method on every target split of one run, and their Parquet file.

    Two references are equal when their results are (run, database and digest): the file also
    holds wall-clock timings, so a re-run that gives the same estimates writes another file.

    Attributes
    ----------
    run_key : str
        The run.
    db_path : str
        The DuckDB file the flow process ingests into.
    digest : str
        :func:`storage.estimates.estimates_digest` of the rows (timings left out).
    path : str
        ``<results>/estimates/<sha256>.parquet`` (:mod:`storage.results`); it names the anchors
        file, if any.
    sha256 : str
        SHA-256 of that file's bytes.
    """

    run_key: str
    db_path: str
    digest: str
    path: str = field(default="", compare=False)
    sha256: str = field(default="", compare=False)


@dataclass(frozen=True)
class ReportRef:
    """A written report folder."""

    name: str
    folder: str
