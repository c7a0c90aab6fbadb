"""Backbone registry: every architecture builds for its modality, maps inputs to logits, fails clearly."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tasks.models.backbones import (
    BACKBONES,
    available_backbones,
    check_backbone,
    get_backbone,
    get_backbone_spec,
)

IMAGE = ("mlp", "lenet", "resnet", "resnet18", "cnn3", "alexnet", "mobilenet_v2",
         "efficientnet_b0", "resnet18-ft", "resnet50", "vgg11")
#: The COT paper's backbones, fine-tuned from ImageNet weights at 224 pixels: tested in
#: tests/tasks/test_finetuned_backbones.py (built on the meta device; VGG11 has 129 M parameters).
FINETUNED = ("resnet18-ft", "resnet50", "vgg11")
#: Backbones trained here from scratch (the pretrained ones load published weights:
#: tests/tasks/test_imagenet.py).
TRAINABLE = sorted(n for n, s in BACKBONES.items() if not s.pretrained and n not in FINETUNED)
#: Input shape of an image backbone in these tests (ResNet18 needs 3 x 32 x 32 or more).
IMAGE_SHAPES = {"resnet18": (3, 32, 32), "cnn3": (3, 28, 28)}
GRAPH = ("gcn", "sage", "gat", "gin")
TEXT = ("bow-linear", "minilm-mlp", "minilm-ft", "distilbert")
TABULAR = ("tab-logreg", "tab-hgb", "tab-mlp")
TEXTS = np.array(["a fine film", "dull and long", "the cast shines", "misfires", "a triumph"],
                 dtype=object)


@pytest.fixture(autouse=True)
def _text_backbones_offline(tmp_path_factory, monkeypatch) -> None:
    """A state folder for MiniLM's feature cache and a tiny random DistilBERT to load."""
    from tests.tasks._distilbert_fake import write_tiny_distilbert

    root = tmp_path_factory.getbasetemp()
    folder = root / "tiny-distilbert"
    if not (folder / "config.json").exists():
        write_tiny_distilbert(folder)
    monkeypatch.setenv("ALSA_BENCH_DISTILBERT", str(folder))
    monkeypatch.setenv("ALSA_BENCH_HOME", str(root / "state"))


def _forward(name: str, n_classes: int, seed: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)
    if get_backbone_spec(name).accepts("text"):
        net = get_backbone(name, n_classes, (128,)).eval()
        cpu = torch.device("cpu")
        with torch.no_grad():
            return net(*net.featurize(TEXTS, cpu).batch(np.arange(len(TEXTS)), cpu))
    if get_backbone_spec(name).accepts("tabular"):
        from tasks.data.tables import Table
        from tasks.models.modalities import get_adapter

        rng = np.random.default_rng(0)  # a fitted model (the encoder is fitted on its rows)
        table = Table(rng.normal(size=(200, 2)), rng.integers(0, 3, (200, 1)).astype(np.int64),
                      ("a", "b"), ("c",), (("x", "y", "z"),))
        y = np.arange(200) % n_classes
        net = get_backbone(name, n_classes, (5,))
        get_adapter("tabular").fit(net, get_backbone_spec(name), None, (table, y), (table, y),
                                   epochs=2, seed=seed, device=torch.device("cpu"),
                                   progress=False, key="t")
        with torch.no_grad():
            return net.eval()(torch.from_numpy(table.numeric[:5]),
                              torch.from_numpy(table.categorical[:5]))
    if get_backbone_spec(name).accepts("graph"):
        net = get_backbone(name, n_classes, (16,)).eval()
        edges = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])
        with torch.no_grad():
            return net(torch.rand(5, 16), edges)
    shape = IMAGE_SHAPES.get(name, (1, 28, 28))
    net = get_backbone(name, n_classes, shape).eval()
    with torch.no_grad():
        return net(torch.rand(5, *shape))


