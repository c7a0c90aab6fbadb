"""The trust layer's rows: every target split of one or more benchmark databases, by source group.

:func:`read_trust_rows` reads each database's target splits with every method's estimate
(NaN where a method has none), the true accuracy, the label-free signals recomputed from the
stored logits (:class:`~estimators.trust.shift_signals.ShiftSignals`, the same a user's
``estimate`` call computes) and two more label-free meta-features (the validation set's
over-confidence and ALSA-E's rectified fraction). Each row carries its *source group*
(:attr:`tasks.data.spec.DatasetSpec.source_group`) and whether its shift family is a declared
concept shift (:attr:`tasks.data.families.ShiftFamily.concept_shift`).

:func:`split_development` is the only way to the rows a fit or a choice may see: the rows of
the groups that are not sealed (:mod:`estimators.trust.sealed`). The sealed rows come back as
a :class:`SealedRows`, which lends its labels to nothing but :meth:`SealedRows.score`, the
report's one scoring of predictions made by models fit on development groups.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from estimators.trust.calibration_artifact import CalibrationTable
from estimators.trust.sealed import is_sealed
from estimators.trust.shift_signals import PANEL, ShiftSignals
from storage.logits import read_run_targets, read_val

__all__ = ["SealedRows", "TrustRows", "concept_shift_of", "read_trust_rows",
           "source_group_of", "split_development", "trust_rows_of"]

#: Label-free meta-features added to the signals of every row (beside
#: :data:`~estimators.trust.shift_signals.SIGNAL_NAMES`).
EXTRA_SIGNALS: tuple[str, ...] = ("val_overconfidence", "alsa_rectified_fraction")


def source_group_of(dataset: str) -> str:
    """The source group of a dataset key (its spec's ``source_group``; the key itself for a
    dataset the registry does not know, e.g. a user's own)."""
    from tasks.data.datasets import DATASETS

    spec = DATASETS.get(dataset)
    return spec.source_group if spec is not None else dataset


def concept_shift_of(dataset: str, family: str) -> bool:
    """Whether ``family`` is a declared concept shift of ``dataset`` (its implementation for the
    dataset's modality says ``concept_shift=True``); False for an unknown dataset or family."""
    from tasks.data.datasets import DATASETS
    from tasks.data.targets import family_implementation

    spec = DATASETS.get(dataset)
    if spec is None:
        return False
    try:
        return bool(family_implementation(family, spec.modality, dataset).concept_shift)
    except (KeyError, ValueError):
        return False


@dataclass(frozen=True)
class TrustRows:
    """Target splits as calibration rows.

    Attributes
    ----------
    table : CalibrationTable
        ``groups`` are the source groups; ``estimates`` hold every method found (NaN where a
        split has none); ``signals`` add :data:`EXTRA_SIGNALS`.
    keys : pandas.DataFrame
        ``database, run_key, split, dataset, backbone, shift_family, group, concept`` of each
        row, in the table's order.
    """

    table: CalibrationTable
    keys: pd.DataFrame

    def __len__(self) -> int:
        return len(self.table)

    def subset(self, mask: NDArray[np.bool_]) -> TrustRows:
        """The rows where ``mask`` is true."""
        return TrustRows(self.table.subset(mask), self.keys[mask].reset_index(drop=True))

    @property
    def concept(self) -> NDArray[np.bool_]:
        """Rows of a declared concept shift."""
        return self.keys.concept.to_numpy(dtype=bool)

    def group_names(self) -> list[str]:
        """The distinct source groups, sorted."""
        return sorted(set(self.table.groups.tolist()))


@dataclass(frozen=True, eq=False)
class SealedRows:
    """The sealed groups' rows: their signals and estimates can be predicted on, their labels
    are only ever compared with predictions by :meth:`score`.

    Attributes
    ----------
    inputs : TrustRows
        The rows with ``truth`` set to NaN (what a model may be applied to).
    """

    inputs: TrustRows
    _truth: NDArray[np.float64]

    def score(self, predictions: Mapping[str, NDArray[np.float64]]) -> pd.DataFrame:
        """Per row and prediction: ``group, dataset, shift_family, concept, name, estimate,
        truth, abs_error_pp``.

        Parameters
        ----------
        predictions : Mapping[str, ndarray of shape (n,)]
            Estimates of the sealed rows by name, from models fit on development rows.
        """
        frames = []
        for name, values in predictions.items():
            est = np.asarray(values, dtype=np.float64)
            if est.shape != self._truth.shape:
                raise ValueError(f"SealedRows.score: prediction {name!r} has shape {est.shape}; "
                                 f"expected {self._truth.shape} (one per sealed row).")
            frames.append(pd.DataFrame({
                "group": self.inputs.table.groups, "dataset": self.inputs.keys.dataset,
                "shift_family": self.inputs.keys.shift_family, "concept": self.inputs.concept,
                "name": name, "estimate": est, "truth": self._truth,
                "abs_error_pp": np.abs(est - self._truth) * 100}))
        return pd.concat(frames, ignore_index=True)

    def score_bands(self, bands: Mapping[str, tuple[NDArray[np.float64], NDArray[np.float64]]]
                    ) -> pd.DataFrame:
        """Per row and band: ``group, concept, name, low, high, covered, width_pp``."""
        frames = []
        for name, (low, high) in bands.items():
            lo, hi = np.asarray(low, np.float64), np.asarray(high, np.float64)
            frames.append(pd.DataFrame({
                "group": self.inputs.table.groups, "concept": self.inputs.concept,
                "name": name, "low": lo, "high": hi,
                "covered": (self._truth >= lo - 1e-12) & (self._truth <= hi + 1e-12),
                "low_holds": self._truth >= lo - 1e-12,
                "width_pp": (hi - lo) * 100}))
        return pd.concat(frames, ignore_index=True)


def split_development(rows: TrustRows) -> tuple[TrustRows, SealedRows]:
    """Development rows (every group that is not sealed) and the sealed rows.

    Every fit and every design choice of the trust layer reads the first only.
    """
    sealed = np.array([is_sealed(str(g)) for g in rows.table.groups], dtype=bool)
    dev = rows.subset(~sealed)
    held = rows.subset(sealed)
    truth = held.table.truth.copy()
    blind = CalibrationTable(held.table.groups, held.table.families,
                             np.full(len(truth), np.nan), held.table.signals,
                             held.table.estimates, held.table.sampling)
    return dev, SealedRows(TrustRows(blind, held.keys), truth)


def _val_overconfidence(logits: NDArray[np.float32], labels: NDArray[np.int64]) -> float:
    """Mean maximum softmax probability minus accuracy on the validation set."""
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=1, keepdims=True)
    p = np.exp(x)
    p /= p.sum(axis=1, keepdims=True)
    return float(p.max(axis=1).mean() - np.mean(x.argmax(axis=1) == labels))


