"""``alsa-bench doctor``: check a state folder, and repair what can safely be recomputed.

:func:`examine` walks one state folder (:func:`storage.paths.state_dir`) and returns one
:class:`Finding` per problem, each naming what is wrong, the file, and the remedy:

=================  ==========================================================================
check              what it looks for
=================  ==========================================================================
``database``       ``bench.duckdb`` does not open (garbage, truncated, empty, locked)
``schema``         schema version older (migratable), newer, unknown, or no version marker
``duplicates``     rows repeated on a table's natural key (:data:`NATURAL_KEYS`)
``orphan-rows``    logits, splits, estimates or anchors of a run missing from ``runs``
``checkpoint``     a checkpoint that is not a valid archive, or whose SHA-256 differs from the
                   one ``runs.checkpoint_sha256`` recorded
``orphan-file``    a checkpoint no run refers to; a ``results/<kind>/<sha>.parquet`` never
                   recorded in the ``ingested`` table; a ``results/features/<sha>.npy`` that
                   no ``feature_files`` row names
``result-hash``    a Parquet result or feature file whose bytes do not hash to its name
``temp-file``      ``.<name>.*.tmp`` / ``.tmp-*`` files left by a writer killed mid-write
``staging``        ``.staging-*`` folders of interrupted fetches
``cache-record``   a Prefect task-cache record (``prefect-results/``) that does not deserialize
``stale-lock``     the owner record of a process that died holding the state lock
=================  ==========================================================================

The ``database`` check reads every value of every table (:func:`storage.db.scan_every_block`),
so damage inside the file (a block whose checksum fails) is found, not only a bad header.

With ``repair=True`` the findings marked repairable are fixed: temporary files and staging
folders are deleted; corrupt cache records, damaged checkpoints and damaged Parquet results are
moved to ``<state>/quarantine/`` (:func:`quarantine`; the pipeline recomputes each on the next
run), and a stale lock record is cleared. A damaged database file (and its write-ahead log) is
moved to ``quarantine/`` too, its bytes untouched: the next ``alsa-bench run`` with the same
options creates a new one and re-ingests the content-addressed results under ``results/``
(every cached extract and estimate stage ingests its file into a database that lacks it), and
recomputes whatever is missing. A database that is merely old, newer, or holds duplicates is
never rewritten: its findings say which command migrates or rebuilds it.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import zipfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb

from .db import corrupt_error, corruption_reason, is_lock_error, scan_every_block
from .errors import SchemaVersionError
from .hashing import file_sha256
from .lock import LockRecord
from .schema import MIGRATIONS, SCHEMA_VERSION, read_schema_version

__all__ = [
    "NATURAL_KEYS", "QUARANTINE", "DoctorReport", "Finding", "examine", "quarantine",
    "sweep_cache_records", "sweep_temp_files",
]

logger = logging.getLogger("storage.doctor")

#: Folder of the state folder that damaged files are moved to (never deleted).
QUARANTINE = "quarantine"

#: Natural key of every table: a row repeated on these columns is a duplicate.
NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    "runs": ("run_key",),
    "splits": ("run_key", "split"),
    "logits": ("run_key", "split", "sample_index"),
    "estimates": ("run_key", "split", "method", "params_json"),
    "anchors": ("run_key", "method", "anchor_index"),
    "ingested": ("sha256",),
}
#: The stage whose ``--refresh`` rewrites a table's rows.
_REBUILT_BY: dict[str, str] = {
    "runs": "extract", "splits": "extract", "logits": "extract", "estimates": "estimate",
    "anchors": "estimate", "ingested": "extract",
}
#: Tables whose rows belong to a run of ``runs``.
_RUN_TABLES: tuple[str, ...] = ("splits", "logits", "estimates", "anchors")
_SHA256_NAME = re.compile(r"^[0-9a-f]{64}$")
_RUN_KEY = re.compile(r"^(?P<dataset>.+)\.(?P<backbone>[^.]+)\.s(?P<seed>\d+)$")


@dataclass(frozen=True)
class Finding:
    """One problem in a state folder.

    Attributes
    ----------
    check : str
        Which check found it (``database``, ``schema``, ``duplicates``, ...; see the module).
    path : str
        The file or folder concerned.
    problem : str
        What is wrong.
    remedy : str
        What to do about it.
    repairable : bool
        Whether ``--repair`` fixes it (by deleting something the pipeline recomputes).
    repaired : bool
        Whether this examination repaired it.
    """

    check: str
    path: str
    problem: str
    remedy: str
    repairable: bool = False
    repaired: bool = False

    def line(self) -> str:
        """The finding as one line: ``check: path: problem; remedy`` (or ``...; repaired``)."""
        tail = "repaired: " + self.remedy if self.repaired else self.remedy
        return f"{self.check}: {self.path}: {self.problem}; {tail}"


@dataclass(frozen=True)
class DoctorReport:
    """Everything :func:`examine` found in one state folder.

    Attributes
    ----------
    folder : str
        The state folder examined.
    findings : tuple of Finding
        One per problem, in the order of the checks.
    checked : dict
        How many items each check looked at (``runs``, ``checkpoints``, ``results``,
        ``cache_records``) and the database's ``schema_version`` (None without a database).
    """

    folder: str
    findings: tuple[Finding, ...] = ()
    checked: dict[str, Any] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        """True when nothing is left to fix: no findings, or every one was repaired."""
        return all(f.repaired for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (``--json``)."""
        return {
            "folder": self.folder, "healthy": self.healthy, "checked": dict(self.checked),
            "findings": [asdict(f) for f in self.findings],
        }


