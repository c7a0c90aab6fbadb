"""From benchmark databases to the shift-aware bands and ``auto`` (:mod:`estimators.trust.calibration_artifact`).

:func:`calibration_table` reads every target split of a database, with each method's estimate,
its true accuracy and the label-free signals recomputed from the stored logits (the same
:class:`~estimators.trust.shift_signals.ShiftSignals` a user's ``estimate`` call computes); its
rows are grouped by *source group* (:attr:`tasks.data.spec.DatasetSpec.source_group`) and its
keys say which rows are a declared concept shift
(:attr:`tasks.data.families.ShiftFamily.concept_shift`). :func:`calibrate_databases` fits the
artifact from the *development* groups of one or more databases (``alsa-bench calibrate --db A
--db B``; the sealed groups of :mod:`estimators.trust.sealed` are never fit on), and
:func:`trust_tables` the leave-one-group-out evidence of the report's "Which estimate to trust"
section.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from estimators.trust.calibration_artifact import (
    AUTO_MEMBER_SETS,
    Calibration,
    CalibrationTable,
    auto_key,
    fit_calibration,
    leave_one_dataset_out,
)
from tasks.report.benchmark_doc import _git_commit
from estimators.trust.shift_band import fit_band
from tasks.report.trust_protocol import fit_model, grouped_cv
from tasks.report.trust_rows import TrustRows, read_trust_rows, split_development, trust_rows_of

__all__ = ["AUTO_MODEL_CLASS", "MIN_GROUPS", "calibrate_databases", "calibrate_rows",
           "calibration_table", "trust_tables"]

#: The methods a calibration covers by default: every label-free method of the benchmark.
CALIBRATED_METHODS: tuple[str, ...] = AUTO_MEMBER_SETS[0]
#: Development groups (without concept-shift rows) a calibration needs: the penalty of the
#: combination is chosen leave-one-group-out inside each leave-one-group-out fold of its band.
MIN_GROUPS = 3
#: ``auto``'s model class as chosen by the protocol's validation (``benchmarks/trust_protocol.py``,
#: ``docs/trust/choice.json``); recorded in the artifact's ``source["auto_model"]``.
AUTO_MODEL_CLASS = "shrinkage toward the members' median"


def calibration_table(
    con: duckdb.DuckDBPyConnection, *, methods: Sequence[str] = CALIBRATED_METHODS,
    run_keys: Sequence[str] | None = None, signals: bool = True,
) -> tuple[CalibrationTable, pd.DataFrame]:
    """Every target split of the database with an estimate of every one of ``methods``.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open (read-only is fine) benchmark database.
    methods : sequence of str
        Methods whose estimates a row must carry (the table keeps every method found).
    run_keys : sequence of str, optional
        Only these runs (:func:`~tasks.report.trust_rows.trust_rows_of`).
    signals : bool, default True
        False: no label-free signals (no logits read).

    Returns
    -------
    table : CalibrationTable
        ``groups`` are source groups.
    keys : pandas.DataFrame
        ``run_key, split, dataset, shift_family, group, concept`` of each row, in the table's
        order.

    Raises
    ------
    ValueError
        If the database holds no target split with an estimate of every method.
    """
    return _complete(trust_rows_of(con, run_keys=run_keys, signals=signals), methods)


def _complete(rows: TrustRows, methods: Sequence[str]) -> tuple[CalibrationTable, pd.DataFrame]:
    missing = [m for m in methods if m not in rows.table.estimates]
    if missing:
        raise ValueError(
            f"The database has no estimates of {', '.join(missing)}; a calibration needs every "
            f"one of {', '.join(methods)} (run `alsa-bench run` with the default methods)."
        )
    ok = np.ones(len(rows), bool)
    for m in methods:
        ok &= np.isfinite(rows.table.estimates[m])
    if not ok.any():
        raise ValueError("The database holds no target split with an estimate of every "
                         f"method of {', '.join(methods)}; run the benchmark first.")
    kept = rows.subset(ok)
    return kept.table, kept.keys


def calibrate_databases(dbs: Sequence[str | Path]) -> Calibration:
    """Fit the bands and ``auto`` from the development groups of the databases ``dbs``.

    Parameters
    ----------
    dbs : sequence of path
        Benchmark databases (``.alsa-bench/bench.duckdb``, a zoo database, a user's own),
        opened read-only.

    Raises
    ------
    FileNotFoundError
        If a database does not exist.
    ValueError
        If they hold fewer than :data:`MIN_GROUPS` development groups (outside the sealed
        groups and concept-shift rows) with every label-free method's estimates.
    """
    paths = [Path(d) for d in dbs]
    rows = read_trust_rows(paths)
    dev, sealed = split_development(rows)
    table, keys = _complete(dev, CALIBRATED_METHODS)
    concept = keys.concept.to_numpy(dtype=bool)
    fit_rows = table.subset(~concept)
    names, counts = np.unique(fit_rows.groups, return_counts=True)
    if len(names) < MIN_GROUPS:
        sealed_names = sealed.inputs.group_names()
        raise ValueError(
            f"{', '.join(p.name for p in paths)} hold{'s' if len(paths) == 1 else ''} "
            f"{len(names)} development group(s) ({', '.join(names) or 'none'}) beside "
            f"{len(sealed_names)} sealed ({', '.join(sealed_names) or 'none'}); a calibration "
            f"needs at least {MIN_GROUPS}: add databases with --db.")
    source = {
        "databases": [p.name for p in paths],
        "commit": _git_commit(),
        "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "rows": int(len(fit_rows)),
        "rows_per_group": {str(k): int(c) for k, c in zip(names, counts)},
        "sealed_groups_left_out": sealed.inputs.group_names(),
        "excluded_concept_shift_rows": int(concept.sum()),
        "excluded_concept_shifts": sorted({f"{d}/{f}" for d, f in zip(
            keys.dataset[concept], keys.shift_family[concept])}),
        "level_note": "bands hold for any level in [0.0, 0.998]; calibrated on these rows",
    }
    return calibrate_rows(TrustRows(table, keys), source)


def calibrate_rows(rows: TrustRows, source: Mapping[str, Any] | None = None) -> Calibration:
    """The calibration ``alsa-bench calibrate`` writes, fit on ``rows`` (development rows; their
    concept-shift rows are left out of every fit).

    ``auto`` runs :data:`AUTO_MODEL_CLASS` over :data:`CALIBRATED_METHODS` (recorded in
    ``source["auto_model"]``), and its band is fit on that model's out-of-fold estimates, each
    group's from a model fit without it; every other method's band, and the ridge stacks of the
    smaller member sets, are :func:`~estimators.trust.calibration_artifact.fit_calibration`'s.

    Parameters
    ----------
    rows : TrustRows
        Development rows with every method of :data:`CALIBRATED_METHODS`.
    source : mapping, optional
        Provenance recorded in the artifact (databases, commit, row counts).
    """
    fit = rows.subset(~rows.concept)
    model = fit_model(AUTO_MODEL_CLASS, fit)
    info = {**(source or {}), "auto_model": {"class": AUTO_MODEL_CLASS, **_model_dict(model)}}
    members = tuple(CALIBRATED_METHODS)
    fitted = fit_calibration(fit.table, source=info, auto_default=members)
    oof = grouped_cv(fit, [AUTO_MODEL_CLASS])[AUTO_MODEL_CLASS]
    bands = dict(fitted.bands)
    bands[auto_key(members)] = fit_band(fit.table.signals, oof, fit.table.truth, fit.table.groups)
    info = dict(fitted.source)
    info["auto_band"] = (f"{auto_key(members)}: fit on the out-of-fold estimates of "
                         f"{AUTO_MODEL_CLASS}")
    return Calibration(bands, fitted.stacks, info, auto_default=fitted.auto_default)


def _model_dict(model: object) -> dict[str, object]:
    to_dict = getattr(model, "to_dict", None)
    return dict(to_dict()) if callable(to_dict) else {"method": str(getattr(model, "method"))}


def trust_tables(
    table: CalibrationTable,
    *,
    concept: NDArray[np.bool_] | None = None,
    keys: pd.DataFrame | None = None,
    level: float = 0.9,
) -> dict[str, pd.DataFrame]:
    """Leave-one-group-out evidence for the report's "Which estimate to trust".

    ``table.groups`` are source groups; ``concept`` marks the rows of declared concept shifts
    (``calibration_table``'s ``keys.concept``; None: no row is one), evaluated but never fit on.
    With ``keys`` (``calibration_table``'s), each fold is fit as ``alsa-bench calibrate`` fits
    the shipped artifact (:func:`calibrate_rows`), so ``auto`` is the model a user runs
    (:data:`AUTO_MODEL_CLASS`) and its band the one fit for it; without, every member set's
    ``auto`` is the ridge stack of :func:`~estimators.trust.calibration_artifact.fit_calibration`.

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
    excluded = np.zeros(len(table), bool) if concept is None else np.asarray(concept, bool)
    if excluded.shape != (len(table),):
        raise ValueError(f"The 'concept' argument of trust_tables must hold one flag per row "
                         f"({len(table)}); got shape {excluded.shape}.")
    calibrate = None
    if keys is not None:
        if len(keys) != len(table):
            raise ValueError(f"The 'keys' argument of trust_tables must hold one row per table "
                             f"row ({len(table)}); got {len(keys)}.")
        rows = TrustRows(table, keys.assign(concept=excluded).reset_index(drop=True))

        def calibrate(fit_rows: NDArray[np.bool_]) -> Calibration:
            return calibrate_rows(rows.subset(fit_rows))

    records = pd.DataFrame(leave_one_dataset_out(table, level=level, evaluate_only=excluded,
                                                 calibrate=calibrate))
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
    autos = {auto_key(s): "auto" if i == 0 else ("auto (no COT)" if i == 1 else "auto (softmax)")
             for i, s in enumerate(AUTO_MEMBER_SETS)}
    records["method"] = records.method.map(lambda m: autos.get(m, m))

    mae = records.pivot_table(index="row", columns="method", values="abs_error")
    # single methods with an estimate on some row (a score method without a map has none)
    singles = [m for m in table.estimates if m in mae.columns]
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
        err = err[np.isfinite(err)]
        constant[m] = (float(np.quantile(err, 0.95) - np.quantile(err, 0.05)) if err.size
                       else np.nan)
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
        "Every number here is **leave-one-group-out**: the bands and `auto` are fit on all "
        "the other source groups (a source's datasets form one group) as `alsa-bench "
        "calibrate` fits them, and measured on the one left out "
        "(`tasks/report/trust_calibration.py`, `estimators/trust/calibration_artifact.py`). "
        f"`auto` is the model `auto` runs: {AUTO_MODEL_CLASS} (ALSA-E moved toward the median "
        "of its members by a weight learned on the other groups, "
        "`estimators/trust/selector.py`); `auto (no COT)` is the ridge correction of ALSA-E "
        "over its seven members, and `auto (softmax)` the ridge correction of ATC-MC over the "
        "five softmax methods, which hold no ALSA-E (`estimators/trust/stacking.py`: the base is "
        "the first of `BASE_PREFERENCE` among the members). The "
        "oracle picks the best method per row with the labels: no label-free method can "
        "reach it.",
        "",
        fmt(tables["auto"]),
        "",
        f"### The shift-aware band ({level:.0%}), held out",
        "",
        "Coverage of the true accuracy and mean width (pp) of `shift_interval`, beside the "
        "sampling `interval`'s and the width of the constant band (the pooled 5-95 % "
        "quantiles of the signed error). The coverage on a group left out is *measured*, "
        "not guaranteed: conformal coverage holds for shifts exchangeable with the "
        "calibration's. A concept shift (declared on the dataset's shift family: the meaning "
        "of the labels changes) leaves no trace in the logits, and no label-free band "
        "covers it.",
        "",
        fmt(key_methods),
        "",
        "All methods: `band.csv`. Per dataset and shift family: `trust_families.csv`.",
        "",
    ]
    return "\n".join(parts)
