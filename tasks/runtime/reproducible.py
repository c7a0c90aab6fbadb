"""The reproducible mode: the same bits on any x86-64 CPU with AVX2, or a record of why not.

A model trained on two CPUs differs as soon as one floating-point sum is added in another order,
and training amplifies that first bit. On the CPU the order is chosen, per process, by five
libraries, each from the CPU it finds (measured in ``docs/PERFORMANCE.md``, "Same numbers on any
machine"):

=================================  ===============================  ========================
what picks a kernel                what pins it                     pinned value
=================================  ===============================  ========================
ATen's vectorised kernels          ``ATEN_CPU_CAPABILITY``          ``avx2``
(reductions, elementwise, Sleef)
oneDNN (convolutions, pooling)     ``ONEDNN_MAX_CPU_ISA``           ``AVX2``
MKL inside torch (other GEMMs)     ``MKL_CBWR``, ``MKL_DYNAMIC``    ``COMPATIBLE``, ``FALSE``
OpenBLAS inside numpy and scipy,   ``OPENBLAS_CORETYPE``            ``Haswell``
and torch's linear layers in this
mode (and, for speed only, its     ``OPENBLAS_THREAD_TIMEOUT``      ``4``
threads' busy wait)
numpy's SIMD loops (exp, log)      ``NPY_DISABLE_CPU_FEATURES``     every target above AVX2
the text encoder's precision       ``ALSA_BENCH_TEXT_PRECISION``    ``fp32`` (bf16 needs
                                                                    AVX512-BF16 or AMX)
=================================  ===============================  ========================

plus, inside each stage task, torch's linear layers and the 2-D convolutions that want no
gradient computed by that pinned OpenBLAS (:mod:`tasks.runtime.pinned_gemm`: 2.8x faster than
MKL's ``COMPATIBLE`` GEMM here; :mod:`tasks.runtime.pinned_conv`: im2col of a few images, then
one product, 2.4-3.7x faster than ATen's own convolution, which training keeps),
``torch.use_deterministic_algorithms(True)`` (and on CUDA
cuDNN's deterministic kernels, no autotuning, no TF32, ``CUBLAS_WORKSPACE_CONFIG=:4096:8``)
and a fixed thread count (:data:`PINNED_THREADS`, whatever the core count: a reduction split
over 16 threads adds in another order than over 2). MKL honours only ``COMPATIBLE`` on a
non-Intel CPU (``AVX2`` is silently ignored on AMD), so ``COMPATIBLE`` is the one branch that
gives the same GEMM on Intel and AMD.

Every knob is read **once per process**: ATen's at its first vectorised kernel, oneDNN's at its
first primitive, MKL's at its first call, OpenBLAS's and numpy's when the library loads. So
the variables must be in the environment before the process computes anything.
:func:`apply_environment` is the one function that puts them there; it runs

* when :mod:`flows` is imported (before it imports numpy): the first thing the ``alsa-bench``
  command, ``python -m flows...`` and every Prefect deployment run execute;
* in :func:`flows.benchmark.run_pipeline`, with the run's ``--fast`` choice, before any task
  runs or a local Dask cluster starts (its workers inherit the environment).

A process that computed before (a test session, a ``dask worker`` started by hand without the
variables) cannot be pinned any more: :func:`compute_mode` checks, at the start of every train,
extract and estimate task, that the process really computes as the run asks, and fails with
one line naming the knob and the remedy instead of producing unrecorded numbers.

``ALSA_BENCH_REPRODUCIBLE=0`` (or ``alsa-bench run --fast``) turns the mode off: the libraries
then pick this CPU's fastest kernels, the variables this module set are taken back (a value the
user set stays), and the numbers differ from another CPU's. The mode is part of the train,
extract and estimate tasks' cache keys (:class:`ComputeMode`); the settings each run was
computed with, the CPU model and its flags are stored in its ``runs`` row
(:func:`effective_settings`) and shown in the report.

A CPU without AVX2 and FMA cannot run the pinned kernels: there the mode pins the baseline
(``default``, ``SSE41``, ``Prescott``), records it, and ``alsa-bench report --compare`` names
it as the reason a difference is expected.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

__all__ = [
    "FAST",
    "MODE_ENV",
    "PINNED_THREADS",
    "ComputeMode",
    "ReproducibilityError",
    "apply_environment",
    "compute_mode",
    "cpu_flags",
    "cpu_model",
    "current_mode",
    "describe_mode",
    "deterministic_torch",
    "effective_settings",
    "pinned_environment",
    "replaced_variables",
    "reproducible_by_default",
    "reproducible_requested",
    "settings_tag",
]

#: ``1`` (default): the reproducible mode; ``0``: let each library pick this CPU's kernels.
MODE_ENV: Final[str] = "ALSA_BENCH_REPRODUCIBLE"
#: The user's own ``$ALSA_BENCH_REPRODUCIBLE`` before :func:`apply_environment` first set it, as
#: JSON (a string, or null where it was unset): a fast run sets the variable to ``0`` for the
#: processes it starts, and a later run in the same process must still follow the user's
#: choice, not the earlier run's (:func:`reproducible_by_default`).
_USER_MODE_ENV: Final[str] = "ALSA_BENCH_USER_REPRODUCIBLE"
#: The variables :func:`apply_environment` set, as JSON ``{name: the value it replaced, or
#: null}``, so that a later call (and a child process) can tell them from values the user set,
#: and the fast mode can give the user's values back.
_OURS_ENV: Final[str] = "ALSA_BENCH_PINNED_VARS"
#: Torch/BLAS threads of a task in the reproducible mode, whatever the core count: the count
#: ``docs/BENCHMARK.md`` was computed with (a lower ``$OMP_NUM_THREADS`` or an explicit
#: ``--threads-per-task`` wins, and is recorded).
PINNED_THREADS: Final[int] = 2
#: How long OpenBLAS's idle threads wait busily for the next call (2**4 cycles, its minimum;
#: default 2**28, about 0.1 s). Not a numerical knob: in this mode torch's linear layers call
#: OpenBLAS between its own OpenMP regions (:mod:`tasks.runtime.pinned_gemm`), and a waiting
#: OpenBLAS thread beside torch's two on 2 cores made a pipeline's MLP and LeNet training 9-13x
#: and 4x slower, in about half of the runs.
OPENBLAS_THREAD_TIMEOUT: Final[str] = "4"
#: cuBLAS's workspace setting that makes its GEMMs deterministic (read when cuBLAS starts).
CUBLAS_WORKSPACE: Final[str] = ":4096:8"

#: The CPU flags the pinned (AVX2) kernels need: ATen's AVX2 capability asks for AVX2 and FMA3,
#: OpenBLAS's Haswell kernels for AVX2 and FMA.
_AVX2_FLAGS: Final[frozenset[str]] = frozenset({"avx", "avx2", "fma"})
#: CPU flags shown in the report header (the ones that change which kernels run).
SIMD_FLAGS: Final[tuple[str, ...]] = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
)
_MKL_BRANCHES: Final[dict[int, str]] = {
    0: "OFF", 1: "BRANCH_OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1",
    8: "SSE4_2", 9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1",
    14: "AVX512_E1",
}


class ReproducibilityError(RuntimeError):
    """The process does not compute as the run's mode asks (it was pinned too late)."""


