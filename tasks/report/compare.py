r"""``alsa-bench report --compare REFERENCE``: your benchmark against a reference, in one screen.

The reference is a benchmark database (``bench.duckdb``) or a generated ``docs/BENCHMARK.md``.
The page carries a machine-readable block at its end (:func:`reference_block`, written by
:func:`tasks.report.benchmark_doc.write_benchmark_doc`): every MAE cell per seed, with full
precision, and each run's checkpoint digest, compute mode, recorded settings and CPU. A page
without the block (generated before it existed) is read from its MAE table instead (means and
standard deviations only, to two decimals).

What is compared
----------------
The MAE table's cells (suite, dataset, shift family, backbone, method) over the seeds both
sides hold; a cell's difference is ``yours - reference`` of the mean over those seeds, in
percentage points. Two runs on different hosts train different models, a new draw like a new
seed, so a difference is judged against the seeds' spread (:mod:`tasks.report.host_noise`: a
*t* test, corrected by Benjamini-Hochberg; the methods that pool the seeds' models are listed,
never judged). Runs (``dataset.backbone.sSEED``) are compared where both sides hold
per-seed values: a run is *identical* (every value equal to the last bit), the *same model with
moved estimates* (equal checkpoint digests; the estimators' fit moved: the methods are named),
or a *different model*, with the reason read from the two runs' recorded settings (the compute
mode, ATen's capability, MKL's branch, threads, torch, the CPU, the code version).

The last line is the verdict:

* ``the same numbers``: every common cell equal to the digit shown on the page (those of the
  methods that pool the seeds' models excepted: they are named);
* ``host noise``: cells differ, every one within the seeds' spread; the runs that differ and why;
* ``a real difference``: a run's estimates moved although its model and its recorded settings
  are the same (the estimators changed: no host explains it, whatever the size), or at least one
  cell differs beyond the seeds' spread;
* ``no verdict``: cells differ, but with one seed there is no spread to judge them by.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pandas as pd

from tasks.report.host_noise import FDR, judge_cells, pooled_methods
from tasks.report.provenance import (
    NOT_HOST, PROVENANCE_COLUMNS, text_or_none, why_runs_differ,
)
from tasks.report.run_names import run_names

__all__ = [
    "BLOCK_START",
    "Comparison",
    "Reference",
    "compare",
    "format_comparison",
    "load_reference",
    "reference_block",
    "reference_from_database",
    "reference_from_page",
]

#: First characters of the machine-readable block of ``docs/BENCHMARK.md``.
BLOCK_START: Final[str] = "<!-- alsa-bench reference "
#: Layout version of the block.
BLOCK_FORMAT: Final[int] = 1
#: The MAE table's cell key.
CELL: Final[list[str]] = ["suite", "dataset", "shift_family", "backbone", "method"]
#: Cells listed at most (the rest are counted), so the output fits a screen. Runs are all
#: named, compactly (:func:`run_names`).
MAX_CELLS: Final[int] = 10


# ------------------------------------------------------------------------------ the reference
@dataclass(frozen=True)
class Reference:
    """One side of a comparison.

    Attributes
    ----------
    source : str
        Where it was read.
    kind : {"database", "page", "page table"}
        A database, a page with its block, or a page read from its MAE table.
    per_seed : DataFrame or None
        :data:`CELL` + ``seed``, ``mae`` (percentage points, full precision); None for a page
        read from its table.
    summary : DataFrame
        :data:`CELL` + ``mae_mean``, ``mae_std`` (NaN for one seed), ``n_seeds``.
    runs : DataFrame
        :data:`tasks.report.provenance.PROVENANCE_COLUMNS`, one row per run (may be empty).
    seeds : tuple of int
    """

    source: str
    kind: str
    per_seed: pd.DataFrame | None
    summary: pd.DataFrame
    runs: pd.DataFrame
    seeds: tuple[int, ...]


def _summary(per_seed: pd.DataFrame) -> pd.DataFrame:
    from tasks.report.stats import std_or_nan

    return (per_seed.groupby(CELL, sort=False)
            .agg(mae_mean=("mae", "mean"), mae_std=("mae", std_or_nan),
                 n_seeds=("seed", "nunique"))
            .reset_index())


def _report_rows(con: Any) -> pd.DataFrame:
    """The rows the MAE table is made of: target rows of label-free methods, no variants."""
    from storage.estimates import read_report_rows
    from tasks.report.names import is_variant
    from tasks.report.scores import score_methods
    from tasks.report.tables import build_report_tables

    df = read_report_rows(con)
    if df.empty:
        raise ValueError("the database holds no estimates (report_rows is empty); run "
                         "`alsa-bench run` first.")
    df = df[~df["method"].map(is_variant)]
    df = df[~df["method"].isin(score_methods(df))]
    return build_report_tables(df)["rows"]


def reference_from_database(path: str | Path) -> Reference:
    """A benchmark database as one side of a comparison.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it holds no estimates.
    """
    from storage.db import connect
    from tasks.report.provenance import run_provenance
    from tasks.report.tables import mae_per_seed

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"the database {str(path)!r} does not exist.")
    with connect(path, read_only=True) as con:
        rows = _report_rows(con)
        runs = run_provenance(con, rows["run_key"].unique().tolist())
    per_seed = mae_per_seed(rows)[CELL + ["seed", "mae"]]
    per_seed["seed"] = per_seed["seed"].astype(int)
    return Reference(str(path), "database", per_seed, _summary(per_seed), runs,
                     tuple(sorted(per_seed["seed"].unique().tolist())))


def reference_block(rows: pd.DataFrame, runs: pd.DataFrame) -> str:
    """The machine-readable block of ``docs/BENCHMARK.md``: an HTML comment (invisible on the
    page) holding one line of JSON.

    Parameters
    ----------
    rows : DataFrame
        The report's target rows (``estimates.csv``: ``abs_error_pp`` and the cell columns).
    runs : DataFrame
        The report's ``runs.csv`` (:func:`tasks.report.provenance.run_provenance`).

    Returns
    -------
    str
        ``<!-- alsa-bench reference {json} -->``; the JSON holds ``format``, ``seeds``,
        ``cells`` (``"suite|dataset|family|backbone"`` -> method -> seed -> MAE in pp, full
        precision) and ``runs`` (run key -> its provenance columns).
    """
    from tasks.report.tables import mae_per_seed

    per_seed = mae_per_seed(rows)
    cells: dict[str, dict[str, dict[str, float]]] = {}
    for row in per_seed.itertuples(index=False):
        key = "|".join(str(getattr(row, c)) for c in CELL[:-1])
        cells.setdefault(key, {}).setdefault(str(row.method), {})[str(int(row.seed))] = float(
            row.mae)
    run_records = {}
    for row in runs.itertuples(index=False):
        record = {c: getattr(row, c) for c in PROVENANCE_COLUMNS if c != "run_key"}
        if isinstance(record.get("compute_settings"), str):
            try:
                record["compute_settings"] = json.loads(record["compute_settings"])
            except ValueError:
                pass
        record = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                  for k, v in record.items()}
        run_records[str(row.run_key)] = record
    payload = {
        "format": BLOCK_FORMAT,
        "seeds": sorted(int(s) for s in per_seed["seed"].unique()),
        "cells": cells,
        "runs": run_records,
    }
    return BLOCK_START + json.dumps(payload, sort_keys=True, separators=(",", ":")) + " -->"


def _from_block(text: str, source: str) -> Reference | None:
    start = text.rfind(BLOCK_START)
    if start < 0:
        return None
    end = text.find("-->", start)
    try:
        payload = json.loads(text[start + len(BLOCK_START):end].strip())
    except ValueError as exc:
        raise ValueError(f"the reference block of {source!r} is not valid JSON ({exc}); "
                         "regenerate the page with `alsa-bench report --to-docs`.") from None
    if not isinstance(payload, dict) or payload.get("format") != BLOCK_FORMAT:
        raise ValueError(f"the reference block of {source!r} has layout "
                         f"{payload.get('format') if isinstance(payload, dict) else '?'!r}; "
                         f"this alsa-bench reads {BLOCK_FORMAT}.")
    records = []
    for key, methods in payload["cells"].items():
        parts = key.split("|")
        for method, by_seed in methods.items():
            for seed, mae in by_seed.items():
                records.append((*parts, method, int(seed), float(mae)))
    per_seed = pd.DataFrame(records, columns=CELL + ["seed", "mae"])
    runs = pd.DataFrame(
        [{"run_key": k, **{c: v.get(c) for c in PROVENANCE_COLUMNS if c != "run_key"}}
         for k, v in payload["runs"].items()], columns=list(PROVENANCE_COLUMNS))
    return Reference(source, "page", per_seed, _summary(per_seed), runs,
                     tuple(int(s) for s in payload["seeds"]))


_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:±\s*(\d+(?:\.\d+)?))?\s*$")


def _from_table(text: str, source: str) -> Reference:
    """The MAE table of a page without the block."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines)
                     if line.startswith("## MAE of the accuracy estimates"))
    except StopIteration:
        raise ValueError(f"{source!r} has neither an alsa-bench reference block nor a \"MAE of "
                         "the accuracy estimates\" table: it is not a generated BENCHMARK.md.") \
            from None
    table = []
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            table.append([c.strip() for c in line.strip().strip("|").split("|")])
    if len(table) < 3:
        raise ValueError(f"the MAE table of {source!r} has no rows.")
    header, body = table[0], table[2:]
    seeds_match = re.search(r"^\|\s*seeds\s*\|\s*([\d,\s]+)\|", text, re.MULTILINE)
    seeds = tuple(int(s) for s in re.findall(r"\d+", seeds_match.group(1))) if seeds_match else ()
    records = []
    for cells in body:
        row = dict(zip(header, cells))
        for method in header[4:]:
            match = _NUMBER.match(row.get(method, "").replace("*", ""))
            if match is None:
                continue
            std = float(match.group(2)) if match.group(2) is not None else math.nan
            records.append((row["suite"], row["dataset"], row["shift_family"], row["backbone"],
                            method, float(match.group(1)), std,
                            len(seeds) if not math.isnan(std) else 1))
    summary = pd.DataFrame(records, columns=CELL + ["mae_mean", "mae_std", "n_seeds"])
    return Reference(source, "page table", None, summary,
                     pd.DataFrame(columns=list(PROVENANCE_COLUMNS)), seeds)


