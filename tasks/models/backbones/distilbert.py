"""``distilbert``: DistilBERT-base-uncased fully fine-tuned, the ALSA paper's language backbone.

The paper (App. H, Amazon-WILDS) fine-tunes DistilBERT-base-uncased (Sanh et al. 2019) with AdamW,
learning rate 1e-5, weight decay 1e-2, batch size 8, 3 epochs, inputs truncated to 512 tokens.
This entry is that recipe on the text adapter (:mod:`tasks.models.modalities.text`), whose schedule is
the project's one-cycle (15 % warm-up, cosine decay to zero) on top of AdamW; every parameter of
the encoder and of the classification head is trained.

Weights, never downloaded
-------------------------
The pretrained model is read from a local ``transformers`` folder only
(``local_files_only=True``): ``$ALSA_BENCH_DISTILBERT`` when set, else
``<state>/models/distilbert-base-uncased`` (``<state>`` is :func:`storage.paths.state_dir`,
``$ALSA_BENCH_HOME`` or ``./.alsa-bench``). The folder must hold ``config.json`` (model type
``distilbert``), the weights (``model.safetensors`` or ``pytorch_model.bin``) and the tokenizer
(``tokenizer.json`` or ``vocab.txt``). Get it once on a machine with internet::

    hf download distilbert-base-uncased --local-dir distilbert-base-uncased \\
        --include "*.json" vocab.txt model.safetensors

(``huggingface-cli download`` with older ``huggingface_hub``), then copy the folder to the path
above. :func:`check_weights` says exactly what is missing and where it looked.

Model
-----
``AutoModelForSequenceClassification`` on the folder with ``num_labels = n_classes``: the
pretrained encoder (the release is a ``DistilBertForMaskedLM``; its masked-LM head is dropped)
plus DistilBERT's classification head (``pre_classifier`` 768-768, ReLU, dropout 0.2,
``classifier`` 768-c), newly initialised from the torch random state, so ``torch.manual_seed``
before :func:`tasks.models.backbones.get_backbone` fixes it. ``forward(input_ids, attention_mask)``
returns the logits as ``float32``. A buffer ``vocab_digest`` (SHA-256 of the tokenizer's
vocabulary) is saved with the weights, and ``featurize`` refuses to run when the folder's
tokenizer differs from the one the checkpoint was fine-tuned with. On CUDA the forward pass runs
under ``bfloat16`` autocast (:data:`CUDA_AUTOCAST`; mixed precision is the usual way to
fine-tune BERT-size models on a GPU, its speed-up was not measured here); on the CPU it is plain
``float32``.

Truncation rule
---------------
Every text is tokenised by the folder's tokenizer (lower-cased WordPiece for the uncased model)
with ``[CLS]`` and ``[SEP]`` added and **head truncation**: only the first ``max_tokens - 2``
word pieces are kept, ``max_tokens = min(input_shape[0], config.max_position_embeddings)``
(512 for ``amazon-wilds``), as the WILDS reference code does. Texts are not padded when
tokenised; :class:`TokenFeatures` pads each mini-batch to its longest text with the tokenizer's
pad id and a zero attention mask, and reports the lengths so that the adapter predicts in length
order (little padding).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch

from tasks.models.backbones.base import BackboneSpec
from tasks.models.backbones.text import TextClassifier, TextFeatures

__all__ = [
    "CUDA_AUTOCAST",
    "DistilBertClassifier",
    "ENV_VAR",
    "MAX_TOKENS",
    "MODEL_NAME",
    "SPECS",
    "TokenFeatures",
    "check_weights",
    "weights_folder",
]

logger = logging.getLogger(__name__)

#: Hugging Face name of the pretrained model.
MODEL_NAME: Final[str] = "distilbert-base-uncased"
#: Environment variable naming the local model folder.
ENV_VAR: Final[str] = "ALSA_BENCH_DISTILBERT"
#: The paper's maximum sequence length (tokens, ``[CLS]`` and ``[SEP]`` included).
MAX_TOKENS: Final[int] = 512
#: Run the forward pass under bfloat16 autocast when the inputs are on a CUDA device.
CUDA_AUTOCAST: Final[bool] = True
#: Texts tokenised per call of the tokenizer (bounds the memory of one call).
_TOKENIZE_CHUNK: Final[int] = 4096

_WEIGHT_FILES: Final[tuple[str, ...]] = ("model.safetensors", "pytorch_model.bin")
_TOKENIZER_FILES: Final[tuple[str, ...]] = ("tokenizer.json", "vocab.txt")
#: Parameters of the classification head, the only ones the pretrained folder lacks.
_HEAD_KEYS: Final[tuple[str, ...]] = (
    "pre_classifier.weight", "pre_classifier.bias", "classifier.weight", "classifier.bias",
)


def weights_folder() -> Path:
    """The local model folder: ``$ALSA_BENCH_DISTILBERT``, else ``<state>/models/<MODEL_NAME>``.

    Returns
    -------
    Path
        Nothing is read or created.
    """
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    from storage.paths import state_dir

    return state_dir() / "models" / MODEL_NAME


def _how_to_get(folder: Path) -> str:
    return (
        f"on a machine with internet run `hf download {MODEL_NAME} --local-dir {MODEL_NAME} "
        f"--include '*.json' vocab.txt model.safetensors` (or `huggingface-cli download "
        f"{MODEL_NAME} --local-dir {MODEL_NAME}`), then copy that folder to {str(folder)!r} "
        f"(or point ${ENV_VAR} at it); alsa-bench never downloads weights"
    )


def check_weights(folder: Path | str | None = None) -> Path:
    """Check that a local DistilBERT folder holds a config, weights and a tokenizer.

    Parameters
    ----------
    folder : Path or str, optional
        The model folder; default :func:`weights_folder`.

    Returns
    -------
    Path
        The folder.

    Raises
    ------
    FileNotFoundError
        If the folder or one of its files is missing; one message saying what is missing,
        where it looked (and whether that came from ``$ALSA_BENCH_DISTILBERT``) and how to get
        the weights.
    """
    path = Path(folder) if folder is not None else weights_folder()
    origin = (
        f"${ENV_VAR}" if folder is None and os.environ.get(ENV_VAR, "").strip()
        else "the default folder" if folder is None else "the folder given"
    )
    if not path.is_dir():
        missing = "the folder itself"
    else:
        needs = []
        if not (path / "config.json").is_file():
            needs.append("config.json")
        if not any((path / f).is_file() for f in _WEIGHT_FILES):
            needs.append(" or ".join(_WEIGHT_FILES))
        if not any((path / f).is_file() for f in _TOKENIZER_FILES):
            needs.append(" or ".join(_TOKENIZER_FILES))
        missing = ", ".join(needs)
    if missing:
        raise FileNotFoundError(
            f"DistilBERT weights not found: missing {missing} in {str(path)!r} ({origin}); "
            f"{_how_to_get(path)}."
        )
    return path


def _vocab_digest(tokenizer: Any) -> torch.Tensor:
    """SHA-256 of the tokenizer's vocabulary (token, id pairs in id order) as 32 ``uint8``."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: (kv[1], kv[0]))
    digest = hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode("utf-8")).digest()
    return torch.tensor(list(digest), dtype=torch.uint8)


