"""The modality adapter contract: the only place that knows what a sample of a modality is.

Train and extract call an adapter and nothing else, so a new suite of an existing modality is a
dataset entry, and a new modality is one adapter module plus its backbones. An adapter answers
four questions:

* how many samples a split holds and how to take a subset (:meth:`ModalityAdapter.size`,
  :meth:`ModalityAdapter.take`);
* how a backbone is trained on a split, with the validation split for early stopping
  (:meth:`ModalityAdapter.fit`: batches for images, full batch on one graph for graphs);
* how a trained backbone turns a split into logits (:meth:`ModalityAdapter.predict`);
* whether a generated target split can be stored as plain arrays in the shift cache
  (:attr:`ModalityAdapter.cache_splits`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from tasks.models.backbones.base import BackboneSpec

__all__ = ["FitReport", "ModalityAdapter"]


@dataclass(frozen=True)
class FitReport:
    """What a training loop reports.

    Attributes
    ----------
    final_train_loss : float
        Mean training loss of the last epoch run.
    epochs_run : int
        Epochs actually run (fewer than the recipe's when early stopping fired).
    best_epoch : int or None
        1-based epoch whose weights were kept (early stopping), None when the last is kept.
    best_val_accuracy : float or None
        Validation accuracy of the kept epoch, when validation was tracked during training.
    """

    final_train_loss: float
    epochs_run: int
    best_epoch: int | None = None
    best_val_accuracy: float | None = None


class ModalityAdapter(ABC):
    """How samples of one modality are batched, trained on and predicted."""

    #: Modality name, as in :attr:`tasks.data.datasets.DatasetSpec.modality`.
    name: str = ""
    #: Whether generated target splits are plain arrays that the shift cache can store.
    cache_splits: bool = True

    @abstractmethod
    def size(self, samples: Any) -> int:
        """Number of samples (images, nodes to classify, texts) in ``samples``."""

    @abstractmethod
    def take(self, samples: Any, index: np.ndarray) -> Any:
        """The samples at positions ``index`` (``int64``), in that order."""

    @abstractmethod
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
        """Train ``model`` in place on ``train = (samples, labels)``.

        ``val`` is used only by recipes with early stopping (:attr:`BackboneSpec.patience`);
        ``spec`` is the dataset's :class:`~tasks.data.datasets.DatasetSpec`. The caller seeds torch
        and builds the model; the adapter seeds anything else it draws (batch order) from
        ``seed``. With ``progress`` the epochs (and an epoch's batches) show a bar through
        :func:`tasks.runtime.progress.progress`: on a terminal only, never in a Prefect task or
        on a Dask worker, and without changing a number.
        """

    @abstractmethod
    def predict(
        self, model: nn.Module, spec: Any, samples: Any, device: torch.device, batch_size: int
    ) -> np.ndarray:
        """``(n, n_classes)`` ``float32`` logits in eval mode, without gradients, on the CPU.

        Adapters that batch show the batches with :func:`tasks.runtime.progress.progress`
        (a bar on a terminal only).
        """
