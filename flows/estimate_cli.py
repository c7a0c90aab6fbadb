"""``alsa-bench estimate``: accuracy estimates for bring-your-own logit files.

Registered on the CLI's Typer app by ``flows/cli.py`` with
``app.command("estimate")(estimate_command)``::

    alsa-bench estimate --val val.npz --target week.parquet [-m/--method atc-ne]...
        [--param alsa-g.n_anchors=500]... [--level 0.9] [--inputs logits|probabilities]
        [--peer-val peer_val.npz --peer-target peer_week.npz] [--per-class] [--json]

The validation file needs logits and labels; the target file needs logits, and if it also holds
labels the output adds the true accuracy and the absolute error of each estimate. Without
``--method`` every registered estimator runs except the score estimators (``mano``,
``nuclear-norm``), which run only when named: their row shows the score, and the accuracy as
"–" unless ``--param mano.score_map=[SLOPE, INTERCEPT]`` maps it. User mistakes (a missing
file, a malformed array, an unknown method, a class-count mismatch) print one line starting
with ``error:`` on stderr and exit with code 2, without a traceback. This module does not import
Prefect.

Feature methods (``distcs``, ``aline-s``, ``aline-d``, the score ``dispersion``) read the
classifier's penultimate-layer features from the same files: an array ``features`` (one row
per logit row; a list column ``features`` or columns ``feature_0``... in parquet) in both files,
and optionally ``train_features`` / ``train_labels`` in the validation ``.npz``
(:func:`storage.logit_files.load_feature_arrays`). With features in both files the default
methods include the feature methods that return an accuracy; without them a named feature
method is skipped with a ``note:`` line on stderr.

GDE (``gde``) needs a peer model: ``--peer-val FILE --peer-target FILE`` give a second model's
logits (same architecture, same training data, another seed) on the very rows of ``--val`` and
``--target``, in the same order (labels in them are not read). With both, the default methods
add GDE, and ALine-S/-D (when features are given too) add the peer to their family of models;
one without the other is an error; a named GDE without them is skipped with a ``note:`` line.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from flows.params import check_method_params, parse_param_options
from tasks.methods import (
    estimator_names,
    feature_method_names,
    peer_method_names,
    skip_feature_methods,
    skip_peer_methods,
)

#: Default interval level (:data:`estimators.core.base.DEFAULT_LEVEL`, copied so that building the
#: command line does not import the estimators, and with them torch; a test checks the copy).
DEFAULT_LEVEL = 0.9

__all__ = ["EXIT_USER_ERROR", "estimate_command", "run_estimates"]

#: Exit code for mistakes in the user's input (Typer/Click use 2 for usage errors as well).
EXIT_USER_ERROR = 2


class _UserError(Exception):
    """A mistake in the command's input, reported as one ``error:`` line."""


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code=EXIT_USER_ERROR)


