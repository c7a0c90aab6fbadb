"""Tables and the ``report_rows`` view of the benchmark's DuckDB file.

::

    schema_meta(key PK, value)                      -- holds 'schema_version'
    runs(run_key PK, suite, dataset, backbone, seed, n_classes, checkpoint_sha256,
         code_version, train_seconds, created_at, compute_mode, compute_settings,
         cpu_model, cpu_flags)
    splits(run_key, split, role 'val'|'target', shift_family, shift, severity NULL,
           n_samples, true_accuracy, PK(run_key, split))
    logits(run_key, split, sample_index, label, logits FLOAT[])   -- no PK: replace-partition writes
    estimates(run_key, split, method, params_json, estimated_accuracy, true_accuracy, abs_error,
              fit_seconds, estimate_seconds, diagnostics_json, code_version, created_at,
              interval_low, interval_high, interval_level, per_class_json,
              PK(run_key, split, method))
    anchors(run_key, method, anchor_index, position FLOAT[], peak, variance,
            PK(run_key, method, anchor_index))
    monitor_chunks(chunk_key PK, stream, chunking, chunk_name, source, period_start, period_end,
                   n_rows, n_classes, content_sha256, first_seen_at, superseded_by,
                   realized_accuracy, n_labelled, labels_source, labelled_at)
    monitor_estimates(chunk_key, estimator_key, method, reference_sha256, params_json,
                      calibration_sha256, estimated_accuracy, shift_low, shift_high,
                      interval_low, interval_high, interval_level, reference_accuracy,
                      signals_json, diagnostics_json, alert, alerts_json, realized_accuracy,
                      run_id, estimate_seconds, created_at, PK(chunk_key, estimator_key))
    monitor_history  -- view: monitor_estimates joined with monitor_chunks
    report_rows  -- view: one row per (target split, method), with the run's suite, dataset,
                    backbone and seed

Accuracies are fractions in [0, 1]. Timestamps are UTC without a time zone. Creation is
idempotent; the schema version is recorded in ``schema_meta`` and a file written by a newer
version is refused with :class:`~storage.errors.SchemaVersionError`, as is a file that holds
tables but no version marker (not written by alsa-bench, or damaged): it is never guessed at.

Versions and migrations (:data:`MIGRATIONS`, applied in order by :func:`ensure_schema` on a
writable connection; a read-only connection to an older file is refused with a message saying
to open it writable once):

* 1: the first schema.
* 2 (issue 11): ``estimates`` gains ``interval_low``, ``interval_high``, ``interval_level``
  (each estimate's sampling interval; NULL on rows written before) and ``per_class_json``
  (``{"estimated": [...], "count": [...]}`` per predicted class, or NULL);
  ``report_rows`` exposes the interval columns.
* 3 (issue 14): ``ingested`` records every content-addressed Parquet result file
  (:mod:`storage.results`) the flow process has ingested: ``sha256`` (the file's name), ``kind``
  (logits, estimates, anchors), ``run_key`` and ``ingested_at``; ingesting a file again is a
  no-op.
* 4 (issue 22): ``estimates`` gains ``shift_low`` and ``shift_high`` (the shift-aware band).
* 5 (issue 25): ``feature_files`` names each run's penultimate-feature files
  (:mod:`storage.features`): ``run_key``, ``split``, ``role`` (val, target, train),
  ``sha256`` (the ``.npy`` file's name), ``labels_sha256`` (the training subsample's labels),
  ``n_rows`` and ``dim``.
* 6 (issue 33): the history of ``alsa-bench monitor`` (:mod:`storage.monitor`):
  ``monitor_chunks`` (one row per chunk of production logits), ``monitor_estimates`` (one row
  per chunk and estimator) and the view ``monitor_history`` joining them; ``docs/MONITOR.md``
  describes every column for BI tools.
* 7 (issue 35): ``runs`` gains ``compute_mode`` (``reproducible`` or ``fast``),
  ``compute_settings`` (JSON: the kernels and switches the training process computed with),
  ``cpu_model`` and ``cpu_flags`` (the training host's CPU); NULL on rows written before.

``tests/storage/fixtures/bench_v1.duckdb`` is a database written with schema 1 (its generator,
``make_v1_fixture.py``, holds the version-1 DDL verbatim); the tests migrate a copy to
:data:`SCHEMA_VERSION` and read its rows back, so every future migration starts from a real
first-release file.
"""

from __future__ import annotations

import duckdb

from .errors import SchemaVersionError

SCHEMA_VERSION = 7
"""Version of the tables below; bump it (and add a migration) when a table changes."""