def test_registry_lists_every_family_with_its_modality():
    assert set(available_backbones("image")) == set(IMAGE)
    assert set(available_backbones("graph")) == set(GRAPH)
    assert set(available_backbones("text")) == set(TEXT)
    assert set(available_backbones("tabular")) == set(TABULAR)
    assert list(available_backbones()) == sorted(BACKBONES)
    assert all(BACKBONES[n].modalities == ("graph",) for n in GRAPH)


def test_graph_recipe_is_the_papers():
    for name in GRAPH:
        spec = get_backbone_spec(name)
        assert (spec.optimizer, spec.lr, spec.weight_decay, spec.patience) == (
            "adam", 1e-2, 5e-4, 20
        )


@pytest.mark.parametrize("n_classes", [10, 3])
@pytest.mark.parametrize("name", TRAINABLE)
def test_forward_shape(name, n_classes):
    out = _forward(name, n_classes)
    assert out.shape == (5, n_classes) and out.dtype == torch.float32
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", TRAINABLE)
def test_same_seed_same_weights_and_logits(name):
    assert torch.equal(_forward(name, 4, seed=3), _forward(name, 4, seed=3))
    if name == "bow-linear":  # a convex model started at zero: the seed only orders batches
        assert torch.equal(_forward(name, 4, seed=3), torch.zeros(len(TEXTS), 4))
        return
    assert not torch.equal(_forward(name, 4, seed=3), _forward(name, 4, seed=4))


@pytest.mark.parametrize("name", GRAPH)
def test_graph_embeddings_feed_the_head(name):
    torch.manual_seed(0)
    net = get_backbone(name, 3, (8,)).eval()
    x, edges = torch.rand(6, 8), torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    with torch.no_grad():
        emb = net.embed(x, edges)
        assert emb.shape == (6, 128)
        torch.testing.assert_close(net.head(emb), net(x, edges))


def test_channels_last_gives_the_same_logits():
    torch.manual_seed(0)
    net = get_backbone("resnet", 10, (1, 28, 28)).eval()
    x = torch.rand(4, 1, 28, 28)
    with torch.no_grad():
        plain = net(x)
        net = net.to(memory_format=torch.channels_last)
        fast = net(x.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(plain, fast, rtol=1e-4, atol=1e-5)


def test_unknown_backbone_lists_names():
    with pytest.raises(ValueError) as info:
        get_backbone("vgg", 10, (1, 28, 28))
    message = str(info.value)
    assert "'vgg'" in message
    assert all(name in message for name in available_backbones())
    with pytest.raises(ValueError, match="backbone must be one of"):
        get_backbone_spec("vgg")


def test_backbone_of_another_modality_is_refused_with_the_right_choices():
    with pytest.raises(ValueError) as info:
        check_backbone("lenet", "graph", "arxiv-sim")
    message = str(info.value)
    assert "'lenet' takes image inputs" in message and "'arxiv-sim' is graph" in message
    assert "gat, gcn, gin, sage" in message
    assert check_backbone("gcn", "graph").name == "gcn"


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="n_classes"):
        get_backbone("mlp", 1, (1, 28, 28))
    with pytest.raises(ValueError, match="image inputs"):
        get_backbone("lenet", 10, input_shape=(384,))
    with pytest.raises(ValueError, match=r"node feature vectors.*\(1, 28, 28\)"):
        get_backbone("gcn", 10, input_shape=(1, 28, 28))
    # the MLP also takes flat feature vectors (e.g. sentence embeddings)
    assert get_backbone("mlp", 4, input_shape=(384,))(torch.rand(2, 384)).shape == (2, 4)


def test_a_text_backbone_must_say_how_it_featurizes():
    from tasks.models.backbones.text import TextClassifier

    class NoFeatures(TextClassifier):
        def forward(self, x):  # pragma: no cover - never built
            return x

    with pytest.raises(TypeError, match="abstract method 'featurize'|featurize"):
        NoFeatures()
