"""The estimate stage: fit every estimator on a run's validation logits, score every target split.

The pipeline's unit is one run and **one method** (:func:`compute_method_estimates`, the
``estimate`` task): each has its own cache key (:func:`tasks.stages.versions.method_code_version`)
and its own result file, so adding or editing a method recomputes that method's estimates only.
:func:`compute_estimates` runs several methods of a run into one file (the CLI's tests, the
older layout).

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

In the flow (``logits_ref`` from the extract stage)::

    ref = compute_method_estimates(logits_ref, "alsa-g")   # a worker
    ingest_estimates(ref)                                   # the flow process
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray


from estimators import Estimator
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

    ``estimated[k]`` is :math:`\hat a_k` (:attr:`estimators.core.base.AccuracyEstimate.per_class`),
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
    if defaulted:  # ProjNorm is a default method only where the flow found it affordable,
        # and then the flow names it (tasks.methods.projnorm_by_default)
        asked = [m for m in asked if m != "projnorm"]
        names = [m for m in names if m != "projnorm"]
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
        Registry keys to run; default :func:`tasks.methods.default_method_names`. Peer methods
        (GDE) among them are left to :mod:`tasks.stages.peers`.
    method_params : mapping of str to mapping, optional
        Hyper-parameters per method, e.g. ``{"alsa-g": {"n_anchors": 200}}``. Estimators with a
        ``seed`` parameter get the run's seed unless it is given here.
    code_version : str, default ""
        Stored with every row, for provenance.
    checkpoint : CheckpointRef, optional
        The run's trained classifier, for model-aware methods (``gnnevaluator`` on graph
        runs, ``projnorm`` on image runs, :mod:`tasks.stages.model_aware`). Without it, or on a
        run of another modality, those methods are skipped when ``methods`` is None and refused
        when named. ProjNorm runs only when named (the flow names it where it is affordable:
        :func:`tasks.methods.projnorm_by_default`).
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
    names = skip_peer_methods_of_stage(names, run_key)  # the peers stage runs them
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


def compute_method_estimates(
    logits: LogitsRef,
    method: str,
    *,
    params: Mapping[str, Any] | None = None,
    code_version: str = "",
    checkpoint: CheckpointRef | None = None,
    results: str | Path | None = None,
) -> EstimatesRef | None:
    """One method's estimates of one run, published as their own file: the pipeline's unit.

    As :func:`compute_estimates` for ``methods=[method]``, with two differences: a feature
    method on a run that stores no features gives None (with the logged note) instead of an
    error, and the reference names its method. The run's logits file is read once for
    consecutive methods of the same run in one process (:func:`read_run_logits`).

    Parameters
    ----------
    logits : LogitsRef
        The run's published logits.
    method : str
        A method of :func:`tasks.methods.all_method_names`.
    params : mapping, optional
        Its hyper-parameters; an estimator with a ``seed`` gets the run's seed unless given.
    code_version : str, default ""
        :func:`tasks.stages.versions.method_code_version`; stored with every row.
    checkpoint : CheckpointRef, optional
        The run's classifier; needed by a model-aware method (GNNEvaluator), refused otherwise.
    results : str or Path, optional
        Results root; default the root ``logits.path`` lies in.

    Returns
    -------
    EstimatesRef or None
        None when the method does not apply to the run (a feature method, no stored features).

    Raises
    ------
    ValueError
        If the method or a parameter is unknown, or a model-aware method gets no checkpoint of
        its modality.
    storage.results.ResultCorruptError
        If the logits file is missing or does not match its hash.
    """
    if not isinstance(method, str):
        raise TypeError(f"method must be a registry key (str); got {type(method).__name__}.")
    run_key = _logits_run_key(logits)
    names, resolved = resolve_methods([method], {method: dict(params)} if params else None)
    names = skip_peer_methods_of_stage(names, run_key)  # the peers step runs them
    logit_methods, model_aware = _split_model_aware(names, False, run_key, checkpoint)
    if checkpoint is not None and not model_aware:
        raise ValueError(
            f"checkpoint is for model-aware methods ({', '.join(MODEL_AWARE_METHODS)}); "
            f"method {method!r} reads the logits only."
        )
    content, targets = read_run_logits(logits)
    if model_aware:
        assert checkpoint is not None
        from tasks.stages.model_aware import model_aware_rows

        rows = model_aware_rows(method, checkpoint, targets, params=resolved.get(method, {}),
                                code_version=code_version)
        anchors: dict[str, Any] = {}
    else:
        rows, fitted = estimate_rows(content, targets, {method: (method, resolved.get(method, {}))},
                                     code_version)
        anchors = {m: a for m, est in fitted.items() if (a := _anchors_of(est)) is not None}
    if not rows:  # skipped: estimate_rows logged why
        return None
    return replace(publish_estimates(logits, rows, anchors, results), method=method)


def skip_peer_methods_of_stage(names: Sequence[str], run_key: str) -> list[str]:
    """``names`` without the peer methods (GDE), which :mod:`tasks.stages.peers` runs once the
    run's peer exists.

    Raises
    ------
    ValueError
        If nothing is left: the estimate stage has no method to run.
    """
    from tasks.methods import peer_method_names

    peers = set(peer_method_names())
    kept = [m for m in names if m not in peers]
    if not kept:
        raise ValueError(
            f"run {run_key!r}: methods {list(names)} are all peer methods, which the peers "
            "stage runs (tasks.stages.peers); the estimate stage needs another method.")
    return kept


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


#: The logits file read last in this process, by path: the methods of one run, estimated one
#: after the other, read it once (:func:`forget_run_logits` drops it). Files are named by the
#: hash of their bytes, so a path read once stands for the same content for ever.
_LAST_READ: dict[str, LogitsContent] = {}


def forget_run_logits() -> None:
    """Drop the logits file :func:`read_run_logits` keeps (the flow calls it after each run)."""
    _LAST_READ.clear()


def read_run_logits(logits: LogitsRef) -> tuple[LogitsContent, list[SplitInfo]]:
    """The run's published logits file (its hash checked) and its target splits.

    The content of the last file read is kept, so the next method of the same run reads
    nothing (the file's name is the hash of its bytes).

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
    content = _LAST_READ.get(logits.path)
    if content is None:
        content = read_logits_file(logits.path)
        _LAST_READ.clear()
        _LAST_READ[logits.path] = content
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
                # the stored rows hold the shift band: asked for here, timed with the estimate
                if getattr(estimator, "needs_features", False):
                    result = estimator.estimate(target_logits, target_features=target_features,
                                                band=True)
                else:
                    result = estimator.estimate(target_logits, band=True)
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

from tasks.stages.common import (  # noqa: E402
    PINNED_STAGE_CACHE,
    forget_failure_record,
    log_task_failure,
)
from tasks.runtime.reproducible import ComputeMode, compute_mode  # noqa: E402
from tasks.runtime.threads import pinned_threads  # noqa: E402

@task(
    name="estimate",
    cache_policy=PINNED_STAGE_CACHE,
    on_failure=[log_task_failure, forget_failure_record],
    task_run_name="estimate-{logits.run_key}-{method}",
)
def estimate_task(
    logits: LogitsRef,
    method: str,
    params: dict[str, Any] | None,
    code_version: str,
    compute: ComputeMode,
    checkpoint: CheckpointRef | None = None,
    threads: int = 1,
) -> EstimatesRef | None:
    """Fit and score one method on one run (:func:`compute_method_estimates`).

    Cached per run and method: ``code_version`` is the method's own
    (:func:`tasks.stages.versions.method_code_version`), so editing or adding one method re-runs
    only its tasks. Takes the :class:`~tasks.runtime.refs.LogitsRef` (its file and hash, not
    only the run key) so that new logits invalidate the cached estimates, and reads the logits
    from that file, not from the database; the :class:`~tasks.runtime.refs.CheckpointRef` is
    given to model-aware methods only (GNNEvaluator on graph runs), which load the model. Runs in
    the run's compute mode (an input: part of the cache key), since ALSA's float32 fit and the
    numpy least squares of the feature methods follow the kernels the CPU picks.
    """
    with pinned_threads(threads), compute_mode(compute):
        return compute_method_estimates(
            logits, method, params=params, code_version=code_version, checkpoint=checkpoint,
        )
