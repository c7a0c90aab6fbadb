r"""The COT paper's two tables: R² and Spearman ρ (Table 1) and MAE (Table 2), ours beside theirs.

Lu et al., "Predicting Out-of-Distribution Error with Confidence Optimal Transport"
(``shared/papers/002_…``), compare COT with AC, Entropy, GDE, ATC and ProjNorm on CIFAR-10-C,
CIFAR-100-C and Tiny-ImageNet-C with ResNet18, ResNet50 and VGG11 (fine-tuned from ImageNet
weights, inputs upsampled to 224, temperature-scaled on validation).

What the paper measures (its "Evaluation Metrics" paragraph)
-------------------------------------------------------------
* :math:`R^2` and Spearman's :math:`\rho` "measure the linear correlation between a method's
  output quantity and the actual test error", over the corrupted test sets of one dataset and
  network (every corruption at every severity). The *output quantity* is the method's estimated
  error for AC, GDE, ATC and COT (:math:`1 - \hat a`: for GDE the disagreement rate), the mean
  prediction entropy for Entropy, the parameter distance for ProjNorm; :math:`R^2` is the
  coefficient of determination of the least-squares line of the true error on that quantity
  (the squared Pearson correlation), :math:`\rho` the rank correlation of the two.
* MAE is "how good a method's estimate of the test error is compared to the true error", for
  the methods that give an estimate (AC, GDE, ATC, COT): the mean over the corrupted sets of
  :math:`|\widehat{err} - err|`, in percentage points. Entropy and ProjNorm give no estimate:
  the paper has no MAE for them; ours is the MAE of their score mapped to an accuracy on the
  run's other corruption types (:mod:`tasks.report.scores`, leave one type out), marked
  "mapped".

Ours are computed the same way on each run's ``synthetic`` (corruption) family, per run (one
seed), then averaged over the seeds (their number in the cell's row). The paper's "ATC" column is
our ``atc-ne`` (the ATC paper's headline score, as the ALSA paper's table reads it:
:mod:`tasks.report.paper_table`); ALSA (``alsa-g``, not in the COT paper) is shown beside them.

Published numbers
-----------------
:data:`COT_TABLE1` and :data:`COT_TABLE2` copy the two tables digit for digit from the paper's
text (``tests/tasks/fixtures/cot_paper_tables.txt`` holds those lines verbatim and the tests
check the data against them). Rows: dataset × network, then each dataset's "Average".

Cells that cannot be filled
---------------------------
Every cell of the paper's nine dataset × network rows is either filled or says why in one line
(:func:`cot_markdown`'s legend): the dataset or network is not registered in this build, it has
not been run here (with the commands that run it), GDE has a single seed, ProjNorm did not run,
too few corruption splits. Runs on a generated release are marked SYNTHETIC.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pandas as pd

__all__ = [
    "COT_DATASETS",
    "COT_METHODS",
    "COT_NETWORKS",
    "COT_TABLE1",
    "COT_TABLE2",
    "CotPaperCell",
    "cot_markdown",
    "cot_metrics",
    "cot_quantities",
    "paper_cells",
]

#: The paper's datasets -> our registry keys (each is also its suite).
COT_DATASETS: Final[dict[str, str]] = {
    "CIFAR10": "cifar10", "CIFAR100": "cifar100", "TinyImageNet": "tinyimagenet",
}
#: The paper's networks -> our backbone keys (ImageNet weights, upsampled inputs; the ALSA
#: paper's from-scratch ``resnet18`` is another protocol and not used for these rows).
COT_NETWORKS: Final[dict[str, str]] = {
    "ResNet18": "resnet18-ft", "ResNet50": "resnet50", "VGG11": "vgg11",
}
#: Column label of each of our method keys, in the paper's column order, then ALSA.
COT_METHODS: Final[dict[str, str]] = {
    "ac": "AC", "entropy": "Entropy", "gde": "GDE", "atc-ne": "ATC", "projnorm": "ProjNorm",
    "cot": "COT", "alsa-g": "ALSA",
}
#: The methods whose output quantity is a score (no estimate of their own).
SCORE_METHODS: Final[tuple[str, ...]] = ("entropy", "projnorm")
#: The shift family whose splits make the tables (CIFAR-10-C and the like).
CORRUPTIONS: Final[str] = "synthetic"
#: Fewest corruption splits a run needs for R² and ρ.
MIN_SPLITS: Final[int] = 3

# Table 1 as printed (R² then ρ for AC, Entropy, GDE, ATC, ProjNorm, COT).
COT_TABLE1: Final[str] = """
CIFAR10 ; ResNet18 ; 0.825 0.980 0.862 0.982 0.842 0.981 0.875 0.987 0.947 0.988 0.996 0.998
CIFAR10 ; ResNet50 ; 0.950 0.995 0.949 0.995 0.959 0.995 0.885 0.989 0.936 0.989 0.993 0.996
CIFAR10 ; VGG11 ; 0.710 0.938 0.762 0.958 0.723 0.948 0.548 0.851 0.756 0.949 0.994 0.993
CIFAR10 ; Average ; 0.828 0.971 0.858 0.978 0.841 0.975 0.769 0.942 0.880 0.975 0.994 0.996
CIFAR100 ; ResNet18 ; 0.943 0.987 0.932 0.984 0.950 0.988 0.927 0.985 0.969 0.974 0.995 0.997
CIFAR100 ; ResNet50 ; 0.957 0.987 0.948 0.984 0.962 0.989 0.955 0.991 0.982 0.991 0.992 0.996
CIFAR100 ; VGG11 ; 0.794 0.959 0.821 0.973 0.870 0.978 0.736 0.975 0.653 0.849 0.996 0.997
CIFAR100 ; Average ; 0.898 0.978 0.900 0.980 0.927 0.985 0.873 0.984 0.868 0.938 0.994 0.997
TinyImageNet ; ResNet18 ; 0.755 0.923 0.664 0.892 0.777 0.913 0.751 0.935 0.973 0.990 0.995 0.998
TinyImageNet ; ResNet50 ; 0.844 0.975 0.776 0.954 0.892 0.981 0.800 0.962 0.983 0.990 0.994 0.997
TinyImageNet ; VGG11 ; 0.563 0.736 0.493 0.684 0.587 0.748 0.746 0.837 0.671 0.825 0.987 0.992
TinyImageNet ; Average ; 0.727 0.878 0.644 0.843 0.752 0.881 0.766 0.911 0.876 0.935 0.992 0.996
"""
# Table 2 as printed (MAE in percentage points for AC, GDE, ATC, COT).
COT_TABLE2: Final[str] = """
CIFAR10 ; ResNet18 ; 10.6 13.1 3.68 1.9
CIFAR10 ; ResNet50 ; 6.5 9.65 3.17 1.50
CIFAR10 ; VGG11 ; 10.4 22.5 6.94 1.94
CIFAR10 ; Average ; 9.2 15.1 4.6 1.8
CIFAR100 ; ResNet18 ; 11.3 14.9 3.6 2.9
CIFAR100 ; ResNet50 ; 11.2 19.2 3.5 3.3
CIFAR100 ; VGG11 ; 11.7 31.2 6.2 2.2
CIFAR100 ; Average ; 11.4 21.8 4.5 2.8
TinyImageNet ; ResNet18 ; 12.45 27.5 4.48 3.43
TinyImageNet ; ResNet50 ; 13.7 29.8 3.49 3.24
TinyImageNet ; VGG11 ; 12.68 43.53 7.41 2.02
TinyImageNet ; Average ; 12.95 33.60 5.12 2.90
"""
_T1_METHODS: Final = ("ac", "entropy", "gde", "atc-ne", "projnorm", "cot")
_T2_METHODS: Final = ("ac", "gde", "atc-ne", "cot")


@dataclass(frozen=True)
class CotPaperCell:
    """One row of the paper's tables (a dataset × network, or a dataset's average).

    Attributes
    ----------
    dataset, network : str
        As printed (``"CIFAR10"``, ``"ResNet18"`` or ``"Average"``).
    r2, rho : mapping of str to str
        Table 1's :math:`R^2` and :math:`\\rho` per method key, as printed.
    mae : mapping of str to str
        Table 2's MAE (pp) per method key, as printed (AC, GDE, ATC, COT only).
    """

    dataset: str
    network: str
    r2: Mapping[str, str]
    rho: Mapping[str, str]
    mae: Mapping[str, str]


def _parse(text: str, width: int) -> dict[tuple[str, str], list[str]]:
    out = {}
    for line in (ln.strip() for ln in text.splitlines()):
        if not line:
            continue
        dataset, network, numbers = (cell.strip() for cell in line.split(";"))
        values = numbers.split()
        if len(values) != width:
            raise RuntimeError(f"COT paper row {line!r} has {len(values)} numbers, not {width}.")
        out[(dataset, network)] = values
    return out


def paper_cells() -> tuple[CotPaperCell, ...]:
    """The paper's rows in its order, both tables joined."""
    t1 = _parse(COT_TABLE1, 2 * len(_T1_METHODS))
    t2 = _parse(COT_TABLE2, len(_T2_METHODS))
    if t1.keys() != t2.keys():
        raise RuntimeError("the COT paper's two tables must have the same rows.")
    cells = []
    for (dataset, network), values in t1.items():
        cells.append(CotPaperCell(
            dataset, network, r2=dict(zip(_T1_METHODS, values[0::2])),
            rho=dict(zip(_T1_METHODS, values[1::2])),
            mae=dict(zip(_T2_METHODS, t2[(dataset, network)])),
        ))
    return tuple(cells)


