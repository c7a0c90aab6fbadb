"""Image adapter: mini-batch training (three optimizer recipes, optional early stopping), batched
prediction, raw samples turned into model inputs one batch at a time.

A split's samples are an array ``(n, ...)`` in the dataset's compact raw form (``uint8`` images
for Fashion-MNIST and CIFAR, or an array of image file paths that the dataset decodes); the
dataset's ``to_inputs`` turns a batch of them into ``float32`` model inputs
``(batch, *input_shape)``. Only one batch of inputs exists at a time, in training and in
prediction, so memory stays bounded by the raw split plus one batch.

Batches
-------
A ``DataLoader`` over the sample *indices* (no worker processes, ``shuffle=True``, a
``torch.Generator`` seeded with the run's seed) gives the batch order; each batch of indices
selects raw samples, which ``to_inputs`` converts. The order is exactly that of a loader over the
converted tensors (same sampler, same generator draws), so weights trained here are bit-identical
to those of converting the whole split first. Image batches are channels-last (oneDNN
convolutions run 1.2-2.5x faster on the CPU that way). On CUDA, a dataset whose ``to_inputs``
has an ``on_device`` twin (CIFAR) sends raw ``uint8`` rows and converts them on the GPU, equal
bit for bit; other batches are converted on the CPU and copied (not pinned: pinning every batch
cost more than the copy).

Inference over file paths (photos) can decode in worker processes
(:mod:`tasks.runtime.loader`: ``--loader-workers``, none by default): chunks of
:data:`DECODE_CHUNK_ROWS` rows are decoded by a forkserver's process pool and put back together
into the same batches, in the same order, so the logits are those of decoding in this process.

Recipes (``recipe.optimizer``)
------------------------------
``"adamw-onecycle"``
    AdamW, one-cycle schedule stepped every batch (15 % warm-up, cosine decay to zero); the
    default of the offline backbones.
``"sgd-step"``
    SGD with momentum 0.9 and weight decay, learning rate multiplied by 0.1 every
    :data:`SGD_STEP_EPOCHS` (100) epochs: the ALSA paper's CIFAR recipe (App. H.2).
``"adam"``
    Adam at a fixed learning rate (the paper's MNIST, Waterbirds and Office-31 recipes).

Early stopping
--------------
When ``recipe.patience`` is set, validation accuracy is measured after every epoch; the weights
of the best epoch (the first to reach the highest accuracy) are kept, and training stops once
``patience`` epochs in a row have not improved on it (or after ``epochs``). Without ``patience``
every epoch runs and validation is not looked at during training.
"""

from __future__ import annotations

import copy
import logging
import multiprocessing
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Final

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from tasks.models.backbones.base import BackboneSpec
from tasks.models.modalities.base import FitReport, ModalityAdapter
from tasks.models.optim import adam
from tasks.runtime.allocator import LARGE_BATCH_BYTES, map_large_blocks
from tasks.runtime.loader import convert_chunk, loader_workers
from tasks.runtime.progress import progress as show_progress

__all__ = ["ADAPTER", "EVAL_MAX_VALUES", "OPTIMIZERS", "SGD_STEP_EPOCHS", "ImageAdapter",
           "batch_layout", "eval_rows", "predict_logits"]

logger = logging.getLogger("tasks.stages.train")

_EVAL_BATCH: Final[int] = 2048
#: Most input values (rows x channels x height x width) one inference forward pass takes: 256
#: ImageNet-size 3x224x224 images. A requested batch of 224-pixel photos is cut to 256 rows, so a
#: ResNet18's first feature maps stay near 0.8 GB instead of the 3.3 GB of 1,024 rows (or 6.6 GB
#: of 2,048; issue 23: the waterbirds train stage passed 19 GB). 256 rows keep the forward
#: throughput of larger batches (measured on 2 cores: ResNet18 32 img/s at 256 rows, 34 at 512,
#: 29 at 64). Batches of CIFAR (3x32x32, up to 12,544 rows) and MNIST-size images are below it
#: and are not cut.
EVAL_MAX_VALUES: Final[int] = 256 * 3 * 224 * 224