# ------------------------------------------------------------------------------------ the host
@lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    model, flags = "", frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = frozenset(value.split())
                if model and flags:
                    break
    except OSError:
        pass
    return model or platform.processor() or platform.machine() or "unknown", flags


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else :func:`platform.processor`)."""
    return _cpuinfo()[0]


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux names them (``avx2``, ``avx512f``, ...); empty where
    ``/proc/cpuinfo`` cannot be read."""
    return _cpuinfo()[1]


def _numpy_targets_above_avx2() -> str:
    """numpy's dispatch targets above x86-64-v3, in the installed numpy's own names (read from
    its metadata: numpy must not be imported before the variable is set)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = int(version("numpy").split(".")[0])
    except (PackageNotFoundError, ValueError):
        major = 2
    if major >= 2:
        # numpy >= 2.3 groups AVX-512 as X86_V4 and the later extensions
        try:
            minor = int(version("numpy").split(".")[1])
        except (PackageNotFoundError, ValueError, IndexError):
            minor = 0
        if minor >= 3:
            return "X86_V4 AVX512_ICL AVX512_SPR"
    return "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"


def pinned_environment(flags: frozenset[str] | None = None) -> dict[str, str]:
    """The variables of the reproducible mode and their values on a CPU with ``flags``.

    Parameters
    ----------
    flags : frozenset of str, optional
        CPU flags; default this CPU's (:func:`cpu_flags`). Without AVX2 and FMA (or where the
        flags cannot be read) the baseline kernels are pinned instead.

    Returns
    -------
    dict of str to str

    Examples
    --------
    >>> env = pinned_environment(frozenset({"avx", "avx2", "fma"}))
    >>> env["ATEN_CPU_CAPABILITY"], env["ONEDNN_MAX_CPU_ISA"], env["MKL_CBWR"]
    ('avx2', 'AVX2', 'COMPATIBLE')
    >>> pinned_environment(frozenset({"sse4_2"}))["ATEN_CPU_CAPABILITY"]
    'default'
    """
    flags = cpu_flags() if flags is None else flags
    avx2 = _AVX2_FLAGS <= flags and platform.machine().lower() in ("x86_64", "amd64", "")
    return {
        "ATEN_CPU_CAPABILITY": "avx2" if avx2 else "default",
        "ONEDNN_MAX_CPU_ISA": "AVX2" if avx2 else "SSE41",
        "MKL_CBWR": "COMPATIBLE",
        "MKL_DYNAMIC": "FALSE",
        "OPENBLAS_CORETYPE": "Haswell" if avx2 else "Prescott",
        "OPENBLAS_THREAD_TIMEOUT": OPENBLAS_THREAD_TIMEOUT,
        "NPY_DISABLE_CPU_FEATURES": _numpy_targets_above_avx2(),
        "ALSA_BENCH_TEXT_PRECISION": "fp32",
        "CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE,
    }


def reproducible_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``$ALSA_BENCH_REPRODUCIBLE`` asks for the reproducible mode (default: yes).

    Raises
    ------
    ValueError
        If the variable holds anything but 1/0, true/false, yes/no, on/off.
    """
    value = (os.environ if environ is None else environ).get(MODE_ENV, "1").strip().lower()
    if value in ("1", "true", "yes", "on", ""):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{MODE_ENV} must be 1 (reproducible mode) or 0 (fast: this CPU's own "
                     f"kernels); got {value!r}.")