def reference_from_page(path: str | Path) -> Reference:
    """A generated ``BENCHMARK.md``: its block, else its MAE table.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it has neither a block nor an MAE table, or the block is damaged.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"the page {str(path)!r} does not exist.")
    text = path.read_text(encoding="utf-8")
    return _from_block(text, str(path)) or _from_table(text, str(path))


def load_reference(path: str | Path) -> Reference:
    """A page (``.md``, or any text file) or a database (anything else), by its content.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If it is neither a generated page nor a benchmark database.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"REFERENCE must be a generated BENCHMARK.md or a bench.duckdb; "
                                f"{str(path)!r} does not exist.")
    if path.is_dir():
        raise ValueError(f"REFERENCE must be a file (a BENCHMARK.md or a bench.duckdb); got the "
                         f"folder {str(path)!r}.")
    with path.open("rb") as fh:
        head = fh.read(4096)
    if path.suffix.lower() == ".md" or (b"\0" not in head and head.lstrip().startswith(b"#")):
        return reference_from_page(path)
    return reference_from_database(path)


# ------------------------------------------------------------------------------ the comparison
@dataclass
class Comparison:
    """The result of :func:`compare`.

    Attributes
    ----------
    own, reference : Reference
    cells : DataFrame
        One row per common cell: :data:`CELL`, ``seeds`` (compared), ``own``, ``ref`` (means over
        them), ``delta`` (pp), ``spread`` (the seeds' std, pooled over both sides where each
        has two or more, else the side with two or more), ``se`` (the difference's standard
        error under host noise), ``p`` (two-sided *t* test), ``within`` (bool: the
        Benjamini-Hochberg correction at :data:`FDR` keeps host noise; None without a
        spread, or for a method that pools the seeds' models), ``pooled`` (such a method: never
        judged), ``digit_equal``, ``exact``.
    runs : DataFrame
        One row per common run: ``run_key``, ``status`` (identical, same model, different
        model, differs), ``methods`` (that moved), ``max_delta`` (pp), ``reason``.
    only_reference, only_own : int
        Cells one side lacks.
    verdict : str
        The one-line verdict.
    """

    own: Reference
    reference: Reference
    cells: pd.DataFrame
    runs: pd.DataFrame
    only_reference: int
    only_own: int
    verdict: str = ""
    notes: list[str] = field(default_factory=list)