#: The optimizer recipes of the module docstring.
OPTIMIZERS: Final[tuple[str, ...]] = ("adamw-onecycle", "sgd-step", "adam")
#: Epochs between the tenfold learning-rate drops of ``"sgd-step"`` (paper App. H.2).
SGD_STEP_EPOCHS: Final[int] = 100
#: Momentum of ``"sgd-step"``.
SGD_MOMENTUM: Final[float] = 0.9


def batch_layout(
    ndim: int, model: nn.Module | None = None, device: torch.device | None = None
) -> torch.memory_format:
    """The layout of a batch of ``ndim`` dimensions for ``model`` on ``device``.

    Image batches are channels-last (oneDNN's and cuDNN's convolutions are 1.2-2.5x faster on
    them), except where ATen's own convolution kernels compute them (the reproducible mode on
    the CPU turns oneDNN off: :func:`tasks.runtime.reproducible.deterministic_torch`) and the
    network declares ``CHANNELS_LAST_ON_ATEN = False``: LeNet there trains 1.7x and predicts
    1.5x faster on contiguous batches, while the narrow ResNet is 1.15x faster channels-last
    (``docs/PERFORMANCE.md``, "The reproducible mode's layout of LeNet's batches"). The
    layout changes no value beyond the order of additions inside a kernel.
    """
    if ndim != 4:
        return torch.contiguous_format
    on_cpu = device is None or device.type == "cpu"
    aten_convolutions = on_cpu and not torch.backends.mkldnn.enabled
    if aten_convolutions and not getattr(model, "CHANNELS_LAST_ON_ATEN", True):
        return torch.contiguous_format
    return torch.channels_last


def _inputs(spec: Any, samples: np.ndarray) -> np.ndarray:
    to_inputs = getattr(spec, "to_inputs", None)
    out = to_inputs(samples) if to_inputs is not None else np.asarray(samples)
    return np.asarray(out, dtype=np.float32)


def _to_device(x: np.ndarray, device: torch.device, fmt: torch.memory_format) -> torch.Tensor:
    """A converted batch on ``device`` (a plain view on CPU).

    Not pinned: pinning allocates page-locked memory for every batch, which cost 1.5 s per 100,000
    CIFAR rows on an H100 machine against 0.15 s for the plain (pageable) copy
    (``benchmarks/bench_gpu.py cifar-extract``, docs/PERFORMANCE.md).
    """
    return torch.from_numpy(np.ascontiguousarray(x)).to(device, memory_format=fmt)


def _batch(spec: Any, samples: np.ndarray, device: torch.device,
           model: nn.Module | None = None) -> torch.Tensor:
    """One batch of model inputs on ``device``, in the layout :func:`batch_layout` gives
    ``model`` (channels-last for images unless the network prefers otherwise).

    On CUDA, a dataset whose ``to_inputs`` has an ``on_device`` twin (CIFAR's
    :func:`tasks.data.datasets.cifar.cifar10_inputs`: the same float32 operations in torch, equal
    bit for bit) sends its raw ``uint8`` rows, a quarter of the float32 bytes, and converts them
    on the device: converting on the CPU held the extract stage at 10 % of an H100's forward
    throughput (docs/PERFORMANCE.md). Everywhere else the batch is converted on the CPU.
    """
    on_device = getattr(getattr(spec, "to_inputs", None), "on_device", None)
    if device.type == "cuda" and on_device is not None:
        x: torch.Tensor = on_device(torch.from_numpy(np.ascontiguousarray(samples)).to(device))
        return x.contiguous(memory_format=batch_layout(x.ndim, model, device))
    converted = _inputs(spec, samples)
    return _to_device(converted, device, batch_layout(converted.ndim, model, device))


#: Rows one decoding process converts at a time when decoding runs in worker processes
#: (:func:`_decoded_batches`): small, so the prefetched chunks of 8 workers hold about 300 MB of
#: 224-pixel inputs, whatever the batch size.
DECODE_CHUNK_ROWS: Final[int] = 32