TABLES: tuple[str, ...] = (
    "schema_meta", "runs", "splits", "logits", "estimates", "anchors", "ingested",
    "feature_files", "monitor_chunks", "monitor_estimates",
)
"""Every table the schema creates, in creation order."""

VIEWS: tuple[str, ...] = ("report_rows", "monitor_history")
"""Every view the schema creates."""

# The monitor's history (schema 6, :mod:`storage.monitor`; every column in docs/MONITOR.md).
_MONITOR_CHUNKS_DDL = """
    CREATE TABLE IF NOT EXISTS monitor_chunks (
        chunk_key         VARCHAR   PRIMARY KEY,
        stream            VARCHAR   NOT NULL,
        chunking          VARCHAR   NOT NULL,
        chunk_name        VARCHAR   NOT NULL,
        source            VARCHAR   NOT NULL,
        period_start      TIMESTAMP,
        period_end        TIMESTAMP,
        n_rows            BIGINT    NOT NULL,
        n_classes         INTEGER   NOT NULL,
        content_sha256    VARCHAR   NOT NULL,
        first_seen_at     TIMESTAMP NOT NULL,
        superseded_by     VARCHAR,
        realized_accuracy DOUBLE,
        n_labelled        BIGINT,
        labels_source     VARCHAR,
        labelled_at       TIMESTAMP
    )
"""

_MONITOR_ESTIMATES_DDL = """
    CREATE TABLE IF NOT EXISTS monitor_estimates (
        chunk_key          VARCHAR NOT NULL,
        estimator_key      VARCHAR NOT NULL,
        method             VARCHAR NOT NULL,
        reference_sha256   VARCHAR NOT NULL,
        params_json        VARCHAR NOT NULL,
        calibration_sha256 VARCHAR,
        estimated_accuracy DOUBLE,
        shift_low          DOUBLE,
        shift_high         DOUBLE,
        interval_low       DOUBLE,
        interval_high      DOUBLE,
        interval_level     DOUBLE,
        reference_accuracy DOUBLE,
        signals_json       VARCHAR,
        diagnostics_json   VARCHAR,
        alert              BOOLEAN NOT NULL,
        alerts_json        VARCHAR,
        realized_accuracy  DOUBLE,
        run_id             VARCHAR,
        estimate_seconds   DOUBLE,
        created_at         TIMESTAMP NOT NULL,
        PRIMARY KEY (chunk_key, estimator_key)
    )
"""

_MONITOR_HISTORY_DDL = """
    CREATE OR REPLACE VIEW monitor_history AS
    SELECT
        c.stream,
        c.chunking,
        c.chunk_name,
        c.source,
        c.period_start,
        c.period_end,
        c.n_rows,
        c.superseded_by IS NULL AS is_current,
        e.method,
        e.estimated_accuracy,
        e.shift_low,
        e.shift_high,
        e.interval_low,
        e.interval_high,
        e.interval_level,
        e.reference_accuracy,
        e.alert,
        e.alerts_json,
        e.realized_accuracy,
        c.n_labelled,
        e.realized_accuracy BETWEEN e.shift_low AND e.shift_high AS band_covers_realized,
        e.realized_accuracy - e.estimated_accuracy AS realized_minus_estimate,
        e.signals_json,
        e.chunk_key,
        e.estimator_key,
        e.reference_sha256,
        e.calibration_sha256,
        e.params_json,
        c.content_sha256,
        c.superseded_by,
        e.run_id,
        e.created_at AS estimated_at,
        c.first_seen_at
    FROM monitor_estimates AS e
    JOIN monitor_chunks AS c ON c.chunk_key = e.chunk_key
"""

