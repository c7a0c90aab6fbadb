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

import ast
import hashlib
import json
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core.exceptions import CalibrationWarning
from .shift_band import BandModel, fit_band
from .shift_signals import PANEL, SIGNAL_NAMES
from .stacking import StackModel, fit_stack

__all__ = [
    "AUTO_MEMBER_SETS", "CALIBRATION_CODE", "CALIBRATION_ENV", "CALIBRATION_FORMAT",
    "Calibration", "CalibrationTable", "REFIT_COMMAND", "SHIPPED_CALIBRATION",
    "STATE_CALIBRATION_ENV",
    "active_calibration", "auto_key", "calibration_code_files", "code_hash", "fit_calibration",
    "leave_one_dataset_out", "load_calibration", "use_calibration",
]

CALIBRATION_FORMAT = "alsa-bench-calibration/1"
#: Environment variable naming a calibration file.
CALIBRATION_ENV = "ALSA_BENCH_CALIBRATION"
#: Set by ``alsa-bench`` (``flows.configure_environment``) to the same path when *it* named the
#: state folder's calibration in :data:`CALIBRATION_ENV`, so a warning blames no variable the
#: user never set.
STATE_CALIBRATION_ENV = "ALSA_BENCH_STATE_CALIBRATION"
#: The calibration shipped with the package (fit from ``make bench``'s database).
SHIPPED_CALIBRATION = Path(__file__).with_name("data") / "calibration.json"
#: The member sets ``auto`` is calibrated for: every label-free method, all but COT's
#: transport, and the cheap softmax panel.
AUTO_MEMBER_SETS: tuple[tuple[str, ...], ...] = (
    ("ac", "doc", "im", "atc-mc", "atc-ne", "cot", "alsa-g", "alsa-e"),
    ("ac", "doc", "im", "atc-mc", "atc-ne", "alsa-g", "alsa-e"),
    PANEL,
)


#: The command that refits the shipped calibration from ``make bench``'s database (the Makefile's
#: ``calibration`` target runs it).
REFIT_COMMAND = ("alsa-bench calibrate --db .alsa-bench/bench.duckdb "
                 "--out estimators/trust/data/calibration.json")
#: The code a calibration's :func:`code_hash` covers, as glob patterns relative to the
#: repository root: every module that turns a benchmark database into the artifact. That is the
#: reading of the database's rows (``tasks/report/trust_*.py``), the label-free signals and the
#: maths under them (``shift_signals`` with the temperature, confidence and label-shift maths),
#: and every fit of the trust layer (``estimators/trust/*.py``: the bands, the stacks, this
#: module, and any model a later fit adds there). Left out: the modules that only *use* an
#: artifact (``auto.py``, ``attach_band.py``, the package ``__init__``) and the methods whose
#: estimates the database holds (their code is the database's, recorded with every row).
CALIBRATION_CODE: tuple[str, ...] = (
    "estimators/trust/*.py",
    "estimators/maths/label_shift.py",
    "estimators/maths/temperature.py",
    "estimators/maths/confidence.py",
    "tasks/report/trust_*.py",
)
#: Files matched by :data:`CALIBRATION_CODE` that only read an artifact.
_NOT_CALIBRATION_CODE = frozenset({"estimators/trust/__init__.py", "estimators/trust/auto.py",
                                   "estimators/trust/attach_band.py"})
#: The repository root (the folder holding ``estimators/``).
_ROOT = Path(__file__).resolve().parents[2]


def calibration_code_files(root: str | os.PathLike[str] | None = None) -> list[str]:
    """The files :func:`code_hash` covers (:data:`CALIBRATION_CODE`), relative to ``root``."""
    base = _ROOT if root is None else Path(root)
    found: set[str] = set()
    for pattern in CALIBRATION_CODE:
        matched = [p.relative_to(base).as_posix() for p in base.glob(pattern) if p.is_file()]
        if not matched:
            raise FileNotFoundError(
                f"code_hash: no file under {str(base)!r} matches {pattern!r} "
                f"(CALIBRATION_CODE); the calibration code is not all there."
            )
        found.update(matched)
    return sorted(found - _NOT_CALIBRATION_CODE)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return tree


