"""The estimate stage: fit every estimator on a run's validation logits, score every target split.

Two halves, so that the computation can run anywhere and the database has one writer:
:func:`compute_estimates` (what a Dask worker runs) reads the run's logits from the Parquet file
the extract stage published (:mod:`storage.results`, never DuckDB), computes, and publishes the
rows and ALSA's anchors as content-addressed Parquet files; :func:`ingest_estimates` (the flow
process) ingests them in one transaction. :func:`estimate_run`, the plain function, reads the
logits from DuckDB in short connections (the validation split once, then one target split at a
time), computes without holding the database, publishes, and ingests in one short writer
connection at the end.

Estimators see target **logits only**: target splits are read with
:func:`storage.logits.read_target_logits`, which returns no labels. The absolute error is
computed against ``splits.true_accuracy``, which the extract stage stored with the logits.

>>> from tasks.estimate import estimate_run
>>> ref = estimate_run("fmnist.lenet.s0", methods=["atc-mc", "alsa-g"])   # doctest: +SKIP
>>> ref.digest                                                            # doctest: +SKIP
'4be1…'
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from estimators import available_estimators, get_estimator
from estimators.base import Estimator
from storage.db import connect
from storage.errors import NotFoundError
from storage.estimates import EstimateRow, estimates_digest
from storage.logits import SplitInfo, list_splits, read_target_logits, read_val
from storage.paths import db_path
from storage.results import ingest, read_logits_file, results_root, write_estimates_file
from storage.runs import get_run
from tasks.model_aware import MODEL_AWARE_METHODS, model_aware_rows
from tasks.refs import CheckpointRef, EstimatesRef, LogitsRef

logger = logging.getLogger("tasks.estimate")

#: Fitted attributes an estimator exposes when it has anchors worth storing (ALSA).
ANCHOR_ATTRIBUTES: tuple[str, str, str] = ("positions_", "peaks_", "variances_")


def all_method_names() -> tuple[str, ...]:
    """Every method the estimate stage can run: the estimator registry, then model-aware ones.

    The score estimators (``needs_score_map``: ``mano``, ``nuclear-norm``) are among them: the
    stage stores their score (``diagnostics["score"]``) with no accuracy (NULL), and the report
    maps scores to accuracies on each run's labelled corruption family
    (:mod:`tasks.score_protocol`), apart from the methods that estimate accuracy themselves.
    """
    return (*available_estimators(include_scores=True, include_opt_in=True), *MODEL_AWARE_METHODS)


def default_method_names() -> tuple[str, ...]:
    """The methods a run uses when none is named: :func:`all_method_names` without the opt-in
    estimators (``shift-gate``), which run only with ``--method``."""
    return (*available_estimators(include_scores=True), *MODEL_AWARE_METHODS)


def _resolve_methods(
    methods: Sequence[str] | None, method_params: Mapping[str, Mapping[str, Any]] | None
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Check the method list and per-method parameters; default to every method."""
    if isinstance(methods, str):
        raise ValueError(
            f"methods must be a sequence of registry keys, not a single string; got {methods!r} "
            f"(did you mean [{methods!r}]?)."
        )
    names = list(default_method_names()) if methods is None else list(methods)
    if not names:
        raise ValueError(
            f"methods must name at least one estimator; got an empty list. "
            f"Available: {', '.join(all_method_names())}."
        )
    unknown = [m for m in names if m not in all_method_names()]
    if unknown:
        raise ValueError(
            f"Unknown estimator(s) {unknown} in methods; available: "
            f"{', '.join(all_method_names())}."
        )
    repeated = sorted({m for m in names if names.count(m) > 1})
    if repeated:
        raise ValueError(f"methods must not repeat a method; got {repeated} more than once.")
    params: dict[str, dict[str, Any]] = {}
    for method, values in (method_params or {}).items():
        if method not in names:
            raise ValueError(
                f"method_params has parameters for {method!r}, which is not among the methods "
                f"to run {names}."
            )
        if not isinstance(values, Mapping):
            raise ValueError(
                f"method_params[{method!r}] must be a mapping of parameter names to values; "
                f"got {type(values).__name__}."
            )
        params[method] = dict(values)
    return names, params


