"""What an online dataset's loader does when its files are not on this machine.

Online datasets (``DatasetSpec.online``) are downloaded once by ``alsa-bench fetch <name>``
(:mod:`tasks.data.fetch`) into the state folder's data root; nothing downloads at run time. A loader
checks the exact files it will read with :func:`require_files` before reading any of them, so a
run on a machine without the data stops at once with one line: what is missing, where it looked,
and the command that fetches it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tasks.data.errors import DatasetUnavailableError

__all__ = ["fetch_hint", "require_files"]


def fetch_hint(dataset: str) -> str:
    """The command that downloads ``dataset``: ``alsa-bench fetch <dataset>``."""
    return f"alsa-bench fetch {dataset}"


def require_files(dataset: str, root: Path | str, paths: Iterable[Path | str]) -> list[Path]:
    """Check that every file (or folder) a loader reads exists; say what to do if not.

    Parameters
    ----------
    dataset : str
        Dataset key, for the message and the fetch command.
    root : Path or str
        The data root the loader looked in.
    paths : iterable of Path or str
        Files or folders the loader needs, absolute or relative to ``root``.

    Returns
    -------
    list of Path
        The absolute paths, in the order given.

    Raises
    ------
    DatasetUnavailableError
        One line naming the first missing path (and how many more are missing), the data root
        and ``alsa-bench fetch <dataset>``.
    """
    base = Path(root)
    wanted = [p if Path(p).is_absolute() else base / p for p in map(Path, paths)]
    missing = [p for p in wanted if not p.exists()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DatasetUnavailableError(
            f"dataset {dataset!r} is not on this machine: missing {str(missing[0])!r}{more} "
            f"under the data root {str(base)!r}; download it once with "
            f"`{fetch_hint(dataset)}` (needs the internet), or point ALSA_BENCH_HOME at a "
            f"state folder that has it."
        )
    return wanted