def _rectified(diagnostics: str | None) -> float:
    if not diagnostics:
        return math.nan
    try:
        value = json.loads(diagnostics).get("rectified_fraction")
    except (ValueError, AttributeError):
        return math.nan
    return float(value) if isinstance(value, (int, float)) else math.nan


def _read_one(con: duckdb.DuckDBPyConnection, label: str,
              progress: Callable[[str], None] | None, run_keys: Sequence[str] | None = None,
              signals: bool = True) -> tuple[pd.DataFrame, list[dict[str, float]]]:
    only = "" if run_keys is None else (
        f" AND r.run_key IN ({', '.join('?' for _ in run_keys)})" if run_keys else " AND FALSE")
    rows = con.sql(
        "SELECT r.dataset, r.backbone, r.shift_family, r.run_key, r.split, r.method, "
        "r.estimated_accuracy, r.true_accuracy, r.interval_low, r.interval_high "
        f"FROM report_rows r WHERE r.shift_family IS NOT NULL{only} "
        "ORDER BY r.run_key, r.split, r.method",
        params=[str(k) for k in run_keys or ()]).df()
    diag = con.sql("SELECT run_key, split, diagnostics_json FROM estimates "
                   "WHERE method = 'alsa-e'").df()
    if rows.empty:
        return pd.DataFrame(), []
    indexed = rows.set_index(["run_key", "split", "method"])
    wide = indexed["estimated_accuracy"].unstack("method")
    low = indexed["interval_low"].unstack("method").reindex(wide.index)
    high = indexed["interval_high"].unstack("method").reindex(wide.index)
    first = rows.groupby(["run_key", "split"]).first().loc[wide.index]
    rect = {(r.run_key, r.split): _rectified(r.diagnostics_json) for r in diag.itertuples()}
    records: list[dict[str, float]] = []
    for run_key, block in first.groupby(level=0, sort=False):
        if not signals:  # the estimates alone: no logits read
            records.extend({} for _ in range(len(block)))
            continue
        if progress is not None:
            progress(f"{label}: {run_key} ({len(block)} splits)")
        val_logits, val_labels = read_val(con, str(run_key))
        over = _val_overconfidence(val_logits, val_labels)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            signals = ShiftSignals().fit(val_logits, val_labels)
            targets = read_run_targets(con, str(run_key))  # one query for the run's splits
            for _, split in block.index:
                known = {m: float(wide.loc[(run_key, split), m]) for m in PANEL
                         if m in wide.columns}
                target = targets[str(split)][0]
                rec = signals.transform(target, estimates=known).to_record()
                rec["val_overconfidence"] = over
                rec["alsa_rectified_fraction"] = rect.get((run_key, split), math.nan)
                records.append(rec)
    frame = first[["dataset", "backbone", "shift_family", "true_accuracy"]].copy()
    for m in wide.columns:
        frame[f"est:{m}"] = wide[m]
        frame[f"low:{m}"] = low[m]
        frame[f"high:{m}"] = high[m]
    frame["database"] = label
    return frame.reset_index(), records


