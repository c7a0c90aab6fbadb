"""A content-addressed, append-only cache of per-text arrays (frozen encoder outputs).

A frozen encoder maps a text to the same array every time, so its output is stored once per
text and reused by every run, seed, backbone and target split that meets the text again: label
shift re-samples the clean pool, the domain mixtures re-use its snippets, and a re-run pays only
for texts it has never seen. Keys are :func:`tasks.data.texts.text_key` digests; the folder itself is
named by the encoder's digest and truncation rule (:mod:`tasks.models.text_encoder`), so a different
model or rule never reads these arrays.

Layout
------
Each :meth:`FeatureCache.put` writes one *shard* of three ``.npy`` files named by a digest of the
shard's keys::

    <folder>/<shard>.values.npy    (T, d) rows of every entry, concatenated
    <folder>/<shard>.offsets.npy   (n + 1,) int64: entry i is values[offsets[i]:offsets[i+1]]
    <folder>/<shard>.keys.npy      (n,) "S64" hex keys  -- written last

Every file is written to a temporary name and renamed when complete, and the keys file goes
last, so a shard is visible only once whole: a crash leaves at most an orphan values file that
no reader looks at. Two processes that compute the same texts write two shards holding the
same arrays; the first one found wins, which is harmless. Values are read through memory maps,
so a lookup touches only the rows it returns.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tasks.data.files import atomic_target

__all__ = ["FeatureCache"]


class FeatureCache:
    """Per-text arrays under one folder (see the module docstring).

    Parameters
    ----------
    folder : Path
        Where the shards live; created on first write.
    dtype : numpy dtype, default float32
        Storage dtype of the values (``float16`` halves the size of token states).
    """

    def __init__(self, folder: Path | str, dtype: np.dtype | type = np.float32) -> None:
        self.folder = Path(folder)
        self.dtype = np.dtype(dtype)
        self._index: dict[str, tuple[str, int]] = {}
        self._shards: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    def _refresh(self) -> None:
        if not self.folder.is_dir():
            return
        for keys_file in sorted(self.folder.glob("*.keys.npy")):
            shard = keys_file.name[: -len(".keys.npy")]
            if shard in self._shards:
                continue
            keys = np.load(keys_file, allow_pickle=False)
            offsets = np.load(self.folder / f"{shard}.offsets.npy", allow_pickle=False)
            values = np.load(self.folder / f"{shard}.values.npy", mmap_mode="r", allow_pickle=False)
            self._shards[shard] = (offsets, values)
            for row, key in enumerate(keys.tolist()):
                self._index.setdefault(key.decode("ascii"), (shard, row))

    def __len__(self) -> int:
        with self._lock:
            self._refresh()
            return len(self._index)

    def missing(self, keys: Sequence[str]) -> list[str]:
        """The keys of ``keys`` that have no entry yet, first occurrence order, no repeats."""
        with self._lock:
            self._refresh()
            return [k for k in dict.fromkeys(keys) if k not in self._index]

    def get(self, keys: Sequence[str]) -> list[np.ndarray]:
        """The arrays of ``keys``, in order (``(t_i, d)`` each, in the storage dtype).

        Raises
        ------
        KeyError
            If a key has no entry (call :meth:`missing` and :meth:`put` first).
        """
        with self._lock:
            self._refresh()
            out = []
            for key in keys:
                try:
                    shard, row = self._index[key]
                except KeyError:
                    raise KeyError(f"no cached features for text key {key}.") from None
                offsets, values = self._shards[shard]
                out.append(np.asarray(values[offsets[row] : offsets[row + 1]]))
            return out

    def put(self, keys: Sequence[str], arrays: Sequence[np.ndarray]) -> None:
        """Store one array per key as a new shard (keys already present are skipped).

        Raises
        ------
        ValueError
            If the counts differ, or the arrays are not 2-d with one common width.
        """
        if len(keys) != len(arrays):
            raise ValueError(f"keys and arrays must pair up; got {len(keys)} and {len(arrays)}.")
        with self._lock:
            self._refresh()
            fresh = {k: a for k, a in zip(keys, arrays) if k not in self._index}
        if not fresh:
            return
        widths = {np.asarray(a).shape[1:] for a in fresh.values()}
        if len(widths) != 1 or any(np.asarray(a).ndim != 2 for a in fresh.values()):
            raise ValueError(
                f"arrays must be 2-d (rows, width) with one width; got widths {sorted(widths)}."
            )
        names = list(fresh)
        lengths = np.array([np.asarray(fresh[k]).shape[0] for k in names], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = np.concatenate([np.asarray(fresh[k], dtype=self.dtype) for k in names])
        shard = hashlib.sha256("\n".join(names).encode()).hexdigest()[:24]
        for suffix, array in (("values", values), ("offsets", offsets),
                              ("keys", np.array(names, dtype="S64"))):
            with atomic_target(self.folder / f"{shard}.{suffix}.npy") as tmp:
                with open(tmp, "wb") as handle:
                    np.save(handle, array, allow_pickle=False)
