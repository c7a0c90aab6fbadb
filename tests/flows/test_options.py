"""Every run option is declared once, in :class:`tasks.plan.RunOptions`; these tests fail when
the CLI, a Prefect flow's parameters or ``prefect.yaml`` drift from it.

A new option is one field of ``RunOptions`` (with ``help`` and, if it is on the command line,
its flags); the ``benchmark`` flow then needs the parameter of the same name and default.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import MISSING
from pathlib import Path

import pytest
import yaml
from typer.main import get_command

from flows.cli import app
from tasks.plan import PIPELINE_OPTIONS, BenchmarkPlan, RunOptions, run_option_fields

ROOT = Path(__file__).resolve().parents[2]

#: Parameters a stage flow has besides RunOptions' fields: ``refresh`` re-runs that stage only
#: (a bool, unlike the benchmark's list of stages); the rest are the flow's own subject.
STAGE_OWN: dict[str, dict[str, object]] = {
    "flows.download:download": {"refresh": False},
    "flows.train:train": {"refresh": False},
    "flows.extract:extract": {"refresh": False},
    "flows.estimate:estimate": {"refresh": False},
    "flows.ablations:ablations": {
        "refresh": False, "method": "alsa-g", "freeze": True, "alphas": None,
        "anchor_counts": None, "base_params": None,
    },
    "flows.report:report": {"run_keys": None},
}


def _flow(entry: str):
    module, name = entry.split(":")
    return getattr(importlib.import_module(module), name)


def _parameters(flow) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(flow.fn).parameters)


def _flow_default(f) -> object:
    return f.metadata.get("flow_default", f.default)


def _fields() -> dict[str, object]:
    return {f.name: f for f in run_option_fields()}


def test_every_option_has_a_help_line_and_a_plain_default() -> None:
    for f in run_option_fields():
        assert f.metadata["help"].strip() and "\n" not in f.metadata["help"], f.name
        assert f.default is not MISSING, f.name
        assert not isinstance(f.default, (list, dict, set)), f.name


def test_cli_run_options_are_run_options_fields() -> None:
    run = get_command(app).commands["run"]
    by_flag = {flag: f for f in run_option_fields(cli=True)
               for flags in f.metadata["cli"] for flag in flags.split("/")}
    seen = set()
    for param in run.params:
        if param.name == "help":
            continue
        flag = param.opts[0]
        assert flag in by_flag, f"CLI option {flag} has no RunOptions field"
        f = by_flag[flag]
        seen.add(f.name)
        assert param.help == f.metadata["help"], flag
        assert param.default == f.default, flag
        assert sorted(param.opts + param.secondary_opts) == sorted(
            o for flags in f.metadata["cli"] for o in flags.split("/")
        ), flag
    assert seen == {f.name for f in run_option_fields(cli=True)}


def test_suite_help_lists_every_registered_suite() -> None:
    from tasks.data.datasets import available_suites

    help_text = _fields()["suite"].metadata["help"]
    for suite in available_suites():
        assert suite in help_text


def test_benchmark_flow_parameters_are_the_flow_fields() -> None:
    params = _parameters(_flow("flows.benchmark:benchmark"))
    flow_fields = {f.name: f for f in run_option_fields(flow=True)}
    assert set(params) == set(flow_fields)
    for name, p in params.items():
        assert p.default == _flow_default(flow_fields[name]), name


def test_pipeline_flow_takes_the_pipeline_options_by_name() -> None:
    params = _parameters(_flow("flows.benchmark:pipeline_flow"))
    assert set(params) == {"plan", "until", "threads", "distributed", "gpu", *PIPELINE_OPTIONS}
    assert set(PIPELINE_OPTIONS) <= {f.name for f in run_option_fields(flow=True)}
    assert set(RunOptions().pipeline_kwargs()) == set(PIPELINE_OPTIONS)


@pytest.mark.parametrize("entry", sorted(STAGE_OWN))
def test_stage_flow_parameters_match_run_options(entry: str) -> None:
    fields = _fields()
    own = STAGE_OWN[entry]
    for name, p in _parameters(_flow(entry)).items():
        if name in own:
            assert p.default == own[name], (entry, name)
            continue
        assert name in fields and fields[name].metadata["flow"], (entry, name)
        assert p.default == _flow_default(fields[name]), (entry, name)


def test_prefect_yaml_parameters_are_flow_parameters() -> None:
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    for deployment in spec["deployments"]:
        path, name = deployment["entrypoint"].split(":")
        entry = f"{path.removesuffix('.py').replace('/', '.')}:{name}"
        params = _parameters(_flow(entry))
        for key in deployment.get("parameters") or {}:
            assert key in params, (deployment["name"], key)
        if entry == "flows.benchmark:benchmark":
            fields = {f.name for f in run_option_fields(flow=True)}
            assert set(deployment.get("parameters") or {}) <= fields, deployment["name"]


def test_flow_kwargs_are_what_the_cli_passed_before() -> None:
    plan = BenchmarkPlan(suite="fmnist", datasets=("fmnist",), backbones=("lenet",), seeds=(0, 1))
    assert RunOptions().flow_kwargs(plan) == {
        "suite": "fmnist", "backbones": ["lenet"], "seeds": [0, 1], "datasets": ["fmnist"],
        "refresh": None,
    }
    options = RunOptions(
        suite=["fmnist"], seed=[0, 1], refresh=["estimate"], methods=["alsa-g"],
        method_params={"alsa-g": {"alpha": 0.9}}, epochs=2, device="cpu", workers=2,
        threads_per_task=1, publish_artifacts=False, ablations=True, wait=5.0,
    )
    assert options.flow_kwargs(plan) == {
        "suite": "fmnist", "backbones": ["lenet"], "seeds": [0, 1], "datasets": ["fmnist"],
        "refresh": ["estimate", "report"], "methods": ["alsa-g"],
        "method_params": {"alsa-g": {"alpha": 0.9}}, "epochs": 2, "device": "cpu",
        "workers": 2, "threads_per_task": 1, "publish_artifacts": False,
    }
