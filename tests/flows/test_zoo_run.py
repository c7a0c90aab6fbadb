"""One zoo dataset end to end through ``alsa-bench run --suite zoo``: the group expands, the
dataset filter keeps one suite, every stage runs under Prefect and the estimates land."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.flow


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_run_suite_zoo_on_one_graph_dataset(prefect_server, state_home) -> None:
    from flows.cli import app
    from storage import connect, read_report_rows
    from tasks.data.targets import target_splits

    result = CliRunner().invoke(app, [
        "run", "--suite", "zoo", "--dataset", "zoo-sbm", "--backbone", "gcn", "--epochs", "3",
        "--method", "ac", "--method", "atc-mc", "--no-artifacts",
    ])
    assert result.exit_code == 0, result.output
    assert "alsa-bench run: suite zoo-graph, datasets zoo-sbm, backbones gcn" in result.output
    assert "zoo-image" not in result.output and "zoo-text" not in result.output
    assert "Suite zoo-graph finished" in result.output
    with connect(read_only=True) as con:
        rows = read_report_rows(con, suite="zoo-graph")
    assert set(rows["run_key"]) == {"zoo-sbm.gcn.s0"}
    assert set(rows["method"]) == {"ac", "atc-mc"}
    assert set(rows["split"]) == {s.name for s in target_splits("zoo-sbm")}
    assert {"clean", "label_shift", "temporal", "structural"} <= set(rows["shift_family"])
    assert rows["estimated_accuracy"].between(0, 1).all()
    assert rows["true_accuracy"].between(0, 1).all()
