"""Effect and cost of each reproducibility knob: do the bits move, and what does it cost?

Every workload runs in a fresh Python process per configuration, because the knobs are read
once per process (ATen's CPU capability at the first dispatched kernel, oneDNN's ISA at its first
primitive, MKL's CNR branch at its first call, OpenBLAS's core and numpy's SIMD targets when the
libraries load). A configuration is a set of environment variables (plus, for
``torch.use_deterministic_algorithms``, a flag); the repetitions are interleaved (A B C A B C
...) so a shared machine's load falls on every configuration alike, and the median is printed.

Workloads (seeded random data, no data set needed; the pipeline's own backbones and estimators):

* ``mlp``, ``lenet``, ``resnet``: ``--steps`` AdamW steps of batch 128 on 28x28 images,
  channels-last as the image adapter trains them, then one forward pass over 4,096 images
  (the extract stage's work);
* ``gcn``, ``sage``, ``gat``: ``--steps`` full-batch Adam steps on a random graph of 5,000
  nodes and 40,000 edges with 128 features, then one forward pass;
* ``tabular``: the tabular suite's three backbones (``tab-logreg``, ``tab-hgb``, ``tab-mlp``)
  fitted through its adapter on a seeded table of 6,000 rows (five numeric columns, 5 % of
  them missing, and two categorical ones; 4 classes), then predicting 4,000 other rows;
* ``minilm``: the text suite's frozen all-MiniLM-L6-v2 encoder (``tasks.models.text_encoder``)
  over 512 random token sequences of 16-128 tokens (precision from ``ALSA_BENCH_TEXT_PRECISION``,
  as in the pipeline);
* ``alsa``: ALSA-G fitted on 5,000 x 10 random validation logits, estimating 20,000 rows;
* ``aline``: ALINE-S and ALINE-D (numpy least squares on 64-d features) on random logits and
  features.

For each workload the table prints, per configuration, the median seconds of training (or
fitting) and of prediction, and a digest of the weights / logits / estimates; equal digests mean
bit-identical results.

    nice -n 10 python benchmarks/bench_reproducible.py --configs host,pinned --repeats 3
    nice -n 10 python benchmarks/bench_reproducible.py --workloads lenet,alsa \\
        --configs host,aten-default,aten-avx2,onednn-avx2,mkl-compatible,deterministic
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Named configurations: environment variables set in the worker process (``None``: removed),
#: and whether torch's deterministic algorithms are on. ``host`` is what this CPU picks alone.
_ALL_VARS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "OPENBLAS_CORETYPE",
             "NPY_DISABLE_CPU_FEATURES", "ALSA_BENCH_TEXT_PRECISION", "MKL_ENABLE_INSTRUCTIONS")


def _configs() -> dict[str, tuple[dict[str, str], bool, bool]]:
    """name -> (environment, deterministic algorithms, convolutions without oneDNN/NNPACK)."""
    from tasks.runtime.reproducible import pinned_environment

    pinned = pinned_environment()
    return {
        "host": ({}, False, False),
        "pinned": (pinned, True, True),
        "pinned-onednn": (pinned, True, False),
        "pinned-nodet": (pinned, False, True),
        "pinned-mkl-auto": ({k: v for k, v in pinned.items() if k != "MKL_CBWR"}, True, True),
        # the mode before its pinned OpenBLAS products: ATen's convolutions, MKL's COMPATIBLE
        "pinned-aten": ({**pinned, "ALSA_BENCH_BENCH_PRODUCTS": "0"}, True, True),
        "aten-default": ({"ATEN_CPU_CAPABILITY": "default"}, False, False),
        "aten-avx2": ({"ATEN_CPU_CAPABILITY": "avx2"}, False, False),
        "aten-avx512": ({"ATEN_CPU_CAPABILITY": "avx512"}, False, False),
        "onednn-sse41": ({"ONEDNN_MAX_CPU_ISA": "SSE41"}, False, False),
        "onednn-avx2": ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, False, False),
        "onednn-avx512": ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}, False, False),
        "native-conv": ({}, False, True),
        "mkl-compatible": ({"MKL_CBWR": "COMPATIBLE"}, False, False),
        "mkl-nodynamic": ({"MKL_DYNAMIC": "FALSE"}, False, False),
        "openblas-haswell": ({"OPENBLAS_CORETYPE": "Haswell"}, False, False),
        "openblas-skylakex": ({"OPENBLAS_CORETYPE": "SkylakeX"}, False, False),
        "numpy-avx2": ({"NPY_DISABLE_CPU_FEATURES": pinned.get("NPY_DISABLE_CPU_FEATURES", "")},
                       False, False),
        "text-fp32": ({"ALSA_BENCH_TEXT_PRECISION": "fp32"}, False, False),
        "text-bf16": ({"ALSA_BENCH_TEXT_PRECISION": "bf16"}, False, False),
        # the fast mode as an AVX2 CPU without AVX-512 runs it: each library's own kernels at
        # that ISA (ATen, oneDNN, MKL, OpenBLAS, numpy), the text encoder in float32 (no
        # AVX512-BF16); what is left of the mode's cost against this is the pins' own
        "host-avx2": ({"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                       "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
                       "NPY_DISABLE_CPU_FEATURES": pinned.get("NPY_DISABLE_CPU_FEATURES", ""),
                       "ALSA_BENCH_TEXT_PRECISION": "fp32"}, False, False),
        "deterministic": ({}, True, False),
        "threads-1": ({"ALSA_BENCH_BENCH_THREADS": "1"}, False, False),
    }


#: Threads of every configuration (``--threads``); ``threads-1`` overrides it.
_THREADS = [2]

WORKLOADS = ("mlp", "lenet", "resnet", "gcn", "sage", "gat", "tabular", "minilm", "alsa",
             "aline")


# ------------------------------------------------------------------------------ the worker
def _digest(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(memoryview(a).tobytes() if not hasattr(a, "tobytes") else a.tobytes())
    return h.hexdigest()[:12]


def _weights_digest(model: Any) -> str:
    return _digest(*(v.detach().contiguous().cpu().numpy() for v in model.state_dict().values()))


def _image(name: str, steps: int) -> dict[str, Any]:
    import numpy as np
    import torch

    from tasks.models.backbones import get_backbone
    from tasks.models.modalities.image import batch_layout
    from tasks.models.optim import adam

    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.random((max(steps * 128, 4096), 1, 28, 28), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, 10, x.shape[0]))
    torch.manual_seed(0)
    model = get_backbone(name, 10, (1, 28, 28))
    fmt = batch_layout(4, model, torch.device("cpu"))  # the image adapter's layout here
    model = model.to(memory_format=fmt)
    opt = adam(model.parameters(), lr=2e-3, weight_decay=0.01, decoupled=True)  # the pipeline's
    loss_fn = torch.nn.CrossEntropyLoss()
    t0, c0 = time.perf_counter(), time.process_time()
    model.train()
    for i in range(steps):
        xb = x[i * 128:(i + 1) * 128].contiguous(memory_format=fmt)
        opt.zero_grad(set_to_none=True)
        loss_fn(model(xb), y[i * 128:(i + 1) * 128]).backward()
        opt.step()
    train_s, train_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    with torch.inference_mode():
        logits = model.eval()(x[:4096].contiguous(memory_format=fmt))
    return {"train_s": train_s, "predict_s": time.perf_counter() - t0, "train_cpu": train_cpu,
            "weights": _weights_digest(model), "outputs": _digest(logits.numpy())}


def _graph(name: str, steps: int) -> dict[str, Any]:
    import numpy as np
    import torch

    from tasks.models.backbones import get_backbone
    from tasks.models.optim import adam

    rng = np.random.default_rng(0)
    n, m = 5000, 20000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    edges = torch.from_numpy(np.stack([np.r_[src, dst], np.r_[dst, src]]).astype(np.int64))
    x = torch.from_numpy(rng.standard_normal((n, 128), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, 10, n))
    torch.manual_seed(0)
    model = get_backbone(name, 10, (128,))
    opt = adam(model.parameters(), lr=1e-2, weight_decay=5e-4)  # the pipeline's optimizer
    t0, c0 = time.perf_counter(), time.process_time()
    model.train()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x, edges), y).backward()
        opt.step()
    train_s, train_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    with torch.inference_mode():
        logits = model.eval()(x, edges)
    return {"train_s": train_s, "predict_s": time.perf_counter() - t0, "train_cpu": train_cpu,
            "weights": _weights_digest(model), "outputs": _digest(logits.numpy())}


def _tabular(rows: int = 6000, epochs: int = 10) -> dict[str, Any]:
    """The tabular suite's three backbones, fitted and predicting through its adapter."""
    import numpy as np
    import torch

    from tasks.data.tables import Table
    from tasks.models.backbones import get_backbone, get_backbone_spec
    from tasks.models.modalities import get_adapter

    rng = np.random.default_rng(0)
    n = rows + 4000
    num = rng.normal(size=(n, 5))
    cat = np.column_stack([rng.integers(0, 4, n), rng.integers(0, 3, n)]).astype(np.int64)
    score = (num[:, 0] + 0.7 * num[:, 1] * num[:, 2] + 0.5 * (cat[:, 0] == 3)
             - 0.4 * (cat[:, 1] == 1) + 0.5 * rng.normal(size=n))
    y = np.digitize(score, np.quantile(score, [0.25, 0.5, 0.75])).astype(np.int64)
    num[rng.random(num.shape) < 0.05] = np.nan
    table = Table(num, cat, tuple(f"n{i}" for i in range(5)), ("c0", "c1"),
                  (("a", "b", "c", "d"), ("x", "y", "z")))
    train, test = table.take(np.arange(rows)), table.take(np.arange(rows, n))
    spec = types.SimpleNamespace(n_classes=4, input_shape=(5 + 4 + 3,), modality="tabular")
    adapter, cpu = get_adapter("tabular"), torch.device("cpu")
    weights, outputs, fit_s, fit_cpu, predict_s = [], [], 0.0, 0.0, 0.0
    for name in ("tab-logreg", "tab-hgb", "tab-mlp"):
        torch.manual_seed(0)
        model = get_backbone(name, 4, spec.input_shape)
        t0, c0 = time.perf_counter(), time.process_time()
        adapter.fit(model, get_backbone_spec(name), spec, (train, y[:rows]), (test, y[rows:]),
                    epochs=epochs, seed=0, device=cpu, progress=False, key=name)
        fit_s, fit_cpu = fit_s + time.perf_counter() - t0, fit_cpu + time.process_time() - c0
        t0 = time.perf_counter()
        outputs.append(adapter.predict(model, spec, test, cpu, 512))
        predict_s += time.perf_counter() - t0
        weights.append(_weights_digest(model))
    return {"train_s": fit_s, "predict_s": predict_s, "train_cpu": fit_cpu,
            "weights": _digest(np.frombuffer("".join(weights).encode(), dtype=np.uint8)),
            "outputs": _digest(*outputs)}


