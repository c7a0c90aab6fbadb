"""The ``alsa-bench`` command line: help texts, and one clear line for user mistakes."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from flows.cli import app


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.mark.parametrize("command", [[], ["run"], ["report"], ["estimate"]])
def test_help_of_every_command(runner: CliRunner, command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


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
    assert "backbone must be one of lenet, mlp, resnet" in line and "'vgg'" in line


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