def build_estimator(method: str, params: Mapping[str, Any], run_seed: int) -> Estimator:
    """Instantiate ``method`` with ``params``, seeding it with the run's seed unless given.

    Every estimator that has a ``seed`` hyper-parameter (the ALSA estimators) gets ``run_seed``
    when ``params`` does not set ``seed`` itself, so anchors follow the classifier's seed.

    Parameters
    ----------
    method : str
        Registry key.
    params : Mapping[str, Any]
        Keyword hyper-parameters.
    run_seed : int
        Seed of the run (``runs.seed``).

    Returns
    -------
    Estimator
        Unfitted.

    Raises
    ------
    ValueError
        If the method or a parameter is unknown.
    """
    estimator = get_estimator(method, **params)
    if "seed" in estimator.get_params() and "seed" not in params:
        estimator.set_params(seed=int(run_seed))
    return estimator


def _anchors_of(
    estimator: Estimator,
) -> tuple[NDArray[np.floating[Any]], NDArray[np.floating[Any]], NDArray[np.floating[Any]]] | None:
    values = [getattr(estimator, name, None) for name in ANCHOR_ATTRIBUTES]
    if any(v is None for v in values):
        return None
    positions, peaks, variances = (np.asarray(v) for v in values)
    return positions, peaks, variances


def per_class_record(estimated: NDArray[np.float64], logits: NDArray[Any]) -> str:
    r"""JSON of a method's estimated accuracy per *predicted* class and the class counts.

    ``estimated[k]`` is :math:`\hat a_k` (:attr:`estimators.base.AccuracyEstimate.per_class`),
    ``count[k]`` :math:`= |\{i: \arg\max_j z_{ij} = k\}|`; NaN (a class nothing is
    predicted as) is written as null. The true per-class accuracy is not stored: the stage
    never reads target labels; the report computes it (:func:`tasks.report.per_class_mae`).

    Parameters
    ----------
    estimated : ndarray of shape (c,)
    logits : ndarray of shape (n, c)

    Returns
    -------
    str
        ``{"estimated": [...], "count": [...]}``.
    """
    z = np.asarray(logits)
    c = int(np.asarray(estimated).shape[0])
    predicted = (z.reshape(-1) > 0).astype(np.int64) if z.ndim == 1 or z.shape[1] == 1 else (
        z.argmax(axis=1)
    )
    counts = np.bincount(predicted, minlength=c)
    values = [float(v) if np.isfinite(v) else None for v in np.asarray(estimated, np.float64)]
    return json.dumps({"estimated": values, "count": [int(x) for x in counts]})


def _split_model_aware(
    names: list[str], defaulted: bool, run_key: str, checkpoint: CheckpointRef | None
) -> tuple[list[str], list[str]]:
    """Separate logit estimators from model-aware methods that apply to this run."""
    from tasks.datasets import get_dataset_spec

    asked = [m for m in names if m in MODEL_AWARE_METHODS]
    if not asked:
        return names, []
    modality = None
    if checkpoint is not None:
        if checkpoint.run_key != run_key:
            raise ValueError(
                f"checkpoint belongs to run {checkpoint.run_key!r}, not {run_key!r}."
            )
        modality = get_dataset_spec(checkpoint.dataset).modality
    usable = [m for m in asked if modality in MODEL_AWARE_METHODS[m]]
    if not defaulted:
        refused = [m for m in asked if m not in usable]
        if refused:
            m = refused[0]
            why = ("no checkpoint was given" if checkpoint is None
                   else f"run {run_key!r} is {modality}")
            raise ValueError(
                f"method {m!r} needs the trained model of a "
                f"{'/'.join(MODEL_AWARE_METHODS[m])} run, but {why}."
            )
    return [m for m in names if m not in MODEL_AWARE_METHODS], usable