def _run_table(own: Reference, ref: Reference, joined: pd.DataFrame) -> pd.DataFrame:
    cols = ["run_key", "status", "methods", "max_delta", "reason"]
    if joined.empty:
        return pd.DataFrame(columns=cols)
    joined = joined.assign(run_key=joined["dataset"].astype(str) + "." +
                           joined["backbone"].astype(str) + ".s" + joined["seed"].astype(str))
    own_runs = {str(r["run_key"]): r for _, r in own.runs.iterrows()}
    ref_runs = {str(r["run_key"]): r for _, r in ref.runs.iterrows()}
    pooling = pooled_methods()
    out = []
    for key, sub in joined.groupby("run_key", sort=True):
        diff = (sub["mae_own"] - sub["mae_ref"]).abs()
        moved = sub.loc[diff > 0, "method"].astype(str).unique().tolist()
        a, b = own_runs.get(key), ref_runs.get(key)
        ck_a = text_or_none(a.get("checkpoint_sha256")) if a is not None else None
        ck_b = text_or_none(b.get("checkpoint_sha256")) if b is not None else None
        same_model = ck_a is not None and ck_a == ck_b
        if not moved and (same_model or ck_a is None or ck_b is None):
            status, reason = "identical", ""
        elif same_model and all(m in pooling for m in moved):
            # these read the other seeds' models too: another seed's model, or a missing seed,
            # moves them on an identical run
            status, reason = "same model", (f"only methods that pool the seeds' models moved "
                                            f"({', '.join(sorted(moved))}): they read the other "
                                            f"seeds' models, which differ or are missing here")
        elif same_model:
            status, reason = "same model", "the estimators' fit moved: " + why_runs_differ(a, b)
        elif ck_a is not None and ck_b is not None:
            status, reason = "different model", why_runs_differ(a, b)
        else:
            status, reason = "differs", why_runs_differ(a, b)
        out.append((key, status, moved, float(diff.max()), reason))
    return pd.DataFrame(out, columns=cols)


