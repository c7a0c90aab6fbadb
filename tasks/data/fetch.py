"""``alsa-bench fetch``: download an online dataset once, verify it, and unpack it safely.

Every online dataset declares what it downloads as ``DatasetSpec.sources``, a tuple of
:class:`~tasks.data.spec.RemoteFile`. :func:`fetch_dataset` handles each one in four steps,
under the data root ``<root>`` (default ``$ALSA_BENCH_HOME/data``):

1. **Download** to ``<root>/downloads/<filename>.part`` with :mod:`urllib.request`
   (``http``, ``https``, ``file``). An existing ``.part`` is resumed with ``Range: bytes=N-``
   when the server answers ``206 Partial Content`` for exactly that offset, and restarted from
   zero when it answers ``200``; a ``416`` (nothing after the offset) means the ``.part`` is
   complete or foreign, which the checksum decides. A transfer that stops early keeps the
   ``.part`` for the next call and says so; a file longer than the published ``size`` is
   refused and deleted. An advisory lock (``downloads/.<filename>.lock``) keeps two fetches of
   the same file apart.
2. **Verify** every pinned checksum (SHA-256 and/or MD5) of the complete file *before* it is
   renamed to ``<root>/downloads/<filename>``; a mismatch deletes it and raises
   :class:`~tasks.data.errors.ChecksumError`.
3. **Extract** archives (``.tar``, ``.tar.gz``, ``.tgz``, ``.tar.xz``, ``.zip``) into a fresh
   staging folder ``<root>/.staging-<random>``. Members with an absolute path, a ``..``
   component, a link leaving the archive, or a device/FIFO are refused, naming the member:
   tar members are checked by :func:`check_tar_member` and then by
   :func:`tarfile.data_filter` (the filter that ``filter="data"`` names), zip members by
   :func:`check_zip_member`. A truncated or corrupt archive is reported as such.
4. **Install**: only once everything is out, the top-level entries of the staging folder are
   moved into ``<root>/<dest>`` with :func:`os.replace` (atomic renames on one file system), and
   the completion marker ``<root>/<dest>/.fetched-<filename>.json`` (sha256, url, time) is
   written last. A file with ``extract=False`` is moved to ``<root>/<dest>/<filename>`` the same
   way. On any failure the staging folder is removed, so a half-extracted dataset never looks
   complete.

A dataset module may adjust these steps with three optional names (ogbn-arxiv uses all three):

* ``fetch_sources()`` returns the ``RemoteFile`` tuple to fetch, resolved when the fetch runs
  (ogbn-arxiv asks ogb's master table for the release URL) instead of ``DatasetSpec.sources``;
* ``ARCHIVE_FOLDERS`` maps an archive's file name to the single top-level folder the release
  packs everything into; that folder's *contents* are installed into ``<root>/<dest>`` (ogb's
  ``arxiv.zip`` holds ``arxiv/``, which ogb itself renames to ``ogbn_arxiv/``);
* ``verify_fetched(root)`` runs once every source is installed: the dataset's own safe reader
  checks the files (it raises ValueError or OSError); on failure the completion markers are
  removed and :class:`FetchError` says what was wrong.

A download shows a byte progress bar (:func:`tasks.runtime.progress.progress_bar`) on a terminal
and nothing in logs, pipes or Prefect/Dask workers.

A source whose marker matches its pinned checksums is skipped without touching the network;
``force=True`` downloads and installs it again. Errors are one line (:class:`FetchError`,
:class:`~tasks.data.errors.ChecksumError`): what failed, where, and what to do.

:func:`dataset_status` says whether a registered dataset's raw files are on this machine and how
much space they take; ``alsa-bench datasets`` lists it for every dataset.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import lzma
import os
import posixpath
import secrets
import shutil
import stat
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from storage.paths import data_dir
from tasks.data.synthetic import clear_marker
from tasks.data.datasets import get_dataset_spec
from tasks.data.errors import ChecksumError, DatasetUnavailableError
from tasks.data.files import atomic_target
from tasks.data.datasets._online import fetch_hint
from tasks.data.spec import DatasetSpec, RemoteFile
from tasks.runtime.progress import progress_bar

try:  # advisory file locks (POSIX); without them concurrent fetches are not guarded
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "ARCHIVE_SUFFIXES",
    "DEFAULT_TIMEOUT",
    "DOWNLOADS_DIR",
    "FetchError",
    "NothingToFetchError",
    "archive_kind",
    "check_tar_member",
    "check_zip_member",
    "download_file",
    "extract_archive",
    "fetch_dataset",
    "fetch_instructions",
    "marker_path",
    "verify_file",
]

logger = logging.getLogger(__name__)

#: Folder of the data root that receives downloads (``.part`` while incomplete).
DOWNLOADS_DIR: Final[str] = "downloads"
#: Archive suffixes that are unpacked, and the :mod:`tarfile` / :mod:`zipfile` reader of each.
ARCHIVE_SUFFIXES: Final[dict[str, str]] = {
    ".tar.gz": "tar", ".tgz": "tar", ".tar.xz": "tar", ".tar.bz2": "tar", ".tar": "tar",
    ".zip": "zip",
}
#: Default socket timeout of a download, in seconds (per blocking read, not for the whole file).
DEFAULT_TIMEOUT: Final[float] = 60.0
_CHUNK: Final[int] = 1 << 20
_PART: Final[str] = ".part"
_STAGING_PREFIX: Final[str] = ".staging-"
_USER_AGENT: Final[str] = "alsa-bench-fetch/1"
#: Errors a damaged archive raises while it is read.
_CORRUPT: Final = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError)


class FetchError(DatasetUnavailableError):
    """A download or an extraction failed; the message is one line saying what to do."""


class NothingToFetchError(FetchError):
    """The dataset declares no files for ``alsa-bench fetch`` (offline, or installed otherwise)."""


class _NothingAfterOffset(Exception):
    """The server answered ``416 Range Not Satisfiable`` to a resume request."""


# ------------------------------------------------------------------------------------ fetching
def fetch_dataset(
    name: str,
    root: Path | str | None = None,
    *,
    force: bool = False,
    progress: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[Path]:
    """Download, verify and install every file that dataset ``name`` declares.

    Parameters
    ----------
    name : str
        Registry key of an online dataset with ``sources``.
    root : Path or str, optional
        Data root; default :func:`storage.paths.data_dir` (``$ALSA_BENCH_HOME/data``).
    force : bool, default False
        Download and install again even where the completion marker says the file is done.
    progress : bool, default True
        Show a byte progress bar per download on stderr, on a terminal only (never in logs,
        pipes, Prefect tasks or Dask workers; see :mod:`tasks.runtime.progress`).
    timeout : float, default 60
        Socket timeout in seconds for connecting and for each read.

    Returns
    -------
    list of Path
        Per source, in declaration order: the folder an archive was unpacked into, or the
        installed file.

    Raises
    ------
    ValueError
        If ``name`` is not registered (the message lists the valid keys) or ``timeout`` is not
        a positive number.
    NothingToFetchError
        If the dataset declares no ``sources`` (offline, or fetched with another tool).
    FetchError
        Network, HTTP, interrupted transfer (the ``.part`` is kept to resume), oversized file,
        truncated archive, unsafe member, an archive not in the release's folder layout, or
        installed files that the dataset's reader refuses.
    DatasetUnavailableError
        If the dataset module's ``fetch_sources()`` cannot say what to download (ogbn-arxiv
        without the ``ogb`` package).
    ChecksumError
        If a downloaded file does not match its pinned checksum (it is deleted).
    """
    spec = get_dataset_spec(name)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0; got {timeout!r}.")
    base = Path(root) if root is not None else data_dir()
    module = sys.modules.get(spec.module)
    sources = _sources_of(spec, module)
    if not sources:
        raise NothingToFetchError(_nothing_to_fetch(spec, base))
    folders = _archive_folders(spec, module)
    installed = []
    for remote in sources:
        installed.append(
            _fetch_one(name, remote, base, force=force, progress=progress,
                       timeout=float(timeout), folder=folders.get(remote.filename))
        )
    _verify_installed(spec, module, base, sources)
    clear_marker(base, spec.name)  # the real release is in place: no longer a generated one
    return installed


def _sources_of(spec: DatasetSpec, module: Any) -> tuple[RemoteFile, ...]:
    """The module's ``fetch_sources()`` when it has one, else ``spec.sources``."""
    resolve = getattr(module, "fetch_sources", None)
    if not callable(resolve):
        return tuple(spec.sources)
    sources = tuple(resolve())
    bad = [s for s in sources if not isinstance(s, RemoteFile)]
    if bad:
        raise TypeError(f"fetch_sources() of {spec.module} must return RemoteFile objects; got "
                        f"{type(bad[0]).__name__}.")
    return sources


