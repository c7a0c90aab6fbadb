"""The report stage: MAE and correlation tables, plots, and Prefect artifacts from ``report_rows``.

:func:`write_report` reads the rows from DuckDB, writes ``<state>/reports/<run>/`` (``report.md``,
CSVs, PNGs: predicted-vs-true scatter per method as in the paper's Fig. 7–8; for 3-class runs the
fitted ALSA anchors and its probability surface as in Fig. 4 and Fig. 1d/5d) and, inside a
Prefect run, publishes the tables and the markdown as artifacts.

The package, one job per module, imports running down the list (no circles, nothing from the
stages above it):

* :mod:`.names`: display order of methods and shift families (derived from the registries),
  ablation variants, file and artifact keys;
* :mod:`.stats`: R² against y = x, Pearson ρ, the best of a row, number cells;
* :mod:`.tables`: :func:`build_report_tables` and the tables of the paper from ``report_rows``;
* :mod:`.per_class`: per-class MAE (reads the target logits and labels);
* :mod:`.scores`: the score methods (MaNo, nuclear norm, Entropy, ProjNorm) mapped on a
  labelled meta-set;
* :mod:`.markdown`: the terminal table and ``report.md``;
* :mod:`.figures` and :mod:`.alsa_figure`: every matplotlib figure;
* :mod:`.artifacts`: the Prefect artifacts (Prefect imported there only);
* :mod:`.cot_table`: the COT paper's Table 1 (R², Spearman ρ) and Table 2 (MAE) beside ours;
* :mod:`.paper_table` and :mod:`.benchmark_doc`: ``docs/BENCHMARK.md`` against the paper.

The names other code imports from ``tasks.report`` are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

import pandas as pd

from storage.paths import reports_dir, state_dir
from tasks.data.synthetic import BANNER, is_synthetic, read_provenance, synthetic_datasets
from tasks.report.alsa_figure import anchor_figures, plot_alsa_anchors, simplex_plane_basis
from tasks.report.artifacts import publish
from tasks.report.figures import plot_ablations, plot_scatter, plot_temporal, save_png
from tasks.report.markdown import format_mae_text, render_markdown
from tasks.report.names import (
    ALL_FAMILIES,
    FAMILY_DISPLAY_ORDER,
    TEMPORAL_FAMILY,
    artifact_key,
    family_order,
    is_variant,
    method_order,
    parse_variant,
)
from tasks.report.per_class import per_class_mae, per_class_wide
from tasks.report.provenance import compute_notes, run_provenance
from tasks.report.stats import pearson, r2_identity
from tasks.report.tables import (
    REQUIRED_COLUMNS,
    build_report_tables,
    coverage_long,
    mean_rank,
    rank_long,
    temporal_mae_table,
    worst_family_long,
)
from tasks.runtime.refs import ReportRef

__all__ = [
    "ALL_FAMILIES",
    "CLOSING_REPORT",
    "FAMILY_DISPLAY_ORDER",
    "FINGERPRINT_FILE",
    "REQUIRED_COLUMNS",
    "RUNS_FILE",
    "TEMPORAL_FAMILY",
    "artifact_key",
    "build_report_tables",
    "trust_summary",
    "write_closing_report",
    "coverage_long",
    "family_order",
    "format_mae_text",
    "is_variant",
    "mean_rank",
    "method_order",
    "parse_variant",
    "pearson",
    "per_class_mae",
    "plot_ablations",
    "plot_alsa_anchors",
    "plot_scatter",
    "plot_temporal",
    "r2_identity",
    "rank_long",
    "read_fingerprint",
    "render_markdown",
    "simplex_plane_basis",
    "temporal_mae_table",
    "worst_family_long",
    "write_report",
]

#: File in a report folder naming what the report covers (see :func:`read_fingerprint`).
FINGERPRINT_FILE: Final[str] = ".fingerprint"
#: File in a report folder holding each run's provenance
#: (:func:`tasks.report.provenance.run_provenance`).
RUNS_FILE: Final[str] = "runs.csv"


def __getattr__(name: str) -> Any:
    # METHOD_ORDER / FAMILY_ORDER read the registries on first access (tasks.report.names)
    if name in ("METHOD_ORDER", "FAMILY_ORDER"):
        from tasks.report import names

        return getattr(names, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def write_report(
    db: str | Path | None = None,
    out_dir: str | Path | None = None,
    run_name: str | None = None,
    publish_artifacts: bool = True,
    *,
    run_keys: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    title: str | None = None,
    anchor_plots: bool = True,
    fingerprint: str | None = None,
) -> ReportRef:
    """Write ``<out_dir>/<run_name>/`` from the ``report_rows`` in DuckDB, optionally as artifacts.

    Parameters
    ----------
    db : str or Path, optional
        DuckDB file; default :func:`storage.paths.db_path`.
    out_dir : str or Path, optional
        Parent folder of the report; default :func:`storage.paths.reports_dir`
        (``<state>/reports/``).
    run_name : str, optional
        Report folder name; default the suite names joined by ``-`` (e.g. ``fmnist``).
    publish_artifacts : bool, default=True
        Also create Prefect artifacts: tables ``<run>-mae``, ``<run>-correlation`` and
        ``<run>-coverage`` (where intervals are stored) and the markdown ``<run>-report`` with
        the plots embedded. Needs a Prefect API (a flow run, or
        the ephemeral server).
    run_keys : sequence of str, optional
        Report only these runs; default every run in the database.
    methods : sequence of str, optional
        Report only these methods; default every method that is not an ablation variant
        (:func:`~tasks.report.names.is_variant`).
    title : str, optional
        First heading of ``report.md``.
    anchor_plots : bool, default=True
        Draw ALSA's anchors and probability surface for runs with 3 classes.
    fingerprint : str, optional
        What the report covers (the pipeline's :func:`tasks.stages.report.report_fingerprint`),
        written to ``<folder>/.fingerprint`` for :func:`read_fingerprint`; None removes it.

    Returns
    -------
    ReportRef
        The report's name and folder. The folder holds ``report.md``, ``mae.txt`` (the terminal
        table), ``mae.csv``, ``mae_table.csv``, ``correlation.csv``, ``correlation_table.csv``,
        ``estimates.csv``, ``runs.csv`` (each run's checkpoint, compute mode and settings, CPU:
        :func:`tasks.report.provenance.run_provenance`; also under the title of ``report.md``),
        ``coverage.csv`` and ``coverage_table.csv`` (where intervals are stored), ``per_class_mae.csv`` (where per-class estimates are stored),
        ``scatter-<dataset>.png`` and ``alsa-<run_key>.png``.

    Raises
    ------
    ValueError
        If the selection holds no target estimates (names what was asked and what exists).
    """
    from storage.db import connect
    from storage.estimates import read_report_rows
    from tasks.report.scores import score_methods, score_tables

    with connect(db, read_only=True) as con:
        df = read_report_rows(con)
        df = _select(df, run_keys=run_keys, methods=methods)
        scores = score_methods(df)
        if scores:  # score methods have no accuracy of their own: a section of their own
            score_rows = score_tables(con, scores, df["run_key"].unique().tolist())
            df = df[~df["method"].isin(scores)]
            if df.empty:
                raise ValueError(
                    f"methods must include a method that estimates accuracy; got only the score "
                    f"methods {scores}, which the report maps in a section of their own."
                )
        tables = build_report_tables(df)
        if scores:
            tables.update(score_rows)
        per_class = per_class_mae(con, tables["rows"])
        if not per_class.empty:
            tables["per_class_mae"] = per_class
            tables["per_class_table"] = per_class_wide(per_class)
        anchor_figs = anchor_figures(con, tables["rows"]) if anchor_plots else []
        trust, trust_missing = _trust_tables(con, tables["rows"]["run_key"].unique().tolist())
        cot = _cot_metrics(con, tables["rows"], scores)
        provenance = run_provenance(con, tables["rows"]["run_key"].unique().tolist())
    from tasks.report.features import feature_comparison

    features = feature_comparison(tables["rows"])

    name = run_name or "-".join(sorted(tables["rows"]["suite"].astype(str).unique()))
    folder = Path(out_dir) if out_dir is not None else reports_dir()
    folder = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.iterdir():
        if stale.is_file() and stale.suffix in {".md", ".csv", ".png", ".txt"}:
            stale.unlink()

    tables["mae"].to_csv(folder / "mae.csv", index=False)
    tables["mae_table"].to_csv(folder / "mae_table.csv")
    tables["correlation"].to_csv(folder / "correlation.csv", index=False)
    tables["correlation_table"].to_csv(folder / "correlation_table.csv")
    tables["rows"].to_csv(folder / "estimates.csv", index=False)
    tables["ranks"].to_csv(folder / "ranks.csv", index=False)
    tables["mean_rank"].to_csv(folder / "mean_rank.csv")
    tables["worst_family"].to_csv(folder / "worst_family.csv", index=False)
    provenance.to_csv(folder / RUNS_FILE, index=False)
    if "coverage" in tables:
        tables["coverage"].to_csv(folder / "coverage.csv", index=False)
        tables["coverage_table"].to_csv(folder / "coverage_table.csv")
    if "per_class_mae" in tables:
        tables["per_class_mae"].to_csv(folder / "per_class_mae.csv", index=False)
    if "score_mapped" in tables:
        tables["score_mapped"].to_csv(folder / "score_mapped.csv", index=False)
        tables["score_correlation"].to_csv(folder / "score_correlation.csv", index=False)
    synthetic = _synthetic_datasets(db, tables["rows"]["dataset"].astype(str).unique().tolist())
    banner = f"{BANNER.strip('*')}\n" if synthetic else ""
    trust_line = "" if trust_missing is None else f"\n{trust_missing}\n"
    (folder / "mae.txt").write_text(banner + format_mae_text(tables) + "\n" + trust_line,
                                    encoding="utf-8")
    if trust is not None:
        trust["auto"].to_csv(folder / "trust_auto.csv", index=False)
        trust["band"].to_csv(folder / "band.csv", index=False)
        trust["families"].to_csv(folder / "trust_families.csv", index=False)
    if features is not None:
        for grouping, table in features.items():
            table.to_csv(folder / f"features_by_{grouping}.csv", index=False)
    cot.to_csv(folder / "cot_metrics.csv", index=False)

    pngs: list[tuple[str, str, bytes]] = []
    rows = tables["rows"]
    for (suite, dataset), sub in rows.groupby(["suite", "dataset"], sort=True):
        file = f"scatter-{artifact_key(str(dataset))}.png"
        fig = plot_scatter(sub, title=f"{suite} / {dataset}: estimated vs true accuracy")
        pngs.append((f"Estimated vs true accuracy, {dataset}", file, save_png(fig, folder / file)))
    for (suite, dataset), sub in rows[rows["shift_family"] == TEMPORAL_FAMILY].groupby(
        ["suite", "dataset"], sort=True
    ):
        file = f"temporal-{artifact_key(str(dataset))}.png"
        fig = plot_temporal(sub, title=f"{suite} / {dataset}: accuracy by test year")
        pngs.append((f"True and estimated accuracy by year, {dataset}", file,
                     save_png(fig, folder / file)))
    for stem, caption, fig in plot_ablations(rows):
        pngs.append((caption, f"{stem}.png", save_png(fig, folder / f"{stem}.png")))
    for run_key, fig in anchor_figs:
        file = f"alsa-{artifact_key(run_key)}.png"
        pngs.append((f"ALSA anchors and probability surface, {run_key}", file,
                     save_png(fig, folder / file)))

    heading = title or f"alsa-bench report: {name}"
    notes = [f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} from `report_rows`.",
             "", *compute_notes(provenance)]
    if synthetic:
        notes.insert(0, f"{BANNER}: the data of {', '.join(synthetic)} is a generated release "
                        f"(benchmarks/synth_release.py), for measuring cost only.")
    md = render_markdown(tables, title=heading, images=[(c, f) for c, f, _ in pngs], notes=notes)
    if trust is not None:
        from tasks.report.trust_calibration import trust_markdown

        md = md.rstrip("\n") + "\n\n" + trust_markdown(trust)
    elif trust_missing is not None:
        md = md.rstrip("\n") + "\n\n## Which estimate to trust\n\n" + trust_missing + "\n"
    if features is not None:
        from tasks.report.features import feature_markdown

        md = md.rstrip("\n") + "\n\n" + feature_markdown(features)
    from tasks.report.cot_table import cot_markdown

    md = md.rstrip("\n") + "\n\n" + cot_markdown(cot, synthetic=synthetic)
    if synthetic:
        md = f"{BANNER}\n\n{md}"
    (folder / "report.md").write_text(md, encoding="utf-8")
    marker = folder / FINGERPRINT_FILE
    if fingerprint is None:
        marker.unlink(missing_ok=True)
    else:
        marker.write_text(fingerprint + "\n", encoding="utf-8")

    if publish_artifacts:
        publish(tables, name=name, title=heading, notes=notes, pngs=pngs)
    return ReportRef(name=name, folder=str(folder.resolve()))


def _cot_metrics(con: Any, rows: pd.DataFrame, scores: Sequence[str]) -> pd.DataFrame:
    """The COT paper's R², ρ and MAE of these runs (:mod:`tasks.report.cot_table`), the score
    methods' quantities read from their stored scores."""
    from tasks.report.cot_table import SCORE_METHODS, cot_metrics, cot_quantities
    from tasks.report.scores import map_scores, read_score_rows

    wanted = [m for m in scores if m in SCORE_METHODS]
    mapped = (map_scores(read_score_rows(con, wanted, rows["run_key"].unique().tolist()))
              if wanted else None)
    return cot_metrics(cot_quantities(rows, mapped))