def read_trust_rows(
    dbs: Sequence[str | Path], *, progress: Callable[[str], None] | None = None
) -> TrustRows:
    """Every target split of the databases ``dbs`` as :class:`TrustRows`.

    Parameters
    ----------
    dbs : sequence of path
        Benchmark databases, opened read-only (a run key in two databases is read from the
        first only).
    progress : callable, optional
        Called with one line per run (long reads print where they are).

    Raises
    ------
    FileNotFoundError
        If a database does not exist.
    ValueError
        If ``dbs`` is empty or the databases hold no target split.
    """
    if not dbs:
        raise ValueError("read_trust_rows needs at least one --db database; got none.")
    frames, records = [], []
    for db in dbs:
        path = Path(db)
        if not path.is_file():
            raise FileNotFoundError(
                f"The --db argument must name a benchmark database file; {str(path)!r} does "
                f"not exist.")
        con = duckdb.connect(str(path), read_only=True)
        try:
            frame, recs = _read_one(con, path.name, progress)
        except duckdb.CatalogException as exc:
            missing = str(exc).split("\n")[0]
            raise ValueError(
                f"The --db argument must name a benchmark database written by `alsa-bench "
                f"run`; {str(path)!r} is not one ({missing}).") from None
        finally:
            con.close()
        if not frame.empty:
            frames.append(frame)
            records.extend(recs)
    if not frames:
        raise ValueError(f"The databases {', '.join(map(str, dbs))} hold no target split with "
                         f"an estimate; run the benchmark first.")
    return _assemble(frames, records)


