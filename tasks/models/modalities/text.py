"""Text adapter: texts become features once per split, then mini-batches train the head.

A split's samples are a one-dimensional ``object`` array of ``str`` (:mod:`tasks.data.texts`). The
backbone (:class:`tasks.models.backbones.text.TextClassifier`) turns them into features with
``featurize`` (cached frozen-encoder outputs, or hashed bags of words), outside the gradient
tape; the adapter then trains ``forward`` on mini-batches.

Recipe
------
Cross-entropy, AdamW over the parameters that require gradients, learning rate, weight decay,
batch size and epochs from the backbone's :class:`~tasks.models.backbones.BackboneSpec`, one-cycle
schedule (15 % warm-up, cosine decay to zero), as the image adapter. The batch order of every
epoch is a permutation drawn from ``numpy.random.default_rng([seed, epoch])``; where batches are
padded to their longest text (the token states of ``minilm-ft``), the permutation is then grouped
by length as ``transformers``' ``group_by_length`` does (:func:`grouped_by_length`: groups of 50
batches, each sorted longest first), so a batch pads to about its own length instead of twice
it. Validation is not looked at during training. Prediction runs in eval mode, 256 texts per batch; features padded
per batch (token states) go in length order, so short snippets are not padded to a review's
length, and the logits are put back in the split's order.

Split generation is cheap (re-sampling, string edits) and a split of long reviews as a
fixed-width ``numpy`` string array would be large, so generated text splits are not written to
the shift cache (:attr:`cache_splits` is False): what is expensive, the encoder's features, has
its own per-text cache.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, Final

import numpy as np
import torch
from torch import nn

from tasks.models.backbones.base import BackboneSpec
from tasks.models.modalities.base import FitReport, ModalityAdapter
from tasks.models.optim import adam
from tasks.runtime.progress import progress as show_progress
from tasks.data.texts import as_texts, take_texts, text_key

__all__ = ["ADAPTER", "TextAdapter", "grouped_by_length"]

logger = logging.getLogger("tasks.stages.train")

_EVAL_BATCH: Final[int] = 256
#: Batches per length group in training (``transformers``' ``LengthGroupedSampler`` uses 50).
LENGTH_GROUP_BATCHES: Final[int] = 50


def grouped_by_length(order: np.ndarray, lengths: np.ndarray, batch_size: int,
                      group_batches: int = LENGTH_GROUP_BATCHES) -> np.ndarray:
    """An epoch's permutation grouped by length, as ``transformers``' ``LengthGroupedSampler``.

    ``order`` is cut into consecutive groups of ``group_batches * batch_size`` rows; each group is
    sorted by ``lengths``, longest first (ties in ``order``'s order); the batches are then cut
    from the result as before. Every row still comes once an epoch and the groups stay random,
    while a batch holds texts of similar length: on ``rt-reviews``' training texts (27 tokens
    on average, 67 at most), batches of 32 pad to 1.94 times the tokens they hold in plain random
    order, and to 1.03 grouped.

    Examples
    --------
    >>> grouped_by_length(np.array([0, 1, 2, 3, 4]), np.array([1, 5, 3, 2, 4]), 1, 2).tolist()
    [1, 0, 2, 3, 4]
    """
    size = max(1, int(group_batches) * int(batch_size))
    groups = [order[i:i + size] for i in range(0, len(order), size)]
    return np.concatenate([g[np.argsort(-lengths[g], kind="stable")] for g in groups]) \
        if groups else order


def _featurize(model: nn.Module, texts: Any, device: torch.device, where: str) -> Any:
    featurize = getattr(model, "featurize", None)
    if featurize is None:
        raise ValueError(
            f"the text adapter needs a text backbone (with a featurize method); got "
            f"{type(model).__name__}."
        )
    return featurize(as_texts(texts, where), device)


class TextAdapter(ModalityAdapter):
    """Object arrays of texts: featurize once, mini-batch AdamW + one-cycle, batched inference."""

    name = "text"
    cache_splits = False

    def __init__(self) -> None:
        self._memo_owner: weakref.ref[nn.Module] | None = None
        self._memo_versions: tuple[int, ...] = ()
        self._memo: dict[str, np.ndarray] = {}

    def size(self, samples: Any) -> int:
        return len(samples)

    def take(self, samples: Any, index: np.ndarray) -> Any:
        return take_texts(samples, np.asarray(index, dtype=np.int64))

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
        features = _featurize(model, train[0], device, "train")
        labels = torch.from_numpy(np.asarray(train[1]).astype(np.int64))
        n = len(features)
        model.to(device)
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = adam(params, lr=recipe.lr, weight_decay=recipe.weight_decay, decoupled=True)
        steps_per_epoch = max(1, -(-n // recipe.batch_size))
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=recipe.lr, total_steps=max(1, epochs * steps_per_epoch),
            pct_start=0.15, anneal_strategy="cos",
        )
        loss_fn = nn.CrossEntropyLoss()
        last_loss = float("nan")
        lengths = features.lengths()
        for epoch in show_progress(range(epochs), desc=f"train {key}", unit="epoch",
                                   enabled=progress):
            model.train()
            order = np.random.default_rng([seed, epoch]).permutation(n)
            if lengths is not None:  # padded batches: group by length
                order = grouped_by_length(order, lengths, recipe.batch_size)
            running, seen = 0.0, 0
            starts = range(0, n, recipe.batch_size)
            bar = show_progress(starts, desc=f"epoch {epoch + 1}/{epochs}", unit="batch",
                                leave=False, enabled=progress)
            for start in bar:
                idx = order[start : start + recipe.batch_size]
                yb = labels[torch.from_numpy(idx)].to(device)
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model(*features.batch(idx, device)), yb)
                loss.backward()
                optimizer.step()
                scheduler.step()
                running += float(loss.detach()) * idx.size
                seen += idx.size
            last_loss = running / max(seen, 1)
            logger.info("%s epoch %d/%d: train loss %.4f", key, epoch + 1, epochs, last_loss)
        return FitReport(final_train_loss=last_loss, epochs_run=epochs)

    def predict(
        self, model: nn.Module, spec: Any, samples: Any, device: torch.device, batch_size: int
    ) -> np.ndarray:
        texts = as_texts(samples, "predict")
        keys = [text_key(t) for t in texts]
        memo = self._memo_for(model)
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k not in memo:
                first.setdefault(k, i)
        if first:
            fresh = self._predict(model, spec, take_texts(texts, list(first.values())),
                                  device, batch_size)
            memo.update(zip(first, fresh))
        n_out = int(getattr(spec, "n_classes", 0))
        if not keys:
            return np.zeros((0, n_out), dtype=np.float32)
        return np.stack([memo[k] for k in keys]).astype(np.float32, copy=False)

    def _memo_for(self, model: nn.Module) -> dict[str, np.ndarray]:
        """Logits already computed by this model with its current weights, by text key.

        Target splits share texts (label shift and domain mixtures re-sample the clean pool), so
        one extract stage would otherwise run the model on the same text several times. The
        memo belongs to one model object (held by a weak reference) and the version counters of
        its tensors, which every in-place update (an optimiser step, ``load_state_dict``)
        bumps; eval-mode inference is deterministic, so a memo hit returns exactly what a new
        forward pass would.
        """
        versions = tuple(t._version for t in model.state_dict(keep_vars=True).values())
        owner = self._memo_owner() if self._memo_owner is not None else None
        # a weak reference, not id(): a new model may reuse a freed model's id and, loaded from
        # a checkpoint, its version counters too
        if owner is not model or self._memo_versions != versions:
            self._memo_owner, self._memo_versions, self._memo = weakref.ref(model), versions, {}
        return self._memo

    def _predict(
        self, model: nn.Module, spec: Any, samples: Any, device: torch.device, batch_size: int
    ) -> np.ndarray:
        features = _featurize(model, samples, device, "predict")
        model.to(device).eval()
        n_out = int(getattr(spec, "n_classes", 0))
        chunks = []
        step = min(int(batch_size), _EVAL_BATCH)
        lengths = features.lengths()
        order = (np.argsort(lengths, kind="stable") if lengths is not None
                 else np.arange(len(features)))
        with torch.inference_mode():
            starts = range(0, len(features), step)
            for start in show_progress(starts, desc="predict", unit="batch", leave=False):
                idx = order[start : start + step]
                chunks.append(model(*features.batch(idx, device)).float().cpu().numpy())
        if not chunks:
            return np.zeros((0, n_out), dtype=np.float32)
        out = np.empty((len(features), chunks[0].shape[1]), dtype=np.float32)
        out[order] = np.concatenate(chunks)
        return out


#: The text adapter.
ADAPTER: Final[TextAdapter] = TextAdapter()
