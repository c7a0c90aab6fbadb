"""The reproducible mode (tasks/runtime/reproducible.py): every knob is in place where the docs
say, in every kind of process the pipeline starts; the mode is checked, recorded and keyed.

The knobs are read once per process, so each claim about a process is checked in a fresh one
(``subprocess``), reading the libraries' own answers back: torch's CPU capability, MKL's CNR
branch (``mkl_serv_cbwr_get``), OpenBLAS's core (threadpoolctl), numpy's dispatch targets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.runtime import reproducible as rep

ROOT = Path(__file__).resolve().parents[2]
AVX2_HOST = {"avx", "avx2", "fma"} <= rep.cpu_flags()
needs_avx2 = pytest.mark.skipif(not AVX2_HOST, reason="the pinned kernels need AVX2 and FMA")

#: What a fresh process reports after ``setup`` ran: read from the libraries, not the variables.
_PROBE = """
import json, os, sys
{setup}
import numpy, torch
from numpy._core._multiarray_umath import __cpu_features__ as npf
from tasks.runtime.reproducible import _mkl_branch, _openblas_cores
torch.ones(64).sum()  # ATen fixes its capability at the first vectorised kernel
torch.ones(8, 8) @ torch.ones(8, 8)  # MKL at its first call
print(json.dumps({{"aten": str(torch.backends.cpu.get_cpu_capability()).lower(),
                  "mkl": _mkl_branch(), "openblas": _openblas_cores(),
                  "numpy_v4": bool(npf.get("X86_V4", npf.get("AVX512_SKX", False))),
                  "mode": os.environ.get("ALSA_BENCH_REPRODUCIBLE"),
                  "env": {{k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY",
                          "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "OPENBLAS_CORETYPE",
                          "ALSA_BENCH_TEXT_PRECISION")}}}}))
