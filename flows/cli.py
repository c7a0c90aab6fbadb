"""The ``alsa-bench`` command line: ``estimate``, ``run``, ``report``, ``datasets``, ``fetch``,
``doctor`` and ``monitor`` (:mod:`flows.monitor_cli`).

``estimate`` (bring your own logits, :mod:`flows.estimate_cli`) never imports Prefect; ``run``
and ``report`` import it inside the command, after :func:`flows.configure_environment` has
pointed its cache at ``$ALSA_BENCH_HOME/prefect-results`` and turned telemetry off. So
``alsa-bench --help`` answers at once.

``run`` and ``report`` first take the state folder (:func:`storage.lock.state_lock`; a folder in
use answers in one line at once, or after ``--wait SECONDS``), then read the whole database
(:func:`storage.db.verify_database`; a damaged file is refused in one line with the remedy and
left as it was), and only then configure and import Prefect. Their Prefect API is a temporary
server of their own (:func:`flows.server.prefect_api`): on a port no other process can hold,
and gone within seconds of the command, ``kill -9`` included; a configured ``PREFECT_API_URL``
is used instead.

User mistakes (an unknown backbone, a bad ``--refresh`` stage, a missing database) print one
line ``error: ...`` on stderr and exit with status 2; failures while running print one line and
exit with status 1. Neither prints a traceback.

Examples
--------
::

    alsa-bench run                                  # default suite, every backbone, seed 0
    alsa-bench run --backbone lenet --seeds 3       # one backbone, seeds 0, 1, 2
    alsa-bench run --refresh estimate               # re-run estimate and report only
    alsa-bench run --suite zoo                      # every zoo-* suite (not in the default)
    alsa-bench report --to-docs                     # docs/BENCHMARK.md from the latest report
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from flows import configure_environment
from flows.calibrate_cli import calibrate_command
from flows.doctor_cli import doctor_command
from flows.estimate_cli import estimate_command
from flows.fetch_cli import datasets_command, fetch_command
from flows.monitor_cli import monitor_command
from storage.errors import StorageError
from tasks.methods import check_method_names
from tasks.plan import RunOptions, run_option_fields
from tasks.stages.versions import STAGES, parse_refresh

app = typer.Typer(
    name="alsa-bench",
    help="Label-free accuracy estimation under distribution shift: ALSA and baselines, "
    "with a Prefect benchmark pipeline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("estimate")(estimate_command)
app.command("fetch")(fetch_command)
app.command("datasets")(datasets_command)
app.command("doctor")(doctor_command)
app.command("calibrate")(calibrate_command)
app.command("monitor")(monitor_command)

T = TypeVar("T")

#: Exit status of a user mistake (bad option value, nothing to report).
EXIT_USAGE = 2
#: Exit status of a failure while running.
EXIT_FAILURE = 1


class UserError(Exception):
    """A mistake in what the user asked for; reported as one line, exit status 2."""


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: <message>`` (first line only) on stderr and exit with ``code``."""
    first = str(message).strip().splitlines()[0] if str(message).strip() else "unknown error"
    typer.echo(f"error: {first}", err=True)
    raise typer.Exit(code)


def _guard(call: Callable[[], T], *, user_errors: tuple[type[BaseException], ...]) -> T:
    """Run ``call``; user errors exit 2, any other exception exits 1, both as one line."""
    try:
        return call()
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except UserError as exc:
        fail(str(exc))
    except user_errors as exc:
        fail(str(exc))
    except Exception as exc:  # a failure inside the pipeline: one line, no traceback
        fail(f"{type(exc).__name__}: {exc}", EXIT_FAILURE)


# ------------------------------------------------------------------------------------------ run
def _run_option(name: str) -> Any:
    """The ``typer.Option`` of :class:`tasks.plan.RunOptions`' field ``name``: its flags, help
    line and Typer settings come from the field's metadata (its default is the field's)."""
    meta = _RUN_FIELDS[name].metadata
    return typer.Option(*meta["cli"], help=meta["help"], **meta["typer"])