def _run_command(run_key: str, stage: str) -> str:
    """The ``alsa-bench run`` that rebuilds ``stage`` for one run key."""
    match = _RUN_KEY.match(run_key)
    if match is None:
        return f"alsa-bench run --refresh {stage}"
    return (f"alsa-bench run -d {match['dataset']} -b {match['backbone']} "
            f"--seed {match['seed']} --refresh {stage}")


# ------------------------------------------------------------------------------- database
def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.sql(
        "SELECT table_name FROM duckdb_tables() "
        "WHERE database_name = current_database() AND schema_name = 'main'"
    ).fetchall()
    return {name for (name,) in rows}


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    rows = con.sql(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND table_name = ?", params=[table],
    ).fetchall()
    return {name for (name,) in rows}


def _quoted(name: str) -> str:
    """A constant identifier of :data:`NATURAL_KEYS`, double-quoted for SQL."""
    return '"' + name.replace('"', '""') + '"'


def _schema_findings(db: Path, found: int | None, tables: set[str]) -> list[Finding]:
    if found is None:
        if not tables:
            return []
        return [Finding(
            "schema", str(db), "tables but no alsa-bench schema version marker (not written "
            "by alsa-bench, or damaged)",
            f"move it aside: mv {db} {db}.damaged, then rerun; the pipeline rebuilds it",
        )]
    if found == SCHEMA_VERSION:
        return []
    if found > SCHEMA_VERSION:
        return [Finding(
            "schema", str(db), f"schema version {found} is newer than this alsa-bench's "
            f"{SCHEMA_VERSION}", "upgrade alsa-bench, or point ALSA_BENCH_HOME at another folder",
        )]
    if all(v in MIGRATIONS for v in range(found, SCHEMA_VERSION)):
        return [Finding(
            "schema", str(db), f"schema version {found}, older than {SCHEMA_VERSION} and "
            "migratable", "the next `alsa-bench run` migrates it in place (the doctor never "
            "rewrites the database)",
        )]
    return [Finding(
        "schema", str(db), f"schema version {found} has no migration to {SCHEMA_VERSION}",
        f"move it aside: mv {db} {db}.damaged, then rerun; the pipeline rebuilds it",
    )]