"""

#: A host that "prefers" other kernels than the pinned ones: what another CPU would pick.
_PREFERS = {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "AUTO",
            "OPENBLAS_CORETYPE": "Sandybridge"}


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in (*rep.pinned_environment(), rep.MODE_ENV, "ALSA_BENCH_PINNED_VARS")}
    env.update(extra)
    return env


def _probe(setup: str, env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE.format(setup=setup)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def saved_environ():
    """apply_environment edits os.environ: give it back as it was."""
    before = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(before)


# ------------------------------------------------------------------------------- the values
def test_pinned_values_follow_the_cpu_flags() -> None:
    avx2 = rep.pinned_environment(frozenset({"sse4_2", "avx", "avx2", "fma", "avx512f"}))
    assert (avx2["ATEN_CPU_CAPABILITY"], avx2["ONEDNN_MAX_CPU_ISA"], avx2["OPENBLAS_CORETYPE"]) \
        == ("avx2", "AVX2", "Haswell")
    # MKL honours only COMPATIBLE on a non-Intel CPU (AVX2 would silently be ignored on AMD)
    assert avx2["MKL_CBWR"] == "COMPATIBLE" and avx2["MKL_DYNAMIC"] == "FALSE"
    assert avx2["ALSA_BENCH_TEXT_PRECISION"] == "fp32"
    assert avx2["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    old = rep.pinned_environment(frozenset({"sse4_2", "avx"}))  # no AVX2: the baseline kernels
    assert (old["ATEN_CPU_CAPABILITY"], old["ONEDNN_MAX_CPU_ISA"], old["OPENBLAS_CORETYPE"]) \
        == ("default", "SSE41", "Prescott")
    assert rep.pinned_environment(frozenset())["ATEN_CPU_CAPABILITY"] == "default"


def test_mode_variable_is_read_and_a_bad_value_is_named() -> None:
    assert rep.reproducible_requested({}) is True
    assert rep.reproducible_requested({rep.MODE_ENV: "0"}) is False
    assert rep.reproducible_requested({rep.MODE_ENV: "yes"}) is True
    with pytest.raises(ValueError, match=r"ALSA_BENCH_REPRODUCIBLE must be 1 .* or 0 .*'maybe'"):
        rep.reproducible_requested({rep.MODE_ENV: "maybe"})


def test_apply_replaces_inherited_values_and_fast_takes_back_only_its_own(saved_environ) -> None:
    for name in (*rep.pinned_environment(), "ALSA_BENCH_PINNED_VARS"):
        os.environ.pop(name, None)
    rep._REPLACED.clear()
    os.environ["ATEN_CPU_CAPABILITY"] = "avx512"  # the user's shell
    replaced = rep.apply_environment(True)
    assert replaced == {"ATEN_CPU_CAPABILITY": ("avx512", rep.pinned_environment()[
        "ATEN_CPU_CAPABILITY"])}
    assert rep.replaced_variables() == replaced
    for name, value in rep.pinned_environment().items():
        assert os.environ[name] == value
    assert os.environ[rep.MODE_ENV] == "1"
    assert rep.apply_environment(True) == {}  # again: its own values are not "replaced"
    os.environ["MKL_VERBOSE"] = "0"
    rep.apply_environment(False)
    assert os.environ[rep.MODE_ENV] == "0"
    # the user's own value comes back; the ones the mode added are gone
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx512"
    assert not any(name in os.environ for name in rep.pinned_environment()
                   if name != "ATEN_CPU_CAPABILITY")
    assert os.environ["MKL_VERBOSE"] == "0"
    os.environ.pop("ATEN_CPU_CAPABILITY")
    os.environ["ATEN_CPU_CAPABILITY"] = "default"  # set by the user in fast mode: kept
    rep.apply_environment(False)
    assert os.environ["ATEN_CPU_CAPABILITY"] == "default"


def test_a_fast_run_does_not_make_the_next_run_in_the_process_fast(saved_environ) -> None:
    # a fast run sets ALSA_BENCH_REPRODUCIBLE=0 for the processes it starts; the next run
    # that is not told fast follows the user's own setting, recorded before the first change
    for name in (rep.MODE_ENV, rep._USER_MODE_ENV):
        os.environ.pop(name, None)
    rep.apply_environment(True)  # what importing flows does
    rep.apply_environment(False)  # a run with fast=True
    assert rep.reproducible_requested() is False  # what its workers read
    assert rep.reproducible_by_default() is True  # the user never asked for fast
    rep.apply_environment(rep.reproducible_by_default())
    assert os.environ[rep.MODE_ENV] == "1"
    # the user's own 0 stays the default through any number of runs
    for name in (rep.MODE_ENV, rep._USER_MODE_ENV):
        os.environ.pop(name, None)
    os.environ[rep.MODE_ENV] = "0"
    rep.apply_environment(None)
    rep.apply_environment(True)  # one run asked for the reproducible mode explicitly
    assert rep.reproducible_by_default() is False
    os.environ[rep._USER_MODE_ENV] = "not json"  # unreadable: the default, reproducible
    assert rep.reproducible_by_default() is True


def test_mode_key_differs_between_modes_and_hosts() -> None:
    pinned, fast = rep.current_mode(True), rep.current_mode(False)
    assert pinned.reproducible and not fast.reproducible
    assert pinned != fast and pinned.host == "" and fast.environment == ()
    assert rep.cpu_model() in fast.host
    # a fast result from another CPU is another key; a reproducible one is the same on any CPU
    assert rep.ComputeMode(False, (), "other CPU [avx2]") != fast
    assert rep.settings_tag(pinned).startswith("r") and rep.settings_tag(fast).startswith("f")
    assert rep.settings_tag(pinned) != rep.settings_tag(fast)
    assert "ATEN_CPU_CAPABILITY=" in rep.describe_mode(pinned)


# ------------------------------------------------------------------------------- processes
@needs_avx2
def test_this_test_process_is_pinned() -> None:
    # tests/conftest.py applies the mode before numpy and torch load, as `import flows` does
    import torch

    settings = rep.effective_settings()
    assert settings["aten_cpu_capability"] == "avx2" == str(
        torch.backends.cpu.get_cpu_capability()).lower()
    assert settings["mkl_cbwr"] == "COMPATIBLE"
    assert settings["openblas_cores"] == ["Haswell"]


@needs_avx2
def test_importing_flows_pins_a_fresh_process_whatever_the_host_prefers() -> None:
    got = _probe("import flows", _clean_env(**_PREFERS))
    assert (got["aten"], got["mkl"], got["openblas"], got["mode"]) == (
        "avx2", "COMPATIBLE", ["Haswell"], "1")
    assert got["numpy_v4"] is False  # numpy's AVX-512 loops off: another CPU's exp and log
    assert got["env"]["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert got["env"]["ALSA_BENCH_TEXT_PRECISION"] == "fp32"


def test_fast_mode_leaves_the_host_its_own_kernels() -> None:
    bare = _probe("", _clean_env())  # what this CPU picks with nothing set
    fast = _probe("import flows", _clean_env(ALSA_BENCH_REPRODUCIBLE="0"))
    assert (fast["aten"], fast["mkl"], fast["openblas"]) == (
        bare["aten"], bare["mkl"], bare["openblas"])
    assert fast["mode"] == "0" and fast["env"]["ONEDNN_MAX_CPU_ISA"] is None
    # a value the user set stays in fast mode
    kept = _probe("import flows", _clean_env(ALSA_BENCH_REPRODUCIBLE="0",
                                             ATEN_CPU_CAPABILITY="default"))
    assert kept["aten"] == "default"
    # `alsa-bench run --fast`: `import flows` pinned over the user's value, the flag gives it back
    given_back = _probe("import flows.cli\nflows.cli._apply_compute_mode(True)",
                        _clean_env(ATEN_CPU_CAPABILITY="default"))
    assert given_back["aten"] == "default" and given_back["mode"] == "0"


@needs_avx2
def test_the_cli_fast_flag_takes_the_pins_back_before_torch_computes() -> None:
    # `alsa-bench run --fast`: `import flows` pinned the process, the flag takes it back
    bare = _probe("", _clean_env())
    got = _probe("import flows.cli\nflows.cli._apply_compute_mode(True)", _clean_env())
    assert (got["aten"], got["mkl"], got["mode"]) == (bare["aten"], bare["mkl"], "0")
    pinned = _probe("import flows.cli\nflows.cli._apply_compute_mode(False)", _clean_env())
    assert (pinned["aten"], pinned["mkl"]) == ("avx2", "COMPATIBLE")


@needs_avx2
def test_a_local_dask_worker_inherits_the_pins() -> None:
    # run_pipeline applies the mode before it starts the local cluster; its workers are fresh
    # processes, started with the flow process's environment
    setup = """
