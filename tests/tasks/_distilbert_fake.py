"""A tiny, randomly initialised DistilBERT in the layout of a local ``transformers`` folder.

:func:`write_tiny_distilbert` writes what ``hf download distilbert-base-uncased`` leaves in a
folder (``config.json``, ``model.safetensors`` of a ``DistilBertForMaskedLM``, ``vocab.txt`` and
the tokenizer files), at toy size: dim 32, 2 layers, 2 heads, hidden 64, a vocabulary of a few
dozen words. No network, no real weights.
"""

from __future__ import annotations

from pathlib import Path

#: Words of the toy vocabulary (after the special tokens).
WORDS: tuple[str, ...] = (
    "the", "a", "and", "is", "it", "this", "was", "not", "very", "good", "bad", "great",
    "terrible", "love", "hate", "product", "book", "works", "broke", "fine", "ok", "star",
    "stars", "five", "one", "would", "buy", "again", "never", "cheap", "quality", "fast",
    "slow", "shipping", "!", ".", ",",
)
SPECIAL: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def write_tiny_distilbert(folder: Path, seed: int = 0) -> Path:
    """Write a toy DistilBERT model folder and return it.

    Parameters
    ----------
    folder : Path
        Created if needed.
    seed : int, default 0
        Seed of the random weights.

    Returns
    -------
    Path
        ``folder``.
    """
    import torch
    from transformers import DistilBertConfig, DistilBertForMaskedLM, DistilBertTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + WORDS) + "\n", encoding="utf-8")
    tokens = vocab.read_text(encoding="utf-8").splitlines()
    tokenizer = DistilBertTokenizerFast(
        vocab={t: i for i, t in enumerate(tokens)}, do_lower_case=True, model_max_length=512
    )
    tokenizer.save_pretrained(folder)
    config = DistilBertConfig(
        vocab_size=len(SPECIAL) + len(WORDS), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
        max_position_embeddings=512, pad_token_id=0,
    )
    torch.manual_seed(seed)
    DistilBertForMaskedLM(config).save_pretrained(folder)
    return folder
