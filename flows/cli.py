"""The ``alsa-bench`` command line: ``estimate``, ``run``, ``report``, ``datasets``, ``fetch``
and ``doctor``.

``estimate`` (bring your own logits, :mod:`flows.estimate_cli`) never imports Prefect; ``run``
and ``report`` import it inside the command, after :func:`flows.configure_environment` has
pointed its cache at ``$ALSA_BENCH_HOME/prefect-results`` and turned telemetry off. So
``alsa-bench --help`` answers at once.

User mistakes (an unknown backbone, a bad ``--refresh`` stage, a missing database) print one
line ``error: ...`` on stderr and exit with status 2; failures while running print one line and
exit with status 1. Neither prints a traceback.

Examples
--------
::

    alsa-bench run                                  # default suite, every backbone, seed 0
    alsa-bench run --backbone lenet --seeds 3       # one backbone, seeds 0, 1, 2
    alsa-bench run --refresh estimate               # re-run estimate and report only
    alsa-bench report --to-docs                     # docs/BENCHMARK.md from the latest report
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from flows import configure_environment
from flows.doctor_cli import doctor_command
from flows.estimate_cli import estimate_command
from flows.fetch_cli import datasets_command, fetch_command
from storage.errors import StorageError
from tasks.versions import REFRESH_ALL, STAGES, parse_refresh

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
@app.command("run")
def run_command(
    suite: Annotated[
        list[str] | None,
        typer.Option(
            "--suite", "-s",
            help="Benchmark suite (repeatable): fmnist, graph, text, ogbn-arxiv, amazon-wilds; "
            "default every offline suite (fmnist, graph and text).",
        ),
    ] = None,
    backbone: Annotated[
        list[str] | None,
        typer.Option("--backbone", "-b", help="Backbone (repeatable); default all."),
    ] = None,
    seed: Annotated[
        list[int] | None, typer.Option("--seed", help="Training seed (repeatable).")
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option("--seeds", help="Number of seeds: 0 .. N-1 (default 1; 3 with --full)."),
    ] = None,
    refresh: Annotated[
        list[str] | None,
        typer.Option(
            "--refresh",
            help="Re-run a stage and everything after it (repeatable): "
            f"{'|'.join((*STAGES, REFRESH_ALL))}.",
        ),
    ] = None,
    full: Annotated[
        bool, typer.Option("--full", help="Paper protocol: every backbone, 3 seeds.")
    ] = False,
    dataset: Annotated[
        list[str] | None,
        typer.Option("--dataset", "-d", help="Dataset of the suite (repeatable); default all."),
    ] = None,
    method: Annotated[
        list[str] | None,
        typer.Option("--method", "-m", help="Estimator (repeatable); default all registered."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param", metavar="METHOD.NAME=VALUE",
            help="Hyper-parameter of one method, e.g. alsa-g.alpha=0.9 (JSON values; "
            "repeatable); part of each estimate's cache key and stored with it.",
        ),
    ] = None,
    epochs: Annotated[
        int | None, typer.Option(help="Training epochs; default each backbone's recipe.", min=1)
    ] = None,
    max_train_samples: Annotated[
        int | None, typer.Option(help="Cap on training samples (quick runs).", min=1)
    ] = None,
    device: Annotated[str, typer.Option(help="Torch device: auto, cpu, cuda, cuda:N.")] = "auto",
    run_name: Annotated[
        str | None,
        typer.Option(help="Report name: <state>/reports/<run-name>/ (default: the suite)."),
    ] = None,
    ablations: Annotated[
        bool,
        typer.Option("--ablations",
                     help="Also run the ALSA ablations (<state>/reports/<run>-ablations/)."),
    ] = False,
    artifacts: Annotated[
        bool, typer.Option("--artifacts/--no-artifacts", help="Publish Prefect artifacts.")
    ] = True,
    workers: Annotated[
        int,
        typer.Option(
            "--workers", min=0,
            help="Run train/extract/estimate on a local Dask cluster of N worker processes "
            "(0: in this process, one task after another).",
        ),
    ] = 0,
    dask_address: Annotated[
        str | None,
        typer.Option(
            "--dask-address", metavar="tcp://HOST:PORT",
            help="Run the tasks on an existing Dask scheduler (dask-jobqueue, Kubernetes, ...).",
        ),
    ] = None,
    threads_per_task: Annotated[
        int | None,
        typer.Option(
            "--threads-per-task", min=1,
            help="Torch threads of each task (default: CPU cores / workers). Sequential and "
            "Dask runs with the same value compute the same numbers.",
        ),
    ] = None,
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
) -> None:
    """Run the benchmark: download → train → extract → estimate → report (cached per stage)."""
    try:
        refresh_stages = parse_refresh(refresh or None)
    except ValueError as exc:
        fail(str(exc))
    if workers and dask_address:
        fail(f"give either --workers (a local cluster) or --dask-address (an existing "
             f"scheduler), not both; got --workers {workers} and --dask-address {dask_address}.")
    if dask_address is not None and not re.match(r"^[a-z][a-z0-9+]*://[^\s]+$", dask_address):
        fail(f"--dask-address must be a scheduler address such as tcp://10.0.0.5:8786; got "
             f"{dask_address!r}.")
    # online data missing: one line, before Prefect or torch is imported (well under a second)
    _guard(lambda: _precheck_online(suite or [], dataset or []),
           user_errors=(ValueError, FileNotFoundError))
    if seed and seeds is not None:
        fail(f"give either --seed (explicit seeds) or --seeds (a count), not both; got --seed "
             f"{' --seed '.join(map(str, seed))} and --seeds {seeds}.")
    if seeds is not None and seeds < 1:
        fail(f"--seeds must be a count >= 1; got {seeds}.")
    seed_arg: int | list[int] | None = list(seed) if seed else seeds

    _set_reports_dir(out)
    configure_environment()
    from flows.benchmark import make_plans

    plans = _guard(
        lambda: make_plans(suite or None, datasets=dataset or None, backbones=backbone or None,
                           seeds=seed_arg, full=full),
        user_errors=(ValueError,),
    )
    if method:
        _guard(lambda: _check_methods(method), user_errors=(ValueError,))
    method_params = _guard(lambda: _method_params(param, method), user_errors=(ValueError,))
    if method:
        from flows.benchmark import plan_methods

        for plan in plans:
            _guard(lambda plan=plan: plan_methods(plan, method), user_errors=(ValueError,))
    if run_name and len(plans) > 1:
        fail(f"--run-name names one report, but {len(plans)} suites were chosen "
             f"({', '.join(p.suite for p in plans)}); give one --suite with it.")
    _guard(lambda: _check_online(plans), user_errors=(ValueError, FileNotFoundError))
    refreshing = [s for s in STAGES if s in refresh_stages]
    with _state_lock(wait, "alsa-bench run"):
        _guard(_check_database, user_errors=(StorageError,))
        _run_plans(plans, refreshing, refresh_stages, full=full, epochs=epochs,
                   max_train_samples=max_train_samples, device=device, method=method,
                   method_params=method_params, run_name=run_name, artifacts=artifacts,
                   ablations=ablations, workers=workers, dask_address=dask_address,
                   threads_per_task=threads_per_task)


def _run_plans(
    plans: Sequence[Any], refreshing: Sequence[str], refresh_stages: Any, *, full: bool,
    epochs: int | None, max_train_samples: int | None, device: str, method: Sequence[str] | None,
    method_params: Any, run_name: str | None, artifacts: bool, ablations: bool, workers: int,
    dask_address: str | None, threads_per_task: int | None,
) -> None:
    """The body of ``run`` once the state folder is ours."""
    from flows.benchmark import benchmark, print_report

    for plan in plans:
        typer.echo(
            f"alsa-bench run: suite {plan.suite}, datasets {', '.join(plan.datasets)}, "
            f"backbones {', '.join(plan.backbones)}, seeds {', '.join(map(str, plan.seeds))}"
            + (f", refresh {', '.join(refreshing)}" if refreshing else "")
        )
    for plan in plans:
        start = time.perf_counter()
        result = _guard(
            lambda plan=plan: benchmark(
                suite=plan.suite, backbones=list(plan.backbones), seeds=list(plan.seeds),
                refresh=sorted(refresh_stages) or None, full=full, datasets=list(plan.datasets),
                epochs=epochs, max_train_samples=max_train_samples, device=device,
                methods=list(method) if method else None, method_params=method_params,
                run_name=run_name, publish_artifacts=artifacts,
                **_scale_out(workers, dask_address, threads_per_task),
            ),
            user_errors=(),
        )
        elapsed = time.perf_counter() - start
        print_report(result.report)
        for outcome in result.outcomes:
            if outcome.healed:
                typer.echo(f"{outcome.stage} {outcome.key}: its cached output was missing or "
                           "damaged; recomputed it")
        counts = "; ".join(f"{stage} {c['ran']} ran, {c['cached']} cached"
                           for stage, c in result.summary().items())
        typer.echo(f"Suite {plan.suite} finished in {elapsed:.1f} s ({counts}).")
    if not ablations:
        return
    for plan in plans:
        from flows.ablations import ablations as ablations_flow

        abl = _guard(
            lambda plan=plan: ablations_flow(
                suite=plan.suite, backbones=list(plan.backbones), seeds=list(plan.seeds),
                datasets=list(plan.datasets), run_name=f"{run_name or plan.suite}-ablations",
                publish_artifacts=artifacts,
            ),
            user_errors=(),
        )
        print_report(abl)


def _scale_out(
    workers: int, dask_address: str | None, threads_per_task: int | None
) -> dict[str, Any]:
    """The benchmark flow's scale-out arguments, only those given (sequential by default)."""
    out: dict[str, Any] = {}
    if workers:
        out["workers"] = workers
    if dask_address:
        out["dask_address"] = dask_address
    if threads_per_task is not None:
        out["threads_per_task"] = threads_per_task
    return out


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