_RUN_FIELDS = {f.name: f for f in run_option_fields(cli=True)}
#: The ``run`` options' defaults: RunOptions'.
_RUN_DEFAULTS = {name: f.default for name, f in _RUN_FIELDS.items()}


@app.command("run")
def run_command(
    suite: Annotated[list[str] | None, _run_option("suite")] = _RUN_DEFAULTS["suite"],
    backbones: Annotated[list[str] | None, _run_option("backbones")] = _RUN_DEFAULTS["backbones"],
    seed: Annotated[list[int] | None, _run_option("seed")] = _RUN_DEFAULTS["seed"],
    seeds: Annotated[int | None, _run_option("seeds")] = _RUN_DEFAULTS["seeds"],
    refresh: Annotated[list[str] | None, _run_option("refresh")] = _RUN_DEFAULTS["refresh"],
    full: Annotated[bool, _run_option("full")] = _RUN_DEFAULTS["full"],
    datasets: Annotated[list[str] | None, _run_option("datasets")] = _RUN_DEFAULTS["datasets"],
    methods: Annotated[list[str] | None, _run_option("methods")] = _RUN_DEFAULTS["methods"],
    method_params: Annotated[
        list[str] | None, _run_option("method_params")
    ] = _RUN_DEFAULTS["method_params"],
    epochs: Annotated[int | None, _run_option("epochs")] = _RUN_DEFAULTS["epochs"],
    max_train_samples: Annotated[
        int | None, _run_option("max_train_samples")
    ] = _RUN_DEFAULTS["max_train_samples"],
    device: Annotated[str, _run_option("device")] = _RUN_DEFAULTS["device"],
    run_name: Annotated[str | None, _run_option("run_name")] = _RUN_DEFAULTS["run_name"],
    ablations: Annotated[bool, _run_option("ablations")] = _RUN_DEFAULTS["ablations"],
    publish_artifacts: Annotated[
        bool, _run_option("publish_artifacts")
    ] = _RUN_DEFAULTS["publish_artifacts"],
    workers: Annotated[int, _run_option("workers")] = _RUN_DEFAULTS["workers"],
    dask_address: Annotated[
        str | None, _run_option("dask_address")
    ] = _RUN_DEFAULTS["dask_address"],
    threads_per_task: Annotated[
        int | None, _run_option("threads_per_task")
    ] = _RUN_DEFAULTS["threads_per_task"],
    loader_workers: Annotated[
        int | None, _run_option("loader_workers")
    ] = _RUN_DEFAULTS["loader_workers"],
    wait: Annotated[float, _run_option("wait")] = _RUN_DEFAULTS["wait"],
    out: Annotated[Path | None, _run_option("out")] = _RUN_DEFAULTS["out"],
    fast: Annotated[bool, _run_option("fast")] = _RUN_DEFAULTS["fast"],
) -> None:
    """Run the benchmark: download → train → extract → estimate → report (cached per stage)."""
    given = dict(locals())  # the parameters, named as RunOptions' fields
    options = RunOptions(**{name: given[name] for name in _RUN_FIELDS})
    try:
        refresh_stages = parse_refresh(options.refresh or None)
        options.check_scale_out()
        _apply_compute_mode(options.fast)
    except ValueError as exc:
        fail(str(exc))
    # online data missing: one line, before Prefect or torch is imported (well under a second)
    _guard(lambda: _precheck_online(options.suite or [], options.datasets or []),
           user_errors=(ValueError, FileNotFoundError))
    seed_arg = _guard(options.seed_selection, user_errors=(ValueError,))
    _set_reports_dir(options.out)
    if options.loader_workers is not None:  # read by the image adapter, inherited by Dask workers
        from tasks.runtime.loader import LOADER_WORKERS_ENV

        os.environ[LOADER_WORKERS_ENV] = str(options.loader_workers)
    # the folder is ours, and its database whole, before Prefect is configured or imported: a
    # busy folder or a damaged file answers in one line at once, and nothing is written
    with _state_lock(options.wait, "alsa-bench run"):
        _guard(_check_database, user_errors=(StorageError,))
        configure_environment()
        _plan_and_run(options, refresh_stages, seed_arg)