def _hex(digest: torch.Tensor) -> str:
    return bytes(digest.detach().cpu().tolist()).hex()


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' load report and progress bar (the head is new by design)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


class TokenFeatures(TextFeatures):
    """Token ids per text, padded per batch: ``forward(input_ids (b, t), attention_mask (b, t))``.

    Parameters
    ----------
    ids : list of numpy.ndarray
        One ``int32`` array of token ids per text, special tokens included, not padded.
    pad_id : int
        Token id used for padding.
    """

    def __init__(self, ids: list[np.ndarray], pad_id: int) -> None:
        self.ids = ids
        self.pad_id = int(pad_id)

    def __len__(self) -> int:
        return len(self.ids)

    def lengths(self) -> np.ndarray | None:
        """``int64`` tokens of every text, special tokens included (prediction sorts by it)."""
        return np.fromiter((r.size for r in self.ids), dtype=np.int64, count=len(self.ids))

    def batch(self, index: np.ndarray, device: torch.device) -> tuple[torch.Tensor, ...]:
        rows = [self.ids[int(i)] for i in np.asarray(index, dtype=np.int64)]
        longest = max((r.size for r in rows), default=0)
        ids = np.full((len(rows), longest), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), longest), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : r.size] = r
            mask[i, : r.size] = 1
        return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)


