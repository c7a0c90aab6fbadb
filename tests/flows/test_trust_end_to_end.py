"""The trust layer end to end on a small real database: a benchmark database written through
``storage`` with every label-free method's real estimates on five datasets, then ``alsa-bench
calibrate``, the report's "Which estimate to trust" section (and its one line when a report has
too few datasets), the bench's closing report, and ``auto`` from the CLI and from Python on the
state folder's calibration, which give the same number."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from estimators import get_estimator
from estimators.trust import attach_band, calibration_artifact
from estimators.trust.calibration_artifact import (
    CALIBRATION_ENV,
    load_calibration,
    use_calibration,
)

MEMBERS = ("ac", "doc", "im", "atc-mc", "atc-ne", "cot", "alsa-g", "alsa-e")
#: d-alpha is a sealed group (estimators/trust/sealed.py): calibrate leaves it out; the others
#: are development groups.
DATASETS = ("d-alpha", "d-theta", "d-gamma", "d-delta", "d-eps")


def _logits(rng: np.random.Generator, n: int, scale: float, noise: float):
    y = rng.integers(0, 3, n)
    return (rng.normal(size=(n, 3)) * noise + scale * np.eye(3)[y]).astype(np.float32), y


def _fill(db: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Five datasets (suites ``s1``: three, ``s2``: two), each a validation split and three
    shifted targets, with every label-free method's real estimate; returns each run's
    validation split."""
    from storage import EstimateRow, RunInfo, SplitInfo, connect, upsert_run, write_estimates
    from storage import write_split

    rng = np.random.default_rng(31)
    vals = {}
    with connect(db) as con:
        for i, dataset in enumerate(DATASETS):
            run_key = f"{dataset}.mlp.s0"
            upsert_run(con, RunInfo(run_key, "s1" if i < 3 else "s2", dataset, "mlp", 0, 3))
            scale = 1.6 + 0.3 * i
            val = _logits(rng, 300, scale, 1.0)
            vals[run_key] = val
            write_split(con, run_key, SplitInfo("val", "val", None, None, None), *val)
            fitted = {}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for m in MEMBERS:
                    fitted[m] = get_estimator(m).fit(*val)
            rows = []
            for j, noise in enumerate((1.0, 1.6, 2.2)):
                name = f"noise-{j}"
                target = _logits(rng, 150, scale, noise)
                info = write_split(con, run_key, SplitInfo(name, "target", "synthetic", name, j),
                                   *target)
                for m, est in fitted.items():
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        r = est.estimate(target[0])
                    rows.append(EstimateRow(
                        run_key, name, m, "{}", r.accuracy, info.true_accuracy,
                        abs(r.accuracy - info.true_accuracy), 0.0, 0.0,
                        interval_low=r.interval[0], interval_high=r.interval[1],
                        interval_level=r.level))
            write_estimates(con, run_key, rows)
    return vals


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """The database, filled once for this module's tests."""
    db = tmp_path_factory.mktemp("trust-e2e") / "bench.duckdb"
    return db, _fill(db)


@pytest.fixture
def bench(filled, state_home, monkeypatch):
    """A state folder holding a copy of the database; no calibration chosen, fresh memos."""
    import shutil

    from storage.paths import db_path

    monkeypatch.setenv(CALIBRATION_ENV, "")
    monkeypatch.delenv(CALIBRATION_ENV)  # restored (unset) after the test
    monkeypatch.setattr(calibration_artifact, "_ACTIVE", {"path": None, "loaded": None})
    attach_band.forget_signals()
    db_path().parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(filled[0], db_path())
    yield db_path(), filled[1]
    use_calibration(None)


