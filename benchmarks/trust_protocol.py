"""The trust layer's protocol on benchmark databases (issue 31 items 3-5): the tables of
docs/BENCHMARK.md, "Which estimate to trust".

    python benchmarks/trust_protocol.py --db A.duckdb --db B.duckdb ... [--out docs/trust]

Reads every target split of the databases (source groups, declared concept shifts, signals
recomputed from the logits), sets the sealed groups aside (estimators/trust/sealed.py), and
writes to ``--out``:

* ``groups.csv``: every source group, its rows and whether it is sealed;
* ``models.csv``: each model class of ``auto``, validation (leave-one-group-out on development
  groups) beside the sealed test, with and without concept-shift rows; the class with the lowest
  validation group-mean MAE (all rows) is the one chosen, recorded in ``choice.json``;
* ``learning_curve.csv``: each learned class's sealed MAE fit on 5/10/20/all development groups;
* ``bands.csv``: coverage and width of each band form and method, validation beside sealed;
* ``ceilings.csv``: what the goals ask against what the labels allow (each group's best method,
  the narrowest band per group set with the labels), validation beside sealed;
* ``dis2.csv``: the Dis² lower bound beside the conformal band's low end on sealed splits;
* ``--appendix`` (``docs/benchmark-trust-protocol.md``): the same as markdown, with the goals
  met or missed; ``alsa-bench report --to-docs`` appends it to docs/BENCHMARK.md.

Every fit reads development groups only; the sealed rows are scored once per table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from estimators.trust.dis2 import dis2_lower_bound  # noqa: E402
from estimators.trust.sealed import SALT, is_sealed  # noqa: E402
from storage.logits import read_target_logits, read_val  # noqa: E402
from tasks.report.trust_protocol import (  # noqa: E402
    BASE, MEMBERS, MODEL_CLASSES, band_table, ceilings, fit_model, grouped_cv, learning_curve,
    model_table,
)
from tasks.report.trust_rows import (  # noqa: E402
    TrustRows, load_rows, read_trust_rows, save_rows, split_development,
)


def cached_rows(dbs: list[str], cache: str | None) -> TrustRows:
    """The trust rows of ``dbs``, read from the parquet file ``cache`` when it exists, else
    read from the databases (and written to ``cache`` when one is named)."""
    if cache and Path(cache).is_file():
        return load_rows(cache)
    rows = read_trust_rows(dbs)
    if cache:
        save_rows(rows, cache)
    return rows


def _md(df: pd.DataFrame) -> str:
    def clean(v: object) -> object:  # no "-0.000" for a difference that is zero
        return 0.0 if isinstance(v, float) and abs(v) < 5e-4 else v
    fmt = tuple("g" if pd.api.types.is_integer_dtype(t) else ".3f" for t in df.dtypes)
    return df.round(3).map(clean).to_markdown(index=False, floatfmt=fmt)


def _goals(models: pd.DataFrame, chosen: str, bands: pd.DataFrame, level: float) -> list[str]:
    """The issue's goals, measured on the sealed groups, each with how far it is from met."""
    row = models[(models.rows == "all rows") & (models["model class"] == chosen)].iloc[0]
    within = float(row["sealed within 1 pp of the group's best method"])
    gap = float(row["sealed vs best single method (pp)"])
    band = bands[(bands.method == "auto") & (bands.form == "one conformal band")
                 & (bands.level == level) & (bands.rows == "all rows")].iloc[0]
    share = float(band["sealed groups with coverage >= 85 %"])
    ratio = float(band["sealed width / MAE"])

    def verdict(ok: bool, miss: str) -> str:
        return "**met**" if ok else f"**missed** ({miss})"
    return [
        f"* auto within 1 pp of the group's best single method on >= 80 % of sealed groups: "
        f"{within:.0%}: {verdict(within >= 0.8 - 1e-9, f'by {0.8 - within:.0%} of groups')}.",
        f"* auto's group-mean MAE >= 0.5 pp below the best single method's: {-gap:+.2f} pp "
        f"below: {verdict(-gap >= 0.5, f'by {0.5 + gap:.2f} pp')}.",
        f"* the band ({level:.0%}) covering >= 85 % on >= 90 % of sealed groups: {share:.0%}: "
        f"{verdict(share >= 0.9 - 1e-9, f'by {0.9 - share:.0%} of groups')}; at a mean width "
        f"<= 4x auto's MAE: {ratio:.2f}x: {verdict(ratio <= 4, f'by {ratio - 4:.2f}x')}.",
    ]


