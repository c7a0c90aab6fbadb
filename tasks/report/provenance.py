"""How and where a report's runs were computed: their ``runs`` rows, for the report header.

The train stage records, in each run's ``runs`` row (schema 7), the compute mode
(``reproducible`` or ``fast``), the settings the training process computed with, read back from
the libraries (:func:`tasks.runtime.reproducible.effective_settings`), the CPU model and its
flags. :func:`run_provenance` reads them for the reported runs; :func:`compute_notes` turns them
into the lines under the report's title, one per distinct (mode, settings, CPU), so a report
mixing runs of two machines or two modes says so; ``runs.csv`` in the report folder keeps one
row per run for ``alsa-bench report --compare`` and ``docs/BENCHMARK.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Final

import pandas as pd

__all__ = ["NOT_HOST", "PROVENANCE_COLUMNS", "RUN_REASONS", "compute_notes", "describe_settings",
           "run_provenance", "simd_flags", "text_or_none", "why_runs_differ"]

#: Columns of :func:`run_provenance` (and of ``runs.csv``).
PROVENANCE_COLUMNS: Final[tuple[str, ...]] = (
    "run_key", "checkpoint_sha256", "code_version", "compute_mode", "compute_settings",
    "cpu_model", "cpu_flags",
)
#: CPU flags the header shows: the ones that decide which kernels a library picks.
_SIMD: Final[tuple[str, ...]] = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
)


def run_provenance(con: Any, run_keys: Sequence[str]) -> pd.DataFrame:
    """The ``runs`` rows of ``run_keys``: checkpoint, code version, compute mode and settings,
    CPU model and flags (NULL columns of rows written before schema 7 read as None).

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        Open connection.
    run_keys : sequence of str

    Returns
    -------
    DataFrame
        :data:`PROVENANCE_COLUMNS`, one row per run found, sorted by ``run_key``.
    """
    keys = sorted(set(run_keys))
    if not keys:
        return pd.DataFrame(columns=list(PROVENANCE_COLUMNS))
    df = con.sql(
        f"SELECT {', '.join(PROVENANCE_COLUMNS)} FROM runs WHERE list_contains($keys, run_key) "
        "ORDER BY run_key",
        params={"keys": keys},
    ).df()
    return df.astype(object).where(df.notna(), None)


def simd_flags(flags: str | None) -> str:
    """The kernel-deciding flags among a space-separated flag list, in a fixed order.

    Examples
    --------
    >>> simd_flags("fpu sse4_2 avx avx2 fma avx512f xsave")
    'sse4_2 avx avx2 fma avx512f'
    """
    have = set((flags or "").split())
    return " ".join(f for f in _SIMD if f in have)


def describe_settings(settings: str | dict[str, Any] | None) -> str:
    """A compact reading of a run's recorded settings.

    Examples
    --------
    >>> describe_settings({"aten_cpu_capability": "avx2", "onednn_max_cpu_isa": "AVX2",
    ...     "mkl_cbwr": "COMPATIBLE", "openblas_cores": ["Haswell"], "threads": 2})
    'ATen avx2, oneDNN AVX2, MKL COMPATIBLE, OpenBLAS Haswell, 2 threads'
    >>> describe_settings({"openblas_cores": ["Haswell"], "linear_products": "openblas-blocks"})
    'ATen ?, oneDNN ?, MKL ?, OpenBLAS Haswell, linear layers openblas-blocks'
    """
    if settings is None:
        return "not recorded (a run stored before schema 7)"
    if not isinstance(settings, dict):
        parsed = _settings(settings)
        if not parsed and str(settings).strip() != "{}":
            return "unreadable"
        settings = parsed
    parts = [
        f"ATen {settings.get('aten_cpu_capability', '?')}",
        f"oneDNN {settings.get('onednn_max_cpu_isa', '?')}",
        f"MKL {settings.get('mkl_cbwr') or '?'}",
        f"OpenBLAS {'/'.join(settings.get('openblas_cores') or []) or '?'}",
    ]
    if settings.get("convolutions"):
        parts.append(f"convolutions {settings['convolutions']}")
    if settings.get("linear_products"):
        parts.append(f"linear layers {settings['linear_products']}")
    if settings.get("deterministic_algorithms"):
        parts.append("deterministic")
    if settings.get("threads") is not None:
        parts.append(f"{settings['threads']} thread{'s' if settings['threads'] != 1 else ''}")
    if settings.get("torch"):
        parts.append(f"torch {settings['torch']}")
    return ", ".join(parts)


def compute_notes(provenance: pd.DataFrame) -> list[str]:
    """Lines for the report header: how the runs were computed, and on which CPU.

    One line per distinct (mode, settings, CPU model, kernel flags), with its run count::

        - computed in the reproducible mode (ATen avx2, oneDNN AVX2, MKL COMPATIBLE, ...)
          on AMD EPYC (sse4_2 avx avx2 fma avx512f ...): 54 runs

    Parameters
    ----------
    provenance : DataFrame
        From :func:`run_provenance`.

    Returns
    -------
    list of str
        Empty when there are no runs.
    """
    if provenance.empty:
        return []
    groups: dict[tuple[str, str, str, str], int] = {}
    for row in provenance.itertuples(index=False):
        key = (
            str(row.compute_mode or "unrecorded"),
            describe_settings(row.compute_settings),
            str(row.cpu_model or "an unrecorded CPU"),
            simd_flags(row.cpu_flags),
        )
        groups[key] = groups.get(key, 0) + 1
    lines = []
    for (mode, settings, cpu, flags), n in sorted(groups.items(), key=lambda kv: -kv[1]):
        how = (f"the {mode} mode" if mode in ("reproducible", "fast")
               else "an unrecorded mode")
        lines.append(f"- computed in {how} ({settings}) on {cpu}"
                     f"{f' ({flags})' if flags else ''}: {n} run{'s' if n != 1 else ''}")
    return lines


#: Settings whose difference explains a different model, in the order they are named.
RUN_REASONS: Final[tuple[tuple[str, str], ...]] = (
    ("mode", "mode"), ("aten_cpu_capability", "ATen"), ("onednn_max_cpu_isa", "oneDNN"),
    ("mkl_cbwr", "MKL"), ("openblas_cores", "OpenBLAS"), ("numpy_disabled", "numpy targets off"),
    ("convolutions", "convolutions"), ("linear_products", "linear layers"),
    ("deterministic_algorithms", "deterministic"), ("threads", "threads"),
    ("text_precision", "text precision"), ("torch", "torch"), ("numpy", "numpy"),
)
#: A run whose model and settings are the same on both sides, but whose estimates moved.
NOT_HOST: Final[str] = "the same recorded settings and CPU: not explained by the host"


def _settings(value: Any) -> dict[str, Any]:
    """Recorded settings as a dict: a dict as it is, a JSON object's text read; else ``{}``."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            out = json.loads(value)
        except ValueError:
            return {}
        return out if isinstance(out, dict) else {}
    return {}