def code_hash(root: str | os.PathLike[str] | None = None) -> str:
    """SHA-256 of the code that fits a calibration (:data:`CALIBRATION_CODE`).

    Each file counts by its syntax tree without docstrings or comments
    (:func:`ast.dump`), so editing a docstring, a comment or the layout keeps a calibration
    current, while any change of what the code computes makes it stale. :func:`fit_calibration`
    records it in the artifact (``source["code_hash"]``); a test compares the shipped artifact's
    with the code's.

    Parameters
    ----------
    root : path, optional
        The repository root (default: the one holding this package).

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    base = _ROOT if root is None else Path(root)
    digest = hashlib.sha256()
    for name in calibration_code_files(base):
        tree = _without_docstrings(ast.parse((base / name).read_text(), filename=name))
        digest.update(name.encode() + b"\0" + ast.dump(tree).encode() + b"\0")
    return digest.hexdigest()


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
        Provenance: database, commit, ``code_hash`` (:func:`code_hash` of the code that fit it),
        rows per dataset, rows excluded and why.
    auto_default : tuple of str, optional
        The members ``auto`` runs when it is not told which (``Auto(methods=None)``, the CLI):
        the members of the combination the fit chose. None (an artifact that does not say):
        the members of the largest combination.
    """

    bands: Mapping[str, BandModel]
    stacks: Mapping[str, StackModel]
    source: Mapping[str, Any] = field(default_factory=dict)
    auto_default: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"format": CALIBRATION_FORMAT, "source": dict(self.source),
               "bands": {k: b.to_dict() for k, b in sorted(self.bands.items())},
               "stacks": {k: s.to_dict() for k, s in sorted(self.stacks.items())}}
        if self.auto_default is not None:
            out["auto_default"] = list(self.auto_default)
        return out

    def auto_members(self) -> tuple[str, ...]:
        """The members ``auto`` runs by default: :attr:`auto_default`, else the largest
        combination's (the artifact names them; no list in the code does).

        Raises
        ------
        ValueError
            If the artifact holds no combination for ``auto``.
        """
        if self.auto_default is not None:
            return tuple(self.stack_for(self.auto_default).members)
        if not self.stacks:
            raise ValueError("This calibration holds no combination for auto (its 'stacks' are "
                             "empty); refit it with `alsa-bench calibrate --db PATH`.")
        return max(self.stacks.values(), key=lambda s: len(s.members)).members

    def auto_member_sets(self) -> list[tuple[str, ...]]:
        """Every member set ``auto`` is calibrated for: the default first, then by size."""
        sets = sorted((s.members for s in self.stacks.values()), key=len, reverse=True)
        if not sets:
            return []
        default = self.auto_members()
        return [default, *(m for m in sets if set(m) != set(default))]

    def stale_reason(self, root: str | os.PathLike[str] | None = None) -> str | None:
        """Why this calibration no longer matches the code that would fit it, or None.

        Compares ``source["code_hash"]`` with :func:`code_hash` of the code at ``root``.
        """
        recorded = self.source.get("code_hash")
        if not recorded:
            return ("it records no code_hash: it was fit by code older than the hash "
                    "(estimators/trust/calibration_artifact.py, CALIBRATION_CODE)")
        now = code_hash(root)
        if recorded != now:
            return (f"it was fit by code {str(recorded)[:12]}, and the calibration code "
                    f"(CALIBRATION_CODE) is now {now[:12]}")
        return None

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
        default = data.get("auto_default")
        if default is not None and (isinstance(default, str) or not all(
                isinstance(m, str) for m in default)):
            raise ValueError(f"{where} is damaged (its 'auto_default' must be a list of method "
                             f"keys; got {default!r}); refit it with `alsa-bench calibrate "
                             f"--db PATH`.")
        return cls(bands, stacks, dict(data.get("source", {})),
                   None if default is None else tuple(default))

    def stack_for(self, members: Sequence[str]) -> Any:
        """The combination over ``members`` (raises naming the calibrated sets).

        Where ``alsa-bench calibrate`` chose a model class for ``auto`` by grouped
        cross-validation (``source["auto_model"]``,
        :func:`~estimators.trust.selector.auto_model_from_dict`: shrinkage toward the members'
        median, or a selector) and its members are ``members``, that model; else the ridge
        stack fit for ``members``.
        """
        wanted = set(members)
        chosen = self.source.get("auto_model")
        if isinstance(chosen, Mapping) and set(chosen.get("members", ())) == wanted:
            from .selector import auto_model_from_dict

            return auto_model_from_dict(chosen)
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


_USE_REMEDY = ("Name a file written by `alsa-bench calibrate` (its --out, or the state "
               "folder's calibration.json), or call use_calibration(None) for the shipped one.")