def _archive_folders(spec: DatasetSpec, module: Any) -> Mapping[str, str]:
    """The module's ``ARCHIVE_FOLDERS`` (archive file name -> its one top folder), checked."""
    folders = getattr(module, "ARCHIVE_FOLDERS", None) or {}
    if not isinstance(folders, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and v and _unsafe_path(v) is None
        and "/" not in v.strip("/") for k, v in folders.items()
    ):
        raise ValueError(f"ARCHIVE_FOLDERS of {spec.module} must map archive file names to one "
                         f"plain folder name each; got {folders!r}.")
    return folders


def _verify_installed(spec: DatasetSpec, module: Any, root: Path,
                      sources: tuple[RemoteFile, ...]) -> None:
    """Run the module's ``verify_fetched(root)``; on failure drop the markers and say why."""
    verify = getattr(module, "verify_fetched", None)
    if not callable(verify):
        return
    try:
        verify(root)
    except (OSError, ValueError) as exc:
        for remote in sources:  # the next fetch installs again instead of trusting the files
            marker_path(root, remote).unlink(missing_ok=True)
        raise FetchError(
            f"{spec.name} was downloaded and unpacked under {str(root)!r} but its reader refuses "
            f"the files ({' '.join(str(exc).split())}); run `{fetch_hint(spec.name)} --force`, "
            f"and if it fails the same way the release changed: check the dataset module."
        ) from exc


