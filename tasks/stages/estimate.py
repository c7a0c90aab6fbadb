"""The estimate stage: fit every estimator on a run's validation logits, score every target split.

Two halves, so that the computation can run anywhere and the database has one writer:
:func:`compute_estimates` (what a Dask worker runs) reads the run's logits from the Parquet file
the extract stage published (:mod:`storage.results`, never DuckDB), computes, and publishes the
rows and ALSA's anchors as content-addressed Parquet files; :func:`ingest_estimates` (the flow
process) ingests them in one transaction. Every row of the ``estimates`` table, the
model-aware methods' and the ablation variants' included, is built by
:func:`tasks.stages.rows.estimate_row`.

Estimators see target **logits only**: target splits are read with
:func:`storage.logits.read_target_logits`, which returns no labels. The absolute error is
computed against the split's true accuracy, which the extract stage stored with the logits.

>>> from tasks.stages.estimate import compute_estimates, ingest_estimates
>>> ref = compute_estimates(logits_ref, methods=["atc-mc", "alsa-g"])   # doctest: +SKIP
>>> ingest_estimates(ref).digest                                        # doctest: +SKIP
'4be1…'
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray


from estimators.base import Estimator
from storage.db import connect
from storage.errors import NotFoundError
from storage.estimates import EstimateRow, estimates_digest
from storage.logits import SplitInfo
from storage.results import LogitsContent, ingest, read_logits_file, write_estimates_file
from tasks.methods import (
    MODEL_AWARE_METHODS,
    build_estimator,
    feature_method_names,
    resolve_methods,
    skip_feature_methods,
)
from tasks.runtime.progress import progress
from tasks.runtime.refs import CheckpointRef, EstimatesRef, LogitsRef
from tasks.stages.rows import estimate_row

logger = logging.getLogger("tasks.stages.estimate")

#: Fitted attributes an estimator exposes when it has anchors worth storing (ALSA).
ANCHOR_ATTRIBUTES: tuple[str, str, str] = ("positions_", "peaks_", "variances_")


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
    from tasks.data.datasets import get_dataset_spec

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

    What a worker runs: the logits come from ``logits.path`` (its hash checked). For every
    method: fit on the validation logits and labels (timed), then estimate each target split
    from its logits alone (timed), and compare with the split's true accuracy. The rows and
    ALSA's fitted anchors go to ``<results>/estimates/`` and ``<results>/anchors/``;
    :func:`ingest_estimates` stores them, replacing earlier rows of the same (split, method).

    Parameters
    ----------
    logits : LogitsRef
        From :func:`tasks.stages.extract.compute_logits` (or the ingested one).
    methods : sequence of str, optional
        Registry keys to run; default :func:`tasks.methods.default_method_names`.
    method_params : mapping of str to mapping, optional
        Hyper-parameters per method, e.g. ``{"alsa-g": {"n_anchors": 200}}``. Estimators with a
        ``seed`` parameter get the run's seed unless it is given here.
    code_version : str, default ""
        Stored with every row, for provenance.
    checkpoint : CheckpointRef, optional
        The run's trained classifier, for model-aware methods (``gnnevaluator`` on graph
        runs, :mod:`tasks.stages.model_aware`). Without it, or on a run of another modality, those
        methods are skipped when ``methods`` is None and refused when named.
    results : str or Path, optional
        Results root; default the root ``logits.path`` lies in.

    Returns
    -------
    EstimatesRef
        The run key, the database the flow ingests into, :func:`storage.estimates.estimates_digest`
        of the rows (independent of timings, so identical results give identical digests) and
        the published Parquet file.

    Raises
    ------
    storage.results.ResultCorruptError
        If the logits file is missing or does not match its hash.
    ValueError
        If a method is unknown or repeated, or ``method_params`` names a method not run or holds
        an unknown parameter.
    NotFoundError
        If the file holds no target split.
    """
    run_key = _logits_run_key(logits)
    names, params = resolve_methods(methods, method_params)
    names, model_aware = _split_model_aware(names, methods is None, run_key, checkpoint)
    content, targets = read_run_logits(logits)
    rows, fitted = estimate_rows(
        content, targets, {m: (m, params.get(m, {})) for m in names}, code_version,
    )
    for method in model_aware:
        assert checkpoint is not None
        from tasks.stages.model_aware import model_aware_rows

        rows.extend(model_aware_rows(
            method, checkpoint, targets, params=params.get(method, {}),
            code_version=code_version,
        ))
    anchors = {m: a for m, est in fitted.items() if (a := _anchors_of(est)) is not None}
    return publish_estimates(logits, rows, anchors, results)


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
        If ``ref`` is not an :class:`~tasks.runtime.refs.EstimatesRef` with a file.
    """
    if not isinstance(ref, EstimatesRef) or not ref.path:
        raise TypeError(f"ref must be an EstimatesRef with a result file; got {ref!r}.")
    with connect(ref.db_path) as con:
        ingest(con, ref.path)
    return ref


def _logits_run_key(logits: LogitsRef) -> str:
    if not isinstance(logits, LogitsRef) or not logits.path:
        raise TypeError(f"logits must be a LogitsRef with a result file; got {logits!r}.")
    return logits.run_key


def read_run_logits(logits: LogitsRef) -> tuple[LogitsContent, list[SplitInfo]]:
    """The run's published logits file (its hash checked) and its target splits.

    Raises
    ------
    TypeError
        If ``logits`` is not a :class:`~tasks.runtime.refs.LogitsRef` with a file.
    storage.results.ResultCorruptError
        If the file is missing or does not match its hash.
    ValueError
        If the file holds another run.
    NotFoundError
        If the file holds no target split.
    """
    run_key = _logits_run_key(logits)
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
    return content, targets


def publish_estimates(
    logits: LogitsRef,
    rows: Sequence[EstimateRow],
    anchors: Mapping[str, tuple[Any, Any, Any]],
    results: str | Path | None = None,
) -> EstimatesRef:
    """Publish a run's rows (and anchors) under ``results`` (default: beside ``logits.path``)."""
    run_key = logits.run_key
    root = Path(results) if results is not None else Path(logits.path).parent.parent
    published = write_estimates_file(run_key, rows, anchors, root)
    logger.info("Run %s: published %d estimates as %s", run_key, len(rows), published.path)
    return EstimatesRef(
        run_key=run_key, db_path=logits.db_path, digest=estimates_digest(rows),
        path=published.path, sha256=published.sha256,
    )