def use_calibration(path: str | os.PathLike[str] | None) -> None:
    """Use the calibration at ``path`` from now on (None: back to the default lookup).

    Raises
    ------
    FileNotFoundError, ValueError
        If ``path`` is missing or not a calibration: an explicit choice is checked now.
    """
    if path is not None:
        try:
            load_calibration(path)  # refuse a bad file now, not at the next band
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"use_calibration: {exc} {_USE_REMEDY}") from None
        except ValueError as exc:
            raise ValueError(f"use_calibration: {exc} {_USE_REMEDY}") from None
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
    ``ALSA_BENCH_CALIBRATION``) when it exists and is a calibration, else the shipped one; None
    when there is none. A damaged chosen file is not the one in use, so it is not named here
    (``auto``'s ``diagnostics["calibration"]``, the estimate stage's cache key)."""
    chosen = _chosen_path()
    if chosen is not None and chosen[0].is_file():
        try:
            _load_cached(chosen[0])
        except (OSError, ValueError):
            pass  # active_calibration() warns about it and reads the shipped file
        else:
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
    named_by, todo = _source_words(path, source)
    warnings.warn(
        f"The calibration file {str(path)!r} {named_by} {problem}; the shift bands and "
        f"auto use the shipped calibration ({SHIPPED_CALIBRATION}) instead. To fix it, {todo} "
        f"(`alsa-bench calibrate --db PATH` fits one from your own benchmark).",
        CalibrationWarning, stacklevel=3,
    )


def _source_words(path: Path, source: str) -> tuple[str, str]:
    """How a chosen file came to be chosen, and what fixes it, in words.

    ``alsa-bench`` itself names the state folder's ``calibration.json`` in
    ``ALSA_BENCH_CALIBRATION`` (and the same path in :data:`STATE_CALIBRATION_ENV`) after
    ``alsa-bench calibrate`` wrote it: the user set no variable then, so none is blamed."""
    if source == CALIBRATION_ENV and os.environ.get(STATE_CALIBRATION_ENV) == str(path):
        return ("(the state folder's calibration, which alsa-bench uses since `alsa-bench "
                "calibrate` wrote it)",
                "rerun `alsa-bench calibrate` (it rewrites the file) or delete the file")
    if source == CALIBRATION_ENV:
        return (f"named by {source}",
                f"unset {CALIBRATION_ENV} or point it to a file written by `alsa-bench "
                "calibrate`")
    return (f"named by {source}", "call use_calibration() with a file written by "
            "`alsa-bench calibrate`")


def _warn_if_stale(path: Path, source: str, calibration: Calibration) -> None:
    """Warn once per file that a chosen calibration was fit by other calibration code."""
    key = (str(path), "stale")
    if key in _WARNED:
        return
    _WARNED.add(key)
    try:
        reason = calibration.stale_reason()
    except FileNotFoundError:  # the calibration code is not all installed: nothing to compare
        return
    if reason is not None:
        warnings.warn(
            f"The calibration file {str(path)!r} {_source_words(path, source)[0]} is used, but "
            f"{reason}; its "
            f"signals may no longer mean what this code computes. Refit it with `alsa-bench "
            f"calibrate --db PATH`.", CalibrationWarning, stacklevel=3)


def active_calibration() -> Calibration | None:
    """The calibration in use (cached per file and modification time), or None.

    The chosen file (:func:`use_calibration`, else ``ALSA_BENCH_CALIBRATION``), else the shipped
    one. A chosen file that is missing or damaged does not stop anything: the shipped
    calibration is used, with one :class:`~estimators.core.exceptions.CalibrationWarning` per
    file that says what is wrong and what to do. A chosen file fit by other calibration code
    (:meth:`Calibration.stale_reason`) is used, with one such warning that says so. Only the
    bands and ``auto`` read it, and only when asked for (plain methods never do).
    """
    chosen = _chosen_path()
    if chosen is not None:
        path, source = chosen
        if not path.is_file():
            _fall_back(path, source, "does not exist")
        else:
            try:
                loaded = _load_cached(path)
            except (OSError, ValueError) as exc:
                _fall_back(path, source, f"cannot be read ({exc})")
            else:
                _warn_if_stale(path, source, loaded)
                return loaded
    if not SHIPPED_CALIBRATION.exists():
        return None
    return _load_cached(SHIPPED_CALIBRATION)


# --------------------------------------------------------------------------- fitting
def _finite(table: CalibrationTable, names: Sequence[str]) -> NDArray[np.bool_]:
    ok = np.isfinite(table.truth) & _signals_finite(table)
    for name in names:
        ok &= np.isfinite(table.estimates[name])
    return ok


def _signals_finite(table: CalibrationTable) -> NDArray[np.bool_]:
    """Rows whose every signal the bands and stacks read (:data:`SIGNAL_NAMES`) is a number (a
    NaN signal is never filled in: the row is left out of the fit, and :func:`fit_calibration`
    counts it in the artifact). Extra columns a table may carry (meta-features of other model
    classes) are not read here, so their NaNs leave no row out."""
    ok = np.ones(len(table), bool)
    for name, values in table.signals.items():
        if name in SIGNAL_NAMES:
            ok &= np.isfinite(values)
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
    auto_default: Sequence[str] | None = None,
) -> Calibration:
    """Fit every method's band and ``auto``'s combinations (and their bands) on ``table``.

    Rows with a NaN signal are left out of every fit (never filled in) and counted in
    ``source["rows_with_nan_signal"]``; ``source["code_hash"]`` records :func:`code_hash`.

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
    auto_default : sequence of str, optional
        The members ``auto`` runs by default (:attr:`Calibration.auto_default`); one of the
        fitted sets. None: the first set of ``member_sets`` that was fitted.
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
    info["rows_with_nan_signal"] = int((~_signals_finite(table)).sum())
    info["code_hash"] = code_hash()
    default: tuple[str, ...] | None
    if auto_default is not None:
        named = tuple(auto_default)
        if auto_key(named) not in stacks:
            raise ValueError(
                f"The 'auto_default' argument of fit_calibration must be one of the fitted "
                f"member sets ({'; '.join(stacks) or 'none'}); got {', '.join(named)}."
            )
        default = named
    else:
        default = next((tuple(m) for m in member_sets if auto_key(m) in stacks), None)
    return Calibration(bands, stacks, info, default)