class _Chunks:
    """Chunks of at most :data:`DECODE_CHUNK_ROWS` rows that never straddle a forward batch:
    ``bounds[i]`` is ``(batch index, first row, end row)``."""

    def __init__(self, samples: np.ndarray, step: int) -> None:
        n = samples.shape[0]
        self.bounds = [
            (start // step, c, min(c + DECODE_CHUNK_ROWS, start + step, n))
            for start in range(0, n, step)
            for c in range(start, min(start + step, n), DECODE_CHUNK_ROWS)
        ]


def _decoded_batches(spec: Any, samples: np.ndarray, step: int,
                     workers: int) -> Iterator[np.ndarray]:
    """The converted batches of ``step`` rows, in order, decoded by ``workers`` processes.

    Each batch is the concatenation of its chunks in row order, so it is the array
    ``_inputs(spec, samples[start:start + step])`` would give (the conversion is per row). The
    processes come from a forkserver (no fork of the multi-threaded flow process); at most
    ``2 * workers`` chunks are in flight, so memory stays bounded whatever the split's size.
    """
    bounds = _Chunks(samples, step).bounds
    to_inputs = spec.to_inputs
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        window: deque[tuple[int, Future[np.ndarray]]] = deque()
        upcoming = iter(bounds)

        def submit() -> None:
            nxt = next(upcoming, None)
            if nxt is not None:
                batch, lo, hi = nxt
                window.append((batch, pool.submit(convert_chunk, to_inputs, samples[lo:hi])))

        for _ in range(2 * workers):
            submit()
        pending: list[np.ndarray] = []
        current = 0
        while window:
            batch, future = window.popleft()
            submit()
            rows = future.result()
            if batch != current:
                yield np.concatenate(pending)
                pending, current = [], batch
            pending.append(rows)
        if pending:
            yield np.concatenate(pending)


def _large_batches_mapped(first: np.ndarray, rows: int, device: torch.device) -> bool:
    """Switch glibc to :func:`~tasks.runtime.allocator.map_large_blocks` when batches of ``rows``
    inputs like ``first`` (one converted row) reach :data:`LARGE_BATCH_BYTES` on the CPU.

    With the heap kept (:func:`~tasks.runtime.allocator.keep_freed_memory`, every stage's
    default) a ResNet18 step on 200 photos of 224 pixels fragments the heap: Waterbirds' train
    stage peaked at 8.2-9.0 GiB instead of 5.3 (``docs/PERFORMANCE.md``). Results are unchanged.
    """
    if device.type != "cpu" or rows * int(first.nbytes) < LARGE_BATCH_BYTES:
        return False
    return map_large_blocks()


def _decodes_files(spec: Any, samples: np.ndarray) -> bool:
    """Whether a pass converts file paths (photos): the samples are strings or objects."""
    return getattr(spec, "to_inputs", None) is not None and samples.dtype.kind in "OUS"


class _Indices(Dataset):
    """``0 .. n-1``: what the training loader shuffles and batches."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


def eval_rows(spec: Any, samples: np.ndarray, batch_size: int, *,
              first: np.ndarray | None = None) -> int:
    """Rows per inference forward pass: ``batch_size``, cut so one batch holds at most
    :data:`EVAL_MAX_VALUES` input values (at least one row).

    The size of one model input is read by converting the first sample alone (one photo decode
    for file-path samples) unless ``first``, that conversion, is given; no rows means
    ``batch_size``.
    """
    if samples.shape[0] == 0:
        return batch_size
    if first is None:
        first = _inputs(spec, samples[:1])
    per_row = max(1, int(np.asarray(first).size))
    return max(1, min(batch_size, EVAL_MAX_VALUES // per_row))


def predict_logits(
    model: nn.Module, inputs: np.ndarray, device: torch.device, batch_size: int = _EVAL_BATCH
) -> np.ndarray:
    """Logits of a model on float inputs, in eval mode without gradients.

    Parameters
    ----------
    model : torch.nn.Module
        Classifier already on ``device``.
    inputs : numpy.ndarray
        ``float32`` model inputs ``(n, *input_shape)``.
    device : torch.device
        Where to compute.
    batch_size : int, default 2048
        Rows per forward pass.

    Returns
    -------
    numpy.ndarray
        ``(n, n_classes)`` ``float32`` logits on the CPU.
    """
    return predict_samples(model, None, inputs, device, batch_size)


def predict_samples(
    model: nn.Module, spec: Any, samples: Any, device: torch.device, batch_size: int = _EVAL_BATCH
) -> np.ndarray:
    """Logits of a model on raw samples, converted with ``spec.to_inputs`` one batch at a time.

    Parameters
    ----------
    model : torch.nn.Module
        Classifier already on ``device``.
    spec : DatasetSpec or None
        Dataset entry whose ``to_inputs`` converts samples; None (or no ``to_inputs``) takes
        the samples as ``float32`` inputs.
    samples : numpy.ndarray
        Raw samples ``(n, ...)``.
    device : torch.device
        Where to compute.
    batch_size : int, default 2048
        Rows per forward pass, at most; cut by :func:`eval_rows` so one pass holds at most
        :data:`EVAL_MAX_VALUES` input values (256 rows of 224-pixel photos).

    Returns
    -------
    numpy.ndarray
        ``(n, n_classes)`` ``float32`` logits on the CPU.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}.")
    samples = np.asarray(samples)
    model.eval()
    chunks = []
    with torch.inference_mode():
        first = _inputs(spec, samples[:1]) if samples.shape[0] else None
        step = eval_rows(spec, samples, batch_size, first=first)
        if first is not None:
            _large_batches_mapped(first, step, device)
        starts = range(0, samples.shape[0], step)
        workers = loader_workers() if _decodes_files(spec, samples) else 0
        batches: Iterator[torch.Tensor] = (
            (_to_device(x, device, batch_layout(x.ndim, model, device))
             for x in _decoded_batches(spec, samples, step, workers))
            if workers and len(starts) > 0
            else (_batch(spec, samples[start : start + step], device, model)
                  for start in starts)
        )
        for xb in show_progress(batches, desc="predict", unit="batch", leave=False,
                                total=len(starts)):
            model.to(memory_format=batch_layout(xb.ndim, model, device))
            chunks.append(model(xb).float().cpu().numpy())
        if not chunks:  # no rows: one empty forward pass gives the right width
            empty = torch.from_numpy(np.ascontiguousarray(_inputs(spec, samples[:0])))
            return model(empty.to(device)).float().cpu().numpy()
    return np.concatenate(chunks).astype(np.float32, copy=False)