def reproducible_by_default() -> bool:
    """The mode a run takes when it is not told ``fast``: :func:`reproducible_requested` of the
    user's own ``$ALSA_BENCH_REPRODUCIBLE``, as it was before :func:`apply_environment` first
    set it in this process or its parent. A run with ``fast=True`` sets the variable to ``0``
    for the processes it starts (a Dask worker must agree with it); the next run in the same
    process is reproducible again unless the user asked otherwise.

    Examples
    --------
    >>> import os
    >>> saved = {k: os.environ.get(k) for k in (MODE_ENV, _USER_MODE_ENV)}
    >>> os.environ[MODE_ENV], os.environ[_USER_MODE_ENV] = "0", "null"  # a fast run's doing
    >>> reproducible_requested(), reproducible_by_default()
    (False, True)
    >>> for k, v in saved.items():
    ...     _ = os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    """
    recorded = os.environ.get(_USER_MODE_ENV)
    if recorded is None:
        return reproducible_requested()
    try:
        user = json.loads(recorded)
    except ValueError:
        user = None
    env = {MODE_ENV: user} if isinstance(user, str) else {}
    return reproducible_requested(env)


def apply_environment(reproducible: bool | None = None) -> dict[str, tuple[str, str]]:
    """Put the mode's variables in this process's environment (inherited by its children).

    Reproducible: every variable of :func:`pinned_environment` is set to its pinned value, also
    over a value inherited from the shell (the mode is one fixed set of settings, the ones
    ``docs/BENCHMARK.md`` was computed with). Fast: the variables an earlier call set are
    taken back, and a value of the user's that it replaced is given back; a value the user set
    is left as it is. ``$ALSA_BENCH_REPRODUCIBLE`` is set to the mode, so processes started
    later agree.

    Parameters
    ----------
    reproducible : bool, optional
        The mode; default :func:`reproducible_requested`.

    Returns
    -------
    dict of str to (str, str)
        The variables whose inherited value was replaced: name -> (old, new).
    """
    if reproducible is None:
        reproducible = reproducible_requested()
    try:
        ours = json.loads(os.environ.get(_OURS_ENV, "") or "{}")
    except ValueError:
        ours = {}
    ours = ours if isinstance(ours, dict) else {}
    replaced: dict[str, tuple[str, str]] = {}
    if reproducible:
        for name, value in pinned_environment().items():
            old = os.environ.get(name)
            if name not in ours:
                ours[name] = old  # the user's value (or None), given back by the fast mode
                if old is not None and old != value:
                    replaced[name] = (old, value)
            os.environ[name] = value
    else:
        for name, old in ours.items():
            if isinstance(old, str):
                os.environ[name] = old
            else:
                os.environ.pop(name, None)
        ours = {}
    if _USER_MODE_ENV not in os.environ:
        os.environ[_USER_MODE_ENV] = json.dumps(os.environ.get(MODE_ENV))
    os.environ[MODE_ENV] = "1" if reproducible else "0"
    if ours:
        os.environ[_OURS_ENV] = json.dumps(ours, sort_keys=True)
    else:
        os.environ.pop(_OURS_ENV, None)
    _REPLACED.update(replaced)
    return replaced