def _apply_compute_mode(fast: bool) -> None:
    """The run's compute mode in this process's environment before torch computes anything
    (:func:`tasks.runtime.reproducible.apply_environment`); ``--fast`` takes back what importing
    :mod:`flows` set. A bad ``$ALSA_BENCH_REPRODUCIBLE`` is a ValueError (one line)."""
    from tasks.runtime.reproducible import apply_environment, reproducible_by_default

    apply_environment(not fast and reproducible_by_default())


def _plan_and_run(options: RunOptions, refresh_stages: Sequence[str], seed_arg: Any) -> None:
    """The body of ``run`` once the state folder is held and its database checked: make and
    check the plans, then run them against this command's own Prefect API server."""
    from tasks.plan import make_plans, plan_methods

    plans = _guard(
        lambda: make_plans(options.suite or None, datasets=options.datasets or None,
                           backbones=options.backbones or None, seeds=seed_arg,
                           full=options.full),
        user_errors=(ValueError,),
    )
    if options.methods:
        _guard(lambda: check_method_names(options.methods, argument="--method"),
               user_errors=(ValueError,))
    parsed = _guard(lambda: _method_params(options.method_params, options.methods),
                    user_errors=(ValueError,))
    options = replace(options, method_params=parsed)
    if options.methods:
        for plan in plans:
            _guard(lambda plan=plan: plan_methods(plan, options.methods),
                   user_errors=(ValueError,))
    if options.run_name and len(plans) > 1:
        fail(f"--run-name names one report, but {len(plans)} suites were chosen "
             f"({', '.join(p.suite for p in plans)}); give one --suite with it.")
    _guard(lambda: _check_online(plans), user_errors=(ValueError, FileNotFoundError))
    _guard(lambda: _check_data_provenance(plans), user_errors=(ValueError,))
    refreshing = [s for s in STAGES if s in refresh_stages]
    with _prefect_server():
        _run_plans(plans, refreshing, options)


def _run_plans(plans: Sequence[Any], refreshing: Sequence[str], options: RunOptions) -> None:
    """The body of ``run`` once the state folder is ours (``--param`` already parsed)."""
    from flows.benchmark import benchmark, print_report

    from flows.params import auto_param_note

    named = auto_param_note(options.method_params or {}, options.methods or ())
    if named is not None:
        typer.echo(named)
    for plan in plans:
        typer.echo(
            f"alsa-bench run: suite {plan.suite}, datasets {', '.join(plan.datasets)}, "
            f"backbones {', '.join(plan.backbones)}, seeds {', '.join(map(str, plan.seeds))}"
            + (f", refresh {', '.join(refreshing)}" if refreshing else "")
        )
    for plan in plans:
        start = time.perf_counter()
        result = _guard(lambda plan=plan: benchmark(**options.flow_kwargs(plan)), user_errors=())
        elapsed = time.perf_counter() - start
        print_report(result.report)  # a recomputed stage was said when it ran (healing.settle)
        counts = "; ".join(f"{stage} {c['ran']} ran, {c['cached']} cached"
                           for stage, c in result.summary().items())
        typer.echo(f"Suite {plan.suite} finished in {elapsed:.1f} s ({counts}).")
    if len(plans) > 1:  # the trust section needs datasets from several suites (issue 31)
        from tasks.report import trust_summary, write_closing_report

        try:
            closing = write_closing_report([p.suite for p in plans])
        except ValueError as exc:  # the suites' own reports stand; say why this one is missing
            typer.echo(f"Report over every suite: not written ({' '.join(str(exc).split())})")
        else:
            typer.echo(trust_summary(closing))
            typer.echo(f"Report over every suite: {Path(closing.folder) / 'report.md'}")
    if not options.ablations:
        return
    for plan in plans:
        from flows.ablations import ablations as ablations_flow

        abl = _guard(
            lambda plan=plan: ablations_flow(
                suite=plan.suite, backbones=list(plan.backbones), seeds=list(plan.seeds),
                datasets=list(plan.datasets),
                run_name=f"{options.run_name or plan.suite}-ablations",
                publish_artifacts=options.publish_artifacts,
            ),
            user_errors=(),
        )
        print_report(abl)


