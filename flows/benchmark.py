"""The ``benchmark`` flow: download → train → extract → estimate → report over a suite.

Runs every stage task of :mod:`tasks.stages` for the suite's datasets × backbones × seeds, then
writes one report over the runs it touched. Two layouts share one code path:

* sequential (``workers=0``, no ``dask_address``): each task runs in the flow process, one
  after the other;
* distributed (``workers=N`` or ``dask_address``): the per-run train → extract → estimate chain
  is submitted as futures to a ``prefect_dask.DaskTaskRunner`` (:mod:`flows.dask_runner`), and
  the flow process ingests each published Parquet result as it completes.

In both, extract and estimate publish content-addressed Parquet files and the flow process is
the single DuckDB writer (:mod:`storage.results`); every task pins ``threads_per_task`` threads
(:mod:`tasks.runtime.threads`), so both layouts compute identical numbers. Unless ``fast``
(``--fast``, ``ALSA_BENCH_REPRODUCIBLE=0``), :func:`run_pipeline` first puts the reproducible
mode's variables in the environment (:func:`tasks.runtime.reproducible.apply_environment`),
before any task computes here or a local worker starts, and every train, extract and estimate
task gets the mode as an input (:class:`~tasks.runtime.reproducible.ComputeMode`, part of its
cache key) and checks that its process computes with it. Every stage is
cached across runs, so a second run with the same parameters finishes in seconds; ``refresh``
re-runs a stage and everything downstream of it. The estimate stage is one task per run **and
method** (:func:`tasks.stages.estimate.estimate_task`), keyed on that method's own code
(:func:`tasks.stages.versions.method_code_version`): adding or editing a method re-runs its
estimates and the report only. Train and extract are keyed per dataset and backbone.

What a run covers and with which options is decided in :mod:`tasks.plan` (:class:`BenchmarkPlan`,
:class:`RunOptions`); this module only sequences the stages. The stage flows
(``flows/download.py`` ... ``flows/report.py``) call :func:`run_pipeline` with ``until`` set to
their stage, so each can be launched alone with the same parameters.

Run it with ``alsa-bench run`` or ``python -m flows.benchmark``.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.dask_runner import (
    build_task_runner,
    gpu_annotation,
    is_distributed,
    shared_api_url,
)
from storage.paths import checkpoint_dir, data_dir, db_path, reports_dir
from storage.results import results_root
from tasks.plan import (
    PIPELINE_OPTIONS,
    suite_modality,
    BenchmarkPlan,
    RunOptions,
    check_until,
    last_stage_needs_runs,
    make_plan,
    plan_methods,
    resolve_threads,
    run_option_fields,
)
from tasks.runtime.refs import CheckpointRef, DatasetRef, EstimatesRef, LogitsRef, ReportRef
from tasks.runtime.reproducible import (
    apply_environment,
    current_mode,
    describe_mode,
    replaced_variables,
    reproducible_by_default,
)
from tasks.stages.common import forget_failure_record
from tasks.stages.download import download_task
from tasks.stages.estimate import estimate_task, forget_run_logits
from tasks.stages.extract import extract_task, prepare_splits_task
from tasks.stages.healing import (
    StageOutcome,
    future_result,
    ingest_result,
    output_exists,
    result_intact,
    run_stage,
    settle,
    stage_call,
)
from tasks.stages.peers import peer_runs, peers_code_version, peers_task
from tasks.stages.report import report_fingerprint, report_task
from tasks.stages.train import train_task
from tasks.stages.versions import (
    STAGES,
    method_code_version,
    parse_refresh,
    stage_code_version,
)


@dataclass
class PipelineResult:
    """What :func:`run_pipeline` produced.

    Attributes
    ----------
    plan : BenchmarkPlan
    outcomes : list of StageOutcome
        One per stage task call, in order.
    datasets, checkpoints, logits, estimates : list
        The references each stage returned.
    peers : list of EstimatesRef
        The peers step's results (GDE), one per run with a peer (:mod:`tasks.stages.peers`).
    report : ReportRef or None
        The report, when the pipeline ran until ``report``.
    """

    plan: BenchmarkPlan
    outcomes: list[StageOutcome] = field(default_factory=list)
    datasets: list[DatasetRef] = field(default_factory=list)
    checkpoints: list[CheckpointRef] = field(default_factory=list)
    logits: list[LogitsRef] = field(default_factory=list)
    estimates: list[EstimatesRef] = field(default_factory=list)
    peers: list[EstimatesRef] = field(default_factory=list)
    report: ReportRef | None = None

    def summary(self) -> dict[str, dict[str, int]]:
        """Per stage, how many task calls ran and how many came from the cache."""
        out: dict[str, dict[str, int]] = {}
        for o in self.outcomes:
            counts = out.setdefault(o.stage, {"ran": 0, "cached": 0})
            counts["cached" if o.cached else "ran"] += 1
        return out


def run_pipeline(
    plan: BenchmarkPlan,
    options: RunOptions | None = None,
    *,
    until: str = "report",
) -> PipelineResult:
    """Run the stages of ``plan`` up to ``until`` inside the calling flow.

    Parameters
    ----------
    plan : BenchmarkPlan
        From :func:`tasks.plan.make_plan`.
    options : RunOptions, optional
        Everything else (:class:`tasks.plan.RunOptions`; its selection fields are ignored, the
        plan has them): ``refresh`` (stages to re-run with everything downstream, or
        ``"all"``), training (``epochs``, ``max_train_samples``, ``device``), extraction
        (``batch_size``), estimation (``methods``, ``method_params``), the report
        (``run_name``, ``publish_artifacts``) and the layout (``workers``: 0 runs every task in
        this process, N > 0 on a local Dask cluster of N single-threaded worker processes;
        ``dask_address``: an existing scheduler; ``threads_per_task``: torch/BLAS threads of
        each task, default the cores divided among the workers; the same value gives the same
        numbers in both layouts). Default ``RunOptions()``.
    until : {"download", "train", "extract", "estimate", "report"}, default "report"
        Last stage to run.

    Returns
    -------
    PipelineResult

    Raises
    ------
    ValueError
        If ``until`` or a ``refresh`` name is not a stage, or the layout is invalid.
    """
    options = RunOptions() if options is None else options
    check_until(until)
    distributed = is_distributed(options.workers, options.dask_address)
    # the compute mode's variables, before any task runs here or a local worker is spawned
    # (workers inherit the environment); the tasks check that their process honours them
    reproducible = not options.fast and reproducible_by_default()
    apply_environment(reproducible)
    threads = resolve_threads(options.threads_per_task, options.workers,
                              reproducible=reproducible)
    if distributed and last_stage_needs_runs(until):
        from tasks.runtime.devices import resolve_device

        gpu = resolve_device(options.device).type == "cuda"
        runner = build_task_runner(options.workers, options.dask_address, gpu=gpu)
        inner = pipeline_flow.with_options(task_runner=runner)
        with shared_api_url():
            return inner(plan, until=until, threads=threads, distributed=True, gpu=gpu,
                         **options.pipeline_kwargs())
    return _pipeline(plan, options, until=until, threads=threads, distributed=False, gpu=False)


@flow(name="benchmark-dask", description="train → extract → estimate on Dask workers, one writer",
      on_failure=[forget_failure_record])
def pipeline_flow(
    plan: BenchmarkPlan,
    *,
    until: str,
    refresh: Sequence[str] | str | None,
    epochs: int | None,
    max_train_samples: int | None,
    device: str,
    batch_size: int,
    methods: Sequence[str] | None,
    method_params: Mapping[str, Mapping[str, Any]] | None,
    run_name: str | None,
    publish_artifacts: bool,
    fast: bool,
    threads: int,
    distributed: bool,
    gpu: bool,
) -> PipelineResult:
    """The pipeline as a subflow, so it can run under a ``DaskTaskRunner`` (:func:`run_pipeline`).

    Its parameters are :data:`tasks.plan.PIPELINE_OPTIONS` (as named in
    :class:`tasks.plan.RunOptions`) plus the plan, the last stage and the layout.
    """
    given = dict(locals())
    options = RunOptions(**{name: given[name] for name in PIPELINE_OPTIONS})
    return _pipeline(plan, options, until=until, threads=threads, distributed=distributed,
                     gpu=gpu)


def _pipeline(
    plan: BenchmarkPlan,
    options: RunOptions,
    *,
    until: str,
    threads: int,
    distributed: bool,
    gpu: bool,
) -> PipelineResult:
    """The body of :func:`run_pipeline` in the flow that runs it."""
    fresh = parse_refresh(options.refresh)
    last = STAGES.index(until)
    logger = get_run_logger()
    result = PipelineResult(plan=plan)
    compute = current_mode(not options.fast and reproducible_by_default())
    db = str(db_path().resolve())
    results = str(results_root(db=db).resolve())
    methods_list = plan_methods(plan, options.methods)
    params = {
        m: dict(p) for m, p in (options.method_params or {}).items()
        if methods_list is None or m in methods_list
    } or None
    # the peer methods (GDE) run in the peers step, after every run's logits exist, and so do
    # ALine-S/-D on the runs that have peers; ProjNorm joins the defaults where it is
    # affordable (a GPU, or ALSA_BENCH_PROJNORM=on)
    alone_methods, with_peers_methods = (
        _run_methods(plan, methods_list, options.device)
        if last >= STAGES.index("estimate") else ([], []))
    logger.info(
        "Pipeline %s until %s: datasets %s, backbones %s, seeds %s, refresh %s",
        plan.suite, until, list(plan.datasets), list(plan.backbones), list(plan.seeds),
        sorted(fresh) or "none",
    )
    logger.info(
        "Layout: %s, %d thread(s) per task, results under %s",
        "Dask workers" if distributed else "sequential", threads, results,
    )
    logger.info("Compute mode: %s", describe_mode(compute))
    for name, (old, new) in replaced_variables().items():
        logger.warning("reproducible mode: %s=%s from the environment replaced by %s (run with "
                       "--fast to keep it)", name, old, new)
    _sweep_leftovers(results, logger)

    def note(ref: Any, outcome: StageOutcome) -> Any:
        result.outcomes.append(outcome)
        logger.info("%-8s %-28s %s in %.2f s%s", outcome.stage, outcome.key, outcome.state,
                    outcome.seconds, " (output was missing: re-ran)" if outcome.healed else "")
        return ref

    has_peers = set(peer_runs([f"{d}.{b}.s{s}" for d in plan.datasets
                               for b in plan.backbones_of(d) for s in plan.seeds]))
    jobs: list[_RunJob] = []
    for dataset in plan.datasets:
        ds = note(*run_stage(
            download_task, "download", fresh, dataset, str(data_dir().resolve()),
            stage_code_version("download", dataset=dataset), key=dataset, check=output_exists,
        ))
        result.datasets.append(ds)
        if last < STAGES.index("train"):
            continue
        for backbone in plan.backbones_of(dataset):
            # keys per (dataset, backbone): adding a backbone trains that backbone only
            train_v = stage_code_version("train", dataset=dataset, backbone=backbone)
            extract_v = (stage_code_version("extract", dataset=dataset, backbone=backbone)
                         if last >= STAGES.index("extract") else "")
            method_jobs = {
                m: _MethodJob(m, (params or {}).get(m), method_code_version(
                    m, params=(params or {}).get(m), dataset=dataset, backbone=backbone))
                for m in alone_methods
            }
            for seed in plan.seeds:
                jobs.append(_RunJob(
                    run_key=f"{dataset}.{backbone}.s{seed}",
                    train={
                        "dataset": ds, "backbone": backbone, "seed": seed,
                        "epochs": options.epochs, "max_train_samples": options.max_train_samples,
                        "device": options.device,
                        "checkpoint_dir": str(checkpoint_dir().resolve()),
                        "code_version": train_v, "compute": compute,
                    },
                    extract={
                        "suite": plan.suite, "db": db, "device": options.device,
                        "batch_size": options.batch_size, "code_version": extract_v,
                        "compute": compute, "results": results,
                    },
                    methods=tuple(method_jobs[m] for m in (
                        with_peers_methods if f"{dataset}.{backbone}.s{seed}" in has_peers
                        else alone_methods)),
                ))
    run_jobs = _run_distributed if distributed else _run_sequential
    run_jobs(jobs, result, note, fresh, last, threads, gpu)
    if last >= STAGES.index("estimate"):
        _run_peers(result, note, fresh, threads, methods_list, params)

    if last == STAGES.index("report"):
        name = options.run_name or plan.suite
        run_keys = list(dict.fromkeys(e.run_key for e in (*result.estimates, *result.peers)))
        fingerprint = report_fingerprint([*result.estimates, *result.peers], run_keys,
                                         methods_list)
        result.report = note(*run_stage(
            report_task, "report", fresh, fingerprint, run_keys, db,
            str(reports_dir().resolve()), name, methods_list, options.publish_artifacts,
            stage_code_version("report"), key=name,
            check=lambda ref: output_exists(ref, fingerprint=fingerprint),
        ))
    summary = ", ".join(f"{s}: {c['ran']} ran, {c['cached']} cached"
                        for s, c in result.summary().items())
    logger.info("Pipeline done: %s", summary)
    return result


def _run_methods(
    plan: BenchmarkPlan, methods: Sequence[str] | None, device: str,
) -> tuple[list[str], list[str]]:
    """The estimate stage's methods for a run without peers and for a run with peers, in order.

    The methods asked for (already narrowed to the plan's modality by
    :func:`tasks.plan.plan_methods`), or every default method that applies to the modality
    (:func:`tasks.methods.default_method_names`), ProjNorm among them only where it is
    affordable (:func:`tasks.methods.projnorm_by_default`). The peer methods (GDE) never run in
    the estimate stage (the peers step runs them, :func:`_run_peers`); where a run has peers,
    the methods that read them (ALine-S/-D) run in the peers step too.
    """
    from tasks.methods import (
        default_method_names,
        methods_for_modality,
        peer_method_names,
        peer_reading_method_names,
        projnorm_by_default,
        resolve_methods,
    )

    peer, reading = set(peer_method_names()), set(peer_reading_method_names())
    if methods is not None:
        listed = resolve_methods(methods, None)[0]
    else:
        modality = suite_modality(plan.suite)
        listed = [m for m in methods_for_modality(default_method_names(), modality)
                  if m != "projnorm" or projnorm_by_default(device)]
    alone = [m for m in listed if m not in peer]
    return alone, [m for m in alone if m not in reading]


def _run_peers(
    result: PipelineResult, note: Any, fresh: frozenset[str], threads: int,
    methods: Sequence[str] | None, params: Mapping[str, Mapping[str, Any]] | None,
) -> None:
    """The peers step of every run with a peer, once every run's logits are published: GDE
    against the next seed (cached per run and peer run), ALine-S/-D with every other seed in
    their family (cached per run and all its peers; runs that store features only).

    The tasks run in this process in both layouts (they compare predictions the logits files
    hold) and are refreshed with the estimate stage; their files are ingested like the
    estimate stage's.
    """
    from tasks.methods import default_method_names, peer_method_names, peer_reading_method_names
    from tasks.stages.peers import stores_features

    asked = default_method_names() if methods is None else methods
    gde = [m for m in asked if m in peer_method_names()]
    aline = [m for m in asked if m in peer_reading_method_names()]
    published = {ref.run_key: replace(ref, digest="") for ref in result.logits}
    for key, peers in peer_runs(list(published)).items():
        calls = []
        if gde:
            calls.append((gde, [published[peers[0]]]))
        if aline and stores_features(published[key]):
            calls.append((aline, [published[p] for p in peers]))
        for wanted, group in calls:
            own = {m: dict(p) for m, p in (params or {}).items() if m in wanted} or None
            ref, outcome = run_stage(
                peers_task, "estimate", fresh, published[key], group, wanted, own,
                peers_code_version(), threads=threads,
                key=f"{key}~{'+'.join(g.run_key for g in group)}",
                check=result_intact, ingest=ingest_result,
            )
            result.peers.append(note(ref, replace(outcome, stage="peers")))


def _sweep_leftovers(results: str, logger: Any) -> list[Path]:
    """Delete the temporary files killed writers left, and quarantine garbled cache records,
    when this process owns the state folder.

    Only while this very process holds the state lock (``alsa-bench run`` takes it before the
    flow starts: :func:`storage.lock.state_lock`), and before any task starts, so no live
    writer owns such a file; a flow started without the lock (a deployment) sweeps nothing.
    The results root is swept too when it lies outside the state folder.
    """
    import os
    import socket

    from prefect.settings import get_current_settings

    from storage.doctor import sweep_cache_records, sweep_temp_files
    from storage.lock import read_lock_record
    from storage.paths import state_dir

    home = state_dir()
    record = read_lock_record(home)
    if record is None or record.pid != os.getpid() or record.host != socket.gethostname():
        return []
    root = Path(results)
    outside = () if root.resolve().is_relative_to(home.resolve()) else (root,)
    removed = sweep_temp_files(home, extra=outside)
    if removed:
        logger.info("Removed %d temporary file(s) of killed writers: %s", len(removed),
                    ", ".join(str(p) for p in removed))
    records = Path(get_current_settings().results.local_storage_path).expanduser().resolve()
    if records.is_relative_to(home.resolve()):  # a records folder elsewhere may be shared
        garbled = sweep_cache_records(records, home)
        if garbled:
            logger.warning("Moved %d damaged cache record(s) to %s", len(garbled),
                           home / "quarantine")
        removed += garbled
    return removed


def _stage_args(stage_task: Any, **named: Any) -> tuple[Any, ...]:
    """A stage task's arguments, given by name, as the positional tuple in its parameter order
    (every parameter up to the last one named; ``threads`` stays a keyword)."""
    bound = inspect.signature(stage_task.fn).bind_partial(**named)
    order = list(inspect.signature(stage_task.fn).parameters)
    missing = [p for p in order[: max(order.index(n) for n in named) + 1] if p not in named]
    if missing:
        raise TypeError(f"{stage_task.name}: arguments {missing} not given.")
    return tuple(bound.arguments[p] for p in order if p in named)


@dataclass(frozen=True)
class _MethodJob:
    """One method of a run: its name, its hyper-parameters and its own code version."""

    method: str
    params: dict[str, Any] | None
    code_version: str

    @property
    def model_aware(self) -> bool:
        """Whether the method reads the trained model (it then gets the checkpoint)."""
        from tasks.methods import MODEL_AWARE_METHODS

        return self.method in MODEL_AWARE_METHODS


@dataclass(frozen=True)
class _RunJob:
    """One run's stage arguments, by the stage tasks' parameter names (without the upstream
    references and the thread pin).

    Attributes
    ----------
    run_key : str
    train, extract : dict
        Each stage task's own arguments, by name; :meth:`train_args` and :meth:`extract_args`
        add the upstream references and give them in the task's order.
    methods : tuple of _MethodJob
        One estimate task each (:meth:`estimate_args`).
    """

    run_key: str
    train: dict[str, Any]
    extract: dict[str, Any]
    methods: tuple[_MethodJob, ...] = ()

    @property
    def dataset(self) -> DatasetRef:
        """The run's dataset reference."""
        return self.train["dataset"]

    def train_args(self) -> tuple[Any, ...]:
        """``train_task``'s positional arguments."""
        return _stage_args(train_task, **self.train)

    def extract_args(self, checkpoint: Any) -> tuple[Any, ...]:
        """``extract_task``'s positional arguments for the checkpoint (or its future)."""
        return _stage_args(extract_task, checkpoint=checkpoint, **self.extract)

    @property
    def runs_estimate(self) -> bool:
        """Whether the estimate stage has a method to run (not when only peer methods, which
        the peers step runs, were asked for)."""
        return bool(self.methods)

    def estimate_args(self, logits: Any, checkpoint: Any, job: _MethodJob) -> tuple[Any, ...]:
        """``estimate_task``'s positional arguments for one method, the logits and (for a
        model-aware method only) the checkpoint, either of them a future."""
        return _stage_args(estimate_task, logits=logits, method=job.method, params=job.params,
                           code_version=job.code_version, compute=self.train["compute"],
                           checkpoint=checkpoint if job.model_aware else None)