def _check_database() -> None:
    """Open the database once, before Prefect starts: a damaged file, or one of a newer or
    unknown schema, fails here in one line (an older one is migrated in place)."""
    from storage.db import connect
    from storage.paths import db_path

    if db_path().exists():
        with connect():
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
    from tasks.datasets import DATASETS

    for spec in DATASETS.values():
        if spec.suite in suites and spec.online and (not datasets or spec.name in datasets):
            spec.stage(data_dir())


def _check_methods(methods: Sequence[str]) -> None:
    from tasks.estimate import all_method_names

    unknown = [m for m in methods if m not in all_method_names()]
    if unknown:
        raise ValueError(
            f"method must be one of {', '.join(all_method_names())}; got "
            f"{', '.join(map(repr, unknown))}."
        )


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
    backbone loads (DistilBERT) are not on this machine."""
    from storage.paths import data_dir
    from tasks.datasets import get_dataset_spec

    for plan in plans:
        for name in plan.datasets:
            spec = get_dataset_spec(name)
            if spec.online:
                spec.stage(data_dir())  # verifies the files; raises one line when missing
            if "distilbert" in plan.backbones_of(name):
                from tasks.backbones.distilbert import check_weights

                check_weights()  # one line: what is missing, where it looked, how to get it


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
) -> None:
    """Write <state folder>/reports/<run>/ (tables, plots) from the estimates in DuckDB."""
    _set_reports_dir(out)
    configure_environment()
    with _state_lock(wait, "alsa-bench report"):
        _report(run_name, run_key, method, to_docs, artifacts)


def _report(
    run_name: str | None, run_key: Sequence[str] | None, method: Sequence[str] | None,
    to_docs: bool, artifacts: bool,
) -> None:
    """The body of ``report`` once the state folder is ours."""
    user_errors = (ValueError, FileNotFoundError, StorageError)
    _guard(_check_database, user_errors=(StorageError,))
    if artifacts:
        from flows.report import report as report_flow

        ref = _guard(
            lambda: report_flow(run_name=run_name, run_keys=list(run_key) if run_key else None,
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
        target = _guard(lambda: write_benchmark_doc(Path(ref.folder), Path("docs")),
                        user_errors=(ValueError, FileNotFoundError))
        typer.echo(f"Wrote {target}")


#: The protocol section of docs/BENCHMARK.md: how the numbers were produced.
BENCHMARK_PROTOCOL = """## Protocol