from tasks.runtime.reproducible import apply_environment
apply_environment(True)
from distributed import Client, LocalCluster
def ask():
    import torch
    from tasks.runtime.reproducible import _mkl_branch, _openblas_cores
    torch.ones(64).sum(); torch.ones(8, 8) @ torch.ones(8, 8)
    return str(torch.backends.cpu.get_cpu_capability()).lower(), _mkl_branch(), _openblas_cores()
with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                  dashboard_address=None) as cluster, Client(cluster) as client:
    print(json.dumps(client.submit(ask).result()))
    sys.exit(0)
"""
    done = subprocess.run([sys.executable, "-c", "import json, sys\n" + setup], cwd=ROOT,
                          env=_clean_env(**_PREFERS), capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["avx2", "COMPATIBLE",
                                                                 ["Haswell"]]


@needs_avx2
def test_a_process_that_computed_before_the_pin_is_refused_in_one_line() -> None:
    script = """
import torch
torch.ones(64).sum()  # ATen fixed its capability: the host's
from tasks.runtime.reproducible import (ReproducibilityError, apply_environment, compute_mode,
                                         current_mode)
apply_environment(True)
try:
    with compute_mode(current_mode(True)):
        pass
except ReproducibilityError as exc:
    print(str(exc))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT,
                          env=_clean_env(ATEN_CPU_CAPABILITY="default"), capture_output=True,
                          text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    message = done.stdout.strip()
    assert "cannot compute in the reproducible mode" in message
    assert "torch runs its default kernels (the mode pins avx2)" in message
    assert "--fast" in message and "\n" not in message


