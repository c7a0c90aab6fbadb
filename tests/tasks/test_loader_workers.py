"""Decoding in worker processes (``--loader-workers``): the count, and logits equal to decoding
in the calling process."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

import tasks.models.modalities.image as image
from tasks.data.datasets.imagenet import to_inputs_for
from tasks.runtime.loader import LOADER_WORKERS_ENV, loader_workers
from tasks.stages.versions import PROJECT_ROOT

CPU = torch.device("cpu")


def test_the_variable_sets_the_count_and_a_bad_value_is_named(monkeypatch) -> None:
    monkeypatch.delenv(LOADER_WORKERS_ENV, raising=False)
    assert loader_workers() == 0
    monkeypatch.setenv(LOADER_WORKERS_ENV, "3")
    assert loader_workers() == 3
    monkeypatch.setenv(LOADER_WORKERS_ENV, " 0 ")
    assert loader_workers() == 0
    for bad in ("-1", "two", "1.5"):
        monkeypatch.setenv(LOADER_WORKERS_ENV, bad)
        with pytest.raises(ValueError, match=rf"ALSA_BENCH_LOADER_WORKERS \(--loader-workers\) "
                                             rf"must be an integer >= 0; got '{bad}'"):
            loader_workers()


def test_a_decoding_process_does_not_import_torch() -> None:
    code = ("import sys; import tasks.runtime.loader; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60, cwd=PROJECT_ROOT).stdout.strip()
    assert out == "False"


def test_chunks_never_straddle_a_forward_batch() -> None:
    chunks = image._Chunks(np.arange(150), 70)
    assert chunks.bounds == [(0, 0, 32), (0, 32, 64), (0, 64, 70), (1, 70, 102),
                             (1, 102, 134), (1, 134, 140), (2, 140, 150)]


class _Paths:
    """A photo dataset reduced to ``to_inputs`` (ImageNet's decoding, a module function, so it
    pickles to the worker processes)."""

    to_inputs = staticmethod(to_inputs_for("resnet18"))


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> np.ndarray:
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(75):
        w, h = (int(v) for v in rng.integers(230, 300, 2))
        pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        path = folder / f"{i:03d}.jpg"
        Image.fromarray(pixels).save(path, quality=85)
        paths.append(str(path))
    return np.asarray(paths, dtype=object)


def test_worker_decoding_gives_the_logits_of_decoding_here(monkeypatch, photos) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 7, stride=16), nn.Flatten(), nn.Linear(4 * 14 * 14, 6))
    monkeypatch.setenv(LOADER_WORKERS_ENV, "0")
    here = image.predict_samples(model, _Paths(), photos, CPU, 40)  # batches of 40, 35 rows
    monkeypatch.setenv(LOADER_WORKERS_ENV, "2")
    seen: list[int] = []
    real = image._decoded_batches

    def spy(*args, **kwargs):
        for batch in real(*args, **kwargs):
            seen.append(batch.shape[0])
            yield batch

    monkeypatch.setattr(image, "_decoded_batches", spy)
    workers = image.predict_samples(model, _Paths(), photos, CPU, 40)
    assert seen == [40, 35]  # the same forward batches, decoded by the worker processes
    assert workers.dtype == np.float32 and workers.shape == (75, 6)
    assert workers.tobytes() == here.tobytes()


def test_arrays_never_go_to_worker_processes(monkeypatch) -> None:
    # uint8 images (CIFAR, MNIST) are converted in a few milliseconds: no processes for them
    monkeypatch.setenv(LOADER_WORKERS_ENV, "2")
    monkeypatch.setattr(image, "_decoded_batches", lambda *a, **k: pytest.fail("used workers"))
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 3))

    class _Spec:
        @staticmethod
        def to_inputs(x: np.ndarray) -> np.ndarray:
            return x.astype(np.float32) / 255.0

    x = np.random.default_rng(1).integers(0, 256, (10, 28, 28), dtype=np.uint8)
    assert image.predict_samples(model, _Spec(), x, CPU, 4).shape == (10, 3)