def _minilm() -> dict[str, Any]:
    import numpy as np
    import torch

    from tasks.models import text_encoder

    encoder = text_encoder.load_minilm()
    rng = np.random.default_rng(0)
    vocab = int(encoder.model.config.vocab_size)
    ids = [[101, *rng.integers(1000, vocab, int(k)).tolist(), 102]
           for k in rng.integers(14, 127, 512)]
    t0, c0 = time.perf_counter(), time.process_time()
    pooled, _ = text_encoder._forward(encoder, ids, False, torch.device("cpu"))
    # the encoding is what the text suite's train and extract stages spend: shown as "train"
    return {"train_s": time.perf_counter() - t0, "predict_s": 0.0,
            "train_cpu": time.process_time() - c0, "weights": "-",
            "outputs": _digest(np.concatenate(pooled))}


def _alsa() -> dict[str, Any]:
    import numpy as np

    from estimators import get_estimator

    rng = np.random.default_rng(0)
    centres = rng.standard_normal((10, 10)) * 3
    yv = rng.integers(0, 10, 5000)
    val = (centres[yv] + rng.standard_normal((5000, 10)) * 2).astype(np.float32)
    target = (centres[rng.integers(0, 10, 20000)]
              + rng.standard_normal((20000, 10)) * 2.5).astype(np.float32)
    est = get_estimator("alsa-g", seed=0, device="cpu")  # the CPU's kernels, on a GPU host too
    t0, c0 = time.perf_counter(), time.process_time()
    est.fit(val, yv)
    fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    res = est.estimate(target)
    return {"train_s": fit_s, "predict_s": time.perf_counter() - t0, "train_cpu": fit_cpu,
            "weights": _digest(np.asarray(est.positions_), np.asarray(est.variances_)),
            "outputs": _digest(np.asarray([res.accuracy], dtype=np.float64))}