def estimate_rows(
    content: LogitsContent,
    targets: Sequence[SplitInfo],
    specs: Mapping[str, tuple[str, Mapping[str, Any]]],
    code_version: str,
    *,
    per_class: bool = True,
) -> tuple[list[EstimateRow], dict[str, Estimator]]:
    """Fit every estimator on the validation split, estimate every target split.

    Parameters
    ----------
    content : LogitsContent
        The run's published logits (:func:`read_run_logits`).
    targets : sequence of SplitInfo
        Its target splits, in the order they are estimated.
    specs : mapping of str to (str, mapping)
        ``name -> (registry key, hyper-parameters)``: rows are stored under ``name`` (the
        registry key itself for the estimate stage, a label for ablation variants); each
        estimator gets the run's seed unless its parameters give one. Methods that need
        features (:func:`tasks.methods.feature_method_names`) get the run's stored penultimate
        features (:mod:`storage.features`) and are skipped with a logged note when the run
        stores none.
    code_version : str
    per_class : bool, default True
        Store per-class estimates (:func:`per_class_record`) of methods that give them.

    Returns
    -------
    rows : list of EstimateRow
    fitted : dict of str to Estimator
        The fitted estimators by name (for their anchors).
    """
    run_key, run_seed = content.run.run_key, content.run.seed
    # The feature methods (distcs, aline-s, aline-d, dispersion) need the classifier's
    # penultimate features (storage.features); a run that stores none skips them with a note.
    run_features = content.features
    have_features = run_features is not None and all(
        run_features.has(s.split) for s in (*targets, *[i for i in content.splits
                                                       if i.role == "val"]))
    kept, note = skip_feature_methods([m for m, _ in specs.values()], have_features,
                                      f"run {run_key!r} has none stored")
    if note is not None:
        logger.warning("Run %s: %s", run_key, note)
        specs = {name: spec for name, spec in specs.items() if spec[0] in kept}
    val_logits, val_labels = content.val()
    logger.info(
        "Run %s: %d validation samples, %d target splits, methods %s",
        run_key,
        len(val_labels),
        len(targets),
        ", ".join(specs),
    )

    fit_features = _fit_features(content, specs)
    fitted: dict[str, Estimator] = {}
    fit_seconds: dict[str, float] = {}
    for name, (method, params) in progress(specs.items(), total=len(specs),
                                           desc=f"fit {run_key}", unit="method"):
        estimator = build_estimator(method, params, run_seed)
        start = time.perf_counter()
        try:
            if getattr(estimator, "needs_features", False):
                estimator.fit(val_logits, val_labels, **fit_features)
            else:
                estimator.fit(val_logits, val_labels)
        except Exception as exc:
            exc.add_note(f"while fitting {name!r} on the validation split of run {run_key!r}")
            raise
        fit_seconds[name] = time.perf_counter() - start
        fitted[name] = estimator
        logger.info("Run %s: fitted %s in %.2f s", run_key, name, fit_seconds[name])
    del val_logits, val_labels, fit_features
    any_features = any(getattr(e, "needs_features", False) for e in fitted.values())

    rows: list[EstimateRow] = []
    for info in progress(targets, desc=f"estimate {run_key}", unit="split"):
        target_logits = content.target_logits(info.split)
        target_features = (content.features.split(info.split)
                           if any_features and content.features is not None else None)
        for name, estimator in fitted.items():
            start = time.perf_counter()
            try:
                if getattr(estimator, "needs_features", False):
                    result = estimator.estimate(target_logits, target_features=target_features)
                else:
                    result = estimator.estimate(target_logits)
            except Exception as exc:
                exc.add_note(
                    f"while estimating split {info.split!r} of run {run_key!r} with {name!r}"
                )
                raise
            seconds = time.perf_counter() - start
            record = result.to_record()
            per_class_json = None
            if per_class and result.per_class is not None:
                per_class_json = per_class_record(result.per_class, target_logits)
            rows.append(estimate_row(
                run_key, info, name, result.accuracy,
                params=record["params"], diagnostics=record["diagnostics"],
                interval=result.interval, level=result.level,
                fit_seconds=fit_seconds[name], estimate_seconds=seconds,
                code_version=code_version, per_class_json=per_class_json,
                shift_interval=result.shift_interval,
            ))
        logger.info(
            "Run %s: estimated split %s (%d samples, true accuracy %.4f) with %d methods",
            run_key,
            info.split,
            info.n_samples,
            info.true_accuracy,
            len(fitted),
        )
        del target_logits, target_features
    return rows, fitted


