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
(:mod:`tasks.threads`), so both layouts compute identical numbers. Every stage is cached across runs, so a second run with the same parameters
finishes in seconds; ``refresh`` re-runs a stage and everything downstream of it.

The stage flows (``flows/download.py`` ... ``flows/report.py``) call :func:`run_pipeline` with
``until`` set to their stage, so each can be launched alone with the same parameters.

Run it with ``alsa-bench run`` or ``python -m flows.benchmark``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import time
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
from tasks.refs import CheckpointRef, DatasetRef, EstimatesRef, LogitsRef, ReportRef
from tasks.stages import (
    STAGES,
    StageOutcome,
    discard_damaged_record,
    download_task,
    estimate_task,
    extract_task,
    ingest_result,
    output_exists,
    parse_refresh,
    prepare_splits_task,
    report_fingerprint,
    report_task,
    result_intact,
    run_stage,
    seeds_list,
    train_task,
)
from tasks.threads import default_threads_per_task
from tasks.versions import stage_code_version

#: Seeds of a ``full`` benchmark when none are given (the paper averages over three).
FULL_SEEDS: int = 3


@dataclass(frozen=True)
class BenchmarkPlan:
    """What a pipeline run covers, validated: the suite's datasets × backbones × seeds.

    Attributes
    ----------
    suite : str
        Suite name.
    datasets : tuple of str
        Dataset keys of the suite to run.
    backbones : tuple of str
        Backbone keys.
    seeds : tuple of int
        Training seeds.
    """

    suite: str
    datasets: tuple[str, ...]
    backbones: tuple[str, ...]
    seeds: tuple[int, ...]

    def backbones_of(self, dataset: str) -> tuple[str, ...]:
        """The plan's backbones that apply to ``dataset`` (:meth:`DatasetSpec.applies`)."""
        from tasks.datasets import get_dataset_spec

        spec = get_dataset_spec(dataset)
        return tuple(b for b in self.backbones if spec.applies(b))

    @property
    def run_keys(self) -> list[str]:
        """Run keys ``"{dataset}.{backbone}.s{seed}"`` in execution order."""
        return [
            f"{d}.{b}.s{s}" for d in self.datasets for b in self.backbones_of(d)
            for s in self.seeds
        ]


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
    report : ReportRef or None
        The report, when the pipeline ran until ``report``.
    """

    plan: BenchmarkPlan
    outcomes: list[StageOutcome] = field(default_factory=list)
    datasets: list[DatasetRef] = field(default_factory=list)
    checkpoints: list[CheckpointRef] = field(default_factory=list)
    logits: list[LogitsRef] = field(default_factory=list)
    estimates: list[EstimatesRef] = field(default_factory=list)
    report: ReportRef | None = None

    def summary(self) -> dict[str, dict[str, int]]:
        """Per stage, how many task calls ran and how many came from the cache."""
        out: dict[str, dict[str, int]] = {}
        for o in self.outcomes:
            counts = out.setdefault(o.stage, {"ran": 0, "cached": 0})
            counts["cached" if o.cached else "ran"] += 1
        return out


def suite_datasets(suite: str) -> tuple[str, ...]:
    """Dataset keys of a suite, in registry order.

    Raises
    ------
    ValueError
        If no dataset belongs to ``suite`` (the message lists the suites).
    """
    from tasks.datasets import DATASETS, available_suites

    names = tuple(name for name, spec in DATASETS.items() if spec.suite == suite)
    if not names:
        raise ValueError(f"suite must be one of {', '.join(available_suites())}; got {suite!r}.")
    return names


def suite_modality(suite: str) -> str:
    """The modality of a suite's datasets (a suite never mixes modalities).

    Raises
    ------
    ValueError
        If the suite is unknown or its datasets disagree.
    """
    from tasks.datasets import get_dataset_spec

    modalities = {get_dataset_spec(d).modality for d in suite_datasets(suite)}
    if len(modalities) != 1:
        raise ValueError(f"suite {suite!r} mixes modalities {sorted(modalities)}.")
    return modalities.pop()


def offline_suites() -> tuple[str, ...]:
    """Suites whose every dataset installs offline (``make bench``'s default), registry order."""
    from tasks.datasets import DATASETS, available_suites

    return tuple(
        s for s in available_suites()
        if all(not spec.online for spec in DATASETS.values() if spec.suite == s)
    )


def make_plan(
    suite: str,
    *,
    datasets: Sequence[str] | None = None,
    backbones: Sequence[str] | None = None,
    seeds: int | Sequence[int] | None = None,
    full: bool = False,
) -> BenchmarkPlan:
    """Validate a benchmark's selection and fill in the defaults.

    Parameters
    ----------
    suite : str
        Suite name (datasets register under one, e.g. ``"fmnist"``, ``"graph"``).
    datasets : sequence of str, optional
        A subset of the suite's datasets; default all of them.
    backbones : sequence of str, optional
        Backbone keys; each must accept the suite's modality. Default every registered backbone
        that does (``mlp``, ``lenet``, ``resnet`` for images; ``gcn``, ``sage``, ``gat``,
        ``gin`` for graphs).
    seeds : int or sequence of int, optional
        A count (``3`` → seeds 0, 1, 2) or explicit seeds; default 1, or
        :data:`FULL_SEEDS` when ``full``.
    full : bool, default False
        The paper's protocol: every backbone and :data:`FULL_SEEDS` seeds unless given.

    Returns
    -------
    BenchmarkPlan

    Raises
    ------
    ValueError
        If the suite, a dataset or a backbone is unknown, a backbone does not take the suite's
        modality, a name repeats, or the seeds are invalid; the message lists the valid values.
    """
    from tasks.backbones import available_backbones, check_backbone
    from tasks.datasets import get_dataset_spec

    suite_names = suite_datasets(suite)
    modality = suite_modality(suite)
    if datasets is None:
        chosen = suite_names
    else:
        chosen = tuple(_unique(datasets, "datasets"))
        unknown = [d for d in chosen if d not in suite_names]
        if unknown or not chosen:
            raise ValueError(
                f"datasets must be from suite {suite!r} ({', '.join(suite_names)}); "
                f"got {list(datasets)!r}."
            )
    specs = [get_dataset_spec(d) for d in chosen]
    if backbones is None or len(backbones) == 0:
        chosen_b = tuple(
            b for b in available_backbones(modality) if any(s.applies(b) for s in specs)
        )
    else:
        chosen_b = tuple(_unique(backbones, "backbones"))
        valid = available_backbones()
        unknown = [b for b in chosen_b if b not in valid]
        if unknown:
            raise ValueError(
                f"backbone must be one of {', '.join(valid)}; got "
                f"{', '.join(map(repr, unknown))}."
            )
        for name in chosen_b:
            check_backbone(name, modality, chosen[0])
            if not any(s.applies(name) for s in specs):
                takes = sorted({b for s in specs for b in available_backbones(modality)
                                if s.applies(b)})
                raise ValueError(
                    f"backbone {name!r} does not apply to dataset(s) {', '.join(chosen)} "
                    f"(they take {', '.join(takes)})."
                )
    seed_values = seeds_list(seeds if seeds is not None else (FULL_SEEDS if full else 1))
    return BenchmarkPlan(suite=suite, datasets=chosen, backbones=chosen_b, seeds=tuple(seed_values))


def make_plans(
    suites: Sequence[str] | None = None,
    *,
    datasets: Sequence[str] | None = None,
    backbones: Sequence[str] | None = None,
    seeds: int | Sequence[int] | None = None,
    full: bool = False,
) -> list[BenchmarkPlan]:
    """Plans for several suites at once (the CLI's repeatable ``--suite``).

    With no suites, every offline suite (:func:`offline_suites`) is a candidate; then explicit
    ``backbones`` and ``datasets`` pick the suites they belong to (``--backbone gat`` alone
    runs the graph suite). With explicit suites every given backbone must fit some suite and
    every suite must get one; each suite keeps the given backbones of its modality.

    Raises
    ------
    ValueError
        As :func:`make_plan`, and when a backbone or dataset fits none of the suites.
    """
    from tasks.backbones import available_backbones, get_backbone_spec
    from tasks.datasets import get_dataset_spec

    explicit = suites is not None and len(suites) > 0
    chosen = list(_unique(suites, "suites")) if explicit else list(offline_suites())
    for s in chosen:
        suite_datasets(s)
    if datasets:
        wanted = {get_dataset_spec(d).suite for d in datasets}
        if explicit:
            stray = [d for d in datasets if get_dataset_spec(d).suite not in chosen]
            if stray:
                raise ValueError(
                    f"datasets must belong to the chosen suites ({', '.join(chosen)}); got "
                    f"{', '.join(map(repr, stray))}."
                )
        if explicit:
            idle = [s for s in chosen if s not in wanted]
            if idle:
                raise ValueError(
                    f"suite {idle[0]!r} was chosen, but none of the datasets "
                    f"{', '.join(datasets)} belongs to it; drop the suite or add one of "
                    f"{', '.join(suite_datasets(idle[0]))}."
                )
        else:
            chosen = sorted(wanted, key=lambda s: (s not in chosen, s))
    per_suite: dict[str, list[str] | None] = {s: None for s in chosen}
    if backbones:
        names = _unique(backbones, "backbones")
        for name in names:
            get_backbone_spec(name)
        fits = {s: [b for b in names if get_backbone_spec(b).accepts(suite_modality(s))]
                for s in chosen}
        orphans = [b for b in names if not any(b in f for f in fits.values())]
        if orphans:
            b = orphans[0]
            raise ValueError(
                f"backbone {b!r} takes {'/'.join(get_backbone_spec(b).modalities)} inputs, but "
                f"the suites {', '.join(chosen)} are "
                f"{'/'.join(sorted({suite_modality(s) for s in chosen}))}; choose from "
                + "; ".join(f"{s}: {', '.join(available_backbones(suite_modality(s)))}"
                            for s in chosen) + "."
            )
        if explicit or datasets:
            empty = [s for s in chosen if not fits[s]]
            if empty:
                s = empty[0]
                raise ValueError(
                    f"suite {s!r} is {suite_modality(s)}, and none of the backbones "
                    f"{', '.join(names)} takes {suite_modality(s)} inputs; add one of "
                    f"{', '.join(available_backbones(suite_modality(s)))}."
                )
        chosen = [s for s in chosen if fits[s]]
        per_suite = {s: fits[s] for s in chosen}
    plans = []
    for s in chosen:
        subset = [d for d in datasets if get_dataset_spec(d).suite == s] if datasets else None
        plans.append(make_plan(s, datasets=subset, backbones=per_suite[s], seeds=seeds, full=full))
    return plans


def plan_methods(plan: BenchmarkPlan, methods: Sequence[str] | None) -> list[str] | None:
    """The methods to run on a plan: model-aware ones (GNNEvaluator) only where they apply.

    Parameters
    ----------
    plan : BenchmarkPlan
        One suite's plan.
    methods : sequence of str or None
        The methods asked for (``--method``); None means every method, and the estimate stage
        then picks the model-aware ones that fit each run.

    Returns
    -------
    list of str or None

    Raises
    ------
    ValueError
        If none of the methods applies to the plan's modality.
    """
    if methods is None:
        return None
    from tasks.model_aware import MODEL_AWARE_METHODS

    modality = suite_modality(plan.suite)
    kept = [m for m in methods
            if m not in MODEL_AWARE_METHODS or modality in MODEL_AWARE_METHODS[m]]
    if not kept:
        raise ValueError(
            f"none of the methods {', '.join(methods)} applies to suite {plan.suite!r} "
            f"({modality}): {', '.join(methods)} needs a "
            f"{'/'.join(sorted({x for m in methods for x in MODEL_AWARE_METHODS.get(m, ())}))} "
            f"run; add a logit method or drop the suite."
        )
    return kept


def _unique(values: Sequence[str], name: str) -> list[str]:
    if isinstance(values, str):
        raise ValueError(f"{name} must be a list of names, not one string; got {values!r}.")
    out = list(values)
    repeated = sorted({v for v in out if out.count(v) > 1})
    if repeated:
        raise ValueError(f"{name} must not repeat a name; got {repeated} more than once.")
    return out


def run_pipeline(
    plan: BenchmarkPlan,
    *,
    until: str = "report",
    refresh: Sequence[str] | str | None = None,
    epochs: int | None = None,
    max_train_samples: int | None = None,
    device: str = "auto",
    batch_size: int = 1024,
    methods: Sequence[str] | None = None,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    run_name: str | None = None,
    publish_artifacts: bool = True,
    workers: int = 0,
    dask_address: str | None = None,
    threads_per_task: int | None = None,
) -> PipelineResult:
    """Run the stages of ``plan`` up to ``until`` inside the calling flow.

    Parameters
    ----------
    plan : BenchmarkPlan
        From :func:`make_plan`.
    until : {"download", "train", "extract", "estimate", "report"}, default "report"
        Last stage to run.
    refresh : str or sequence of str, optional
        Stages to re-run (with everything downstream), or ``"all"``.
    epochs : int, optional
        Training epochs; default each backbone's recipe.
    max_train_samples : int, optional
        Cap on training samples (small, fast runs); default all.
    device : str, default "auto"
        Torch device for training and extraction.
    batch_size : int, default 1024
        Inference batch size of the extract stage.
    methods : sequence of str, optional
        Estimators to run; default every registered one.
    method_params : mapping, optional
        Hyper-parameters per method, e.g. ``{"alsa-g": {"n_anchors": 200}}``.
    run_name : str, optional
        Report name (folder ``reports/<run_name>/``); default the suite name.
    publish_artifacts : bool, default True
        Publish the report as Prefect artifacts.
    workers : int, default 0
        0: every task runs in this process (sequential). N > 0: train, extract and estimate
        run on a local Dask cluster of N single-threaded worker processes.
    dask_address : str, optional
        Address of an existing Dask scheduler (``tcp://host:8786``) to run them on instead.
    threads_per_task : int, optional
        Torch/BLAS threads of each task; default
        :func:`tasks.threads.default_threads_per_task` of ``workers``. The same value gives the
        same numbers in both layouts.

    Returns
    -------
    PipelineResult

    Raises
    ------
    ValueError
        If ``until`` or a ``refresh`` name is not a stage, or the layout is invalid.
    """
    if until not in STAGES:
        raise ValueError(f"until must be one of {', '.join(STAGES)}; got {until!r}.")
    distributed = is_distributed(workers, dask_address)
    threads = default_threads_per_task(workers) if threads_per_task is None else threads_per_task
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads_per_task must be an integer >= 1; got {threads_per_task!r}.")
    if distributed and last_stage_needs_runs(until):
        from tasks.train import resolve_device

        gpu = resolve_device(device).type == "cuda"
        runner = build_task_runner(workers, dask_address, gpu=gpu)
        inner = pipeline_flow.with_options(task_runner=runner)
        with shared_api_url():
            return inner(
                plan, until=until, refresh=refresh, epochs=epochs,
                max_train_samples=max_train_samples, device=device, batch_size=batch_size,
                methods=methods, method_params=method_params, run_name=run_name,
                publish_artifacts=publish_artifacts, threads=threads, distributed=True, gpu=gpu,
            )
    return _pipeline(
        plan, until=until, refresh=refresh, epochs=epochs, max_train_samples=max_train_samples,
        device=device, batch_size=batch_size, methods=methods, method_params=method_params,
        run_name=run_name, publish_artifacts=publish_artifacts, threads=threads,
        distributed=False, gpu=False,
    )


def last_stage_needs_runs(until: str) -> bool:
    """Whether the pipeline reaches ``train`` (the first stage a Dask cluster helps with)."""
    return STAGES.index(until) >= STAGES.index("train")


@flow(name="benchmark-dask", description="train → extract → estimate on Dask workers, one writer")
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
    threads: int,
    distributed: bool,
    gpu: bool,
) -> PipelineResult:
    """The pipeline as a subflow, so it can run under a ``DaskTaskRunner`` (:func:`run_pipeline`)."""
    return _pipeline(
        plan, until=until, refresh=refresh, epochs=epochs, max_train_samples=max_train_samples,
        device=device, batch_size=batch_size, methods=methods, method_params=method_params,
        run_name=run_name, publish_artifacts=publish_artifacts, threads=threads,
        distributed=distributed, gpu=gpu,
    )