def _fetch_one(
    name: str,
    remote: RemoteFile,
    root: Path,
    *,
    force: bool,
    progress: bool,
    timeout: float,
    folder: str | None = None,
) -> Path:
    dest = _dest_folder(root, remote)
    target = dest if _is_archive(remote) else dest / remote.filename
    if not force and _marker_matches(remote, dest) and target.exists():
        logger.info("%s: %s already fetched (%s)", name, remote.filename, marker_path(root, remote))
        return target
    downloaded = root / DOWNLOADS_DIR / remote.filename
    with _download_lock(name, remote, downloaded):
        if force:
            downloaded.unlink(missing_ok=True)
        digests: dict[str, str] | None = None
        if downloaded.is_file():
            try:
                digests = verify_file(downloaded, remote, name)
            except ChecksumError as exc:  # a stale or damaged earlier download: fetch it again
                logger.warning("%s; downloading it again", exc)
        if digests is None:
            digests = download_file(remote, downloaded, dataset=name, progress=progress,
                                    timeout=timeout)
        marker_path(root, remote).unlink(missing_ok=True)
        if _is_archive(remote):
            _install_archive(name, remote, downloaded, root, dest, folder=folder)
        else:
            _install_entries(root, {remote.filename: downloaded}, dest)
        _write_marker(remote, dest, digests)
    return target


