"""Small, hashable references that stages pass to each other instead of arrays.

Prefect hashes task inputs to build cache keys; frozen dataclasses from an importable module
hash identically across processes. Each reference carries a content digest, so a stage whose
upstream output changed gets a new cache key and re-runs, and one whose inputs did not change
stays cached.

**Relocatable.** In memory a reference holds absolute paths (what every reader opens). A path
inside the state folder (:func:`storage.paths.state_dir`) never reaches a cache key or a cache
record as such: :func:`portable` writes it as ``$ALSA_BENCH_HOME/<relative path>`` (the stage
cache policy hashes that form, :data:`tasks.stages.common.STAGE_CACHE`), and a pickled
reference (a Prefect cache record, a result sent from a Dask worker) stores that form and is
rebuilt against the state folder of the process that loads it (:func:`resolve`). So a copied
state folder (``cp -a $H $H2``) hits every cache record, and a result cached in ``$H`` points
at ``$H2``'s files when read under ``ALSA_BENCH_HOME=$H2``. Paths outside the state folder (a
results root or a report folder set elsewhere) stay absolute. Dask workers must see the same
``ALSA_BENCH_HOME`` as the flow process (local clusters inherit it; remote workers set it).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final

#: How a path inside the state folder is written in cache keys and cache records.
STATE_MARK: Final[str] = "$ALSA_BENCH_HOME"


def _state_root() -> Path:
    from storage.paths import state_dir

    return state_dir().resolve()


def portable_path(path: str) -> str:
    """``path`` as ``$ALSA_BENCH_HOME/<relative>`` if it lies in the state folder, else as given.

    Parameters
    ----------
    path : str
        Any path; only absolute ones inside the state folder are rewritten.

    Returns
    -------
    str
    """
    if not isinstance(path, str) or not path or not os.path.isabs(path):
        return path
    try:
        rel = Path(path).relative_to(_state_root())
    except ValueError:
        return path
    return STATE_MARK if not rel.parts else f"{STATE_MARK}/{rel.as_posix()}"


def resolve(path: str) -> str:
    """The absolute path a :func:`portable_path` stands for, in the current state folder.

    Parameters
    ----------
    path : str

    Returns
    -------
    str
        ``path`` itself unless it starts with ``$ALSA_BENCH_HOME``.
    """
    if not isinstance(path, str) or not path.startswith(STATE_MARK):
        return path
    rest = path[len(STATE_MARK):].lstrip("/")
    root = _state_root()
    return str(root / rest) if rest else str(root)


def portable(value: Any) -> Any:
    """A stage input with every state-folder path made portable (for cache keys).

    Strings go through :func:`portable_path`; references and other dataclasses become a dict
    of their class name and portable fields; lists, tuples and dicts are walked.
    """
    if isinstance(value, str):
        return portable_path(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__class__": f"{type(value).__module__}.{type(value).__qualname__}",
                **{f.name: portable(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, (list, tuple)):
        return [portable(v) for v in value]
    if isinstance(value, dict):
        return {k: portable(v) for k, v in value.items()}
    return value


def _rebuild(cls: type, values: dict[str, Any]) -> Any:
    """Unpickle a reference: paths in the portable form are resolved in this state folder."""
    return cls(**{k: resolve(v) if k in cls._PATH_FIELDS else v for k, v in values.items()})


class _Relocatable:
    """Pickles its path fields (:attr:`_PATH_FIELDS`) in the portable form (module docstring)."""

    _PATH_FIELDS: ClassVar[tuple[str, ...]] = ()

    def __reduce__(self) -> tuple[Any, ...]:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        for name in self._PATH_FIELDS:
            values[name] = portable_path(values[name])
        return (_rebuild, (type(self), values))


@dataclass(frozen=True)
class DatasetRef(_Relocatable):
    """A staged dataset: registry name, folder, and a digest of its raw files."""

    _PATH_FIELDS: ClassVar[tuple[str, ...]] = ("root",)

    name: str
    root: str
    sha256: str


@dataclass(frozen=True)
class CheckpointRef(_Relocatable):
    """A trained classifier: the run it belongs to, its file and the file's digest."""

    _PATH_FIELDS: ClassVar[tuple[str, ...]] = ("path",)

    run_key: str
    dataset: str
    backbone: str
    seed: int
    path: str
    sha256: str


@dataclass(frozen=True)
class LogitsRef(_Relocatable):
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

    _PATH_FIELDS: ClassVar[tuple[str, ...]] = ("db_path", "path")

    run_key: str
    db_path: str
    digest: str
    path: str = ""
    sha256: str = ""


@dataclass(frozen=True)
class EstimatesRef(_Relocatable):
    """Estimates of one run on every target split, and their Parquet file.

    The pipeline publishes one file per run and method (``method`` set); a file of several
    methods (``alsa-bench``'s ablations, an older layout) has ``method`` empty. Two references
    are equal when their results are (run, method, database and digest): the file also holds
    wall-clock timings, so a re-run that gives the same estimates writes another file.

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
    method : str
        The one method whose rows the file holds; ``""`` for a file of several.
    """

    _PATH_FIELDS: ClassVar[tuple[str, ...]] = ("db_path", "path")

    run_key: str
    db_path: str
    digest: str
    path: str = field(default="", compare=False)
    sha256: str = field(default="", compare=False)
    method: str = ""


@dataclass(frozen=True)
class ReportRef(_Relocatable):
    """A written report folder."""

    _PATH_FIELDS: ClassVar[tuple[str, ...]] = ("folder",)

    name: str
    folder: str