def _pipeline(
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
    threads: int,
    distributed: bool,
    gpu: bool,
) -> PipelineResult:
    """The body of :func:`run_pipeline` in the flow that runs it."""
    fresh = parse_refresh(refresh)
    last = STAGES.index(until)
    logger = get_run_logger()
    result = PipelineResult(plan=plan)
    versions = {stage: stage_code_version(stage) for stage in STAGES[: last + 1]}
    per_dataset = {
        d: {s: stage_code_version(s, dataset=d)
            for s in ("download", "train", "extract", "estimate")}
        for d in plan.datasets
    }
    db = str(db_path().resolve())
    results = str(results_root(db=db).resolve())
    methods_list = plan_methods(plan, methods)
    params = {
        m: dict(p) for m, p in (method_params or {}).items()
        if methods_list is None or m in methods_list
    } or None
    logger.info(
        "Pipeline %s until %s: datasets %s, backbones %s, seeds %s, refresh %s",
        plan.suite, until, list(plan.datasets), list(plan.backbones), list(plan.seeds),
        sorted(fresh) or "none",
    )
    logger.info(
        "Layout: %s, %d thread(s) per task, results under %s",
        "Dask workers" if distributed else "sequential", threads, results,
    )

    def note(ref: Any, outcome: StageOutcome) -> Any:
        result.outcomes.append(outcome)
        logger.info("%-8s %-28s %s in %.2f s%s", outcome.stage, outcome.key, outcome.state,
                    outcome.seconds, " (output was missing: re-ran)" if outcome.healed else "")
        return ref

    jobs: list[_RunJob] = []
    for dataset in plan.datasets:
        ds = note(*run_stage(
            download_task, "download", fresh, dataset, str(data_dir().resolve()),
            per_dataset[dataset]["download"], key=dataset, check=output_exists,
        ))
        result.datasets.append(ds)
        if last < STAGES.index("train"):
            continue
        for backbone in plan.backbones_of(dataset):
            for seed in plan.seeds:
                v = per_dataset[dataset]
                jobs.append(_RunJob(
                    run_key=f"{dataset}.{backbone}.s{seed}",
                    train_args=(ds, backbone, seed, epochs, max_train_samples, device,
                                str(checkpoint_dir().resolve()), v["train"]),
                    extract_args=(plan.suite, db, device, batch_size, v["extract"], results),
                    estimate_args=(methods_list, params, v["estimate"]),
                ))
    run_jobs = _run_distributed if distributed else _run_sequential
    run_jobs(jobs, result, note, fresh, last, threads, gpu)

    if last == STAGES.index("report"):
        name = run_name or plan.suite
        run_keys = [e.run_key for e in result.estimates]
        fingerprint = report_fingerprint(result.estimates, run_keys, methods_list)
        result.report = note(*run_stage(
            report_task, "report", fresh, fingerprint, run_keys, db,
            str(reports_dir().resolve()), name, methods_list, publish_artifacts,
            versions["report"], key=name,
            check=lambda ref: output_exists(ref, fingerprint=fingerprint),
        ))
    summary = ", ".join(f"{s}: {c['ran']} ran, {c['cached']} cached"
                        for s, c in result.summary().items())
    logger.info("Pipeline done: %s", summary)
    return result