def compare(own: Reference, ref: Reference) -> Comparison:
    """Compare ``own`` with ``ref`` (see the module docstring).

    Returns
    -------
    Comparison
    """
    keys_own = own.summary.set_index(CELL).index
    keys_ref = ref.summary.set_index(CELL).index
    common = keys_own.intersection(keys_ref)
    only_ref, only_own = len(keys_ref.difference(keys_own)), len(keys_own.difference(keys_ref))
    ref_summary = ref.summary.set_index(CELL)
    own_summary = own.summary.set_index(CELL)
    notes: list[str] = []
    joined = pd.DataFrame()
    if own.per_seed is not None and ref.per_seed is not None:
        joined = own.per_seed.merge(ref.per_seed, on=CELL + ["seed"], suffixes=("_own", "_ref"))
        grouped = joined.groupby(CELL, sort=False).agg(
            own=("mae_own", "mean"), ref=("mae_ref", "mean"), seeds=("seed", "nunique"),
            exact=("mae_own", lambda s: bool((s == joined.loc[s.index, "mae_ref"]).all())),
        )
        cells = grouped.reset_index()
    else:
        rows = []
        for key in common:
            rows.append((*key, float(own_summary.loc[key, "mae_mean"]),
                         float(ref_summary.loc[key, "mae_mean"]),
                         int(ref_summary.loc[key, "n_seeds"]), False))
        cells = pd.DataFrame(rows, columns=CELL + ["own", "ref", "seeds", "exact"])
        if set(own.seeds) != set(ref.seeds):
            notes.append(f"the page holds means over seeds {', '.join(map(str, ref.seeds))} "
                         f"only; yours are over {', '.join(map(str, own.seeds))}: compared "
                         "against the seeds' spread only (regenerate the page for per-seed "
                         "values)")
    if cells.empty:
        cmp = Comparison(own, ref, cells, _run_table(own, ref, joined), only_ref, only_own,
                         notes=notes)
        cmp.verdict = ("nothing to compare: no cell of the MAE table is in both (different "
                       "suites, datasets or backbones)")
        return cmp
    cells = judge_cells(cells, ref_summary, own_summary, CELL, per_seed=not joined.empty)
    cmp = Comparison(own, ref, cells, _run_table(own, ref, joined), only_ref, only_own,
                     notes=notes)
    cmp.verdict = _verdict(cmp)
    return cmp


