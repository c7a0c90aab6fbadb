"""Bring-your-own logit files for ``alsa-bench estimate``: ``.npz`` and ``.parquet``.

Accepted layouts
----------------
``.npz``
    An array ``logits`` of shape ``(n_samples, n_classes)`` (or a binary model's positive-class
    logits ``s`` of shape ``(n_samples,)`` / ``(n_samples, 1)``, returned as ``[0, s]``) and, optionally, ``labels`` of shape
    ``(n_samples,)`` (integer class indices). Written e.g. with
    ``np.savez(path, logits=logits, labels=labels)``.
``.parquet``
    Either a list column ``logits`` (one list of ``n_classes`` floats per row), or one numeric
    column per class named ``logit_0`` ... ``logit_{c-1}``; plus, optionally, an integer column
    ``label`` (or ``labels``).

Optional feature arrays (for the estimators that need features, :func:`load_feature_arrays`):
``.npz`` files may hold ``features`` (one row per logit row), and a validation file also
``train_features`` with, optionally, ``train_labels`` (rows of the training set, any count);
``.parquet`` files may hold ``features`` as a list column (or numeric columns ``feature_0`` ...
``feature_{d-1}``); training features, whose row count differs, need an ``.npz`` file.

Every problem is reported as a :class:`ValueError` whose message names the file and says what was
expected and what was found. Values are not range-checked here (NaN logits or out-of-range labels
are the estimators' checks, with their own messages); shapes and types are.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "FEATURE_ARRAYS", "PROBABILITIES_HINT", "SUPPORTED_SUFFIXES", "load_feature_arrays",
    "load_logit_file",
]

SUPPORTED_SUFFIXES: tuple[str, ...] = (".npz", ".parquet")
_LABEL_COLUMNS: tuple[str, ...] = ("label", "labels")
_LOGIT_COLUMN = re.compile(r"^logit_(\d+)$")
_FEATURE_COLUMN = re.compile(r"^feature_(\d+)$")
#: The optional feature arrays a logit file may hold, by name.
FEATURE_ARRAYS: tuple[str, ...] = ("features", "train_features", "train_labels")


def load_feature_arrays(path: str | Path) -> dict[str, NDArray[Any]]:
    """The optional feature arrays of a logit file (:data:`FEATURE_ARRAYS`), as stored.

    Returns only the arrays present (an empty dict for a file without features). Values and
    shapes are the estimators' checks (:mod:`estimators.core._features`), which name the argument;
    this reader refuses only what it cannot read.

    Raises
    ------
    ValueError
        If the file is missing or unreadable, a parquet ``features`` column is not one list of
        numbers per row (or ``feature_*`` columns are not numeric), or a parquet file holds
        ``train_features`` (a different row count: use ``.npz``).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "val.npz")
    >>> np.savez(path, logits=np.zeros((3, 2)), labels=[0, 1, 1], features=np.ones((3, 4)))
    >>> {k: v.shape for k, v in load_feature_arrays(path).items()}
    {'features': (3, 4)}
    """
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{file}: file not found.")
    if file.suffix.lower() == ".npz":
        try:
            with np.load(file, allow_pickle=False) as archive:
                return {name: archive[name] for name in FEATURE_ARRAYS if name in archive.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError):
            raise ValueError(f"{file}: cannot read the feature arrays {FEATURE_ARRAYS}; they "
                             "must be numeric arrays saved with np.savez.") from None
    if file.suffix.lower() != ".parquet":
        return {}
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(file)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{file}: not a readable .parquet file: {exc}") from exc
    columns = table.column_names
    for name in ("train_features", "train_labels"):
        if name in columns:
            raise ValueError(f"{file}: column {name!r}: training features have their own row "
                             "count and cannot share a parquet table with the logits; save them "
                             "in an .npz file (np.savez(path, logits=..., labels=..., "
                             "features=..., train_features=..., train_labels=...)).")
    if "features" in columns:
        column = table.column("features").combine_chunks()
        if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)
                or pa.types.is_fixed_size_list(column.type)) or column.null_count:
            raise ValueError(f"{file}: column 'features' must hold one list of numbers per row "
                             f"(no missing rows); got type {column.type} with "
                             f"{column.null_count} missing.")
        import pyarrow.compute as pc

        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        values = column.flatten()
        if (len(column) and lengths.min() != lengths.max()) or values.null_count or not (
                pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
            raise ValueError(f"{file}: column 'features' must hold lists of one length of "
                             "numbers (ragged, null or non-numeric lists found).")
        flat = values.to_numpy(zero_copy_only=False).astype(np.float64)
        return {"features": flat.reshape(len(column), int(lengths[0]) if len(column) else 0)}
    indexed = sorted((int(m.group(1)), n) for n in columns if (m := _FEATURE_COLUMN.match(n)))
    if not indexed:
        return {}
    if [i for i, _ in indexed] != list(range(len(indexed))):
        raise ValueError(f"{file}: feature columns must be feature_0 ... feature_{{d-1}} without "
                         "gaps.")
    blocks = []
    for _, name in indexed:
        col = table.column(name)
        if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
            raise ValueError(f"{file}: column {name!r} must be numeric; got type {col.type}.")
        blocks.append(col.to_numpy().astype(np.float64))
    return {"features": np.column_stack(blocks)}


#: What a refusal of probabilities tells the user to do, by default (``alsa-bench estimate``).
PROBABILITIES_HINT = " Or tell alsa-bench estimate --inputs probabilities."


def load_logit_file(
    path: str | Path, *, require_labels: bool, inputs: str = "logits",
    probabilities_hint: str = PROBABILITIES_HINT,
) -> tuple[NDArray[np.float64], NDArray[np.int64] | None]:
    """Read logits (and labels, if present) from a ``.npz`` or ``.parquet`` file.

    Parameters
    ----------
    path : str or Path
        The file; its suffix selects the reader.
    require_labels : bool
        Raise if the file holds no labels (validation files need them; target files do not).
    inputs : {"logits", "probabilities"}, default "logits"
        What the file holds. ``"logits"`` refuses an array that reads as probabilities (every
        row non-negative and summing to 1, or a binary column inside [0, 1]:
        :func:`estimators.core._validation.looks_like_probabilities`) with a message saying how to
        pass them (ending with ``probabilities_hint``); ``"probabilities"`` requires
        probabilities and returns their logits (:func:`estimators.logits_from_probabilities`:
        ``log p``, or ``log p - log(1 - p)`` for a binary column).
    probabilities_hint : str
        The last sentence of the refusal of probabilities (how the calling command takes
        them); default :data:`PROBABILITIES_HINT`.

    Returns
    -------
    logits : ndarray of shape (n_samples, n_classes), float64
    labels : ndarray of shape (n_samples,), int64, or None
        None when the file has no labels and ``require_labels`` is False.

    Raises
    ------
    ValueError
        If the file is missing, has an unsupported suffix, cannot be read, lacks the logits (or
        required labels), holds ragged or non-numeric logits, probabilities where logits are
        expected (or the reverse), or labels that are not integers with one per row.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "val.npz")
    >>> np.savez(path, logits=np.zeros((3, 2)), labels=np.array([0, 1, 1]))
    >>> logits, labels = load_logit_file(path, require_labels=True)
    >>> logits.shape, labels.tolist()
    ((3, 2), [0, 1, 1])
    """
    if inputs not in ("logits", "probabilities"):
        raise ValueError(f"inputs must be 'logits' or 'probabilities'; got {inputs!r}.")
    file = Path(path)
    if not file.exists():
        raise ValueError(f"{file}: file not found.")
    if not file.is_file():
        raise ValueError(f"{file}: not a regular file.")
    suffix = file.suffix.lower()
    if suffix == ".npz":
        logits, labels = _read_npz(file)
    elif suffix == ".parquet":
        logits, labels = _read_parquet(file)
    else:
        raise ValueError(
            f"{file}: unsupported file type {file.suffix or '(no suffix)'!r}; "
            f"expected one of {', '.join(SUPPORTED_SUFFIXES)}."
        )
    logits = _as_logits(logits, file, inputs, probabilities_hint)
    if labels is None:
        if require_labels:
            raise ValueError(
                f"{file}: no labels found; a validation file needs them "
                "(an array 'labels' in .npz, a column 'label' or 'labels' in .parquet)."
            )
        return logits, None
    return logits, _as_labels(labels, file, logits.shape[0])


def _read_npz(file: Path) -> tuple[np.ndarray, np.ndarray | None]:
    try:
        archive = np.load(file, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError):
        # numpy's own message advises allow_pickle=True, which would run code from the file
        raise ValueError(
            f"{file}: not a readable .npz archive; expected a zip of named numeric arrays as "
            "written by np.savez(path, logits=..., labels=...)."
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(
            f"{file}: expected an .npz archive of named arrays (np.savez); "
            "found a single .npy array."
        )
    with archive:
        names = list(archive.files)
        if "logits" not in names:
            raise ValueError(f"{file}: no array named 'logits'; found {names or 'no arrays'}.")
        try:
            logits = archive["logits"]
            labels = archive["labels"] if "labels" in names else None
        except (ValueError, OSError, EOFError, zipfile.BadZipFile):
            raise ValueError(
                f"{file}: cannot read the arrays 'logits'/'labels'; they must be numeric arrays "
                "saved with np.savez (object arrays and damaged entries are refused)."
            ) from None
    return logits, labels


def _read_parquet(file: Path) -> tuple[np.ndarray, np.ndarray | None]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(file)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{file}: not a readable .parquet file: {exc}") from exc
    columns = table.column_names
    label_name = next((name for name in _LABEL_COLUMNS if name in columns), None)
    labels = None
    if label_name is not None:
        column = table.column(label_name)
        if column.null_count:
            raise ValueError(
                f"{file}: column {label_name!r} has {column.null_count} missing value(s)."
            )
        labels = column.to_numpy()

    if "logits" in columns:
        column = table.column("logits").combine_chunks()
        if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)
                or pa.types.is_fixed_size_list(column.type)):
            raise ValueError(
                f"{file}: column 'logits' must hold one list of floats per row; "
                f"got type {column.type}."
            )
        if column.null_count:
            raise ValueError(f"{file}: column 'logits' has {column.null_count} missing row(s).")
        if len(column) == 0:
            return np.zeros((0, 0)), labels
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        if lengths.min() != lengths.max():
            bad = int(np.flatnonzero(lengths != lengths[0])[0])
            raise ValueError(
                f"{file}: ragged 'logits' lists: row 0 has {int(lengths[0])} values but row "
                f"{bad} has {int(lengths[bad])}; every row needs one logit per class."
            )
        values = column.flatten()
        if values.null_count:
            raise ValueError(f"{file}: column 'logits' holds {values.null_count} null value(s).")
        if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
            raise ValueError(
                f"{file}: column 'logits' must hold numbers; got lists of {values.type}."
            )
        flat = values.to_numpy(zero_copy_only=False).astype(np.float64)
        return flat.reshape(len(column), int(lengths[0])), labels

    indexed = sorted(
        (int(m.group(1)), name) for name in columns if (m := _LOGIT_COLUMN.match(name))
    )
    if not indexed:
        raise ValueError(
            f"{file}: no logits found; expected a list column 'logits' or columns "
            f"'logit_0', 'logit_1', ...; found columns {columns}."
        )
    indices = [i for i, _ in indexed]
    if indices != list(range(len(indices))):
        missing = sorted(set(range(max(indices) + 1)) - set(indices))
        raise ValueError(
            f"{file}: logit columns must be logit_0 ... logit_{{c-1}} without gaps; "
            f"missing {['logit_%d' % i for i in missing][:5]}."
        )
    blocks = []
    for _, name in indexed:
        column = table.column(name)
        if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
            raise ValueError(f"{file}: column {name!r} must be numeric; got type {column.type}.")
        if column.null_count:
            raise ValueError(f"{file}: column {name!r} has {column.null_count} missing value(s).")
        blocks.append(column.to_numpy().astype(np.float64))
    return np.column_stack(blocks), labels


def _as_logits(array: np.ndarray, file: Path, inputs: str = "logits",
               hint: str = PROBABILITIES_HINT) -> NDArray[np.float64]:
    from estimators.core._validation import (
        logits_from_probabilities,
        looks_like_probabilities,
        probabilities_message,
    )

    if array.dtype == object or not (np.issubdtype(array.dtype, np.number)
                                     or array.dtype == bool):
        raise ValueError(f"{file}: logits must be numeric; got dtype {array.dtype}.")
    if np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"{file}: logits must be real-valued; got dtype {array.dtype}.")
    if array.size and array.ndim <= 2:
        if inputs == "probabilities":
            array = logits_from_probabilities(array, f"{file}: logits (--inputs probabilities)")
        elif looks_like_probabilities(array):
            raise ValueError(
                probabilities_message(f"{file}: logits", array.shape)
                + hint
            )
    if array.ndim == 1 or (array.ndim == 2 and array.shape[1] == 1):
        if array.shape[0] == 0:
            raise ValueError(f"{file}: logits has no rows.")
        # a binary model's positive-class logits s: [0, s] per row (estimators/_validation.py)
        s = np.asarray(array, dtype=np.float64).reshape(-1)
        return np.stack([np.zeros_like(s), s], axis=1)
    if array.ndim != 2:
        raise ValueError(
            f"{file}: logits must be a 2-D array (n_samples, n_classes), or a binary model's "
            f"positive-class logits of shape (n_samples,) or (n_samples, 1); got shape "
            f"{array.shape}."
        )
    if array.shape[0] == 0:
        raise ValueError(f"{file}: logits has no rows.")
    return np.asarray(array, dtype=np.float64)


def _as_labels(array: np.ndarray, file: Path, n_samples: int) -> NDArray[np.int64]:
    if array.ndim != 1:
        raise ValueError(f"{file}: labels must be 1-D (n_samples,); got shape {array.shape}.")
    if array.shape[0] != n_samples:
        raise ValueError(
            f"{file}: {array.shape[0]} labels for {n_samples} logit rows; need one per row."
        )
    if array.dtype == bool or not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{file}: labels must be integer class indices; got dtype {array.dtype}.")
    if not np.issubdtype(array.dtype, np.integer):
        integral = np.isfinite(array) & (array == np.round(array))
        if not integral.all():
            raise ValueError(
                f"{file}: labels must be integer class indices; got non-integer values, "
                f"first few: {array[~integral][:5].tolist()}."
            )
    return array.astype(np.int64)
