"""Synthetic releases: the marker a generated dataset carries, and keeping it apart from real data.

``benchmarks/synth_release.py`` writes a stand-in for an online dataset's release, at real size,
in the exact on-disk format its loader reads, so that the pipeline's cost can be measured on a
machine without the data. Such a release is *marked*: the file
``<data root>/SYNTHETIC_RELEASE-<dataset>.json`` (:func:`marker_path`) records the generator,
seed, scale and commit. It is written before the first data file (``"complete": false``) and
rewritten when the last one is out, so an interrupted generation still marks the folder.
``alsa-bench fetch`` removes the marker of a dataset it installs (:func:`clear_marker`).

Real and generated data never mix in one state folder. The first run of a dataset records where
its data came from in ``<state>/data-provenance.json`` (:func:`check_provenance`); a later run whose
data root holds the other kind of release for that dataset is refused while the state folder
holds results of it. A state folder made before this record existed holds only real results.
Reports read the same record (:func:`synthetic_datasets`) and put :data:`BANNER` on top.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

__all__ = [
    "BANNER",
    "PROVENANCE_FILE",
    "SyntheticMixError",
    "check_provenance",
    "clear_marker",
    "is_synthetic",
    "marker_path",
    "read_marker",
    "read_provenance",
    "synthetic_datasets",
    "write_marker",
]

#: What every report built on a synthetic release says at its top.
BANNER: Final[str] = "**SYNTHETIC DATA — not the paper's numbers**"
#: The state folder's record of each dataset's data kind, relative to the state folder.
PROVENANCE_FILE: Final[str] = "data-provenance.json"
_MARKER_PREFIX: Final[str] = "SYNTHETIC_RELEASE-"


class SyntheticMixError(ValueError):
    """A run would put results of synthetic and real data of one dataset in one state folder."""


def marker_path(root: Path | str, dataset: str) -> Path:
    """``<root>/SYNTHETIC_RELEASE-<dataset>.json``: the marker of a generated release (no IO).

    Parameters
    ----------
    root : Path or str
        Data root (the folder the dataset's loaders read).
    dataset : str
        Dataset registry key.

    Returns
    -------
    Path
    """
    if not dataset or "/" in dataset or "\\" in dataset or dataset.startswith("."):
        raise ValueError(f"dataset must be a registry key; got {dataset!r}.")
    return Path(root) / f"{_MARKER_PREFIX}{dataset}.json"


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(dict(payload), handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_marker(root: Path | str, dataset: str, info: Mapping[str, Any]) -> Path:
    """Write (atomically) the marker of a generated release of ``dataset`` under ``root``.

    Parameters
    ----------
    root : Path or str
        Data root.
    dataset : str
        Dataset registry key.
    info : mapping
        What to record (generator, seed, scale, commit, complete, ...); ``dataset`` is added.

    Returns
    -------
    Path
        The marker file.
    """
    path = marker_path(root, dataset)
    _write_json(path, {**info, "dataset": dataset})
    return path


def read_marker(root: Path | str, dataset: str) -> dict[str, Any] | None:
    """The marker of a generated release of ``dataset`` under ``root``, or None if there is none.

    A marker that is not readable JSON still marks the release (``{"unreadable": true}``): the
    data is treated as synthetic rather than as the real release.
    """
    path = marker_path(root, dataset)
    if not path.is_file():
        return None
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {"dataset": dataset, "unreadable": True}
    return payload if isinstance(payload, dict) else {"dataset": dataset, "unreadable": True}


def is_synthetic(root: Path | str, dataset: str) -> bool:
    """Whether the data root holds a generated (marked) release of ``dataset``."""
    return marker_path(root, dataset).is_file()


def clear_marker(root: Path | str, dataset: str) -> bool:
    """Remove the marker of ``dataset`` (the real release was installed); True if one was there."""
    path = marker_path(root, dataset)
    existed = path.is_file()
    path.unlink(missing_ok=True)
    return existed


def read_provenance(state: Path | str) -> dict[str, dict[str, Any]]:
    """The state folder's record ``{dataset: {"synthetic": bool, ...}}`` ({} when absent).

    Raises
    ------
    ValueError
        If the record exists but is not a JSON object (the file is named).
    """
    path = Path(state) / PROVENANCE_FILE
    if not path.is_file():
        return {}
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(
            f"the state folder's data record {str(path)!r} is not readable JSON ({exc}); "
            f"expected {{dataset: {{\"synthetic\": true|false}}}}."
        ) from None
    if not isinstance(payload, dict):
        raise ValueError(
            f"the state folder's data record {str(path)!r} must hold a JSON object; got "
            f"{type(payload).__name__}."
        )
    return {str(k): dict(v) for k, v in payload.items() if isinstance(v, dict)}


def synthetic_datasets(state: Path | str, datasets: Iterable[str] | None = None) -> list[str]:
    """The datasets (of ``datasets``, default all) whose results in ``state`` are synthetic.

    Parameters
    ----------
    state : Path or str
        State folder.
    datasets : iterable of str, optional
        Only these datasets.

    Returns
    -------
    list of str
        Sorted dataset keys recorded as synthetic in :data:`PROVENANCE_FILE`.
    """
    try:
        record = read_provenance(state)
    except ValueError:
        return []
    wanted = None if datasets is None else set(datasets)
    return sorted(
        name for name, entry in record.items()
        if entry.get("synthetic") and (wanted is None or name in wanted)
    )


def _kind(synthetic: bool) -> str:
    return "synthetic (generated)" if synthetic else "real"


def check_provenance(
    state: Path | str,
    dataset: str,
    root: Path | str,
    *,
    has_results: bool,
) -> bool:
    """Refuse to mix real and synthetic data of ``dataset`` in one state folder; record the kind.

    Parameters
    ----------
    state : Path or str
        State folder (``$ALSA_BENCH_HOME``).
    dataset : str
        Dataset registry key.
    root : Path or str
        Data root the run reads (synthetic when :func:`is_synthetic`).
    has_results : bool
        Whether the state folder's database holds runs of ``dataset``. Without a record, such
        results are real ones (the record is older than any synthetic release).

    Returns
    -------
    bool
        Whether the data is synthetic. The kind is written to ``<state>/data-provenance.json``.

    Raises
    ------
    SyntheticMixError
        If the state folder holds results of ``dataset`` made from the other kind of data: one
        line naming the state folder, the dataset, both kinds and what to do.
    """
    synthetic = is_synthetic(root, dataset)
    record = read_provenance(state)
    entry = record.get(dataset)
    before = bool(entry.get("synthetic")) if entry is not None else False
    if has_results and before != synthetic:
        marker = marker_path(root, dataset)
        raise SyntheticMixError(
            f"state folder {str(state)!r} holds results of dataset {dataset!r} made from "
            f"{_kind(before)} data, but the data root {str(root)!r} now holds "
            f"{_kind(synthetic)} data"
            + (f" (marker {str(marker)!r})" if synthetic else "")
            + "; real and generated data never mix in one state folder: point ALSA_BENCH_HOME "
            f"at another state folder for this run (or delete this one's results of "
            f"{dataset!r})."
        )
    if entry is None or before != synthetic:
        info: dict[str, Any] = {"synthetic": synthetic}
        if synthetic:
            info["marker"] = read_marker(root, dataset)
        record[dataset] = info
        _write_json(Path(state) / PROVENANCE_FILE, record)
    return synthetic
