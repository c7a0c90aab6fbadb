"""Content hashes of files: one chunked SHA-256 for the whole code base.

Result files are named by it (:mod:`storage.results`), ``alsa-bench doctor`` checks files
against it (:mod:`storage.doctor`), and checkpoints, staged dataset files and pretrained weights
are verified with it (:mod:`tasks`). The lowest layer, so that storage and tasks can both use it.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
>>> _ = p.write_bytes(b"abc")
>>> file_sha256(p)[:16]
'ba7816bf8f01cfea'
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Final

__all__ = ["CHUNK", "file_sha256", "update_from_file"]

#: Bytes read at a time (1 MiB): memory stays flat for files of any size.
CHUNK: Final[int] = 1 << 20


def update_from_file(h: Any, path: str | Path, *, chunk: int = CHUNK) -> Any:
    """Feed a file's bytes to the hash object ``h`` in ``chunk``-byte reads; return ``h``."""
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            h.update(block)
    return h


def file_sha256(path: str | Path, *, chunk: int = CHUNK) -> str:
    """Lower-case hex SHA-256 of a file's bytes, read in ``chunk``-byte pieces.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist (``OSError`` for other read failures).
    """
    return str(update_from_file(hashlib.sha256(), path, chunk=chunk).hexdigest())
