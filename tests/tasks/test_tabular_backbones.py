"""Tabular backbones and adapter: raw logits (against scikit-learn's own decision_function),
shapes for binary and multi-class, checkpoints that reload to identical logits, determinism
given the seed, the encoder fitted on training rows only, features where a layer gives them."""

from __future__ import annotations

import io
import types

import numpy as np
import pytest
import torch

from tasks.data.tables import Table
from tasks.models.backbones import check_backbone, get_backbone, get_backbone_spec
from tasks.models.backbones.tabular import (
    LOGREG_SUBSAMPLE,
    GradientBoostedTrees,
    LinearLogits,
    TableEncoder,
)
from tasks.models.modalities import get_adapter
from tasks.models.penultimate import predict_with_features

BACKBONES = ("tab-logreg", "tab-hgb", "tab-mlp")


@pytest.fixture(autouse=True)
def _one_openmp_thread():
    """scikit-learn's OpenMP pools on one thread, as a pinned stage task runs them (on a busy
    2-core machine an unpinned pool spends seconds waiting)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield
LEVELS = (("a", "b", "c"), ("x", "y"))


def _table(n: int, seed: int, *, missing: float = 0.0) -> tuple[Table, np.ndarray, int]:
    """A table whose labels depend on two numeric columns and one categorical column."""
    rng = np.random.default_rng(seed)
    num = rng.normal(size=(n, 3))
    cat = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 2, n)]).astype(np.int64)
    score = num[:, 0] + 0.8 * num[:, 1] + (cat[:, 0] == 2) - 0.5 * (cat[:, 1] == 1)
    if missing:
        num[rng.random(num.shape) < missing] = np.nan
        cat[rng.random(cat.shape) < missing] = -1
    return Table(num, cat, ("n0", "n1", "n2"), ("c0", "c1"), LEVELS), score, rng.integers(1 << 30)


def _labels(score: np.ndarray, n_classes: int) -> np.ndarray:
    if n_classes == 2:
        return (score > 0).astype(np.int64)
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))


def _spec(n_classes: int) -> types.SimpleNamespace:
    width = 3 + sum(len(lv) for lv in LEVELS)
    return types.SimpleNamespace(n_classes=n_classes, input_shape=(width,), modality="tabular")


def _fit(backbone: str, n_classes: int, seed: int = 0, n: int = 600, missing: float = 0.0):
    table, score, _ = _table(n, 1, missing=missing)
    y = _labels(score, n_classes)
    spec = _spec(n_classes)
    torch.manual_seed(seed)
    model = get_backbone(backbone, n_classes, spec.input_shape)
    get_adapter("tabular").fit(
        model, get_backbone_spec(backbone), spec, (table, y), (table, y), epochs=20, seed=seed,
        device=torch.device("cpu"), progress=False, key="t")
    return model, table, y, spec


def _predict(model, spec, table) -> np.ndarray:
    return get_adapter("tabular").predict(model, spec, table, torch.device("cpu"), 128)


@pytest.mark.parametrize("n_classes", [2, 4])
def test_trees_give_decision_function_bit_for_bit(n_classes: int) -> None:
    """The node arrays walked by torch reproduce scikit-learn's raw scores exactly, missing
    values included: the binary logits are (-f/2, f/2), the multi-class logits the c columns."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    table, score, _ = _table(800, 2, missing=0.1)
    y = _labels(score, n_classes)
    model = GradientBoostedTrees(n_classes)
    model.encoder.fit(table)
    x = model.encoder(torch.from_numpy(table.numeric), torch.from_numpy(table.categorical))
    reference = HistGradientBoostingClassifier(max_iter=40, random_state=0).fit(x.numpy(), y)
    model.load_forest(reference)
    test, _, _ = _table(300, 3, missing=0.2)
    xt = model.encoder(torch.from_numpy(test.numeric), torch.from_numpy(test.categorical))
    raw = model._raw(xt).numpy()
    expected = reference.decision_function(xt.numpy())
    assert np.array_equal(raw.reshape(expected.shape), expected)
    logits = model.scores(torch.from_numpy(test.numeric),
                          torch.from_numpy(test.categorical)).numpy()
    if n_classes == 2:
        assert np.array_equal(logits[:, 1] - logits[:, 0], expected)
    else:
        assert np.array_equal(logits, expected)
    softmax = np.exp(logits - logits.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    np.testing.assert_allclose(softmax, reference.predict_proba(xt.numpy()), rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_regression_logits_are_sklearns_decision_function(n_classes: int) -> None:
    """Raw scores, not probabilities: the same linear function scikit-learn fitted on the
    seed's 90 % of the rows (refitted here independently)."""
    from sklearn.linear_model import LogisticRegression

    model, table, y, spec = _fit("tab-logreg", n_classes, seed=5)
    x = model.encoder(torch.from_numpy(table.numeric), torch.from_numpy(table.categorical))
    keep = np.sort(np.random.default_rng([5, 0x106]).permutation(y.size)[
        : int(round(LOGREG_SUBSAMPLE * y.size))])
    reference = LogisticRegression(C=1.0, max_iter=2000).fit(x.numpy()[keep], y[keep])
    logits = model.scores(torch.from_numpy(table.numeric),
                          torch.from_numpy(table.categorical)).numpy()
    f = reference.decision_function(x.numpy())
    if n_classes == 2:
        np.testing.assert_allclose(logits[:, 1] - logits[:, 0], f, rtol=0, atol=1e-10)
        np.testing.assert_allclose(logits.sum(1), 0.0, atol=1e-12)  # centred (-f/2, f/2)
    else:
        np.testing.assert_allclose(logits, f, rtol=0, atol=1e-10)
    assert (logits < 0).any() and not np.allclose(logits.sum(1), 1.0)  # not probabilities


@pytest.mark.parametrize("backbone", BACKBONES)
@pytest.mark.parametrize("n_classes", [2, 5])
def test_checkpoint_round_trip_gives_identical_logits(backbone: str, n_classes: int) -> None:
    """Saved as the train stage saves (a state dict of tensors), read with weights_only=True
    into a freshly built model: the same logits, bit for bit, of shape (n, c)."""
    model, table, _, spec = _fit(backbone, n_classes, missing=0.05)
    before = _predict(model, spec, table)
    assert before.shape == (len(table), n_classes) and before.dtype == np.float32
    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu().clone() for k, v in model.state_dict().items()}, buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location="cpu", weights_only=True)
    fresh = get_backbone(backbone, n_classes, spec.input_shape)
    fresh.load_state_dict(state, strict=True)
    assert np.array_equal(_predict(fresh, spec, table), before)