@dataclass(frozen=True)
class _RunJob:
    """One run's stage arguments (without the upstream references and the thread pin)."""

    run_key: str
    train_args: tuple[Any, ...]
    extract_args: tuple[Any, ...]
    estimate_args: tuple[Any, ...]


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
            train_task, "train", fresh, *job.train_args, threads=threads, key=job.run_key,
            check=output_exists,
        ))
        result.checkpoints.append(ckpt)
        if last < STAGES.index("extract"):
            continue
        logits = note(*run_stage(
            extract_task, "extract", fresh, ckpt, *job.extract_args, threads=threads,
            key=job.run_key, check=result_intact, ingest=ingest_result,
        ))
        result.logits.append(logits)
        if last < STAGES.index("estimate"):
            continue
        est = note(*run_stage(
            estimate_task, "estimate", fresh, replace(logits, digest=""), *job.estimate_args,
            ckpt, threads=threads, key=job.run_key, check=result_intact, ingest=ingest_result,
        ))
        result.estimates.append(est)


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

    from tasks.faults import kill_point

    def runner(stage_task: Any, stage: str) -> Any:
        return stage_task.with_options(refresh_cache=True) if stage in fresh else stage_task

    trains, extracts, estimates = {}, {}, {}
    prepared: dict[str, Any] = {}  # one split generation per dataset, before its extracts
    started: dict[str, float] = {}
    for job in jobs:
        dataset_ref = job.train_args[0]
        if last >= STAGES.index("extract") and dataset_ref.name not in prepared:
            prepared[dataset_ref.name] = prepare_splits_task.submit(dataset_ref, threads=threads)
        started[job.run_key] = time.perf_counter()
        kill_point("train")
        if "train" not in fresh:  # extract/estimate inputs are futures: Prefect's silent miss
            discard_damaged_record(train_task, job.train_args, {"threads": threads},
                                   key=job.run_key)
        with gpu_annotation(gpu):
            trains[job.run_key] = runner(train_task, "train").submit(
                *job.train_args, threads=threads
            )
            if last >= STAGES.index("extract"):
                kill_point("extract")
                extracts[job.run_key] = runner(extract_task, "extract").submit(
                    trains[job.run_key], *job.extract_args, threads=threads,
                    wait_for=[prepared[dataset_ref.name]],
                )
        if last >= STAGES.index("estimate"):
            kill_point("estimate")
            estimates[job.run_key] = runner(estimate_task, "estimate").submit(
                extracts[job.run_key], *job.estimate_args, trains[job.run_key], threads=threads
            )
    by_key = {job.run_key: job for job in jobs}
    ckpts: dict[str, CheckpointRef] = {}
    published: dict[str, LogitsRef] = {}

    def outcome(stage: str, key: str, future: Any, healed: bool = False) -> StageOutcome:
        return StageOutcome(stage=stage, key=key, state=str(future.state.name),
                            seconds=time.perf_counter() - started[key], healed=healed)

    for future in as_completed(list(trains.values())):
        key = next(k for k, f in trains.items() if f is future)
        ckpts[key] = note(future.result(), outcome("train", key, future))
        kill_point("train", "end")
    result.checkpoints.extend(ckpts[j.run_key] for j in jobs)

    for future in as_completed(list(extracts.values())):
        key = next(k for k, f in extracts.items() if f is future)
        ref, healed = _settled(future, extract_task, (ckpts[key], *by_key[key].extract_args),
                               threads, gpu)
        published[key] = ref
        note(ref, outcome("extract", key, future, healed))
        result.logits.append(ingest_result(ref))
        kill_point("extract", "end")
    result.logits.sort(key=lambda r: list(by_key).index(r.run_key))

    for future in as_completed(list(estimates.values())):
        key = next(k for k, f in estimates.items() if f is future)
        args = (published[key], *by_key[key].estimate_args, ckpts[key])
        ref, healed = _settled(future, estimate_task, args, threads, False)
        note(ref, outcome("estimate", key, future, healed))
        result.estimates.append(ingest_result(ref))
        kill_point("estimate", "end")
    result.estimates.sort(key=lambda r: list(by_key).index(r.run_key))


