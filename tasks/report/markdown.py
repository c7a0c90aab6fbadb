"""The report as text: the terminal MAE table and the markdown of ``report.md``.

The markdown is also what the Prefect artifact shows (:mod:`tasks.report.artifacts`), with the
figures embedded instead of linked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from tasks.report.names import ALL_FAMILIES, methods_in_order

__all__ = ["format_mae_text", "markdown_table", "render_markdown"]


def _mean_rank_markdown(table: pd.DataFrame) -> str:
    view = pd.DataFrame({
        "method": table.index,
        "mean rank": [f"{m:.2f}" if math.isnan(s) else f"{m:.2f} ± {s:.2f}"
                      for m, s in zip(table["mean_rank"], table["std"])],
        "rows": table["rows"].to_numpy(),
        "first places (all seeds)": table["wins"].to_numpy(),
    })
    return view.to_markdown(index=False)


def format_mae_text(tables: Mapping[str, pd.DataFrame]) -> str:
    """The MAE table as plain text for a terminal: ``*`` marks the best method of each row.

    Parameters
    ----------
    tables : mapping
        The output of :func:`~tasks.report.tables.build_report_tables`.

    Returns
    -------
    str
        A fixed-width table with a title line.
    """
    from tabulate import tabulate

    wide = tables["mae_table"]
    body = wide.map(lambda s: f"{s.strip('*')} *" if s.startswith("**") else s)
    flat = body.reset_index()
    return (
        "MAE of the accuracy estimates, percentage points (mean ± std over seeds; * = best)\n"
        + tabulate(flat.values.tolist(), headers=list(flat.columns), tablefmt="simple",
                   disable_numparse=True)
    )


def markdown_table(df: pd.DataFrame) -> str:
    """A wide table as markdown, its index as leading columns, cells as they are."""
    return df.reset_index().to_markdown(index=False, disable_numparse=True)


def render_markdown(
    tables: Mapping[str, pd.DataFrame],
    *,
    title: str,
    images: Sequence[tuple[str, str]] = (),
    notes: Sequence[str] = (),
) -> str:
    """The report as markdown: header, run summary, MAE and correlation tables, images.

    Parameters
    ----------
    tables : mapping
        The output of :func:`~tasks.report.tables.build_report_tables`.
    title : str
        First heading.
    images : sequence of (caption, target)
        Images to show, ``target`` being a relative file name or a ``data:image/png;base64,``
        URI.
    notes : sequence of str
        Extra lines placed under the title (provenance).

    Returns
    -------
    str
        Markdown without leading indentation (as Prefect's markdown artifacts need).
    """
    rows = tables["rows"]
    lines = [f"# {title}", ""]
    lines += list(notes)
    if notes:
        lines.append("")
    runs = rows["run_key"].drop_duplicates().tolist() if "run_key" in rows else []
    split_cols = ["run_key", "split"] if runs else ["split"]
    n_splits = len(rows[split_cols].drop_duplicates())
    lines += [
        f"- suites: {', '.join(sorted(rows['suite'].astype(str).unique()))}",
        f"- datasets: {', '.join(sorted(rows['dataset'].astype(str).unique()))}",
        f"- backbones: {', '.join(sorted(rows['backbone'].astype(str).unique()))}",
        f"- seeds: {', '.join(str(s) for s in sorted(rows['seed'].unique()))}",
        f"- methods: {', '.join(methods_in_order(rows['method'].tolist()))}",
        f"- runs: {len(runs)}; target splits: {n_splits}; estimates: {len(rows)}",
        "",
        "## MAE of the accuracy estimates (percentage points)",
        "",
        "Mean ± std over seeds of the mean absolute error over a shift family's target splits; "
        f"`{ALL_FAMILIES}` pools every target split of the dataset. Lower is better; **bold** is "
        "the best of each row.",
        "",
        markdown_table(tables["mae_table"]),
        "",
        "## Correlation between estimated and true accuracy",
        "",
        "Over every target split and seed of a backbone: R² against the identity line y = x and "
        "Pearson ρ (paper Table 3). Higher is better; **bold** is the best of each row.",
        "",
        markdown_table(tables["correlation_table"]),
        "",
    ]
    if "mean_rank" in tables:
        lines += [
            "## Ranks and the worst family",
            "",
            "A user who does not know which shift the target data went through gets, from one "
            "method, its error under whichever shift it is. Mean rank of each method over every "
            "(dataset, shift family, backbone) row (1 = lowest MAE of the row; ties share the "
            "mean rank; mean ± std over seeds of the per-seed mean rank, Demšar 2006 style). A "
            "method that runs on some rows only (GNNEvaluator: graphs) is ranked on those, "
            "among one more method:",
            "",
            _mean_rank_markdown(tables["mean_rank"]),
            "",
            "Worst-family MAE (percentage points): per dataset and backbone, each method's largest "
            "shift-family MAE, with that family; **bold** is the lowest of the row.",
            "",
            markdown_table(tables["worst_family_table"]),
            "",
            "Rank of each method in every row of the MAE table above (by the mean over seeds):",
            "",
            markdown_table(tables["rank_table"]),
            "",
        ]
    if "temporal_mae_table" in tables:
        lines += [
            "## Temporal shift (paper Table 2 and Table 3 layout)",
            "",
            "Graph datasets are trained on papers up to 2010 and validated on 2012-2014, with "
            "one target split per test year 2015-2020; `sotu-party` (text) is trained on "
            "speeches of 1853-1912, with one target split per later era. MAE (percentage "
            "points) over the years or eras, mean ± std over seeds, with the paper's `AVG.` "
            "over backbones:",
            "",
            markdown_table(tables["temporal_mae_table"]),
            "",
            "R² against y = x and Pearson ρ of estimated vs true accuracy across the test years "
            "(and seeds):",
            "",
            markdown_table(tables["temporal_correlation_table"]),
            "",
        ]
    if "coverage_table" in tables:
        level = tables["coverage"]["level"].median()
        lines += [
            "## Interval coverage",
            "",
            f"Fraction of target splits whose true accuracy lies inside the estimate's "
            f"{level:.0%} interval, with the mean interval width in percentage points in "
            "brackets, over every split, backbone and seed. The intervals cover the sampling "
            "noise of the finite validation and target sets (`docs/ESTIMATORS.md`), not the "
            "estimator's error under shift: coverage near the level on `clean` and far below it "
            "under a strong shift is what honest intervals look like.",
            "",
            markdown_table(tables["coverage_table"]),
            "",
        ]
    if "per_class_table" in tables:
        lines += [
            "## Per-class MAE (percentage points)",
            "",
            "Mean over target splits of the mean over predicted classes of |estimated - true| "
            "accuracy among the rows predicted as that class; ALSA and, per dataset, the baseline "
            "with per-sample probabilities whose overall MAE is lowest.",
            "",
            markdown_table(tables["per_class_table"]),
            "",
        ]
    if "score_mae_table" in tables:
        lines += [
            "## Score methods through a meta-set map (MaNo, nuclear norm, Entropy, ProjNorm)",
            "",
            "MaNo, the nuclear norm, Entropy and ProjNorm give a score, not an accuracy "
            "(ProjNorm only where it ran: it fine-tunes the network per split). As in their "
            "papers (Deng & "
            "Zheng 2021), a least-squares line from score to accuracy is fitted on a labelled "
            "meta-set: here the run's own corruption family (`synthetic`). Splits of other "
            "families are scored with the line fitted on every corruption split; a corruption "
            "split with the line fitted on the *other* corruption types (leave one type out). "
            "Runs without a corruption family (graphs, `sotu-party`) have no meta-set and are "
            "left out. These numbers use labelled shifted data that the other methods never "
            "see, so they are not ranked with them. MAE (percentage points), mean ± std over "
            "seeds:",
            "",
            markdown_table(tables["score_mae_table"]),
            "",
            "Per backbone, over every mapped split and seed: R² against y = x and Pearson ρ of "
            "mapped vs true accuracy, and the Spearman ρ of the raw score vs true accuracy "
            "(how well the score alone orders the shifts):",
            "",
            markdown_table(tables["score_correlation_table"]),
            "",
        ]
    if images:
        lines += ["## Figures", ""]
        for caption, target in images:
            lines += [f"**{caption}**", "", f"![{caption}]({target})", ""]
    return "\n".join(lines)
