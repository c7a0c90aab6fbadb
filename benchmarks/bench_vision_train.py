"""CPU (or GPU) cost of the CIFAR ResNet18 recipe: seconds per 1,000 training images, images/s.

Trains torchvision's ResNet18 (``resnet18``, 10 classes) with the pipeline's own image adapter
(:class:`tasks.models.modalities.image.ImageAdapter`: per-batch ``to_inputs``, SGD momentum 0.9, lr 0.1,
weight decay 5e-4, batch 200, channels-last) on random ``uint8`` 32x32x3 images normalised by
:func:`tasks.data.datasets.cifar.cifar10_inputs`, for one epoch over ``--train`` images, then predicts
``--predict`` images. No data set is needed. Prints the seconds per 1,000 training images, the
inference throughput, and the extrapolated time of one epoch of the imbalanced CIFAR-10 source
(26,667 images). Run on a quiet machine::

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_vision_train.py
    .venv/bin/python benchmarks/bench_vision_train.py --device cuda --train 20000
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import numpy as np
import torch

from tasks.models.backbones import get_backbone, get_backbone_spec
from tasks.data.spec import imbalanced_counts
from tasks.data.datasets.cifar import CIFAR10_TRAIN_LARGEST, RESNET18_RECIPE, SPECS
from tasks.models.modalities.image import ADAPTER


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=2000, help="training images (one epoch)")
    parser.add_argument("--predict", type=int, default=4000, help="images to predict")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()

    device = torch.device(args.device)
    spec = SPECS[0]
    recipe = dataclasses.replace(get_backbone_spec("resnet18"), **dict(RESNET18_RECIPE))
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (max(args.train, args.predict), 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, x.shape[0]).astype(np.int64)
    torch.manual_seed(0)
    model = get_backbone("resnet18", 10, spec.input_shape)

    # warm-up: one batch (oneDNN picks its kernels on first use)
    warm = dataclasses.replace(recipe, patience=None)
    ADAPTER.fit(model, warm, spec, (x[:200], y[:200]), (x[:1], y[:1]), epochs=1, seed=0,
                device=device, progress=False, key="warm-up")
    t0 = time.perf_counter()
    ADAPTER.fit(model, warm, spec, (x[: args.train], y[: args.train]), (x[:1], y[:1]),
                epochs=1, seed=0, device=device, progress=False, key="bench")
    if device.type == "cuda":
        torch.cuda.synchronize()
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ADAPTER.predict(model, spec, x[: args.predict], device, 2048)
    predict_s = time.perf_counter() - t0

    per_1000 = train_s / args.train * 1000
    n_epoch = int(imbalanced_counts(10, CIFAR10_TRAIN_LARGEST).sum())
    threads = os.environ.get("OMP_NUM_THREADS", str(torch.get_num_threads()))
    print(f"device {device}, torch threads {torch.get_num_threads()} (OMP_NUM_THREADS={threads})")
    print(f"train: {args.train} images in {train_s:.1f} s = {per_1000:.2f} s per 1,000 images")
    print(f"predict: {args.predict} images in {predict_s:.1f} s = "
          f"{args.predict / predict_s:.0f} images/s")
    print(f"one epoch of the imbalanced CIFAR-10 source ({n_epoch:,} images): "
          f"~{per_1000 * n_epoch / 1000 / 60:.1f} min (+ validation "
          f"{6667 / (args.predict / predict_s):.0f} s when early stopping is on)")


if __name__ == "__main__":
    main()
