"""The ``alsa-bench`` command line: help texts, and one clear line for user mistakes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner as ClickRunner
from typer.testing import CliRunner

from flows.cli import app, cli_command


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


#: Every command of ``alsa-bench`` (written out: a command dropped or renamed fails here),
#: and a word its help must hold.
COMMANDS = {
    "run": "--suite", "report": "--run-name", "estimate": "--target", "datasets": "--json",
    "fetch": "DATASET", "doctor": "--repair", "calibrate": "--db",
}


def test_every_command_has_a_help_test() -> None:
    registered = {c.name for c in app.registered_commands}
    assert set(COMMANDS) <= registered
    # a command added later (monitor) must be added to COMMANDS, with a word of its help
    assert registered - set(COMMANDS) <= {"monitor"}, registered


@pytest.mark.parametrize("command", [[], *[[c] for c in COMMANDS], ["monitor"]])
def test_help_of_every_command(command: list[str]) -> None:
    if command == ["monitor"] and "monitor" not in {c.name for c in app.registered_commands}:
        pytest.skip("no monitor command on this branch")
    args = [*command, "--help"]
    result = ClickRunner().invoke(cli_command(args), args, env={"COLUMNS": "240"},
                                  prog_name="alsa-bench")
    assert result.exit_code == 0, result.output
    assert "Usage: alsa-bench" in result.output
    assert "Traceback" not in result.output
    if command and command[0] in COMMANDS:
        assert COMMANDS[command[0]] in result.output, result.output


def test_run_and_estimate_help_name_every_registered_method() -> None:
    """The registries are read for the help only (they import torch): run's --method and
    --backbone and estimate's --method list their keys, whatever registered them."""
    runner = ClickRunner()
    for args, keys in ((["run", "--help"], ("alsa-g", "gnnevaluator", "lenet", "gcn")),
                       (["estimate", "--help"], ("alsa-g", "cot", "distcs"))):
        out = runner.invoke(cli_command(args), args, env={"COLUMNS": "400"}).output
        assert "Registered: " in out
        assert all(k in out for k in keys), out
    plain = runner.invoke(cli_command(["datasets"]), ["run", "--help"],
                          env={"COLUMNS": "400"}).output
    assert "Registered: " not in plain  # built for another command: the registries untouched


def test_run_help_lists_the_refresh_stages(runner: CliRunner) -> None:
    result = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "240"})
    assert "download|train|extract|estimate|report|all" in result.output


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    return lines[0]


