"""Amazon-WILDS + DistilBERT, offline: a fake WILDS folder and a tiny random DistilBERT.

The fake release (:mod:`tests.tasks._wilds_fake`) is in the exact layout ``wilds`` 2.0.0's
``AmazonDataset`` reads, and the loader reads it through that class; the model folder
(:mod:`tests.tasks._distilbert_fake`) is a randomly initialised DistilBERT (dim 32, 2 layers) with
its tokenizer files. No network (sockets refuse to connect), no real weights.
"""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest
import torch

from storage.db import connect
from storage.logits import list_splits, read_val
from tasks.models.backbones import check_backbone, get_backbone, get_backbone_spec
from tasks.models.backbones.distilbert import ENV_VAR, MAX_TOKENS, TokenFeatures, check_weights
from tasks.data.datasets import amazon_wilds, get_dataset_spec
from tasks.stages.download import stage_dataset
from tests.tasks._stages import extract
from tasks.data.targets import target_splits
from tasks.runtime.checkpoints import load_checkpoint
from tasks.stages.train import train_classifier
from tests.tasks._distilbert_fake import write_tiny_distilbert
from tests.tasks._wilds_fake import DEFAULT_SIZES, write_fake_amazon


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the Amazon-WILDS / DistilBERT path must not use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_distilbert(tmp_path_factory.mktemp("distilbert") / "tiny")


@pytest.fixture
def weights(tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ENV_VAR, str(tiny_model))
    return tiny_model


def test_registry_entries_follow_the_paper() -> None:
    spec = get_dataset_spec("amazon-wilds")
    assert (spec.suite, spec.modality, spec.online, spec.n_classes) == (
        "amazon-wilds", "text", True, 5
    )
    assert spec.backbones == ("distilbert",) and spec.applies("distilbert")
    assert not spec.applies("minilm-mlp") and spec.input_shape == (MAX_TOKENS,)
    assert "Subpop1" in spec.paper_row and "Subpop2" in spec.paper_row
    assert [(s.name, s.shift_family) for s in target_splits("amazon-wilds")] == [
        ("clean", "clean"), ("subpop1", "subpopulation"), ("subpop2", "subpopulation"),
    ]
    net = check_backbone("distilbert", "text", "amazon-wilds")
    assert (net.epochs, net.batch_size, net.lr, net.weight_decay, net.optimizer) == (
        3, 8, 1e-5, 1e-2, "adamw-onecycle"
    )
    with pytest.raises(ValueError, match="text inputs"):
        get_backbone_spec("distilbert").build(5, (1, 28, 28))


def test_missing_data_is_one_clear_message(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with pytest.raises(FileNotFoundError) as info:
        amazon_wilds.load_source(root)
    message = str(info.value)
    assert "amazon_v2.1" in message and str(root) in message
    assert "wilds.get_dataset('amazon'" in message and "download=True" in message
    assert "\n" not in message

    fake = write_fake_amazon(root)
    (fake.folder / "splits" / "user.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"incomplete .* missing splits/user\.csv"):
        amazon_wilds.stage(root)
    with pytest.raises(FileNotFoundError, match="must be the folder that contains amazon_v2.1"):
        amazon_wilds.stage(fake.folder)


def test_stage_refuses_a_file_that_is_not_the_release(tmp_path: Path) -> None:
    fake = write_fake_amazon(tmp_path)
    (fake.folder / "reviews.csv").write_text('"text","stars"\n"fine",5\n')
    with pytest.raises(ValueError, match="lacks reviewerID, asin, overall"):
        amazon_wilds.stage(tmp_path)


def test_loader_reads_every_wilds_split(tmp_path: Path) -> None:
    fake = write_fake_amazon(tmp_path)
    files = amazon_wilds.stage(tmp_path)
    assert files == amazon_wilds.raw_files(tmp_path) and all(p.is_file() for p in files)
    splits = amazon_wilds.load_splits(tmp_path)
    for name, (texts, labels) in splits.items():
        rows = fake.split(name)
        assert texts.dtype == object and texts.tolist() == rows["reviewText"].tolist()
        assert labels.dtype == np.int64
        assert labels.tolist() == (rows["overall"].astype(int) - 1).tolist()

    source = amazon_wilds.load_source(tmp_path)
    assert (source.n_train, source.n_val) == (DEFAULT_SIZES["train"], DEFAULT_SIZES["id_val"])
    pool = amazon_wilds.load_target_pool(tmp_path)
    assert np.bincount(pool.subgroups).tolist() == [
        DEFAULT_SIZES["id_test"], DEFAULT_SIZES["val"], DEFAULT_SIZES["test"]
    ]
    assert pool.source_subgroups == (0,) and pool.novel_subgroups == (1, 2)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ((("train", 2), {"reviewText": ""}), r"split 'train', row 2: the text is empty"),
        ((("id_val", 1), {"reviewText": "   "}), r"split 'id_val', row 1: the text is empty"),
        ((("test", 3), {"overall": 3.5}), r"split 'test', row 3: the star rating .* 3\.5"),
        ((("id_test", 0), {"overall": "four"}), r"split 'id_test', row 0: .* 'four'"),
        ((("val", 4), {"overall": 6.0}), r"split 'val', row 4: .* integer from 1 to 5"),
    ],
)
def test_malformed_rows_are_refused_naming_split_and_row(
    tmp_path: Path, override: tuple, expected: str
) -> None:
    (split, row), values = override
    fake = write_fake_amazon(tmp_path, overrides={(split, row): values})
    with pytest.raises(ValueError, match=expected) as info:
        amazon_wilds.load_splits(tmp_path)
    table = fake.table.reset_index(drop=True)
    csv_row = int(table.index[table["split"] == fake.split(split)["split"].iloc[0]][row])
    assert f"data row {csv_row} of" in str(info.value)