def _aline() -> dict[str, Any]:
    import numpy as np

    from estimators import get_estimator

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 10))
    fv, ft, fs = (rng.standard_normal((k, 64)).astype(np.float32) for k in (3000, 8000, 5000))
    lv, lt = (f @ w + rng.standard_normal((f.shape[0], 10)) for f in (fv, ft))
    yv, ys = lv.argmax(1), (fs @ w).argmax(1)
    out, fit_s, est_s = [], 0.0, 0.0
    for name in ("aline-s", "aline-d"):
        est = get_estimator(name)
        t0 = time.perf_counter()
        est.fit(lv, yv, val_features=fv, train_features=fs, train_labels=ys)
        fit_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        out.append(est.estimate(lt, target_features=ft).accuracy)
        est_s += time.perf_counter() - t0
    return {"train_s": fit_s, "predict_s": est_s, "weights": "-",
            "outputs": _digest(np.asarray(out, dtype=np.float64))}


def worker(workload: str, steps: int, deterministic: bool, native_conv: bool) -> dict[str, Any]:
    """Run one workload in this process (its knobs already in the environment)."""
    import torch

    from tasks.runtime.threads import pinned_threads

    from tasks.runtime.reproducible import deterministic_torch

    products = os.environ.get("ALSA_BENCH_BENCH_PRODUCTS", "1") == "1"
    if deterministic and native_conv:  # exactly what the reproducible mode's tasks run
        context: Any = deterministic_torch(products=products)
    else:
        context = contextlib.nullcontext()
        if deterministic:
            import torch.utils.deterministic

            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.utils.deterministic.fill_uninitialized_memory = False
    threads = int(os.environ.get("ALSA_BENCH_BENCH_THREADS", "0")) or _THREADS[0]
    with pinned_threads(threads), context:
        if native_conv and not deterministic:  # ATen's own convolutions alone
            torch._C._set_mkldnn_enabled(False)
            torch._C._set_nnpack_enabled(False)
        if workload in ("mlp", "lenet", "resnet"):
            out = _image(workload, steps)
        elif workload in ("gcn", "sage", "gat"):
            out = _graph(workload, steps)
        elif workload == "tabular":
            out = _tabular()
        elif workload == "minilm":
            out = _minilm()
        elif workload == "alsa":
            out = _alsa()
        elif workload == "aline":
            out = _aline()
        else:
            raise ValueError(f"workload must be one of {', '.join(WORKLOADS)}; got {workload!r}.")
    out["capability"] = torch.backends.cpu.get_cpu_capability()
    return out