#: Inherited values :func:`apply_environment` replaced in this process, for the run's log.
_REPLACED: dict[str, tuple[str, str]] = {}


def replaced_variables() -> dict[str, tuple[str, str]]:
    """The inherited values the reproducible mode replaced in this process: name -> (old,
    new); the pipeline logs them, since the user may have set one on purpose."""
    return dict(_REPLACED)


# ------------------------------------------------------------------------------------ the mode
@dataclass(frozen=True)
class ComputeMode:
    """How a stage task must compute: an input of the train, extract and estimate tasks, so a
    result of one mode is never served from the cache to another.

    Attributes
    ----------
    reproducible : bool
        The reproducible mode (pinned kernels, deterministic algorithms).
    environment : tuple of (str, str)
        The pinned variables and values (empty in fast mode).
    host : str
        Empty in the reproducible mode (its numbers are meant to be the same on every CPU);
        in fast mode the CPU model and its SIMD flags, so a fast result from another CPU is
        never reused either.
    """

    reproducible: bool
    environment: tuple[tuple[str, str], ...] = ()
    host: str = ""

    @property
    def label(self) -> str:
        """``"reproducible"`` or ``"fast"``."""
        return "reproducible" if self.reproducible else "fast"


def _host_summary() -> str:
    flags = cpu_flags()
    return f"{cpu_model()} [{' '.join(f for f in SIMD_FLAGS if f in flags)}]"


def current_mode(reproducible: bool | None = None) -> ComputeMode:
    """The :class:`ComputeMode` of ``reproducible`` (default :func:`reproducible_requested`)."""
    if reproducible is None:
        reproducible = reproducible_requested()
    if reproducible:
        return ComputeMode(True, tuple(sorted(pinned_environment().items())))
    return ComputeMode(False, (), _host_summary())


#: The fast mode on this host (for callers that build tasks' arguments by hand).
FAST: Final[ComputeMode] = ComputeMode(False)


def describe_mode(mode: ComputeMode) -> str:
    """One line for the run's log.

    Examples
    --------
    >>> describe_mode(ComputeMode(False, (), "AMD EPYC [avx2]"))
    "fast: this CPU's own kernels (AMD EPYC [avx2]); numbers differ from another CPU's"
    """
    if not mode.reproducible:
        return (f"fast: this CPU's own kernels ({mode.host or 'host'}); numbers differ from "
                "another CPU's")
    env = dict(mode.environment)
    return ("reproducible: " + ", ".join(f"{k}={env[k]}" for k in (
        "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "OPENBLAS_CORETYPE",
        "ALSA_BENCH_TEXT_PRECISION") if k in env) + ", deterministic algorithms")


def settings_tag(mode: ComputeMode | None = None) -> str:
    """A short name of a mode for cache folders computed outside the task cache (the text
    encoder's feature cache): ``"r<8 hex>"`` or ``"f<8 hex>"``."""
    mode = current_mode() if mode is None else mode
    digest = hashlib.sha256(
        json.dumps([mode.reproducible, list(mode.environment), mode.host]).encode()
    ).hexdigest()[:8]
    return ("r" if mode.reproducible else "f") + digest


def _mkl_branch() -> str | None:
    """MKL's CNR branch in this process (MKL is linked into torch), or None where unreadable."""
    import ctypes

    import torch

    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    try:
        get = ctypes.CDLL(path).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    code = int(get(-1))  # MKL_CBWR_ALL
    name = _MKL_BRANCHES.get(code & 0xFFFF, str(code & 0xFFFF))
    return name + (",STRICT" if code & 0x10000 else "")


def _openblas_cores() -> list[str]:
    from threadpoolctl import threadpool_info

    return sorted({str(i.get("architecture")) for i in threadpool_info()
                   if i.get("internal_api") == "openblas" and i.get("architecture")})