def estimate_run(
    run_key: str,
    *,
    methods: Sequence[str] | None = None,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    db: str | Path | None = None,
    code_version: str = "",
    checkpoint: CheckpointRef | None = None,
    results: str | Path | None = None,
) -> EstimatesRef:
    """Fit each estimator on a run's validation split and estimate every target split.

    For every method: fit on the validation logits and labels (timed), then estimate each target
    split from its logits alone (timed), and compare with the split's stored true accuracy.
    All rows are written with :func:`storage.estimates.write_estimates`, replacing earlier rows of
    the same (split, method); ALSA's fitted anchors go to the ``anchors`` table.

    Parameters
    ----------
    run_key : str
        Run whose logits the extract stage stored.
    methods : sequence of str, optional
        Registry keys to run; default every key of :func:`estimators.available_estimators`.
    method_params : mapping of str to mapping, optional
        Hyper-parameters per method, e.g. ``{"alsa-g": {"n_anchors": 200}}``. Estimators with a
        ``seed`` parameter get the run's seed unless it is given here.
    db : str or Path, optional
        DuckDB file; default :func:`storage.paths.db_path`.
    code_version : str, default ""
        Stored with every row, for provenance.
    checkpoint : CheckpointRef, optional
        The run's trained classifier, for model-aware methods (``gnnevaluator`` on graph
        runs, :mod:`tasks.model_aware`). Without it, or on a run of another modality, those
        methods are skipped when ``methods`` is None and refused when named.
    results : str or Path, optional
        Results root the estimates file is published under
        (:func:`storage.results.results_root`); default ``$ALSA_BENCH_RESULTS``, else
        ``results/`` beside the database.

    Returns
    -------
    EstimatesRef
        The run key, the database path, :func:`storage.estimates.estimates_digest` of the
        rows written (independent of timings, so identical results give identical digests) and
        the published Parquet file.

    Raises
    ------
    ValueError
        If a method is unknown or repeated, or ``method_params`` names a method not run or holds
        an unknown parameter.
    NotFoundError
        If the run, its validation split or any target split is not stored.
    StorageLockedError
        If another process holds the database through every retry.
    """
    if not isinstance(run_key, str) or not run_key:
        raise ValueError(f"run_key must be a non-empty string; got {run_key!r}.")
    names, params = _resolve_methods(methods, method_params)
    path = Path(db) if db is not None else db_path()
    names, model_aware = _split_model_aware(names, methods is None, run_key, checkpoint)
    if not path.is_file():
        raise NotFoundError(
            f"No benchmark database at {str(path)!r}; run the extract stage for {run_key!r} first."
        )

    with connect(path) as con:
        run = get_run(con, run_key)
        if run is None:
            raise NotFoundError(
                f"Run {run_key!r} is not stored in {str(path)!r}; run the extract stage first."
            )
        targets = list_splits(con, run_key, role="target")
        val_logits, val_labels = read_val(con, run_key)
    if not targets:
        raise NotFoundError(
            f"Run {run_key!r} has no target splits stored in {str(path)!r}; nothing to estimate."
        )

    def read_target(split: str) -> NDArray[np.float32]:
        with connect(path) as con:
            return read_target_logits(con, run_key, split)

    rows, anchors = _estimate_rows(
        run_key, run.seed, val_logits, val_labels, targets, read_target, names, params,
        model_aware, checkpoint, code_version,
    )
    published = write_estimates_file(run_key, rows, anchors, results_root(results, db=path))
    with connect(path) as con:
        ingest(con, published.path)
    logger.info(
        "Run %s: wrote %d estimates and anchors of %d methods to %s",
        run_key,
        len(rows),
        len(anchors),
        path,
    )
    return EstimatesRef(
        run_key=run_key, db_path=str(path), digest=estimates_digest(rows),
        path=published.path, sha256=published.sha256,
    )


def compute_estimates(
    logits: LogitsRef,
    *,
    methods: Sequence[str] | None = None,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    code_version: str = "",
    checkpoint: CheckpointRef | None = None,
    results: str | Path | None = None,
) -> EstimatesRef:
    """Estimate a run from its published logits file and publish the estimates; no database.

    What a worker runs: the logits come from ``logits.path`` (its hash checked), the rows and
    anchors go to ``<results>/estimates/`` and ``<results>/anchors/``; :func:`ingest_estimates`
    stores them. Methods, parameters and errors as :func:`estimate_run`.

    Parameters
    ----------
    logits : LogitsRef
        From :func:`tasks.extract.compute_logits` (or the ingested one).
    methods, method_params, code_version, checkpoint
        As :func:`estimate_run`.
    results : str or Path, optional
        Results root; default the root ``logits.path`` lies in.

    Returns
    -------
    EstimatesRef

    Raises
    ------
    storage.results.ResultCorruptError
        If the logits file is missing or does not match its hash.
    ValueError
        As :func:`estimate_run`.
    NotFoundError
        If the file holds no target split.
    """
    if not isinstance(logits, LogitsRef) or not logits.path:
        raise TypeError(f"logits must be a LogitsRef with a result file; got {logits!r}.")
    run_key = logits.run_key
    names, params = _resolve_methods(methods, method_params)
    names, model_aware = _split_model_aware(names, methods is None, run_key, checkpoint)
    content = read_logits_file(logits.path)
    if content.run.run_key != run_key:
        raise ValueError(
            f"logits file {logits.path!r} holds run {content.run.run_key!r}, not {run_key!r}."
        )
    targets = content.targets()
    if not targets:
        raise NotFoundError(
            f"Run {run_key!r} has no target splits in {logits.path!r}; nothing to estimate."
        )
    val_logits, val_labels = content.val()
    rows, anchors = _estimate_rows(
        run_key, content.run.seed, val_logits, val_labels, targets, content.target_logits,
        names, params, model_aware, checkpoint, code_version,
    )
    root = Path(results) if results is not None else Path(logits.path).parent.parent
    published = write_estimates_file(run_key, rows, anchors, root)
    logger.info("Run %s: published %d estimates as %s", run_key, len(rows), published.path)
    return EstimatesRef(
        run_key=run_key, db_path=logits.db_path, digest=estimates_digest(rows),
        path=published.path, sha256=published.sha256,
    )