#: Source groups the "Which estimate to trust" section needs (leave-one-group-out of a fit
#: that itself chooses its penalty and auto's band leave-one-group-out).
TRUST_MIN_DATASETS = 4


def _trust_tables(
    con: Any, run_keys: Sequence[str]
) -> tuple[dict[str, pd.DataFrame] | None, str | None]:
    """The "Which estimate to trust" tables over these runs (leave-one-group-out), or None and
    the one line that says why they are not measured (never dropped without a word)."""
    import numpy as np

    from tasks.report.trust_calibration import calibration_table, trust_tables

    head = "Which estimate to trust: not measured in this report"
    later = ("`alsa-bench run` over several suites (make bench) ends with a report over all "
             "of them (`bench-all`), and `alsa-bench report --to-docs` measures it over "
             "every suite")
    # the report's runs alone, estimates first: the signals (a pass over every split's logits)
    # only where the tables can be measured
    try:
        table, keys = calibration_table(con, run_keys=run_keys, signals=False)
    except ValueError as exc:
        return None, f"{head}: {' '.join(str(exc).split())} ({later})."
    names = sorted(np.unique(table.groups).tolist())
    if len(names) < TRUST_MIN_DATASETS:
        held = f"{len(names)} ({', '.join(names)})" if names else "none"
        return None, (f"{head}: it needs target splits from at least {TRUST_MIN_DATASETS} "
                      f"datasets with every label-free method's estimate, and this report "
                      f"has {held}; {later}.")
    table, keys = calibration_table(con, run_keys=run_keys)
    return trust_tables(table, concept=keys["concept"].to_numpy(dtype=bool),
                        keys=keys.reset_index(drop=True)), None