def test_bench_database_to_calibration_report_cli_and_api(bench, tmp_path) -> None:
    import flows
    from flows.cli import app
    from storage.paths import calibration_path
    from tasks.report import trust_summary, write_report

    db, vals = bench
    runner = CliRunner()
    done = runner.invoke(app, ["calibrate", "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert f"wrote {calibration_path()}" in done.stdout
    assert "12 target splits from 4 development groups" in done.stdout
    assert "sealed groups left out: d-alpha" in done.stdout
    cal = load_calibration(calibration_path())
    assert cal.stale_reason() is None and cal.auto_members() == MEMBERS
    assert cal.source["rows_per_dataset"] == {d: 3 for d in DATASETS if d != "d-alpha"}

    # a suite's report (3 datasets) says in one line why the section is missing
    s1 = [f"{d}.mlp.s0" for d in DATASETS[:3]]
    small = write_report(db, tmp_path / "reports", "s1", publish_artifacts=False,
                         anchor_plots=False, run_keys=s1)
    line = ("Which estimate to trust: not measured in this report: it needs target splits from "
            "at least 4 datasets with every label-free method's estimate, and this report has 3 "
            "(d-alpha, d-gamma, d-theta)")
    assert line in (Path(small.folder) / "report.md").read_text()
    assert line in (Path(small.folder) / "mae.txt").read_text()
    assert trust_summary(small).startswith(line)

    # the CLI in a new process would set ALSA_BENCH_CALIBRATION to the state folder's file,
    # and say that it did (a warning about the file then blames no variable)
    flows.configure_environment()
    import os

    assert os.environ[CALIBRATION_ENV] == str(calibration_path().resolve())
    assert os.environ[flows.STATE_CALIBRATION_ENV] == os.environ[CALIBRATION_ENV]
    run_key = "d-gamma.mlp.s0"
    val_x, val_y = vals[run_key]
    target, _ = _logits(np.random.default_rng(5), 200, 2.2, 1.8)
    np.savez(tmp_path / "val.npz", logits=val_x, labels=val_y)
    np.savez(tmp_path / "target.npz", logits=target)
    out = runner.invoke(app, ["estimate", "--val", str(tmp_path / "val.npz"), "--target",
                              str(tmp_path / "target.npz"), "--json"])
    assert out.exit_code == 0, out.output
    cli_auto = next(r for r in json.loads(out.stdout) if r["method"] == "auto")
    assert cli_auto["diagnostics"]["calibration"] == str(calibration_path().resolve())

    # Python, as the docs say: name the state folder's file once
    os.environ.pop(CALIBRATION_ENV, None)
    os.environ.pop(flows.STATE_CALIBRATION_ENV, None)
    use_calibration(calibration_path())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        api = get_estimator("auto").fit(val_x, val_y).estimate(target)
    assert Path(api.diagnostics["calibration"]) == calibration_path()
    assert tuple(api.diagnostics["members"]) == MEMBERS
    assert api.accuracy == pytest.approx(cli_auto["accuracy"], abs=1e-9)
    assert api.shift_interval == pytest.approx(cli_auto["shift_interval"], abs=1e-9)
    # and it is this calibration's combination, not the shipped one's
    shipped = load_calibration(calibration_artifact.SHIPPED_CALIBRATION)
    mine = cal.stack_for(MEMBERS)
    assert mine.to_dict() != shipped.stack_for(MEMBERS).to_dict()
    assert api.accuracy == pytest.approx(float(mine.predict(
        api.diagnostics["signals"], api.diagnostics["members"])[0]), abs=1e-12)


def test_a_run_over_several_suites_ends_with_the_trust_section_of_all_of_them(
    bench, monkeypatch, capsys
) -> None:
    """``alsa-bench run`` (``make bench``): each suite's report has 3 datasets or fewer, so the
    run closes with the report over every suite and prints its trust table."""
    import types

    import flows.benchmark
    from flows import cli

    done = types.SimpleNamespace(report=None, outcomes=[], summary=lambda: {})
    monkeypatch.setattr(flows.benchmark, "benchmark", lambda **kw: done)  # the suites' runs
    plans = [types.SimpleNamespace(suite=s, datasets=d, backbones=["mlp"], seeds=[0])
             for s, d in (("s1", DATASETS[:3]), ("s2", DATASETS[3:]))]
    options = types.SimpleNamespace(flow_kwargs=lambda plan: {}, ablations=False, methods=(),
                                    method_params=None)
    cli._run_plans(plans, [], options)
    out = capsys.readouterr().out
    assert "Which estimate to trust (leave-one-group-out" in out
    assert all(d in out for d in DATASETS)
    assert "Report over every suite:" in out
    # the closing report (every suite, five datasets) has the section, a row per dataset
    folder = Path(out.split("Report over every suite:")[1].split()[0]).parent
    assert folder.name == "bench-all"
    md = (folder / "report.md").read_text()
    assert "## Which estimate to trust" in md and "not measured" not in md
    auto = pd.read_csv(folder / "trust_auto.csv")
    assert set(DATASETS) <= set(auto.dataset) and auto["auto MAE"].notna().all()


def test_a_closing_report_that_cannot_be_written_says_why_and_fails_no_run(
    bench, monkeypatch, capsys
) -> None:
    import types

    import flows.benchmark
    from flows import cli

    done = types.SimpleNamespace(report=None, outcomes=[], summary=lambda: {})
    monkeypatch.setattr(flows.benchmark, "benchmark", lambda **kw: done)
    plans = [types.SimpleNamespace(suite=s, datasets=["x"], backbones=["mlp"], seeds=[0])
             for s in ("none-1", "none-2")]
    options = types.SimpleNamespace(flow_kwargs=lambda plan: {}, ablations=False, methods=(),
                                    method_params=None)
    cli._run_plans(plans, [], options)
    assert ("Report over every suite: not written (The database holds no run of the suites "
            "none-1, none-2; nothing to report.)") in capsys.readouterr().out


def test_calibrate_without_a_database_or_on_a_foreign_one_says_so_in_one_line(
    tmp_path, monkeypatch
) -> None:
    """No --db and no bench.duckdb in the state folder; a DuckDB file that no benchmark wrote:
    one error line each, naming the file and what to do, and no calibration written."""
    import duckdb

    from flows.cli import app
    from storage.paths import calibration_path

    monkeypatch.setenv("ALSA_BENCH_HOME", str(tmp_path / "state"))
    runner = CliRunner()
    done = runner.invoke(app, ["calibrate"])
    assert done.exit_code == 2
    assert ("the state folder holds no benchmark database "
            f"({tmp_path / 'state' / 'bench.duckdb'}); run `alsa-bench run` first, or name "
            "databases with --db PATH.") in " ".join(done.output.split())
    foreign = tmp_path / "foreign.duckdb"
    duckdb.connect(str(foreign)).close()
    done = runner.invoke(app, ["calibrate", "--db", str(foreign)])
    assert done.exit_code == 2
    text = " ".join(done.output.split())
    assert f"{str(foreign)!r} is not one (Catalog Error: Table with name" in text
    assert "must name a benchmark database written by `alsa-bench run`" in text
    assert "Did you mean" not in text and not calibration_path().exists()