def _set_reports_dir(out: Path | None) -> None:
    """``--out``: reports go there instead of ``<state folder>/reports``."""
    if out is not None:
        if out.exists() and not out.is_dir():
            fail(f"--out must be a folder for the reports; got {str(out)!r}, which is a file.")
        os.environ["ALSA_BENCH_REPORTS"] = str(out.resolve())


def _state_lock(wait: float, purpose: str) -> Any:
    """Hold the state folder for this command (:func:`storage.lock.state_lock`); a folder in use
    gives one line after ``wait`` seconds."""
    from contextlib import contextmanager

    from storage.lock import state_lock
    from storage.paths import state_dir

    @contextmanager
    def held() -> Any:
        folder = state_dir()
        folder.mkdir(parents=True, exist_ok=True)
        try:
            lock = state_lock(folder, wait=wait, purpose=purpose,
                              on_wait=lambda line: typer.echo(line, err=True))
            held_lock = lock.__enter__()
        except StorageError as exc:
            fail(str(exc), EXIT_FAILURE)
        if held_lock.stale is not None:
            typer.echo(f"note: {folder} was held by {held_lock.stale.describe()}, which died "
                       "without releasing it; taking it over", err=True)
        try:
            yield
        finally:
            lock.__exit__(None, None, None)

    return held()


def _prefect_server() -> Any:
    """This command's own temporary Prefect API server for a ``with`` block
    (:func:`flows.server.prefect_api`: a port nobody else holds, and it dies with this process,
    ``kill -9`` included); a configured ``PREFECT_API_URL`` is used instead. A server that does
    not come up gives one line, exit status 1."""
    from contextlib import ExitStack, contextmanager

    from flows.server import prefect_api

    @contextmanager
    def running() -> Any:
        with ExitStack() as stack:
            _guard(lambda: stack.enter_context(prefect_api()), user_errors=())
            yield

    return running()


def _check_database() -> None:
    """Read the whole database once, before Prefect starts: a damaged block anywhere
    (:func:`storage.db.verify_database`), a file that is not a DuckDB database, or one of a
    newer or unknown schema fails here in one line naming the file and the remedy, and the file
    is left as it was; an older schema is then migrated in place."""
    from storage.db import connect, verify_database
    from storage.paths import db_path

    path = db_path()
    if path.exists():
        verify_database(path)  # read-only: nothing is written to a damaged file
        with connect(path):
            pass


def _require_database() -> None:
    """The database exists (``report`` has nothing to read otherwise): one line if not."""
    from storage.db import connect

    with connect(read_only=True):
        pass


def _precheck_online(suites: Sequence[str], datasets: Sequence[str]) -> None:
    """An online suite named on the command line whose data is not here: one line, at once.

    Reads only the dataset registry (no Prefect, no torch), so ``alsa-bench run --suite cifar10``
    on a machine without CIFAR answers in well under a second; the full check of every plan
    (:func:`_check_online`) follows once the plans are made.
    """
    if not suites:
        return
    from storage.paths import data_dir
    from tasks.data.datasets import DATASETS
    from tasks.plan import expand_suites

    suites = expand_suites(suites)  # a group (--suite zoo) stands for its suites
    for spec in DATASETS.values():
        if spec.suite in suites and spec.online and (not datasets or spec.name in datasets):
            spec.stage(data_dir())