@pytest.mark.parametrize("backbone", BACKBONES)
def test_training_is_deterministic_given_the_seed(backbone: str) -> None:
    test = _table(200, 9)[0]

    def logits(seed: int) -> np.ndarray:
        model, _, _, spec = _fit(backbone, 3, seed=seed)
        return _predict(model, spec, test)

    a, b, c = logits(1), logits(1), logits(2)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)  # the seed draws the rows (classical) or the weights (MLP)


def test_encoder_is_fitted_on_training_rows_only() -> None:
    """Standardisation from the training rows; a missing value takes the training median; a
    level unseen in training leaves its one-hot column at 0 (onehot) or becomes NaN (ordinal)."""
    num = np.array([[1.0], [2.0], [3.0], [10.0]])
    cat = np.array([[0], [0], [1], [1]], dtype=np.int64)
    train = Table(num, cat, ("v",), ("g",), (("p", "q", "r"),))
    onehot, ordinal = TableEncoder("onehot").fit(train), TableEncoder("ordinal").fit(train)
    test_num = torch.tensor([[np.nan], [4.0]], dtype=torch.float64)
    test_cat = torch.tensor([[2], [-1]])
    got = onehot(test_num, test_cat).numpy()
    mean, sd = num.mean(), num.std()
    np.testing.assert_allclose(got[:, 0], [(2.5 - mean) / sd, (4.0 - mean) / sd])
    assert np.array_equal(got[:, 1:], np.zeros((2, 3)))  # level r unseen, and a missing value
    got = ordinal(test_num, test_cat).numpy()
    assert np.isnan(got[0, 0]) and got[1, 0] == 4.0 and np.isnan(got[:, 1]).all()
    ordinal_known = ordinal(test_num, torch.tensor([[1], [0]])).numpy()
    assert ordinal_known[:, 1].tolist() == [1.0, 0.0]


def test_features_only_where_a_layer_reads_them() -> None:
    """The MLP's penultimate features (64 units) are stored; the two classical models have no
    output layer to read, so extraction stores none for them."""
    adapter = get_adapter("tabular")
    for backbone, dim in (("tab-mlp", 64), ("tab-logreg", None), ("tab-hgb", None)):
        model, table, _, spec = _fit(backbone, 2, n=300)
        logits, features = predict_with_features(adapter, model, spec, table,
                                                 torch.device("cpu"), 64)
        assert np.array_equal(logits, _predict(model, spec, table))
        if dim is None:
            assert features is None
        else:
            assert features.shape == (len(table), dim)


def test_tabular_backbones_refuse_other_modalities_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="takes tabular inputs"):
        check_backbone("tab-hgb", "image")
    with pytest.raises(ValueError, match="input_shape=\\(one-hot width,\\)"):
        get_backbone("tab-mlp", 2, (3, 4))
    model = LinearLogits(2, 8)
    with pytest.raises(ValueError, match="not fitted"):
        model(torch.zeros((1, 3), dtype=torch.float64), torch.zeros((1, 2), dtype=torch.int64))
    with pytest.raises(ValueError, match="needs a Table"):
        get_adapter("tabular").predict(model, _spec(2), np.zeros((2, 3)), torch.device("cpu"), 8)


def test_a_class_missing_from_training_is_refused() -> None:
    table, score, _ = _table(200, 4)
    y = np.zeros(200, dtype=np.int64)
    y[score > 0] = 2  # class 1 never appears
    model = get_backbone("tab-hgb", 3, _spec(3).input_shape)
    with pytest.raises(ValueError, match="every one of the 3 classes"):
        get_adapter("tabular").fit(model, get_backbone_spec("tab-hgb"), _spec(3), (table, y),
                                   (table, y), epochs=1, seed=0, device=torch.device("cpu"),
                                   progress=False, key="t")
