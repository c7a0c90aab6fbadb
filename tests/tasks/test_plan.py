"""tasks.plan: run options and their checks, seeds, plans, and no Prefect or torch on import."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import FrozenInstanceError

import pytest

from tasks.plan import (
    FULL_SEEDS,
    RunOptions,
    check_until,
    last_stage_needs_runs,
    make_plan,
    make_plans,
    plan_methods,
    resolve_threads,
    seeds_list,
)


def test_import_needs_neither_prefect_nor_torch() -> None:
    code = ("import sys, tasks.plan; "
            "print(sorted(m for m in ('prefect', 'torch', 'flows') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_run_options_are_frozen_with_the_cli_defaults() -> None:
    options = RunOptions()
    assert (options.device, options.batch_size, options.workers, options.wait) == (
        "auto", 1024, 0, 0)
    assert options.publish_artifacts is True and options.full is False
    with pytest.raises(FrozenInstanceError):
        options.device = "cpu"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 2, "dask_address": "tcp://h:1"}, "give either --workers"),
        ({"dask_address": "localhost:8786"}, "--dask-address must be a scheduler address"),
    ],
)
def test_scale_out_mistakes_are_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        RunOptions(**kwargs).check_scale_out()
    RunOptions(workers=2).check_scale_out()
    RunOptions(dask_address="tcp://10.0.0.5:8786").check_scale_out()


def test_seed_selection() -> None:
    assert RunOptions().seed_selection() is None
    assert RunOptions(seed=[2, 5]).seed_selection() == [2, 5]
    assert RunOptions(seeds=3).seed_selection() == 3
    with pytest.raises(ValueError, match="either --seed"):
        RunOptions(seed=[1], seeds=2).seed_selection()
    with pytest.raises(ValueError, match="--seeds must be a count >= 1; got 0"):
        RunOptions(seeds=0).seed_selection()


def test_seeds_list() -> None:
    assert seeds_list(2) == [0, 1]
    assert seeds_list([4, 1]) == [4, 1]
    for bad in (0, True, [], [1, 1], [-1]):
        with pytest.raises(ValueError, match="seeds must be"):
            seeds_list(bad)


def test_plans_default_and_full_seeds() -> None:
    assert make_plan("fmnist", backbones=["lenet"]).seeds == (0,)
    assert make_plan("fmnist", backbones=["lenet"], full=True).seeds == tuple(range(FULL_SEEDS))
    with pytest.raises(ValueError, match="suite must be one of"):
        make_plans(["nope"])
    with pytest.raises(ValueError, match="must not repeat"):
        make_plan("fmnist", backbones=["lenet", "lenet"])


def test_plan_methods_checks_names_once_and_keeps_what_applies() -> None:
    graph = make_plan("graph", backbones=["gcn"])
    assert plan_methods(graph, None) is None
    assert plan_methods(graph, ["gnnevaluator", "ac"]) == ["gnnevaluator", "ac"]
    with pytest.raises(ValueError, match=r"Unknown estimator\(s\) \['magic'\]"):
        plan_methods(graph, ["magic"])
    fmnist = make_plan("fmnist", backbones=["lenet"])
    with pytest.raises(ValueError, match="none of the methods gnnevaluator applies to suite"):
        plan_methods(fmnist, ["gnnevaluator"])


def test_pipeline_checks() -> None:
    assert check_until("estimate") == 3
    with pytest.raises(ValueError, match="until must be one of"):
        check_until("fit")
    assert not last_stage_needs_runs("download") and last_stage_needs_runs("train")
    assert resolve_threads(3, 0) == 3 and resolve_threads(None, 1) >= 1
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="threads_per_task must be an integer >= 1"):
            resolve_threads(bad, 0)  # type: ignore[arg-type]