# ------------------------------------------------------------------------------ the driver
def _run(workload: str, config: str, steps: int) -> dict[str, Any]:
    env_vars, deterministic, native_conv = _configs()[config]
    env = {k: v for k, v in os.environ.items() if k not in _ALL_VARS}
    env.update(env_vars)
    env["PYTHONWARNINGS"] = "ignore"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", workload,
           "--steps", str(steps), "--threads", str(_THREADS[0])]
    cmd += ["--deterministic"] if deterministic else []
    cmd += ["--native-conv"] if native_conv else []
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{workload} under {config} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--configs", default="host,pinned")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2,
                        help="torch/BLAS threads of every configuration (the pipeline pins 2)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--deterministic", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--native-conv", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    _THREADS[0] = args.threads
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps, args.deterministic, args.native_conv)))
        return
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    known = _configs()
    bad = [c for c in configs if c not in known]
    if bad:
        parser.error(f"--configs must name configurations from {', '.join(known)}; got {bad}.")
    import torch

    print(f"# torch {torch.__version__}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start, "
          f"{args.repeats} interleaved repeats, {args.steps} steps, {args.threads} thread(s)")
    for name in configs:
        print(f"# {name}: {known[name][0] or '(nothing set)'}"
              f"{' + torch.use_deterministic_algorithms(True)' if known[name][1] else ''}"
              f"{' + convolutions without oneDNN/NNPACK' if known[name][2] else ''}")
    print(f"{'workload':8} {'config':18} {'cap':7} {'train/fit s':>11} {'train cpu s':>11} "
          f"{'predict s':>10} {'x host':>7} {'cpu x host':>10}  weights      outputs")
    for workload in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
        for _ in range(args.repeats):
            for config in configs:
                runs[config].append(_run(workload, config, args.steps))
        base = base_cpu = None
        for config in configs:
            r = runs[config]
            train = statistics.median(x["train_s"] for x in r)
            cpu = statistics.median(x.get("train_cpu", x["train_s"]) for x in r)
            pred = statistics.median(x["predict_s"] for x in r)
            total = train + pred
            base = total if base is None else base
            base_cpu = cpu if base_cpu is None else base_cpu
            stable = len({(x["weights"], x["outputs"]) for x in r}) == 1
            print(f"{workload:8} {config:18} {r[0]['capability']:7} {train:11.3f} {cpu:11.3f} "
                  f"{pred:10.3f} {total / base:7.2f} {cpu / max(base_cpu, 1e-9):10.2f}  "
                  f"{r[0]['weights']:12} {r[0]['outputs']}"
                  f"{'' if stable else '  (digests vary between repeats!)'}", flush=True)


if __name__ == "__main__":
    main()