def _method_params(
    options: Sequence[str] | None, methods: Sequence[str] | None
) -> dict[str, dict[str, Any]] | None:
    """``--param`` values parsed and checked like the Python API; None when there are none."""
    from flows.params import check_method_params, parse_param_options

    params = parse_param_options(options or [])
    check_method_params(params, list(methods) if methods else None)
    return params or None


def _check_online(plans: Sequence[Any]) -> None:
    """Fail fast, before Prefect starts, when an online dataset or the pretrained weights a
    backbone loads (DistilBERT; the COT backbones' ImageNet weights) are not on this machine."""
    from storage.paths import data_dir
    from tasks.data.datasets import get_dataset_spec
    from tasks.data.finetune_weights import check_weights as check_imagenet_weights

    for plan in plans:
        for name in plan.datasets:
            spec = get_dataset_spec(name)
            if spec.online:
                spec.stage(data_dir())  # verifies the files; raises one line when missing
            if "distilbert" in plan.backbones_of(name):
                from tasks.models.backbones.distilbert import check_weights

                check_weights()  # one line: what is missing, where it looked, how to get it
            # resnet18-ft, resnet50, vgg11: the weights, or ALSA_BENCH_RANDOM_INIT on generated data
            check_imagenet_weights(plan.backbones_of(name), name, data_dir())


def _check_data_provenance(plans: Sequence[Any]) -> None:
    """Refuse, before Prefect starts, a run that would put results of a generated (synthetic)
    release and of the real one of the same dataset in this state folder
    (:func:`tasks.data.synthetic.check_provenance`); record which kind each dataset's data is."""
    from storage.db import connect
    from storage.paths import data_dir, db_path, state_dir
    from storage.runs import list_runs
    from tasks.data.synthetic import check_provenance

    stored: set[str] = set()
    if db_path().exists():
        with connect(read_only=True) as con:
            stored = {run.dataset for run in list_runs(con)}
    for name in sorted({name for plan in plans for name in plan.datasets}):
        check_provenance(state_dir(), name, data_dir(), has_results=name in stored)


# ------------------------------------------------------------------------------------------ report
@app.command("report")
def report_command(
    run_name: Annotated[
        str | None,
        typer.Option(help="Report name: <state>/reports/<run-name>/ (default: the suites)."),
    ] = None,
    run_key: Annotated[
        list[str] | None,
        typer.Option("--run-key", help="Only this run, e.g. fmnist.lenet.s0 (repeatable)."),
    ] = None,
    method: Annotated[
        list[str] | None, typer.Option("--method", "-m", help="Only this method (repeatable).")
    ] = None,
    to_docs: Annotated[
        bool,
        typer.Option("--to-docs", help="Also write docs/BENCHMARK.md (with commit and machine)."),
    ] = False,
    artifacts: Annotated[
        bool,
        typer.Option(
            "--artifacts/--no-artifacts",
            help="Run as a Prefect flow and publish artifacts (--no-artifacts: no Prefect).",
        ),
    ] = True,
    wait: Annotated[
        float,
        typer.Option(
            "--wait", metavar="SECONDS", min=0,
            help="If another alsa-bench command is using the state folder, wait up to this "
            "long for it (0: fail at once).",
        ),
    ] = 0,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Reports folder (default: <state folder>/reports)."),
    ] = None,
    compare: Annotated[
        Path | None,
        typer.Option(
            "--compare", metavar="REFERENCE",
            help="Instead of writing a report, compare this state folder's numbers with "
            "REFERENCE (a generated BENCHMARK.md or a bench.duckdb): the cells that differ, by "
            "how much and whether within the seeds' spread, the runs that differ and why; the "
            "last line is the verdict.",
        ),
    ] = None,
) -> None:
    """Write <state folder>/reports/<run>/ (tables, plots) from the estimates in DuckDB, or
    compare them with a reference (--compare)."""
    _set_reports_dir(out)
    # as `run`: the folder is held and the database read whole before Prefect is touched
    with _state_lock(wait, "alsa-bench report"):
        _guard(_check_database, user_errors=(StorageError,))
        if compare is not None:
            _guard(_require_database, user_errors=(FileNotFoundError, StorageError))
            typer.echo(_guard(lambda: _compare(compare),
                              user_errors=(ValueError, FileNotFoundError, StorageError)))
            return
        configure_environment()
        _report(run_name, run_key, method, to_docs, artifacts)