def _dis2_verdict(dis2: pd.DataFrame) -> str:
    """Whether Dis² holds on the sealed splits and is tighter than the conformal low end."""
    d = dis2.set_index("name")
    holds, slack = float(d.holds["dis2 low"]), float(d.mean_slack_pp["dis2 low"])
    conf = float(d.mean_slack_pp["auto band low"])
    ship = holds >= 0.99 and slack < conf
    return (f"Dis² holds on {holds:.1%} of these splits (its delta = 0.01 asks for 99 %), "
            f"{slack:.1f} pp below the truth on average against {conf:.1f} pp for the "
            f"conformal band's low end: "
            + ("it holds and is tighter, so it can serve as the band's low end." if ship else
               "it is not shipped as the band's low end (it "
               + ("misses more often than its delta allows" if holds < 0.99 else "")
               + (" and " if holds < 0.99 and slack >= conf else "")
               + ("is looser than the conformal low end" if slack >= conf else "") + ")."))


def _ceiling_verdict(limits: pd.DataFrame) -> str:
    """What the ceilings say of the two missed goals, on the sealed groups (all rows)."""
    sealed = limits[(limits.side == "sealed") & (limits.rows == "all rows")].iloc[0]
    dev = limits[(limits.side == "validation") & (limits.rows == "all rows")].iloc[0]
    head_col = "a per-group selector's headroom (pp)"
    sym = next(c for c in limits.columns if c.startswith("symmetric band"))
    short = next(c for c in limits.columns if c.startswith("shortest band"))
    head = float(sealed[head_col])
    selection = (
        f"On the sealed groups a selector told each group's best method would sit {head:.2f} "
        f"pp below the best single method ({float(dev[head_col]):.2f} pp on the development "
        f"groups), so 0.5 pp asks a label-free model for {0.5 / head:.0%} of what picking "
        f"with the labels gains." if head > 0 else
        "On the sealed groups no member beats the best single method in any group.")
    band = (
        f"A symmetric band with one width per group, that width set from the group's own "
        f"errors, needs {float(sealed[sym]):.2f}x auto's MAE to cover 85 % of every group "
        f"({float(dev[sym]):.2f}x on the development groups); a band that also knows each "
        f"group's bias needs {float(sealed[short]):.2f}x. A label-free band at most 4x wide "
        f"must therefore vary its width within a group, from each split's own signals.")
    return f"{selection} {band}"