**Images (`fmnist` suite).** Each run trains one classifier on a class-imbalanced subset of the
Fashion-MNIST training images (class 0 : class 9 = 1 : 3, linear; paper App. H.2) and holds out
validation images of the same source distribution; `fmnist-binary` uses the same images with
binary labels (upper-body garment or not), `fmnist-coarse` 3 coarse classes with novel
sub-classes in the targets. The shift generators (corruptions at five severities, Dirichlet label
shift, the 3-class sub-population remap, the MNIST-M style photo blend) are described in
[SHIFTS.md](SHIFTS.md).

**Graphs (`graph` suite).** Each run trains a GNN (GCN, GraphSAGE, GAT, GIN; full batch, Adam
1e-2, weight decay 5e-4, early stopping after 20 epochs) on the papers of `arxiv-sim` published
up to 2010 and validates on 2012-2014 (paper App. F, H); targets are one split per test year
2015-2020 on that year's snapshot (`temporal`, the paper's Table 2 and 3 rows), the held-out year
2011 (`clean`), and edge drop, feature noise and class-prior shifts of 2011 (`structural`).
GNNEvaluator (Zheng et al., 2023) is fitted on augmented copies of the validation graph with the
trained GNN; it is the only method that sees more than logits.

**Text (`text` suite).** `rt-reviews` trains on 5,000 Rotten Tomatoes snippets (binary
sentiment; validation 1,500 held-out snippets) and is scored on 2,000 further snippets (`clean`),
7 text corruptions at five severities (`synthetic`), Dirichlet label shift, and 25/50/100 %
mixtures of Pang & Lee full-length reviews (`domain`). `sotu-party` predicts the president's
party from a State of the Union paragraph: trained and validated on different speeches of
1853-1912, scored on held-out speeches of that era (`clean`; every president of the era contributes to train, val and clean) and on four later eras
(`temporal`). Backbones: a hashed bag-of-words linear model, an MLP on frozen all-MiniLM-L6-v2
embeddings, and MiniLM with its top layer fine-tuned (`rt-reviews` only); texts longer than 128
tokens keep their first 32 and last 94 (see [SHIFTS.md](SHIFTS.md)).

