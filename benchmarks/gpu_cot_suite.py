"""The COT paper's backbones on one GPU: throughput, peak memory and utilisation, stage by stage.

Issue 32, item 7: ``cifar10`` with ResNet50 and VGG11 for a few epochs and ``tinyimagenet`` with
ResNet18 (the COT paper's, ``resnet18-ft``), on generated releases
(``benchmarks/synth_release.py``), with random initialisation where the published ImageNet
weights are absent (``ALSA_BENCH_RANDOM_INIT=1``; the compute per image is the same). Every run
goes through the pipeline's own plain stage functions in this process, in a fresh state folder:

1. ``stage_dataset`` (download stage: layout check, manifest, digest);
2. ``train_classifier`` (the COT recipe, ``--epochs`` epochs; inputs upsampled to 224 on the
   device);
3. ``compute_logits`` + ``ingest_logits`` (extract: the validation split, every target split,
   penultimate features);
4. ``compute_estimates`` + ``ingest_estimates`` for ``--methods`` (default ``ac atc-ne cot``:
   the COT paper's AC, ATC (negative-entropy score) and COT).

Per stage it records the wall time, images per second (train: training images x epochs over the
training seconds the checkpoint's sidecar records, data loading and model building included,
and the steady rate over the epochs after the first, timed by the adapter's epoch log lines;
extract: logits rows over the stage's time, split generation and features included),
the peak GPU memory torch allocated (``torch.cuda.max_memory_allocated``), and the mean and peak
GPU utilisation and memory that ``nvidia-smi`` reports, sampled every 200 ms in the background
(``nvidia-smi --query-gpu=... -lms 200``). Before the runs it checks on the device that the
upsampling twin (``to_inputs.on_device``) agrees with the CPU conversion.

Outputs, in ``--out`` (default ``$OUT``, else ``./gpu-cot-out``): ``gpu_cot_suite.json`` (every
figure), ``gpu_cot_suite.md`` (the table for docs/PERFORMANCE.md), ``nvidia_smi.csv`` (the raw
samples) and the run's log (``benchmarks/gpu_cot_suite.sh`` writes ``log.txt``). The state
folder (generated data, checkpoints, results) is a temporary folder, deleted at the end.

``--tiny`` is the CPU check that the script cannot fail on the GPU for a silly reason: the
smallest generated releases, one corruption per dataset, inputs upsampled to 64 instead of 224,
one epoch at most, every code path of the full run otherwise. Its figures are not throughput
measurements and are labelled TINY.

Run::

    python benchmarks/gpu_cot_suite.py --out /tmp/gpu-cot            # on the GPU machine
    python benchmarks/gpu_cot_suite.py --tiny --device cpu --out /tmp/tiny-check
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: (dataset, backbone) runs of the GPU check, in order.
RUNS: Final[tuple[tuple[str, str], ...]] = (
    ("cifar10", "resnet50"), ("cifar10", "vgg11"), ("tinyimagenet", "resnet18-ft"),
)
#: Scale of each generated release (``synth_release.py --scale``): quick to make, enough rows to
#: reach steady throughput. cifar10 at 0.1: 5,000 training images (2,667 after the 1:3 imbalance),
#: 1,000 test images, 95,000 CIFAR-10-C rows; tinyimagenet at 0.05: 5,000 training images
#: (4,500 / 500), 500 validation images, 37,500 Tiny-ImageNet-C images.
SCALES: Final[dict[str, float]] = {"cifar10": 0.1, "tinyimagenet": 0.05}
TINY_SCALE: Final[float] = 0.001
#: nvidia-smi's sampling period, milliseconds.
SAMPLE_MS: Final[int] = 200


class SmiSampler:
    """``nvidia-smi`` sampling utilisation and memory in the background, into a CSV file."""

    FIELDS: Final = ("timestamp", "utilization.gpu", "memory.used")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc: subprocess.Popen[bytes] | None = None
        self.available = shutil.which("nvidia-smi") is not None

    def __enter__(self) -> SmiSampler:
        if self.available:
            self.handle = open(self.path, "wb")  # noqa: SIM115 - closed in __exit__
            self.proc = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu={','.join(self.FIELDS)}",
                 "--format=csv,noheader,nounits", f"-lms={SAMPLE_MS}"],
                stdout=self.handle, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.handle.close()

    def samples(self) -> list[tuple[float, float, float]]:
        """``(unix time, utilisation %, memory MiB)`` of every complete line so far."""
        if not self.available or not self.path.exists():
            return []
        from datetime import datetime

        out = []
        for row in csv.reader(self.path.read_text(errors="replace").splitlines()):
            if len(row) != 3:
                continue
            try:
                stamp = datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
                out.append((stamp, float(row[1]), float(row[2])))
            except ValueError:
                continue
        return out


class EpochClock(logging.Handler):
    """When each training epoch ended: the image adapter logs ``<key> epoch i/n: train loss``
    (logger ``tasks.stages.train``) after the epoch's last step, whose loss it has read back, so
    the GPU is done with it."""

    PATTERN: Final = re.compile(r" epoch (\d+)/(\d+): train loss ")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.ends: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if self.PATTERN.search(record.getMessage()):
            self.ends.append(record.created)

    def steady_rate(self, n_train: int) -> float | None:
        """Training images per second over the epochs after the first (which pays the cuDNN
        autotuning and the first allocations); None with fewer than two epochs."""
        if len(self.ends) < 2:
            return None
        return round(n_train * (len(self.ends) - 1) / max(self.ends[-1] - self.ends[0], 1e-9), 1)


def _window(samples: list[tuple[float, float, float]], start: float, end: float) -> dict[str, Any]:
    inside = [s for s in samples if start <= s[0] <= end]
    if not inside:
        return {"gpu_util_mean": None, "gpu_util_max": None, "smi_memory_max_mib": None,
                "samples": 0}
    util = [s[1] for s in inside]
    return {"gpu_util_mean": round(sum(util) / len(util), 1), "gpu_util_max": max(util),
            "smi_memory_max_mib": max(s[2] for s in inside), "samples": len(inside)}


def _tiny_patches(log: Any) -> None:
    """``--tiny``: one corruption per dataset and 64-pixel inputs (in this process only)."""
    from tasks.data.datasets import DATASETS, cifar, tinyimagenet
    from tasks.data.datasets._upsample import upsampling_inputs

    cifar.CORRUPTIONS = cifar.CORRUPTIONS[:1]  # read at call time by the splits and the pool
    tinyimagenet.CORRUPTIONS = tinyimagenet.CORRUPTIONS[:1]
    small = upsampling_inputs(32, size=64)
    DATASETS["cifar10"] = dataclasses.replace(
        DATASETS["cifar10"], backbone_inputs=dict.fromkeys(cifar.BACKBONE_INPUTS, small))
    DATASETS["tinyimagenet"] = dataclasses.replace(
        DATASETS["tinyimagenet"], to_inputs=upsampling_inputs(64, size=64))
    log("TINY: one corruption per dataset, inputs upsampled to 64 (not throughput figures)")


def _parity(device: Any) -> dict[str, Any]:
    """Max |on-device - CPU| of the upsampling conversion on 256 random rows of each size."""
    import numpy as np
    import torch

    from tasks.data.datasets import get_dataset_spec

    out = {}
    rng = np.random.default_rng(0)
    for dataset, backbone, side in (("cifar10", "resnet50", 32),
                                    ("tinyimagenet", "resnet18-ft", 64)):
        fn = get_dataset_spec(dataset).for_backbone(backbone).to_inputs
        x = rng.integers(0, 256, (256, side, side, 3), dtype=np.uint8)
        cpu = fn(x)
        dev = fn.on_device(torch.from_numpy(x).to(device)).cpu().numpy()
        out[dataset] = float(np.abs(cpu - dev).max())
    return out


def _run_one(dataset: str, backbone: str, args: argparse.Namespace, state: Path,
             smi: SmiSampler, log: Any) -> dict[str, Any]:
    import torch

    from storage.paths import checkpoint_dir
    from tasks.runtime.checkpoints import read_sidecar
    from tasks.stages.download import stage_dataset
    from tasks.stages.estimate import compute_estimates, ingest_estimates
    from tasks.stages.extract import compute_logits, ingest_logits
    from tasks.stages.train import train_classifier

    cuda = torch.cuda.is_available() and args.device != "cpu"
    row: dict[str, Any] = {"dataset": dataset, "backbone": backbone, "epochs": args.epochs}

    def phase(name: str, fn: Any) -> Any:
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.time()
        result = fn()
        if cuda:
            torch.cuda.synchronize()
        end = time.time()
        row[f"{name}_s"] = round(end - start, 2)
        row[f"{name}_torch_peak_gib"] = (round(torch.cuda.max_memory_allocated() / 2**30, 2)
                                         if cuda else None)
        time.sleep(2 * SAMPLE_MS / 1000)  # the last samples of the phase reach the file
        for key, value in _window(smi.samples(), start, end).items():
            row[f"{name}_{key}"] = value
        log(f"{dataset}.{backbone} {name}: {row[f'{name}_s']} s")
        return result

    ref = phase("download", lambda: stage_dataset(dataset, state / "data"))
    clock = EpochClock()
    train_logger = logging.getLogger("tasks.stages.train")
    train_logger.addHandler(clock)
    train_logger.setLevel(logging.INFO)
    try:
        ckpt = phase("train", lambda: train_classifier(
            ref, backbone, 0, epochs=args.epochs, device=args.device,
            checkpoint_dir=checkpoint_dir(), progress=False))
    finally:
        train_logger.removeHandler(clock)
    sidecar = read_sidecar(Path(ckpt.path))
    meta = torch.load(ckpt.path, map_location="cpu", weights_only=True)["meta"]
    row["n_train"] = int(meta["n_train"])
    row["train_seconds_sidecar"] = round(float(sidecar["train_seconds"]), 2)
    row["val_accuracy"] = round(float(sidecar["val_accuracy"]), 4)
    row["train_img_per_s"] = round(meta["n_train"] * meta["epochs_run"]
                                   / max(sidecar["train_seconds"], 1e-9), 1)
    row["train_steady_img_per_s"] = clock.steady_rate(int(meta["n_train"]))
    logits = phase("extract", lambda: ingest_logits(compute_logits(
        ckpt, suite=dataset, device=args.device, batch_size=args.batch_size)))
    from storage.db import connect

    with connect(read_only=True) as con:
        rows = int(con.execute("SELECT count(*) FROM logits WHERE run_key = ?",
                               [logits.run_key]).fetchone()[0])
    row["extract_rows"] = rows
    row["extract_img_per_s"] = round(rows / max(row["extract_s"], 1e-9), 1)
    phase("estimate", lambda: ingest_estimates(compute_estimates(logits, methods=args.methods)))
    with connect(read_only=True) as con:
        row["estimates"] = int(con.execute("SELECT count(*) FROM estimates WHERE run_key = ?",
                                           [logits.run_key]).fetchone()[0])
    return row


def _fmt(value: Any) -> str:
    """A figure for the table: "—" when it was not measured (no GPU, no nvidia-smi)."""
    if value is None:
        return "—"
    return f"{value:,}" if isinstance(value, (int, float)) else str(value)


def _markdown(result: dict[str, Any]) -> str:
    head = ("| run | train img/s: stage / steady | extract img/s (rows) | stage s: download / "
            "train / extract / "
            "estimate | torch peak GiB train / extract | GPU util % mean train / extract | "
            "nvidia-smi memory max MiB |")
    lines = [f"{'TINY CHECK (CPU): not throughput figures. ' if result['tiny'] else ''}"
             f"Device: {result['device_name']}; torch {result['torch']}; epochs "
             f"{result['epochs']}; releases generated at scales {result['scales']} in "
             f"{result['generate_s']} s; upsampling parity max |GPU - CPU| "
             f"{result['upsampling_parity']}.", "", head, "|" + " --- |" * 7]
    for r in result["runs"]:
        stages = " / ".join(str(r.get(f"{s}_s")) for s in ("download", "train", "extract",
                                                             "estimate"))
        smi = [r.get(f"{s}_smi_memory_max_mib") for s in ("train", "extract")]
        lines.append(
            f"| {r['dataset']}.{r['backbone']} | {_fmt(r['train_img_per_s'])} / "
            f"{_fmt(r.get('train_steady_img_per_s'))} | "
            f"{_fmt(r['extract_img_per_s'])} ({_fmt(r['extract_rows'])}) | {stages} | "
            f"{_fmt(r.get('train_torch_peak_gib'))} / {_fmt(r.get('extract_torch_peak_gib'))} | "
            f"{_fmt(r.get('train_gpu_util_mean'))} / {_fmt(r.get('extract_gpu_util_mean'))} | "
            f"{_fmt(max((m for m in smi if m is not None), default=None))} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path,
                        default=Path(os.environ.get("OUT") or "gpu-cot-out"))
    parser.add_argument("--tiny", action="store_true",
                        help="CPU check at the smallest size (not throughput figures)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument("--epochs", type=int, default=None,
                        help="training epochs (default 2; 1 with --tiny)")
    parser.add_argument("--methods", nargs="+", default=["ac", "atc-ne", "cot"])
    parser.add_argument("--batch-size", type=int, default=1024, help="extract batch size")
    parser.add_argument("--runs", nargs="+", default=[f"{d}.{b}" for d, b in RUNS],
                        help="dataset.backbone pairs (default: the three of issue 32)")
    parser.add_argument("--state", type=Path, default=None,
                        help="state folder, kept (default: a temporary one, deleted afterwards)")
    args = parser.parse_args(argv)
    args.epochs = args.epochs or (1 if args.tiny else 2)
    from tasks.methods import check_method_names

    try:
        check_method_names(args.methods)
    except ValueError as exc:
        print(f"gpu_cot_suite: --methods: {exc}", file=sys.stderr)
        return 2
    runs = []
    for item in args.runs:
        dataset, _, backbone = item.partition(".")
        if dataset not in SCALES or not backbone:
            print(f"gpu_cot_suite: --runs takes dataset.backbone with dataset in "
                  f"{', '.join(SCALES)}; got {item!r}.", file=sys.stderr)
            return 2
        runs.append((dataset, backbone))
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    state = args.state or Path(tempfile.mkdtemp(prefix="gpu-cot-state-"))
    keep_state = args.state is not None
    os.environ["ALSA_BENCH_HOME"] = str(state)
    os.environ.setdefault("PREFECT_HOME", str(state / "prefect-home"))
    os.environ.setdefault("ALSA_BENCH_RANDOM_INIT", "1")
    os.environ.setdefault("ALSA_BENCH_LOADER_WORKERS", str(min(8, os.cpu_count() or 1)))
    os.environ.setdefault("ALSA_BENCH_PROGRESS", "0")

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    import torch

    from tasks.data.finetune_weights import check_weights
    from tasks.runtime.devices import resolve_device

    device = resolve_device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    log(f"device {name}, torch {torch.__version__}, {os.cpu_count()} cores, state {state}")
    scale = TINY_SCALE if args.tiny else None
    t0 = time.perf_counter()
    data = state / "data"
    from benchmarks import synth_release

    generate_s = {}
    for dataset in dict.fromkeys(d for d, _ in runs):
        t1 = time.perf_counter()
        synth_release.generate(dataset, data, scale=scale or SCALES[dataset], seed=0,
                               jobs=os.cpu_count() or 1)
        generate_s[dataset] = round(time.perf_counter() - t1, 1)
        log(f"generated {dataset} in {generate_s[dataset]} s")
    if args.tiny:
        _tiny_patches(log)
    for dataset, backbone in runs:
        check_weights([backbone], dataset, data)  # one line if it cannot run
    parity = _parity(device)
    log(f"upsampling parity (max |device - CPU|): {parity}")
    result: dict[str, Any] = {
        "tiny": args.tiny, "device": str(device), "device_name": name,
        "torch": torch.__version__, "cores": os.cpu_count(), "epochs": args.epochs,
        "scales": {d: scale or SCALES[d] for d, _ in runs}, "generate_s": generate_s,
        "upsampling_parity": parity, "methods": args.methods, "runs": [],
    }
    with SmiSampler(out / "nvidia_smi.csv") as smi:
        for dataset, backbone in runs:
            result["runs"].append(_run_one(dataset, backbone, args, state, smi, log))
            (out / "gpu_cot_suite.json").write_text(json.dumps(result, indent=2) + "\n")
    result["total_s"] = round(time.perf_counter() - t0, 1)
    (out / "gpu_cot_suite.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "gpu_cot_suite.md").write_text(_markdown(result))
    print(_markdown(result))
    if not keep_state:
        shutil.rmtree(state, ignore_errors=True)
    log(f"done in {result['total_s']} s; figures in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