class DistilBertClassifier(TextClassifier):
    """DistilBERT with a sequence-classification head, from a local folder (see module doc).

    Parameters
    ----------
    n_classes : int
        Number of classes (``num_labels``).
    max_tokens : int, default 512
        Longest input in tokens, ``[CLS]`` and ``[SEP]`` included; capped by the model's
        ``max_position_embeddings``.
    folder : Path or str, optional
        Model folder; default :func:`weights_folder`.

    Raises
    ------
    FileNotFoundError
        If the folder lacks its config, weights or tokenizer (:func:`check_weights`).
    ValueError
        If the folder holds another model type than ``distilbert``, its weights lack encoder
        parameters or have other shapes, or ``max_tokens < 3``.
    """

    def __init__(
        self, n_classes: int, max_tokens: int = MAX_TOKENS, folder: Path | str | None = None
    ) -> None:
        super().__init__()
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 3:
            raise ValueError(f"max_tokens must be an integer >= 3; got {max_tokens!r}.")
        path = check_weights(folder)
        from transformers import (
            AutoConfig,
            AutoModelForSequenceClassification,
            AutoTokenizer,
        )

        config = AutoConfig.from_pretrained(path, local_files_only=True)
        if getattr(config, "model_type", None) != "distilbert":
            raise ValueError(
                f"the folder {str(path)!r} must hold a DistilBERT model (config model_type "
                f"'distilbert'); got {getattr(config, 'model_type', None)!r}. Point ${ENV_VAR} "
                f"at a {MODEL_NAME} folder."
            )
        self.tokenizer: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
        with _quiet_transformers():
            self.model, info = AutoModelForSequenceClassification.from_pretrained(
                path, num_labels=n_classes, local_files_only=True, dtype=torch.float32,
                output_loading_info=True,
            )
        missing = sorted(set(info.get("missing_keys") or ()) - set(_HEAD_KEYS))
        if missing or info.get("mismatched_keys"):
            raise ValueError(
                f"the folder {str(path)!r} must hold pretrained DistilBERT encoder weights; "
                f"{len(missing)} encoder parameters are missing (e.g. {missing[:3]}) and "
                f"{len(info.get('mismatched_keys') or ())} have other shapes. Point ${ENV_VAR} "
                f"at a {MODEL_NAME} folder."
            )
        logger.info(
            "distilbert: pretrained encoder from %s, new classification head (%d classes)",
            path, n_classes,
        )
        self._vocab_digest = _vocab_digest(self.tokenizer)
        # saved with the weights: featurize refuses a tokenizer other than the one trained with
        self.register_buffer("vocab_digest", self._vocab_digest.clone(), persistent=True)
        self.max_tokens = min(int(max_tokens), int(config.max_position_embeddings))
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else 0)
        self.folder = str(path)

    def featurize(self, texts: np.ndarray, device: torch.device) -> TextFeatures:
        """Token ids of ``texts`` with head truncation to :attr:`max_tokens` (module doc).

        Raises
        ------
        ValueError
            If the model's weights were trained with another vocabulary than the tokenizer of
            the current folder (the ``vocab_digest`` buffer of the checkpoint differs).
        """
        if not torch.equal(self.vocab_digest.detach().cpu(), self._vocab_digest):
            raise ValueError(
                f"the weights were fine-tuned with another tokenizer vocabulary than the one in "
                f"{self.folder!r} (vocabulary SHA-256 {_hex(self.vocab_digest)[:12]} at "
                f"training, {_hex(self._vocab_digest)[:12]} now); point ${ENV_VAR} at the "
                f"folder the model was trained with, or retrain."
            )
        ids: list[np.ndarray] = []
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            chunk = [str(t) for t in texts[start : start + _TOKENIZE_CHUNK]]
            encoded = self.tokenizer(
                chunk, truncation=True, max_length=self.max_tokens, padding=False,
                add_special_tokens=True, return_attention_mask=False,
                return_token_type_ids=False,
            )["input_ids"]
            ids.extend(np.asarray(e, dtype=np.int32) for e in encoded)
        return TokenFeatures(ids, self.pad_id)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        with torch.autocast(
            device_type="cuda", dtype=torch.bfloat16,
            enabled=CUDA_AUTOCAST and input_ids.is_cuda,
        ):
            out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return out.logits.float()


def _build(n_classes: int, shape: tuple[int, ...]) -> DistilBertClassifier:
    if len(shape) != 1:
        raise ValueError(
            f"backbone 'distilbert' needs text inputs, input_shape=(max_tokens,); got {shape}."
        )
    return DistilBertClassifier(n_classes, max_tokens=int(shape[0]))


SPECS: Final[tuple[BackboneSpec, ...]] = (
    BackboneSpec(
        "distilbert", _build, "DistilBERT-base-uncased, fully fine-tuned (local weights)",
        ("text",), epochs=3, batch_size=8, lr=1e-5, weight_decay=1e-2,
    ),
)
