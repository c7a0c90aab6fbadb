"""One row of the ``estimates`` table, built in one place for every method that writes one.

The estimate stage's estimators (:mod:`tasks.stages.estimate`), the model-aware methods
(:mod:`tasks.stages.model_aware`) and the ablation variants (:mod:`tasks.stages.ablations`) all
call :func:`estimate_row`, so the JSON of parameters and diagnostics, the absolute error and the
NaN-to-NULL rule are the same for every row.
"""

from __future__ import annotations

import math

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from storage.estimates import EstimateRow
from storage.logits import SplitInfo

__all__ = ["estimate_row"]


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=_json_default)



def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    return str(value)



def estimate_row(
    run_key: str,
    info: SplitInfo,
    method: str,
    accuracy: float,
    *,
    params: Mapping[str, Any],
    diagnostics: Mapping[str, Any],
    interval: tuple[float, float],
    level: float,
    fit_seconds: float,
    estimate_seconds: float,
    code_version: str = "",
    per_class_json: str | None = None,
    shift_interval: tuple[float, float] = (math.nan, math.nan),
) -> EstimateRow:
    """One row of the ``estimates`` table: the only place such a row is built.

    ``params`` and ``diagnostics`` are written as canonical JSON (sorted keys; numpy scalars and
    arrays as numbers and lists); the absolute error is ``|accuracy - info.true_accuracy|``.
    A non-finite accuracy (a score method), interval or level is kept as NaN here and stored as
    NULL by :func:`storage.estimates.write_estimates`.

    Parameters
    ----------
    run_key : str
    info : SplitInfo
        The target split (its name and true accuracy).
    method : str
        Registry key, model-aware method or ablation label the row is stored under.
    accuracy : float
        The estimate, a fraction.
    params, diagnostics : mapping
        Hyper-parameters and diagnostics.
    interval : (float, float)
        Sampling interval; ``level`` its nominal coverage.
    fit_seconds, estimate_seconds : float
    code_version : str, default ""
    per_class_json : str, optional
        From :func:`per_class_record`.
    shift_interval : (float, float), optional
        The shift-aware band at ``level`` (NaN where none).
    """
    estimated, true = float(accuracy), float(info.true_accuracy)
    return EstimateRow(
        run_key=run_key,
        split=info.split,
        method=method,
        params_json=_canonical_json(params),
        estimated_accuracy=estimated,
        true_accuracy=true,
        abs_error=abs(estimated - true),
        fit_seconds=fit_seconds,
        estimate_seconds=estimate_seconds,
        diagnostics_json=_canonical_json(diagnostics),
        code_version=code_version,
        interval_low=float(interval[0]),
        interval_high=float(interval[1]),
        interval_level=float(level),
        per_class_json=per_class_json,
        shift_low=float(shift_interval[0]),
        shift_high=float(shift_interval[1]),
    )