def _duplicate_findings(
    con: duckdb.DuckDBPyConnection, db: Path, tables: set[str]
) -> list[Finding]:
    findings = []
    for table, keys in NATURAL_KEYS.items():
        if table not in tables or not set(keys) <= _columns(con, table):
            continue
        cols = ", ".join(_quoted(k) for k in keys)
        # identifiers come from the constant NATURAL_KEYS, never from input
        groups, extra = con.sql(
            f"SELECT count(*), coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n "
            f"FROM {_quoted(table)} GROUP BY {cols} HAVING count(*) > 1)"
        ).fetchall()[0]
        if groups:
            stage = _REBUILT_BY[table]
            findings.append(Finding(
                "duplicates", str(db), f"table {table}: {int(groups)} keys ({', '.join(keys)}) "
                f"stored more than once ({int(extra)} extra rows)",
                f"rebuild the rows with `alsa-bench run --refresh {stage}` (same suite, "
                "backbones and seeds); the doctor never rewrites the database",
            ))
    return findings


def _orphan_row_findings(
    con: duckdb.DuckDBPyConnection, db: Path, tables: set[str]
) -> list[Finding]:
    if "runs" not in tables:
        return []
    findings = []
    for table in _RUN_TABLES:
        if table not in tables:
            continue
        rows = con.sql(
            f"SELECT DISTINCT t.run_key FROM {_quoted(table)} AS t "
            "WHERE NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.run_key = t.run_key) "
            "ORDER BY 1"
        ).fetchall()
        for (run_key,) in rows:
            findings.append(Finding(
                "orphan-rows", str(db), f"table {table} holds rows of run {run_key!r}, which "
                "is missing from runs",
                f"rebuild that run with `{_run_command(run_key, 'extract')}`",
            ))
    return findings


def _open_read_only(db: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(db), read_only=True)


def _damaged(db: Path, reason: str) -> Finding:
    return Finding("database", str(db), str(corrupt_error(db, reason)).split("; ")[0],
                   f"move it aside: mv {db} {db}.damaged, then rerun `alsa-bench run` with the "
                   "same options — it creates a new database and re-ingests the results under "
                   "results/ (`alsa-bench doctor --repair` moves it to quarantine/)",
                   repairable=True)


def _database_findings(
    db: Path, checked: dict[str, Any]
) -> tuple[list[Finding], dict[str, str], set[str] | None]:
    """Findings on ``bench.duckdb``, the runs' recorded checkpoint hashes, the ingested hashes.

    The ingested hashes are None where the database could not be read (nothing is known about
    them), and empty where it has no ``ingested`` table or no file at all.
    """
    checked["schema_version"] = None
    if not db.exists():
        return [], {}, set()
    try:
        con = _open_read_only(db)
    except duckdb.Error as exc:
        reason = corruption_reason(exc)
        if reason is not None:
            return [_damaged(db, reason)], {}, None
        if is_lock_error(exc):
            return [Finding("database", str(db), "another process holds DuckDB's lock on it",
                            "wait for that process (a Prefect worker?) to finish, then rerun "
                            "the doctor")], {}, None
        raise
    try:
        scan_every_block(con)  # DuckDB checks each block's checksum as it reads it
        tables = _tables(con)
        try:
            found = read_schema_version(con)
        except SchemaVersionError as exc:
            return [Finding("schema", str(db), str(exc).split(". ")[0],
                            f"move it aside: mv {db} {db}.damaged, then rerun")], {}, None
        checked["schema_version"] = found
        findings = _schema_findings(db, found, tables)
        if found is None or found > SCHEMA_VERSION:
            return findings, {}, None  # columns unknown: nothing else is read
        findings += _duplicate_findings(con, db, tables)
        findings += _orphan_row_findings(con, db, tables)
        runs: dict[str, str] = {}
        if "runs" in tables:
            rows = con.sql("SELECT run_key, checkpoint_sha256 FROM runs").fetchall()
            checked["runs"] = len(rows)
            runs = {key: sha for key, sha in rows}
        ingested: set[str] = set()
        if "ingested" in tables and "sha256" in _columns(con, "ingested"):
            ingested = {sha for (sha,) in con.sql("SELECT sha256 FROM ingested").fetchall()}
        if "feature_files" in tables:  # feature files are named there (schema 5)
            ingested |= {sha for row in con.sql(
                "SELECT sha256, labels_sha256 FROM feature_files").fetchall() for sha in row if sha}
        return findings, runs, ingested
    except duckdb.Error as exc:
        reason = corruption_reason(exc)
        if reason is None:
            raise
        return [_damaged(db, reason)], {}, None
    finally:
        con.close()