Every method is fitted on the validation logits and labels only, then scores every target split
from its logits alone; true accuracies are computed afterwards by the evaluation step, which is
the only code that reads target labels.

No hyper-parameter was chosen with target labels:

- temperature scaling (AC, DoC, IM, ATC, COT) is fitted by validation NLL;
- the ATC thresholds are fitted on validation scores (exact finite-sample rule, METHODS §5);
- IM uses the 10 equal-width bins that the ATC paper (App. E) found best on its own data;
- COT's label marginal is the validation label frequencies;
- ALSA's open choices (anchor count, variance initialisation, learning rates, alpha, the
  canonical logit space, the stopping rule) were set on independent problems (scikit-learn's
  digits with an MLP, Gaussian blobs with logistic regression, binary digits and breast-cancer
  problems; `benchmarks/tune_alsa.py`, `benchmarks/tune_alsa_invariance.py`, results in
  [ALSA.md](ALSA.md)) that share no data with this benchmark;
- GNNEvaluator's settings (meta-graph count, reference nodes, optimiser) were set on synthetic
  graphs in its tests and bounded for cost (`tasks/gnnevaluator.py`).

The score methods (MaNo, nuclear norm) are the exception the protocol of their papers makes: a
score-to-accuracy line fitted on a *labelled* meta-set, here each run's own corruption family
(leave one corruption type out for the corruption splits themselves). They are reported in a
section of their own and never ranked with the label-free methods.

