"""Fitted estimators cached on disk per reference, signed so that only this state folder's own
files are ever unpickled.

A fitted estimator (ALSA's anchors and kernels, ``auto``'s eight members, the signals) is a
Python object with no format of its own, so it is stored with :mod:`pickle`, and unpickling
runs code. The cache therefore never unpickles a file it cannot prove it wrote:

* every file is signed with HMAC-SHA-256 under a secret key kept in the cache folder
  (``<state>/monitor/fits/.key``, 32 random bytes, mode 0600, made on first use), and
  :meth:`FitCache.load` checks the signature *before* it unpickles. A file copied from another
  state folder, edited, truncated or planted without the key fails the check;
* a file is named by its fit key (:func:`tasks.monitor.keys.fit_key`: the reference's content
  hash, method, parameters, calibration, level and the estimators' code version), and the key
  stored inside must match the name;
* any doubt (bad signature, unreadable file, a key mismatch, a class that no longer unpickles)
  means *refit*: the file is deleted and the caller fits again, which is always correct, only
  slower.

Files are written under a temporary name and renamed, so a killed writer never leaves half a
file under a fit key (``alsa-bench doctor`` sweeps the temporary name).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any, Final

__all__ = ["FitCache", "KEY_BYTES", "MAGIC"]

logger = logging.getLogger(__name__)

#: First line of every cache file: format and version.
MAGIC: Final[bytes] = b"alsa-bench-fit/1\n"
#: Length of the secret key.
KEY_BYTES: Final[int] = 32
_KEY_FILE: Final[str] = ".key"
_SUFFIX: Final[str] = ".fit"


class FitCache:
    """Signed pickles of fitted estimators in ``folder``.

    Parameters
    ----------
    folder : Path
        The cache folder (created on first write), inside the state folder.

    Examples
    --------
    >>> import tempfile
    >>> cache = FitCache(Path(tempfile.mkdtemp()))
    >>> _ = cache.store("ab12", {"fitted": [1, 2]})
    >>> cache.load("ab12")
    {'fitted': [1, 2]}
    >>> cache.load("cd34") is None
    True
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    # ------------------------------------------------------------------ the key
    def _secret(self) -> bytes:
        """The folder's signing key, made (32 random bytes, mode 0600) when missing."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / _KEY_FILE
        for _ in range(50):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                data = b""
            if len(data) == KEY_BYTES:
                return data
            if data:  # a damaged key: every file signed with it is refit under a new one
                logger.warning("fit cache key %s is damaged (%d bytes); making a new one",
                               path, len(data))
                path.unlink(missing_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another process is making it: read it again
                continue
            try:
                os.write(fd, os.urandom(KEY_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
        raise OSError(f"could not read or make the fit cache key {path}")

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._secret(), MAGIC + payload, hashlib.sha256).hexdigest().encode()

    # ------------------------------------------------------------------ files
    def path(self, key: str) -> Path:
        """The file of fit key ``key``."""
        if not key or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"fit key must be lowercase hex digits; got {key!r}.")
        return self.folder / f"{key}{_SUFFIX}"

    def store(self, key: str, value: Any) -> Path:
        """Pickle ``value`` under ``key``, signed; written atomically.

        Returns
        -------
        Path
            The file written.
        """
        payload = pickle.dumps({"key": key, "value": value}, protocol=pickle.HIGHEST_PROTOCOL)
        target = self.path(key)
        signature = self._sign(payload)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                        dir=self.folder)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(MAGIC + signature + b"\n" + payload)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return target

    def verify(self, key: str) -> bool:
        """Whether the file of ``key`` exists and carries this folder's valid signature (it is
        not unpickled)."""
        return self._verified_payload(key) is not None

    def _verified_payload(self, key: str) -> bytes | None:
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        head, sep, rest = data.partition(b"\n")
        signature, sep2, payload = rest.partition(b"\n")
        if (not sep or not sep2 or head + b"\n" != MAGIC
                or not hmac.compare_digest(signature, self._sign(payload))):
            return None
        return payload

    def load(self, key: str) -> Any | None:
        """The value stored under ``key``, or None (missing, or any doubt: then deleted).

        The signature is checked before anything is unpickled.
        """
        path = self.path(key)
        if not path.exists():
            return None
        payload = self._verified_payload(key)
        if payload is None:
            logger.warning("fit cache file %s is not signed by this state folder (copied, "
                           "edited or damaged); deleting it and refitting", path)
            path.unlink(missing_ok=True)
            return None
        try:
            record = pickle.loads(payload)  # noqa: S301 - signed by this folder's own key
        except Exception as exc:  # a class that changed shape: refit
            logger.warning("fit cache file %s no longer loads (%s); refitting", path,
                           type(exc).__name__)
            path.unlink(missing_ok=True)
            return None
        if not isinstance(record, dict) or record.get("key") != key:
            logger.warning("fit cache file %s holds another key; refitting", path)
            path.unlink(missing_ok=True)
            return None
        return record["value"]