def effective_settings() -> dict[str, Any]:
    """What this process really computes with, read back from the libraries where they say.

    Returns
    -------
    dict
        ``mode`` (``reproducible``/``fast``, from the environment), ``aten_cpu_capability``
        (torch), ``onednn_max_cpu_isa`` (the variable oneDNN read; oneDNN has no query),
        ``mkl_cbwr`` (MKL's own answer), ``mkl_dynamic``, ``openblas_cores`` (threadpoolctl),
        ``numpy_disabled`` (the variable), ``deterministic_algorithms``, ``convolutions``
        (``openblas-patches`` inside a reproducible task: :mod:`tasks.runtime.pinned_conv`;
        ``aten``; or ``onednn/nnpack`` where torch may use them), ``linear_products``
        (``openblas-blocks`` inside a reproducible task: :mod:`tasks.runtime.pinned_gemm`;
        else ``torch``), ``threads`` (torch),
        ``text_precision``, ``torch``, ``numpy``, ``machine``.
    """
    import numpy as np
    import torch

    return {
        "mode": "reproducible" if reproducible_requested() else "fast",
        "aten_cpu_capability": str(torch.backends.cpu.get_cpu_capability()).lower(),
        "onednn_max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "host"),
        "mkl_cbwr": _mkl_branch(),
        "mkl_dynamic": os.environ.get("MKL_DYNAMIC", "host"),
        "openblas_cores": _openblas_cores(),
        "numpy_disabled": os.environ.get("NPY_DISABLE_CPU_FEATURES", ""),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "convolutions": _convolutions(),
        "linear_products": ("openblas-blocks" if torch.nn.functional.linear.__module__
                            == "tasks.runtime.pinned_gemm" else "torch"),
        "threads": int(torch.get_num_threads()),
        "text_precision": os.environ.get("ALSA_BENCH_TEXT_PRECISION", "auto"),
        "torch": str(torch.__version__),
        "numpy": str(np.__version__),
        "machine": platform.machine(),
    }


def _convolutions() -> str:
    """Who computes this process's convolutions: ``openblas-patches``
    (:mod:`tasks.runtime.pinned_conv`), ``aten`` (ATen's own kernel), or ``onednn/nnpack``
    (where torch may pick them)."""
    import torch

    if torch.nn.functional.conv2d.__module__ == "tasks.runtime.pinned_conv":
        return "openblas-patches"
    if not (torch.backends.mkldnn.enabled or torch._C._get_nnpack_enabled()):
        return "aten"
    return "onednn/nnpack"


def _mismatches(mode: ComputeMode) -> list[str]:
    """The pinned settings this process does not compute with (empty when it does)."""
    import torch

    wanted = dict(mode.environment)
    out = []
    for name, value in wanted.items():
        if os.environ.get(name) != value:
            out.append(f"{name}={os.environ.get(name, '(unset)')} (the mode pins {value})")
    capability = str(torch.backends.cpu.get_cpu_capability()).lower()
    if "ATEN_CPU_CAPABILITY" in wanted and capability != wanted["ATEN_CPU_CAPABILITY"]:
        out.append(f"torch runs its {capability} kernels (the mode pins "
                   f"{wanted['ATEN_CPU_CAPABILITY']}): torch computed before the variable was set")
    branch = _mkl_branch()
    if "MKL_CBWR" in wanted and branch is not None and branch != wanted["MKL_CBWR"]:
        out.append(f"MKL runs its {branch} branch (the mode pins {wanted['MKL_CBWR']}): MKL "
                   "was called before the variable was set")
    cores = _openblas_cores()
    core = wanted.get("OPENBLAS_CORETYPE", "").lower()
    if core and any(c.lower() != core for c in cores):
        out.append(f"OpenBLAS runs its {'/'.join(cores)} kernels (the mode pins "
                   f"{wanted['OPENBLAS_CORETYPE']}): numpy was imported before the variable "
                   "was set")
    return out


