"""Plugins end to end: the example package installed as pip would, then the real command line.

``examples/alsa-bench-quantile`` declares an estimator (``cq-bin``), a dataset (``digits``,
suite ``digits``) and a backbone (``pixel-linear``) in the three entry-point groups.
:func:`tests.plugin_site.install_example` writes it beside a ``*.dist-info`` folder into a
temporary site folder, and each command runs in a fresh interpreter with that folder on
``PYTHONPATH``, exactly as after ``pip install``: ``datasets`` lists the dataset with both
backbones, ``run`` benchmarks the plugin method on the plugin dataset with both backbones, a
second ``run`` with one more method computes that method's rows only, ``estimate`` runs the
plugin method on ``.npz`` files, and ``--help`` names it. A broken plugin is one warning line
and the rest of the tool works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

from tests.plugin_site import install_distribution, install_example

ROOT = Path(__file__).resolve().parents[2]


def _cli(site: Path, home: Path, *args: str, api_url: str | None = None
         ) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}",
           "ALSA_BENCH_HOME": str(home), "ALSA_BENCH_REPORTS": str(home / "reports"),
           "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "prefect-results"),
           "PREFECT_LOGGING_LEVEL": "WARNING", "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
    if api_url is not None:
        env["PREFECT_API_URL"] = api_url
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def _show(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return install_example(tmp_path_factory.mktemp("site"))


@pytest.mark.flow
def test_the_example_plugin_runs_through_run_and_estimate(site, tmp_path, prefect_server):
    from prefect.settings import PREFECT_API_URL

    api_url = PREFECT_API_URL.value()
    home = tmp_path / "state"

    listed = _cli(site, home, "datasets", "--json")
    assert listed.returncode == 0, _show(listed)
    [digits] = [d for d in json.loads(listed.stdout) if d["name"] == "digits"]
    assert digits["suite"] == "digits" and digits["backbones"] == ["mlp", "pixel-linear"]

    run = _cli(site, home, "run", "--suite", "digits", "-m", "cq-bin", "-m", "ac",
               "--epochs", "1", "--device", "cpu", "--no-artifacts", api_url=api_url)
    assert run.returncode == 0, _show(run)
    assert "estimate 4 ran, 0 cached" in run.stdout, _show(run)  # 2 backbones x 2 methods
    report = (home / "reports" / "digits" / "mae.txt").read_text(encoding="utf-8")
    assert "cq-bin" in report and "pixel-linear" in report
    con = duckdb.connect(str(home / "bench.duckdb"), read_only=True)
    try:
        rows = con.sql("SELECT run_key, method, count(*) FROM estimates GROUP BY ALL "
                       "ORDER BY ALL").fetchall()
    finally:
        con.close()
    runs = ["digits.mlp.s0", "digits.pixel-linear.s0"]
    assert [(r, m) for r, m, _ in rows] == [(r, m) for r in runs for m in ("ac", "cq-bin")]
    assert len({n for _, _, n in rows}) == 1  # every method scored every target split

    # one more method: its rows only are computed; the plugin's are served from the cache
    again = _cli(site, home, "run", "--suite", "digits", "-m", "cq-bin", "-m", "ac", "-m", "doc",
                 "--epochs", "1", "--device", "cpu", "--no-artifacts", api_url=api_url)
    assert again.returncode == 0, _show(again)
    assert "train 0 ran, 2 cached; extract 0 ran, 2 cached; estimate 2 ran, 4 cached" in \
        again.stdout, _show(again)

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 600)
    logits = rng.normal(size=(600, 4)) + 2.0 * np.eye(4)[labels]
    np.savez(tmp_path / "val.npz", logits=logits[:400], labels=labels[:400])
    np.savez(tmp_path / "target.npz", logits=logits[400:] * 0.7)
    estimate = _cli(site, home, "estimate", "--val", str(tmp_path / "val.npz"),
                    "--target", str(tmp_path / "target.npz"), "-m", "cq-bin", "--json")
    assert estimate.returncode == 0, _show(estimate)
    [row] = json.loads(estimate.stdout)
    assert row["method"] == "cq-bin" and 0.0 <= row["accuracy"] <= 1.0

    helped = _cli(site, home, "run", "--help")
    assert "(from plugins: cq-bin)" in helped.stdout and "pixel-linear" in helped.stdout
    assert "digits" in helped.stdout  # the suite


def test_a_broken_plugin_is_one_warning_line_and_the_tool_works(tmp_path, site) -> None:
    """Import errors, wrong types, bad and reused keys: each named in one line, then skipped."""
    broken = install_distribution(
        tmp_path / "broken", "broken-plugins", "1.0",
        {"alsa_bench.estimators": {"no-module": "no_such_module_here:X", "not-a-class":
                                   "json:dumps", "ac": "alsa_bench_quantile.estimator:"
                                   "ConfidenceQuantile", "Bad.Key": "json:dumps"},
         "alsa_bench.datasets": {"fmnist": "broken_data", "nothing": "json"},
         "alsa_bench.backbones": {"crash": "broken_backbone"}},
        files={"broken_data.py": "from tasks.data.datasets.fmnist import SPECS\n",
               "broken_backbone.py": "raise RuntimeError('this backbone plugin is broken')\n"},
    )
    both = f"{broken}{os.pathsep}{site}"
    home = tmp_path / "state"
    listed = _cli(Path(both), home, "datasets", "--json")
    assert listed.returncode == 0, _show(listed)
    names = {d["name"] for d in json.loads(listed.stdout)}
    assert {"fmnist", "digits"} <= names
    warnings = [line for line in listed.stderr.splitlines() if "skipped it." in line]
    expected = {
        "alsa_bench.datasets plugin 'fmnist'": "reuses the dataset key 'fmnist'",
        "alsa_bench.datasets plugin 'nothing'": "must give a DatasetSpec",
        "alsa_bench.backbones plugin 'crash'": "does not import (RuntimeError: this backbone "
                                               "plugin is broken)",
    }
    for where, why in expected.items():
        said = [line for line in warnings if where in line]
        assert len(said) == 1 and why in said[0], _show(listed)

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 300)
    logits = rng.normal(size=(300, 3)) + 2.0 * np.eye(3)[labels]
    np.savez(tmp_path / "val.npz", logits=logits[:200], labels=labels[:200])
    np.savez(tmp_path / "target.npz", logits=logits[200:])
    estimate = _cli(Path(both), home, "estimate", "--val", str(tmp_path / "val.npz"),
                    "--target", str(tmp_path / "target.npz"), "-m", "ac", "-m", "cq-bin",
                    "--json")
    assert estimate.returncode == 0, _show(estimate)
    assert [r["method"] for r in json.loads(estimate.stdout)] == ["ac", "cq-bin"]
    said = [line for line in estimate.stderr.splitlines() if "skipped it." in line]
    for key, why in {"no-module": "does not import (ModuleNotFoundError",
                     "not-a-class": "must name an Estimator subclass",
                     "ac": "reuses the key of estimators.methods.ac.AC",
                     "Bad.Key": "has a key that is not lower-case letters"}.items():
        [line] = [x for x in said if f"alsa_bench.estimators plugin {key!r}" in x]
        assert why in line, line
