"""The stages on a text dataset: every text backbone trains, extracts every split and is
estimated; reruns are bit-identical and hit the feature cache; bad input writes nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from storage.db import connect
from storage.estimates import read_estimates
from storage.logits import list_splits, read_val
from tasks.models.backbones import available_backbones
from tasks.data.datasets import DATASETS
from tasks.stages.download import stage_dataset
from tests.tasks._stages import estimate, extract
from tasks.data.targets import target_splits
from tasks.runtime.checkpoints import load_checkpoint
from tasks.stages.train import train_classifier
from tests.tasks._text_fake import tiny_text_spec


@pytest.fixture
def tiny_text(monkeypatch: pytest.MonkeyPatch, state_home: Path) -> str:
    monkeypatch.setitem(DATASETS, "tiny-text", tiny_text_spec())
    return "tiny-text"


@pytest.mark.parametrize(("backbone", "epochs"),
                         [("bow-linear", 30), ("minilm-mlp", 150), ("minilm-ft", 15)])
def test_text_run_end_to_end(tiny_text: str, state_home: Path, backbone: str, epochs: int) -> None:
    ref = stage_dataset(tiny_text)
    ckpt = train_classifier(ref, backbone, 0, epochs=epochs, progress=False)
    _, meta = load_checkpoint(ckpt.path)
    assert meta["modality"] == "text"
    assert train_classifier(ref, backbone, 0, epochs=epochs, progress=False).sha256 == ckpt.sha256

    db = state_home / "bench.duckdb"
    logits = extract(ckpt, suite="tiny-text", db=db)
    with connect(db, read_only=True) as con:
        splits = {s.split: s for s in list_splits(con, ckpt.run_key, role="target")}
        val_logits, val_labels = read_val(con, ckpt.run_key)
    assert set(splits) == {s.name for s in target_splits(tiny_text)}
    assert splits["clean"].n_samples == 40 and splits["reviews-100"].n_samples == 12
    assert val_logits.shape == (30, 2)
    assert float(np.mean(val_logits.argmax(1) == val_labels)) >= 0.75  # the words give it away
    estimate(logits, methods=["atc-mc", "alsa-g", "cot"])
    with connect(db, read_only=True) as con:
        rows = read_estimates(con, ckpt.run_key)
    assert len(rows) == 3 * len(splits)
    assert all(0.0 <= r.estimated_accuracy <= 1.0 for r in rows)
    _check_text_features(ckpt, logits, backbone, tiny_text, splits)


def _check_text_features(ckpt, logits, backbone, dataset, splits) -> None:
    """The stored features are the head's input per text, row for row (recomputed here one
    text at a time, without the adapter's memo or its length sort); none for bow-linear."""
    import torch

    from storage.results import read_logits_file
    from tasks.data.datasets import get_dataset_spec
    from tasks.models.backbones import get_backbone
    from tasks.models.modalities.text import _featurize
    from tasks.stages.splits import iter_target_splits
    from tasks.stages.extract import open_checkpoint

    content = read_logits_file(logits.path)
    if backbone == "bow-linear":
        assert content.features is None
        return
    assert {e.split for e in content.features.entries} == {*splits, "val", "train"}
    state, meta, _, dataset_ref = open_checkpoint(ckpt)
    model = get_backbone(backbone, int(meta["n_classes"]), tuple(meta["input_shape"]))
    model.load_state_dict(state)
    model.eval()
    head = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
    for split, samples, _ in iter_target_splits(dataset_ref):
        stored = content.features.split(split.name)
        assert stored.shape[0] == len(samples)
        for i in (0, len(samples) // 2, len(samples) - 1):
            seen = []
            handle = head.register_forward_hook(lambda m, a, o: seen.append(a[0]))
            feats = _featurize(model, samples[i:i + 1], torch.device("cpu"), "predict")
            with torch.inference_mode():
                model(*feats.batch(np.arange(1), torch.device("cpu")))
            handle.remove()
            np.testing.assert_allclose(stored[i].astype(np.float32), seen[0][0].numpy(),
                                       atol=2e-2, rtol=1e-2)


def test_frozen_features_are_computed_once_across_backbones_and_splits(
    tiny_text: str, state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasks.models import text_encoder

    calls: list[int] = []
    real = text_encoder._forward
    def counting(enc, ids, states, dev):
        calls.append(len(ids))
        return real(enc, ids, states, dev)

    monkeypatch.setattr(text_encoder, "_forward", counting)
    ref = stage_dataset(tiny_text)
    ckpt = train_classifier(ref, "minilm-mlp", 0, epochs=2, progress=False)
    extract(ckpt, suite="tiny-text", db=state_home / "bench.duckdb")
    first = sum(calls)
    # train + val + clean + reviews: each unique text encoded exactly once, label shift and
    # domain mixtures re-use the clean pool's features
    assert first == 80 + 30 + 40 + 12
    ckpt1 = train_classifier(ref, "minilm-mlp", 1, epochs=2, progress=False)
    extract(ckpt1, suite="tiny-text", db=state_home / "bench.duckdb")
    assert sum(calls) == first  # another seed: everything from the cache


def test_extract_runs_each_distinct_text_through_the_model_once(
    tiny_text: str, state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extract stage's logits and features come from one forward pass per distinct text
    (label shift and domain mixtures re-sample the clean pool: their rows are read back), and
    the stored logits are what the adapter's own ``predict`` gives each split."""
    import torch

    from storage.results import read_logits_file
    from tasks.data.datasets import get_dataset_spec
    from tasks.models.backbones import get_backbone
    from tasks.models.modalities.text import TextAdapter
    from tasks.stages.extract import open_checkpoint
    from tasks.stages.splits import iter_target_splits

    ref = stage_dataset(tiny_text)
    ckpt = train_classifier(ref, "minilm-ft", 0, epochs=2, progress=False)
    seen: list[str] = []
    real = TextAdapter._predict

    def counting(self, model, spec, samples, device, batch_size):  # type: ignore[no-untyped-def]
        seen.extend(samples)
        return real(self, model, spec, samples, device, batch_size)

    with monkeypatch.context() as patched:
        patched.setattr(TextAdapter, "_predict", counting)
        logits = extract(ckpt, suite="tiny-text", db=state_home / "bench.duckdb")
    # val 30 + clean 40 + reviews 12 + the 80 training texts (all in the feature subsample)
    assert len(seen) == len(set(seen)) == 80 + 30 + 40 + 12

    content = read_logits_file(logits.path)
    state, meta, _, dataset_ref = open_checkpoint(ckpt)
    model = get_backbone("minilm-ft", int(meta["n_classes"]), tuple(meta["input_shape"]))
    model.load_state_dict(state)
    spec = get_dataset_spec(tiny_text)
    for split, samples, _ in iter_target_splits(dataset_ref):
        alone = TextAdapter().predict(model, spec, samples, torch.device("cpu"), 1024)
        stored = content.target_logits(split.name)
        np.testing.assert_allclose(stored, alone, rtol=1e-5, atol=1e-5)


def test_every_text_backbone_is_registered_for_text_only() -> None:
    assert set(available_backbones("text")) >= {"bow-linear", "minilm-mlp", "minilm-ft"}
    assert not set(available_backbones("text")) & set(available_backbones("image"))


def test_an_image_backbone_on_text_is_refused_before_training(tiny_text: str) -> None:
    ref = stage_dataset(tiny_text)
    with pytest.raises(ValueError, match="backbone 'mlp' takes image inputs, but dataset"):
        train_classifier(ref, "mlp", 0, progress=False)


def test_an_empty_text_in_a_split_stops_before_anything_is_written(
    tiny_text: str, state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = DATASETS[tiny_text]
    good = spec.load_target_pool

    def bad_pool(root):
        pool = good(root)
        samples = pool.samples.copy()
        samples[3] = ""
        return dataclasses.replace(pool, samples=samples)

    ref = stage_dataset(tiny_text)
    ckpt = train_classifier(ref, "bow-linear", 0, epochs=2, progress=False)
    monkeypatch.setitem(DATASETS, tiny_text, dataclasses.replace(spec, load_target_pool=bad_pool))
    db = state_home / "bench.duckdb"
    with pytest.raises(ValueError, match=r"row 3: the text is empty"):
        extract(ckpt, suite="tiny-text", db=db)
    if db.exists():
        with connect(db, read_only=True) as con:
            assert list_splits(con, ckpt.run_key, role="target") == []


def test_repeated_texts_are_predicted_once_per_model_and_never_across_models(
    tiny_text: str, state_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from tasks.models.backbones import get_backbone
    from tasks.models.modalities import get_adapter

    adapter = get_adapter("text")
    spec = DATASETS[tiny_text]
    texts = np.array(["a fine film", "a dull film", "a fine film"], dtype=object)
    cpu = torch.device("cpu")
    seen: list[int] = []
    real = adapter._predict
    monkeypatch.setattr(adapter, "_predict",
                        lambda m, sp, x, d, b: seen.append(len(x)) or real(m, sp, x, d, b))
    torch.manual_seed(0)
    model = get_backbone("minilm-mlp", 2, (128,))
    first = adapter.predict(model, spec, texts, cpu, 256)
    np.testing.assert_array_equal(first[0], first[2])
    again = adapter.predict(model, spec, texts[:2], cpu, 256)
    assert seen == [2]  # the repeated text and the second call cost nothing
    np.testing.assert_array_equal(again, first[:2])
    with torch.no_grad():
        model.net[0].bias.add_(1.0)  # weights changed in place: the memo is dropped
    adapter.predict(model, spec, texts[:1], cpu, 256)
    torch.manual_seed(1)
    other = get_backbone("minilm-mlp", 2, (128,))
    other.load_state_dict(model.state_dict())
    adapter.predict(other, spec, texts[:1], cpu, 256)
    assert seen == [2, 1, 1]