def leave_one_dataset_out(
    table: CalibrationTable,
    *,
    level: float = 0.9,
    member_sets: Sequence[Sequence[str]] = AUTO_MEMBER_SETS,
    evaluate_only: NDArray[np.bool_] | None = None,
    calibrate: Callable[[NDArray[np.bool_]], Calibration] | None = None,
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
    calibrate : callable, optional
        ``calibrate(fit_rows)`` -> the :class:`Calibration` fit on the rows where the boolean
        mask ``fit_rows`` is true; default :func:`fit_calibration` of ``member_sets``. Each
        member set's ``auto`` is scored as :meth:`Calibration.stack_for` gives it to a user:
        the model the calibration chose for its member set (``alsa-bench calibrate``: shrinkage
        toward the members' median) where it records one, else the ridge stack.

    Returns
    -------
    list of dict
        One record per (row, method); a row with a NaN signal is scored as a user gets it
        (``auto``: its base member's estimate; the band: [0, 1]). ``row`` (index into
        ``table``), ``dataset``,
        ``family``, ``method``, ``estimate``, ``truth``, ``low``, ``high`` (the band at
        ``level``) and, where the table has it, ``sampling_low`` / ``sampling_high``.
    """
    fit_mask = np.ones(len(table), bool) if evaluate_only is None else ~evaluate_only
    records: list[dict[str, Any]] = []
    for name in np.unique(table.groups):
        held = table.groups == name
        calibration = (calibrate(fit_mask & ~held) if calibrate is not None else
                       fit_calibration(table.subset(fit_mask & ~held), member_sets=member_sets))
        rows = np.flatnonzero(held)
        sig = {k: v[held] for k, v in table.signals.items()}
        methods: dict[str, NDArray[np.float64]] = {
            m: table.estimates[m][held] for m in table.estimates if m in calibration.bands}
        # a row with a NaN signal is scored as a user would get it: auto's base member's
        # estimate uncorrected (auto.py) and the band [0, 1] (attach_band.py)
        nan_signal = ~_signals_finite(table.subset(held))
        for key, stack in calibration.stacks.items():
            model = calibration.stack_for(stack.members)  # what auto runs for these members
            estimates = {m: table.estimates[m][held] for m in model.members}
            methods[key] = np.where(nan_signal, estimates[model.base],
                                    model.predict(sig, estimates))
        for method, est in methods.items():
            low, high = calibration.bands[method].interval(sig, est, level)
            low, high = np.where(nan_signal, 0.0, low), np.where(nan_signal, 1.0, high)
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
