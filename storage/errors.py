"""Exceptions raised by :mod:`storage`.

Every storage failure a caller may want to handle on its own derives from :class:`StorageError`.
"""

from __future__ import annotations


class StorageError(RuntimeError):
    """Base class of the errors raised by the DuckDB layer."""


class StorageLockedError(StorageError):
    """Another process holds the DuckDB file's lock and kept it through every retry.

    DuckDB lets one process write a database file at a time (or many processes read it while
    nobody writes). The message names the file and the process DuckDB reported as the holder.
    """


class SchemaVersionError(StorageError):
    """The database file was written by a schema version this code does not know how to read."""


class NotFoundError(StorageError, LookupError):
    """A run, split or anchor set asked for is not stored.

    Subclasses :class:`LookupError` too, so ``except LookupError`` keeps working.
    """


class StorageCorruptError(StorageError):
    """The DuckDB file exists but is not a readable DuckDB database (garbage, truncated, empty).

    The message names the file and the remedy (move it aside and rerun; the pipeline rebuilds it
    from cached checkpoints and results). alsa-bench never deletes or overwrites such a file.
    """


class StateBusyError(StorageError):
    """Another process holds the state folder's lock (``<state>/.lock``).

    The message is one line naming the folder, the holder's pid, command and start time, and
    what to do: wait for it (``--wait SECONDS``) or use another ``ALSA_BENCH_HOME``.
    """