def test_compute_mode_sets_the_torch_switches_and_restores_them() -> None:
    import torch
    import torch.utils.deterministic

    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.mkldnn.enabled,
              torch._C._get_nnpack_enabled(), torch.utils.deterministic.fill_uninitialized_memory)
    mode = rep.current_mode(True) if AVX2_HOST else rep.FAST
    with rep.compute_mode(mode):
        if mode.reproducible:
            assert torch.are_deterministic_algorithms_enabled()
            assert torch.is_deterministic_algorithms_warn_only_enabled()
            # convolutions through ATen's own kernels, not oneDNN's cache-sized blocking
            assert not torch.backends.mkldnn.enabled and not torch._C._get_nnpack_enabled()
            assert torch.utils.deterministic.fill_uninitialized_memory is False
            from tasks.runtime.pinned_gemm import products_available

            assert rep.effective_settings()["convolutions"] == (
                "openblas-patches" if products_available() else "aten")
    after = (torch.are_deterministic_algorithms_enabled(), torch.backends.mkldnn.enabled,
             torch._C._get_nnpack_enabled(), torch.utils.deterministic.fill_uninitialized_memory)
    assert after == before
    with pytest.raises(TypeError, match="mode must be a ComputeMode"):
        with rep.compute_mode("reproducible"):  # type: ignore[arg-type]
            pass


@needs_avx2
def test_convolutions_give_the_same_bits_through_aten_whatever_onednn_would_pick() -> None:
    # the reproducible mode runs convolutions on ATen's kernels (training) and on the pinned
    # OpenBLAS (inference): what oneDNN's ISA (and its cache-sized blocking) would pick no
    # longer matters
    script = """
import hashlib, torch
from tasks.runtime.reproducible import deterministic_torch
torch.manual_seed(0)
conv = torch.nn.Conv2d(3, 8, 5)
x = torch.randn(32, 3, 28, 28).contiguous(memory_format=torch.channels_last)
with deterministic_torch():
    out = conv(x)
    out.square().sum().backward()
    with torch.inference_mode():  # the extract stage's path: tasks/runtime/pinned_conv.py
        infer = conv(x)
data = out.detach().numpy().tobytes() + conv.weight.grad.numpy().tobytes() + infer.numpy().tobytes()
print(hashlib.sha256(data).hexdigest())
"""
    digests = set()
    for isa in ("SSE41", "AVX2", "AVX512_CORE"):
        env = _clean_env(**{**rep.pinned_environment(), "ONEDNN_MAX_CPU_ISA": isa})
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=False, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        digests.add(done.stdout.strip())
    assert len(digests) == 1


def test_pinned_threads_are_fixed_whatever_the_core_count(monkeypatch) -> None:
    from tasks.plan import resolve_threads
    from tasks.runtime.threads import default_threads_per_task

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert default_threads_per_task(0, reproducible=True) == rep.PINNED_THREADS
    assert default_threads_per_task(4, reproducible=True) == rep.PINNED_THREADS
    assert default_threads_per_task(0) == 64 and default_threads_per_task(4) == 16
    assert resolve_threads(None, 0, reproducible=True) == rep.PINNED_THREADS
    assert resolve_threads(7, 0, reproducible=True) == 7  # an explicit count wins
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert default_threads_per_task(0, reproducible=True) == 1


def test_printing_the_variables_for_a_hand_started_worker() -> None:
    done = subprocess.run([sys.executable, "-m", "tasks.runtime.reproducible"], cwd=ROOT,
                          env=_clean_env(), capture_output=True, text=True, check=True,
                          timeout=120)
    lines = done.stdout.strip().splitlines()
    assert "export ALSA_BENCH_REPRODUCIBLE='1'" in lines
    for name, value in rep.pinned_environment().items():
        assert f"export {name}='{value}'" in lines
    # the lines work in a shell: eval them and read one back
    script = f'eval "{done.stdout}"; echo "$NPY_DISABLE_CPU_FEATURES"'
    shell = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert shell.stdout.strip() == rep.pinned_environment()["NPY_DISABLE_CPU_FEATURES"]
