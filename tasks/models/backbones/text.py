"""Text backbones: a frozen MiniLM with an MLP head, MiniLM with its top layer fine-tuned, and
a linear model on hashed bags of words.

Every text classifier is a :class:`TextClassifier`: ``featurize(texts)`` turns a split's texts
into :class:`TextFeatures` (cached encoder outputs, or sparse bags of words), and ``forward`` maps
a batch of them to logits. The text adapter (:mod:`tasks.models.modalities.text`) trains and predicts
through these two calls only.

==========  ==============================================================  ==================
key         architecture                                                    recipe
==========  ==============================================================  ==================
bow-linear  hashed bag of uni- and bigrams (2^18 buckets, L2-normalised     AdamW 2e-2, wd 0,
            counts) into one linear layer (``EmbeddingBag`` + bias)         batch 64, 8 ep.
minilm-mlp  frozen all-MiniLM-L6-v2, mean-pooled and L2-normalised          AdamW 1e-3,
            (cached per text), MLP 384-256-c, ReLU, dropout 0.1             wd 1e-2, batch 128,
                                                                            20 epochs
minilm-ft   all-MiniLM-L6-v2 with its top transformer layer (6 of 6)        AdamW 2e-4,
            fine-tuned from the pretrained weights on the cached states     wd 1e-2, batch 32,
            entering it, mean pooling, linear head                          2 epochs
==========  ==============================================================  ==================

``minilm-ft`` follows the paper's DistilBERT recipe in shape (AdamW, small learning rate, weight
decay 1e-2, a few epochs) but fine-tunes one layer, not all six: the five frozen layers run once
per text (their output is cached, :mod:`tasks.models.text_encoder`), which is what makes three seeds of
it fit the CPU budget of ``make bench``. All three use AdamW with the one-cycle schedule of the
image recipe (15 % warm-up, cosine decay to zero).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any, Final

import numpy as np
import torch
from torch import nn

from tasks.models.backbones.base import BackboneSpec

__all__ = [
    "BOW_BUCKETS",
    "BagFeatures",
    "BagOfWordsLinear",
    "DenseFeatures",
    "MiniLMHead",
    "MiniLMTopLayer",
    "SPECS",
    "StateFeatures",
    "TextClassifier",
    "TextFeatures",
]

#: Hash buckets of the bag-of-words model.
BOW_BUCKETS: Final[int] = 2**18


class TextFeatures(ABC):
    """A split's texts in the form a model's ``forward`` takes, batch by batch."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of texts."""

    @abstractmethod
    def batch(self, index: np.ndarray, device: torch.device) -> tuple[torch.Tensor, ...]:
        """The ``forward`` arguments of the texts at ``index``."""

    def lengths(self) -> np.ndarray | None:
        """Tokens per text when batches are padded (prediction then goes in length order)."""
        return None


