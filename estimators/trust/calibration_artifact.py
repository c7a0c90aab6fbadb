r"""The calibration artifact: every method's shift-aware band and ``auto``'s combinations.

(This module was ``estimators/calibration.py``; ALSA's calibration offset is
:mod:`estimators.methods.alsa.calibration_offset`, and fitting an artifact from a benchmark
database is :mod:`tasks.report.trust_calibration`.)

A :class:`Calibration` is learned from a benchmark's (estimate, truth) pairs
(:func:`fit_calibration`) and stored as a small JSON file: the package ships one fit from
``make bench``'s database (``estimators/trust/data/calibration.json``, its source commit and row
counts inside), and ``alsa-bench calibrate --db PATH`` fits one from a user's own benchmark
into their state folder. :func:`active_calibration` is the one in use: the file named by
:func:`use_calibration` (the CLI and the pipeline name the state folder's when it exists), else
the environment variable ``ALSA_BENCH_CALIBRATION``, else the shipped one.

:func:`leave_one_dataset_out` is the evidence: for each dataset it fits a calibration on all
the others and measures the band's coverage and width and ``auto``'s error on the one left out.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core.exceptions import CalibrationWarning
from .shift_band import BandModel, fit_band
from .shift_signals import PANEL
from .stacking import StackModel, fit_stack

__all__ = [
    "AUTO_MEMBER_SETS", "CALIBRATION_ENV", "CALIBRATION_FORMAT", "Calibration",
    "CalibrationTable", "SHIPPED_CALIBRATION", "active_calibration", "auto_key",
    "fit_calibration", "leave_one_dataset_out", "load_calibration", "use_calibration",
]

CALIBRATION_FORMAT = "alsa-bench-calibration/1"
#: Environment variable naming a calibration file.
CALIBRATION_ENV = "ALSA_BENCH_CALIBRATION"
#: The calibration shipped with the package (fit from ``make bench``'s database).
SHIPPED_CALIBRATION = Path(__file__).with_name("data") / "calibration.json"
#: The member sets ``auto`` is calibrated for: every label-free method, all but COT's
#: transport, and the cheap softmax panel.
AUTO_MEMBER_SETS: tuple[tuple[str, ...], ...] = (
    ("ac", "doc", "im", "atc-mc", "atc-ne", "cot", "alsa-g", "alsa-e"),
    ("ac", "doc", "im", "atc-mc", "atc-ne", "alsa-g", "alsa-e"),
    PANEL,
)


def auto_key(members: Sequence[str]) -> str:
    """The band key of ``auto`` over ``members``: ``"auto[ac+doc+...]"``."""
    return "auto[" + "+".join(members) + "]"


@dataclass(frozen=True)
class CalibrationTable:
    """Calibration rows: one per target split of a benchmark.

    Attributes
    ----------
    groups : ndarray of str, shape (n,)
        The dataset of each row (the unit of leave-one-dataset-out).
    families : ndarray of str, shape (n,)
        The shift family of each row.
    truth : ndarray of shape (n,)
        True target accuracy.
    signals : Mapping[str, ndarray]
        :meth:`~estimators.trust.shift_signals.SignalValues.to_record` of each row, one array per key.
    estimates : Mapping[str, ndarray]
        Each method's estimate (NaN where it has none).
    sampling : Mapping[str, tuple of ndarray]
        Each method's sampling interval ``(low, high)`` at 0.9, where known (for comparison).
    """

    groups: NDArray[Any]
    families: NDArray[Any]
    truth: NDArray[np.float64]
    signals: Mapping[str, NDArray[np.float64]]
    estimates: Mapping[str, NDArray[np.float64]]
    sampling: Mapping[str, tuple[NDArray[np.float64], NDArray[np.float64]]] = field(
        default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.truth)
        for name, arr in [("groups", self.groups), ("families", self.families),
                          *[(f"signals[{k!r}]", v) for k, v in self.signals.items()],
                          *[(f"estimates[{k!r}]", v) for k, v in self.estimates.items()]]:
            if len(arr) != n:
                raise ValueError(
                    f"CalibrationTable: {name} has {len(arr)} rows; expected {n} (one per "
                    f"row of 'truth')."
                )

    def __len__(self) -> int:
        return len(self.truth)

    def subset(self, mask: NDArray[np.bool_]) -> CalibrationTable:
        """The rows where ``mask`` is true."""
        return CalibrationTable(
            self.groups[mask], self.families[mask], self.truth[mask],
            {k: v[mask] for k, v in self.signals.items()},
            {k: v[mask] for k, v in self.estimates.items()},
            {k: (lo[mask], hi[mask]) for k, (lo, hi) in self.sampling.items()},
        )


@dataclass(frozen=True)
class Calibration:
    """Bands (by estimator key) and ``auto``'s combinations (by member set).

    Attributes
    ----------
    bands : Mapping[str, BandModel]
    stacks : Mapping[str, StackModel]
        Keyed by :func:`auto_key`.
    source : Mapping[str, Any]
        Provenance: database, commit, rows per dataset, rows excluded and why.
    """

    bands: Mapping[str, BandModel]
    stacks: Mapping[str, StackModel]
    source: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"format": CALIBRATION_FORMAT, "source": dict(self.source),
                "bands": {k: b.to_dict() for k, b in sorted(self.bands.items())},
                "stacks": {k: s.to_dict() for k, s in sorted(self.stacks.items())}}

    def digest(self) -> str:
        """SHA-256 of the canonical JSON (what a cache key of the estimates includes)."""
        text = json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically (a temporary file renamed over ``path``)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True, allow_nan=False))
        os.replace(tmp, target)
        return target

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "calibration") -> Calibration:
        if not isinstance(data, Mapping) or data.get("format") != CALIBRATION_FORMAT:
            got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise ValueError(
                f"{where} is not an alsa-bench calibration: expected format "
                f"{CALIBRATION_FORMAT!r}, got {got!r}. Refit it with `alsa-bench calibrate "
                f"--db PATH`."
            )
        try:
            bands = {str(k): BandModel.from_dict(v) for k, v in data["bands"].items()}
            stacks = {str(k): StackModel.from_dict(v) for k, v in data["stacks"].items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{where} is damaged ({exc}); refit it with `alsa-bench "
                             f"calibrate --db PATH`.") from None
        return cls(bands, stacks, dict(data.get("source", {})))

    def stack_for(self, members: Sequence[str]) -> StackModel:
        """The combination over ``members`` (raises naming the calibrated sets)."""
        wanted = set(members)
        for stack in self.stacks.values():
            if set(stack.members) == wanted:
                return stack
        sets = "; ".join(", ".join(s.members) for s in self.stacks.values()) or "none"
        raise ValueError(
            f"The 'methods' parameter of Auto must be a member set the calibration was fit "
            f"for ({sets}); got {', '.join(members)}."
        )


def load_calibration(path: str | os.PathLike[str]) -> Calibration:
    """Read a calibration file (clear errors for a missing or foreign file)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"calibration file {str(p)!r} does not exist.") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"calibration file {str(p)!r} is not JSON ({exc}).") from None
    return Calibration.from_dict(data, where=f"calibration file {str(p)!r}")


