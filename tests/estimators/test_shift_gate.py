"""The shift gate: its two branches, the blend, its parameters and its opt-in registration."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from estimators import available_estimators, get_estimator
from estimators.maths.label_shift import (
    class_conditional_stats,
    em_label_marginal,
    label_shift_accuracy,
)
from estimators.methods.shift_gate import ShiftGate, gate_weight
from estimators.maths.temperature import fit_temperature

MEANS = np.array([[0.0, 0.0], [1.6, 0.0], [0.0, 1.6], [1.6, 1.6]])


def task(rng, n, prior, noise=1.0):
    y = rng.choice(len(prior), size=n, p=prior)
    x = MEANS[y] + rng.normal(0.0, noise, (n, 2))
    return x @ MEANS.T - 0.5 * (MEANS ** 2).sum(axis=1), y


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    val = task(rng, 3000, np.full(4, 0.25))
    label = task(rng, 2000, np.array([0.55, 0.25, 0.15, 0.05]))
    covariate = task(rng, 2000, np.full(4, 0.25), noise=2.2)
    return val, label, covariate


def test_under_label_shift_it_is_the_label_shift_estimate(data):
    (vl, vy), (tl, ty), _ = data
    gate = ShiftGate().fit(vl, vy)
    res = gate.estimate(tl)
    assert res.diagnostics["weight"] == 0.0
    # independent recomputation: temperature, EM, q-weighted class accuracy
    t = fit_temperature(vl, vy)
    stats = class_conditional_stats(softmax(vl / t, axis=1), vy)
    q, _ = em_label_marginal(softmax(tl / t, axis=1), stats.prior)
    assert res.accuracy == pytest.approx(label_shift_accuracy(q, stats), abs=1e-9)
    assert res.accuracy == pytest.approx(np.mean(tl.argmax(1) == ty), abs=0.03)
    assert np.isnan(res.diagnostics["accuracy_covariate"])  # COT was not run


def test_under_covariate_shift_it_is_the_covariate_method(data):
    (vl, vy), _, (tl, _) = data
    res = ShiftGate().fit(vl, vy).estimate(tl)
    assert res.diagnostics["z"] > 6.0 and res.diagnostics["weight"] == 1.0
    cot = get_estimator("cot").fit(vl, vy).estimate(tl)
    assert res.accuracy == pytest.approx(cot.accuracy, abs=1e-12)
    assert res.diagnostics["covariate"]["transport_cost"] == pytest.approx(
        cot.diagnostics["transport_cost"])
    assert 0.0 <= res.diagnostics["accuracy_label_shift"] <= 1.0


def test_between_the_thresholds_it_blends_linearly(data):
    (vl, vy), _, (tl, _) = data
    z = ShiftGate().fit(vl, vy).estimate(tl).diagnostics["z"]
    gate = ShiftGate(z_low=z - 3.0, z_high=z + 1.0).fit(vl, vy)
    d = gate.estimate(tl)
    assert d.diagnostics["weight"] == pytest.approx(0.75)
    blend = 0.25 * d.diagnostics["accuracy_label_shift"] + 0.75 * d.diagnostics[
        "accuracy_covariate"]
    assert d.accuracy == pytest.approx(blend)


def test_the_covariate_method_and_its_params_are_used(data):
    (vl, vy), _, (tl, _) = data
    gate = ShiftGate(covariate="atc-ne").fit(vl, vy)
    atc = get_estimator("atc-ne").fit(vl, vy)
    assert gate.estimate(tl).accuracy == pytest.approx(atc.estimate(tl).accuracy)
    uni = ShiftGate(covariate_params={"label_marginal": "uniform"}).fit(vl, vy)
    assert uni.covariate_estimator_.label_marginal_.tolist() == [0.25] * 4


def test_the_seed_reaches_a_seeded_covariate_method():
    gate = ShiftGate(covariate="alsa-e", seed=7)
    assert gate._build_covariate().seed == 7
    gate = ShiftGate(covariate="alsa-e", seed=7, covariate_params={"seed": 3})
    assert gate._build_covariate().seed == 3


@pytest.mark.parametrize(
    "params, match",
    [({"covariate": "shift-gate"}, "'covariate' parameter of ShiftGate must be one of"),
     ({"covariate": "mano"}, "'covariate' parameter of ShiftGate must be one of"),
     ({"covariate": "nope"}, "got 'nope'"),
     ({"z_low": 5.0, "z_high": 1.0}, "'z_high' parameter of ShiftGate must be >= z_low"),
     ({"z_low": float("nan")}, "z_low"),
     ({"covariate_params": [1, 2]}, "'covariate_params' parameter of ShiftGate must be a mapping"),
     ({"covariate_params": {"bogus": 1}}, "Invalid parameters for estimator 'cot'"),
     ({"seed": -1}, "seed"),
     ({"em_tol": -1.0}, "em_tol")],
)
def test_bad_parameters_are_refused_at_fit_with_the_name(data, params, match):
    (vl, vy), _, _ = data
    gate = ShiftGate(**params)
    with pytest.raises(ValueError, match=match):
        gate.fit(vl, vy)
    assert not hasattr(gate, "n_classes_")  # nothing half-fitted


def test_gate_weight():
    assert gate_weight(2.0, 2.0, 6.0) == 0.0
    assert gate_weight(4.0, 2.0, 6.0) == 0.5
    assert gate_weight(6.0, 2.0, 6.0) == 1.0
    assert gate_weight(3.0, 3.0, 3.0) == 0.0 and gate_weight(3.1, 3.0, 3.0) == 1.0
    assert gate_weight(float("nan"), 2.0, 6.0) == 1.0


def test_it_runs_only_when_named():
    assert "shift-gate" not in available_estimators()
    assert "shift-gate" not in available_estimators(include_scores=True)
    assert "shift-gate" in available_estimators(include_opt_in=True)
    assert isinstance(get_estimator("shift-gate"), ShiftGate)


def test_binary_positive_class_logits(data):
    rng = np.random.default_rng(3)
    s = rng.normal(size=800) * 2.0
    y = (s + rng.normal(size=800) > 0).astype(int)
    gate = ShiftGate().fit(s[:400], y[:400])
    keep = np.flatnonzero(y[400:] == 1)[:150].tolist() + np.flatnonzero(y[400:] == 0)[:30].tolist()
    res = gate.estimate(s[400:][keep])
    truth = np.mean((s[400:][keep] > 0) == y[400:][keep])
    assert res.n_target == 180 and abs(res.accuracy - truth) < 0.08
