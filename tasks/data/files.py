"""File helpers shared by the data stages: atomic writes and content digests.

Every file the data side of the pipeline writes (staged raw files, cached target splits,
checkpoints) goes through :func:`atomic_target`: the bytes are written to a temporary file in the
destination folder and renamed over the final name only once complete, so a crash or a
concurrent reader never sees a half-written file. ``os.replace`` is atomic on POSIX and Windows
when both names are on the same file system, which a sibling temporary file guarantees.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from storage.hashing import update_from_file

@contextmanager
def atomic_target(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; rename it to ``final`` when the block succeeds.

    Parameters
    ----------
    final : Path
        Destination file. Its folder is created if missing.

    Yields
    ------
    Path
        A fresh, empty temporary file in the same folder. Write to it (by name) inside the block.

    Notes
    -----
    If the block raises, the temporary file is removed and ``final`` is left untouched.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def files_digest(paths: Iterable[Path]) -> str:
    """SHA-256 over the names and bytes of several files, in name order.

    Parameters
    ----------
    paths : iterable of Path
        Files to hash; their base names take part in the digest, their folders do not, so the
        same files staged under another root give the same digest.

    Returns
    -------
    str
        Lower-case hex digest.
    """
    h = hashlib.sha256()
    for path in sorted((Path(p) for p in paths), key=lambda p: (p.name, str(p))):
        h.update(path.name.encode() + b"\0")
        update_from_file(h, path)
        h.update(b"\0")
    return h.hexdigest()
