"""Per-class MAE of ALSA and of the best baseline, from the stored per-class estimates.

Reads the target splits' logits and labels from DuckDB (the estimate stage never reads target
labels; the report does, to score it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from tasks.report.names import ALL_FAMILIES, family_rank, method_rank

__all__ = ["per_class_mae", "per_class_wide"]


def per_class_mae(con: Any, rows: pd.DataFrame) -> pd.DataFrame:
    r"""Per-class MAE of ALSA and of the best baseline with per-sample probabilities.

    For a target split, method and predicted class ``k`` with at least one row, the error is
    :math:`|\hat a_k - a_k|` with :math:`\hat a_k` the stored estimate
    (``estimates.per_class_json``) and :math:`a_k` the true accuracy among the rows predicted
    as ``k`` (from the split's logits and labels, read here: the estimate stage never reads
    target labels). ``per_class_mae_pp`` is the mean over classes, then over splits, in
    percentage points, per (suite, dataset, shift_family, method); ``all`` pools families.
    Reported methods: every ``alsa-*`` one and, per dataset, the baseline with per-class
    estimates whose pooled accuracy MAE is lowest (``role`` ``"alsa"`` / ``"best baseline"``).

    Parameters
    ----------
    con : duckdb connection
    rows : DataFrame
        The report's target rows (:func:`build_report_tables` ``"rows"``).

    Returns
    -------
    DataFrame
        Columns ``suite, dataset, shift_family, method, role, per_class_mae_pp, n_splits``;
        empty where no stored row has per-class estimates.
    """
    import json

    from storage.logits import read_run_targets

    cols = ["suite", "dataset", "shift_family", "method", "role", "per_class_mae_pp", "n_splits"]
    stored = con.sql(
        "SELECT run_key, split, method, per_class_json FROM estimates "
        "WHERE per_class_json IS NOT NULL"
    ).df()
    if stored.empty:
        return pd.DataFrame(columns=cols)
    merged = rows.merge(stored, on=["run_key", "split", "method"], how="inner")
    if merged.empty:
        return pd.DataFrame(columns=cols)
    chosen: list[pd.DataFrame] = []
    for (suite, dataset), grp in merged.groupby(["suite", "dataset"], sort=True):
        alsa = grp[grp["method"].astype(str).str.startswith("alsa")]
        base = grp[~grp["method"].astype(str).str.startswith("alsa")]
        if not alsa.empty:
            chosen.append(alsa.assign(role="alsa"))
        if not base.empty:
            best = base.groupby("method")["abs_error_pp"].mean().idxmin()
            chosen.append(base[base["method"] == best].assign(role="best baseline"))
    if not chosen:
        return pd.DataFrame(columns=cols)
    picked = pd.concat(chosen, ignore_index=True)
    errors: list[float] = []
    truth_cache: dict[tuple[str, str], np.ndarray] = {}
    needed = picked[["run_key", "split"]].astype(str).drop_duplicates()
    for run_key, splits in needed.groupby("run_key", sort=False)["split"]:
        targets = read_run_targets(con, str(run_key), with_labels=True)  # one query a run
        for split in splits:
            z, y = (np.asarray(a) for a in targets[split])
            pred = (z.reshape(-1) > 0).astype(int) if z.ndim == 1 or z.shape[1] == 1 else (
                z.argmax(axis=1))
            c = max(int(pred.max()) + 1, z.shape[1] if z.ndim == 2 else 2)
            counts = np.bincount(pred, minlength=c).astype(float)
            hits = np.bincount(pred, weights=(pred == y).astype(float), minlength=c)
            with np.errstate(invalid="ignore", divide="ignore"):
                truth_cache[(str(run_key), split)] = np.where(counts > 0,
                                                              hits / np.maximum(counts, 1.0),
                                                              np.nan)
    for run_key, split, text in zip(picked["run_key"], picked["split"], picked["per_class_json"]):
        key = (str(run_key), str(split))
        true = truth_cache[key]
        est = np.array([np.nan if v is None else v for v in json.loads(text)["estimated"]],
                       dtype=float)
        m = min(len(est), len(true))
        diff = np.abs(est[:m] - true[:m])
        diff = diff[np.isfinite(diff)]
        errors.append(100.0 * float(diff.mean()) if diff.size else math.nan)
    picked["_e"] = errors
    both = pd.concat([picked, picked.assign(shift_family=ALL_FAMILIES)], ignore_index=True)
    out = (
        both.groupby(["suite", "dataset", "shift_family", "method", "role"], sort=False)
        .agg(per_class_mae_pp=("_e", "mean"), n_splits=("_e", "size"))
        .reset_index()
    )
    out["_m"] = out["method"].map(method_rank)
    out["_f"] = out["shift_family"].map(family_rank)
    out = out.sort_values(["suite", "dataset", "_f", "_m"]).drop(columns=["_m", "_f"])
    return out[cols].reset_index(drop=True)


def per_class_wide(pc: pd.DataFrame) -> pd.DataFrame:
    """Index (suite, dataset, shift_family), one column per method (``"<method> (best
    baseline)"`` for the baseline), cells in percentage points."""
    label = [m if r == "alsa" else f"{m} (best baseline)" for m, r in zip(pc["method"], pc["role"])]
    pc = pc.assign(col=label, cell=[f"{v:.2f}" for v in pc["per_class_mae_pp"]])
    wide = pc.pivot(index=["suite", "dataset", "shift_family"], columns="col", values="cell")
    order = sorted(wide.index, key=lambda k: (k[0], k[1], family_rank(k[2])))
    wide = wide.loc[order]
    wide.columns.name = None
    return wide.fillna("")
