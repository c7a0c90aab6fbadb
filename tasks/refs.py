"""Small, hashable references that stages pass to each other instead of arrays.

Prefect hashes task inputs to build cache keys; frozen dataclasses from an importable module
hash identically across processes. Each reference carries a content digest, so a stage whose
upstream output changed gets a new cache key and re-runs, and one whose inputs did not change
stays cached.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    """Logits of every split of one run, stored in DuckDB; digest over the stored rows."""

    run_key: str
    db_path: str
    digest: str


@dataclass(frozen=True)
class EstimatesRef:
    """Estimates of every method on every target split of one run; digest over the rows."""

    run_key: str
    db_path: str
    digest: str


@dataclass(frozen=True)
class ReportRef:
    """A written report folder."""

    name: str
    folder: str
