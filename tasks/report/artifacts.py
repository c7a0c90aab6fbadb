"""The report as Prefect artifacts: the MAE, correlation and coverage tables, and the markdown.

Prefect is imported inside :func:`publish` only, so the rest of the report runs without it.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tasks.report.markdown import render_markdown
from tasks.report.names import artifact_key

__all__ = ["artifact_key", "publish"]


def publish(
    tables: Mapping[str, pd.DataFrame],
    *,
    name: str,
    title: str,
    notes: Sequence[str],
    pngs: Sequence[tuple[str, str, bytes]],
) -> None:
    """Create the artifacts ``<key>-mae``, ``<key>-correlation``, ``<key>-coverage`` (where
    intervals are stored) and ``<key>-report`` (the markdown with the PNGs embedded), ``<key>``
    being :func:`~tasks.report.names.artifact_key` of ``name``; needs a Prefect API."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    key = artifact_key(name)
    create_table_artifact(
        key=f"{key}-mae",
        table=_records(tables["mae"]),
        description=f"{title}: MAE (percentage points) per dataset, shift family, backbone, method",
    )
    create_table_artifact(
        key=f"{key}-correlation",
        table=_records(tables["correlation"]),
        description=f"{title}: R² against y = x and Pearson ρ per dataset, backbone, method",
    )
    if "coverage" in tables:
        create_table_artifact(
            key=f"{key}-coverage",
            table=_records(tables["coverage"]),
            description=f"{title}: interval coverage and mean width per dataset, shift family, "
            "method",
        )
    images = [
        (caption, "data:image/png;base64," + base64.b64encode(data).decode("ascii"))
        for caption, _, data in pngs
    ]
    create_markdown_artifact(
        key=f"{key}-report",
        markdown=render_markdown(tables, title=title, images=images, notes=notes),
        description=title,
    )


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of native Python values (NaN → None), as Prefect's table artifacts need."""
    out = []
    for rec in df.to_dict(orient="records"):
        out.append({str(k): _native(v) for k, v in rec.items()})
    return out


def _native(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
