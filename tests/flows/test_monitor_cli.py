"""``alsa-bench monitor`` on the real CLI app, without Prefect: the contract's options, one-line
errors with exit status 2, the table, ``--json``, ``--plot``, refused files, ``--demo``'s
argument rules."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from flows.cli import app

runner = CliRunner()
CONTRACT = ("--reference", "--production", "--chunk", "-m", "--alert-below", "--alert-drop",
            "--labels", "--json", "--plot", "--demo")


def make(n: int, seed: int, signal: float = 2.0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return rng.normal(size=(n, 3)) + signal * np.eye(3)[y], y


@pytest.fixture
def stream(state_home, tmp_path, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    (tmp_path / "prod").mkdir()
    (tmp_path / "labels").mkdir()
    z, y = make(400, 0)
    np.savez(tmp_path / "ref.npz", logits=z, labels=y)
    for day, signal in ((1, 2.0), (2, 0.6)):
        z, y = make(150, day, signal)
        np.savez(tmp_path / "prod" / f"day-{day}.npz", logits=z)
        np.savez(tmp_path / "labels" / f"day-{day}.npz", labels=y)
    return tmp_path


def invoke(*args):
    return runner.invoke(app, ["monitor", *map(str, args)])


def test_help_lists_the_contract():
    result = invoke("--help")
    assert result.exit_code == 0
    for flag in CONTRACT:
        assert flag in result.stdout, flag


def test_table_alerts_coverage_and_where_the_history_is(stream, tmp_path):
    plot = tmp_path / "fig.png"
    result = invoke("--reference", stream / "ref.npz", "--production", stream / "prod",
                    "-m", "ac", "--alert-below", "0.9", "--alert-drop", "5",
                    "--labels", stream / "labels", "--plot", plot)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "* day-1.npz" in out and "* day-2.npz" in out and "▼ below" in out
    assert "This run: 2 new chunk(s), 2 estimate(s)" in out
    assert re.search(r"Band coverage \[ac\]: the band held the realized accuracy in \d of 2 "
                     r"labelled chunks \(\d+ %; nominal 90 %\)", out)
    assert "view monitor_history" in out and "history.parquet" in out
    assert "alert: accuracy alert (down) on day-2.npz [ac]: band" in result.stderr
    assert plot.read_bytes().startswith(b"\x89PNG")
    again = invoke("--reference", stream / "ref.npz", "--production", stream / "prod",
                   "-m", "ac")
    assert again.exit_code == 0 and "This run: 0 new chunk(s)" in again.stdout
    assert "fits ac from the cache" in again.stdout


def test_json_output(stream):
    result = invoke("--reference", stream / "ref.npz", "--production", stream / "prod",
                    "-m", "ac", "--alert-below", "0.9", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["new_chunks"] == ["day-1.npz", "day-2.npz"] and data["methods"] == ["ac"]
    assert {a["direction"] for a in data["alerts"]} == {"down"}
    assert [r["chunk_name"] for r in data["history"]] == ["day-1.npz", "day-2.npz"]
    assert data["coverage"]["ac"]["n_chunks"] == 0


@pytest.mark.parametrize("args, message", [
    ((), "missing option --reference and --production; usage: alsa-bench monitor"),
    (("--chunk", "2d"), "--chunk must be 'file'"),
    (("--alert-below", "75"), "--alert-below must be an accuracy as a fraction"),
    (("--alert-drop", "0"), "--alert-drop must be percentage points"),
    (("-m", "nope"), "-m: unknown method 'nope'"),
    (("--plot", "fig.gif"), "--plot must name a .png, .svg, .pdf file"),
])
def test_user_mistakes_are_one_line_and_exit_2(stream, args, message):
    base = () if not args else ("--reference", stream / "ref.npz", "--production",
                                stream / "prod")
    result = invoke(*base, *args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def test_bad_reference_is_one_line(stream):
    z, _ = make(50, 1)
    np.savez(stream / "nolabels.npz", logits=z)
    result = invoke("--reference", stream / "nolabels.npz", "--production", stream / "prod")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --reference: ") and "no labels" in result.stderr
    assert "Traceback" not in result.output


def test_refused_files_exit_2_after_the_good_ones_are_stored(stream):
    z, _ = make(40, 3)
    np.savez(stream / "prod" / "day-3.npz", logits=np.hstack([z, z[:, :1]]))
    result = invoke("--reference", stream / "ref.npz", "--production", stream / "prod",
                    "-m", "ac")
    assert result.exit_code == 2
    assert "error: " in result.stderr and "day-3.npz: 4 classes, but the reference has 3" \
        in result.stderr
    assert "This run: 2 new chunk(s)" in result.stdout


def test_demo_builds_its_own_inputs(stream):
    result = invoke("--demo", "--reference", stream / "ref.npz")
    assert result.exit_code == 2
    assert "--demo builds its own reference, production files and labels; leave out " \
           "--reference" in result.stderr


def test_a_busy_state_folder_is_one_line(stream, state_home):
    from storage.lock import state_lock

    with state_lock(state_home, wait=0, purpose="test"):
        result = invoke("--reference", stream / "ref.npz", "--production", stream / "prod",
                        "-m", "ac")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: state folder") and "is in use" in result.stderr
