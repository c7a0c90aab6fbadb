"""``auto``: the stacked estimator, its member sets, its equivalence with the CLI's path, and
the ridge combination's penalty choice."""

from __future__ import annotations

import math
import types
import warnings

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from estimators import ConvergenceWarning, SignalWarning, available_estimators, get_estimator
from estimators.trust import attach_band, calibration_artifact, shift_signals
from estimators.trust.auto import Auto, auto_from_estimates
from estimators.trust.calibration_artifact import (
    PANEL,
    CalibrationTable,
    fit_calibration,
    use_calibration,
)
from estimators.trust.stacking import LAMBDAS, fit_stack, stack_features


@pytest.fixture(autouse=True)
def _no_memo():
    """Each test computes its own signals (the band's memo is keyed by array content)."""
    attach_band.forget_signals()
    yield
    attach_band.forget_signals()


def _data(c: int, n: int = 2000, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    x = rng.normal(size=(n, c)) + 2.5 * np.eye(c)[y]
    return x, y, x[: n // 2] + rng.normal(scale=1.0, size=(n // 2, c))


@pytest.mark.parametrize("c", [2, 3, 100])
def test_auto_on_binary_three_and_hundred_class_heads(c: int) -> None:
    x, y, t = _data(c, n=3000 if c == 100 else 1500)
    result = Auto(methods=list(PANEL)).fit(x, y).estimate(t)
    assert 0.0 <= result.accuracy <= 1.0
    low, high = result.shift_interval
    assert low <= result.accuracy <= high
    assert set(result.diagnostics["members"]) == set(PANEL)


def test_auto_on_30_rows_falls_back_to_a_band_at_least_the_sampling_interval() -> None:
    x, y, t = _data(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = Auto(methods=list(PANEL)).fit(x, y).estimate(t[:30])
    assert r.shift_interval[0] <= r.interval[0] and r.shift_interval[1] >= r.interval[1]
    assert r.shift_interval[1] - r.shift_interval[0] >= 0.15  # 30 rows: sampling dominates


def test_auto_equals_its_combination_from_precomputed_estimates() -> None:
    x, y, t = _data(4)
    auto = Auto(methods=list(PANEL)).fit(x, y).estimate(t)
    members = {m: get_estimator(m).fit(x, y).estimate(t) for m in PANEL}
    combined = auto_from_estimates(members, x, y, t)
    assert combined is not None
    assert combined.accuracy == pytest.approx(auto.accuracy, abs=1e-12)
    assert combined.diagnostics["members"] == pytest.approx(auto.diagnostics["members"])


@pytest.mark.parametrize("methods, match", [
    (["ac", "nope"], "distinct keys among"),
    ("ac", "list of registry keys"),
    (["ac", "ac"], "distinct keys among"),
    (["ac", "doc"], "member set the calibration was fit for"),
])
def test_auto_refuses_bad_member_lists(methods, match) -> None:
    x, y, _ = _data(3, n=300)
    with pytest.raises(ValueError, match=match):
        Auto(methods=methods).fit(x, y)


def test_auto_is_opt_in() -> None:
    assert "auto" not in available_estimators()
    assert "auto" in available_estimators(include_opt_in=True)


def _calibration_over(member_sets, default, rng_seed: int = 0):
    """A calibration fit on synthetic rows (4 datasets) for ``member_sets``."""
    rng = np.random.default_rng(rng_seed)
    n = 240
    drop = np.abs(rng.normal(0.0, 0.08, n))
    sig = {"val_accuracy": np.full(n, 0.9), "n_val": np.full(n, 2000.0),
           "n_target": np.full(n, 1000.0), "n_classes": np.full(n, 4.0),
           "confidence_drop": drop, "entropy_rise": drop, "prediction_shift": drop / 2,
           "panel_spread": drop / 3, "panel_std": drop / 8, "label_shift_z": drop * 50,
           **{f"panel_{m}": 0.9 - drop for m in PANEL}}
    names = sorted({m for s in member_sets for m in s})
    est = {m: 0.9 - drop * (1 + 0.05 * i) for i, m in enumerate(names)}
    truth = 0.9 - 1.2 * drop + rng.normal(0, 0.01, n)
    table = CalibrationTable(np.repeat(["a", "b", "c", "d"], n // 4), np.full(n, "f"), truth,
                             sig, est)
    return fit_calibration(table, member_sets=member_sets, auto_default=default)


@pytest.fixture
def own_calibration(tmp_path, monkeypatch):
    """Use a calibration whose default member set is three softmax methods."""
    monkeypatch.setattr(calibration_artifact, "_ACTIVE", {"path": None, "loaded": None})
    small = ("ac", "doc", "atc-mc")
    cal = _calibration_over([PANEL, small], default=small)
    use_calibration(cal.save(tmp_path / "calibration.json"))
    yield small
    use_calibration(None)


def test_auto_runs_only_the_members_the_calibration_names(own_calibration) -> None:
    x, y, t = _data(3, n=900)
    est = Auto().fit(x, y)
    assert tuple(est.members_) == own_calibration  # nothing else is fitted or run
    result = est.estimate(t)
    assert tuple(result.diagnostics["members"]) == own_calibration
    assert result.diagnostics["calibration"].endswith("calibration.json")
    assert tuple(Auto(methods=list(PANEL)).fit(x, y).members_) == PANEL  # the other set
    with pytest.raises(ValueError, match="member set the calibration was fit for"):
        Auto(methods=["ac", "doc"]).fit(x, y)


def test_the_artifact_names_auto_default_members_and_round_trips_them(tmp_path) -> None:
    cal = _calibration_over([PANEL, ("ac", "doc", "atc-mc")], default=None)
    assert cal.auto_members() == PANEL  # the first fitted set, when not named
    back = calibration_artifact.load_calibration(cal.save(tmp_path / "c.json"))
    assert back.auto_default == PANEL and back.auto_members() == PANEL
    legacy = back.to_dict()
    del legacy["auto_default"]  # an artifact that does not say: its largest combination
    assert calibration_artifact.Calibration.from_dict(legacy).auto_members() == PANEL
    with pytest.raises(ValueError, match="'auto_default' argument of fit_calibration"):
        _calibration_over([PANEL], default=("ac", "doc"))


def test_a_members_warning_reaches_the_user_prefixed_and_in_the_diagnostics(monkeypatch):
    x, y, t = _data(3, n=900)
    real = Auto._member

    def short_alsa(self, name, n_val):  # ALSA-E stopped early: a real ConvergenceWarning
        return get_estimator(name, max_epochs=2) if name == "alsa-e" else real(self, name, n_val)

    monkeypatch.setattr(Auto, "_member", short_alsa)
    members = ["ac", "doc", "im", "atc-mc", "atc-ne", "alsa-g", "alsa-e"]
    with pytest.warns(ConvergenceWarning, match=r"^auto's member alsa-e: ALSA stopped") as rec:
        result = Auto(methods=members).fit(x, y).estimate(t)
    relayed = [w for w in rec if str(w.message).startswith("auto's member alsa-e")]
    assert relayed and all(w.category is ConvergenceWarning for w in relayed)
    # it points at the user's line (this file), not at the library's insides
    assert {w.filename for w in relayed} == {__file__}
    kept = result.diagnostics["member_warnings"]["alsa-e"]
    assert kept and kept[0].startswith("ConvergenceWarning: ALSA stopped")


def test_use_calibration_refuses_a_bad_file_with_the_remedy(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^use_calibration: calibration file .*nowhere"
                       r"\.json' does not exist\. Name a file written by `alsa-bench calibrate`"):
        use_calibration(tmp_path / "nowhere.json")
    damaged = tmp_path / "damaged.json"
    damaged.write_text("{not json")
    with pytest.raises(ValueError, match=r"is not JSON .*use_calibration\(None\) for the "
                                         r"shipped one"):
        use_calibration(damaged)


def test_a_nan_signal_is_reported_and_auto_returns_its_base_uncorrected(monkeypatch):
    x, y, t = _data(3, n=900)
    undefined = types.SimpleNamespace(z=float("nan"))
    monkeypatch.setattr(shift_signals, "label_shift_test", lambda *a, **k: undefined)
    est = Auto(methods=list(PANEL)).fit(x, y)
    with pytest.warns(SignalWarning, match="label_shift_z: the label-shift test is undefined"):
        result = est.estimate(t)
    base = result.diagnostics["base"]
    assert result.accuracy == result.diagnostics["members"][base]
    assert math.isnan(result.diagnostics["signals"]["label_shift_z"])  # recorded, not filled
    assert "label_shift_z" in result.diagnostics["signal_problems"]
    low, high = result.shift_interval  # the band does not read label_shift_z: a real band
    assert 0.0 < low <= result.accuracy <= high < 1.0
    members = {m: get_estimator(m).fit(x, y).estimate(t) for m in PANEL}
    with pytest.warns(SignalWarning, match="label_shift_z"):
        combined = auto_from_estimates(members, x, y, t)
    assert combined is not None and combined.accuracy == result.accuracy
    assert combined.diagnostics["signal_problems"] == result.diagnostics["signal_problems"]


def test_a_nan_signal_is_recorded_under_the_shrinkage_model_that_reads_none():
    """The shipped model class (shrinkage toward the members' median) reads no signal: a NaN
    signal changes nothing in its estimate, and is still recorded with its reason."""
    from estimators.trust.auto import _combine
    from estimators.trust.selector import ShrinkModel
    from estimators.trust.shift_signals import SignalValues

    model = ShrinkModel(members=("ac", "doc", "alsa-e"), base="alsa-e", weight=0.5, n_rows=10,
                        n_groups=3)
    estimates = {"ac": 0.70, "doc": 0.74, "alsa-e": 0.80}
    measured = SignalValues({"label_shift_z": float("nan"), "confidence_drop": 0.1},
                            {"ac": 0.7}, {"label_shift_z": "the label-shift test is undefined"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about: the estimate is unaffected
        accuracy, diagnostics = _combine(model, measured, estimates)
    assert accuracy == pytest.approx(0.80 + 0.5 * (0.74 - 0.80))  # the median is doc's 0.74
    assert diagnostics["signal_problems"] == {
        "label_shift_z": "the label-shift test is undefined"}
    assert math.isnan(diagnostics["signals"]["label_shift_z"])  # recorded, never filled in
    clean = SignalValues({"label_shift_z": 1.0}, {"ac": 0.7})
    assert "signal_problems" not in _combine(model, clean, estimates)[1]


def test_a_nan_band_signal_gives_the_band_zero_one_with_a_warning(monkeypatch):
    x, y, t = _data(3, n=900)
    real = shift_signals.ShiftSignals.transform

    def without_doc(self, target, *, estimates=None):  # DoC without an estimate: NaN panel
        values = real(self, target, estimates=estimates)
        panel = {**values.panel, "doc": float("nan")}
        spread = dict(values.values, panel_spread=float("nan"), panel_std=float("nan"))
        return shift_signals.SignalValues(spread, panel, {"panel_doc": "no estimate"})

    monkeypatch.setattr(shift_signals.ShiftSignals, "transform", without_doc)
    result = get_estimator("ac").fit(x, y).estimate(t)
    with pytest.warns(SignalWarning, match=r"panel_doc: no estimate.*shift band is \[0, 1\]"):
        assert result.shift_interval == (0.0, 1.0)


def test_fit_stack_chooses_the_penalty_without_the_rows_it_is_scored_on() -> None:
    rng = np.random.default_rng(0)
    n, members = 300, ("ac", "doc", "alsa-e")
    sig = {"confidence_drop": rng.uniform(0, 0.2, n), "panel_spread": rng.uniform(0, .05, n),
           "val_accuracy": np.full(n, .9), "entropy_rise": rng.uniform(0, .2, n),
           "prediction_shift": rng.uniform(0, .1, n), "label_shift_z": rng.uniform(0, 50, n),
           "n_target": np.full(n, 1000.0)}
    est = {m: 0.9 - sig["confidence_drop"] * k for m, k in zip(members, (1.0, 1.1, 1.3))}
    g = np.repeat(["a", "b", "c"], 100)
    # a different member is right on each dataset: no correction is free, so the penalties'
    # held-out regrets differ (an interior penalty wins, whatever the grid's order)
    slope = np.select([g == "a", g == "b"], [1.0, 1.1], 1.3)
    truth = 0.9 - slope * sig["confidence_drop"] + rng.normal(0, .005, n)
    model = fit_stack(sig, est, truth, g, members)
    assert fit_stack(sig, est, truth, g, members, lambdas=LAMBDAS[::-1]).penalty == model.penalty
    z, base = stack_features(sig, est, members)
    assert model.base == "alsa-e" and z.shape == (n, 2 + 7)

    # independent: scikit-learn's weighted ridge (no intercept, alpha = lambda * total weight,
    # every dataset weighing the same), each dataset left out in turn; the penalty is the one
    # whose held-out MAE is least above the held-out dataset's best member
    w = np.full(n, 1.0 / 3 / 100)

    def ridge(rows, lam):
        r = Ridge(alpha=lam * w[rows].sum(), fit_intercept=False, solver="cholesky")
        return r.fit(z[rows], (truth - base)[rows], sample_weight=w[rows]).coef_

    regrets = []
    for lam in LAMBDAS:
        per = []
        for name in "abc":
            held = g == name
            pred = np.clip(base[held] + z[held] @ ridge(~held, lam), 0, 1)
            best = min(np.mean(np.abs(est[m][held] - truth[held])) for m in members)
            per.append(max(np.mean(np.abs(pred - truth[held])) - best, 0.0))
        regrets.append(np.mean(per))
    assert model.penalty == LAMBDAS[int(np.argmin(regrets))]
    np.testing.assert_allclose(model.coef, ridge(np.ones(n, bool), model.penalty), atol=1e-8)
    pred = model.predict(sig, est)
    assert np.mean(np.abs(pred - truth)) <= np.mean(np.abs(base - truth)) + 0.002
    with pytest.raises(ValueError, match="at least 2 datasets"):
        fit_stack(sig, est, truth, np.full(n, "a"), members)


def test_the_shipped_default_auto_is_the_model_calibrate_chose() -> None:
    """The shipped artifact records the model class grouped cross-validation chose
    (``source["auto_model"]``); the default ``auto`` runs it: shrinkage moves ALSA-E toward the
    members' median by the recorded weight, computed here from the members' own estimates."""
    chosen = calibration_artifact.active_calibration().source["auto_model"]
    assert chosen["kind"] == "shrink" and 0.0 <= chosen["weight"] <= 1.0
    x, y, t = _data(4)
    fast = {"n_anchors": 40, "max_epochs": 60}
    members = {m: get_estimator(m, **(fast if m.startswith("alsa") else {})).fit(x, y).estimate(t)
               for m in chosen["members"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = auto_from_estimates(members, x, y, t)
    assert result is not None and result.diagnostics["model"] == "ShrinkModel"
    values = [members[m].accuracy for m in chosen["members"]]
    base = members[chosen["base"]].accuracy
    want = base + chosen["weight"] * (float(np.median(values)) - base)
    assert result.accuracy == pytest.approx(want, abs=1e-12)
    low, high = result.shift_interval
    assert low <= result.accuracy <= high
