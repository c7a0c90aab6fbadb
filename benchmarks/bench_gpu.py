"""Accelerator cost of the image recipes: ResNet18 train/inference variants and the ImageNet extract.

Two parts, each printing one table (and writing it as JSON with ``--json FILE``):

``resnet18``
    The CIFAR ResNet18 recipe of the pipeline (``get_backbone("resnet18", 10, (3, 32, 32))``,
    SGD momentum 0.9, lr 0.1, weight decay 5e-4, batch 200 as in
    :data:`tasks.data.datasets.cifar.RESNET18_RECIPE`) timed as pure GPU compute: inputs already on
    the device, ``--steps`` timed training steps after ``--warmup`` untimed ones, then inference
    at batch 1,024. Variants: ``fp32`` (NCHW), ``channels-last`` (what
    :class:`tasks.models.modalities.image.ImageAdapter` uses), ``bf16`` (``torch.autocast`` with
    bfloat16, channels-last), ``compile`` (``torch.compile`` of the channels-last model, fp32)
    ``compile+bf16``, and ``compile-cudagraphs`` (``mode="reduce-overhead"``: CUDA graphs, which
    take the per-kernel launch cost off the CPU). A variant that fails is reported with its
    error instead of figures. Per variant: train and inference images/s, peak GPU memory
    (``torch.cuda.max_memory_allocated``), mean GPU utilisation sampled by NVML every 50 ms during
    the timed steps, and for compiled variants the compile (first-step) seconds.

``cifar-extract``
    Where the extract stage's time goes on CIFAR-size images: ``--rows`` random ``uint8``
    32x32x3 images through the pipeline's own paths at batch 1,024 (ResNet18, random weights):
    :func:`tasks.models.modalities.image.predict_samples` (logits only) and
    :func:`tasks.models.penultimate.predict_with_features` (what the extract stage runs), against
    the parts of one pass over the same batches: the CPU conversion
    (:func:`tasks.data.datasets.cifar.cifar10_inputs`), ``pin_memory``, the host-to-device copy of
    the pinned batch, and the forward pass on inputs already on the device.

``imagenet-extract``
    The imagenet suite's extract path on a generated release (``synth_release.py imagenet``):
    the pipeline's :func:`tasks.models.modalities.image.predict_samples` with the loader's own
    JPEG decoding (:func:`tasks.data.datasets.imagenet.to_inputs_for`; in
    :func:`tasks.runtime.loader.loader_workers` processes: ``$ALSA_BENCH_LOADER_WORKERS``, none
    by default) on each
    pretrained architecture **with random weights** (the published weights cannot be fetched
    offline; the compute per image is the same), against the pure forward pass on inputs already
    on the device and the decoding rate of 1 and ``--workers`` processes.

Run (one GPU)::

    python benchmarks/bench_gpu.py resnet18 --device cuda
    python benchmarks/bench_gpu.py cifar-extract --device cuda --rows 100000
    python benchmarks/bench_gpu.py imagenet-extract --root DATA --device cuda --rows 4096

On a CPU the same commands run (``--device cpu``), without the NVML columns; ``compile`` variants
are skipped there unless ``--compile-on-cpu`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tasks.models.backbones import get_backbone
from tasks.models.modalities.image import predict_samples

VARIANTS = ("fp32", "channels-last", "bf16", "compile", "compile+bf16", "compile-cudagraphs")


class UtilSampler:
    """Mean GPU utilisation (NVML, percent) over a block of code, sampled every ``period`` s."""

    def __init__(self, device: torch.device, period: float = 0.05) -> None:
        self.period = period
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._handle: Any = None
        if device.type == "cuda":
            try:
                import pynvml

                pynvml.nvmlInit()
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
                self._nvml = pynvml
            except Exception:  # noqa: BLE001 -- NVML missing: no utilisation column
                self._handle = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
            time.sleep(self.period)

    def __enter__(self) -> UtilSampler:  # noqa: PYI034
        if self._handle is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._stop.set()
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.samples)) if self.samples else None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _resnet18_variant(variant: str, device: torch.device, args: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    model = get_backbone("resnet18", 10, (3, 32, 32)).to(device)
    channels_last = variant != "fp32"
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    bf16 = "bf16" in variant
    compiled = variant.startswith("compile")
    mode = "reduce-overhead" if variant == "compile-cudagraphs" else None
    step_model: nn.Module = torch.compile(model, mode=mode) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(args.batch, 3, 32, 32, generator=gen).to(device, memory_format=fmt)
    y = torch.randint(0, 10, (args.batch,), generator=gen).to(device)
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with amp:
            loss = loss_fn(step_model(x), y)
        loss.backward()
        opt.step()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    step()
    _sync(device)
    first_s = time.perf_counter() - t0
    for _ in range(args.warmup):
        step()
    _sync(device)
    with UtilSampler(device) as util:
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        _sync(device)
        train_s = time.perf_counter() - t0
    train_peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None

    step_model.eval()
    xi = torch.randn(args.infer_batch, 3, 32, 32, generator=gen).to(device, memory_format=fmt)
    with torch.inference_mode(), amp:
        t0 = time.perf_counter()
        step_model(xi)
        _sync(device)
        infer_first_s = time.perf_counter() - t0
        for _ in range(2):
            step_model(xi)
        _sync(device)
        with UtilSampler(device) as infer_util:
            t0 = time.perf_counter()
            for _ in range(args.infer_steps):
                step_model(xi)
            _sync(device)
            infer_s = time.perf_counter() - t0
    return {
        "variant": variant,
        "train_img_s": args.steps * args.batch / train_s,
        "infer_img_s": args.infer_steps * args.infer_batch / infer_s,
        "first_step_s": first_s,
        "first_infer_s": infer_first_s,
        "train_peak_gib": None if train_peak is None else train_peak / 2**30,
        "infer_peak_gib": (torch.cuda.max_memory_allocated(device) / 2**30
                           if device.type == "cuda" else None),
        "train_util_pct": util.mean,
        "infer_util_pct": infer_util.mean,
    }


def _fmt(value: Any, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def bench_resnet18(args: argparse.Namespace, device: torch.device) -> list[dict]:
    rows = []
    for variant in args.variants:
        if variant.startswith("compile") and device.type != "cuda" and not args.compile_on_cpu:
            continue
        try:
            r = _resnet18_variant(variant, device, args)
        except Exception as exc:  # noqa: BLE001 -- a compiler bug must not hide the others
            msg = str(exc).strip().splitlines()[0][:160]
            print(f"{variant:>14}: FAILED: {type(exc).__name__}: {msg}", flush=True)
            rows.append({"variant": variant, "error": f"{type(exc).__name__}: {msg}"})
            continue
        rows.append(r)
        print(f"{variant:>14}: train {r['train_img_s']:,.0f} img/s, inference "
              f"{r['infer_img_s']:,.0f} img/s, first step {r['first_step_s']:.1f} s, "
              f"peak {_fmt(r['train_peak_gib'], '.2f')} GiB, util train "
              f"{_fmt(r['train_util_pct'], '.0f')} % / inference "
              f"{_fmt(r['infer_util_pct'], '.0f')} %", flush=True)
    print(f"\n| variant | train img/s | inference img/s (batch {args.infer_batch}) | first step s | "
          "peak GPU memory GiB (train) | GPU util % train / inference |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "error" in r:
            print(f"| {r['variant']} | failed: {r['error']} | | | | |")
            continue
        print(f"| {r['variant']} | {r['train_img_s']:,.0f} | {r['infer_img_s']:,.0f} | "
              f"{r['first_step_s']:.1f} | {_fmt(r['train_peak_gib'], '.2f')} | "
              f"{_fmt(r['train_util_pct'], '.0f')} / {_fmt(r['infer_util_pct'], '.0f')} |")
    return rows


def bench_cifar_extract(args: argparse.Namespace, device: torch.device) -> list[dict]:
    from tasks.data.datasets.cifar import SPECS
    from tasks.models.modalities.image import ADAPTER
    from tasks.models.penultimate import predict_with_features

    spec = SPECS[0]
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (args.rows, 32, 32, 3), dtype=np.uint8)
    torch.manual_seed(0)
    model = get_backbone("resnet18", 10, spec.input_shape).to(device)
    model.eval()
    predict_samples(model, spec, x[:2048], device, 1024)  # warm-up
    parts: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        _sync(device)
        t0 = time.perf_counter()
        out = fn()
        _sync(device)
        parts[name] = time.perf_counter() - t0
        return out

    with UtilSampler(device) as util:
        timed("predict_samples (logits)", lambda: predict_samples(model, spec, x, device, 1024))
    timed("predict_with_features (extract stage)",
          lambda: predict_with_features(ADAPTER, model, spec, x, device, 1024))
    starts = range(0, args.rows, 1024)
    conv = timed("conversion cifar10_inputs (CPU)",
                 lambda: [spec.to_inputs(x[i : i + 1024]) for i in starts])
    host = [torch.from_numpy(c) for c in conv]
    if device.type == "cuda":
        pinned = timed("pin_memory", lambda: [h.pin_memory() for h in host])
        timed("copy pinned -> device", lambda: [
            p.to(device, memory_format=torch.channels_last, non_blocking=True) for p in pinned])
        timed("copy pageable -> device", lambda: [
            h.to(device, memory_format=torch.channels_last) for h in host])
        raw = [torch.from_numpy(x[i : i + 1024]) for i in starts]
        timed("copy uint8 pageable -> device", lambda: [r.to(device) for r in raw])
    on_dev = [h.to(device, memory_format=torch.channels_last) for h in host]
    model.to(memory_format=torch.channels_last)
    with torch.inference_mode():
        timed("forward on device-resident inputs", lambda: [model(b) for b in on_dev])
    rows = [{"part": k, "seconds": v, "img_s": args.rows / v} for k, v in parts.items()]
    print(f"\n{args.rows:,} rows, batch 1,024, ResNet18 (random weights); GPU util during "
          f"predict_samples {_fmt(util.mean, '.0f')} %")
    print("| part | seconds | images/s |")
    print("| --- | --- | --- |")
    for r in rows:
        print(f"| {r['part']} | {r['seconds']:.2f} | {r['img_s']:,.0f} |")
    return rows


def _decode_chunk(args: tuple[list[str], str]) -> int:
    from tasks.data.datasets.imagenet import to_inputs_for

    paths, backbone = args
    return int(to_inputs_for(backbone)(np.asarray(paths, dtype=object)).shape[0])


def bench_imagenet_extract(args: argparse.Namespace, device: torch.device) -> list[dict]:
    import torchvision

    from tasks.data.datasets.imagenet import read_imagenet_val, to_inputs_for
    from tasks.data.pretrained_weights import WEIGHTS
    from tasks.runtime.loader import loader_workers

    used = loader_workers()
    paths, _ = read_imagenet_val(args.root)
    rng = np.random.default_rng(0)
    paths = paths[rng.permutation(paths.shape[0])[: args.rows]]
    print(f"# {paths.shape[0]} ImageNet validation JPEGs from {args.root} "
          f"(generated release), random weights; the extract decodes in {used} worker "
          "processes (0: in this process)", flush=True)
    rows = []
    for name in args.backbones:
        spec = argparse.Namespace(to_inputs=to_inputs_for(name))
        torch.manual_seed(0)
        model = getattr(torchvision.models, WEIGHTS[name].arch)(weights=None).to(device)
        model.eval()
        # pure forward: inputs already on the device (the loader's batch: 256 rows of 224 px)
        x = torch.randn(256, 3, 224, 224).to(device, memory_format=torch.channels_last)
        model.to(memory_format=torch.channels_last)
        with torch.inference_mode():
            for _ in range(3):
                model(x)
            _sync(device)
            reps = max(1, args.forward_reps)
            t0 = time.perf_counter()
            for _ in range(reps):
                model(x)
            _sync(device)
            forward = reps * 256 / (time.perf_counter() - t0)
        predict_samples(model, spec, paths[:64], device, 1024)  # warm-up
        with UtilSampler(device) as util:
            t0 = time.perf_counter()
            logits = predict_samples(model, spec, paths, device, 1024)
            _sync(device)
            extract = paths.shape[0] / (time.perf_counter() - t0)
        assert logits.shape == (paths.shape[0], 1000)
        n_dec = min(paths.shape[0], 512)
        t0 = time.perf_counter()
        _decode_chunk((list(paths[:n_dec]), name))
        decode_1 = n_dec / (time.perf_counter() - t0)
        chunks = [(list(c), name) for c in np.array_split(paths, max(1, paths.shape[0] // 64))]
        with ProcessPoolExecutor(args.workers) as pool:
            list(pool.map(_decode_chunk, chunks[: args.workers]))  # start the workers
            t0 = time.perf_counter()
            done = sum(pool.map(_decode_chunk, chunks))
            decode_w = done / (time.perf_counter() - t0)
        rows.append({"backbone": name, "forward_img_s": forward, "extract_img_s": extract,
                     "decode_1_img_s": decode_1, "decode_workers_img_s": decode_w,
                     "workers": args.workers, "extract_util_pct": util.mean,
                     "loader_workers": used})
        print(f"{name}: pure forward {forward:,.0f} img/s; extract through the loader "
              f"{extract:,.0f} img/s (GPU util {_fmt(util.mean, '.0f')} %); decoding 1 process "
              f"{decode_1:,.0f} img/s, {args.workers} processes {decode_w:,.0f} img/s",
              flush=True)
    print(f"\n| backbone | pure forward img/s | extract img/s ({used} loader workers) | ratio | "
          f"decode img/s, 1 / {args.workers} processes | GPU util % during extract |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['backbone']} | {r['forward_img_s']:,.0f} | {r['extract_img_s']:,.0f} | "
              f"{r['extract_img_s'] / r['forward_img_s']:.3f} | {r['decode_1_img_s']:,.0f} / "
              f"{r['decode_workers_img_s']:,.0f} | {_fmt(r['extract_util_pct'], '.0f')} |")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("resnet18", "cifar-extract", "imagenet-extract"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--batch", type=int, default=200, help="training batch (recipe: 200)")
    parser.add_argument("--steps", type=int, default=200, help="timed training steps")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps after the first")
    parser.add_argument("--infer-batch", type=int, default=1024)
    parser.add_argument("--infer-steps", type=int, default=50)
    parser.add_argument("--compile-on-cpu", action="store_true")
    parser.add_argument("--root", type=Path, help="data root of a generated imagenet release")
    parser.add_argument("--rows", type=int, default=None,
                        help="rows to extract (cifar-extract: 100,000; imagenet-extract: 4,096)")
    parser.add_argument("--backbones", nargs="+",
                        default=["alexnet", "mobilenet_v2", "efficientnet_b0"])
    parser.add_argument("--workers", type=int, default=8, help="decoding processes to compare")
    parser.add_argument("--forward-reps", type=int, default=20)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"# torch {torch.__version__}, device {device} ({name}), "
          f"{torch.get_num_threads()} CPU threads", flush=True)
    if args.part == "resnet18":
        rows = bench_resnet18(args, device)
    elif args.part == "cifar-extract":
        args.rows = args.rows or 100_000
        rows = bench_cifar_extract(args, device)
    else:
        if args.root is None:
            parser.error("imagenet-extract needs --root (the data root of a generated release)")
        args.rows = args.rows or 4096
        rows = bench_imagenet_extract(args, device)
    if args.json is not None:
        args.json.write_text(json.dumps({"device": name, "torch": torch.__version__,
                                         "part": args.part, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
