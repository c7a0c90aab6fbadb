"""What a benchmark run covers and with which options, validated before anything runs.

Two things live here, both plain Python (no Prefect, no torch: the CLI's fast-fail path imports
this module before either):

* :class:`RunOptions`: every option of ``alsa-bench run`` once, with its default and its help
  line (field metadata). The CLI builds its ``run`` options from it, the flows pass it around
  whole, and ``tests/flows/test_options.py`` holds the Prefect flows' parameters and
  ``prefect.yaml`` to it, so a new option is one field.
* :class:`BenchmarkPlan` and :func:`make_plan` / :func:`make_plans`: which suites, datasets,
  backbones and seeds a run covers (registry look-ups and every check of the selection).

:mod:`flows.benchmark` only sequences the stages of a plan.

Examples
--------
>>> RunOptions().device, RunOptions().workers
('auto', 0)
>>> seeds_list(3)
[0, 1, 2]
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from tasks.data.datasets import SUITE_GROUPS, default_suites, group_suites
from tasks.methods import methods_for_modality
from tasks.runtime.reproducible import MODE_ENV, PINNED_THREADS
from tasks.stages.versions import REFRESH_ALL, STAGES, parse_refresh

__all__ = [
    "FULL_SEEDS",
    "PIPELINE_OPTIONS",
    "BenchmarkPlan",
    "RunOptions",
    "SUITE_GROUPS",
    "check_until",
    "default_suites",
    "expand_suites",
    "group_suites",
    "last_stage_needs_runs",
    "make_plan",
    "make_plans",
    "offline_suites",
    "plan_methods",
    "resolve_threads",
    "run_option_fields",
    "seeds_list",
    "suite_datasets",
    "suite_modality",
]

#: Seeds of a ``full`` benchmark when none are given (the paper averages over three).
FULL_SEEDS: Final[int] = 3


# ------------------------------------------------------------------------------------ suites
def suite_datasets(suite: str) -> tuple[str, ...]:
    """Dataset keys of a suite, in registry order.

    Raises
    ------
    ValueError
        If no dataset belongs to ``suite`` (the message lists the suites and the groups).
    """
    from tasks.data.datasets import DATASETS, available_suites

    names = tuple(name for name, spec in DATASETS.items() if spec.suite == suite)
    if not names:
        groups = f"; or a group: {', '.join(SUITE_GROUPS)}" if SUITE_GROUPS else ""
        raise ValueError(
            f"suite must be one of {', '.join(available_suites())}{groups}; got {suite!r}."
        )
    return names


def suite_modality(suite: str) -> str:
    """The modality of a suite's datasets (a suite never mixes modalities; a group may).

    Raises
    ------
    ValueError
        If the suite is unknown or its datasets disagree.
    """
    from tasks.data.datasets import get_dataset_spec

    modalities = {get_dataset_spec(d).modality for d in suite_datasets(suite)}
    if len(modalities) != 1:
        raise ValueError(f"suite {suite!r} mixes modalities {sorted(modalities)}.")
    return modalities.pop()


def expand_suites(suites: Sequence[str]) -> list[str]:
    """``suites`` with every group replaced by its suites (:func:`group_suites`), in order,
    each suite once; names that are not groups are kept as given (checked later)."""
    out: list[str] = []
    for name in suites:
        out.extend(group_suites(name) if name in SUITE_GROUPS else (name,))
    return list(dict.fromkeys(out))


def offline_suites() -> tuple[str, ...]:
    """The default benchmark's suites (:func:`default_suites`; the name is kept for callers):
    every dataset offline, none kept out of the default like the zoo."""
    return default_suites()


def _suite_help() -> str:
    from tasks.data.datasets import available_suites

    offline = default_suites()
    default = ", ".join(offline[:-1]) + " and " + offline[-1] if len(offline) > 1 else offline[0]
    groups = "".join(f"; {g} runs every {g}-* suite ({what})" for g, what in SUITE_GROUPS.items())
    return (f"Benchmark suite (repeatable): {', '.join(available_suites())}{groups}; default "
            f"every offline suite ({default}).")


# ------------------------------------------------------------------------------------ options
def _option(
    default: Any, help: str, *cli: str, flow: bool = True, flow_default: Any = MISSING,
    **typer: Any,
) -> Any:
    """A :class:`RunOptions` field: its default, help line, command-line flags (none: not on the
    command line), whether the ``benchmark`` flow takes it (same name), the flow's default where
    it differs, and extra Typer settings (``min``, ``metavar``)."""
    meta = {"help": help, "cli": tuple(cli), "flow": flow, "typer": typer}
    if flow_default is not MISSING:
        meta["flow_default"] = flow_default
    return field(default=default, metadata=meta)


_CORES_NOTE = ("Sequential and Dask runs with the same value compute the same numbers.")


@dataclass(frozen=True)
class RunOptions:
    """Every option of ``alsa-bench run`` (and of the ``benchmark`` flow), with its default.

    Field names are the ``benchmark`` flow's parameter names; each field's metadata holds its
    help line (``help``), its command-line flags (``cli``; empty for options only the Python
    API has), whether the flow takes it (``flow``) and the flow's own default where it differs
    (``flow_default``: the flow runs one suite, ``fmnist`` by default). Values are kept as
    given; :meth:`flow_kwargs` turns them into one suite's ``benchmark`` arguments.
    """

    suite: Sequence[str] | None = _option(None, _suite_help(), "--suite", "-s",
                                          flow_default="fmnist")
    backbones: Sequence[str] | None = _option(
        None, "Backbone (repeatable); default all.", "--backbone", "-b")
    seed: Sequence[int] | None = _option(
        None, "Training seed (repeatable).", "--seed", flow=False)
    seeds: int | Sequence[int] | None = _option(
        None, "Number of seeds: 0 .. N-1 (default 1; 3 with --full).", "--seeds")
    refresh: Sequence[str] | str | None = _option(
        None, "Re-run a stage and everything after it (repeatable): "
        f"{'|'.join((*STAGES, REFRESH_ALL))}.", "--refresh")
    full: bool = _option(False, "Paper protocol: every backbone, 3 seeds.", "--full")
    datasets: Sequence[str] | None = _option(
        None, "Dataset of the suite (repeatable); default all.", "--dataset", "-d")
    methods: Sequence[str] | None = _option(
        None, "Estimator (repeatable); default all registered.", "--method", "-m")
    method_params: Mapping[str, Mapping[str, Any]] | None = _option(
        None, "Hyper-parameter of one method, e.g. alsa-g.alpha=0.9 (JSON values; repeatable); "
        "part of each estimate's cache key and stored with it.", "--param",
        metavar="METHOD.NAME=VALUE")
    epochs: int | None = _option(
        None, "Training epochs; default each backbone's recipe.", "--epochs", min=1)
    max_train_samples: int | None = _option(
        None, "Cap on training samples (quick runs).", "--max-train-samples", min=1)
    device: str = _option("auto", "Torch device: auto, cpu, cuda, cuda:N.", "--device")
    batch_size: int = _option(1024, "Inference batch size when extracting logits.")
    run_name: str | None = _option(
        None, "Report name: <state>/reports/<run-name>/ (default: the suite).", "--run-name")
    ablations: bool = _option(
        False, "Also run the ALSA ablations (<state>/reports/<run>-ablations/).", "--ablations",
        flow=False)
    publish_artifacts: bool = _option(
        True, "Publish Prefect artifacts.", "--artifacts/--no-artifacts")
    workers: int = _option(
        0, "Run train/extract/estimate on a local Dask cluster of N worker processes "
        "(0: in this process, one task after another).", "--workers", min=0)
    dask_address: str | None = _option(
        None, "Run the tasks on an existing Dask scheduler (dask-jobqueue, Kubernetes, ...).",
        "--dask-address", metavar="tcp://HOST:PORT")
    threads_per_task: int | None = _option(
        None, f"Torch threads of each task (default: {PINNED_THREADS}, the count the shipped "
        f"numbers were computed with; with --fast, CPU cores / workers). {_CORES_NOTE}",
        "--threads-per-task", min=1)
    fast: bool = _option(
        False, "Turn the reproducible mode off: torch, oneDNN, MKL and OpenBLAS pick this CPU's "
        "fastest kernels and threads follow the cores, so numbers differ from another CPU's "
        f"({MODE_ENV}=0 does the same).", "--fast")
    loader_workers: int | None = _option(
        None, "Processes that decode image files during inference (photo datasets; default 0: "
        "in the task's own process). Never changes a number.", "--loader-workers",
        flow=False, min=0)
    wait: float = _option(
        0, "If another alsa-bench command is using the state folder, wait up to this long for "
        "it (0: fail at once).", "--wait", flow=False, metavar="SECONDS", min=0)
    out: Path | None = _option(  # noqa: RUF009 (a field() with metadata)
        None, "Reports folder (default: <state folder>/reports).", "--out", flow=False)

    # -------------------------------------------------------------------------------- checks
    def check_scale_out(self) -> None:
        """``--workers`` and ``--dask-address`` together, or an address without a scheme.

        Raises
        ------
        ValueError
            Naming the command-line flags.
        """
        if self.workers and self.dask_address:
            raise ValueError(
                f"give either --workers (a local cluster) or --dask-address (an existing "
                f"scheduler), not both; got --workers {self.workers} and --dask-address "
                f"{self.dask_address}.")
        if self.dask_address is not None and not re.match(
            r"^[a-z][a-z0-9+]*://[^\s]+$", self.dask_address
        ):
            raise ValueError(
                f"--dask-address must be a scheduler address such as tcp://10.0.0.5:8786; got "
                f"{self.dask_address!r}.")

    def seed_selection(self) -> int | list[int] | None:
        """The seeds to plan: the explicit ``--seed`` values, else the ``--seeds`` count.

        Raises
        ------
        ValueError
            If both are given, or the count is below 1.
        """
        if self.seed and self.seeds is not None:
            raise ValueError(
                f"give either --seed (explicit seeds) or --seeds (a count), not both; got "
                f"--seed {' --seed '.join(map(str, self.seed))} and --seeds {self.seeds}.")
        if isinstance(self.seeds, int) and self.seeds < 1:
            raise ValueError(f"--seeds must be a count >= 1; got {self.seeds}.")
        return list(self.seed) if self.seed else self.seeds

    # ---------------------------------------------------------------------------- conversions
    def flow_kwargs(self, plan: BenchmarkPlan) -> dict[str, Any]:
        """The ``benchmark`` flow's arguments for one suite's ``plan``.

        The selection comes from the plan; ``refresh`` is expanded to the stages it re-runs;
        options left at their default are not passed (the flow's defaults are the same).
        """
        out: dict[str, Any] = {
            "suite": plan.suite, "backbones": list(plan.backbones), "seeds": list(plan.seeds),
            "datasets": list(plan.datasets),
            "refresh": sorted(parse_refresh(self.refresh or None)) or None,
        }
        for f in run_option_fields(flow=True):
            if f.name in out:
                continue
            value = getattr(self, f.name)
            if f.name == "methods" and value is not None:
                value = list(value) or None
            if value != f.default:
                out[f.name] = value
        return out

    def pipeline_kwargs(self) -> dict[str, Any]:
        """The options :func:`flows.benchmark.pipeline_flow` takes, by name."""
        return {name: getattr(self, name) for name in PIPELINE_OPTIONS}


def run_option_fields(*, cli: bool | None = None, flow: bool | None = None) -> list[Field[Any]]:
    """The fields of :class:`RunOptions`, optionally only those on the command line (``cli``)
    or taken by the ``benchmark`` flow (``flow``)."""
    return [
        f for f in fields(RunOptions)
        if (cli is None or bool(f.metadata["cli"]) == cli)
        and (flow is None or f.metadata["flow"] == flow)
    ]


#: The options the pipeline itself uses (:func:`flows.benchmark.pipeline_flow`'s parameters,
#: besides the plan, the last stage and the layout); the rest select the plan or the layout.
PIPELINE_OPTIONS: Final[tuple[str, ...]] = (
    "refresh", "epochs", "max_train_samples", "device", "batch_size", "methods",
    "method_params", "run_name", "publish_artifacts", "fast",
)


# ------------------------------------------------------------------------------------ plans
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
        """The plan's backbones that apply to ``dataset``
        (:func:`tasks.models.backbones.backbones_for`)."""
        from tasks.data.datasets import get_dataset_spec
        from tasks.models.backbones import backbones_for

        applies = backbones_for(get_dataset_spec(dataset))
        return tuple(b for b in self.backbones if b in applies)

    @property
    def run_keys(self) -> list[str]:
        """Run keys ``"{dataset}.{backbone}.s{seed}"`` in execution order."""
        return [
            f"{d}.{b}.s{s}" for d in self.datasets for b in self.backbones_of(d)
            for s in self.seeds
        ]


def seeds_list(seeds: int | Sequence[int]) -> list[int]:
    """Seeds from a count (``3`` → ``[0, 1, 2]``) or an explicit list.

    Raises
    ------
    ValueError
        If the count is below 1, the list is empty, or a seed is negative or repeated.
    """
    if isinstance(seeds, bool):
        raise ValueError(f"seeds must be a count >= 1 or a list of seeds; got {seeds!r}.")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"seeds must be a count >= 1 or a list of seeds; got {seeds}.")
        return list(range(seeds))
    out = [int(s) for s in seeds]
    if not out or any(s < 0 for s in out) or len(set(out)) != len(out):
        raise ValueError(
            f"seeds must be a non-empty list of distinct seeds >= 0; got {list(seeds)!r}."
        )
    return out


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
    from tasks.data.datasets import get_dataset_spec
    from tasks.models.backbones import available_backbones, backbones_for, check_backbone

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
    applying = {b for s in specs for b in backbones_for(s)}
    if backbones is None or len(backbones) == 0:
        chosen_b = tuple(b for b in available_backbones(modality) if b in applying)
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
            if name not in applying:
                takes = sorted(applying)
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

    With no suites, every suite of the default benchmark (:func:`default_suites`) is a
    candidate; then explicit ``backbones`` and ``datasets`` pick the suites they belong to
    (``--backbone gat`` alone runs the graph suite). A group (``zoo``, :data:`SUITE_GROUPS`)
    stands for its suites, which are candidates in the same way: ``--suite zoo --backbone
    gcn`` runs the zoo's graph suites. With explicitly named suites every given backbone must
    fit some suite and every named suite must get one; each suite keeps the given backbones of
    its modality.

    Raises
    ------
    ValueError
        As :func:`make_plan`, and when a backbone or dataset fits none of the suites.
    """
    from tasks.data.datasets import get_dataset_spec
    from tasks.models.backbones import available_backbones, get_backbone_spec

    explicit = suites is not None and len(suites) > 0
    given = _unique(suites, "suites") if explicit else []
    chosen = expand_suites(given) if explicit else list(default_suites())
    named = {s for s in given if s not in SUITE_GROUPS}  # suites named, not through a group
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
            chosen = [s for s in chosen if s in wanted or s in named]
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
            empty = [s for s in chosen if not fits[s] and (s in named or not explicit)]
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
        If a name is unknown or repeated, or none of the methods applies to the plan's
        modality (:func:`tasks.methods.methods_for_modality`).
    """
    if methods is None:
        return None
    return methods_for_modality(methods, suite_modality(plan.suite),
                                where=f"suite {plan.suite!r}")


def _unique(values: Sequence[str], name: str) -> list[str]:
    if isinstance(values, str):
        raise ValueError(f"{name} must be a list of names, not one string; got {values!r}.")
    out = list(values)
    repeated = sorted({v for v in out if out.count(v) > 1})
    if repeated:
        raise ValueError(f"{name} must not repeat a name; got {repeated} more than once.")
    return out


# ------------------------------------------------------------------------------------ pipeline
def check_until(until: str) -> int:
    """The index of the last stage ``until`` in :data:`~tasks.stages.versions.STAGES`.

    Raises
    ------
    ValueError
        If ``until`` is not a stage.
    """
    if until not in STAGES:
        raise ValueError(f"until must be one of {', '.join(STAGES)}; got {until!r}.")
    return STAGES.index(until)


def last_stage_needs_runs(until: str) -> bool:
    """Whether the pipeline reaches ``train`` (the first stage a Dask cluster helps with)."""
    return STAGES.index(until) >= STAGES.index("train")


def resolve_threads(threads_per_task: int | None, workers: int, *,
                    reproducible: bool = False) -> int:
    """Torch/BLAS threads of each task: ``threads_per_task``, or the default of the mode
    (:func:`tasks.runtime.threads.default_threads_per_task`: the reproducible mode's fixed
    count, or the cores divided among the workers).

    Raises
    ------
    ValueError
        If the result is not an integer >= 1.
    """
    from tasks.runtime.threads import default_threads_per_task

    threads = (default_threads_per_task(workers, reproducible=reproducible)
               if threads_per_task is None else threads_per_task)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads_per_task must be an integer >= 1; got {threads_per_task!r}.")
    return threads
