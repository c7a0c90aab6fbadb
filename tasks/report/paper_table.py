"""The ALSA paper's published MAE, and the "Reproducing the paper" section of docs/BENCHMARK.md.

Published numbers
-----------------
:data:`PAPER_ROWS` copies, digit for digit, the mean absolute error (percentage points, mean and
standard deviation over three seeds) of Liu et al., "ALSA: Anchors in Logit Space for
Out-of-Distribution Accuracy Estimation" (BMVC 2025): Table 1 with the standard deviations of
its appendix Table 4 (vision and language), and Table 2 with those of Table 5 (ogbn-arxiv, one
row per GNN and their average). The paper's columns map to our estimator keys as

=========  ==========  ===========================================================
paper      ours        note
=========  ==========  ===========================================================
AC         ``ac``
DoC        ``doc``
IM         ``im``
GNNEval    ``gnnevaluator``  Table 2 only
ATC        ``atc-ne``  App. G defines ATC's score as the negative entropy
COT        ``cot``
ALSA-E     ``alsa-e``
ALSA-G     ``alsa-g``  "ALSA" in the paper's text
=========  ==========  ===========================================================

Our numbers
-----------
:func:`ours_mae` computes the same statistic from this benchmark's ``report_rows``
(:mod:`tasks.report`): for one paper row, the target splits of its dataset that make the row
(shift families, a split-name pattern, a backbone), the absolute error in percentage points,
averaged per seed over those splits and every backbone run, then mean and sample standard
deviation over seeds.

:func:`reproduce_section` renders the markdown section: per dataset the fetch command, the run
command, the expected cost (:data:`COST`, labelled estimates unless measured) and the paper's MAE
next to ours ("—" where the suite has not been run). Datasets not registered in this build are
listed all the same, marked as such.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import pandas as pd

__all__ = [
    "COST",
    "METHOD_LABELS",
    "PAPER_DATASETS",
    "PAPER_ROWS",
    "Cost",
    "PaperRow",
    "ours_mae",
    "paper_mae",
    "reproduce_section",
]

#: Column header of each estimator key, in the paper's column order.
METHOD_LABELS: Final[dict[str, str]] = {
    "ac": "AC", "doc": "DoC", "im": "IM", "gnnevaluator": "GNNEval", "atc-ne": "ATC",
    "cot": "COT", "alsa-e": "ALSA-E", "alsa-g": "ALSA-G",
}
_TABLE1_METHODS: Final = ("ac", "doc", "im", "atc-ne", "cot", "alsa-e", "alsa-g")
_TABLE2_METHODS: Final = ("ac", "doc", "im", "gnnevaluator", "atc-ne", "cot", "alsa-e", "alsa-g")
#: Family name of the in-distribution target split, never part of a paper row.
_CLEAN: Final[str] = "clean"


@dataclass(frozen=True)
class PaperRow:
    """One row of the paper's MAE tables and the target splits of ours that match it.

    Attributes
    ----------
    table : str
        ``"Table 1"`` (vision, language) or ``"Table 2"`` (ogbn-arxiv).
    dataset : str
        Our registry key (= suite) of the dataset.
    paper_dataset, variant : str
        The row's labels in the paper ("CIFAR10", "CIFAR-10.1").
    mae, std : mapping of str to str
        Published MAE and its standard deviation per estimator key, as printed (pp).
    families : tuple of str or None
        Our shift families that make the row; None = every family but ``clean``.
    pattern : str
        Regular expression (case-insensitive) a target's ``split`` or ``shift`` name must
        contain; "" = any.
    backbone : str or None
        The backbone of the row (Table 2), or None for every backbone run.
    """

    table: str
    dataset: str
    paper_dataset: str
    variant: str
    mae: Mapping[str, str]
    std: Mapping[str, str]
    families: tuple[str, ...] | None = None
    pattern: str = ""
    backbone: str | None = None

    @property
    def methods(self) -> tuple[str, ...]:
        """Estimator keys of the row's table, in the paper's column order."""
        return tuple(self.mae)

    @property
    def label(self) -> str:
        """``"<paper dataset> / <variant>"``, e.g. ``"CIFAR10 / CIFAR-10.1"``."""
        return f"{self.paper_dataset} / {self.variant}"


# The paper's Table 4 and Table 5 as printed: "dataset ; variant ; MAE per column", then the
# standard deviations in parentheses on the next line (Table 1 / 2 repeat the same MAE).
_TABLE4: Final[str] = r"""
CIFAR10 ; CIFAR-10.1 ; 4.82 4.69 5.70 1.27 3.02 2.83 1.22
(0.95) (0.90) (0.75) (0.78) (0.89) (1.39) (1.97)
CIFAR10 ; CIFAR-10.2 ; 7.97 7.84 8.74 4.59 6.20 0.61 4.19
(0.21) (0.14) (0.04) (0.66) (0.21) (0.54) (0.66)
CIFAR10 ; CIFAR-10C ; 6.57 6.44 7.60 2.28 3.18 5.09 4.18
(6.84) (6.83) (7.33) (2.95) (1.89) (3.89) (6.03)
CIFAR100 ; CIFAR-100C ; 9.46 7.80 9.02 3.85 2.41 7.26 6.56
(7.80) (7.78) (8.27) (3.98) (1.88) (8.03) (7.45)
A-WILDS ; Subpop1 ; 3.70 2.16 2.14 5.90 3.39 0.99 0.97
(2.66) (0.17) (0.13) (7.66) (2.47) (0.27) (0.91)
A-WILDS ; Subpop2 ; 4.19 2.65 2.65 5.82 4.18 1.43 1.17
(2.82) (0.33) (0.29) (7.91) (2.76) (0.39) (0.60)
W-WILDS ; Subpop ; 0.78 0.79 0.74 1.55 0.97 0.32 0.54
(0.93) (0.36) (0.43) (0.44) (1.11) (0.18) (0.30)
ImageNet ; ImageNetv2 ; 3.63 2.68 2.85 0.75 9.57 4.07 3.22
(2.59) (2.41) (2.56) (0.54) (4.63) (2.91) (2.05)
MNIST ; MNIST-M ; 13.27 13.44 16.29 13.63 4.96 2.82 3.09
(3.54) (3.51) (2.00) (3.45) (2.52) (3.73) (1.73)
Office-31 ; domain ; 38.67 34.47 32.90 41.55 11.40 8.35 7.77
(15.29) (8.35) (7.37) (33.25) (6.44) (7.47) (3.32)
"""
_TABLE5: Final[str] = r"""
ogbn-arxiv ; GCN ; 1.61 2.94 3.89 10.59 19.76 6.64 1.13 0.99
(1.09) (1.54) (1.43) (8.81) (5.76) (2.18) (1.18) (0.58)
ogbn-arxiv ; SAGE ; 1.31 1.72 2.07 10.42 25.31 5.85 2.21 1.08
(0.56) (0.67) (0.94) (8.42) (3.21) (2.72) (1.55) (0.76)
ogbn-arxiv ; GAT ; 3.24 4.16 4.60 13.34 23.89 5.06 1.73 1.01
(3.42) (3.47) (3.54) (9.22) (3.80) (2.84) (2.20) (0.86)
ogbn-arxiv ; GIN ; 30.09 5.86 7.17 9.54 32.28 30.79 2.18 2.14
(2.72) (2.70) (1.63) (6.49) (4.28) (2.36) (1.23) (1.71)
ogbn-arxiv ; AVG. ; 9.06 3.67 4.43 10.97 25.31 12.09 1.81 1.30
(1.95) (2.10) (1.89) (8.24) (4.26) (10.1) (1.54) (0.98)
"""
#: Which of our target splits make each paper row: (paper dataset, variant) -> (registry key,
#: shift families or None for every family but clean, split/shift name pattern, backbone).
_MATCH: Final[dict[tuple[str, str], tuple[str, tuple[str, ...] | None, str, str | None]]] = {
    ("CIFAR10", "CIFAR-10.1"): ("cifar10", ("natural",), r"10\.1", None),
    ("CIFAR10", "CIFAR-10.2"): ("cifar10", ("natural",), r"10\.2", None),
    ("CIFAR10", "CIFAR-10C"): ("cifar10", ("synthetic",), "", None),
    ("CIFAR100", "CIFAR-100C"): ("cifar100", ("synthetic",), "", None),
    ("A-WILDS", "Subpop1"): ("amazon-wilds", ("subpopulation",), "subpop1|ood-val", None),
    ("A-WILDS", "Subpop2"): ("amazon-wilds", ("subpopulation",), "subpop2|ood-test", None),
    ("W-WILDS", "Subpop"): ("waterbirds", ("subpopulation",), "", None),
    ("ImageNet", "ImageNetv2"): ("imagenet", ("natural",), "matched-frequency|imagenetv2-mf",
                                 None),
    ("MNIST", "MNIST-M"): ("mnist", None, "", None),
    ("Office-31", "domain"): ("office31", None, "", None),
    ("ogbn-arxiv", "GCN"): ("ogbn-arxiv", ("temporal",), "", "gcn"),
    ("ogbn-arxiv", "SAGE"): ("ogbn-arxiv", ("temporal",), "", "sage"),
    ("ogbn-arxiv", "GAT"): ("ogbn-arxiv", ("temporal",), "", "gat"),
    ("ogbn-arxiv", "GIN"): ("ogbn-arxiv", ("temporal",), "", "gin"),
    ("ogbn-arxiv", "AVG."): ("ogbn-arxiv", ("temporal",), "", None),
}


def _parse(table: str, text: str, methods: tuple[str, ...]) -> tuple[PaperRow, ...]:
    rows = []
    body = [line.strip() for line in text.splitlines() if line.strip()]
    for head, std_line in zip(body[::2], body[1::2]):
        paper_dataset, variant, mae = (cell.strip() for cell in head.split(";"))
        means, stds = mae.split(), [s.strip("()") for s in std_line.split()]
        if not len(means) == len(stds) == len(methods):
            raise RuntimeError(f"paper row {head!r} has {len(means)} values for {len(methods)}.")
        dataset, families, pattern, backbone = _MATCH[(paper_dataset, variant)]
        rows.append(PaperRow(
            table=table, dataset=dataset, paper_dataset=paper_dataset, variant=variant,
            mae=dict(zip(methods, means)), std=dict(zip(methods, stds)), families=families,
            pattern=pattern, backbone=backbone,
        ))
    return tuple(rows)


#: Every published MAE row: Table 1 (+ Table 4 std), then Table 2 (+ Table 5 std).
PAPER_ROWS: Final[tuple[PaperRow, ...]] = (
    _parse("Table 1", _TABLE4, _TABLE1_METHODS) + _parse("Table 2", _TABLE5, _TABLE2_METHODS)
)
#: Datasets of the paper's tables, in the paper's order (registry keys = suite keys).
PAPER_DATASETS: Final[tuple[str, ...]] = tuple(dict.fromkeys(r.dataset for r in PAPER_ROWS))


@dataclass(frozen=True)
class Cost:
    """What reproducing one dataset's rows costs: download size, CPU and GPU time.

    Attributes
    ----------
    download : str
        Size of what ``alsa-bench fetch`` (or the dataset's own tool) downloads.
    cpu, gpu : str
        Wall time of ``alsa-bench run --suite <dataset>`` for one seed, every backbone:
        CPU = the 2-core machine of docs/PERFORMANCE.md, GPU = one current data-centre GPU.
    measured : bool
        True when the figures were measured here; False marks them as estimates.
    """

    download: str
    cpu: str
    gpu: str
    measured: bool = False


#: Cost per dataset. Estimates from the measured CPU throughput of the CIFAR ResNet18 recipe
#: (1.04 s per 1,000 training images and 3,100 images/s of inference at 32x32 on 2 idle cores,
#: ``benchmarks/bench_vision_train.py``, docs/PERFORMANCE.md) and model FLOPs for larger images;
#: none of these suites has been run end to end here.
COST: Final[dict[str, Cost]] = {
    "cifar10": Cost("≈ 3.1 GB (CIFAR-10, CIFAR-10.1 v6, CIFAR-10.2, CIFAR-10-C)",
                    "≈ 0.5–1 h (ResNet18 ≈ 28 s/epoch on 26.7k images until early stopping; "
                    "≈ 5 min to predict 960k CIFAR-10-C images)", "≈ 5–15 min"),
    "cifar100": Cost("≈ 3.1 GB (CIFAR-100, CIFAR-100-C)", "≈ 0.5–1 h", "≈ 5–15 min"),
    "amazon-wilds": Cost("≈ 2 GB (Amazon-WILDS v2.1, with `wilds`)",
                         "days for the full recipe; hours on a subset "
                         "(`--max-train-samples`, docs/TEXT_ONLINE.md)", "≈ 1–4 h"),
    "waterbirds": Cost("≈ 0.5 GB (Waterbirds v1.0)",
                       "≈ 1–3 h (224 px ResNet18 ≈ 4 min/epoch on 4.8k images)",
                       "≈ 5–10 min"),
    "imagenet": Cost("≈ 3.8 GB ImageNetV2 (3 variants) + 6.4 GB ImageNet validation images "
                     "+ ≈ 0.3 GB pretrained weights",
                     "≈ 0.5–1 h (inference only: 80k images x 3 pretrained models)", "≈ 2–5 min"),
    "mnist": Cost("≈ 0.1 GB (MNIST, MNIST-M)", "≈ 5–15 min (3-layer CNN, 5 epochs)",
                  "≈ 1 min"),
    "office31": Cost("≈ 0.1 GB (Office-31)", "≈ 0.5–1.5 h (224 px ResNet18 ≈ 2 min/epoch on 2.3k images)",
                     "≈ 2–5 min"),
    "ogbn-arxiv": Cost("≈ 81 MB (with `ogb`)", "≈ 1–2 h (4 GNNs, full batch, 169k nodes)",
                       "≈ 5–10 min"),
}


def paper_mae(dataset: str | None = None) -> pd.DataFrame:
    """The published MAE in long form.

    Parameters
    ----------
    dataset : str, optional
        Keep only the rows of this registry key.

    Returns
    -------
    DataFrame
        Columns ``table``, ``dataset``, ``row`` (:attr:`PaperRow.label`), ``method``,
        ``mae`` and ``std`` (floats, percentage points), in the paper's order.
    """
    records = [
        {"table": r.table, "dataset": r.dataset, "row": r.label, "method": m,
         "mae": float(r.mae[m]), "std": float(r.std[m])}
        for r in PAPER_ROWS if dataset is None or r.dataset == dataset for m in r.methods
    ]
    return pd.DataFrame.from_records(
        records, columns=["table", "dataset", "row", "method", "mae", "std"]
    )


def ours_mae(rows: pd.DataFrame | None, row: PaperRow) -> dict[str, tuple[float, float, int]]:
    """Our MAE for one paper row, per method: ``(mean, std, n_seeds)`` in percentage points.

    Parameters
    ----------
    rows : DataFrame or None
        ``report_rows`` records: ``dataset``, ``seed``, ``shift_family``, ``method`` and
        ``abs_error`` (a fraction) or ``estimated_accuracy`` and ``true_accuracy``; ``split``,
        ``shift`` and ``backbone`` are used when present.
    row : PaperRow
        Which target splits to pool (:attr:`PaperRow.families`, ``pattern``, ``backbone``).

    Returns
    -------
    dict
        Methods of the row that have at least one finite error: mean over seeds of the
        per-seed mean absolute error (pp), the sample standard deviation over seeds (NaN for
        one seed), and the number of seeds. Empty when nothing matches.

    Raises
    ------
    ValueError
        If ``rows`` lacks a needed column.
    """
    if rows is None or len(rows) == 0:
        return {}
    needed = {"dataset", "seed", "shift_family", "method"}
    has_abs = "abs_error" in rows.columns
    if not has_abs:
        needed |= {"estimated_accuracy", "true_accuracy"}
    missing = sorted(needed - set(rows.columns))
    if missing:
        raise ValueError(f"rows must have the report_rows columns {sorted(needed)}; "
                         f"missing {missing} (got {list(rows.columns)}).")
    keep = (rows["dataset"] == row.dataset) & (rows["shift_family"] != _CLEAN)
    keep &= rows["method"].isin(row.methods)
    if row.families is not None:
        keep &= rows["shift_family"].isin(row.families)
    if row.backbone is not None and "backbone" in rows.columns:
        keep &= rows["backbone"] == row.backbone
    if row.pattern:
        named = [c for c in ("split", "shift") if c in rows.columns]
        hit = pd.Series(False, index=rows.index)
        for column in named:
            hit |= rows[column].astype(str).str.contains(row.pattern, flags=re.IGNORECASE,
                                                         regex=True)
        keep &= hit
    chosen = rows.loc[keep]
    if has_abs:
        error = chosen["abs_error"].astype(float)
    else:
        error = (chosen["estimated_accuracy"].astype(float)
                 - chosen["true_accuracy"].astype(float)).abs()
    frame = pd.DataFrame({"method": chosen["method"], "seed": chosen["seed"],
                          "pp": 100.0 * error}).dropna()
    per_seed = frame.groupby(["method", "seed"])["pp"].mean()
    out: dict[str, tuple[float, float, int]] = {}
    for method, values in per_seed.groupby(level="method"):
        n = int(values.size)
        std = float(values.std(ddof=1)) if n > 1 else math.nan
        out[str(method)] = (float(values.mean()), std, n)
    return out


def _fmt_ours(value: tuple[float, float, int] | None) -> str:
    if value is None:
        return "—"
    mean, std, _ = value
    return f"{mean:.2f}" if math.isnan(std) else f"{mean:.2f} ({std:.2f})"


def _row_table(paper_rows: list[PaperRow], rows: pd.DataFrame | None) -> list[str]:
    methods = paper_rows[0].methods
    lines = [
        "| variant | | " + " | ".join(METHOD_LABELS[m] for m in methods) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in methods) + " |",
    ]
    for prow in paper_rows:
        ours = ours_mae(rows, prow)
        seeds = max((n for _, _, n in ours.values()), default=0)
        lines.append(f"| {prow.variant} | paper | "
                     + " | ".join(f"{prow.mae[m]} ({prow.std[m]})" for m in methods) + " |")
        label = f"ours ({seeds} seed{'s' if seeds != 1 else ''})" if ours else "ours"
        lines.append(f"| | {label} | " + " | ".join(_fmt_ours(ours.get(m)) for m in methods)
                     + " |")
    return lines


def _dataset_block(dataset: str, rows: pd.DataFrame | None) -> list[str]:
    from tasks.data.datasets import DATASETS
    from tasks.data.fetch import fetch_instructions

    spec = DATASETS.get(dataset)
    suite = spec.suite if spec is not None else dataset
    title = spec.description if spec is not None else "not registered in this build yet"
    fetch = (fetch_instructions(dataset) if spec is not None
             else f"`alsa-bench fetch {dataset}` (once the dataset is registered)")
    lines = [f"### `{dataset}` — {title}", ""]
    if spec is not None and spec.paper_row:
        lines.append(f"- paper row: {spec.paper_row}")
    lines += [
        f"- get the data: {fetch}",
        (f"- run: `alsa-bench run --suite {suite}` (one seed); the paper's protocol, every "
         f"backbone and 3 seeds: `alsa-bench run --suite {suite} --full`"),
    ]
    cost = COST.get(dataset)
    if cost is None:
        lines.append("- expected cost: not estimated")
    else:
        kind = "measured" if cost.measured else "estimate"
        lines.append(f"- download: {cost.download}; expected time per seed ({kind}): "
                     f"CPU {cost.cpu}, GPU {cost.gpu}")
    paper_rows = [r for r in PAPER_ROWS if r.dataset == dataset]
    lines.append("")
    if paper_rows:
        lines += _row_table(paper_rows, rows)
    else:
        lines.append("The paper reports no row for this dataset.")
    lines.append("")
    return lines


#: What a dry run of each online suite cost at real size on generated releases (issue 23;
#: ``docs/PERFORMANCE.md``, "Online suites at real size on generated releases"): one seed, one
#: epoch, one backbone, on this project's 2-core CPU while another session shared it. Columns:
#: suite, backbone and recipe, stage seconds (download / train / extract / estimate / report),
#: peak RSS, disk written, dominant stage. Measured, never estimated; a suite not run says so.
DRY_RUNS: Final[tuple[tuple[str, str, str, str, str, str], ...]] = (
    ("cifar10", "resnet18, 1 epoch", "0.3 / 267.7 / 681.2 / 47.9 / 3.1", "4.44 GiB",
     "124 MB + 30 MB shift cache", "extract (970,667 rows, 1,425 img/s)"),
    ("cifar100", "resnet18, 1 epoch (quiet machine, with features)",
     "0.3 / 36.6 / 298.0 / 145.4 / 8.9", "4.61 GiB", "1.70 GB (0.95 GB of it features)",
     "extract (966,666 rows, 3,244 img/s)"),
    ("amazon-wilds", "distilbert", "not run (no DistilBERT weights offline)", "—", "—", "—"),
    ("waterbirds", "resnet18, 1 epoch (quiet machine, after the allocator fix)",
     "1.3 / 288.3 / 278.5 / 1.9 / 1.3", "5.51 GiB", "49 MB", "train, extract"),
    ("imagenet", "pretrained", "not run (no pretrained weights offline)", "—", "—", "—"),
    ("mnist", "cnn3, 1 epoch", "0.8 / 8.1 / 8.1 / 7.3 / 1.1", "1.56 GiB",
     "7 MB + 8 MB shift cache", "train, extract"),
    ("office31", "resnet18, 1 epoch (quiet machine, after the allocator fix)",
     "0.6 / 123.1 / 68.5 / 1.7 / 1.3", "3.60 GiB", "50 MB", "train"),
    ("ogbn-arxiv", "sage, 1 epoch", "0.2 / 4.1 / 33.9 / 264.4 / 4.2", "4.59 GiB", "63 MB",
     "estimate (GNNEvaluator)"),
    ("tinyimagenet", "resnet18-ft, 1 epoch",
     "not run (224-pixel inputs: hours an epoch on 2 cores; the generated release and its "
     "loaders are measured in PERFORMANCE.md, \"Tiny ImageNet\")", "—", "—", "—"),
)


#: Suites run on one GPU (issue 23, item 3): suite -> (recipe, stage seconds download / train /
#: extract / estimate / report, peak RSS of the command). Measured on one NVIDIA H100 80GB with
#: 16 CPU cores, on the generated release (docs/PERFORMANCE.md, "The GPU path").
GPU_RUNS: Final[dict[str, tuple[str, str, str]]] = {
    "cifar10": ("resnet18, 8 epochs", "0.3 / 14.2 / 20.0 / 65.4 / 5.6", "4.79 GiB"),
}


#: The paper's protocol run whole on the 2-core CPU (every backbone, 3 seeds, the recipe with its
#: early stopping; ``alsa-bench run --suite S --full``): suite -> command wall, state folder
#: growth, dominant stage (docs/PERFORMANCE.md, "The paper's protocol on 2 cores").
PROTOCOL_RUNS_2CORES: Final[dict[str, str]] = {
    "mnist": "3 min 54 s, 1.71 GiB, 41 MB; train (194 s of the suite's 225 s)",
}


def cost_table() -> list[str]:
    """The measured cost table of :func:`reproduce_section` (:data:`DRY_RUNS`).

    The paper's protocol (three seeds, every backbone, the full recipe) has not been run here,
    on 2 cores or on a GPU; the table says so rather than scale the dry runs up.
    """
    lines = [
        "### What the protocol costs",
        "",
        ("Measured on generated releases at real size (`benchmarks/synth_release.py`; "
         "[PERFORMANCE.md](PERFORMANCE.md), \"Online suites at real size\"), one seed, one "
         "epoch, one backbone, 2 CPU cores shared with another session; \"1 seed, 1 H100\" is "
         "the same command on one NVIDIA H100 with 16 CPU cores (`--device cuda`; "
         "[PERFORMANCE.md](PERFORMANCE.md), \"The GPU path\"), where it was run. \"3 seeds\" is "
         "the paper's protocol (`--full`: every backbone, 3 seeds, the recipe with its early "
         "stopping): command wall, peak RSS, disk, dominant stage, where it was run whole; "
         "**not measured** elsewhere, and on the H100 for every suite."),
        "",
        ("| suite | dry run | stages (s): download / train / extract / estimate / report | "
         "peak RSS | disk | dominant stage | 1 seed, 1 H100: recipe, stages (s), peak RSS | "
         "3 seeds, 2 cores | 3 seeds, 1 H100 |"),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for suite, recipe, stages, rss, disk, dominant in DRY_RUNS:
        gpu = ", ".join(GPU_RUNS[suite]) if suite in GPU_RUNS else "not run"
        cpu3 = PROTOCOL_RUNS_2CORES.get(suite, "not measured")
        lines.append(f"| `{suite}` | {recipe} | {stages} | {rss} | {disk} | {dominant} | {gpu} | "
                     f"{cpu3} | not measured |")
    return [*lines, ""]


def reproduce_section(rows: pd.DataFrame | None = None) -> str:
    """The markdown section "## Reproducing the paper" for docs/BENCHMARK.md.

    Parameters
    ----------
    rows : DataFrame or None, optional
        The report's ``report_rows`` (:func:`ours_mae` lists the columns used); None or empty
        leaves every "ours" cell "—".

    Returns
    -------
    str
        Markdown ending with a newline: an introduction, then per dataset of the paper
        (:data:`PAPER_DATASETS`, whether registered yet or not) and per further online image
        dataset of the registry: fetch command, run command, expected cost, and the paper's MAE
        (mean (std) over 3 seeds, pp) next to ours.

    Raises
    ------
    ValueError
        If ``rows`` lacks a needed column.
    """
    from tasks.data.datasets import DATASETS

    if rows is not None and not isinstance(rows, pd.DataFrame):
        raise ValueError(f"rows must be a pandas DataFrame or None; got {type(rows).__name__}.")
    extra = [name for name, spec in DATASETS.items()
             if spec.online and spec.modality == "image" and name not in PAPER_DATASETS]
    lines = [
        "## Reproducing the paper",
        "",
        ("Each online dataset below is downloaded once (`alsa-bench fetch`, see "
         "[FETCH.md](FETCH.md); checksums are verified and nothing downloads at run time) and "
         "then run like any suite. \"paper\" is the MAE in percentage points, mean (std) over "
         "three seeds, of the ALSA paper's Table 1 / Table 4 (vision, language) and Table 2 / "
         "Table 5 (ogbn-arxiv); its ATC is the negative-entropy variant (App. G), our `atc-ne`. "
         "\"ours\" is the same statistic from this benchmark's runs (every target split of the "
         "row and every backbone run, averaged per seed; mean (std) over seeds), filled in by "
         "`alsa-bench report --to-docs`; \"—\" means the suite has not been run here. Times "
         "are estimates unless marked measured (CPU: 2 cores; see "
         "[PERFORMANCE.md](PERFORMANCE.md))."),
        "",
    ]
    lines += cost_table()
    for dataset in (*PAPER_DATASETS, *extra):
        lines += _dataset_block(dataset, rows)
    return "\n".join(lines).rstrip("\n") + "\n"
