"""The shift-aware band: construction against an independent computation, coverage on
exchangeable synthetic shifts, and the leave-one-dataset-out bookkeeping."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import nnls

import estimators.trust.calibration_artifact as calibration_module
from estimators.trust.calibration_artifact import (
    AUTO_MEMBER_SETS,
    Calibration,
    CalibrationTable,
    fit_calibration,
    leave_one_dataset_out,
    load_calibration,
)
from estimators.trust.shift_band import QUANTILE_GRID, band_features, fit_band, weighted_quantile
from estimators.trust.shift_signals import PANEL

METHODS = AUTO_MEMBER_SETS[0]


def _signals(rng: np.random.Generator, n: int, scale: float = 1.0) -> dict[str, np.ndarray]:
    drop = np.abs(rng.normal(0.0, 0.08 * scale, n))
    sig = {
        "val_accuracy": np.full(n, 0.9), "n_val": np.full(n, 5000.0),
        "n_target": rng.integers(500, 5000, n).astype(float), "n_classes": np.full(n, 10.0),
        "confidence_drop": drop, "entropy_rise": drop * 1.2, "prediction_shift": drop / 2,
        "panel_spread": drop / 3, "panel_std": drop / 8, "label_shift_z": drop * 100,
    }
    for m in PANEL:
        sig[f"panel_{m}"] = 0.9 - drop + rng.normal(0.0, 0.005, n)
    return sig


def _table(rng: np.random.Generator, groups: int = 6, per: int = 200) -> CalibrationTable:
    n = groups * per
    sig = _signals(rng, n)
    truth = 0.9 - 1.5 * sig["confidence_drop"] + rng.normal(0.0, 0.01, n)
    estimates = {m: 0.9 - sig["confidence_drop"] * (1.0 + 0.1 * i) + rng.normal(0.0, 0.01, n)
                 for i, m in enumerate(METHODS)}
    g = np.repeat([f"d{i}" for i in range(groups)], per)
    return CalibrationTable(g, np.full(n, "synthetic"), truth, sig, estimates)


def test_band_matches_an_independent_normalised_conformal_computation() -> None:
    rng = np.random.default_rng(0)
    t = _table(rng, groups=3, per=150)
    est = t.estimates["ac"]
    model = fit_band(t.signals, est, t.truth, t.groups)
    # independent: features by hand, NNLS on each side with equal dataset weights
    med = np.median(np.column_stack([t.signals[f"panel_{m}"] for m in PANEL]), axis=1)
    f = np.column_stack([np.abs(t.signals["confidence_drop"]), t.signals["entropy_rise"],
                         t.signals["prediction_shift"], t.signals["panel_spread"],
                         np.abs(est - med), np.clip(0.9 - med, 0, None), np.clip(0.9 - est, 0, None)])
    a = np.clip(est, 0.01, 0.99)
    s = np.sqrt(a * (1 - a) * (1 / t.signals["n_target"] + 1 / 5000.0))
    e = t.truth - est
    w = np.full(len(e), 1 / 150)
    lo = nnls(f * np.sqrt(w)[:, None], np.clip(-e, 0, None) * np.sqrt(w))[0]
    hi = nnls(f * np.sqrt(w)[:, None], np.clip(e, 0, None) * np.sqrt(w))[0]
    np.testing.assert_allclose(model.coef_low, lo, atol=1e-10)
    np.testing.assert_allclose(model.coef_high, hi, atol=1e-10)
    # out-of-fold scores, then the conformal quantile at (1 + 0.9) / 2 with the n+1 correction
    scores = np.empty(len(e))
    for g in np.unique(t.groups):
        held = t.groups == g
        c = nnls(f[~held] * np.sqrt(w[~held])[:, None], np.clip(e, 0, None)[~held] * np.sqrt(w[~held]))[0]
        scores[held] = np.clip(e[held], 0, None) / np.sqrt(s[held] ** 2 + (f[held] @ c) ** 2)
    k = math.ceil((len(e) + 1) * 0.95)
    q = np.sort(scores)[k - 1]
    assert model.quantiles(0.9)[1] == pytest.approx(q, rel=1e-9)
    low, high = model.interval(t.signals, est, 0.9)
    np.testing.assert_allclose(high, np.clip(est + q * np.sqrt(s ** 2 + (f @ hi) ** 2), 0, 1),
                               rtol=1e-9)
    assert np.all(low <= est) and np.all(high >= est)


def test_weighted_quantile_is_the_split_conformal_order_statistic() -> None:
    v = np.random.default_rng(1).normal(size=99)
    for p in (0.5, 0.9, 0.95):
        k = math.ceil(100 * p)
        assert weighted_quantile(v, np.ones(99), [p])[0] == np.sort(v)[k - 1]


def test_band_covers_exchangeable_synthetic_shifts_and_is_narrow_without_shift() -> None:
    rng = np.random.default_rng(2)
    fit = _table(rng, groups=8, per=150)
    cal = fit_calibration(fit, member_sets=())
    new = _table(np.random.default_rng(3), groups=4, per=250)
    low, high = cal.bands["ac"].interval(new.signals, new.estimates["ac"], 0.9)
    covered = np.mean((new.truth >= low) & (new.truth <= high))
    assert 0.85 <= covered <= 0.99
    calm = new.signals["confidence_drop"] < 0.02
    wild = new.signals["confidence_drop"] > 0.12
    assert np.mean((high - low)[calm]) < 0.5 * np.mean((high - low)[wild])


def test_leave_one_dataset_out_never_fits_on_the_held_out_dataset(monkeypatch) -> None:
    table = _table(np.random.default_rng(4), groups=5, per=40)
    concept = table.groups == "d4"
    concept[np.flatnonzero(concept)[:20]] = False  # half of d4 is a "concept shift"
    seen: list[set[str]] = []
    rows_seen: list[int] = []
    real = calibration_module.fit_calibration

    def spy(t: CalibrationTable, **kw):  # noqa: ANN003
        seen.append(set(t.groups.tolist()))
        rows_seen.append(len(t))
        return real(t, **kw)

    monkeypatch.setattr(calibration_module, "fit_calibration", spy)
    records = leave_one_dataset_out(table, evaluate_only=concept)
    held = [r["dataset"] for r in records]
    assert sorted(set(held)) == [f"d{i}" for i in range(5)]
    for groups, name in zip(seen, sorted(set(held))):
        assert name not in groups and len(groups) == 4
    # the concept rows are evaluated but never reach a fit: d4's fits have no concept rows
    assert rows_seen == [len(table) - 40 - 20 if i != 4 else len(table) - 40 for i in range(5)]
    assert {r["method"] for r in records} >= set(METHODS)


def test_calibration_round_trips_and_refuses_a_foreign_file(tmp_path) -> None:
    cal = fit_calibration(_table(np.random.default_rng(5), groups=4, per=60))
    path = cal.save(tmp_path / "c.json")
    back = load_calibration(path)
    assert back.digest() == cal.digest() and set(back.stacks) == set(cal.stacks)
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not an alsa-bench calibration"):
        load_calibration(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_calibration(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="at least 3 datasets"):
        fit_calibration(_table(np.random.default_rng(6), groups=2, per=30))


def test_band_features_grid_and_a_level_outside_it() -> None:
    assert QUANTILE_GRID[0] == 0.5 and QUANTILE_GRID[-1] < 1.0
    cal = fit_calibration(_table(np.random.default_rng(7), groups=3, per=60), member_sets=())
    assert cal.bands["ac"].quantiles(0.999) == (math.inf, math.inf)
    f, s = band_features(_signals(np.random.default_rng(8), 3), np.array([0.8, 0.5, 0.95]))
    assert f.shape == (3, 7) and np.all(f >= 0) and np.all(s > 0)


def test_every_estimate_carries_a_band_that_holds_its_sampling_interval() -> None:
    from estimators import get_estimator

    rng = np.random.default_rng(9)
    y = rng.integers(0, 4, 3000)
    x = rng.normal(size=(3000, 4)) + 2.5 * np.eye(4)[y]
    target = x[:800] + rng.normal(scale=1.0, size=(800, 4))
    for name in ("ac", "atc-mc", "doc"):
        result = get_estimator(name).fit(x, y).estimate(target)
        low, high = result.shift_interval
        assert low <= result.interval[0] and high >= result.interval[1]
        assert low <= result.accuracy <= high
        assert result.to_record()["shift_interval"] == [low, high]


def test_shipped_calibration_is_current_and_records_its_source() -> None:
    cal = Calibration.from_dict(
        __import__("json").loads(calibration_module.SHIPPED_CALIBRATION.read_text()))
    assert set(METHODS) <= set(cal.bands)
    assert cal.source["rows"] == sum(cal.source["rows_per_dataset"].values())
    assert cal.source["commit"] and cal.source["excluded_concept_shifts"]