def text_or_none(value: Any) -> str | None:
    """A stored value as text; None for a missing one (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "/".join(map(str, value)) or "none"
    return "none" if value in (None, "") else str(value)


def why_runs_differ(own: pd.Series | None, ref: pd.Series | None) -> str:
    """Why two runs (``runs`` rows, :data:`PROVENANCE_COLUMNS`) may differ: the recorded
    settings that are not the same, or :data:`NOT_HOST` where none differs."""
    if own is None or ref is None:
        return "no record of how one side was computed"
    a, b = _settings(own.get("compute_settings")), _settings(ref.get("compute_settings"))
    if not a or not b:
        return "no record of how one side was computed (stored before schema 7)"
    out = []
    for key, label in RUN_REASONS:
        va, vb = a.get(key), b.get(key)
        if va != vb:
            out.append(f"{label} {_show(va)} vs {_show(vb)}")
    cpu_a, cpu_b = text_or_none(own.get("cpu_model")), text_or_none(ref.get("cpu_model"))
    if cpu_a != cpu_b:
        out.append(f"CPU {cpu_a} vs {cpu_b}")
    elif simd_flags(text_or_none(own.get("cpu_flags"))) != simd_flags(text_or_none(ref.get("cpu_flags"))):
        out.append("CPU flags differ")
    code_a, code_b = text_or_none(own.get("code_version")), text_or_none(ref.get("code_version"))
    if code_a and code_b and code_a != code_b:
        out.append(f"code version {code_a} vs {code_b}")
    if out:
        pinned_only_cpu = (a.get("mode") == b.get("mode") == "reproducible"
                           and all(r.startswith(("CPU", "code version")) for r in out))
        if pinned_only_cpu and any(r.startswith("CPU") for r in out):
            out.append("the same pinned settings on another CPU: not expected, please report it")
        return "; ".join(out)
    return NOT_HOST