def _estimate_key(run_key: str, job: _MethodJob) -> str:
    return f"{run_key} {job.method}"


def _estimate_intact(ref: EstimatesRef | None) -> bool:
    """An estimate task's result is trusted when its file is intact, or when it published none
    (a feature method on a run without features)."""
    return ref is None or result_intact(ref)


def _ingest_estimate(ref: EstimatesRef | None) -> EstimatesRef | None:
    return None if ref is None else ingest_result(ref)


def _run_sequential(
    jobs: list[_RunJob], result: PipelineResult, note: Any, fresh: frozenset[str], last: int,
    threads: int, gpu: bool,
) -> None:
    """Each run's train → extract → estimate in this process, ingesting each published result.

    The estimate task gets the logits reference as the extract task returned it (before the
    ingest: no database digest), exactly as in the distributed layout, so both share a cache.
    """
    for job in jobs:
        ckpt = note(*run_stage(
            train_task, "train", fresh, *job.train_args(), threads=threads, key=job.run_key,
            check=output_exists,
        ))
        result.checkpoints.append(ckpt)
        if last < STAGES.index("extract"):
            continue
        logits = note(*run_stage(
            extract_task, "extract", fresh, *job.extract_args(ckpt), threads=threads,
            key=job.run_key, check=result_intact, ingest=ingest_result,
        ))
        result.logits.append(logits)
        if last < STAGES.index("estimate") or not job.runs_estimate:
            continue
        published = replace(logits, digest="")
        for method in job.methods:
            est = note(*run_stage(
                estimate_task, "estimate", fresh,
                *job.estimate_args(published, ckpt, method), threads=threads,
                key=_estimate_key(job.run_key, method), check=_estimate_intact,
                ingest=_ingest_estimate,
            ))
            if est is not None:
                result.estimates.append(est)
        forget_run_logits()  # the next run reads its own file


