"""Which operation of ALSA's float32 fit depends on the CPU's kernels, and by how much.

ALSA fits its anchors in float32 with torch (``estimators/alsa/kernels.py``): GEMMs and GEMVs
(``U @ W.T``, ``K @ p``, ``e @ K``), a vectorised ``exp`` (Sleef), ``sigmoid``, ``softplus``,
row norms, and float64 sums of float32 vectors. On another CPU, ATen runs other vectorised
kernels (AVX-512 instead of AVX2: other accumulation widths, other Sleef variants) and MKL
another GEMM branch, so the fitted anchors, and the estimates, move in the last digits.

Part 1 runs each operation alone on fixed float32 inputs of the fit's shapes (a row chunk of
8,192 x 1,000 anchors, 11-d canonical logits), every input drawn by numpy so that a digest
depends on that operation's kernel alone, in one process per configuration and prints a
digest of its output: which operations change with ATen's capability, which with MKL's branch.
Part 2 fits ALSA-G and ALSA-E (``estimators``, the pipeline's defaults, seed 0) on one
validation set and estimates target sets, per configuration, and prints the largest difference
from the first configuration: the tolerance of an estimate when nothing is pinned, and 0 in the
reproducible mode whatever the host's preference (``ATEN_CPU_CAPABILITY``,
``ONEDNN_MAX_CPU_ISA`` and ``MKL_CBWR`` set before the mode pins them are overridden).

    nice -n 10 python benchmarks/alsa_dispatch.py
    nice -n 10 python benchmarks/alsa_dispatch.py --parts 1          # the operations only
    nice -n 10 python benchmarks/alsa_dispatch.py --logits RESULTS/logits/<sha>.parquet

``--logits`` takes a run's published logits file (``<state>/results/logits/*.parquet``) instead
of the synthetic set (10 classes, 5,000 validation rows, 8 target sets with growing shift).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_KNOBS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_DYNAMIC", "ONEDNN_MAX_CPU_ISA",
          "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", "ALSA_BENCH_REPRODUCIBLE",
          "ALSA_BENCH_PINNED_VARS")

#: name -> (environment, reproducible mode applied in the worker before torch is imported)
CONFIGS: dict[str, tuple[dict[str, str], bool]] = {
    "avx512 / MKL auto": ({"ATEN_CPU_CAPABILITY": "avx512"}, False),
    "avx2 / MKL auto": ({"ATEN_CPU_CAPABILITY": "avx2"}, False),
    "default / MKL auto": ({"ATEN_CPU_CAPABILITY": "default"}, False),
    "avx512 / MKL compatible": ({"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "COMPATIBLE"},
                                False),
    "avx2 / MKL compatible": ({"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE"}, False),
    "default / MKL compatible": ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
                                 False),
    "pinned, host prefers avx512": ({"ATEN_CPU_CAPABILITY": "avx512",
                                     "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, True),
    "pinned, host prefers default": ({"ATEN_CPU_CAPABILITY": "default",
                                      "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "AUTO"}, True),
}


def _digest(a: Any) -> str:
    return hashlib.sha256(a.detach().contiguous().numpy().tobytes()).hexdigest()[:10]


def ops_worker() -> dict[str, str]:
    """Each operation of the fit on fixed inputs: name -> digest of its output."""
    import numpy as np
    import torch

    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    # every input drawn by numpy (never computed by torch), so an operation's digest depends
    # on that operation's kernel alone, not on a kernel that computed its input
    u = torch.from_numpy(rng.standard_normal((8192, 11), dtype=np.float32))
    w = torch.from_numpy(rng.standard_normal((1000, 11), dtype=np.float32))
    d = torch.from_numpy(rng.uniform(0.0, 2.0, (8192, 1000)).astype(np.float32))
    arg = torch.from_numpy((-(rng.uniform(0.0, 2.0, (8192, 1000)) ** 2) * 4.0)
                           .astype(np.float32))
    p = torch.from_numpy(rng.standard_normal(1000, dtype=np.float32))
    e = torch.from_numpy(rng.standard_normal(8192, dtype=np.float32)) / 8192
    i = torch.from_numpy(rng.standard_normal(8192, dtype=np.float32)) * 3
    return {
        "mm   U @ W.T (MKL sgemm)": _digest(u @ w.t()),
        "mv   K @ p (MKL sgemv)": _digest(torch.mv(arg, p)),
        "vm   e @ K (MKL sgemv)": _digest(e @ arg),
        "mm   (U*e).T @ D (MKL sgemm)": _digest(torch.mm((u * e[:, None]).t(), d)),
        "exp  (ATen, Sleef)": _digest(arg.exp()),
        "sigmoid (ATen)": _digest(torch.sigmoid(i)),
        "softplus (ATen)": _digest(torch.nn.functional.softplus(i)),
        "sum  float32 -> float64 (ATen)": _digest(i.sum(dtype=torch.float64)),
        "sum  float32 (ATen)": _digest(arg.sum(dim=1)),
        "norm rows (ATen)": _digest(w.norm(dim=1)),
    }


def _synthetic() -> tuple[Any, Any, list[tuple[str, Any]]]:
    import numpy as np

    rng = np.random.default_rng(0)
    centres = rng.standard_normal((10, 10)) * 3
    yv = rng.integers(0, 10, 5000)
    val = (centres[yv] + rng.standard_normal((5000, 10)) * 2).astype(np.float32)
    targets = []
    for j in range(8):
        yt = rng.integers(0, 10, 4000)
        targets.append((f"shift-{j}", (centres[yt] + rng.standard_normal((4000, 10))
                                       * (2 + 0.4 * j)).astype(np.float32)))
    return val, yv, targets


def _from_file(path: str) -> tuple[Any, Any, list[tuple[str, Any]]]:
    from storage.results import read_logits_file

    content = read_logits_file(path)
    val = content.val()
    return val[0], val[1], [(info.split, content.target_logits(info.split))
                           for info in content.targets()]


def fit_worker(logits: str | None) -> dict[str, float]:
    """ALSA-G and ALSA-E fitted and estimating: ``method|split`` -> estimate."""
    import torch

    from estimators import get_estimator
    from tasks.runtime.threads import pinned_threads

    val, yv, targets = _from_file(logits) if logits else _synthetic()
    out: dict[str, float] = {}
    with pinned_threads(2):
        for method in ("alsa-g", "alsa-e"):
            # device: the CPU's kernels are the subject, also on a machine with a GPU
            est = get_estimator(method, seed=0, device="cpu").fit(val, yv)
            for name, x in targets:
                out[f"{method}|{name}"] = float(est.estimate(x).accuracy)
    out["_capability"] = str(torch.backends.cpu.get_cpu_capability())  # type: ignore[assignment]
    return out


def _run(config: str, part: str, logits: str | None) -> dict[str, Any]:
    env_vars, pinned = CONFIGS[config]
    env = {k: v for k, v in os.environ.items() if k not in _KNOBS}
    env.update(env_vars)
    env["PYTHONWARNINGS"] = "ignore"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", part]
    cmd += ["--pinned"] if pinned else []
    cmd += ["--logits", logits] if logits else []
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{part} under {config!r} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logits", help="a run's logits file instead of the synthetic set")
    parser.add_argument("--parts", default="1,2",
                        help="which parts to run, comma-separated: 1 (operations), 2 (fits)")
    parser.add_argument("--worker", choices=("ops", "fit"), help=argparse.SUPPRESS)
    parser.add_argument("--pinned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.pinned:  # what `import flows` does first in every pipeline process
            from tasks.runtime.reproducible import apply_environment

            apply_environment(True)
        result = ops_worker() if args.worker == "ops" else fit_worker(args.logits)
        print(json.dumps(result))
        return
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"1", "2"}:
        parser.error(f"--parts must name 1 and/or 2, comma-separated; got {args.parts!r}.")
    import torch

    print(f"# torch {torch.__version__}, {os.cpu_count()} CPUs; 2 threads")
    if "1" in parts:
        print("## Part 1: each operation's output digest")
        ops = {c: _run(c, "ops", None) for c in CONFIGS if not CONFIGS[c][1]}
        names = list(next(iter(ops.values())))
        short = {c: c.replace(" / MKL ", "/") for c in ops}
        print(f"{'operation':32} " + " ".join(f"{short[c]:>14}" for c in ops))
        for name in names:
            print(f"{name:32} " + " ".join(f"{ops[c][name]:>14}" for c in ops))
    if "2" in parts:
        print("## Part 2: ALSA-G and ALSA-E estimates, largest |difference| from the first row")
        fits = {c: _run(c, "fit", args.logits) for c in CONFIGS}
        first = next(iter(fits.values()))
        keys = [k for k in first if not k.startswith("_")]
        print(f"{'configuration':30} {'ATen':8} {'alsa-g':>10} {'alsa-e':>10} "
              f"{'estimates equal':>16}")
        for config, est in fits.items():
            diff = {m: max(abs(est[k] - first[k]) for k in keys if k.startswith(m))
                    for m in ("alsa-g", "alsa-e")}
            same = sum(est[k] == first[k] for k in keys)
            print(f"{config:30} {est['_capability']:8} {diff['alsa-g']:10.1e} "
                  f"{diff['alsa-e']:10.1e} {same:>9} of {len(keys)}")
        pinned = [c for c in CONFIGS if CONFIGS[c][1]]
        equal = all(fits[c][k] == fits[pinned[0]][k] for c in pinned for k in keys)
        print(f"# pinned configurations identical to each other: {equal}")


if __name__ == "__main__":
    main()