def _optimizer(
    model: nn.Module, recipe: BackboneSpec, n_epochs: int, steps_per_epoch: int
) -> tuple[torch.optim.Optimizer, Any, bool]:
    """The recipe's optimizer, its scheduler (or None) and whether that steps every batch."""
    params = model.parameters()
    if recipe.optimizer == "adamw-onecycle":
        opt: torch.optim.Optimizer = adam(
            params, lr=recipe.lr, weight_decay=recipe.weight_decay, decoupled=True
        )
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt,
            max_lr=recipe.lr,
            total_steps=max(1, n_epochs * steps_per_epoch),
            pct_start=0.15,
            anneal_strategy="cos",
        )
        return opt, sched, True
    if recipe.optimizer == "sgd-step":
        opt = torch.optim.SGD(
            params, lr=recipe.lr, momentum=SGD_MOMENTUM, weight_decay=recipe.weight_decay
        )
        return opt, torch.optim.lr_scheduler.StepLR(opt, SGD_STEP_EPOCHS, gamma=0.1), False
    if recipe.optimizer == "adam":
        opt = adam(params, lr=recipe.lr, weight_decay=recipe.weight_decay)
        return opt, None, False
    raise ValueError(
        f"optimizer of backbone {recipe.name!r} must be one of {', '.join(OPTIMIZERS)}; "
        f"got {recipe.optimizer!r}."
    )


