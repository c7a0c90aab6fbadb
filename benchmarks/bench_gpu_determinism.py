"""What cuDNN/cuBLAS determinism costs on a GPU, and what it guarantees: two trainings per mode.

Trains the pipeline's CIFAR ResNet18 (torchvision's ``resnet18``, 10 classes, unchanged as in
``tasks/models/backbones/vision.py``) with the paper's recipe (SGD momentum 0.9, lr 0.1, weight
decay 5e-4, batch 200: ``tasks.data.datasets.cifar.RESNET18_RECIPE``) on seeded random 3x32x32
images, for ``--epochs`` epochs, in two modes, twice each, every training in a fresh process
(as two pipeline runs would be: cuBLAS reads its workspace setting when it starts):

* ``deterministic``: the reproducible mode's switches, the pipeline's own code
  (:func:`tasks.runtime.reproducible.deterministic_torch` with ``cuda=True``, and
  ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` from :func:`~tasks.runtime.reproducible.apply_environment`):
  ``torch.use_deterministic_algorithms(True)``, ``cudnn.deterministic``, no ``cudnn.benchmark``
  autotuning, no TF32;
* ``default``: torch's defaults with ``cudnn.benchmark = True`` (the usual fast setting).

It prints, per mode, the seconds of the first epoch (autotuning and warm-up included) and the
median of the later ones, images/s, and whether the two trainings' weights are bit-identical
(else the largest absolute difference of a weight). Order: deterministic, default,
deterministic, default (interleaved, so a busy GPU or host slows both modes alike).

Without CUDA it says so and runs the same protocol on the CPU (where the CUDA switches do
nothing), so the script itself is tested anywhere::

    python benchmarks/bench_gpu_determinism.py                       # CUDA if present
    python benchmarks/bench_gpu_determinism.py --images 20000 --epochs 3 --json out.json
    python benchmarks/bench_gpu_determinism.py --device cpu --images 600 --epochs 1

Needs only torch and torchvision (the project's ``tasks.runtime.reproducible`` imports nothing
else), so it runs on a GPU host without the pipeline's other dependencies.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODES = ("deterministic", "default")
BATCH = 200


def _train(mode: str, device: str, images: int, epochs: int, seed: int) -> dict[str, Any]:
    """One training in this (fresh) process; its environment is already the mode's."""
    from contextlib import nullcontext

    import torch
    from torchvision.models import resnet18

    from tasks.runtime.reproducible import deterministic_torch

    dev = torch.device(device)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand((images, 3, 32, 32), generator=gen)
    y = torch.randint(0, 10, (images,), generator=gen)
    model = resnet18(weights=None, num_classes=10).to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    if mode == "default" and dev.type == "cuda":
        torch.backends.cudnn.benchmark = True
    context = deterministic_torch(cuda=dev.type == "cuda") if mode == "deterministic" \
        else nullcontext()
    xd = x.to(dev).contiguous(memory_format=torch.channels_last)
    yd = y.to(dev)
    seconds = []
    with context:
        for _ in range(epochs):
            order = torch.randperm(images, generator=gen).to(dev)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.train()
            for s in range(0, images, BATCH):
                idx = order[s:s + BATCH]
                opt.zero_grad(set_to_none=True)
                loss_fn(model(xd[idx]), yd[idx]).backward()
                opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - t0)
    weights = [v.detach().float().cpu().contiguous() for v in model.state_dict().values()
               if v.is_floating_point()]
    h = hashlib.sha256()
    for w in weights:
        h.update(w.numpy().tobytes())
    path = os.environ.get("BENCH_WEIGHTS_OUT")
    if path:  # for the largest difference between two trainings
        torch.save(weights, path)
    return {"seconds": seconds, "digest": h.hexdigest()[:16],
            "cublas": os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}


def _spawn(mode: str, device: str, images: int, epochs: int, seed: int,
           weights: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUBLAS_WORKSPACE_CONFIG", "ALSA_BENCH_REPRODUCIBLE",
                        "ALSA_BENCH_PINNED_VARS")}
    env["BENCH_WEIGHTS_OUT"] = str(weights)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mode, "--device", device,
           "--images", str(images), "--epochs", str(epochs), "--seed", str(seed)]
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} training failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _largest_difference(a: Path, b: Path) -> float:
    import torch

    wa, wb = torch.load(a), torch.load(b)
    return max(float((x - y).abs().max()) for x, y in zip(wa, wb, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (CUDA if present), cuda or cpu")
    parser.add_argument("--images", type=int, default=10_000, help="training images per epoch")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker == "deterministic":  # the variables the pipeline sets, before torch
            from tasks.runtime.reproducible import apply_environment

            apply_environment(True)
        print(json.dumps(_train(args.worker, args.device, args.images, args.epochs, args.seed)))
        return
    import tempfile

    import torch

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        print("# CUDA is not available here: running the same protocol on the CPU (the cuDNN and "
              "cuBLAS switches do nothing there; the figures below are CPU figures)")
    elif not torch.cuda.is_available():
        parser.error(f"--device {device} asks for CUDA, which is not available here.")
    print(f"# torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
          f"{torch.backends.cudnn.version() if torch.cuda.is_available() else None}, "
          f"{args.images} random 3x32x32 images x {args.epochs} epochs, batch {BATCH}, "
          f"ResNet18 (torchvision), SGD momentum 0.9 lr 0.1 wd 5e-4, channels-last")
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for attempt in range(2):
            for mode in MODES:
                out = Path(tmp) / f"{mode}-{attempt}.pt"
                results[mode].append(_spawn(mode, device, args.images, args.epochs, args.seed,
                                            out))
        summary = {}
        print(f"{'mode':14} {'first epoch s':>13} {'later epochs s':>14} {'images/s':>9}  "
              f"{'two trainings':16} device")
        for mode in MODES:
            a, b = results[mode]
            later = [s for r in (a, b) for s in r["seconds"][1:]]
            first = statistics.median([a["seconds"][0], b["seconds"][0]])
            steady = statistics.median(later) if later else first
            identical = a["digest"] == b["digest"]
            diff = 0.0 if identical else _largest_difference(Path(tmp) / f"{mode}-0.pt",
                                                            Path(tmp) / f"{mode}-1.pt")
            verdict = "bit-identical" if identical else f"differ (max {diff:.1e})"
            print(f"{mode:14} {first:13.2f} {steady:14.2f} {args.images / steady:9.0f}  "
                  f"{verdict:16} {a['device']}")
            summary[mode] = {"first_epoch_s": first, "later_epoch_s": steady,
                             "images_per_s": args.images / steady, "bit_identical": identical,
                             "max_abs_difference": diff, "digests": [a["digest"], b["digest"]],
                             "cublas_workspace": a["cublas"], "device": a["device"],
                             "seconds": [a["seconds"], b["seconds"]]}
    cost = summary["deterministic"]["later_epoch_s"] / summary["default"]["later_epoch_s"]
    print(f"# deterministic / default time per epoch: {cost:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "torch": torch.__version__,
                                               "images": args.images, "epochs": args.epochs,
                                               "modes": summary, "cost": cost}, indent=2))


if __name__ == "__main__":
    main()