def run_estimates(
    val: Path,
    target: Path,
    methods: list[str] | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    level: float = DEFAULT_LEVEL,
    inputs: str = "logits",
    peer_val: Path | None = None,
    peer_target: Path | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Fit every requested estimator on ``val`` and estimate ``target``.

    Parameters
    ----------
    val : Path
        Validation logit file with labels (``.npz`` or ``.parquet``).
    target : Path
        Target logit file; labels optional (used only to score the estimates).
    methods : list of str, optional
        Registry keys; default every registered estimator, in registry order.
    params : dict, optional
        Hyper-parameters per method (:func:`flows.params.parse_param_options`), checked
        before any file is read.
    level : float in (0, 1), default 0.90
        Nominal coverage of each estimate's interval.
    inputs : {"logits", "probabilities"}, default "logits"
        What both files hold. ``"logits"`` refuses files that look like softmax/sigmoid
        probabilities; ``"probabilities"`` takes their log (``log p - log(1 - p)`` for a binary
        column) before any estimator sees them (:func:`storage.logit_files.load_logit_file`).

    Returns
    -------
    rows : list of dict
        One record per method: ``method``, ``accuracy``, ``interval`` (``[low, high]``),
        ``level``, ``n_target``, ``params``, ``diagnostics`` and, when the target file has
        labels, ``true_accuracy`` and ``abs_error``.
    warnings : list of str
        Notes (``note: ...``: feature methods skipped for want of features) and warning
        messages raised while fitting or estimating, prefixed with the method.

    Raises
    ------
    _UserError
        For unknown methods, unreadable files and inputs the estimators reject.
    """
    from estimators import get_estimator
    from estimators.core._features import check_features, check_fit_features
    from estimators.core._peers import check_peer_logits
    from estimators.core._validation import check_labels, check_logits
    from estimators.core.base import check_level
    from storage.logit_files import load_feature_arrays, load_logit_file

    try:
        level = check_level(level, "alsa-bench estimate (--level)")
    except ValueError as exc:
        raise _UserError(str(exc)) from None
    # model-aware methods need a trained model, not logit files
    known = estimator_names(features=True, peers=True)
    # score estimators (mano, nuclear-norm) run only when named: without a score map their
    # accuracy is NaN, shown as "–" next to the score
    chosen = list(dict.fromkeys(methods)) if methods else list(
        estimator_names(scores=False, opt_in=False)
    )
    unknown = [m for m in chosen if m not in known]
    if unknown:
        raise _UserError(
            f"unknown method {', '.join(map(repr, unknown))}; available: {', '.join(known)}."
        )
    params = params or {}
    if "gnnevaluator" in params:
        raise _UserError(
            "--param gnnevaluator.*: GNNEvaluator needs the trained graph model and runs only in "
            "the benchmark (alsa-bench run --suite graph); it cannot score logit files."
        )
    try:
        check_method_params(params, chosen)  # score estimators too (tasks.methods)
    except ValueError as exc:
        raise _UserError(str(exc)) from None
    if inputs not in ("logits", "probabilities"):
        raise _UserError(f"--inputs must be 'logits' or 'probabilities'; got {inputs!r}.")
    if (peer_val is None) != (peer_target is None):
        given, missing = (("--peer-val", "--peer-target") if peer_target is None
                          else ("--peer-target", "--peer-val"))
        raise _UserError(f"{given} needs {missing}: a peer model's logits on the validation "
                         "rows and on the target rows, both or neither.")
    # every message about a file names its option too: "--val PATH: ..."
    v, t = f"--val {val}", f"--target {target}"
    try:
        val_logits, val_labels = load_logit_file(val, require_labels=True, inputs=inputs)
    except ValueError as exc:
        raise _UserError(f"--val {exc}") from None
    try:
        target_logits, target_labels = load_logit_file(
            target, require_labels=False, inputs=inputs
        )
    except ValueError as exc:
        raise _UserError(f"--target {exc}") from None
    if val_logits.shape[1] != target_logits.shape[1]:
        raise _UserError(
            f"class-count mismatch: {v} has {val_logits.shape[1]} classes but {t} has "
            f"{target_logits.shape[1]}."
        )
    # Check values once, naming the file, instead of once per estimator.
    n_classes = val_logits.shape[1]
    try:
        check_logits(val_logits, f"{v}: logits")
        check_labels(val_labels, f"{v}: labels", val_logits.shape[0], n_classes)
        check_logits(target_logits, f"{t}: logits")
        if target_labels is not None:
            check_labels(target_labels, f"{t}: labels", target_logits.shape[0], n_classes)
    except ValueError as exc:
        raise _UserError(str(exc)) from None
    # Feature arrays (for the feature methods), checked once here, naming the file.
    try:
        val_extra = load_feature_arrays(val)
    except ValueError as exc:
        raise _UserError(f"--val {exc}") from None
    try:
        target_extra = load_feature_arrays(target)
    except ValueError as exc:
        raise _UserError(f"--target {exc}") from None
    have_features = "features" in val_extra and "features" in target_extra
    if not methods and have_features:
        chosen += [m for m in estimator_names(scores=False, opt_in=False, features=True)
                   if m in feature_method_names()]
    missing = [str(f) for f, extra in ((val, val_extra), (target, target_extra))
               if "features" not in extra]
    chosen, note = skip_feature_methods(
        chosen, have_features,
        f"{' and '.join(missing)} hold{'s' if len(missing) == 1 else ''} no array 'features' "
        "(both files need one)")
    notes = [] if note is None else [f"note: {note}"]
    if not chosen:
        raise _UserError(f"no method left to run: {note}")
    fit_features: dict[str, Any] = {}
    target_features = None
    if have_features and any(m in feature_method_names() for m in chosen):
        try:
            checked = check_fit_features(
                val_extra["features"], val_extra.get("train_features"),
                val_extra.get("train_labels"), n_val=val_logits.shape[0], n_classes=n_classes)
            assert checked is not None
            target_features = check_features(
                target_extra["features"], f"{t}: features", n_rows=target_logits.shape[0],
                rows_of=f"{t}: logits", n_dims=checked.dim, dims_of=f"{v}: features")
        except ValueError as exc:
            raise _UserError(f"{v}: {exc}" if str(exc).startswith(("val_", "train_"))
                             else str(exc)) from None
        fit_features = {"val_features": checked.val, "train_features": checked.train,
                        "train_labels": checked.train_labels}
    have_peers = peer_val is not None and peer_target is not None
    if not methods and have_peers:
        chosen += list(peer_method_names())
    chosen, peer_note = skip_peer_methods(chosen, have_peers,
                                          "no --peer-val/--peer-target was given")
    if peer_note is not None:
        notes.append(f"note: {peer_note}")
        if not chosen:
            raise _UserError(f"no method left to run: {peer_note}")
    peer_kwargs: dict[str, Any] = {}
    peer_target_kwargs: dict[str, Any] = {}
    if have_peers:
        assert peer_val is not None and peer_target is not None
        try:
            pv, _ = load_logit_file(peer_val, require_labels=False, inputs=inputs)
        except ValueError as exc:
            raise _UserError(f"--peer-val {exc}") from None
        try:
            pt, _ = load_logit_file(peer_target, require_labels=False, inputs=inputs)
        except ValueError as exc:
            raise _UserError(f"--peer-target {exc}") from None
        try:
            check_peer_logits(pv, f"--peer-val {peer_val}: logits", n_rows=val_logits.shape[0],
                              rows_of=f"{v}: logits", n_classes=n_classes)
            check_peer_logits(pt, f"--peer-target {peer_target}: logits",
                              n_rows=target_logits.shape[0], rows_of=f"{t}: logits",
                              n_classes=n_classes)
        except ValueError as exc:
            raise _UserError(str(exc)) from None
        peer_kwargs, peer_target_kwargs = {"peer_val_logits": pv}, {"peer_target_logits": pt}
    true_accuracy = None
    if target_labels is not None:
        true_accuracy = float(np.mean(target_logits.argmax(axis=1) == target_labels))

    rows: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    by_text: dict[str, list[str]] = {}  # a warning once, with every method that raised it
    for name in chosen:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                estimator = get_estimator(name, **params.get(name, {}))
                # peers go to the methods that read them (GDE, ALine), features to the
                # feature methods; the table and --json show the shift band (band=True)
                reads = estimator.needs_peer or estimator.reads_peers
                fit_peer = peer_kwargs if reads else {}
                target_peer = peer_target_kwargs if reads else {}
                if estimator.needs_features:
                    result = estimator.fit(val_logits, val_labels, **fit_features,
                                           **fit_peer).estimate(
                        target_logits, target_features=target_features, level=level,
                        band=True, **target_peer)
                else:
                    result = estimator.fit(val_logits, val_labels, **fit_peer).estimate(
                        target_logits, level=level, band=True, **target_peer)
            except ValueError as exc:
                raise _UserError(f"{name}: {exc}") from None
        for w in caught:
            text = str(w.message)
            if text in by_text:
                if name not in by_text[text]:
                    by_text[text].append(name)
            else:
                by_text[text] = [name]
        if not params.get(name):
            results[name] = result
        rows.append(_row(result, true_accuracy))
    if not methods:  # the default: every method, then auto from their estimates
        from estimators.trust.auto import auto_default_members, auto_from_estimates

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            combined = auto_from_estimates(results, val_logits, val_labels, target_logits,
                                           level=level)
        for w in caught:
            by_text.setdefault(str(w.message), []).append("auto")
        default = auto_default_members() or ()
        left_out = (list(default) if combined is None
                    else list(combined.diagnostics.get("left_out", [])))
        if left_out:
            notes.append("note: " + _auto_left_out(left_out, combined, params, chosen, results))
        if combined is not None:
            rows.append(_row(combined, true_accuracy))
    else:
        from flows.params import auto_param_note

        named = auto_param_note(params, chosen)
        if named is not None:
            notes.append(named)
    for row in rows:
        row["recommended"] = row["method"] == "auto"
    unbanded = _no_band(rows)
    if unbanded:
        notes.append("note: " + unbanded)
    messages = [*notes, *(f"{', '.join(names)}: {text}" for text, names in by_text.items())]
    return rows, messages


#: ``shift_note`` of a method that gives an accuracy but has no shift band.
NO_BAND = "none: the calibration in use has no band for this method"


def _no_band(rows: list[dict[str, Any]]) -> str | None:
    """Mark each method that gives an accuracy without a shift band (``shift_note``), and say
    in one line which and why; None when every accuracy has its band. A method that gives no
    accuracy (a score without a map) has no band to give, and is not named."""
    from estimators.trust.calibration_artifact import active_calibration_path

    names = []
    for row in rows:
        band = row.get("shift_interval") or (None, None)
        if row["accuracy"] is not None and any(v is None or not math.isfinite(float(v))
                                               for v in band):
            row["shift_note"] = NO_BAND
            names.append(row["method"])
    if not names:
        return None
    return (f"no shift band for {', '.join(names)}: the calibration in use "
            f"({active_calibration_path()}) has none for {'it' if len(names) == 1 else 'them'}"
            " (`alsa-bench calibrate` fits a band for every method whose estimates its "
            "databases hold in at least 2 development source groups); their band column reads "
            "'none'.")


def _auto_left_out(left_out: list[str], combined: Any, params: dict[str, dict[str, Any]],
                   chosen: list[str], results: dict[str, Any]) -> str:
    """One line: which of auto's default members it combined without, and why."""
    reasons, missing, fine = [], [], []
    for m in left_out:
        if params.get(m):
            given = ", ".join(f"{m}.{k}={json.dumps(v)}" for k, v in params[m].items())
            reasons.append(f"{m} ran with --param {given}, and auto's calibration was fit on "
                           f"{m}'s default-parameter estimates")
        elif m not in chosen:
            reasons.append(f"{m} was not run")
        elif m in results and not math.isfinite(results[m].accuracy):
            reasons.append(f"{m} returned no estimate")
        else:
            fine.append(m)
            continue
        missing.append(m)
    if fine:
        reasons.append(f"no member set auto is calibrated for holds {', '.join(fine)} without "
                       f"{', '.join(missing)}")
    todo = ("drop the --param, or refit auto with it: `alsa-bench run` a benchmark with the "
            "same --param, then `alsa-bench calibrate`" if any(params.get(m) for m in left_out)
            else "")
    if combined is None:
        head = "auto left out: no member set it is calibrated for is complete"
    else:
        head = (f"auto combined {', '.join(combined.params['methods'])} instead of its "
                f"default members")
    return f"{head} ({'; '.join(reasons)}){'; ' + todo if todo else ''}."


def _row(result: Any, true_accuracy: float | None) -> dict[str, Any]:
    """One output record of an :class:`~estimators.core.base.AccuracyEstimate`."""
    row = result.to_record()
    row["per_class"] = (None if result.per_class is None
                        else [None if np.isnan(v) else float(v) for v in result.per_class])
    if "score" in result.diagnostics:
        row["score"] = float(result.diagnostics["score"])
    if not math.isfinite(row["accuracy"]):
        row["accuracy"] = None  # a score without a map: no accuracy (JSON null, "–")
    if true_accuracy is not None:
        row["true_accuracy"] = true_accuracy
        row["abs_error"] = (None if row["accuracy"] is None
                            else abs(result.accuracy - true_accuracy))
    return row


def _fmt_accuracy(value: Any) -> str:
    return "–" if value is None or not math.isfinite(float(value)) else f"{float(value):.4f}"


def _fmt_interval(interval: Any) -> str:
    low, high = (math.nan if v is None else float(v) for v in interval)
    return "-" if not (math.isfinite(low) and math.isfinite(high)) else f"[{low:.4f}, {high:.4f}]"


def _print_table(rows: list[dict[str, Any]], val: Path, target: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    has_truth = "true_accuracy" in rows[0]
    table = Table(title=f"Estimated accuracy of {target.name} (fitted on {val.name})",
                  caption="The interval covers the sampling noise of the validation and target "
                          "sets, not the error a distribution shift causes; the shift band is "
                          "meant to cover that error too (calibrated on the benchmark's "
                          "shifts: its coverage on a new kind of shift is measured, not "
                          "guaranteed; docs/BENCHMARK.md)."
                          + (" auto combines the methods and is the recommended estimate."
                             if any(row["method"] == "auto" for row in rows) else ""))
    table.add_column("method")
    table.add_column("estimated accuracy", justify="right")
    table.add_column(f"{rows[0]['level']:.0%} interval", justify="right")
    table.add_column(f"{rows[0]['level']:.0%} shift band", justify="right")
    has_score = any("score" in row for row in rows)
    if has_score:
        table.add_column("score", justify="right")
    if has_truth:
        table.add_column("true accuracy", justify="right")
        table.add_column("abs error", justify="right")
    table.add_column("n_target", justify="right")
    for row in rows:
        name = f"{row['method']} (recommended)" if row.get("recommended") else row["method"]
        cells = [name, _fmt_accuracy(row["accuracy"]), _fmt_interval(row["interval"]),
                 "none" if row.get("shift_note") else
                 _fmt_interval(row.get("shift_interval", (None, None)))]
        if has_score:
            cells.append("" if row.get("score") is None else f"{row['score']:.4f}")
        if has_truth:
            cells += [f"{row['true_accuracy']:.4f}", _fmt_accuracy(row["abs_error"])]
        cells.append(str(row["n_target"]))
        table.add_row(*cells)
    console = Console(soft_wrap=True)
    # the interval column makes the table about 95 characters wide; below that rich would wrap
    # the headers, so a narrower terminal wraps the lines instead
    Console(soft_wrap=True, width=max(console.width, 132)).print(table)


def _print_per_class(rows: list[dict[str, Any]], target: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    shown = [r for r in rows if r.get("per_class") is not None]
    if not shown:
        typer.echo("No method with per-sample probabilities ran (per-class estimates need "
                   "ac, atc-mc, atc-ne, alsa-g or alsa-e).")
        return
    n_classes = len(shown[0]["per_class"])
    table = Table(title=f"Estimated accuracy per predicted class of {target.name} "
                        "(- = no row predicted as the class)")
    table.add_column("method")
    for k in range(n_classes):
        table.add_column(f"class {k}", justify="right")
    for row in shown:
        table.add_row(row["method"], *("-" if v is None else f"{v:.3f}" for v in row["per_class"]))
    Console(soft_wrap=True).print(table)


def estimate_command(
    val: Annotated[
        Path | None,
        typer.Option("--val", metavar="VAL", show_default=False,
                     help="Validation logits with labels (.npz or .parquet). Required."),
    ] = None,
    target: Annotated[
        Path | None,
        typer.Option("--target", metavar="TARGET", show_default=False,
                     help="Target logits; labels optional (.npz or .parquet). Required."),
    ] = None,
    method: Annotated[
        list[str] | None,
        typer.Option("--method", "-m", metavar="NAME",
                     help="Estimator key; repeat for several. Default: the label-free "
                          "accuracy methods, then auto; GDE too with --peer-val/--peer-target, "
                          "the feature methods when both files hold features. Score methods (mano, "
                          "nuclear-norm, entropy, dispersion) run when named: they show a "
                          "score, and an accuracy only with --param "
                          "NAME.score_map=\\[slope, intercept] (a linear map from the score to "
                          "accuracy)."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", metavar="METHOD.NAME=VALUE",
                     help="Hyper-parameter of one method, e.g. alsa-g.n_anchors=500 or "
                     "alsa-g.rectify_quantile=0.05 (JSON values; repeatable); one the "
                     "configuration ignores is reported as a warning. auto is calibrated on "
                     "default-parameter members: with a --param on one of them, auto combines "
                     "a member set without it (or is left out), and a note says which and "
                     "why."),
    ] = None,
    per_class: Annotated[
        bool,
        typer.Option("--per-class", help="Also show each method's estimated accuracy per "
                     "predicted class (methods with per-sample probabilities)."),
    ] = False,
    level: Annotated[
        str,
        typer.Option("--level", metavar="LEVEL",
                     help="Nominal coverage of each estimate's interval, in (0, 1); the interval "
                     "covers sampling noise, not shift."),
    ] = str(DEFAULT_LEVEL),
    json_output: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
    peer_val: Annotated[
        Path | None,
        typer.Option("--peer-val", metavar="PEER_VAL", show_default=False,
                     help="A peer model's logits on the --val rows (same architecture, same "
                     "training data, another seed), for GDE; needs --peer-target."),
    ] = None,
    peer_target: Annotated[
        Path | None,
        typer.Option("--peer-target", metavar="PEER_TARGET", show_default=False,
                     help="The peer model's logits on the --target rows; needs --peer-val."),
    ] = None,
    inputs: Annotated[
        str,
        typer.Option("--inputs", metavar="KIND",
                     help="What the files hold: logits (default; files that look like "
                     "probabilities are refused) or probabilities (softmax rows, or a binary "
                     "model's positive-class probability; their log is used)."),
    ] = "logits",
) -> None:
    """Estimate a classifier's accuracy on unlabelled target logits from labelled validation ones.

    Files: .npz (arrays logits, labels) or .parquet (list column logits or logit_0.., label).
    """
    # Required options are checked here, not by Click, so that a missing one is one error line.
    if val is None or target is None:
        missing = " and ".join(
            opt for opt, v in (("--val", val), ("--target", target)) if v is None
        )
        raise _fail(f"missing option {missing}; usage: alsa-bench estimate --val VAL "
                    "--target TARGET [--method NAME]... [--param METHOD.NAME=VALUE]... "
                    "[--level LEVEL] [--inputs logits|probabilities] [--peer-val PEER_VAL "
                    "--peer-target PEER_TARGET] [--per-class] [--json]")
    try:
        level_value: Any = float(level)
    except ValueError:
        level_value = level  # check_level names it in the error line
    try:
        params = parse_param_options(param or [])
        rows, messages = run_estimates(val, target, method, params, level=level_value,
                                       inputs=inputs, peer_val=peer_val,
                                       peer_target=peer_target)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    except _UserError as exc:
        raise _fail(str(exc)) from None
    for message in messages:
        text = " ".join(message.split())
        typer.echo(text if text.startswith("note: ") else f"warning: {text}", err=True)
    if json_output:
        keep = ("method", "accuracy", "score", "interval", "shift_interval", "shift_note",
                "level", "recommended", "n_target", "true_accuracy", "abs_error", "per_class",
                "params", "diagnostics")
        typer.echo(json.dumps([{k: row[k] for k in keep if k in row} for row in rows], indent=2))
    else:
        _print_table(rows, val, target)
        if per_class:
            _print_per_class(rows, target)