def test_missing_weights_are_one_clear_message(
    state_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError) as info:
        get_backbone("distilbert", 5, (MAX_TOKENS,))
    message = str(info.value)
    assert str(state_home / "models" / "distilbert-base-uncased") in message
    assert "hf download distilbert-base-uncased" in message and ENV_VAR in message

    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    monkeypatch.setenv(ENV_VAR, str(partial))
    expected = (r"missing model\.safetensors or pytorch_model\.bin, tokenizer\.json or vocab\.txt "
                r"in .*partial.*\$ALSA_BENCH_DISTILBERT")
    with pytest.raises(FileNotFoundError, match=expected):
        check_weights()


def test_tokens_are_head_truncated_and_padded_per_batch(weights: Path) -> None:
    torch.manual_seed(0)
    model = get_backbone("distilbert", 5, (MAX_TOKENS,))
    texts = np.array(["Great product !", "the book " * 400 + "broke"], dtype=object)
    features = model.featurize(texts, torch.device("cpu"))
    assert isinstance(features, TokenFeatures) and features.lengths().tolist() == [5, MAX_TOKENS]
    cls, sep = model.tokenizer.cls_token_id, model.tokenizer.sep_token_id
    book = model.tokenizer.convert_tokens_to_ids(["the", "book"])
    assert features.ids[1][:3].tolist() == [cls, *book] and features.ids[1][-1] == sep
    ids, mask = features.batch(np.array([0, 1]), torch.device("cpu"))
    assert ids.shape == mask.shape == (2, MAX_TOKENS)
    assert mask[0].sum() == 5 and (ids[0, 5:] == model.pad_id).all()
    with torch.no_grad():
        alone = model(*features.batch(np.array([0]), torch.device("cpu")))
        padded = model.eval()(ids, mask)
    assert padded.shape == (2, 5) and padded.dtype == torch.float32
    assert torch.allclose(alone, padded[:1], atol=1e-5)


def test_end_to_end_stage_train_extract(
    state_home: Path, tmp_path: Path, weights: Path
) -> None:
    root = tmp_path / "data"
    write_fake_amazon(root)
    dataset = stage_dataset("amazon-wilds", root)
    checkpoint = train_classifier(
        dataset, "distilbert", 0, epochs=1, device="cpu", checkpoint_dir=tmp_path / "ckpt",
        max_train_samples=16, progress=False,
    )
    state, meta = load_checkpoint(checkpoint.path)
    assert (meta["batch_size"], meta["lr"], meta["weight_decay"], meta["n_train"]) == (
        8, 1e-5, 1e-2, 16
    )
    assert any(k.endswith("classifier.weight") for k in state)

    db = tmp_path / "bench.duckdb"
    extract(checkpoint, suite="amazon-wilds", db=db, device="cpu")
    with connect(db, read_only=True) as con:
        rows = {s.split: (s.role, s.shift_family, s.n_samples) for s in
                list_splits(con, checkpoint.run_key)}
        val_logits, val_labels = read_val(con, checkpoint.run_key)
    assert rows == {
        "val": ("val", "source", DEFAULT_SIZES["id_val"]),
        "clean": ("target", "clean", DEFAULT_SIZES["id_test"]),
        "subpop1": ("target", "subpopulation", DEFAULT_SIZES["val"]),
        "subpop2": ("target", "subpopulation", DEFAULT_SIZES["test"]),
    }
    assert val_logits.shape == (DEFAULT_SIZES["id_val"], 5) and np.isfinite(val_logits).all()
    assert val_labels.tolist() == amazon_wilds.load_source(root).val_y.tolist()


def test_a_folder_that_is_not_pretrained_distilbert_is_refused(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import shutil

    from safetensors.torch import save_file

    empty = tmp_path / "empty-weights"
    shutil.copytree(tiny_model, empty)
    save_file({"unrelated": torch.zeros(1)}, str(empty / "model.safetensors"))
    monkeypatch.setenv(ENV_VAR, str(empty))
    with pytest.raises(ValueError, match="must hold pretrained DistilBERT encoder weights"):
        get_backbone("distilbert", 5, (MAX_TOKENS,))

    bert = tmp_path / "bert"
    shutil.copytree(tiny_model, bert)
    config = json.loads((bert / "config.json").read_text())
    (bert / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    monkeypatch.setenv(ENV_VAR, str(bert))
    with pytest.raises(ValueError, match="must hold a DistilBERT model .* got 'bert'"):
        get_backbone("distilbert", 5, (MAX_TOKENS,))


def test_a_checkpoint_refuses_another_tokenizer(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.tasks._distilbert_fake import SPECIAL, WORDS

    monkeypatch.setenv(ENV_VAR, str(tiny_model))
    torch.manual_seed(0)
    state = get_backbone("distilbert", 5, (MAX_TOKENS,)).state_dict()
    assert state["vocab_digest"].dtype == torch.uint8 and state["vocab_digest"].numel() == 32

    other = write_tiny_distilbert(tmp_path / "other")
    (other / "vocab.txt").write_text("\n".join(SPECIAL + WORDS[::-1]) + "\n")
    from transformers import DistilBertTokenizerFast

    words = (other / "vocab.txt").read_text().splitlines()
    DistilBertTokenizerFast(vocab={t: i for i, t in enumerate(words)}).save_pretrained(other)
    monkeypatch.setenv(ENV_VAR, str(other))
    model = get_backbone("distilbert", 5, (MAX_TOKENS,))
    model.load_state_dict(state)
    with pytest.raises(ValueError, match="another tokenizer vocabulary"):
        model.featurize(np.array(["good"], dtype=object), torch.device("cpu"))
