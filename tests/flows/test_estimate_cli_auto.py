"""``alsa-bench estimate`` and ``auto``: its member set never changes without a line saying so."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from estimators.trust.auto import auto_default_members
from flows.estimate_cli import estimate_command

app = typer.Typer()


@app.callback()
def _root() -> None:
    """Test app: makes ``estimate`` a sub-command, as in the real CLI."""


app.command("estimate")(estimate_command)
runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 600)
    val = rng.normal(size=(600, 3)) + 2.0 * np.eye(3)[y]
    target = val[:300] + rng.normal(scale=1.0, size=(300, 3))
    np.savez(tmp_path / "val.npz", logits=val, labels=y)
    np.savez(tmp_path / "target.npz", logits=target)
    return tmp_path / "val.npz", tmp_path / "target.npz"


def _run(*args: str):
    result = runner.invoke(app, ["estimate", *map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def test_auto_uses_the_members_the_calibration_names_and_says_nothing_when_all_ran(files):
    rows, err = _run("--val", files[0], "--target", files[1])
    auto = next(r for r in rows if r["method"] == "auto")
    assert tuple(auto["params"]["methods"]) == auto_default_members()
    assert auto["diagnostics"]["left_out"] == []
    assert "auto combined" not in err and "auto left out" not in err


def test_a_param_on_a_member_says_which_members_auto_combined_and_why(files):
    rows, err = _run("--val", files[0], "--target", files[1], "--param", "alsa-e.n_anchors=40")
    auto = next(r for r in rows if r["method"] == "auto")
    default = auto_default_members()
    used = auto["params"]["methods"]
    assert "alsa-e" in default and "alsa-e" not in used
    assert auto["diagnostics"]["left_out"] == [m for m in default if m not in used]
    line = next(x for x in err.splitlines() if "auto combined" in x)
    assert line.startswith(f"note: auto combined {', '.join(used)} instead of its default members")
    assert "alsa-e ran with --param alsa-e.n_anchors=40" in line
    assert "default-parameter estimates" in line and "alsa-bench calibrate" in line
    others = [m for m in auto["diagnostics"]["left_out"] if m != "alsa-e"]
    if others:  # members that ran fine but belong to no calibrated set without alsa-e
        assert f"holds {', '.join(others)} without alsa-e" in line


def test_a_named_auto_says_a_members_param_does_not_reach_it(files):
    _, err = _run("--val", files[0], "--target", files[1], "--method", "auto",
                  "--method", "atc-mc", "--param", "atc-mc.temperature_scaling=false")
    assert ("note: auto ran its members with default parameters (its calibration was fit on "
            "those): --param on atc-mc reached only the method of that name") in err