def _synthetic_datasets(db: str | Path | None, datasets: Sequence[str]) -> list[str]:
    """The reported datasets whose results come from a generated release: the state folder's
    record (:func:`tasks.data.synthetic.synthetic_datasets`), or, for a dataset it does not
    list, the marker in the state folder's data root."""
    state = Path(db).parent if db is not None else state_dir()
    recorded = _read_provenance_safely(state)
    out = set(synthetic_datasets(state, datasets))
    out.update(d for d in datasets if d not in recorded and is_synthetic(state / "data", d))
    return sorted(out)


def _read_provenance_safely(state: Path) -> dict[str, Any]:
    """The state folder's data record, or {} when it is unreadable (the report still renders)."""
    try:
        return read_provenance(state)
    except ValueError:
        return {}


def read_fingerprint(folder: str | Path) -> str | None:
    """The fingerprint :func:`write_report` left in a report folder, or None."""
    marker = Path(folder) / FINGERPRINT_FILE
    return marker.read_text(encoding="utf-8").strip() if marker.is_file() else None


def _select(
    df: pd.DataFrame, *, run_keys: Sequence[str] | None, methods: Sequence[str] | None
) -> pd.DataFrame:
    out = df
    if run_keys is not None:
        wanted = set(run_keys)
        out = out[out["run_key"].isin(wanted)]
        if out.empty:
            raise ValueError(
                f"run_keys must name runs with estimates; got {sorted(wanted)}, the database has "
                f"{sorted(df['run_key'].unique().tolist())}."
            )
    if methods is None:
        out = out[~out["method"].map(is_variant)]
    else:
        wanted_m = set(methods)
        out = out[out["method"].isin(wanted_m)]
        if out.empty:
            raise ValueError(
                f"methods must name methods with estimates; got {sorted(wanted_m)}, the database "
                f"has {sorted(df['method'].unique().tolist())}."
            )
    if out.empty:
        raise ValueError(
            "No estimates to report: the report_rows view is empty. Run `alsa-bench run` first."
        )
    return out