class DenseFeatures(TextFeatures):
    """One vector per text: ``forward(x)`` with ``x`` ``(b, d)``."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def batch(self, index: np.ndarray, device: torch.device) -> tuple[torch.Tensor, ...]:
        return (self.x[torch.from_numpy(np.asarray(index, dtype=np.int64))].to(device),)


class StateFeatures(TextFeatures):
    """Token states per text, padded per batch: ``forward(states (b, t, d), mask (b, t))``."""

    def __init__(self, states: list[np.ndarray]) -> None:
        self.states = states

    def __len__(self) -> int:
        return len(self.states)

    def lengths(self) -> np.ndarray | None:
        return np.array([s.shape[0] for s in self.states], dtype=np.int64)

    def batch(self, index: np.ndarray, device: torch.device) -> tuple[torch.Tensor, ...]:
        rows = [self.states[i] for i in np.asarray(index, dtype=np.int64)]
        longest = max(r.shape[0] for r in rows)
        width = rows[0].shape[1]
        x = np.zeros((len(rows), longest, width), dtype=np.float32)
        mask = np.zeros((len(rows), longest), dtype=np.float32)
        for i, r in enumerate(rows):
            x[i, : r.shape[0]] = r
            mask[i, : r.shape[0]] = 1.0
        return torch.from_numpy(x).to(device), torch.from_numpy(mask).to(device)


class BagFeatures(TextFeatures):
    """Sparse bags ``(n, buckets)`` (CSR): ``forward(indices, offsets, weights)``."""

    def __init__(self, matrix: Any) -> None:
        self.matrix = matrix.tocsr()

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def batch(self, index: np.ndarray, device: torch.device) -> tuple[torch.Tensor, ...]:
        sub = self.matrix[np.asarray(index, dtype=np.int64)]
        return (
            torch.from_numpy(sub.indices.astype(np.int64)).to(device),
            torch.from_numpy(sub.indptr[:-1].astype(np.int64)).to(device),
            torch.from_numpy(sub.data.astype(np.float32)).to(device),
        )


class TextClassifier(nn.Module, ABC):
    """A classifier of texts: ``featurize`` (no gradients) then ``forward`` (trained).

    Every text backbone implements both; the class is abstract, so a backbone without
    ``featurize`` cannot be built.
    """

    @abstractmethod
    def featurize(self, texts: np.ndarray, device: torch.device) -> TextFeatures:
        """The features of ``texts`` (a checked object array of ``str``)."""


class BagOfWordsLinear(TextClassifier):
    """Linear model on hashed, L2-normalised uni- and bigram counts.

    ``EmbeddingBag(buckets, c, mode="sum")`` with per-sample weights is exactly ``W x`` for a
    sparse ``x``; a bias is added.
    """

    def __init__(self, n_classes: int, buckets: int = BOW_BUCKETS) -> None:
        super().__init__()
        self.buckets = int(buckets)
        self.weight = nn.EmbeddingBag(self.buckets, n_classes, mode="sum")
        nn.init.zeros_(self.weight.weight)
        self.bias = nn.Parameter(torch.zeros(n_classes))

    def featurize(self, texts: np.ndarray, device: torch.device) -> TextFeatures:
        from sklearn.feature_extraction.text import HashingVectorizer

        vectorizer = HashingVectorizer(
            n_features=self.buckets, ngram_range=(1, 2), alternate_sign=False, norm="l2",
            lowercase=True, dtype=np.float32,
        )
        return BagFeatures(vectorizer.transform(list(texts)))

    def forward(
        self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor
    ) -> torch.Tensor:
        return self.weight(indices, offsets, per_sample_weights=weights) + self.bias


class MiniLMHead(TextClassifier):
    """MLP head on the frozen, cached MiniLM sentence embeddings."""

    def __init__(self, n_classes: int, hidden: int = 256, dropout: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(384, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, n_classes)
        )

    def featurize(self, texts: np.ndarray, device: torch.device) -> TextFeatures:
        from tasks.models.text_encoder import frozen_features

        pooled = frozen_features(texts, "pooled", device)
        return DenseFeatures(np.concatenate(pooled) if pooled else np.zeros((0, 384), np.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class MiniLMTopLayer(TextClassifier):
    """MiniLM's top transformer layer, initialised from the pretrained weights, plus a head.

    ``forward(states, mask)`` runs the layer on the cached states entering it, mean-pools over
    the mask and applies a linear head.
    """

    def __init__(self, n_classes: int) -> None:
        super().__init__()
        from tasks.models.text_encoder import STATES_LAYER, load_minilm

        encoder = load_minilm()
        self.layer = copy.deepcopy(encoder.model.encoder.layer[STATES_LAYER])
        for p in self.layer.parameters():
            p.requires_grad_(True)
        self.dropout = nn.Dropout(0.1)
        self.head = nn.Linear(encoder.hidden, n_classes)

    def featurize(self, texts: np.ndarray, device: torch.device) -> TextFeatures:
        from tasks.models.text_encoder import frozen_features

        return StateFeatures(frozen_features(texts, "states", device))

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        from tasks.models.text_encoder import autocast

        additive = (1.0 - mask[:, None, None, :]) * torch.finfo(states.dtype).min
        with autocast(states.device):
            out = self.layer(states, attention_mask=additive)
        out = (out[0] if isinstance(out, tuple) else out).float()
        m = mask.unsqueeze(-1)
        pooled = (out * m).sum(1) / m.sum(1).clamp_min(1.0)
        return self.head(self.dropout(pooled))


def _text_shape(name: str, shape: tuple[int, ...]) -> None:
    if len(shape) != 1:
        raise ValueError(
            f"backbone {name!r} needs text inputs, input_shape=(max_tokens,); got {shape}."
        )


def _build_bow(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    _text_shape("bow-linear", shape)
    return BagOfWordsLinear(n_classes)


def _build_mlp(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    _text_shape("minilm-mlp", shape)
    return MiniLMHead(n_classes)


def _build_ft(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    _text_shape("minilm-ft", shape)
    return MiniLMTopLayer(n_classes)


SPECS: Final[tuple[BackboneSpec, ...]] = (
    BackboneSpec(
        "bow-linear", _build_bow, "hashed uni+bigram bag of words, linear layer", ("text",),
        epochs=8, batch_size=64, lr=2e-2, weight_decay=0.0,
    ),
    BackboneSpec(
        "minilm-mlp", _build_mlp, "frozen all-MiniLM-L6-v2 embeddings, MLP head", ("text",),
        epochs=20, batch_size=128, lr=1e-3, weight_decay=1e-2,
    ),
    BackboneSpec(
        "minilm-ft", _build_ft, "all-MiniLM-L6-v2, top layer fine-tuned", ("text",),
        epochs=2, batch_size=32, lr=2e-4, weight_decay=1e-2,
    ),
)