def _breadth(curve: pd.DataFrame) -> str:
    """One sentence per learned class: how much the sealed MAE moved from 10 groups to all."""
    parts = []
    for kind, block in curve.groupby("model class", sort=False):
        block = block.set_index("training groups")
        top = int(block.index.max())
        if 10 in block.index and top > 10:
            delta = float(block.sealed_mae[top] - block.sealed_mae[10])
            below = float(block.alsa_e[top] - block.sealed_mae[top])
            parts.append(f"{kind}: {delta:+.2f} pp from 10 to {top} groups, {below:.2f} pp "
                         f"below ALSA-E at {top}")
    return ("Breadth: " + "; ".join(parts) + ". The goal asks for 0.5 pp below the best "
            "single method.") if parts else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", action="append", required=True, help="benchmark database")
    parser.add_argument("--out", default="docs/trust", help="folder for the tables (csv)")
    parser.add_argument("--appendix", default="docs/benchmark-trust-protocol.md",
                        help="markdown appendix of docs/BENCHMARK.md written from the tables")
    parser.add_argument("--rows-cache", default=None,
                        help="parquet file of the rows (reused when it exists)")
    parser.add_argument("--level", type=float, default=0.9,
                        help="the band's level in the headline tables")
    parser.add_argument("--levels", type=float, nargs="+", default=[0.8, 0.85, 0.9, 0.95],
                        help="levels of the band sweep (bands.csv)")
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--dis2-per-group", type=int, default=12,
                        help="sealed splits per group on which Dis² is computed (seeded draw)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)  # Dis²'s critics are tiny: one thread is faster on a busy machine
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rows = cached_rows(args.db, args.rows_cache)
    dev, sealed = split_development(rows)
    print(f"{len(rows)} rows, {len(rows.group_names())} groups ({len(dev.group_names())} "
          f"development, {len(sealed.inputs.group_names())} sealed), read in "
          f"{time.time() - t0:.0f} s")
    groups = rows.keys.groupby("group").agg(rows=("split", "size"),
                                            datasets=("dataset", lambda s: ", ".join(sorted(set(s)))),
                                            concept_rows=("concept", "sum")).reset_index()
    groups["sealed"] = [is_sealed(g) for g in groups.group]
    groups.to_csv(out / "groups.csv", index=False)

    models, _ = model_table(dev, sealed)
    models.to_csv(out / "models.csv", index=False)
    primary = models[models.rows == "all rows"].set_index("model class")
    chosen = str(primary["validation group-mean MAE (pp)"].idxmin())
    print(f"model classes (chosen on validation: {chosen}):")
    print(models.to_string(index=False, float_format=lambda v: f"{v:.3f}"))

    sizes = [5, 10, 20, len(dev.group_names())]
    learned = [k for k in MODEL_CLASSES if k not in ("alsa-e alone",
                                                     "best single (chosen on fit groups)")]
    curve = pd.concat([learning_curve(dev, sealed, k, sizes, args.draws).assign(
        **{"model class": k}) for k in learned], ignore_index=True)
    curve_summary = curve.groupby(["model class", "training groups"], sort=False).agg(
        draws=("draw", "size"), sealed_mae=("sealed group-mean MAE (pp)", "mean"),
        sealed_mae_sd=("sealed group-mean MAE (pp)", "std"),
        alsa_e=("alsa-e alone (pp)", "mean")).reset_index()
    curve.to_csv(out / "learning_curve.csv", index=False)
    print(curve_summary.to_string(index=False))

    # bands: single methods with an accuracy, and auto (chosen class): out-of-fold on dev
    band_estimates = {}
    for m, v in dev.table.estimates.items():
        band_estimates[m] = (v, sealed.inputs.table.estimates[m])
    usable = np.ones(len(dev), bool)
    for m in MEMBERS:
        usable &= np.isfinite(dev.table.estimates[m])
    oof = np.full(len(dev), np.nan)
    oof[usable] = grouped_cv(dev.subset(usable), [chosen])[chosen]
    s_ok = np.ones(len(sealed.inputs), bool)
    for m in MEMBERS:
        s_ok &= np.isfinite(sealed.inputs.table.estimates[m])
    s_auto = np.full(len(sealed.inputs), np.nan)
    model = fit_model(chosen, dev.subset(usable))
    s_auto[s_ok] = np.clip(model.predict(
        sealed.inputs.table.subset(s_ok).signals, sealed.inputs.table.subset(s_ok).estimates),
        0, 1)
    band_estimates["auto"] = (oof, s_auto)
    levels = sorted(set(args.levels) | {args.level})
    bands, band_rows = band_table(dev, sealed, band_estimates, levels=levels)
    bands.to_csv(out / "bands.csv", index=False)
    headline = bands[(bands.level == args.level) & (bands.rows == "all rows")]
    sweep = bands[(bands.method == "auto") & (bands.rows == "all rows")]
    print(headline.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(sweep.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    no_band = [m for m, (d, s) in band_estimates.items() if m not in set(bands.method)]
    limits = ceilings(dev, sealed, band_estimates["auto"])
    limits.to_csv(out / "ceilings.csv", index=False)
    print(limits.to_string(index=False, float_format=lambda v: f"{v:.3f}"))

    # Dis² beside the conformal band's low end (auto's one band form), sealed splits
    keys = sealed.inputs.keys
    rng = np.random.default_rng(0)
    pick = []
    for g in sorted(set(keys.group)):
        idx = np.flatnonzero(keys.group.to_numpy() == g)
        pick.extend(rng.choice(idx, size=min(args.dis2_per_group, len(idx)), replace=False))
    pick = np.sort(np.asarray(pick, dtype=int))
    dbs = {Path(p).name: p for p in args.db}
    lower = np.full(len(keys), np.nan)
    t1 = time.time()
    for name, idx in pd.Series(pick).groupby(keys.database.to_numpy()[pick]):
        con = duckdb.connect(str(dbs[name]), read_only=True)
        try:
            for i in idx:
                rk, sp = keys.run_key[i], keys.split[i]
                v, lab = read_val(con, rk)
                lower[i] = dis2_lower_bound(v, lab, read_target_logits(con, rk, sp)).lower
        finally:
            con.close()
    dis2_seconds = (time.time() - t1) / max(len(pick), 1)
    a_frame = band_rows[(band_rows.method == "auto") & (band_rows.form == "one conformal band")
                        & (band_rows.level == args.level)]
    auto_low = np.full(len(keys), np.nan)
    auto_low[np.flatnonzero(s_ok)] = a_frame.low.to_numpy()
    both_ok = np.isfinite(lower) & np.isfinite(auto_low)
    ones = np.ones(len(keys))
    both = sealed.score_bands({"dis2 low": (lower, ones), "auto band low": (auto_low, ones)})
    truth = sealed.score({"auto": s_auto}).truth.to_numpy()
    both["slack_pp"] = (np.tile(truth, 2) - both.low.to_numpy()) * 100
    both = both[np.tile(both_ok, 2)]
    dis2 = both.groupby(["name"]).agg(splits=("group", "size"),
                                      holds=("low_holds", "mean"),
                                      mean_slack_pp=("slack_pp", "mean")).reset_index()
    per_group = both.groupby(["name", "group"]).low_holds.mean().groupby("name").agg(
        lambda s: float(np.mean(s >= 0.95)))
    dis2["groups where it holds on >= 95 % of splits"] = dis2.name.map(per_group)
    dis2["seconds per split"] = np.where(dis2.name == "dis2 low", dis2_seconds, np.nan)
    dis2.to_csv(out / "dis2.csv", index=False)
    print(dis2.to_string(index=False))

    choice = {"model_class": chosen, "members": list(MEMBERS), "base": BASE,
              "salt": SALT, "development_groups": dev.group_names(),
              "sealed_groups": sealed.inputs.group_names(), "level": args.level,
              "methods_without_band": no_band,
              "databases": [Path(p).name for p in args.db]}
    (out / "choice.json").write_text(json.dumps(choice, indent=1) + "\n")
    goals = _goals(models, chosen, bands, args.level)
    auto_forms = headline[headline.method == "auto"].sort_values(
        ["validation groups with coverage >= 85 %", "validation width / MAE"],
        ascending=[False, True])
    band_choice = str(auto_forms.form.iloc[0])
    choice["band_form"] = band_choice
    (out / "choice.json").write_text(json.dumps(choice, indent=1) + "\n")
    short = models.rename(columns=lambda c: c.replace("group-mean MAE (pp)", "MAE (pp)")
                          .replace("within 1 pp of the group's best method", "within 1 pp")
                          .replace("vs best single method (pp)", "vs best single (pp)"))
    band_cols = ["method", "form"] + [c for c in bands.columns if c.startswith(("validation",
                                                                                "sealed"))]
    command = ("python benchmarks/trust_protocol.py " + " ".join(
        f"--db {Path(p).name}" for p in args.db))
    parts = [
        "## Which estimate to trust: the sealed-group protocol (issue 31)",
        "",
        f"<!-- Written by `{command}` (benchmarks/trust_protocol.py); tables in "
        f"`{out}/`. -->",
        "",
        f"Databases: {', '.join(choice['databases'])}: {len(rows)} target splits in "
        f"{len(rows.group_names())} source groups (`DatasetSpec.source_group`: every "
        f"Fashion-MNIST variant is one group, the three ParlSpeech corpora one). "
        f"{len(sealed.inputs.group_names())} groups are **sealed** by the fixed hash rule of "
        f"`estimators/trust/sealed.py` ({', '.join(choice['sealed_groups'])}); every choice "
        f"below (model class, penalty, band form, level) is made by leave-one-group-out on the "
        f"{len(dev.group_names())} development groups, and the sealed groups are scored once "
        f"by models fit on every development group. Every figure is a mean over groups of the "
        f"group's mean (groups weigh equally). Rows of a declared concept shift "
        f"(`ShiftFamily.concept_shift`: {int(rows.concept.sum())} rows) are never fit on; "
        f"the tables show the figures with and without them.",
        "",
        "### Goals, on the sealed groups", "", *goals, "",
        "### What the goals ask against what the labels allow", "",
        "Each figure is computed **with the labels** (none is an estimator, and no choice is "
        "made on them): the best a model of that kind could do on these groups. `each "
        "group's best method`: a selector that picks one member per group, told which one "
        "wins; `a per-group selector's headroom`: how far below the best single method that "
        "oracle sits (the goal asks a label-free `auto` for 0.5 pp of it). `symmetric band "
        "per group`: the narrowest band `auto +/- h` that covers 85 % of a group's splits, one "
        "half-width `h` per group set from that group's own errors; `shortest band per "
        "group`: the shortest interval that does, which also knows the group's bias. Widths "
        "are over `auto`'s MAE, as in the goal (at most 4).", "",
        _md(limits), "", _ceiling_verdict(limits), "",
        "### auto: model classes (group-mean MAE, pp)", "",
        "`within 1 pp`: share of groups where the model is within 1 pp of the group's best "
        "single method (chosen per group with the labels); `vs best single`: the model's "
        "group-mean MAE minus that of the best single method over the same groups (negative: "
        "better).", "", _md(short), "",
        f"Chosen on validation (lowest validation group-mean MAE, all rows): **{chosen}**.", "",
        "### Learning curve: sealed MAE against the number of development groups fit on", "",
        f"{args.draws} random draws of groups per size (sealed rows without concept shifts); "
        "`alsa_e`: ALSA-E alone on the same rows. A curve that still falls at the right end "
        "says that more source groups would help that class.",
        "", _md(curve_summary), "", _breadth(curve_summary), "",
        f"### Bands at level {args.level} (all rows)", "",
        "`groups with coverage >= 85 %`: share of groups whose rows the band covers at least "
        "85 % of the time (item 5 asks for 90 % of sealed groups); `width / MAE`: mean width "
        "over the method's MAE (item 5 asks for at most 4). `bands.csv` has every level and "
        "the rows without concept shifts.", "",
        _md(headline[band_cols]), "",
        f"Band form chosen on validation for auto (highest share of groups covered >= 85 % "
        f"at {args.level}, then the lowest width / MAE): **{band_choice}**; "
        + ("the form `alsa-bench calibrate` ships for every method." if band_choice ==
           "one conformal band" else "`alsa-bench calibrate` still ships one conformal band "
           "per method (a stratified band is not stored in the calibration format yet)."), "",
        "### auto's band at each level (all rows)", "", _md(sweep[band_cols + ["level"]]), "",
        "Methods without a band (no accuracy estimate, or fewer than 3 development groups "
        "with one): " + (", ".join(no_band) or "none") + ".", "",
        "### Dis² (Rosenfeld & Garg 2023) beside the conformal band's low end, sealed splits",
        "", f"{args.dis2_per_group} seeded splits per sealed group; `holds`: share of splits "
        "where the low end is at most the true accuracy; `mean_slack_pp`: true accuracy minus "
        "the low end.", "", _md(dis2), "", _dis2_verdict(dis2), "",
    ]
    appendix = Path(args.appendix)
    appendix.parent.mkdir(parents=True, exist_ok=True)
    appendix.write_text("\n".join(parts))
    print(f"wrote {out}/ in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