def ingest_estimates(ref: EstimatesRef) -> EstimatesRef:
    """Ingest a run's published estimates (and anchors) into its database; idempotent.

    Parameters
    ----------
    ref : EstimatesRef
        From :func:`compute_estimates`.

    Returns
    -------
    EstimatesRef
        ``ref`` itself.

    Raises
    ------
    storage.results.ResultCorruptError
        If a file is missing or does not match its hash (delete it and rerun the stage).
    TypeError
        If ``ref`` is not an :class:`~tasks.refs.EstimatesRef` with a file.
    """
    if not isinstance(ref, EstimatesRef) or not ref.path:
        raise TypeError(f"ref must be an EstimatesRef with a result file; got {ref!r}.")
    with connect(ref.db_path) as con:
        ingest(con, ref.path)
    return ref


def _estimate_rows(
    run_key: str,
    run_seed: int,
    val_logits: NDArray[np.float32],
    val_labels: NDArray[np.int64],
    targets: Sequence[SplitInfo],
    read_target: Callable[[str], NDArray[np.float32]],
    names: Sequence[str],
    params: Mapping[str, Mapping[str, Any]],
    model_aware: Sequence[str],
    checkpoint: CheckpointRef | None,
    code_version: str,
) -> tuple[list[EstimateRow], dict[str, tuple[Any, Any, Any]]]:
    """Fit every method on the validation split, estimate every target split (its logits only).

    Returns the estimate rows and the anchors of the fitted methods that have them.
    """
    logger.info(
        "Run %s: %d validation samples, %d target splits, methods %s",
        run_key,
        len(val_labels),
        len(targets),
        ", ".join(names),
    )

    fitted: dict[str, Estimator] = {}
    fit_seconds: dict[str, float] = {}
    for method in names:
        estimator = build_estimator(method, params.get(method, {}), run_seed)
        start = time.perf_counter()
        try:
            estimator.fit(val_logits, val_labels)
        except Exception as exc:
            exc.add_note(f"while fitting {method!r} on the validation split of run {run_key!r}")
            raise
        fit_seconds[method] = time.perf_counter() - start
        fitted[method] = estimator
        logger.info("Run %s: fitted %s in %.2f s", run_key, method, fit_seconds[method])
    del val_logits, val_labels

    rows: list[EstimateRow] = []
    for info in targets:
        target_logits = read_target(info.split)
        for method, estimator in fitted.items():
            start = time.perf_counter()
            try:
                result = estimator.estimate(target_logits)
            except Exception as exc:
                exc.add_note(
                    f"while estimating split {info.split!r} of run {run_key!r} with {method!r}"
                )
                raise
            seconds = time.perf_counter() - start
            record = result.to_record()
            per_class_json = None
            if result.per_class is not None:
                per_class_json = per_class_record(result.per_class, target_logits)
            rows.append(
                EstimateRow(
                    run_key=run_key,
                    split=info.split,
                    method=method,
                    params_json=json.dumps(record["params"], sort_keys=True),
                    estimated_accuracy=float(result.accuracy),
                    true_accuracy=float(info.true_accuracy),
                    abs_error=abs(float(result.accuracy) - float(info.true_accuracy)),
                    fit_seconds=fit_seconds[method],
                    estimate_seconds=seconds,
                    diagnostics_json=json.dumps(record["diagnostics"], sort_keys=True),
                    code_version=code_version,
                    interval_low=float(result.interval[0]),
                    interval_high=float(result.interval[1]),
                    interval_level=float(result.level),
                    per_class_json=per_class_json,
                )
            )
        logger.info(
            "Run %s: estimated split %s (%d samples, true accuracy %.4f) with %d methods",
            run_key,
            info.split,
            info.n_samples,
            info.true_accuracy,
            len(fitted),
        )
        del target_logits

    for method in model_aware:
        assert checkpoint is not None
        rows.extend(model_aware_rows(
            method, checkpoint, targets, params=params.get(method, {}),
            code_version=code_version,
        ))

    anchors = {m: a for m, est in fitted.items() if (a := _anchors_of(est)) is not None}
    return rows, anchors