_ACTIVE: dict[str, Any] = {"path": None, "loaded": None}
#: (file, what is wrong) pairs already warned about: one warning per bad file and process.
_WARNED: set[tuple[str, str]] = set()


def use_calibration(path: str | os.PathLike[str] | None) -> None:
    """Use the calibration at ``path`` from now on (None: back to the default lookup).

    Raises
    ------
    FileNotFoundError, ValueError
        If ``path`` is missing or not a calibration: an explicit choice is checked now.
    """
    if path is not None:
        load_calibration(path)  # refuse a bad file now, not at the next band
    _ACTIVE["path"] = None if path is None else str(path)
    _ACTIVE["loaded"] = None


def _chosen_path() -> tuple[Path, str] | None:
    """The file chosen by :func:`use_calibration` or ``ALSA_BENCH_CALIBRATION``, and by which."""
    if _ACTIVE["path"]:
        return Path(_ACTIVE["path"]), "use_calibration()"
    named = os.environ.get(CALIBRATION_ENV)
    return (Path(named), CALIBRATION_ENV) if named else None


def active_calibration_path() -> Path | None:
    """The file :func:`active_calibration` reads: the chosen one (:func:`use_calibration`, else
    ``ALSA_BENCH_CALIBRATION``) when it exists, else the shipped one; None when there is none."""
    chosen = _chosen_path()
    if chosen is not None and chosen[0].is_file():
        return chosen[0]
    return SHIPPED_CALIBRATION if SHIPPED_CALIBRATION.exists() else None