# ---------------------------------------------------------------------------------- files
def _checkpoint_findings(
    folder: Path, recorded: dict[str, str], has_runs: bool, checked: dict[str, Any]
) -> list[Finding]:
    findings = []
    files = sorted(folder.glob("*.pt")) if folder.is_dir() else []
    checked["checkpoints"] = len(files)
    for path in files:
        run_key = path.stem
        retrain = f"delete it and rerun: `{_run_command(run_key, 'train')}` retrains it"
        try:
            with zipfile.ZipFile(path) as archive:
                bad_member = archive.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            findings.append(Finding("checkpoint", str(path), f"not a readable checkpoint ({exc})",
                                    retrain, repairable=True))
            continue
        if bad_member is not None:
            findings.append(Finding("checkpoint", str(path), f"member {bad_member} fails its CRC",
                                    retrain, repairable=True))
            continue
        want = recorded.get(run_key)
        if want:
            got = file_sha256(path)
            if got != want:
                findings.append(Finding(
                    "checkpoint", str(path), f"SHA-256 {got[:12]}… differs from the "
                    f"{want[:12]}… that runs recorded for {run_key}", retrain, repairable=True,
                ))
        elif has_runs and run_key not in recorded:
            findings.append(Finding(
                "orphan-file", str(path), f"checkpoint of run {run_key!r}, which is not in runs",
                f"`{_run_command(run_key, 'extract')}` uses it; or delete it if the run is gone",
            ))
    return findings


def _result_findings(
    folder: Path, ingested: set[str] | None, checked: dict[str, Any]
) -> list[Finding]:
    findings = []
    files = sorted(folder.glob("*/*.parquet")) if folder.is_dir() else []
    checked["results"] = len(files)
    features = sorted(folder.glob("features/*.npy")) if folder.is_dir() else []
    if features:
        checked["feature_files"] = len(features)
    files += features
    for path in files:
        if path.name.startswith("."):
            continue  # a temporary file: the temp-file check reports it
        name = path.stem
        got = file_sha256(path)
        if not _SHA256_NAME.match(name) or got != name:
            findings.append(Finding(
                "result-hash", str(path), f"content hashes to {got[:12]}…, not to its name",
                "delete it and rerun: the stage recomputes it", repairable=True,
            ))
        elif ingested is not None and name not in ingested:
            findings.append(Finding(
                "orphan-file", str(path), f"{path.parent.name} result never ingested into the "
                "database", "the next `alsa-bench run` of its stage ingests it; or delete it",
            ))
    return findings


