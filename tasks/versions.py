"""The pipeline's stages, and their code versions: a digest of the source each stage runs.

Prefect's ``TASK_SOURCE`` cache policy hashes only the source of the task function itself, so a
change in ``estimators/alsa.py`` would not invalidate a cached ``estimate`` task. Every stage task
therefore takes a ``code_version`` input computed here: the SHA-256 over the relative paths and
bytes of the files the stage's logic lives in (:data:`STAGE_SOURCES`). Editing estimator code
changes the ``estimate`` version and leaves ``train`` cached; editing a dataset loader changes
the versions of ``download``, ``train`` and ``extract``, whose code reads it.

:data:`STAGES` and :func:`parse_refresh` live here too, so the CLI can check a ``--refresh``
value without importing Prefect.

Examples
--------
>>> v = stage_code_version("estimate")
>>> len(v), v == stage_code_version("estimate")
(16, True)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Final

#: Pipeline stages in execution order; refreshing one refreshes every later one.
STAGES: Final[tuple[str, ...]] = ("download", "train", "extract", "estimate", "report")
#: Refresh value meaning every stage.
REFRESH_ALL: Final[str] = "all"

#: Repository root: the folder holding ``tasks/``, ``estimators/``, ``storage/`` and ``flows/``.
PROJECT_ROOT: Final[Path] = Path(__file__).resolve().parent.parent

_DATA: Final[tuple[str, ...]] = ("tasks/refs.py", "tasks/download.py", "tasks/datasets/*.py")
_MODEL: Final[tuple[str, ...]] = ("tasks/train.py", "tasks/backbones.py")
_LOGITS: Final[tuple[str, ...]] = (
    "tasks/extract.py",
    "tasks/shifts/*.py",
    "storage/schema.py",
    "storage/logits.py",
)
_ESTIMATES: Final[tuple[str, ...]] = (
    "tasks/refs.py",
    "tasks/estimate.py",
    "estimators/*.py",
    "storage/schema.py",
    "storage/logits.py",
    "storage/estimates.py",
    "storage/anchors.py",
)

#: Glob patterns, relative to :data:`PROJECT_ROOT`, of the files each stage's output depends on.
STAGE_SOURCES: Final[dict[str, tuple[str, ...]]] = {
    "download": _DATA,
    "train": _DATA + _MODEL,
    "extract": _DATA + _MODEL + _LOGITS,
    "estimate": _ESTIMATES,
    "report": ("tasks/refs.py", "tasks/report.py", "storage/schema.py", "storage/estimates.py"),
}


def stage_files(stage: str, root: Path | None = None) -> list[Path]:
    """Source files a stage depends on that exist under ``root``, sorted by relative path.

    Parameters
    ----------
    stage : {"download", "train", "extract", "estimate", "report"}
        Pipeline stage.
    root : Path, optional
        Project root to resolve the patterns of :data:`STAGE_SOURCES` against; default
        :data:`PROJECT_ROOT`.

    Returns
    -------
    list of Path
        Absolute paths without duplicates, ``__pycache__`` never included.

    Raises
    ------
    ValueError
        If ``stage`` is not a known stage.
    """
    try:
        patterns = STAGE_SOURCES[stage]
    except KeyError:
        raise ValueError(
            f"stage must be one of {', '.join(STAGE_SOURCES)}; got {stage!r}."
        ) from None
    base = (root or PROJECT_ROOT).resolve()
    found: dict[str, Path] = {}
    for pattern in patterns:
        for path in base.glob(pattern):
            if path.is_file():
                found[path.relative_to(base).as_posix()] = path
    return [found[rel] for rel in sorted(found)]


def stage_code_version(stage: str, root: Path | None = None) -> str:
    """Digest of the source a stage depends on, passed to its task as the ``code_version`` input.

    Parameters
    ----------
    stage : {"download", "train", "extract", "estimate", "report"}
        Pipeline stage.
    root : Path, optional
        Project root; default :data:`PROJECT_ROOT`.

    Returns
    -------
    str
        The first 16 hex digits of a SHA-256 over the stage name and, for every file of
        :func:`stage_files` in order, its relative path and bytes. Line endings are normalised,
        so a checkout with CRLF endings gets the same version.

    Raises
    ------
    ValueError
        If ``stage`` is not a known stage.
    """
    files = stage_files(stage, root)
    base = (root or PROJECT_ROOT).resolve()
    return _digest(stage, tuple((p.relative_to(base).as_posix(), _stat(p)) for p in files), base)


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=64)
def _digest(stage: str, files: tuple[tuple[str, tuple[int, int]], ...], base: Path) -> str:
    # Keyed on (path, mtime, size) so repeated calls in one process read each file once; the
    # digest itself depends only on the paths and contents.
    h = hashlib.sha256(stage.encode())
    for rel, _ in files:
        h.update(b"\0" + rel.encode() + b"\0")
        h.update((base / rel).read_bytes().replace(b"\r\n", b"\n"))
    return h.hexdigest()[:16]


def code_versions() -> dict[str, str]:
    """Code version of every stage, e.g. for logging at the start of a benchmark run."""
    return {stage: stage_code_version(stage) for stage in STAGE_SOURCES}


def parse_refresh(refresh: str | Iterable[str] | None) -> frozenset[str]:
    """The stages to re-run for a ``refresh`` request: the named ones and everything after them.

    Parameters
    ----------
    refresh : str, iterable of str or None
        Stage names from :data:`STAGES`, or ``"all"``.

    Returns
    -------
    frozenset of str
        Empty for None or an empty list.

    Raises
    ------
    ValueError
        If a name is not a stage (the message lists the valid names).

    Examples
    --------
    >>> sorted(parse_refresh(["estimate"]))
    ['estimate', 'report']
    """
    if refresh is None:
        return frozenset()
    names = [refresh] if isinstance(refresh, str) else list(refresh)
    valid = (*STAGES, REFRESH_ALL)
    bad = [n for n in names if n not in valid]
    if bad:
        raise ValueError(
            f"refresh must name stages from {', '.join(valid)}; got {', '.join(map(repr, bad))}."
        )
    if not names:
        return frozenset()
    first = 0 if REFRESH_ALL in names else min(STAGES.index(n) for n in names)
    return frozenset(STAGES[first:])
