"""The example plugin's members: cq-bin against a hand count, the common estimator contract,
the digits dataset and the linear backbone."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from tests.plugin_site import EXAMPLE


@pytest.fixture(scope="module")
def quantile():
    sys.path.insert(0, str(EXAMPLE))
    try:
        from alsa_bench_quantile import digits, estimator, linear

        yield estimator, digits, linear
    finally:
        sys.path.remove(str(EXAMPLE))
        for name in [m for m in sys.modules if m.split(".")[0] == "alsa_bench_quantile"]:
            del sys.modules[name]


def _logits_with_confidence(conf: list[float]) -> np.ndarray:
    """Two-class logits whose maximum softmax probability is ``conf`` (class 0 predicted)."""
    c = np.asarray(conf, dtype=np.float64)
    return np.stack([np.log(c), np.log(1.0 - c)], axis=1)


def test_cq_bin_against_a_hand_count(quantile) -> None:
    """Validation confidences 0.6, 0.7, 0.8, 0.9 (correct: no, yes, yes, yes) in 2 equal-mass
    bins: the inner edge is their median 0.75, so the bins hold {0.6, 0.7} (accuracy 1/2) and
    {0.8, 0.9} (accuracy 1). Targets at 0.65, 0.95, 0.99: 1/3 * 1/2 + 2/3 * 1 = 5/6."""
    estimator = quantile[0]
    val = _logits_with_confidence([0.6, 0.7, 0.8, 0.9])
    labels = np.array([1, 0, 0, 0])
    est = estimator.ConfidenceQuantile(n_bins=2).fit(val, labels)
    np.testing.assert_allclose(est.edges_, [0.75])
    np.testing.assert_allclose(est.bin_accuracy_, [0.5, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 3 target rows: a small-sample warning
        result = est.estimate(_logits_with_confidence([0.65, 0.95, 0.99]))
    assert result.accuracy == pytest.approx(5 / 6, abs=1e-12)
    np.testing.assert_allclose(result.per_sample, [0.5, 1.0, 1.0])


def test_cq_bin_holds_the_common_contract(quantile) -> None:
    """Per-row constants, float32 input and the binary (n,) shape change no estimate; the
    in-distribution estimate is within sampling noise."""
    estimator = quantile[0]
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 4, 4000)
    logits = rng.normal(size=(4000, 4)) + 1.8 * np.eye(4)[labels]
    est = estimator.ConfidenceQuantile().fit(logits[:2000], labels[:2000])
    target = logits[2000:]
    base = est.estimate(target).accuracy
    shifted = est.estimate(target + rng.normal(size=(2000, 1)) * 5).accuracy
    as32 = estimator.ConfidenceQuantile().fit(logits[:2000].astype(np.float32), labels[:2000])
    assert shifted == pytest.approx(base, abs=1e-9)
    assert as32.estimate(target.astype(np.float32)).accuracy == pytest.approx(base, abs=1e-6)
    truth = float(np.mean(target.argmax(1) == labels[2000:]))
    assert abs(base - truth) < 0.03
    scores = rng.normal(size=600)
    y = (scores + rng.normal(size=600) > 0).astype(np.int64)
    binary = estimator.ConfidenceQuantile().fit(scores[:400], y[:400]).estimate(scores[400:])
    two = np.stack([np.zeros(600), scores], axis=1)
    full = estimator.ConfidenceQuantile().fit(two[:400], y[:400]).estimate(two[400:])
    assert binary.accuracy == pytest.approx(full.accuracy, abs=1e-12)
    with pytest.raises(ValueError, match="n_bins"):
        estimator.ConfidenceQuantile(n_bins=0).fit(logits[:100], labels[:100])


def test_digits_splits_and_inputs(quantile, tmp_path) -> None:
    _, digits, linear = quantile
    [spec] = digits.SPECS
    [path] = spec.stage(tmp_path)
    assert path.is_file() and spec.raw_files(tmp_path) == [path]
    source = spec.load_source(tmp_path)
    pool = spec.load_target_pool(tmp_path)
    assert (source.n_train, source.n_val, len(pool.labels)) == digits.SIZES
    assert sorted(np.unique(pool.labels).tolist()) == list(range(10))
    inputs = spec.to_inputs(source.val_x[:5])
    assert inputs.shape == (5, 1, 8, 8) and inputs.dtype == np.float32
    assert 0.0 <= inputs.min() and inputs.max() <= 1.0
    model = linear.build(10, (1, 8, 8))
    import torch

    assert model(torch.from_numpy(inputs)).shape == (5, 10)
    assert linear.SPEC.datasets == ("digits",) and linear.SPEC.accepts("image")


def test_the_examples_in_the_docstrings(quantile) -> None:
    import doctest

    for module in quantile:
        failed, _ = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert failed == 0, module.__name__
