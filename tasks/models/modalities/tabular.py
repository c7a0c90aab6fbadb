"""Tabular adapter: a split is a :class:`~tasks.data.tables.Table`; the encoder and then the
model are fitted on the training split; prediction runs the model over batches of rows.

Training
--------
1. The backbone's :class:`~tasks.models.backbones.tabular.TableEncoder` is fitted on the
   training rows (medians, means and standard deviations, the levels seen), and only there.
2. A classical backbone (logistic regression, gradient-boosted trees:
   :class:`~tasks.models.backbones.tabular.FittedTabularModel`) is fitted in one call on the
   encoded training rows (``fit_arrays``; the seed draws its rows, see
   :mod:`tasks.models.backbones.tabular`); ``epochs`` does not apply and one fit is reported.
3. The MLP trains with cross-entropy and AdamW at the recipe's learning rate, weight decay and
   batch size, with the one-cycle schedule of the other adapters (15 % warm-up, cosine decay to
   zero); the batch order of every epoch is a permutation drawn from
   ``numpy.random.default_rng([seed, epoch])``. The encoding is computed once per split.

The MLP's training and every tabular forward pass run on one torch thread (restored after):
their matrices (a few hundred rows by at most a few hundred columns) are too small for a second
thread to help, and on a shared machine the second thread's waiting cost 30 times the work
(480 MLP steps on ``arrests``: 0.87 s on one thread, 27.6 s on two at load average 9.5). One
thread everywhere also makes the numbers independent of the task's thread pin.

Validation is not looked at during training (the trees' early stopping holds out training
rows of their own). Prediction runs in eval mode, without gradients, in batches of at most
``batch_size`` rows; logits are returned as ``float32``.

Generated tabular splits are cheap (row selections and corruptions of a few thousand rows), so
they are not written to the shift cache (:attr:`cache_splits` is False).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import numpy as np
import torch
from torch import nn

from tasks.data.tables import Table
from tasks.models.backbones.base import BackboneSpec
from tasks.models.backbones.tabular import FittedTabularModel, TabularClassifier
from tasks.models.modalities.base import FitReport, ModalityAdapter
from tasks.models.optim import adam
from tasks.runtime.progress import progress as show_progress

__all__ = ["ADAPTER", "TabularAdapter", "as_table"]

logger = logging.getLogger("tasks.stages.train")

#: Rows per prediction batch at most.
_EVAL_BATCH: Final[int] = 4096
#: Rows x trees walked at once by a forest (about 32 MB of node indices).
_TREE_CELLS: Final[int] = 4_000_000


def as_table(samples: Any, where: str) -> Table:
    """``samples`` if it is a :class:`~tasks.data.tables.Table`.

    Raises
    ------
    ValueError
        If it is not.
    """
    if not isinstance(samples, Table):
        raise ValueError(f"{where}: the tabular adapter needs a Table of rows; got "
                         f"{type(samples).__name__}.")
    return samples


def _model(model: nn.Module) -> TabularClassifier:
    if not isinstance(model, TabularClassifier):
        raise ValueError(f"the tabular adapter needs a tabular backbone; got "
                         f"{type(model).__name__}.")
    return model


@contextmanager
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _tensors(table: Table, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.from_numpy(np.ascontiguousarray(table.numeric)).to(device),
            torch.from_numpy(np.ascontiguousarray(table.categorical)).to(device))


class TabularAdapter(ModalityAdapter):
    """Tables: fit the encoder on training rows, then the model; batched inference."""

    name = "tabular"
    cache_splits = False

    def size(self, samples: Any) -> int:
        return len(as_table(samples, "size"))

    def take(self, samples: Any, index: np.ndarray) -> Any:
        return as_table(samples, "take").take(np.asarray(index, dtype=np.int64))

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
        net = _model(model)
        table = as_table(train[0], "train")
        labels = np.asarray(train[1]).astype(np.int64)
        net.encoder.fit(table)
        net.to(device)
        with torch.no_grad(), _one_thread():
            x = net.encoder(*_tensors(table, device))
        if isinstance(net, FittedTabularModel):
            with _one_thread():  # scikit-learn's own threads stay as the task pinned them
                loss = net.fit_arrays(x.cpu().numpy(), labels, seed)
            net.to(device)  # the fitted buffers were made on the CPU
            logger.info("%s: fitted, train log loss %.4f", key, loss)
            return FitReport(final_train_loss=loss, epochs_run=1)
        with _one_thread():
            return self._train(net, recipe, x.to(torch.float32), labels, epochs=epochs,
                               seed=seed, device=device, progress=progress, key=key)

    def _train(self, net: TabularClassifier, recipe: BackboneSpec, x: torch.Tensor,
               labels: np.ndarray, *, epochs: int, seed: int, device: torch.device,
               progress: bool, key: str) -> FitReport:
        y = torch.from_numpy(labels).to(device)
        n = int(labels.size)
        params = [p for p in net.parameters() if p.requires_grad]
        optimizer = adam(params, lr=recipe.lr, weight_decay=recipe.weight_decay, decoupled=True)
        steps_per_epoch = max(1, -(-n // recipe.batch_size))
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=recipe.lr, total_steps=max(1, epochs * steps_per_epoch),
            pct_start=0.15, anneal_strategy="cos",
        )
        loss_fn = nn.CrossEntropyLoss()
        head = getattr(net, "head", None)
        body = getattr(net, "body", None)
        if head is None or body is None:
            raise ValueError(f"{type(net).__name__} has no trainable layers to train.")
        last = float("nan")
        for epoch in show_progress(range(epochs), desc=f"train {key}", unit="epoch",
                                   enabled=progress):
            net.train()
            order = torch.from_numpy(np.random.default_rng([seed, epoch]).permutation(n))
            running = 0.0
            for start in range(0, n, recipe.batch_size):
                idx = order[start:start + recipe.batch_size].to(device)
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(head(body(x[idx])), y[idx])
                loss.backward()
                optimizer.step()
                scheduler.step()
                running += float(loss.detach()) * int(idx.numel())
            last = running / max(n, 1)
            logger.info("%s epoch %d/%d: train loss %.4f", key, epoch + 1, epochs, last)
        return FitReport(final_train_loss=last, epochs_run=epochs)

    def predict(
        self, model: nn.Module, spec: Any, samples: Any, device: torch.device, batch_size: int
    ) -> np.ndarray:
        net = _model(model)
        table = as_table(samples, "predict")
        net.to(device).eval()
        step = max(1, min(int(batch_size), _EVAL_BATCH))
        trees = getattr(net, "roots", None)
        if isinstance(trees, torch.Tensor) and trees.numel():  # (rows x trees) node indices
            step = min(step, max(64, _TREE_CELLS // int(trees.numel())))
        n_out = int(getattr(spec, "n_classes", net.n_classes))
        chunks = []
        with torch.inference_mode(), _one_thread():
            starts = range(0, len(table), step)
            for start in show_progress(starts, desc="predict", unit="batch", leave=False):
                rows = table.take(np.arange(start, min(start + step, len(table))))
                chunks.append(net(*_tensors(rows, device)).float().cpu().numpy())
        if not chunks:
            return np.zeros((0, n_out), dtype=np.float32)
        return np.concatenate(chunks).astype(np.float32, copy=False)


#: The tabular adapter.
ADAPTER: Final[TabularAdapter] = TabularAdapter()