def test_bad_refresh_stage_is_one_clear_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["run", "--refresh", "estimate", "--refresh", "fit"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "refresh must name stages from download, train, extract, estimate, report, all" in line
    assert "'fit'" in line


def test_unknown_backbone_is_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["run", "--backbone", "lenet", "--backbone", "vgg"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    listed = line.split("backbone must be one of ", 1)[1].split(";", 1)[0].split(", ")
    # the valid keys, sorted: backbones of every modality (a fixed sample, not the registry's
    # own list, so a registry that lost one fails here), never the unknown one
    assert listed == sorted(listed)
    assert {"alexnet", "bow-linear", "gat", "gcn", "lenet", "minilm-mlp", "mlp", "resnet18",
            "sage"} <= set(listed)
    assert "vgg" not in listed and line.endswith("got 'vgg'.")


def test_backbone_of_another_modality_is_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["run", "--suite", "graph", "--backbone", "lenet"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "'lenet' takes image inputs" in line and "graph" in line
    assert "gat, gcn, gin, sage" in line
    assert not (state_home / "bench.duckdb").exists()


def test_backbones_pick_their_suites(state_home) -> None:
    from tasks.plan import make_plans

    plans = make_plans(None, backbones=["gat"], seeds=1)
    assert [(p.suite, p.backbones) for p in plans] == [("graph", ("gat",))]
    plans = make_plans(None, backbones=["lenet", "gcn"], seeds=2)
    assert [(p.suite, p.backbones) for p in plans] == [("fmnist", ("lenet",)), ("graph", ("gcn",))]
    defaults = make_plans(None, seeds=1)
    assert [p.suite for p in defaults] == ["fmnist", "graph", "text", "tabular"]
    assert defaults[1].backbones == ("gat", "gcn", "gin", "sage")
    assert defaults[2].backbones == ("bow-linear", "minilm-ft", "minilm-mlp")
    assert defaults[3].backbones == ("tab-hgb", "tab-logreg", "tab-mlp")
    with pytest.raises(ValueError, match="suite 'fmnist' is image, and none of the backbones gcn"):
        make_plans(["fmnist", "graph"], backbones=["gcn"])


def test_datasets_keep_only_the_backbones_that_apply(state_home) -> None:
    from tasks.plan import make_plan

    plan = make_plan("text", seeds=2)
    keys = plan.run_keys
    assert "rt-reviews.minilm-ft.s1" in keys and "sotu-party.minilm-mlp.s0" in keys
    assert not [k for k in keys if k.startswith("sotu-party.minilm-ft")]
    assert len(keys) == (3 + 2) * 2
    assert plan.backbones_of("sotu-party") == ("bow-linear", "minilm-mlp")
    with pytest.raises(ValueError, match="backbone 'minilm-ft' does not apply to dataset"):
        make_plan("text", datasets=["sotu-party"], backbones=["minilm-ft"])


def test_missing_online_dataset_fails_fast_without_writing(
    runner: CliRunner, state_home
) -> None:
    import time

    start = time.perf_counter()
    result = runner.invoke(app, ["run", "--suite", "ogbn-arxiv", "-b", "gcn"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "ogbn_arxiv" in line and "alsa-bench fetch ogbn-arxiv" in line
    assert time.perf_counter() - start < 10
    assert not (state_home / "bench.duckdb").exists()


def test_unknown_suite_and_method_are_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["run", "--suite", "cifar-42"])
    assert result.exit_code == 2
    assert "suite must be one of" in _one_error_line(result)
    result = runner.invoke(app, ["run", "--method", "magic"])
    assert result.exit_code == 2
    assert "method must be one of" in _one_error_line(result)


def test_seed_and_seeds_together_are_refused(runner: CliRunner) -> None:
    result = runner.invoke(app, ["run", "--seed", "1", "--seeds", "2"])
    assert result.exit_code == 2
    assert "either --seed" in _one_error_line(result)


def test_report_without_a_database_is_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["report", "--no-artifacts"])
    assert result.exit_code == 2
    assert "No benchmark database" in _one_error_line(result)


def test_to_docs_writes_benchmark_md_with_provenance(tmp_path, state_home) -> None:
    from storage.paths import db_path
    from tasks.report import write_report
    from tasks.report.benchmark_doc import write_benchmark_doc
    from tests.tasks.test_report import _fill_db

    _fill_db(db_path(), np.random.default_rng(0))
    ref = write_report(out_dir=tmp_path / "reports", publish_artifacts=False, anchor_plots=False)
    target = write_benchmark_doc(Path(ref.folder), tmp_path / "docs")
    text = target.read_text()
    assert text.startswith("# Benchmark results\n")
    assert "do not edit by hand" in text
    for field in ("| commit |", "| seeds | 0 |", "| machine |", "CPUs"):
        assert field in text
    assert "](benchmark/scatter-toy.png)" in text
    assert (tmp_path / "docs" / "benchmark" / "scatter-toy.png").is_file()
    with pytest.raises(FileNotFoundError, match="report.md"):
        write_benchmark_doc(tmp_path, tmp_path / "docs")


def test_bad_param_of_run_is_one_clear_line(runner: CliRunner, state_home) -> None:
    result = runner.invoke(app, ["run", "--suite", "graph", "--param", "alsa-g.alpha=2"])
    assert result.exit_code == 2
    assert "--param alsa-g.alpha" in _one_error_line(result)
    assert not (state_home / "bench.duckdb").exists()


def test_model_aware_method_on_an_image_suite_fails_before_any_work(
    runner: CliRunner, state_home
) -> None:
    result = runner.invoke(app, ["run", "--suite", "fmnist", "--method", "gnnevaluator"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "none of the methods gnnevaluator applies to suite 'fmnist'" in line
    assert not (state_home / "bench.duckdb").exists()


def test_model_aware_methods_are_kept_only_where_they_apply(state_home) -> None:
    from tasks.plan import make_plans, plan_methods

    fm, gr, tx, tb = make_plans(None, seeds=1)
    assert plan_methods(fm, ["alsa-g", "gnnevaluator"]) == ["alsa-g"]
    assert plan_methods(gr, ["alsa-g", "gnnevaluator"]) == ["alsa-g", "gnnevaluator"]
    assert plan_methods(tx, ["alsa-g", "gnnevaluator"]) == ["alsa-g"]
    assert plan_methods(tb, ["alsa-g", "gnnevaluator"]) == ["alsa-g"]
    assert plan_methods(fm, None) is None


def test_requested_datasets_and_suites_are_never_dropped_silently(state_home) -> None:
    from tasks.plan import make_plans

    with pytest.raises(ValueError, match="suite 'fmnist' is image, and none of the backbones gat"):
        make_plans(None, datasets=["fmnist", "arxiv-sim"], backbones=["gat"])
    with pytest.raises(ValueError, match="suite 'fmnist' was chosen, but none of the datasets"):
        make_plans(["fmnist", "graph"], datasets=["arxiv-sim"])


def test_missing_distilbert_weights_fail_fast_without_writing(
    runner: CliRunner, state_home, tmp_path, monkeypatch
) -> None:
    from storage.paths import data_dir
    from tests.tasks._wilds_fake import write_fake_amazon

    write_fake_amazon(data_dir())
    monkeypatch.setenv("ALSA_BENCH_DISTILBERT", str(tmp_path / "no-model-here"))
    result = runner.invoke(app, ["run", "--suite", "amazon-wilds"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "no-model-here" in line and "ALSA_BENCH_DISTILBERT" in line
    assert not (state_home / "bench.duckdb").exists()


# ------------------------------------------------- busy folders, damaged databases (issue 24)
ROOT = Path(__file__).resolve().parents[2]
#: Runs the CLI, then says on stdout whether Prefect was imported: "before Prefect" is checked,
#: not assumed.
_PROBE = """
import sys
from flows.cli import main
code = 0
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("prefect imported:", "prefect" in sys.modules)
sys.exit(code)
"""
_HOLDER = """
import os, sys
from storage.lock import state_lock
with state_lock(os.environ["ALSA_BENCH_HOME"], wait=0, purpose="run"):
    print("locked", flush=True)
    sys.stdin.readline()
"""
_STALE = ('{"pid": 999999, "host": "elsewhere", "command": "alsa-bench run", '
          '"purpose": "run", "started_at": 1700000000}')


def _cli_env(home: Path) -> dict[str, str]:
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT), "ALSA_BENCH_HOME": str(home)}
    env.pop("ALSA_BENCH_REPORTS", None)
    return env


def _probe(home: Path, *args: str):
    """``alsa-bench <args>`` in a fresh interpreter (:data:`_PROBE`), state folder ``home``."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=ROOT, env=_cli_env(home),
                          capture_output=True, text=True, timeout=300, check=False)


def _stderr_lines(proc) -> list[str]:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return [line for line in proc.stderr.splitlines() if line.strip()]


@pytest.fixture
def held_folder(tmp_path):
    """A state folder held by another process for the whole test: ``(folder, holder pid)``."""
    import subprocess
    import sys

    home = tmp_path / "state"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], cwd=ROOT, env=_cli_env(home),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield home, holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdin.close()
        holder.stdout.close()


def test_a_run_on_a_held_folder_fails_at_once_in_one_line_before_prefect(held_folder) -> None:
    """The issue measured 12.3 s: the plans (and Prefect) came before the lock. The bound is on
    the child's CPU time, which a busy machine does not stretch, plus a loose wall-clock one."""
    import resource
    import time

    home, holder = held_folder
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = _probe(home, "run", "--suite", "fmnist", "-b", "lenet")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert proc.returncode == 1, proc.stderr
    [line] = _stderr_lines(proc)
    assert line.startswith(f"error: state folder {home} is in use by pid {holder} (")
    assert line.endswith("wait for it with --wait SECONDS, or use another ALSA_BENCH_HOME")
    assert "prefect imported: False" in proc.stdout
    assert cpu < 2.0, f"a busy folder took {cpu:.2f} s of CPU to refuse (wall {wall:.2f} s)"
    assert wall < 10.0, f"a busy folder took {wall:.2f} s to refuse"
    assert not (home / "bench.duckdb").exists()


def test_doctor_waits_with_wait_then_says_the_same_line(runner: CliRunner, held_folder,
                                                        monkeypatch) -> None:
    home, holder = held_folder
    monkeypatch.setenv("ALSA_BENCH_HOME", str(home))
    busy = runner.invoke(app, ["doctor"])
    assert busy.exit_code == 1
    assert "wait for it with --wait SECONDS" in _one_error_line(busy)
    waited = runner.invoke(app, ["doctor", "--wait", "0.3", "--json"])
    assert waited.exit_code == 1
    assert waited.stdout == ""  # the waiting line is on stderr: --json output stays clean
    lines = [line for line in waited.stderr.splitlines() if line.strip()]
    assert lines == [
        f"waiting for {holder} on {home}…",
        lines[1],
    ] and lines[1].startswith(f"error: state folder {home} is in use by pid {holder} (")
    assert "(waited 0.3 s)" in lines[1]


def test_doctor_help_lists_wait(runner: CliRunner) -> None:
    result = runner.invoke(app, ["doctor", "--help"], env={"COLUMNS": "240"})
    assert result.exit_code == 0 and "--wait" in result.output and "SECONDS" in result.output


def test_a_stale_lock_record_is_mentioned_once(tmp_path) -> None:
    home = tmp_path / "state"
    home.mkdir()
    for command in (("report", "--no-artifacts"), ("doctor",)):
        (home / ".lock").write_text(_STALE)
        proc = _probe(home, *command)
        output = [line for line in (proc.stdout + proc.stderr).splitlines()
                  if "pid 999999" in line]
        assert len(output) == 1, (command, proc.stdout, proc.stderr)
        assert "died without releasing" in output[0]
    assert "No benchmark database" in _stderr_lines(_probe(home, "report", "--no-artifacts"))[0]


def _damaged_database(path: Path) -> bytes:
    """A small DuckDB file with data in it, damaged as in the issue: ``dd if=/dev/urandom
    bs=4096 seek=$(( size/8192 )) count=64 conv=notrunc`` (256 KB of noise mid-file)."""
    import duckdb

    from storage.db import connect

    with connect(path):  # the alsa-bench schema: opening the file alone finds nothing wrong
        pass
    rng = np.random.default_rng(0)
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TABLE filler (i BIGINT, x DOUBLE, y DOUBLE)")
        n = 200_000
        rows = {"i": np.arange(n), "x": rng.normal(size=n), "y": rng.normal(size=n)}  # noqa: F841
        con.execute("INSERT INTO filler SELECT * FROM rows")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    size = path.stat().st_size
    assert size > 4 * 64 * 4096, size
    with path.open("r+b") as handle:
        handle.seek((size // 8192) * 4096)
        handle.write(rng.bytes(64 * 4096))
    return path.read_bytes()


@pytest.mark.parametrize("command", [("run",), ("report",), ("report", "--no-artifacts")])
def test_a_damaged_database_is_refused_before_prefect_writing_nothing(tmp_path, command) -> None:
    home = tmp_path / "state"
    home.mkdir()
    db = home / "bench.duckdb"
    before = _damaged_database(db)
    proc = _probe(home, *command)
    assert proc.returncode == 2, proc.stderr
    [line] = _stderr_lines(proc)
    assert line.startswith(f"error: {db} is damaged"), line
    assert f"mv {db} {db}.damaged" in line
    assert "prefect imported: False" in proc.stdout
    assert db.read_bytes() == before
    assert sorted(p.name for p in home.iterdir()) == [".lock", "bench.duckdb"]