def _load_cached(path: Path) -> Calibration:
    stamp = (str(path), path.stat().st_mtime_ns)
    loaded = _ACTIVE["loaded"]
    if loaded is None or loaded[0] != stamp:
        _ACTIVE["loaded"] = (stamp, load_calibration(path))
    result: Calibration = _ACTIVE["loaded"][1]
    return result


def _fall_back(path: Path, source: str, problem: str) -> None:
    """Warn once per file and problem that the shipped calibration is used instead."""
    if (str(path), problem) in _WARNED:
        return
    _WARNED.add((str(path), problem))
    todo = (f"unset {CALIBRATION_ENV} or point it to a file written by `alsa-bench calibrate`"
            if source == CALIBRATION_ENV else
            "call use_calibration() with a file written by `alsa-bench calibrate`")
    warnings.warn(
        f"The calibration file {str(path)!r} named by {source} {problem}; the shift bands and "
        f"auto use the shipped calibration ({SHIPPED_CALIBRATION}) instead. To fix it, {todo} "
        f"(`alsa-bench calibrate --db PATH` fits one from your own benchmark).",
        CalibrationWarning, stacklevel=3,
    )


def active_calibration() -> Calibration | None:
    """The calibration in use (cached per file and modification time), or None.

    The chosen file (:func:`use_calibration`, else ``ALSA_BENCH_CALIBRATION``), else the shipped
    one. A chosen file that is missing or damaged does not stop anything: the shipped
    calibration is used, with one :class:`~estimators.core.exceptions.CalibrationWarning` per
    file that says what is wrong and what to do. Only the bands and ``auto`` read it, and only
    when asked for (plain methods never do).
    """
    chosen = _chosen_path()
    if chosen is not None:
        path, source = chosen
        if not path.is_file():
            _fall_back(path, source, "does not exist")
        else:
            try:
                return _load_cached(path)
            except (OSError, ValueError) as exc:
                _fall_back(path, source, f"cannot be read ({exc})")
    if not SHIPPED_CALIBRATION.exists():
        return None
    return _load_cached(SHIPPED_CALIBRATION)


# --------------------------------------------------------------------------- fitting
def _finite(table: CalibrationTable, names: Sequence[str]) -> NDArray[np.bool_]:
    ok = np.isfinite(table.truth)
    for name in names:
        ok &= np.isfinite(table.estimates[name])
    return ok


def _auto_oof(table: CalibrationTable, members: Sequence[str]) -> NDArray[np.float64]:
    """``auto``'s out-of-fold predictions: each dataset's from a stack fit on the others."""
    pred = np.full(len(table), np.nan)
    for name in np.unique(table.groups):
        held = table.groups == name
        fit = table.subset(~held)
        model = fit_stack(fit.signals, fit.estimates, fit.truth, fit.groups, members)
        pred[held] = model.predict({k: v[held] for k, v in table.signals.items()},
                                   {m: table.estimates[m][held] for m in members})
    return pred