# --------------------------------------------------------------------------- the closing report
# Each suite's report measures "Which estimate to trust" only where it holds at least
# TRUST_MIN_DATASETS datasets, and a suite of ``make bench`` has three or fewer: ``alsa-bench
# run`` over several suites therefore ends with one report over all of them, whose section the
# terminal shows (trust_summary).
#: Folder name (under the reports folder) of the report over every suite of a run.
CLOSING_REPORT = "bench-all"


def write_closing_report(
    suites: Sequence[str],
    *,
    db: str | Path | None = None,
    out_dir: str | Path | None = None,
) -> ReportRef:
    """Write the report over every run of ``suites`` (``<reports>/bench-all/``).

    Parameters
    ----------
    suites : sequence of str
        The suites of the run (at least one).
    db, out_dir : path, optional
        As :func:`tasks.report.write_report`.

    Raises
    ------
    ValueError
        If ``suites`` is empty or the database holds no run of them.
    """
    from storage.db import connect
    from storage.estimates import read_report_rows

    if not suites:
        raise ValueError("The 'suites' argument of write_closing_report must name at least one "
                         "suite; got none.")
    with connect(db, read_only=True) as con:
        rows = read_report_rows(con)
    keys = sorted(rows.loc[rows["suite"].isin(list(suites)), "run_key"].unique().tolist())
    if not keys:
        raise ValueError(f"The database holds no run of the suites {', '.join(suites)}; "
                         f"nothing to report.")
    return write_report(db, out_dir, CLOSING_REPORT, publish_artifacts=False, run_keys=keys,
                        title=f"alsa-bench report: {', '.join(suites)} together",
                        anchor_plots=False)


def trust_summary(report: ReportRef) -> str:
    """The terminal's lines of a report's "Which estimate to trust": ``auto`` against the best
    single method per dataset (``trust_auto.csv``), or the line saying why it is not measured."""
    folder = Path(report.folder)
    table = folder / "trust_auto.csv"
    if table.is_file():
        auto = pd.read_csv(table)
        text = auto.to_string(index=False, float_format=lambda v: f"{v:.2f}")
        return ("Which estimate to trust (leave-one-group-out, MAE in pp; report.md has the "
                f"band):\n{text}")
    for line in (folder / "mae.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("Which estimate to trust"):
            return line
    return "Which estimate to trust: not measured (no trust table in this report)."