# ------------------------------------------------------------------------------- our numbers
def cot_quantities(rows: pd.DataFrame, scores: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each method's output quantity and the true error on every corruption split.

    Parameters
    ----------
    rows : DataFrame
        ``report_rows`` records (``dataset``, ``backbone``, ``seed``, ``run_key``, ``split``,
        ``shift_family``, ``method``, ``estimated_accuracy``, ``true_accuracy``).
    scores : DataFrame, optional
        The score methods mapped by :func:`tasks.report.scores.map_scores` (``score`` and the
        mapped ``estimated_accuracy``); their quantity is the score.

    Returns
    -------
    DataFrame
        ``dataset``, ``backbone``, ``seed``, ``run_key``, ``split``, ``method``,
        ``quantity`` (estimated error or score), ``error`` (true error) and ``abs_error_pp``
        (percentage points; NaN for a score without a mapped accuracy), corruption splits of
        the :data:`COT_METHODS` only.
    """
    cols = ["dataset", "backbone", "seed", "run_key", "split", "method", "quantity", "error",
            "abs_error_pp"]
    parts = []
    keep = rows[(rows["shift_family"] == CORRUPTIONS) & rows["method"].isin(COT_METHODS)
                & ~rows["method"].isin(SCORE_METHODS)]
    if len(keep):
        est = keep["estimated_accuracy"].astype(float)
        true = keep["true_accuracy"].astype(float)
        parts.append(pd.DataFrame({
            **{c: keep[c].to_numpy() for c in cols[:6]},
            "quantity": (1.0 - est).to_numpy(), "error": (1.0 - true).to_numpy(),
            "abs_error_pp": (100.0 * (est - true).abs()).to_numpy(),
        }))
    if scores is not None and len(scores):
        sc = scores[(scores["shift_family"] == CORRUPTIONS) & scores["method"].isin(SCORE_METHODS)]
        if len(sc):
            mapped = sc["estimated_accuracy"].astype(float)
            true = sc["true_accuracy"].astype(float)
            parts.append(pd.DataFrame({
                **{c: sc[c].to_numpy() for c in cols[:6]},
                "quantity": sc["score"].astype(float).to_numpy(),
                "error": (1.0 - true).to_numpy(),
                "abs_error_pp": (100.0 * (mapped - true).abs()).to_numpy(),
            }))
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)
    return out[np.isfinite(out["quantity"].astype(float))].reset_index(drop=True)


def _run_metrics(g: pd.DataFrame) -> dict[str, float]:
    from scipy.stats import spearmanr

    x, e = g["quantity"].astype(float).to_numpy(), g["error"].astype(float).to_numpy()
    r2 = rho = math.nan
    if len(g) >= MIN_SPLITS and np.ptp(x) > 0 and np.ptp(e) > 0:
        r2 = float(np.corrcoef(x, e)[0, 1] ** 2)
        rho = float(spearmanr(x, e).statistic)
    mae = g["abs_error_pp"].astype(float)
    return {"r2": r2, "rho": rho, "mae_pp": float(mae.mean()) if mae.notna().any() else math.nan,
            "n_splits": int(len(g))}


def cot_metrics(quantities: pd.DataFrame) -> pd.DataFrame:
    """R², Spearman ρ and MAE per run, then averaged over the seeds of each dataset × backbone.

    Parameters
    ----------
    quantities : DataFrame
        From :func:`cot_quantities`.

    Returns
    -------
    DataFrame
        ``dataset``, ``backbone``, ``method``, ``r2``, ``rho``, ``mae_pp`` (means over seeds of
        the per-run values; NaN where undefined), ``n_seeds`` and ``n_splits`` (per run, the
        largest).
    """
    cols = ["dataset", "backbone", "method", "r2", "rho", "mae_pp", "n_seeds", "n_splits"]
    if quantities.empty:
        return pd.DataFrame(columns=cols)
    per_run = [
        {"dataset": d, "backbone": b, "method": m, "seed": s, **_run_metrics(g)}
        for (d, b, m, s), g in quantities.groupby(["dataset", "backbone", "method", "seed"],
                                                  sort=True)
    ]
    frame = pd.DataFrame.from_records(per_run)
    out = (frame.groupby(["dataset", "backbone", "method"], sort=True)
           .agg(r2=("r2", "mean"), rho=("rho", "mean"), mae_pp=("mae_pp", "mean"),
                n_seeds=("seed", "nunique"), n_splits=("n_splits", "max"))
           .reset_index())
    return out[cols]


# ------------------------------------------------------------------------------- markdown
class _Legend:
    """Numbered one-line reasons, each written once."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def mark(self, reason: str) -> str:
        if reason not in self.lines:
            self.lines.append(reason)
        return f"— [{self.lines.index(reason) + 1}]"


def _registered(dataset: str, backbone: str) -> str | None:
    """Why a dataset × backbone cannot run in this build, or None."""
    from tasks.data.datasets import DATASETS
    from tasks.models.backbones import BACKBONES

    spec = DATASETS.get(dataset)
    if spec is None:
        return f"`{dataset}` is not registered in this build (issue 32, items 4-5)."
    if backbone not in BACKBONES:
        return f"backbone `{backbone}` is not registered in this build (issue 32, item 5)."
    if not spec.applies(backbone):
        return f"`{backbone}` is not a backbone of `{dataset}` in this build."
    return None


def _not_run(dataset: str, backbone: str) -> str:
    from tasks.data.datasets import DATASETS

    spec = DATASETS[dataset]
    fetch = f"`alsa-bench fetch {dataset}`, then " if spec.online else ""
    return (f"`{dataset}` × `{backbone}` has not been run here: {fetch}`alsa-bench run --suite "
            f"{spec.suite} --backbone {backbone} --seeds 2`.")


def _missing(method: str, n_seeds: int) -> str:
    if method == "gde" and n_seeds < 2:
        return "GDE needs a second seed of the same run (`--seeds 2` or more)."
    if method == "projnorm":
        return ("ProjNorm did not run: it fine-tunes the network per split and is off by "
                "default on the CPU (`ALSA_BENCH_PROJNORM=on`, or `--method projnorm`).")
    return f"{COT_METHODS[method]} has no estimates on these runs."


def _fmt(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def cot_markdown(
    metrics: pd.DataFrame,
    *,
    synthetic: Sequence[str] = (),
    extra_rows: bool = True,
) -> str:
    """The section "The COT paper's tables": Table 1 (R² / ρ) and Table 2 (MAE), paper and ours.

    Parameters
    ----------
    metrics : DataFrame
        From :func:`cot_metrics` (possibly empty).
    synthetic : sequence of str
        Datasets whose runs come from a generated release: their rows are marked SYNTHETIC.
    extra_rows : bool, default True
        Also show, below the paper's rows, every other dataset × backbone of ``metrics`` (this
        benchmark's own corruption families, not in the paper).

    Returns
    -------
    str
        Markdown ending with a newline.
    """
    legend = _Legend()
    by_key = {(r.dataset, r.backbone, r.method): r for r in metrics.itertuples(index=False)}
    seeds = metrics.groupby(["dataset", "backbone"])["n_seeds"].max().to_dict() if len(
        metrics) else {}
    methods = list(COT_METHODS)
    head = "| dataset | network | | " + " | ".join(COT_METHODS.values()) + " |"
    rule = "| --- | --- | --- | " + " | ".join("---:" for _ in methods) + " |"
    t1, t2 = [head, rule], [head, rule]
    cells = {(c.dataset, c.network): c for c in paper_cells()}

    def ours(dataset: str, backbone: str, label_ds: str, label_net: str, paper: Any) -> None:
        why = _registered(dataset, backbone)
        if why is None and (dataset, backbone) not in seeds:
            why = _not_run(dataset, backbone)
        n = int(seeds.get((dataset, backbone), 0))
        tag = " SYNTHETIC" if dataset in synthetic else ""
        label = f"ours ({n} seed{'s' if n != 1 else ''}){tag}" if why is None else "ours"
        row1, row2 = [], []
        for m in methods:
            if why is not None:
                row1.append(legend.mark(why))
                row2.append(legend.mark(why))
                continue
            r = by_key.get((dataset, backbone, m))
            if r is None:
                row1.append(legend.mark(_missing(m, n)))
                row2.append(legend.mark(_missing(m, n)))
                continue
            if math.isnan(r.r2):
                row1.append(legend.mark(f"fewer than {MIN_SPLITS} corruption splits, or a "
                                        "constant quantity: R² and ρ are undefined."))
            else:
                row1.append(f"{_fmt(r.r2, 3)} / {_fmt(r.rho, 3)}")
            if math.isnan(r.mae_pp):
                row2.append(legend.mark("no mapped accuracy: the run's corruption family has "
                                        "too few types for a leave-one-type-out map."))
            else:
                row2.append(_fmt(r.mae_pp, 2) + (" (mapped)" if m in SCORE_METHODS else ""))
        if paper is not None:
            t1.append(f"| {label_ds} | {label_net} | paper | " + " | ".join(
                f"{paper.r2[m]} / {paper.rho[m]}" if m in paper.r2
                else legend.mark("ALSA is not in the COT paper.") for m in methods) + " |")
            t2.append(f"| {label_ds} | {label_net} | paper | " + " | ".join(
                paper.mae[m] if m in paper.mae else legend.mark(
                    "ALSA is not in the COT paper." if m == "alsa-g" else
                    "the paper gives no MAE for a score without an estimate (Entropy, "
                    "ProjNorm).") for m in methods) + " |")
            label_ds = label_net = ""
        t1.append(f"| {label_ds} | {label_net} | {label} | " + " | ".join(row1) + " |")
        t2.append(f"| {label_ds} | {label_net} | {label} | " + " | ".join(row2) + " |")

    for paper_ds, dataset in COT_DATASETS.items():
        for paper_net, backbone in COT_NETWORKS.items():
            ours(dataset, backbone, paper_ds, paper_net, cells[(paper_ds, paper_net)])
        avg = cells[(paper_ds, "Average")]
        t1.append(f"| {paper_ds} | Average | paper | " + " | ".join(
            f"{avg.r2[m]} / {avg.rho[m]}" if m in avg.r2
            else legend.mark("ALSA is not in the COT paper.") for m in methods) + " |")
        t2.append(f"| {paper_ds} | Average | paper | " + " | ".join(
            avg.mae[m] if m in avg.mae else legend.mark(
                "ALSA is not in the COT paper." if m == "alsa-g" else
                "the paper gives no MAE for a score without an estimate (Entropy, "
                "ProjNorm).") for m in methods) + " |")
        a1, a2 = [], []
        for m in methods:
            found = [by_key.get((dataset, b, m)) for b in COT_NETWORKS.values()]
            if any(r is None for r in found):
                why = "the average needs all three networks' values."
                a1.append(legend.mark(why))
                a2.append(legend.mark(why))
                continue
            r2 = [r.r2 for r in found]
            rho = [r.rho for r in found]
            mae = [r.mae_pp for r in found]
            a1.append(legend.mark("the average needs all three networks' values.")
                      if any(math.isnan(v) for v in r2)
                      else f"{_fmt(float(np.mean(r2)), 3)} / {_fmt(float(np.mean(rho)), 3)}")
            a2.append(legend.mark("the average needs all three networks' values.")
                      if any(math.isnan(v) for v in mae) else _fmt(float(np.mean(mae)), 2))
        t1.append("| | | ours | " + " | ".join(a1) + " |")
        t2.append("| | | ours | " + " | ".join(a2) + " |")
    paper_keys = {(d, b) for d in COT_DATASETS.values() for b in COT_NETWORKS.values()}
    if extra_rows:
        for dataset, backbone in sorted(k for k in seeds if k not in paper_keys):
            ours(dataset, backbone, f"`{dataset}`", f"`{backbone}`", None)
    lines = [
        "## The COT paper's tables (R² and Spearman ρ, MAE)",
        "",
        ("Lu et al.'s Table 1 (R² / Spearman ρ of each method's output quantity against the "
         "true error) and Table 2 (MAE of the estimated error, percentage points) over the "
         "corruption splits of each dataset × network, \"paper\" as published, \"ours\" from "
         "these runs (per run, then the mean over seeds). The output quantity is the estimated "
         "error for AC, GDE (the disagreement rate), ATC (`atc-ne`), COT and ALSA (`alsa-g`), "
         "the mean entropy for Entropy and the parameter distance for ProjNorm; our MAE for "
         "those two is of their score mapped to an accuracy on the run's other corruption "
         "types (\"mapped\"). Rows below the paper's are this benchmark's own corruption "
         "families. A cell that cannot be filled here names its reason below the tables."),
        "",
        "### Table 1: R² / Spearman ρ",
        "",
        *t1,
        "",
        "### Table 2: MAE (percentage points)",
        "",
        *t2,
        "",
    ]
    if legend.lines:
        lines += [f"[{i + 1}] {reason}  " for i, reason in enumerate(legend.lines)]
        lines[-1] = lines[-1].rstrip()
        lines.append("")
    return "\n".join(lines)