def _walk(root: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    for top, dirs, files in os.walk(root):
        yield Path(top), dirs, files


def _leftover_findings(root: Path) -> list[Finding]:
    findings = []
    for top, dirs, files in _walk(root):
        for name in sorted(dirs):
            if name.startswith(".staging-"):
                findings.append(Finding(
                    "staging", str(top / name), "folder of an interrupted fetch or staging",
                    "delete it; the next fetch stages the dataset again", repairable=True,
                ))
        dirs[:] = [d for d in dirs if not d.startswith(".staging-")
                   and not (top == root and d == QUARANTINE)]  # quarantined files are kept
        for name in sorted(files):
            if _is_temp_name(name):
                findings.append(Finding(
                    "temp-file", str(top / name), "temporary file of a write that never "
                    "finished (the process was killed)", "delete it", repairable=True,
                ))
    return findings


def _cache_findings(folder: Path, checked: dict[str, Any]) -> list[Finding]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")) \
        if folder.is_dir() else []
    checked["cache_records"] = len(files)
    if not files:
        return []
    from prefect._internal.result_records import ResultRecord

    findings = []
    for path in files:
        try:
            ResultRecord.deserialize(path.read_bytes())
        except Exception as exc:  # any failure means Prefect could not use the record either
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            findings.append(Finding(
                "cache-record", str(path), f"Prefect cache record does not deserialize "
                f"({type(exc).__name__}: {first[:120]})",
                "delete it; the stage it cached runs again on the next `alsa-bench run`",
                repairable=True,
            ))
    return findings


# ---------------------------------------------------------------------------------- repair
def quarantine(path: str | os.PathLike[str], state: str | os.PathLike[str], reason: str) -> Path:
    """Move a damaged file out of the way, into ``<state>/quarantine/``, and log one line.

    Nothing is deleted: the file keeps its bytes for inspection, under a name that says where
    it came from (its path below ``state`` with ``/`` turned into ``__``, or its own name for a
    file outside ``state``) and when (a UTC time stamp), so two damaged copies never collide.
    A file that is already gone is not an error.

    Parameters
    ----------
    path : str or path-like
        The damaged file.
    state : str or path-like
        The state folder (:func:`storage.paths.state_dir`).
    reason : str
        What is wrong with it, for the log line.

    Returns
    -------
    Path
        Where the file now lies (or would lie, had it still existed).
    """
    src, root = Path(path), Path(state)
    try:
        name = "__".join(src.resolve().relative_to(root.resolve()).parts)
    except ValueError:  # outside the state folder (a results root elsewhere)
        name = src.name
    folder = root / QUARANTINE
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = folder / f"{stamp}.{name}"
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{stamp}-{n}.{name}"
    try:
        os.replace(src, target)
    except FileNotFoundError:
        return target
    except OSError:  # another file system: copy, then remove
        shutil.copy2(src, target)
        src.unlink(missing_ok=True)
    logger.warning("quarantined %s (%s) as %s", src, reason, target)
    return target


def _is_temp_name(name: str) -> bool:
    return name.startswith(".") and (name.endswith(".tmp") or name.startswith(".tmp-"))


def sweep_temp_files(
    state: str | os.PathLike[str], extra: tuple[str | os.PathLike[str], ...] = ()
) -> list[Path]:
    """Delete the temporary files that killed writers left in a state folder.

    Writers (:func:`storage.results._publish`, :func:`tasks.data.files.atomic_target`) write
    ``.tmp-*`` / ``.<name>.*.tmp`` files and rename them when done; a writer killed mid-write
    (SIGKILL, a Dask worker that died) leaves one behind. Only call this while holding the
    state folder's lock (:func:`storage.lock.state_lock`) and before any task of the run
    starts: the lock guarantees that no live writer owns such a file then. The ``quarantine``
    folder is left alone.

    Parameters
    ----------
    state : str or path-like
        The state folder.
    extra : tuple of str or path-like, default ()
        Further folders to sweep (a results root outside the state folder), only their
        ``<kind>/`` sub-folders one level deep.

    Returns
    -------
    list of Path
        The files deleted.
    """
    removed: list[Path] = []
    root = Path(state)
    candidates: list[Path] = []
    if root.is_dir():
        for top, dirs, files in _walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".staging-")
                       and not (top == root and d == QUARANTINE)]
            candidates.extend(top / name for name in files if _is_temp_name(name))
    for folder in extra:
        base = Path(folder)
        if base.is_dir():
            candidates.extend(p for p in base.glob("*/.*") if _is_temp_name(p.name))
    for path in sorted(set(candidates)):
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
        logger.info("removed %s, the temporary file of a write that was killed", path)
    return removed


