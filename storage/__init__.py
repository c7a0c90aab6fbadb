"""DuckDB storage of the benchmark: runs, splits, logits, estimates and anchors.

Plain functions that take an open connection; :func:`connect` opens one (one writer at a time,
lock errors retried then reported as :class:`StorageLockedError`)::

    from storage import connect, read_val, read_target_logits

    with connect() as con:
        val_logits, val_labels = read_val(con, "fmnist.lenet.s0")
        target_logits = read_target_logits(con, "fmnist.lenet.s0", "gaussian_noise-3")

Tables and the ``report_rows`` view are described in :mod:`storage.schema`; where the file
lives in :mod:`storage.paths`.
"""

from .anchors import read_anchors, write_anchors
from .db import checkpoint, connect, is_lock_error, transaction
from .errors import NotFoundError, SchemaVersionError, StorageError, StorageLockedError
from .estimates import (
    EstimateRow,
    estimates_digest,
    has_estimates,
    read_estimates,
    read_report_rows,
    write_estimates,
)
from .logits import (
    ROLES,
    SplitInfo,
    list_splits,
    read_target_labels,
    read_target_logits,
    read_val,
    run_digest,
    write_split,
)
from .paths import db_path, state_dir
from .runs import RunInfo, get_run, list_runs, upsert_run
from .schema import SCHEMA_VERSION, ensure_schema, read_schema_version

__all__ = [
    "ROLES",
    "SCHEMA_VERSION",
    "EstimateRow",
    "NotFoundError",
    "RunInfo",
    "SchemaVersionError",
    "SplitInfo",
    "StorageError",
    "StorageLockedError",
    "checkpoint",
    "connect",
    "db_path",
    "ensure_schema",
    "estimates_digest",
    "get_run",
    "has_estimates",
    "is_lock_error",
    "list_runs",
    "list_splits",
    "read_anchors",
    "read_estimates",
    "read_report_rows",
    "read_schema_version",
    "read_target_labels",
    "read_target_logits",
    "read_val",
    "run_digest",
    "state_dir",
    "transaction",
    "upsert_run",
    "write_anchors",
    "write_estimates",
    "write_split",
]