@contextmanager
def _download_lock(name: str, remote: RemoteFile, downloaded: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock per download, so two fetches never share a ``.part``."""
    downloaded.parent.mkdir(parents=True, exist_ok=True)
    lock = downloaded.with_name(f".{downloaded.name}.lock")
    with open(lock, "a+b") as handle:
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise FetchError(
                    f"another `{fetch_hint(name)}` is downloading {remote.filename!r} into "
                    f"{str(downloaded.parent)!r}; wait for it to finish, then run it again."
                ) from None
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def download_file(
    remote: RemoteFile,
    final: Path,
    *,
    dataset: str = "",
    report: Callable[[str, int, int | None], None] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    progress: bool = False,
) -> dict[str, str]:
    """Download ``remote`` to ``final``, resuming ``final + '.part'``, and verify it.

    Parameters
    ----------
    remote : RemoteFile
        URL, pinned checksums and (optional) size.
    final : Path
        Where the verified file goes; the transfer writes ``<final>.part`` beside it.
    dataset : str, default ""
        Dataset key, for messages and the resume command.
    report : callable, optional
        ``report(filename, bytes_so_far, total_or_None)``, called as chunks arrive.
    timeout : float, default 60
        Socket timeout in seconds.
    progress : bool, default False
        Show a byte progress bar (from the resumed offset on), on a terminal only
        (:func:`tasks.runtime.progress.progress_bar`).

    Returns
    -------
    dict of str to str
        Hex digests of the complete, verified file now at ``final``: ``sha256``, and ``md5``
        when pinned.

    Raises
    ------
    FetchError
        Network or HTTP error, interrupted transfer (``.part`` kept), or a file longer than
        ``remote.size`` (deleted).
    ChecksumError
        Checksum mismatch (the file is deleted).
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(final.name + _PART)
    offset = part.stat().st_size if part.is_file() else 0
    if remote.size is not None and offset > remote.size:
        part.unlink()  # longer than the published size: it cannot be a prefix of the file
        offset = 0
    again = f"`{fetch_hint(dataset)}`" if dataset else "the fetch again"
    if remote.size is None or offset < remote.size:
        fields = {"again": again, "report": report, "timeout": timeout, "progress": progress,
                  "dataset": dataset}
        try:
            _transfer(remote, part, offset, **fields)
        except _NothingAfterOffset:
            # the server has no byte after the .part: it is complete, or it is not this file
            try:
                return _finish(part, final, remote, dataset)
            except ChecksumError:  # not this file (and now deleted): download it afresh
                _transfer(remote, part, 0, **fields)
    return _finish(part, final, remote, dataset)


def _finish(part: Path, final: Path, remote: RemoteFile, dataset: str) -> dict[str, str]:
    """Verify the complete ``.part`` and rename it to ``final``."""
    digests = verify_file(part, remote, dataset)
    os.replace(part, final)
    return digests


def _transfer(
    remote: RemoteFile,
    part: Path,
    offset: int,
    *,
    again: str,
    report: Callable[[str, int, int | None], None] | None,
    timeout: float,
    progress: bool = False,
    dataset: str = "",
) -> None:
    """Append the rest of ``remote`` to ``part`` (from ``offset``), or rewrite it from zero."""
    response = _open(remote, offset, again=again, timeout=timeout, part=part)
    with response:
        status = response.getcode()
        resumed = offset > 0 and status == 206 and _content_range_start(response) == offset
        if offset > 0 and not resumed:
            logger.info("%s: the server did not resume at byte %d; restarting", remote.url, offset)
            offset = 0
        length = response.headers.get("Content-Length")
        expected = offset + int(length) if length and length.isdigit() else remote.size
        done = offset
        total = remote.size or expected
        logger.info("%s: downloading %s from byte %d of %s", dataset or "fetch", remote.url,
                    offset, total if total is not None else "?")
        label = f"fetch {dataset}: {remote.filename}" if dataset else remote.filename
        try:
            with open(part, "ab" if resumed else "wb") as out, progress_bar(
                total=total, initial=offset, desc=label, unit="B", unit_scale=True,
                enabled=progress,
            ) as bar:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    done += len(chunk)
                    if remote.size is not None and done > remote.size:
                        break
                    bar.update(len(chunk))
                    if report is not None:
                        report(remote.filename, done, total)
        except (http.client.HTTPException, OSError) as exc:
            raise FetchError(
                f"download of {remote.filename!r} from {remote.url} was interrupted after "
                f"{done} bytes ({type(exc).__name__}: {exc}); the partial file {str(part)!r} is "
                f"kept: run {again} to resume it."
            ) from exc
    if remote.size is not None and done > remote.size:
        part.unlink(missing_ok=True)
        raise FetchError(
            f"{remote.url} sent more than the published {remote.size} bytes of "
            f"{remote.filename!r}; the file was deleted: check the URL or the pinned size in "
            f"the dataset module."
        )
    if expected is not None and done < expected:
        raise FetchError(
            f"download of {remote.filename!r} from {remote.url} was interrupted after {done} of "
            f"{expected} bytes; the partial file {str(part)!r} is kept: run {again} to resume it."
        )


def _open(remote: RemoteFile, offset: int, *, again: str, timeout: float, part: Path) -> Any:
    """Open the URL, asking for the bytes from ``offset`` on when it is positive."""
    headers = {"User-Agent": _USER_AGENT}
    if offset > 0:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(remote.url, headers=headers)
    kept = (f" the partial file {str(part)!r} is kept: run {again} to resume it;"
            if offset > 0 else "")
    try:
        return urllib.request.urlopen(request, timeout=timeout)  # http, https or file URLs
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 416 and offset > 0:
            raise _NothingAfterOffset(offset) from None
        raise FetchError(
            f"HTTP {exc.code} {exc.reason} for {remote.url} ({remote.filename!r});{kept} check "
            f"the URL in the dataset module or try again later."
        ) from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(
            f"cannot reach {remote.url} ({remote.filename!r}): {reason};{kept} check the "
            f"network (alsa-bench fetch needs the internet) and run {again}."
        ) from None


def _content_range_start(response: Any) -> int | None:
    """First byte position of a ``Content-Range: bytes N-M/T`` header, or None."""
    value = response.headers.get("Content-Range", "")
    unit, _, rest = value.partition(" ")
    start = rest.partition("-")[0]
    return int(start) if unit.strip() == "bytes" and start.isdigit() else None


def verify_file(path: Path, remote: RemoteFile, dataset: str = "") -> dict[str, str]:
    """Check every pinned checksum of ``remote`` against the bytes of ``path``.

    Parameters
    ----------
    path : Path
        The complete downloaded file.
    remote : RemoteFile
        Its declaration (``sha256`` and/or ``md5``).
    dataset : str, default ""
        Dataset key, for the fetch command in the message.

    Returns
    -------
    dict of str to str
        The file's ``sha256`` (always) and ``md5`` (when pinned), lower-case hex.

    Raises
    ------
    ChecksumError
        One line: file, expected and actual digest, URL, what to do. ``path`` is deleted.
    """
    digests = _digests(path, remote)
    for algorithm, expected in (("sha256", remote.sha256), ("md5", remote.md5)):
        if expected and digests[algorithm] != expected:
            path.unlink(missing_ok=True)
            again = f"`{fetch_hint(dataset)}`" if dataset else "the fetch"
            raise ChecksumError(
                f"{remote.filename}: {algorithm} {digests[algorithm]} differs from the pinned "
                f"{expected} (downloaded from {remote.url}); the file was deleted: run {again} "
                f"again, and if it fails the same way the release changed, so check the "
                f"dataset module's pin."
            )
    return digests


def _digests(path: Path, remote: RemoteFile) -> dict[str, str]:
    """SHA-256 (always) and MD5 (when pinned) of a file in one pass."""
    hashes = {"sha256": hashlib.sha256()}
    if remote.md5:
        hashes["md5"] = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            for h in hashes.values():
                h.update(chunk)
    return {k: h.hexdigest() for k, h in hashes.items()}


# ---------------------------------------------------------------------------------- extracting
def archive_kind(filename: str) -> str | None:
    """``"tar"`` or ``"zip"`` for a name with a suffix of :data:`ARCHIVE_SUFFIXES`, else None."""
    lower = filename.lower()
    for suffix, kind in ARCHIVE_SUFFIXES.items():
        if lower.endswith(suffix):
            return kind
    return None


def _is_archive(remote: RemoteFile) -> bool:
    if not remote.extract:
        return False
    if archive_kind(remote.filename) is None:
        raise ValueError(
            f"{remote.filename!r} has extract=True but is not an archive with a suffix of "
            f"{', '.join(ARCHIVE_SUFFIXES)}; declare it with extract=False."
        )
    return True


def _unsafe_path(name: str) -> str | None:
    """Why an archive member name would land outside the extraction folder, or None."""
    if not name or "\0" in name:
        return "an empty or NUL-containing name"
    posix = name.replace("\\", "/")
    if posix.startswith("/") or (len(posix) > 1 and posix[1] == ":"):
        return "an absolute path"
    if ".." in posix.split("/"):
        return "a '..' component"
    return None


#: tarfile's extraction filters (PEP 706) came with Python 3.11.4; before that our own member
#: check runs alone and the modes are cleaned here (the ``data`` filter's effect on them).
HAS_TAR_FILTERS = hasattr(tarfile, "data_filter")
#: What an unsafe tar member raises: ``tarfile.FilterError`` where it exists, else ValueError.
UnsafeTarMember: type[Exception] = getattr(tarfile, "FilterError", ValueError)


def check_tar_member(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """Refuse a tar member that could write outside the extraction folder.

    Parameters
    ----------
    member : tarfile.TarInfo
        One member of the archive.

    Returns
    -------
    tarfile.TarInfo
        ``member`` unchanged when it is a plain file or folder with a relative path, or a link
        whose target stays inside the archive.

    Raises
    ------
    UnsafeTarMember
        ``tarfile.FilterError`` (``tarfile.OutsideDestinationError`` and friends' base class;
        ValueError on Python < 3.11.4) naming the member and the reason: absolute path, ``..``,
        link leaving the folder, device file or FIFO.
    """
    reason = _unsafe_path(member.name)
    if reason is None and (member.ischr() or member.isblk() or member.isfifo()):
        reason = "a device file or FIFO"
    if reason is None and (member.issym() or member.islnk()):
        link = member.linkname.replace("\\", "/")
        # a symlink is relative to its own folder, a hard link to the archive's root
        base = posixpath.dirname(member.name) if member.issym() else ""
        resolved = posixpath.normpath(posixpath.join(base, link))
        if link.startswith("/") or resolved == ".." or resolved.startswith("../"):
            reason = f"a link to {member.linkname!r} outside the archive"
    if reason is not None:
        raise UnsafeTarMember(f"unsafe archive member {member.name!r}: {reason}")
    return member


def check_zip_member(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    """Refuse a zip member with an absolute path, a ``..`` component, or a symlink mode.

    Raises
    ------
    ValueError
        Naming the member and the reason.
    """
    reason = _unsafe_path(info.filename)
    # the upper 16 bits of external_attr hold a Unix st_mode when the archive was made on Unix
    kind = stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0
    if reason is None and kind == stat.S_IFLNK:
        reason = "a symbolic link"
    if reason is None and kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        reason = "a device file or FIFO"
    if reason is not None:
        raise ValueError(f"unsafe archive member {info.filename!r}: {reason}")
    return info


def _tar_filter(member: tarfile.TarInfo, dest_path: str) -> tarfile.TarInfo | None:
    """Our own check first (the error names the member), then ``filter="data"``."""
    return tarfile.data_filter(check_tar_member(member), dest_path)


def _checked_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Every member checked before anything is written, for Python versions without extraction
    filters: the ``data`` filter's mode rules (no set-id or sticky bits, no group/other write;
    owner read/write ensured) and no foreign ownership (root's uid/gid, no names)."""
    members = [check_tar_member(m) for m in tar.getmembers()]
    for m in members:
        m.mode = (m.mode & 0o755) | (0o600 if m.isfile() else 0o700)
        m.uid = m.gid = 0
        m.uname = m.gname = ""
    return members


def extract_archive(archive: Path, folder: Path) -> None:
    """Unpack a ``.tar*`` or ``.zip`` archive into ``folder`` (which must exist), safely.

    Parameters
    ----------
    archive : Path
        The verified archive.
    folder : Path
        An empty staging folder.

    Raises
    ------
    UnsafeTarMember, ValueError
        An unsafe member (see :func:`check_tar_member`, :func:`check_zip_member`).
    tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError
        A truncated or corrupt archive.
    """
    kind = archive_kind(archive.name)
    if kind == "tar":
        with tarfile.open(archive, "r:*") as tar:
            if HAS_TAR_FILTERS:
                tar.extractall(folder, filter=_tar_filter)
            else:  # Python < 3.11.4
                tar.extractall(folder, members=_checked_members(tar))
    elif kind == "zip":
        with zipfile.ZipFile(archive) as zf:
            infos = [check_zip_member(info) for info in zf.infolist()]
            for info in infos:
                zf.extract(info, folder)
    else:
        raise ValueError(f"archive must end with one of {', '.join(ARCHIVE_SUFFIXES)}; "
                         f"got {archive.name!r}.")


def _install_archive(name: str, remote: RemoteFile, archive: Path, root: Path, dest: Path,
                     *, folder: str | None = None) -> None:
    staging = _new_staging(root)
    try:
        try:
            extract_archive(archive, staging)
        except (UnsafeTarMember, ValueError) as exc:
            archive.unlink(missing_ok=True)
            raise FetchError(
                f"refused to extract {remote.filename!r} ({remote.url}): {exc}; nothing was "
                f"installed and the archive was deleted; report it to the dataset's maintainers."
            ) from None
        except _CORRUPT as exc:
            archive.unlink(missing_ok=True)
            raise FetchError(
                f"archive {remote.filename!r} from {remote.url} is truncated or corrupt "
                f"({type(exc).__name__}: {exc}) although it matches its pinned checksum; it was "
                f"deleted and nothing was installed: check the pin in the dataset module, then "
                f"run `{fetch_hint(name)}` again."
            ) from None
        except OSError as exc:
            raise FetchError(
                f"extracting {remote.filename!r} into {str(staging)!r} failed ({exc}); nothing "
                f"was installed: free disk space or fix permissions, then run "
                f"`{fetch_hint(name)}` again."
            ) from None
        top = staging
        if folder is not None:  # the release packs everything into one folder: install its contents
            found = sorted(entry.name for entry in staging.iterdir())
            top = staging / folder
            if found != [folder] or not top.is_dir() or top.is_symlink():
                raise FetchError(
                    f"archive {remote.filename!r} from {remote.url} should hold exactly one "
                    f"top-level folder {folder + '/'!r} (the release's layout); found "
                    f"{found[:5]}; nothing was installed: check the dataset module."
                )
        entries = {entry.name: entry for entry in sorted(top.iterdir())}
        _install_entries(root, entries, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _new_staging(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f"{_STAGING_PREFIX}{secrets.token_hex(8)}"
    staging.mkdir()
    return staging


def _install_entries(root: Path, entries: dict[str, Path], dest: Path) -> None:
    """Move each entry to ``dest / name`` with ``os.replace``; an old entry is moved aside."""
    for entry_name in entries:  # every name is checked before anything moves
        if dest == root and (entry_name == DOWNLOADS_DIR or entry_name.startswith(_STAGING_PREFIX)):
            raise FetchError(
                f"archive entry {entry_name!r} would replace alsa-bench's own folder "
                f"{str(dest / entry_name)!r}; declare the source with a dest sub-folder."
            )
    dest.mkdir(parents=True, exist_ok=True)
    trash = _new_staging(root)
    try:
        for entry_name, source in entries.items():
            target = dest / entry_name
            if target.exists() or target.is_symlink():
                os.replace(target, trash / entry_name)
            os.replace(source, target)
    finally:
        shutil.rmtree(trash, ignore_errors=True)


# ------------------------------------------------------------------------------------- markers
def _dest_folder(root: Path, remote: RemoteFile) -> Path:
    reason = _unsafe_path(remote.dest) if remote.dest else None
    if reason is not None:
        raise ValueError(f"dest of {remote.filename!r} must be a relative folder inside the "
                         f"data root; got {remote.dest!r} ({reason}).")
    return root / remote.dest if remote.dest else root


def marker_path(root: Path | str, remote: RemoteFile) -> Path:
    """The completion marker ``<root>/<dest>/.fetched-<filename>.json`` of one source."""
    return _dest_folder(Path(root), remote) / f".fetched-{remote.filename}.json"


def _write_marker(remote: RemoteFile, dest: Path, digests: dict[str, str]) -> None:
    """Write the completion marker last: the verified digests, the URL and the time."""
    record = {
        "filename": remote.filename, "url": remote.url, "sha256": digests["sha256"],
        "md5": digests.get("md5", ""),
        "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with atomic_target(dest / f".fetched-{remote.filename}.json") as tmp:
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def _marker_matches(remote: RemoteFile, dest: Path) -> bool:
    path = dest / f".fetched-{remote.filename}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(record, dict):
        return False
    return all(record.get(algorithm) == pinned
               for algorithm, pinned in (("sha256", remote.sha256), ("md5", remote.md5)) if pinned)


# --------------------------------------------------------------------------------------- status
def fetch_instructions(name: str, root: Path | str = "$ALSA_BENCH_HOME/data") -> str:
    """How to get dataset ``name`` onto this machine, in one line (for docs and listings).

    Parameters
    ----------
    name : str
        Registry key.
    root : Path or str, default "$ALSA_BENCH_HOME/data"
        Data root to name in the instructions of datasets fetched with another tool.

    Returns
    -------
    str
        The command ``alsa-bench fetch NAME`` in markdown back-quotes when the dataset
        declares ``sources``;
        otherwise its module's ``FETCH_HINT`` (ogbn-arxiv, amazon-wilds), or, for an offline
        dataset, that it installs itself.

    Raises
    ------
    ValueError
        If ``name`` is not registered.
    """
    spec = get_dataset_spec(name)
    if spec.sources:
        return f"`{fetch_hint(name)}`"
    if not spec.online:
        return f"none: offline, staged by `alsa-bench run --suite {spec.suite}`"
    return _module_fetch_hint(spec, Path(str(root))) or "see the dataset module's documentation"


def _nothing_to_fetch(spec: DatasetSpec, root: Path) -> str:
    if not spec.online:
        return (f"dataset {spec.name!r} is offline and needs no fetch: it is staged "
                f"automatically by `alsa-bench run --suite {spec.suite}` (from a package or "
                f"generated; see README.md).")
    hint = _module_fetch_hint(spec, root)
    return (f"dataset {spec.name!r} declares no files for alsa-bench fetch"
            + (f"; {hint}" if hint else "; see its module's documentation") + ".")


def _module_fetch_hint(spec: DatasetSpec, root: Path) -> str:
    """The ``FETCH_HINT`` of the dataset's module (ogbn-arxiv, amazon-wilds), filled in."""
    module = sys.modules.get(spec.module)
    hint = getattr(module, "FETCH_HINT", "") if module is not None else ""
    if not isinstance(hint, str) or not hint:
        return ""
    fields = _KeepMissing(name=spec.name, root=str(root),
                          folder=str(getattr(module, "DATASET_DIR", "")))
    try:
        return hint.format_map(fields)
    except (IndexError, ValueError):  # positional fields or stray braces: show it as written
        return hint


class _KeepMissing(dict):
    """Fields for ``str.format_map``: a ``{name}`` with no known value is kept as written."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"