def sweep_cache_records(
    folder: str | os.PathLike[str], state: str | os.PathLike[str]
) -> list[Path]:
    """Quarantine the Prefect cache records in ``folder`` that do not deserialize.

    A garbled record whose stage is called again is met and replaced by the stage itself; one
    whose key is never asked again (its upstream result changed) would stay forever. Same
    precondition as :func:`sweep_temp_files`: hold the state lock, run before any task.

    Parameters
    ----------
    folder : str or path-like
        Prefect's result folder (``<state>/prefect-results``).
    state : str or path-like
        The state folder (the quarantine lies in it).

    Returns
    -------
    list of Path
        The records moved.
    """
    bad = _cache_findings(Path(folder), {})
    for finding in bad:
        quarantine(finding.path, state, finding.problem)
    return [Path(f.path) for f in bad]


def _repair(finding: Finding, root: Path) -> Finding:
    path = Path(finding.path)
    if finding.check == "staging":
        shutil.rmtree(path, ignore_errors=False)
    elif finding.check == "temp-file":
        path.unlink(missing_ok=True)
    elif finding.check == "database":
        for part in (path, path.with_name(path.name + ".wal")):
            if part.exists():
                quarantine(part, root, finding.problem)
    elif finding.check != "stale-lock":  # the lock holder (the doctor) clears that record
        quarantine(path, root, finding.problem)
    return replace(finding, repaired=True)


def examine(
    folder: str | os.PathLike[str],
    *,
    repair: bool = False,
    stale_lock: LockRecord | None = None,
) -> DoctorReport:
    """Check state folder ``folder``; with ``repair``, fix what the pipeline can recompute.

    The caller should hold the folder's state lock (:func:`storage.lock.state_lock`), so that
    no writer is running while files are judged or deleted; the stale record that taking the
    lock found is passed in as ``stale_lock``.

    Parameters
    ----------
    folder : str or path-like
        The state folder.
    repair : bool, default False
        Delete temporary files, staging folders, corrupt cache records, damaged checkpoints
        and damaged Parquet results; mark a stale lock record cleared. Never touches the
        database.
    stale_lock : LockRecord, optional
        The stale owner record found when the lock was taken.

    Returns
    -------
    DoctorReport

    Raises
    ------
    ValueError
        If ``folder`` exists and is not a directory.
    """
    root = Path(folder)
    if root.exists() and not root.is_dir():
        raise ValueError(f"folder must be a state folder (a directory); got the file {root}.")
    checked: dict[str, Any] = {}
    findings: list[Finding] = []
    if stale_lock is not None:
        findings.append(Finding(
            "stale-lock", str(root / ".lock"), f"owner record of {stale_lock.describe()}, "
            "which died without releasing the folder", "harmless (the lock itself was "
            "released); the next command or `alsa-bench doctor --repair` clears it",
            repairable=True,
        ))
    db_findings, runs, ingested = _database_findings(root / "bench.duckdb", checked)
    findings += db_findings
    findings += _checkpoint_findings(root / "checkpoints", runs, "runs" in checked, checked)
    findings += _result_findings(root / "results", ingested, checked)
    findings += _leftover_findings(root) if root.is_dir() else []
    findings += _cache_findings(root / "prefect-results", checked)
    held = root / QUARANTINE
    checked["quarantined"] = sum(1 for p in held.iterdir() if p.is_file()) if held.is_dir() else 0
    if repair:
        findings = [_repair(f, root) if f.repairable else f for f in findings]
    return DoctorReport(folder=str(root), findings=tuple(findings), checked=checked)