class ImageAdapter(ModalityAdapter):
    """Arrays of images: shuffled mini-batches converted on the fly, batched inference."""

    name = "image"
    cache_splits = True

    def size(self, samples: Any) -> int:
        return int(np.asarray(samples).shape[0])

    def take(self, samples: Any, index: np.ndarray) -> Any:
        return np.asarray(samples)[np.asarray(index, dtype=np.int64)]

    def fit(
        self,
        model: nn.Module,
        recipe: BackboneSpec,
        spec: Any,
        train: tuple[Any, np.ndarray],
        val: tuple[Any, np.ndarray],
        *,
        epochs: int,
        seed: int,
        device: torch.device,
        progress: bool,
        key: str,
    ) -> FitReport:
        if recipe.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"optimizer of backbone {recipe.name!r} must be one of {', '.join(OPTIMIZERS)}; "
                f"got {recipe.optimizer!r}."
            )
        patience = recipe.patience
        if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int)
                                     or patience < 1):
            raise ValueError(f"patience of backbone {recipe.name!r} must be an integer >= 1 or "
                             f"None; got {patience!r}.")
        x_raw = np.asarray(train[0])
        y_all = np.asarray(train[1]).astype(np.int64)
        if x_raw.shape[0] != y_all.shape[0] or x_raw.shape[0] == 0:
            raise ValueError(f"train must hold as many labels as samples, at least one; got "
                             f"{x_raw.shape[0]} samples and {y_all.shape[0]} labels.")
        first = _inputs(spec, x_raw[:1])
        fmt = batch_layout(first.ndim, model, device)
        _large_batches_mapped(first, recipe.batch_size, device)
        model.to(device, memory_format=fmt)
        loader = DataLoader(
            _Indices(int(x_raw.shape[0])),
            batch_size=recipe.batch_size,
            shuffle=True,
            num_workers=0,
            generator=torch.Generator().manual_seed(seed),
        )
        optimizer, scheduler, per_batch = _optimizer(model, recipe, epochs, len(loader))
        loss_fn = nn.CrossEntropyLoss()
        val_x, val_y = np.asarray(val[0]), np.asarray(val[1]).astype(np.int64)
        best_acc, best_epoch, best_state = -1.0, 0, None
        last_loss, ran = float("nan"), 0
        epoch_bar = show_progress(range(1, epochs + 1), desc=f"train {key}", unit="epoch",
                                  enabled=progress)
        for epoch in epoch_bar:
            model.train()
            running, seen = 0.0, 0
            # One loader iterator is made and dropped before each epoch's batches, as this loop
            # always did through tqdm.auto (its asyncio class calls iter() in its constructor):
            # it draws one seed from the loader's generator, and every seeded run's batch order,
            # hence every stored number, depends on that draw. Progress bars draw nothing.
            iter(loader)
            bar = show_progress(loader, desc=f"epoch {epoch}/{epochs}", unit="batch",
                                leave=False, enabled=progress)
            for idx in bar:
                rows = idx.numpy()
                xb = _batch(spec, x_raw[rows], device, model)
                yb = torch.from_numpy(y_all[rows]).to(device, non_blocking=device.type == "cuda")
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(xb), yb)
                loss.backward()
                optimizer.step()
                if per_batch:
                    scheduler.step()
                running += float(loss.detach()) * yb.shape[0]
                seen += yb.shape[0]
                if hasattr(bar, "set_postfix"):  # a tqdm bar: show the running loss
                    bar.set_postfix(loss=f"{running / max(seen, 1):.3f}")
            if scheduler is not None and not per_batch:
                scheduler.step()
            last_loss, ran = running / max(seen, 1), epoch
            logger.info("%s epoch %d/%d: train loss %.4f", key, epoch, epochs, last_loss)
            if hasattr(epoch_bar, "set_postfix"):
                epoch_bar.set_postfix(loss=f"{last_loss:.3f}")
            if patience is None:
                continue
            logits = predict_samples(model, spec, val_x, device, _EVAL_BATCH)
            acc = float(np.mean(logits.argmax(axis=1) == val_y)) if val_y.size else 0.0
            logger.info("%s epoch %d: val acc %.4f (best %.4f at %d)",
                        key, epoch, acc, best_acc, best_epoch)
            if acc > best_acc:
                best_acc, best_epoch = acc, epoch
                best_state = copy.deepcopy(model.state_dict())
            elif epoch - best_epoch >= patience:
                break
        getattr(epoch_bar, "close", lambda: None)()  # early stopping leaves the bar open
        if best_state is not None:
            model.load_state_dict(best_state)
            logger.info("%s: %d epochs, kept epoch %d (val acc %.4f)",
                        key, ran, best_epoch, best_acc)
        return FitReport(
            final_train_loss=last_loss,
            epochs_run=ran,
            best_epoch=best_epoch if best_state is not None else None,
            best_val_accuracy=best_acc if best_state is not None else None,
        )

    def predict(
        self, model: nn.Module, spec: Any, samples: Any, device: torch.device, batch_size: int
    ) -> np.ndarray:
        return predict_samples(model, spec, samples, device, batch_size)


#: The image adapter.
ADAPTER: Final[ImageAdapter] = ImageAdapter()
