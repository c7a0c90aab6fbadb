"""DoC: METHODS §13 DoC items 1-3."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax as sp_softmax

from estimators.methods.ac import AC
from estimators.methods.doc import DoC, difference_of_confidences


@pytest.fixture
def data(rng):
    val = rng.normal(size=(400, 5)) * 2
    val_y = np.where(rng.random(400) < 0.6, val.argmax(axis=1), rng.integers(0, 5, 400))
    target = rng.normal(size=(300, 5)) * 1.2
    return val, val_y, target


def test_matches_reference_formula(data):
    val, val_y, target = data
    est = DoC(temperature_scaling=False).fit(val, val_y)
    res = est.estimate(target)
    conf_s = sp_softmax(val, axis=1).max(axis=1)
    conf_t = sp_softmax(target, axis=1).max(axis=1)
    acc_s = np.mean(val.argmax(axis=1) == val_y)
    # COT's metric == 'DoC' returns error: err_S + mean(conf_S) - mean(conf_T).
    cot_error = (1 - acc_s) + conf_s.mean() - conf_t.mean()
    np.testing.assert_allclose(res.accuracy, 1 - cot_error, rtol=1e-12)
    np.testing.assert_allclose(
        difference_of_confidences(conf_s, val.argmax(axis=1) == val_y, conf_t),
        res.accuracy, rtol=1e-12)
    assert res.per_sample is None


def test_target_equal_to_source_gives_val_accuracy(data):
    val, val_y, _ = data
    for ts in (False, True):
        est = DoC(temperature_scaling=ts).fit(val, val_y)
        assert est.estimate(val).accuracy == pytest.approx(est.val_accuracy_, abs=1e-15)


def test_doc_minus_ac_is_the_validation_confidence_gap(data):
    val, val_y, target = data
    doc = DoC().fit(val, val_y)
    ac = AC().fit(val, val_y)
    gap = doc.val_accuracy_ - doc.val_average_confidence_
    np.testing.assert_allclose(doc.estimate(target).accuracy - ac.estimate(target).accuracy, gap,
                               atol=1e-12)


def test_equals_ac_when_validation_is_exactly_calibrated():
    # Two classes, confidences 0.75 and 0.75; 3 of 4 correct: AC_S = acc_S = 0.75.
    z = np.log(np.array([[3.0, 1.0], [1.0, 3.0], [3.0, 1.0], [1.0, 3.0]]))
    y = np.array([0, 1, 0, 0])
    target = np.log(np.array([[0.9, 0.1], [0.4, 0.6]]))
    doc = DoC(temperature_scaling=False).fit(z, y).estimate(target).accuracy
    ac = AC(temperature_scaling=False).fit(z, y).estimate(target).accuracy
    np.testing.assert_allclose(doc, ac, atol=1e-15)


def test_clipping_and_unclipped_diagnostic():
    # Confident, mostly wrong validation; unconfident target: the raw value goes below 0.
    val = np.array([[10.0, 0.0]] * 9 + [[0.0, 10.0]])
    val_y = np.array([1] * 9 + [1])
    target = np.zeros((5, 2))
    clipped = DoC(temperature_scaling=False).fit(val, val_y).estimate(target)
    raw = DoC(temperature_scaling=False, clip=False).fit(val, val_y).estimate(target)
    assert raw.accuracy < 0.0
    assert clipped.accuracy == 0.0
    assert clipped.diagnostics["unclipped_accuracy"] == raw.accuracy
    assert difference_of_confidences([0.99] * 3, [0, 0, 1], [0.5], clip=False) < 0
    assert difference_of_confidences([0.99] * 3, [0, 0, 1], [0.5]) == 0.0


def test_clipped_and_unclipped_agree_inside_unit_interval(data):
    val, val_y, target = data
    a = DoC().fit(val, val_y).estimate(target)
    b = DoC(clip=False).fit(val, val_y).estimate(target)
    assert 0 < b.accuracy < 1
    assert a.accuracy == b.accuracy


def test_bad_params_and_inputs():
    with pytest.raises(ValueError, match="'clip' parameter of DoC must be a bool"):
        DoC(clip="yes").fit(np.eye(2), [0, 1])
    with pytest.raises(ValueError, match="'temperature_scaling' parameter of DoC must be a bool"):
        DoC(temperature_scaling=1).fit(np.eye(2), [0, 1])
    with pytest.raises(ValueError, match=r"val_correct must have one entry per score \(2\)"):
        difference_of_confidences([0.5, 0.6], [1], [0.5])
    with pytest.raises(ValueError, match="target_confidence must have at least one element"):
        difference_of_confidences([0.5], [1], [])