def _verdict(cmp: Comparison) -> str:
    cells = cmp.cells
    differ = cells[~cells["digit_equal"]]
    moved_runs = cmp.runs[cmp.runs["status"] != "identical"]["run_key"].tolist()
    if differ.empty:
        extra = (f"; {len(moved_runs)} run(s) differ below the page's precision: "
                 f"{run_names(moved_runs)}" if moved_runs else "")
        exact = " (every value bit-identical)" if bool(cells["exact"].all()) else ""
        return f"the same numbers: all {len(cells)} cells equal to the digit{exact}{extra}"
    beyond = differ[differ["within"] == False]  # noqa: E712 (None: no spread to judge by)
    pooled = differ[differ["pooled"]]
    unjudged = differ[differ["within"].isna() & ~differ["pooled"]]
    runs = (f"; runs that differ ({len(moved_runs)}): {run_names(moved_runs)}" if moved_runs
            else "")
    if not pooled.empty:
        runs += (f"; {len(pooled)} cells of methods that pool the seeds' models not judged "
                 f"({', '.join(sorted(set(pooled['method'])))})")
    if len(pooled) == len(differ):  # only the seed-pooling methods moved
        judged = len(cells) - int(cells["pooled"].sum())
        return f"the same numbers: all {judged} judged cells equal to the digit{runs}"
    pooled_names = pooled_methods()
    code = (cmp.runs[(cmp.runs["status"] == "same model")
                     & cmp.runs["reason"].str.endswith(NOT_HOST)
                     # a pooling method also moves when another seed's model changed
                     & cmp.runs["methods"].map(lambda ms: any(m not in pooled_names
                                                              for m in ms))]
            if not cmp.runs.empty else cmp.runs)
    if not code.empty:
        methods = sorted({m for ms in code["methods"] for m in ms})
        worst = _largest(differ)
        return (f"a real difference: the estimates of {len(code)} run(s) moved on the same "
                f"model with the same recorded settings and CPU ({', '.join(methods[:5])}"
                f"{'...' if len(methods) > 5 else ''}: the estimators changed, which no host "
                f"explains): {run_names(code['run_key'].tolist())}; {len(beyond)} of {len(cells)} "
                f"cells differ beyond the seeds' spread; largest {_cell_name(worst)} "
                f"{worst['delta']:+.2f} pp")
    if beyond.empty and unjudged.empty:
        judged = len(differ) - len(pooled)
        return (f"host noise: {judged} of {len(cells)} cells differ, all within the "
                f"seeds' spread{runs}")
    if beyond.empty:
        worst = _largest(unjudged)
        return (f"no verdict: {len(unjudged)} of {len(cells)} cells differ and one seed has no "
                f"spread to judge them by (run 3 seeds); largest {_cell_name(worst)} "
                f"{worst['delta']:+.2f} pp{runs}")
    worst = _largest(beyond)
    return (f"a real difference: {len(beyond)} of {len(cells)} cells differ beyond the seeds' "
            f"spread; largest {_cell_name(worst)} {worst['delta']:+.2f} pp (spread "
            f"{_fmt(worst['spread'])}){runs}")