def _compare(reference: Path) -> str:
    """``report --compare``: this state folder's database against ``reference``, one screen
    (:mod:`tasks.report.compare`)."""
    from storage.paths import db_path
    from tasks.report.compare import (
        compare,
        format_comparison,
        load_reference,
        reference_from_database,
    )

    ref = load_reference(reference)
    own = reference_from_database(db_path())
    return format_comparison(compare(own, ref))


def _report(
    run_name: str | None, run_key: Sequence[str] | None, method: Sequence[str] | None,
    to_docs: bool, artifacts: bool,
) -> None:
    """The body of ``report`` once the state folder is ours."""
    user_errors = (ValueError, FileNotFoundError, StorageError)
    _guard(_require_database, user_errors=user_errors)  # no database: one line, no server
    if artifacts:
        from flows.report import report as report_flow

        with _prefect_server():
            ref = _guard(
                lambda: report_flow(run_name=run_name,
                                    run_keys=list(run_key) if run_key else None,
                                    methods=list(method) if method else None),
                user_errors=user_errors,
            )
    else:
        from tasks.report import write_report

        ref = _guard(
            lambda: write_report(run_name=run_name, publish_artifacts=False,
                                 run_keys=list(run_key) if run_key else None,
                                 methods=list(method) if method else None),
            user_errors=user_errors,
        )
    from flows.benchmark import print_report

    print_report(ref)
    if to_docs:
        from tasks.report.benchmark_doc import write_benchmark_doc

        target = _guard(lambda: write_benchmark_doc(Path(ref.folder), Path("docs")),
                        user_errors=(ValueError, FileNotFoundError))
        typer.echo(f"Wrote {target}")


#: Options whose help names what the registries hold (plugins included): command -> flag -> what.
REGISTRY_HELP: dict[str, dict[str, str]] = {
    "run": {"--method": "methods", "--backbone": "backbones"},
    "estimate": {"--method": "estimators"},
}


def _registered(what: str) -> str:
    """The registry keys of ``what`` as one help sentence (plugins named as such)."""
    from estimators import plugin_estimators

    if what == "backbones":
        from tasks.models.backbones import available_backbones

        keys: Sequence[str] = available_backbones()
    else:
        from tasks.methods import all_method_names, estimator_names

        keys = (all_method_names() if what == "methods"
                else estimator_names(features=True, peers=True))
    plugins = [k for k in keys if k in plugin_estimators()]
    tail = f" (from plugins: {', '.join(plugins)})" if plugins else ""
    return f"Registered: {', '.join(keys)}{tail}."


def cli_command(args: Sequence[str] = ()) -> Any:
    """The ``alsa-bench`` click command for ``args``.

    When ``args`` ask for the help of ``run`` or ``estimate``, the help of their method and
    backbone options lists every registered key, plugins included (:data:`REGISTRY_HELP`): the
    registries import torch, so they are read only then, not on every start.
    """
    command = typer.main.get_command(app)
    words = [a for a in args if not a.startswith("-")]
    if not {"--help", "-h"} & set(args) or not words or words[0] not in REGISTRY_HELP:
        return command
    wanted = REGISTRY_HELP[words[0]]
    for param in command.commands[words[0]].params:  # type: ignore[attr-defined]
        flag = next((o for o in param.opts if o in wanted), None)
        if flag is not None:
            param.help = f"{param.help} {_registered(wanted[flag])}"
    return command


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry point of ``alsa-bench``."""
    args = list(argv) if argv is not None else sys.argv[1:]
    return cli_command(args)(args=args, prog_name="alsa-bench")


if __name__ == "__main__":
    sys.exit(main())