_DDL: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS schema_meta (
        key   VARCHAR PRIMARY KEY,
        value VARCHAR NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS runs (
        run_key           VARCHAR PRIMARY KEY,
        suite             VARCHAR NOT NULL,
        dataset           VARCHAR NOT NULL,
        backbone          VARCHAR NOT NULL,
        seed              INTEGER NOT NULL,
        n_classes         INTEGER NOT NULL,
        checkpoint_sha256 VARCHAR,
        code_version      VARCHAR,
        train_seconds     DOUBLE,
        created_at        TIMESTAMP,
        compute_mode      VARCHAR,
        compute_settings  VARCHAR,
        cpu_model         VARCHAR,
        cpu_flags         VARCHAR
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS splits (
        run_key       VARCHAR NOT NULL,
        split         VARCHAR NOT NULL,
        role          VARCHAR NOT NULL CHECK (role IN ('val', 'target')),
        shift_family  VARCHAR,
        shift         VARCHAR,
        severity      INTEGER,
        n_samples     INTEGER NOT NULL,
        true_accuracy DOUBLE,
        PRIMARY KEY (run_key, split)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS logits (
        run_key      VARCHAR NOT NULL,
        split        VARCHAR NOT NULL,
        sample_index BIGINT  NOT NULL,
        label        INTEGER NOT NULL,
        logits       FLOAT[] NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS estimates (
        run_key            VARCHAR NOT NULL,
        split              VARCHAR NOT NULL,
        method             VARCHAR NOT NULL,
        params_json        VARCHAR,
        estimated_accuracy DOUBLE,
        true_accuracy      DOUBLE,
        abs_error          DOUBLE,
        fit_seconds        DOUBLE,
        estimate_seconds   DOUBLE,
        diagnostics_json   VARCHAR,
        code_version       VARCHAR,
        created_at         TIMESTAMP,
        interval_low       DOUBLE,
        interval_high      DOUBLE,
        interval_level     DOUBLE,
        per_class_json     VARCHAR,
        shift_low          DOUBLE,
        shift_high         DOUBLE,
        PRIMARY KEY (run_key, split, method)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS anchors (
        run_key      VARCHAR NOT NULL,
        method       VARCHAR NOT NULL,
        anchor_index INTEGER NOT NULL,
        position     FLOAT[] NOT NULL,
        peak         DOUBLE,
        variance     DOUBLE,
        PRIMARY KEY (run_key, method, anchor_index)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS ingested (
        sha256      VARCHAR   NOT NULL,
        kind        VARCHAR   NOT NULL,
        run_key     VARCHAR   NOT NULL,
        ingested_at TIMESTAMP NOT NULL,
        PRIMARY KEY (sha256)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS feature_files (
        run_key       VARCHAR NOT NULL,
        split         VARCHAR NOT NULL,
        role          VARCHAR NOT NULL,
        sha256        VARCHAR NOT NULL,
        labels_sha256 VARCHAR,
        n_rows        BIGINT  NOT NULL,
        dim           INTEGER NOT NULL,
        PRIMARY KEY (run_key, split)
    )
    """,
    _MONITOR_CHUNKS_DDL,
    _MONITOR_ESTIMATES_DDL,
    _MONITOR_HISTORY_DDL,
    """
    CREATE OR REPLACE VIEW report_rows AS
    SELECT
        r.suite,
        r.dataset,
        r.backbone,
        r.seed,
        s.shift_family,
        s.shift,
        s.severity,
        s.n_samples AS n_target,
        e.method,
        e.estimated_accuracy,
        e.true_accuracy,
        e.abs_error,
        e.run_key,
        e.split,
        e.interval_low,
        e.interval_high,
        e.interval_level,
        e.shift_low,
        e.shift_high
    FROM estimates AS e
    JOIN splits AS s ON s.run_key = e.run_key AND s.split = e.split
    JOIN runs AS r ON r.run_key = e.run_key
    WHERE s.role = 'target'
    """,
)


#: Statements that bring a database from version ``v`` to ``v + 1``, by ``v``. The view is
#: recreated afterwards by the DDL above (``CREATE OR REPLACE``).
_FEATURE_FILES_DDL = _DDL[7]

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE estimates ADD COLUMN IF NOT EXISTS interval_low DOUBLE",
        "ALTER TABLE estimates ADD COLUMN IF NOT EXISTS interval_high DOUBLE",
        "ALTER TABLE estimates ADD COLUMN IF NOT EXISTS interval_level DOUBLE",
        "ALTER TABLE estimates ADD COLUMN IF NOT EXISTS per_class_json VARCHAR",
    ),
    2: (
        """
    CREATE TABLE IF NOT EXISTS ingested (
        sha256      VARCHAR   NOT NULL,
        kind        VARCHAR   NOT NULL,
        run_key     VARCHAR   NOT NULL,
        ingested_at TIMESTAMP NOT NULL,
        PRIMARY KEY (sha256)
    )
    """,
    ),
    3: (
        "ALTER TABLE estimates ADD COLUMN IF NOT EXISTS shift_low DOUBLE",
        "ALTER TABLE estimates ADD COLUMN IF NOT EXISTS shift_high DOUBLE",
    ),
    4: (_FEATURE_FILES_DDL,),
    5: (_MONITOR_CHUNKS_DDL, _MONITOR_ESTIMATES_DDL),
    6: (
        "ALTER TABLE IF EXISTS runs ADD COLUMN IF NOT EXISTS compute_mode VARCHAR",
        "ALTER TABLE IF EXISTS runs ADD COLUMN IF NOT EXISTS compute_settings VARCHAR",
        "ALTER TABLE IF EXISTS runs ADD COLUMN IF NOT EXISTS cpu_model VARCHAR",
        "ALTER TABLE IF EXISTS runs ADD COLUMN IF NOT EXISTS cpu_flags VARCHAR",
    ),
}


def read_schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """Schema version recorded in the database, or None where none is recorded yet.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection (read-only is fine).

    Returns
    -------
    int or None
        The recorded version; None for a file without a ``schema_meta`` table or version row.

    Raises
    ------
    SchemaVersionError
        If the recorded value is not an integer.
    """
    exists = con.sql(
        "SELECT count(*) FROM duckdb_tables() "
        "WHERE database_name = current_database() AND schema_name = 'main' AND table_name = ?",
        params=["schema_meta"],
    ).fetchall()[0][0]
    if not exists:
        return None
    rows = con.sql(
        "SELECT value FROM schema_meta WHERE key = ?", params=["schema_version"]
    ).fetchall()
    if not rows:
        return None
    value = rows[0][0]
    try:
        return int(value)
    except (TypeError, ValueError):
        raise SchemaVersionError(
            f"schema_meta.schema_version must be an integer; got {value!r}. "
            "The database file is not one alsa-bench wrote, or it is damaged."
        ) from None


def check_schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """Refuse a database written by a newer schema; return the recorded version.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection (read-only is fine).

    Returns
    -------
    int or None
        The recorded version, or None where the file has no schema yet.

    Raises
    ------
    SchemaVersionError
        If the recorded version is newer or older than :data:`SCHEMA_VERSION`, or the file
        holds tables but no version marker.
    """
    return _check_version(con, migrate=False)


def _check_version(con: duckdb.DuckDBPyConnection, migrate: bool) -> int | None:
    found = read_schema_version(con)
    if found is None:
        foreign = sorted(_existing_objects(con))
        if foreign:
            raise SchemaVersionError(
                "The database holds tables or views "
                f"({', '.join(foreign[:6])}{', ...' if len(foreign) > 6 else ''}) but no "
                "alsa-bench schema version marker (schema_meta.schema_version); it was not "
                "written by alsa-bench, or it is damaged, and is not read. Move it aside "
                "(mv bench.duckdb bench.duckdb.damaged) and rerun, or point ALSA_BENCH_HOME at "
                "another folder."
            )
        return None
    if found == SCHEMA_VERSION:
        return found
    if found < SCHEMA_VERSION and all(v in MIGRATIONS for v in range(found, SCHEMA_VERSION)):
        if migrate:
            return found
        raise SchemaVersionError(
            f"The database has schema version {found}; this alsa-bench expects {SCHEMA_VERSION}. "
            "It migrates the file when it opens it writable: run any pipeline stage once, "
            "or call storage.db.connect(path) without read_only=True."
        )
    if found > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"The database was written with schema version {found}, newer than this "
            f"alsa-bench's version {SCHEMA_VERSION}. Upgrade alsa-bench, or point "
            "ALSA_BENCH_HOME at another folder."
        )
    raise SchemaVersionError(
        f"The database has schema version {found}; this alsa-bench expects {SCHEMA_VERSION} and "
        "has no migration from it. Move the file aside (its state folder) and re-run."
    )


def _existing_objects(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.sql(
        "SELECT table_name FROM duckdb_tables() "
        "WHERE database_name = current_database() AND schema_name = 'main' "
        "UNION ALL SELECT view_name FROM duckdb_views() "
        "WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal"
    ).fetchall()
    return {name for (name,) in rows}


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table and view where missing and record :data:`SCHEMA_VERSION`.

    Idempotent and cheap on a database that is already current (a version read and a catalog
    lookup). Runs in one transaction, so a crash never leaves half a schema.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        A writable connection with no transaction open.

    Raises
    ------
    SchemaVersionError
        If the file was written by a newer schema version, an older one without a
        migration, or holds tables but no version marker.
    """
    found = _check_version(con, migrate=True)
    if found == SCHEMA_VERSION and set(TABLES + VIEWS) <= _existing_objects(con):
        return
    con.execute("BEGIN TRANSACTION")
    try:
        if found is not None and found < SCHEMA_VERSION:
            for version in range(found, SCHEMA_VERSION):
                for statement in MIGRATIONS[version]:
                    con.execute(statement)
        for statement in _DDL:
            con.execute(statement)
        con.execute(
            "INSERT OR REPLACE INTO schema_meta (key, value) VALUES (?, ?)",
            ["schema_version", str(SCHEMA_VERSION)],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
