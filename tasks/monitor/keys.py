"""The monitor's incremental keys: what makes a chunk, an estimator and a fitted model the same.

* **Content** (:func:`logits_digest`): SHA-256 of the logits as little-endian ``float32`` in
  row-major order, after the shape. Labels and timestamps are not part of it, so a batch that
  comes back later with a label column is the same content (its labels are joined in), and the
  same numbers stored as ``float64`` or ``float32``, in ``.npz`` or ``.parquet``, are one
  content (estimates do not depend on the dtype: the estimators' contract).
* **Chunk** (:func:`chunk_content`, :func:`chunk_key`): a chunk's content is the digest of its
  parts' contents in stream order (a part = the rows one file gives the chunk); its key adds the
  stream and the chunking, so the same content arriving twice in a stream is one chunk,
  estimated once.
* **Estimator** (:func:`estimator_key`): the reference's content, the method, its parameters,
  the calibration and the level: an estimate is never recomputed for the same key, and a
  changed reference keys its estimates apart.
* **Fitted model** (:func:`fit_key`): the estimator key plus the estimators' code version, so
  a fitted model cached on disk is refit after an upgrade.

Examples
--------
>>> import numpy as np
>>> a = np.arange(6.0).reshape(3, 2)
>>> logits_digest(a) == logits_digest(a.astype(np.float32))
True
>>> len(chunk_key("/data/prod", "file", chunk_content([logits_digest(a)])))
24
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "KEY_FORMAT",
    "canonical_json",
    "chunk_content",
    "chunk_key",
    "estimator_key",
    "fit_key",
    "logits_digest",
    "stream_slug",
]

#: Version of the key derivations below; part of every key, bumped if one changes.
KEY_FORMAT: Final[str] = "alsa-bench-monitor/1"
_SLUG: Final = re.compile(r"[^a-z0-9]+")


def logits_digest(logits: NDArray[Any]) -> str:
    """SHA-256 (hex) of ``(n, c)`` logits as little-endian float32, row-major, after the shape.

    Parameters
    ----------
    logits : ndarray of shape (n, c)

    Returns
    -------
    str
        64 hex digits.
    """
    array = np.ascontiguousarray(np.asarray(logits), dtype="<f4")
    digest = hashlib.sha256(f"{KEY_FORMAT}|logits|{array.shape}".encode())
    digest.update(array.tobytes())
    return digest.hexdigest()


def chunk_content(parts: Sequence[str]) -> str:
    """SHA-256 (hex) of a chunk: the digests of its parts' logits, in stream order.

    A chunk of one whole file (``--chunk file``) has one part, that file's
    :func:`logits_digest`.
    """
    digest = hashlib.sha256(f"{KEY_FORMAT}|chunk|{len(parts)}".encode())
    for part in parts:
        digest.update(b"|" + part.encode())
    return digest.hexdigest()


def chunk_key(stream: str, chunking: str, content_sha256: str) -> str:
    """Key of a chunk: its stream, its chunking and its content (24 hex digits)."""
    text = f"{KEY_FORMAT}|chunk-key|{stream}|{chunking}|{content_sha256}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def canonical_json(value: Mapping[str, Any]) -> str:
    """JSON with sorted keys; values JSON cannot hold are written as their ``repr``."""
    return json.dumps(value, sort_keys=True, default=repr, allow_nan=True)


def estimator_key(
    reference_sha256: str, method: str, params: Mapping[str, Any],
    calibration_sha256: str | None, level: float,
) -> str:
    """Key of an estimator fitted on a reference (24 hex digits).

    Parameters
    ----------
    reference_sha256 : str
        :func:`logits_digest` of the reference's logits, extended by its labels' digest.
    method : str
        Registry key.
    params : Mapping
        The estimator's parameters (``get_params()``, defaults included).
    calibration_sha256 : str or None
        Digest of the active calibration (bands and ``auto``'s combination).
    level : float
        Nominal coverage of the bands.
    """
    text = canonical_json({"format": KEY_FORMAT, "reference": reference_sha256,
                           "method": method, "params": dict(params),
                           "calibration": calibration_sha256, "level": float(level)})
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def fit_key(estimator: str, code_version: str) -> str:
    """Name of a fitted model in the on-disk cache: the estimator key and the code version."""
    return hashlib.sha256(f"{KEY_FORMAT}|fit|{estimator}|{code_version}".encode()).hexdigest()[:32]


def stream_slug(stream: str) -> str:
    """A lowercase-dash name of a stream for artifact keys and report folders.

    The last two path parts, then 8 hex digits of the whole stream so two streams never share
    a name; at most 48 characters.

    Examples
    --------
    >>> stream_slug("/data/model-a/prod/*.parquet")[:-9]
    'prod-parquet'
    """
    tail = "-".join(part for part in stream.replace("\\", "/").split("/")[-2:] if part)
    slug = _SLUG.sub("-", tail.lower()).strip("-")[:38].strip("-") or "stream"
    return f"{slug}-{hashlib.sha256(stream.encode()).hexdigest()[:8]}"