@contextmanager
def compute_mode(mode: ComputeMode, device: str = "cpu") -> Iterator[ComputeMode]:
    """Run a stage task's body in ``mode``: check the process, set torch's switches, restore.

    In the reproducible mode the process must already hold the pinned variables (set by
    :func:`apply_environment` before it computed anything); torch's deterministic algorithms
    are switched on for the block, and on CUDA cuDNN's deterministic kernels, no autotuning and
    no TF32. In fast mode nothing is checked or changed.

    Parameters
    ----------
    mode : ComputeMode
        The run's mode (the task's input).
    device : str, default "cpu"
        The task's device option; CUDA switches are set where it is not ``"cpu"``.

    Yields
    ------
    ComputeMode

    Raises
    ------
    ReproducibilityError
        If the process computes with other settings than the mode pins (one line: which knob,
        and how to start the process so that it is pinned).
    TypeError
        If ``mode`` is not a :class:`ComputeMode`.
    """
    if not isinstance(mode, ComputeMode):
        raise TypeError(f"mode must be a ComputeMode; got {type(mode).__name__}.")
    if not mode.reproducible:
        yield mode
        return
    wrong = _mismatches(mode)
    if wrong:
        raise ReproducibilityError(
            "this process cannot compute in the reproducible mode: " + "; ".join(wrong)
            + ". Start it through alsa-bench (or set the variables before Python starts, e.g. "
            "`eval \"$(python -m tasks.runtime.reproducible)\"` before `dask worker`), or run "
            "with --fast (ALSA_BENCH_REPRODUCIBLE=0)."
        )
    with deterministic_torch(cuda=device != "cpu"):
        yield mode


@contextmanager
def deterministic_torch(*, cuda: bool = False, products: bool = True) -> Iterator[None]:
    """torch's switches of the reproducible mode for a block, restored after.

    * ``torch.use_deterministic_algorithms(True, warn_only=True)`` (an operation without a
      deterministic kernel warns, naming itself), without filling fresh memory with NaN;
    * ``torch.nn.functional.linear`` (``nn.Linear``) through numpy's OpenBLAS on its pinned
      Haswell kernels, in fixed one-thread row blocks
      (:func:`tasks.runtime.pinned_gemm.pinned_products`), 2.8x faster than MKL's
      ``COMPATIBLE`` branch and as fixed in its order of addition; ``products=False`` leaves
      them to torch;
    * 2-D convolutions (``nn.Conv2d``) that want no gradient as im2col of a few images at a
      time and one product on that pinned OpenBLAS
      (:func:`tasks.runtime.pinned_conv.pinned_convolutions`; with ``products``), and every
      convolution it does not compute through ATen's own kernel
      (im2col and a GEMM, which MKL's ``COMPATIBLE`` branch computes alike on every CPU), not
      oneDNN's or NNPACK's: those pick their blocking from the CPU's cache sizes (oneDNN's
      ``brg_blocking_t::L1/L2``), which no variable pins;
    * with ``cuda``: cuDNN's deterministic algorithms, no autotuning (``benchmark``), no TF32
      (a GPU without TF32 computes in full float32).

    Parameters
    ----------
    cuda : bool, default False
        Also set the CUDA switches.
    products : bool, default True
        Send the CPU's linear layers and 2-D convolutions through the pinned OpenBLAS
        products.
    """
    import torch

    from tasks.runtime.pinned_conv import pinned_convolutions
    from tasks.runtime.pinned_gemm import pinned_products

    import torch.utils.deterministic

    saved = (torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled(),
             torch.utils.deterministic.fill_uninitialized_memory,  # type: ignore[attr-defined]
             torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
             torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    # warn_only: an operation without a deterministic kernel (on CUDA: adaptive average
    # pooling's backward, say) warns instead of failing the run; no NaN filling of fresh
    # memory (a debugging aid that costs a write per allocation and changes no result)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
    if cuda:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    # torch.backends.mkldnn.flags() would also reset oneDNN's TF32 switch, which warns on every
    # call on a CPU build: the two switches alone, through the functions the flags call
    conv = (torch._C._get_mkldnn_enabled(), torch._C._get_nnpack_enabled())
    torch._C._set_mkldnn_enabled(False)
    torch._C._set_nnpack_enabled(False)
    try:
        if products:
            with pinned_products(), pinned_convolutions():
                yield
        else:
            yield
    finally:
        torch._C._set_mkldnn_enabled(conv[0])
        torch._C._set_nnpack_enabled(conv[1])
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        torch.utils.deterministic.fill_uninitialized_memory = saved[2]  # type: ignore[attr-defined]
        (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
         torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) = saved[3:]


if __name__ == "__main__":  # eval "$(python -m tasks.runtime.reproducible)": the pinned variables
    for _name, _value in {**pinned_environment(), MODE_ENV: "1"}.items():
        print(f"export {_name}='{_value}'")
