"""From a benchmark database to the shift-aware bands and ``auto`` (:mod:`estimators.trust.calibration_artifact`).

:func:`calibration_table` reads every target split of a database, with each method's estimate,
its true accuracy and the label-free signals recomputed from the stored logits (the same
:class:`~estimators.trust.shift_signals.ShiftSignals` a user's ``estimate`` call computes).
:func:`calibrate_database` fits the artifact (``alsa-bench calibrate``; the shipped one is fit by
``make calibration`` from ``make bench``'s database), and :func:`trust_tables` the
leave-one-dataset-out evidence of the report's "Which estimate to trust" section.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from estimators.trust.calibration_artifact import (
    AUTO_MEMBER_SETS,
    Calibration,
    CalibrationTable,
    auto_key,
    fit_calibration,
    leave_one_dataset_out,
)
from estimators.trust.shift_signals import PANEL, ShiftSignals
from storage.logits import read_target_logits, read_val
from tasks.report.benchmark_doc import _git_commit

__all__ = ["CONCEPT_SHIFTS", "calibrate_database", "calibration_table", "trust_tables"]

#: (dataset, shift family) pairs whose shift changes the meaning of the labels: no label-free
#: band can see them; they are evaluated (as the counterexample they are) but never fit on.
CONCEPT_SHIFTS: tuple[tuple[str, str], ...] = (("sotu-party", "temporal"),)
#: The methods a calibration covers: every label-free method of the benchmark.
CALIBRATED_METHODS: tuple[str, ...] = AUTO_MEMBER_SETS[0]


def _rows(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    return con.sql(
        "SELECT r.dataset, r.shift_family, r.run_key, r.split, r.method, r.estimated_accuracy, "
        "r.true_accuracy, r.interval_low, r.interval_high, r.interval_level FROM report_rows r "
        "WHERE r.shift_family IS NOT NULL ORDER BY r.run_key, r.split, r.method"
    ).df()


def calibration_table(
    con: duckdb.DuckDBPyConnection, *, methods: Sequence[str] = CALIBRATED_METHODS
) -> tuple[CalibrationTable, pd.DataFrame]:
    """Every target split of the database as calibration rows.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open (read-only is fine) benchmark database.
    methods : sequence of str
        Methods whose estimates the table carries; a split missing one is dropped.

    Returns
    -------
    table : CalibrationTable
    keys : pandas.DataFrame
        ``run_key, split, dataset, shift_family`` of each row, in the table's order.

    Raises
    ------
    ValueError
        If the database holds no target split with an estimate of every method.
    """
    rows = _rows(con)
    rows = rows[rows.method.isin(methods)]
    wide = rows.pivot_table(index=["run_key", "split"], columns="method",
                            values="estimated_accuracy", dropna=False)
    missing = [m for m in methods if m not in wide.columns]
    if missing:
        raise ValueError(
            f"The database has no estimates of {', '.join(missing)}; a calibration needs every "
            f"one of {', '.join(methods)} (run `alsa-bench run` with the default methods)."
        )
    wide = wide[list(methods)].dropna()
    if wide.empty:
        raise ValueError("The database holds no target split with an estimate of every "
                         f"method of {', '.join(methods)}; run the benchmark first.")
    first = rows.groupby(["run_key", "split"]).first()
    meta = first.loc[wide.index, ["dataset", "shift_family", "true_accuracy"]]
    low = rows.pivot_table(index=["run_key", "split"], columns="method", values="interval_low",
                           dropna=False).reindex(wide.index)
    high = rows.pivot_table(index=["run_key", "split"], columns="method",
                            values="interval_high", dropna=False).reindex(wide.index)
    records: list[dict[str, float]] = []
    for run_key, group in meta.groupby(level=0, sort=False):
        val_logits, val_labels = read_val(con, str(run_key))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            signals = ShiftSignals().fit(val_logits, val_labels)
            for _, split in group.index:
                known = {m: float(wide.loc[(run_key, split), m]) for m in PANEL if m in methods}
                target = read_target_logits(con, str(run_key), str(split))
                records.append(signals.transform(target, estimates=known).to_record())
    sig = pd.DataFrame(records)
    index = meta.index
    table = CalibrationTable(
        groups=meta.dataset.to_numpy(dtype=str),
        families=meta.shift_family.to_numpy(dtype=str),
        truth=meta.true_accuracy.to_numpy(dtype=np.float64),
        signals={c: sig[c].to_numpy(dtype=np.float64) for c in sig.columns},
        estimates={m: wide[m].to_numpy(dtype=np.float64) for m in methods},
        sampling={m: (low[m].to_numpy(dtype=np.float64), high[m].to_numpy(dtype=np.float64))
                  for m in methods if m in low.columns and m in high.columns},
    )
    keys = pd.DataFrame({"run_key": index.get_level_values(0), "split": index.get_level_values(1),
                         "dataset": table.groups, "shift_family": table.families})
    return table, keys


def concept_mask(table: CalibrationTable,
                 concept: Sequence[tuple[str, str]] = CONCEPT_SHIFTS) -> np.ndarray:
    """Rows of a known concept shift (evaluated, never fit on)."""
    mask = np.zeros(len(table), bool)
    for dataset, family in concept:
        mask |= (table.groups == dataset) & (table.families == family)
    return mask


def calibrate_database(
    db: str | Path,
    *,
    concept: Sequence[tuple[str, str]] = CONCEPT_SHIFTS,
) -> Calibration:
    """Fit the bands and ``auto`` from the benchmark database at ``db``.

    Parameters
    ----------
    db : path
        A benchmark database (``.alsa-bench/bench.duckdb`` or a user's own), opened read-only.
    concept : sequence of (dataset, family)
        Known concept shifts: left out of the fit (recorded in the artifact).

    Raises
    ------
    FileNotFoundError
        If ``db`` does not exist.
    ValueError
        If it holds fewer than 3 datasets with every method's estimates.
    """
    path = Path(db)
    if not path.is_file():
        raise FileNotFoundError(
            f"The --db argument must name a benchmark database file; {str(path)!r} does not exist."
        )
    con = duckdb.connect(str(path), read_only=True)
    try:
        table, _ = calibration_table(con)
    finally:
        con.close()
    excluded = concept_mask(table, concept)
    fit_rows = table.subset(~excluded)
    names, counts = np.unique(fit_rows.groups, return_counts=True)
    source = {
        "database": path.name,
        "commit": _git_commit(),
        "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "rows": int(len(fit_rows)),
        "rows_per_dataset": {str(k): int(c) for k, c in zip(names, counts)},
        "excluded_concept_shift_rows": int(excluded.sum()),
        "excluded_concept_shifts": [f"{d}/{f}" for d, f in concept],
        "level_note": "bands hold for any level in [0.0, 0.998]; calibrated on these rows",
    }
    return fit_calibration(fit_rows, source=source)


def trust_tables(
    table: CalibrationTable,
    *,
    concept: Sequence[tuple[str, str]] = CONCEPT_SHIFTS,
    level: float = 0.9,
) -> dict[str, pd.DataFrame]:
    """Leave-one-dataset-out evidence for the report's "Which estimate to trust".

    Returns
    -------
    dict of DataFrame
        ``"auto"``: per dataset (and pooled), ``auto``'s MAE per member set, the best single
        method and its MAE, and the oracle (the per-row best method); ``"band"``: per method
        and dataset, the band's held-out coverage and mean width (pp) beside the sampling
        interval's, the MAE, width / MAE, and the constant band's width; ``"families"``: the
        same MAE comparison per dataset and shift family. Known concept shifts are separate rows
        (dataset ``"<name> (concept shift)"``), evaluated but never fit on.
    """
    excluded = concept_mask(table, concept)
    records = pd.DataFrame(leave_one_dataset_out(table, level=level, evaluate_only=excluded))
    records["dataset"] = np.where(excluded[records.row], records.dataset + " (concept shift)",
                                  records.dataset)
    records["abs_error"] = (records.estimate - records.truth).abs() * 100
    records["covered"] = (records.truth >= records.low - 1e-12) & (
        records.truth <= records.high + 1e-12)
    records["width"] = (records.high - records.low) * 100
    if "sampling_low" in records:
        inside = (records.truth >= records.sampling_low) & (records.truth <= records.sampling_high)
        records["sampling_covered"] = np.where(records.sampling_low.notna(), inside, np.nan)
        records["sampling_width"] = (records.sampling_high - records.sampling_low) * 100
    singles = [m for m in table.estimates]
    autos = {auto_key(s): "auto" if i == 0 else ("auto (no COT)" if i == 1 else "auto (softmax)")
             for i, s in enumerate(AUTO_MEMBER_SETS)}
    records["method"] = records.method.map(lambda m: autos.get(m, m))

    mae = records.pivot_table(index="row", columns="method", values="abs_error")
    row_dataset = records.groupby("row").dataset.first()
    row_family = records.groupby("row").family.first()

    def summarise(by: pd.Series) -> pd.DataFrame:
        per = mae.groupby(by).mean()
        out = pd.DataFrame(index=per.index)
        for name in autos.values():
            if name in per:
                out[f"{name} MAE"] = per[name]
        out["best single"] = per[singles].idxmin(axis=1)
        out["best single MAE"] = per[singles].min(axis=1)
        out["oracle MAE"] = mae[singles].min(axis=1).groupby(by).mean()
        out["rows"] = mae.groupby(by).size()
        return out

    auto_table = summarise(row_dataset)
    fit_rows = ~row_dataset.str.endswith("(concept shift)")
    pooled = mae[fit_rows.to_numpy()].mean()
    auto_table.loc["pooled (fit datasets)"] = {
        **{f"{n} MAE": pooled[n] for n in autos.values() if n in pooled},
        "best single": pooled[singles].idxmin(), "best single MAE": pooled[singles].min(),
        "oracle MAE": mae[singles][fit_rows.to_numpy()].min(axis=1).mean(),
        "rows": int(fit_rows.sum())}
    families = summarise(row_dataset + " / " + row_family)

    band = records.groupby(["method", "dataset"]).agg(
        coverage=("covered", "mean"), width_pp=("width", "mean"), mae_pp=("abs_error", "mean"),
        rows=("row", "size"))
    if "sampling_covered" in records:
        sampling = records.groupby(["method", "dataset"]).agg(
            sampling_coverage=("sampling_covered", "mean"),
            sampling_width_pp=("sampling_width", "mean"))
        band = band.join(sampling)
    band["width / MAE"] = band.width_pp / band.mae_pp
    fit_truth = table.truth[~excluded]
    constant = {}
    for m in singles:
        err = (fit_truth - table.estimates[m][~excluded]) * 100
        constant[m] = float(np.quantile(err, 0.95) - np.quantile(err, 0.05))
    band["constant band width_pp"] = [constant.get(m, np.nan) for m, _ in band.index]
    return {"auto": auto_table.reset_index(names="dataset"),
            "band": band.reset_index(),
            "families": families.reset_index(names="dataset / family")}


def trust_markdown(tables: dict[str, pd.DataFrame], *, level: float = 0.9) -> str:
    """The "Which estimate to trust" section of the report (markdown)."""
    def fmt(df: pd.DataFrame) -> str:
        return df.to_markdown(index=False, floatfmt=".2f")

    band = tables["band"]
    key_methods = band[band.method.isin(["auto", "alsa-e", "atc-mc", "ac", "cot"])]
    parts = [
        "## Which estimate to trust",
        "",
        "Every number here is **leave-one-dataset-out**: the bands and `auto` are fit on all "
        "the other datasets and measured on the one left out (`tasks/report/trust_calibration.py`, "
        "`estimators/trust/calibration_artifact.py`). `auto` is the ridge correction of ALSA-E learned from "
        "the label-free signals (`estimators/trust/stacking.py`); `auto (no COT)` drops COT's "
        "transport, `auto (softmax)` runs only the five softmax methods. The oracle picks the "
        "best method per row with the labels: no label-free method can reach it.",
        "",
        fmt(tables["auto"]),
        "",
        f"### The shift-aware band ({level:.0%}), held out",
        "",
        "Coverage of the true accuracy and mean width (pp) of `shift_interval`, beside the "
        "sampling `interval`'s and the width of the constant band (the pooled 5-95 % "
        "quantiles of the signed error). The coverage on a dataset left out is *measured*, "
        "not guaranteed: conformal coverage holds for shifts exchangeable with the "
        "calibration's. A concept shift (the meaning of the labels changes; sotu-party's "
        "eras) leaves no trace in the logits, and no label-free band covers it.",
        "",
        fmt(key_methods),
        "",
        "All methods: `band.csv`. Per dataset and shift family: `trust_families.csv`.",
        "",
    ]
    return "\n".join(parts)