def _by_size(cells: pd.DataFrame) -> pd.DataFrame:
    """Cells ordered by their difference in units of its standard error under host noise, then
    in pp (cells without a spread after those with one)."""
    ratio = (cells["delta"].abs() / cells["se"]).fillna(-1.0)
    order = sorted(range(len(cells)), key=lambda i: (ratio.iloc[i], abs(cells["delta"].iloc[i])),
                   reverse=True)
    return cells.iloc[order]


def _largest(cells: pd.DataFrame) -> Any:
    return _by_size(cells).iloc[0]


def _fmt(value: float) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.2f}"


def _cell_name(row: Any) -> str:
    return f"{row['dataset']}/{row['shift_family']}/{row['backbone']} {row['method']}"


def _side(ref: Reference) -> str:
    from tasks.report.provenance import compute_notes

    lines = compute_notes(ref.runs)
    if not lines:
        return "how its runs were computed is not recorded"
    first = lines[0].removeprefix("- computed in ")
    return first + (f" (and {len(lines) - 1} other setting(s))" if len(lines) > 1 else "")


def format_comparison(cmp: Comparison) -> str:
    """The comparison on one screen; its last line is the verdict."""
    own, ref = cmp.own, cmp.reference
    lines = [
        f"Comparing {own.source} with {ref.source} ({ref.kind})",
        f"  yours:     {_side(own)}",
        f"  reference: {_side(ref)}",
    ]
    cells = cmp.cells
    if not cells.empty:
        differ = cells[~cells["digit_equal"]]
        unjudged = int((differ["within"].isna() & ~differ["pooled"]).sum())
        pooled = int(differ["pooled"].sum())
        lines.append(
            f"Cells: {len(cells)} compared, {len(differ)} differ to the digit, "
            f"{int((differ['within'] == False).sum())} beyond the seeds' spread "  # noqa: E712
            f"(t test, Benjamini-Hochberg at {FDR:.0%})"
            + (f", {unjudged} without a spread (one seed)" if unjudged else "")
            + (f", {pooled} of methods that pool the seeds' models (not judged)" if pooled
               else "")
            + (f"; {cmp.only_reference} only in the reference" if cmp.only_reference else "")
            + (f"; {cmp.only_own} only in yours" if cmp.only_own else ""))
        if not differ.empty:
            show = _by_size(differ).head(MAX_CELLS)
            lines.append(f"  {'cell':46} {'yours':>7} {'ref':>7} {'Δ pp':>7} {'spread':>7} "
                         f"{'p':>6}  within")
            for _, row in show.iterrows():
                within = ("pooled" if row["pooled"] else "—" if row["within"] is None
                          else "yes" if row["within"] else "NO")
                p = "—" if math.isnan(row["p"]) else f"{row['p']:.3f}"
                lines.append(f"  {_cell_name(row)[:46]:46} {row['own']:7.2f} {row['ref']:7.2f} "
                             f"{row['delta']:+7.2f} {_fmt(row['spread']):>7} {p:>6}  {within}")
            if len(differ) > MAX_CELLS:
                lines.append(f"  ... and {len(differ) - MAX_CELLS} more cells")
    if not cmp.runs.empty:
        counts = cmp.runs["status"].value_counts()
        lines.append(f"Runs: {len(cmp.runs)} compared: " + ", ".join(
            f"{counts[s]} {s}" for s in ("identical", "same model", "different model", "differs")
            if s in counts))
        for (status, reason), sub in cmp.runs[cmp.runs["status"] != "identical"].groupby(
                ["status", "reason"], sort=False):
            methods = sorted({m for ms in sub["methods"] for m in ms})
            lines.append(f"  {status} ({reason}; up to {sub['max_delta'].max():.2g} pp in "
                         f"{', '.join(methods[:5])}{'...' if len(methods) > 5 else ''}): "
                         f"{run_names(sub['run_key'].tolist())}")
    lines += [f"Note: {n}" for n in cmp.notes]
    lines.append(f"Verdict: {cmp.verdict}")
    return "\n".join(lines)
