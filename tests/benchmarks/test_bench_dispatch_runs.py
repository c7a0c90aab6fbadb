"""``benchmarks/bench_dispatch_runs.py``: the per-backbone cost table of two configurations.

Running the configurations is a benchmark (a whole ``alsa-bench run`` each, recorded in
docs/PERFORMANCE.md); these tests cover how the table reads a state folder and what it prints,
on hand-made state folders.
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
from benchmarks import bench_dispatch_runs as bdr


def _state(home: Path, runs: list[tuple[str, str, str, float | None]], log: str) -> Path:
    home.mkdir(parents=True)
    con = duckdb.connect(str(home / "bench.duckdb"))
    con.execute("CREATE TABLE runs (run_key VARCHAR, suite VARCHAR, backbone VARCHAR, "
                "train_seconds DOUBLE)")
    con.executemany("INSERT INTO runs VALUES (?, ?, ?, ?)", runs)
    con.close()
    (home / "run.log").write_text(log)
    return home


def _extract_line(key: str, seconds: float) -> str:
    # the extract stage's own log line (tasks/stages/extract.py), as `alsa-bench run` prints it
    return (f"08:00:00.000 | INFO    | tasks.stages.extract - {key}: logits of 24 splits "
            f"(210000 rows) computed in {seconds:.1f} s, published in 0.3 s as x.parquet\n")


def test_stage_costs_sum_each_backbone_from_the_database_and_the_log(tmp_path: Path) -> None:
    home = _state(
        tmp_path / "pinned",
        [("fmnist.lenet.s0", "fmnist", "lenet", 10.0), ("fmnist.lenet.s1", "fmnist", "lenet", 12.5),
         ("arxiv-sim.gcn.s0", "graph", "gcn", 3.0)],
        _extract_line("fmnist.lenet.s0", 2.0) + "unrelated line computed in 99.0 s\n"
        + _extract_line("fmnist.lenet.s1", 1.0) + _extract_line("fmnist.lenet.s1", 1.5)
        + _extract_line("arxiv-sim.gcn.s0", 0.4),
    )
    costs = bdr.stage_costs(home)
    assert list(costs) == ["fmnist/lenet", "graph/gcn"]  # sorted by suite, then backbone
    assert costs["fmnist/lenet"] == {"runs": 2, "train": 22.5, "extract": 3.5}  # s1's last line
    assert costs["graph/gcn"] == {"runs": 1, "train": 3.0, "extract": 0.4}


def test_a_run_without_a_time_is_nan_not_zero(tmp_path: Path) -> None:
    home = _state(tmp_path / "s", [("d.mlp.s0", "fmnist", "mlp", None)], "")
    costs = bdr.stage_costs(home)["fmnist/mlp"]
    assert costs["runs"] == 1
    assert math.isnan(costs["train"]) and math.isnan(costs["extract"])


def test_cost_table_gives_each_backbone_and_the_total_against_the_first() -> None:
    costs = {
        "pinned": {"fmnist/lenet": {"runs": 3, "train": 30.0, "extract": 6.0},
                   "graph/gcn": {"runs": 3, "train": 12.0, "extract": 3.0}},
        "fast": {"fmnist/lenet": {"runs": 3, "train": 10.0, "extract": 2.0},
                 "graph/gcn": {"runs": 3, "train": 10.0, "extract": 3.0}},
    }
    lines = bdr.cost_table(costs)
    assert lines[0].split()[:4] == ["configuration", "backbone", "runs", "train"]
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in lines[1:]}
    assert rows[("pinned", "fmnist/lenet")] == ["3", "30.0", "1.00x", "6.0", "1.00x"]
    assert rows[("fast", "fmnist/lenet")] == ["3", "10.0", "0.33x", "2.0", "0.33x"]
    assert rows[("fast", "graph/gcn")] == ["3", "10.0", "0.83x", "3.0", "1.00x"]
    assert rows[("fast", "(all)")] == ["6", "20.0", "0.48x", "5.0", "0.56x"]  # 20/42, 5/9


def test_cost_table_marks_a_backbone_the_first_configuration_lacks() -> None:
    lines = bdr.cost_table({
        "pinned": {"fmnist/lenet": {"runs": 1, "train": 2.0, "extract": 1.0}},
        "fast": {"fmnist/lenet": {"runs": 1, "train": 1.0, "extract": 1.0},
                 "text/minilm-mlp": {"runs": 1, "train": 4.0, "extract": 8.0}},
    })
    row = next(line for line in lines if "text/minilm-mlp" in line).split()
    assert row[2:] == ["1", "4.0", "-", "8.0", "-"]
    # the total compares only what both configurations ran
    total = next(line for line in lines if line.startswith("fast") and "(all)" in line).split()
    assert total[3] == "5.0" and total[4] == "0.50x"  # 1.0 against 2.0