def _run_distributed(
    jobs: list[_RunJob], result: PipelineResult, note: Any, fresh: frozenset[str], last: int,
    threads: int, gpu: bool,
) -> None:
    """Submit every run's train → extract → estimate as chained futures; ingest as they land.

    Train and extract ask for a ``GPU`` worker resource when the device is CUDA. The flow
    process waits on the trains, then ingests each extract's logits file and each estimate's
    file in the order they complete; a result whose file is gone (a cached reference to a
    deleted file) is recomputed here with the cache refreshed.
    """
    from prefect.futures import as_completed

    from tasks.runtime.faults import kill_point

    trains, extracts, estimates = {}, {}, {}
    prepared: dict[str, Any] = {}  # one split generation per dataset, before its extracts
    started: dict[str, float] = {}
    for job in jobs:
        dataset_ref = job.dataset
        if last >= STAGES.index("extract") and dataset_ref.name not in prepared:
            prepared[dataset_ref.name] = prepare_splits_task.submit(dataset_ref, threads=threads)
        started[job.run_key] = time.perf_counter()
        kill_point("train")
        key, pin = job.run_key, {"threads": threads}
        with gpu_annotation(gpu):  # stage_call: cache refreshed, or a damaged record discarded
            args = job.train_args()
            trains[key] = stage_call(train_task, "train", fresh, args, pin, key=key).submit(
                *args, threads=threads
            )
            if last >= STAGES.index("extract"):
                kill_point("extract")
                args = job.extract_args(trains[key])  # a future: no record looked at yet
                extracts[key] = stage_call(extract_task, "extract", fresh, args, pin,
                                           key=key).submit(
                    *args, threads=threads, wait_for=[prepared[dataset_ref.name]],
                )
        if last >= STAGES.index("estimate") and job.runs_estimate:
            for method in job.methods:
                kill_point("estimate")
                args = job.estimate_args(extracts[key], trains[key], method)
                estimates[(key, method.method)] = stage_call(
                    estimate_task, "estimate", fresh, args, pin,
                    key=_estimate_key(key, method)).submit(*args, threads=threads)
    by_key = {job.run_key: job for job in jobs}
    ckpts: dict[str, CheckpointRef] = {}
    published: dict[str, LogitsRef] = {}

    def outcome(stage: str, key: str, future: Any, healed: bool = False) -> StageOutcome:
        return StageOutcome(stage=stage, key=key, state=str(future.state.name),
                            seconds=time.perf_counter() - started[key], healed=healed)

    for future in as_completed(list(trains.values())):
        key = next(k for k, f in trains.items() if f is future)
        # a cached checkpoint whose file is gone is retrained here, as the sequential layout does;
        # an extract that already failed on it is re-run on the new one below
        ref, healed = _settled(future, train_task, by_key[key].train_args(), threads, gpu,
                               check=output_exists, key=key)
        ckpts[key] = note(ref, outcome("train", key, future, healed))
        kill_point("train", "end")
    result.checkpoints.extend(ckpts[j.run_key] for j in jobs)

    for future in as_completed(list(extracts.values())):
        key = next(k for k, f in extracts.items() if f is future)
        ref, healed = _settled(future, extract_task, by_key[key].extract_args(ckpts[key]),
                               threads, gpu, key=key)
        published[key] = ref
        note(ref, outcome("extract", key, future, healed))
        result.logits.append(ingest_result(ref))
        kill_point("extract", "end")
    result.logits.sort(key=lambda r: list(by_key).index(r.run_key))

    for future in as_completed(list(estimates.values())):
        key, name = next(k for k, f in estimates.items() if f is future)
        method = next(m for m in by_key[key].methods if m.method == name)
        args = by_key[key].estimate_args(published[key], ckpts[key], method)
        label = _estimate_key(key, method)
        ref, healed = _settled(future, estimate_task, args, threads, False,
                               check=_estimate_intact, key=label)
        note(ref, replace(outcome("estimate", key, future, healed), key=label))
        if ref is not None:
            result.estimates.append(ingest_result(ref))
        kill_point("estimate", "end")
    order = {(j.run_key, m.method): i for i, (j, m) in
             enumerate((j, m) for j in jobs for m in j.methods)}
    result.estimates.sort(key=lambda r: order.get((r.run_key, r.method), len(order)))