def _fit_features(
    content: LogitsContent, specs: Mapping[str, tuple[str, Mapping[str, Any]]]
) -> dict[str, Any]:
    """The fit keywords of the feature methods (validation features, training subsample), read
    only when one of ``specs`` needs them."""
    if content.features is None or not any(m in feature_method_names() for m, _ in
                                           specs.values()):
        return {}
    [val] = [s.split for s in content.splits if s.role == "val"]
    train = content.features.train()
    return {
        "val_features": content.features.split(val),
        "train_features": None if train is None else train[0],
        "train_labels": None if train is None else train[1],
    }


# ------------------------------------------------------------------------------- the @task
from prefect import task  # noqa: E402  (the plain function above needs no Prefect)

from tasks.stages.common import PINNED_STAGE_CACHE, forget_failure_record  # noqa: E402
from tasks.runtime.reproducible import ComputeMode, compute_mode  # noqa: E402
from tasks.runtime.threads import pinned_threads  # noqa: E402

@task(
    name="estimate",
    cache_policy=PINNED_STAGE_CACHE,
    on_failure=[forget_failure_record],
    task_run_name="estimate-{logits.run_key}",
)
def estimate_task(
    logits: LogitsRef,
    methods: list[str] | None,
    method_params: dict[str, dict[str, Any]] | None,
    code_version: str,
    compute: ComputeMode,
    checkpoint: CheckpointRef | None = None,
    threads: int = 1,
) -> EstimatesRef:
    """Fit and score every method on one run (:func:`tasks.stages.estimate.compute_estimates`).

    Takes the :class:`~tasks.runtime.refs.LogitsRef` (its file and hash, not only the run key) so
    that new logits invalidate the cached estimates, and reads the logits from that file, not
    from the database; the :class:`~tasks.runtime.refs.CheckpointRef` lets model-aware methods
    (GNNEvaluator on graph runs) load the trained model. Runs in the run's compute mode (an
    input: part of the cache key), since ALSA's float32 fit and the numpy least squares of the
    feature methods follow the kernels the CPU picks.
    """
    with pinned_threads(threads), compute_mode(compute):
        return compute_estimates(
            logits, methods=methods, method_params=method_params, code_version=code_version,
            checkpoint=checkpoint,
        )