def trust_rows_of(con: duckdb.DuckDBPyConnection, label: str = "database", *,
                  run_keys: Sequence[str] | None = None, signals: bool = True) -> TrustRows:
    """:func:`read_trust_rows` of one database already open (the report's connection).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
    label : str, default "database"
        The ``database`` key of the rows.
    run_keys : sequence of str, optional
        Only these runs (a report's own): the same rows, in the same order, as the whole
        database's rows of these runs, without reading the other runs' logits.
    signals : bool, default True
        Compute the label-free signals (one pass over every target split's logits); False
        gives the rows with their estimates, truths and keys and no signal (what deciding
        whether a table can be measured needs).

    Raises
    ------
    ValueError
        If it holds no target split with an estimate (of these runs).
    """
    frame, records = _read_one(con, label, None, run_keys, signals)
    if frame.empty:
        raise ValueError("The database holds no target split with an estimate; run the "
                         "benchmark first.")
    return _assemble([frame], records)


def _assemble(frames: list[pd.DataFrame], records: list[dict[str, float]]) -> TrustRows:
    frame = pd.concat(frames, ignore_index=True)
    sig = pd.DataFrame(records)
    keep = ~frame.duplicated(["run_key", "split"]).to_numpy()
    frame, sig = frame[keep].reset_index(drop=True), sig[keep].reset_index(drop=True)
    methods = sorted(c[4:] for c in frame.columns if c.startswith("est:"))
    groups = np.array([source_group_of(d) for d in frame.dataset], dtype=str)
    concept = np.array([concept_shift_of(d, f) for d, f in zip(frame.dataset,
                                                                frame.shift_family)], bool)
    table = CalibrationTable(
        groups=groups,
        families=frame.shift_family.to_numpy(dtype=str),
        truth=frame.true_accuracy.to_numpy(dtype=np.float64),
        signals={c: sig[c].to_numpy(dtype=np.float64) for c in sig.columns},
        estimates={m: frame[f"est:{m}"].to_numpy(dtype=np.float64) for m in methods},
        sampling={m: (frame[f"low:{m}"].to_numpy(dtype=np.float64),
                      frame[f"high:{m}"].to_numpy(dtype=np.float64)) for m in methods},
    )
    keys = pd.DataFrame({"database": frame.database, "run_key": frame.run_key,
                         "split": frame.split, "dataset": frame.dataset,
                         "backbone": frame.backbone, "shift_family": frame.shift_family,
                         "group": groups, "concept": concept})
    return TrustRows(table, keys)


def save_rows(rows: TrustRows, path: str | Path) -> Path:
    """Write ``rows`` to one parquet file (the protocol's cache of the slow signal pass)."""
    t = rows.table
    frame = rows.keys.copy()
    frame["truth"] = t.truth
    for k, v in t.signals.items():
        frame[f"sig:{k}"] = v
    for k, v in t.estimates.items():
        frame[f"est:{k}"] = v
    for k, (lo, hi) in t.sampling.items():
        frame[f"low:{k}"] = lo
        frame[f"high:{k}"] = hi
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(target)
    return target


def load_rows(path: str | Path) -> TrustRows:
    """Read rows written by :func:`save_rows`."""
    frame = pd.read_parquet(path)

    def cols(prefix: str) -> dict[str, NDArray[np.float64]]:
        return {c[len(prefix):]: frame[c].to_numpy(dtype=np.float64)
                for c in frame.columns if c.startswith(prefix)}

    lows, highs = cols("low:"), cols("high:")
    table = CalibrationTable(
        groups=frame.group.to_numpy(dtype=str), families=frame.shift_family.to_numpy(dtype=str),
        truth=frame.truth.to_numpy(dtype=np.float64), signals=cols("sig:"),
        estimates=cols("est:"), sampling={k: (lows[k], highs[k]) for k in lows if k in highs})
    keys = frame[["database", "run_key", "split", "dataset", "backbone", "shift_family",
                  "group", "concept"]].reset_index(drop=True)
    return TrustRows(table, keys)