def _settled(
    future: Any, stage_task: Any, args: tuple[Any, ...], threads: int, gpu: bool,
    check: Any = result_intact, key: str = "",
) -> tuple[Any, bool]:
    """A finished publishing future's reference, trusted or recomputed by
    :func:`tasks.stages.healing.settle` (the decision the sequential layout makes too).

    A reference whose output is gone (``check``: :func:`result_intact` for published files,
    :func:`output_exists` for checkpoints), or a task that failed on a missing or damaged input
    file (an estimate whose upstream logits file was missing), is re-run once with its cache
    refreshed, on the healed upstream reference; any failure of the re-run is raised. Any other
    failure is raised at once (:func:`tasks.stages.healing.future_result`): it is not retried.
    """

    def rerun() -> Any:
        with gpu_annotation(gpu):
            retry = stage_task.with_options(refresh_cache=True).submit(*args, threads=threads)
        return retry.result()

    return settle(stage_task.name, key, future_result(future), check, rerun)


@flow(name="benchmark", description="download → train → extract → estimate → report over a suite",
      on_failure=[forget_failure_record])
def benchmark(
    suite: str = "fmnist",
    backbones: list[str] | None = None,
    seeds: int | list[int] | None = None,
    refresh: list[str] | None = None,
    full: bool = False,
    datasets: list[str] | None = None,
    epochs: int | None = None,
    max_train_samples: int | None = None,
    device: str = "auto",
    batch_size: int = 1024,
    methods: list[str] | None = None,
    method_params: dict[str, dict[str, Any]] | None = None,
    run_name: str | None = None,
    publish_artifacts: bool = True,
    workers: int = 0,
    dask_address: str | None = None,
    threads_per_task: int | None = None,
    fast: bool = False,
) -> PipelineResult:
    """The whole benchmark over a suite's datasets × backbones × seeds, then one report.

    Parameters
    ----------
    suite : str, default "fmnist"
        Benchmark suite; its datasets are all run unless ``datasets`` picks some.
    backbones : list of str, optional
        Backbone keys (``mlp``, ``lenet``, ``resnet``); default all.
    seeds : int or list of int, optional
        Seed count or explicit seeds; default 1 (3 with ``full``).
    refresh : list of str, optional
        Stages to re-run with everything downstream (``download``, ``train``, ``extract``,
        ``estimate``, ``report``, ``all``); e.g. ``["estimate"]`` re-runs estimate and report.
    full : bool, default False
        Paper protocol: every backbone and 3 seeds unless given.
    datasets : list of str, optional
        Subset of the suite's datasets.
    epochs : int, optional
        Training epochs; default each backbone's recipe.
    max_train_samples : int, optional
        Cap on training samples (quick runs).
    device : str, default "auto"
        Torch device for training and extraction.
    batch_size : int, default 1024
        Inference batch size when extracting logits.
    methods : list of str, optional
        Estimators; default all registered.
    method_params : dict, optional
        Hyper-parameters per method.
    run_name : str, optional
        Report name; default the suite.
    publish_artifacts : bool, default True
        Publish the report as Prefect artifacts.
    workers : int, default 0
        0: sequential, in this process. N: a local Dask cluster of N worker processes.
    dask_address : str, optional
        An existing Dask scheduler (``tcp://host:8786``) instead of a local cluster.
    threads_per_task : int, optional
        Torch/BLAS threads per task; default 2 in the reproducible mode, else the cores divided
        among the workers.
    fast : bool, default False
        Turn the reproducible mode off (:mod:`tasks.runtime.reproducible`): this CPU's own
        kernels, numbers that differ from another CPU's; ``ALSA_BENCH_REPRODUCIBLE=0`` does
        the same.

    Returns
    -------
    PipelineResult

    Notes
    -----
    The parameters are :class:`tasks.plan.RunOptions`' flow fields, with the same names and
    defaults (``tests/flows/test_options.py`` holds them to it).
    """
    given = dict(locals(), suite=[suite])  # the parameters: RunOptions' flow fields, by name
    options = RunOptions(**{f.name: given[f.name] for f in run_option_fields(flow=True)})
    plan = make_plan(suite, datasets=datasets, backbones=backbones, seeds=seeds, full=full)
    return run_pipeline(plan, options, until="report")


def print_report(report: ReportRef | None) -> None:
    """Print a report's MAE table (``mae.txt``) and where the report lies."""
    if report is None:
        return
    table = Path(report.folder) / "mae.txt"
    if table.is_file():
        print(table.read_text(encoding="utf-8"))
    print(f"Report: {Path(report.folder) / 'report.md'}")


if __name__ == "__main__":
    outcome = benchmark(suite="fmnist", backbones=["lenet"], seeds=1)
    print_report(outcome.report)