def _settled(
    future: Any, stage_task: Any, args: tuple[Any, ...], threads: int, gpu: bool
) -> tuple[Any, bool]:
    """A finished publishing future's reference; re-run (cache refreshed) if its file is gone.

    An estimate whose upstream logits file was missing fails; it is re-run too, on the healed
    logits. Any other failure of the re-run is raised.
    """
    try:  # wait for the result itself: the future's state as the API reports it may lag
        ref = future.result()
    except Exception:  # a failed task (an estimate whose logits file went missing): re-run
        ref = None
    if ref is not None and result_intact(ref):
        return ref, False
    with gpu_annotation(gpu):
        retry = stage_task.with_options(refresh_cache=True).submit(*args, threads=threads)
    ref = retry.result()
    if not result_intact(ref):
        raise RuntimeError(f"Stage {stage_task.name!r} finished but its output is missing: {ref!r}.")
    return ref, True


@flow(name="benchmark", description="download → train → extract → estimate → report over a suite")
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
        Torch/BLAS threads per task; default the cores divided among the workers.

    Returns
    -------
    PipelineResult
    """
    plan = make_plan(suite, datasets=datasets, backbones=backbones, seeds=seeds, full=full)
    return run_pipeline(
        plan, until="report", refresh=refresh, epochs=epochs, max_train_samples=max_train_samples,
        device=device, batch_size=batch_size, methods=methods, method_params=method_params,
        run_name=run_name, publish_artifacts=publish_artifacts, workers=workers,
        dask_address=dask_address, threads_per_task=threads_per_task,
    )


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
