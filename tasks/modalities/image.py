"""Image adapter: mini-batch training with AdamW and a one-cycle schedule, batched prediction.

A split's samples are an array ``(n, ...)`` in the dataset's compact raw form (``uint8`` images
for Fashion-MNIST); the dataset's ``to_inputs`` turns them into ``float32`` model inputs
``(n, *input_shape)``.

Recipe
------
Cross-entropy, AdamW (learning rate, weight decay, batch size and default epochs from the
backbone's :class:`~tasks.backbones.BackboneSpec`), one-cycle schedule (15 % warm-up, cosine
decay to zero). The ``DataLoader`` uses no worker processes and a ``torch.Generator`` seeded
with the run's seed for the batch order; image batches are channels-last (oneDNN convolutions
run 1.2-2.5x faster on the CPU that way). Validation is not looked at during training.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm

from tasks.backbones.base import BackboneSpec
from tasks.modalities.base import FitReport, ModalityAdapter

__all__ = ["ADAPTER", "ImageAdapter", "predict_logits"]

logger = logging.getLogger("tasks.train")

_EVAL_BATCH: Final[int] = 2048


def _memory_format(ndim: int) -> torch.memory_format:
    """Channels-last for image batches (oneDNN convolutions are 1.2-2.5x faster on CPU)."""
    return torch.channels_last if ndim == 4 else torch.contiguous_format


def _inputs(spec: Any, samples: np.ndarray) -> np.ndarray:
    to_inputs = getattr(spec, "to_inputs", None)
    out = to_inputs(samples) if to_inputs is not None else np.asarray(samples)
    return np.asarray(out, dtype=np.float32)


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
    model.eval()
    fmt = _memory_format(inputs.ndim)
    model.to(memory_format=fmt)
    chunks = []
    with torch.inference_mode():
        for start in range(0, inputs.shape[0], batch_size):
            batch = torch.from_numpy(np.ascontiguousarray(inputs[start : start + batch_size]))
            chunks.append(model(batch.to(device, memory_format=fmt)).float().cpu().numpy())
    if not chunks:  # no rows: one empty forward pass gives the right width
        with torch.inference_mode():
            empty = torch.from_numpy(np.ascontiguousarray(inputs[:0])).to(device)
            return model(empty).float().cpu().numpy()
    return np.concatenate(chunks).astype(np.float32, copy=False)


def _fit_epochs(
    model: nn.Module,
    loader: DataLoader,
    recipe: BackboneSpec,
    n_epochs: int,
    device: torch.device,
    fmt: torch.memory_format,
    key: str,
    progress: bool,
) -> float:
    """The training loop of the module docstring; returns the last epoch's mean loss."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer,
        max_lr=recipe.lr,
        total_steps=max(1, n_epochs * len(loader)),
        pct_start=0.15,
        anneal_strategy="cos",
    )
    loss_fn = nn.CrossEntropyLoss()
    last_loss = float("nan")
    for epoch in range(n_epochs):
        model.train()
        running, seen = 0.0, 0
        bar = tqdm(
            loader,
            desc=f"train {key} epoch {epoch + 1}/{n_epochs}",
            disable=not progress,
            leave=False,
            unit="batch",
        )
        for xb, yb in bar:
            xb = xb.to(device, memory_format=fmt, non_blocking=True)
            yb = yb.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
            running += float(loss.detach()) * yb.shape[0]
            seen += yb.shape[0]
            bar.set_postfix(loss=f"{running / max(seen, 1):.3f}")
        last_loss = running / max(seen, 1)
        logger.info("%s epoch %d/%d: train loss %.4f", key, epoch + 1, n_epochs, last_loss)
    return last_loss


class ImageAdapter(ModalityAdapter):
    """Arrays of images: mini-batches, AdamW + one-cycle, batched inference."""

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
        x_train = torch.from_numpy(_inputs(spec, train[0]))
        y_train = torch.from_numpy(np.asarray(train[1]).astype(np.int64))
        fmt = _memory_format(x_train.ndim)
        model.to(device, memory_format=fmt)
        loader = DataLoader(
            TensorDataset(x_train, y_train),
            batch_size=recipe.batch_size,
            shuffle=True,
            num_workers=0,
            generator=torch.Generator().manual_seed(seed),
        )
        loss = _fit_epochs(model, loader, recipe, epochs, device, fmt, key, progress)
        return FitReport(final_train_loss=loss, epochs_run=epochs)

    def predict(
        self, model: nn.Module, spec: Any, samples: Any, device: torch.device, batch_size: int
    ) -> np.ndarray:
        return predict_logits(model, _inputs(spec, samples), device, batch_size)


#: The image adapter.
ADAPTER: Final[ImageAdapter] = ImageAdapter()
