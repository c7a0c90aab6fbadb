"""Text samples: what a split of the text modality holds, and the checks every loader applies.

A text split's samples are a one-dimensional ``numpy`` array of ``object`` dtype holding Python
``str`` (one document per row), its labels an ``int64`` array. Loaders pass what they read
through :func:`as_texts` and :func:`as_text_labels`, so a bad row is refused where it enters,
with the split and the row named, before anything is trained or written to DuckDB:

* an empty or whitespace-only text (nothing to classify);
* ``bytes`` that are not valid UTF-8 (valid UTF-8 ``bytes`` are decoded);
* a lone surrogate (what ``errors="surrogateescape"`` leaves of undecodable bytes);
* anything that is not text (``None``, a number);
* a label that is not an integer (``"1"``, ``1.0``, ``True``) or lies outside ``[0, c)``.

Examples
--------
>>> as_texts(["a fine film", b"caf\\xc3\\xa9"], "val").tolist()
['a fine film', 'café']
>>> as_texts(["ok", "  "], "val")
Traceback (most recent call last):
...
ValueError: split 'val', row 1: the text is empty or only whitespace; every sample must hold text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["TEXT_ERAS", "as_text_labels", "as_texts", "take_texts", "text_key"]

#: Eras of the temporal text family (``sotu-party``): (sub-population id, first year, last year).
#: Sub-population 0 is the source era; these are the target eras.
TEXT_ERAS: tuple[tuple[int, int, int], ...] = (
    (1, 1913, 1944),
    (2, 1945, 1968),
    (3, 1969, 1992),
    (4, 1993, 2026),
)


def _decode(value: Any, where: str, row: int) -> str:
    if isinstance(value, np.str_):
        value = str(value)
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"split {where!r}, row {row}: the bytes are not valid UTF-8 ({exc.reason} at "
                f"byte {exc.start}); decode the file with its real encoding first."
            ) from None
    if not isinstance(value, str):
        raise ValueError(
            f"split {where!r}, row {row}: expected a text (str); got {type(value).__name__} "
            f"{value!r:.60}."
        )
    if not value.strip():
        raise ValueError(
            f"split {where!r}, row {row}: the text is empty or only whitespace; every sample "
            "must hold text."
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"split {where!r}, row {row}: the text holds a lone surrogate (undecodable bytes "
            "read with errors='surrogateescape'); it is not valid Unicode text."
        ) from None
    return value


def as_texts(values: Iterable[Any], where: str) -> np.ndarray:
    """Check and convert the texts of a split.

    Parameters
    ----------
    values : iterable
        One text per sample: ``str``, or ``bytes`` holding UTF-8.
    where : str
        Split name used in error messages (``"train"``, ``"val"``, ``"clean"``, a file name).

    Returns
    -------
    numpy.ndarray
        ``(n,)`` ``object`` array of ``str``.

    Raises
    ------
    ValueError
        For the first bad row (see the module docstring), naming ``where`` and the row.
    """
    if isinstance(values, (str, bytes)):
        raise ValueError(
            f"split {where!r}: expected a sequence of texts, one per sample; got a single "
            f"{type(values).__name__}."
        )
    if isinstance(values, np.ndarray) and values.ndim != 1:
        raise ValueError(
            f"split {where!r}: expected a one-dimensional array of texts; got shape "
            f"{values.shape}."
        )
    texts = [_decode(v, where, i) for i, v in enumerate(values)]
    out = np.empty(len(texts), dtype=object)
    out[:] = texts
    return out


def as_text_labels(values: Iterable[Any], n_classes: int, where: str) -> np.ndarray:
    """Check and convert the labels of a text split.

    Parameters
    ----------
    values : iterable
        One integer label per sample in ``[0, n_classes)``.
    n_classes : int
        Number of classes.
    where : str
        Split name for error messages.

    Returns
    -------
    numpy.ndarray
        ``(n,)`` ``int64`` labels.

    Raises
    ------
    ValueError
        For the first label that is not an integer (strings, floats and booleans included) or
        lies outside ``[0, n_classes)``, naming ``where`` and the row.
    """
    out = []
    for row, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise ValueError(
                f"split {where!r}, row {row}: labels must be integers in [0, {n_classes}); got "
                f"{type(v).__name__} {v!r}."
            )
        if not 0 <= int(v) < n_classes:
            raise ValueError(
                f"split {where!r}, row {row}: labels must be integers in [0, {n_classes}); got "
                f"{int(v)}."
            )
        out.append(int(v))
    return np.asarray(out, dtype=np.int64)


def take_texts(samples: Any, index: Iterable[int]) -> np.ndarray:
    """The texts at ``index`` as a fresh ``object`` array, in that order."""
    picked = [samples[int(i)] for i in index]
    out = np.empty(len(picked), dtype=object)
    out[:] = picked
    return out


def text_key(text: str) -> str:
    """Content key of a text: SHA-256 of its UTF-8 bytes, hex (the embedding cache's key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