def fit_calibration(
    table: CalibrationTable,
    *,
    member_sets: Sequence[Sequence[str]] = AUTO_MEMBER_SETS,
    source: Mapping[str, Any] | None = None,
) -> Calibration:
    """Fit every method's band and ``auto``'s combinations (and their bands) on ``table``.

    ``auto``'s band is fit on its out-of-fold predictions (each dataset's from a combination
    fit without it), so that its width reflects the error of a combination that has not seen
    the data.

    Parameters
    ----------
    table : CalibrationTable
        At least 3 datasets (the combination's penalty is chosen leave-one-dataset-out inside
        each leave-one-dataset-out fold of its band).
    member_sets : sequence of sequences of str
        The member sets to fit ``auto`` for; a set with a method absent from ``table`` is
        skipped.
    source : Mapping, optional
        Provenance recorded in the artifact.
    """
    n_groups = len(np.unique(table.groups))
    if n_groups < 3:
        raise ValueError(
            f"fit_calibration needs rows from at least 3 datasets (leave-one-dataset-out inside "
            f"leave-one-dataset-out); got {n_groups}."
        )
    bands: dict[str, BandModel] = {}
    for name, values in table.estimates.items():
        ok = _finite(table, [name])
        if len(np.unique(table.groups[ok])) >= 2:
            bands[name] = fit_band({k: v[ok] for k, v in table.signals.items()}, values[ok],
                                   table.truth[ok], table.groups[ok])
    stacks: dict[str, StackModel] = {}
    for members in member_sets:
        members = tuple(members)
        if not all(m in table.estimates for m in members):
            continue
        ok = _finite(table, members)
        rows = table.subset(ok)
        stacks[auto_key(members)] = fit_stack(rows.signals, rows.estimates, rows.truth,
                                              rows.groups, members)
        oof = _auto_oof(rows, members)
        bands[auto_key(members)] = fit_band(rows.signals, oof, rows.truth, rows.groups)
    info = dict(source or {})
    names, counts = np.unique(table.groups, return_counts=True)
    info.setdefault("rows", int(len(table)))
    info.setdefault("rows_per_dataset", {str(k): int(c) for k, c in zip(names, counts)})
    return Calibration(bands, stacks, info)


def leave_one_dataset_out(
    table: CalibrationTable,
    *,
    level: float = 0.9,
    member_sets: Sequence[Sequence[str]] = AUTO_MEMBER_SETS,
    evaluate_only: NDArray[np.bool_] | None = None,
) -> list[dict[str, Any]]:
    """Fit on all datasets but one, evaluate on the one left out, for every dataset.

    Parameters
    ----------
    table : CalibrationTable
    level : float, default 0.9
    member_sets : sequence of sequences of str
    evaluate_only : ndarray of bool, optional
        Rows that are evaluated but never fitted on (e.g. a known concept shift); they are
        left out of every fit.

    Returns
    -------
    list of dict
        One record per (row, method): ``row`` (index into ``table``), ``dataset``,
        ``family``, ``method``, ``estimate``, ``truth``, ``low``, ``high`` (the band at
        ``level``) and, where the table has it, ``sampling_low`` / ``sampling_high``.
    """
    fit_mask = np.ones(len(table), bool) if evaluate_only is None else ~evaluate_only
    records: list[dict[str, Any]] = []
    for name in np.unique(table.groups):
        held = table.groups == name
        calibration = fit_calibration(table.subset(fit_mask & ~held), member_sets=member_sets)
        rows = np.flatnonzero(held)
        sig = {k: v[held] for k, v in table.signals.items()}
        methods: dict[str, NDArray[np.float64]] = {
            m: table.estimates[m][held] for m in table.estimates if m in calibration.bands}
        for key, stack in calibration.stacks.items():
            methods[key] = stack.predict(sig, {m: table.estimates[m][held] for m in stack.members})
        for method, est in methods.items():
            low, high = calibration.bands[method].interval(sig, est, level)
            s_low, s_high = table.sampling.get(method, (None, None))
            for j, i in enumerate(rows):
                rec = {"row": int(i), "dataset": str(name), "family": str(table.families[i]),
                       "method": method, "estimate": float(est[j]), "truth": float(table.truth[i]),
                       "low": float(low[j]), "high": float(high[j])}
                if s_low is not None and s_high is not None:
                    rec["sampling_low"] = float(s_low[i])
                    rec["sampling_high"] = float(s_high[i])
                records.append(rec)
    return records