ALSA runs in its canonical space by default (centred logits plus one constant coordinate, so
that adding a constant to a row of logits changes nothing, and binary classifiers are not blind;
[ALSA.md](ALSA.md)); the paper's raw-logit form is `space="raw"`, compared below.
"""


#: Files of the docs folder appended to docs/BENCHMARK.md when present: measurements that the
#: pipeline does not make itself (each states the command that produced it).
BENCHMARK_APPENDICES: tuple[str, ...] = ("benchmark-alsa-spaces.md",)


def write_benchmark_doc(report_folder: Path, docs_dir: Path) -> Path:
    """Write ``docs/BENCHMARK.md`` from a report folder, with provenance; copy its figures.

    Parameters
    ----------
    report_folder : Path
        A folder written by :func:`tasks.report.write_report`.
    docs_dir : Path
        The documentation folder; figures go to ``<docs_dir>/benchmark/``.

    Returns
    -------
    Path
        The markdown file written.

    Raises
    ------
    FileNotFoundError
        If ``report_folder`` holds no ``report.md``.
    """
    import pandas as pd

    source = report_folder / "report.md"
    if not source.is_file():
        raise FileNotFoundError(
            f"report_folder must hold a report.md written by `alsa-bench report`; got "
            f"{str(report_folder)!r} without one."
        )
    figures = docs_dir / "benchmark"
    if figures.exists():
        shutil.rmtree(figures)
    figures.mkdir(parents=True)
    for png in sorted(report_folder.glob("*.png")):
        shutil.copy2(png, figures / png.name)
    body = source.read_text(encoding="utf-8")
    body = re.sub(r"\]\(([^)/]+\.png)\)", r"](benchmark/\1)", body)
    body = body.split("\n", 1)[1] if body.startswith("# ") else body
    rows = pd.read_csv(report_folder / "estimates.csv")
    seeds = ", ".join(str(s) for s in sorted(rows["seed"].unique()))
    lines = [
        "# Benchmark results",
        "",
        "<!-- Generated by `alsa-bench report --to-docs`; do not edit by hand. -->",
        "",
        "| | |",
        "| --- | --- |",
        f"| commit | `{_git_commit()}` |",
        f"| seeds | {seeds} |",
        f"| machine | {_machine()} |",
        f"| report | `{report_folder.name}` (`.alsa-bench/reports/{report_folder.name}/`) |",
        "",
        BENCHMARK_PROTOCOL,
        body.lstrip("\n"),
    ]
    for appendix in BENCHMARK_APPENDICES:
        extra = docs_dir / appendix
        if extra.is_file():  # hand-measured sections, each saying the command behind it
            lines += ["", extra.read_text(encoding="utf-8").rstrip("\n"), ""]
    from tasks.paper_table import reproduce_section

    lines += ["", reproduce_section(rows).rstrip("\n"), ""]
    docs_dir.mkdir(parents=True, exist_ok=True)
    target = docs_dir / "BENCHMARK.md"
    target.write_text("\n".join(lines), encoding="utf-8")
    return target


def _git_commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
            check=True, timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
            text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return f"{head}{' + uncommitted changes' if dirty else ''}"


def _machine() -> str:
    parts = [
        platform.platform(terse=True),
        f"{os.cpu_count()} CPUs",
        f"Python {platform.python_version()}",
    ]
    try:
        import torch

        if torch.cuda.is_available():
            parts.append(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
        else:
            parts.append(f"torch {torch.__version__} on CPU")
    except ImportError:
        parts.append("torch not installed")
    return ", ".join(parts)


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry point of ``alsa-bench``."""
    return app(args=list(argv) if argv is not None else None, prog_name="alsa-bench")


if __name__ == "__main__":
    sys.exit(main())
