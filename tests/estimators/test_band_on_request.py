"""The shift-aware band is computed after the estimate, by the trust layer, and only when asked
for: a method that is only asked for its estimate fits no signal and reads no calibration file
(so a missing one cannot break it), and the band read lazily is the band asked for at once."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from estimators import CalibrationWarning, get_estimator
from estimators.trust import attach_band, calibration_artifact
from estimators.trust.calibration_artifact import CALIBRATION_ENV, SHIPPED_CALIBRATION
from estimators.trust.shift_signals import ShiftSignals

#: The label-free methods the benchmark stores a band for (ALSA's anchors kept few for speed).
METHODS = {"ac": {}, "doc": {}, "im": {}, "atc-mc": {}, "atc-ne": {}, "cot": {},
           "alsa-g": {"n_anchors": 20, "max_epochs": 20}}


def _data(seed: int = 0, n: int = 1500, c: int = 4):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    x = (rng.normal(size=(n, c)) + 2.5 * np.eye(c)[y]).astype(np.float32)
    target = (x[:500] + rng.normal(scale=1.2, size=(500, c))).astype(np.float32)
    return x, y, target


@pytest.fixture(autouse=True)
def _fresh_trust_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty memos and no calibration chosen: each test sees what a new process sees."""
    monkeypatch.delenv(CALIBRATION_ENV, raising=False)
    monkeypatch.setattr(attach_band, "_FITS", attach_band._Memo(2))
    monkeypatch.setattr(attach_band, "_TARGETS", attach_band._Memo(8))
    monkeypatch.setattr(calibration_artifact, "_WARNED", set())
    monkeypatch.setattr(calibration_artifact, "_ACTIVE", {"path": None, "loaded": None})


@pytest.fixture
def signal_fits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every fit of the signal panel (a temperature and five softmax methods)."""
    calls: list[int] = []
    real = ShiftSignals.fit

    def counting(self: ShiftSignals, *args: object, **kwargs: object) -> ShiftSignals:
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ShiftSignals, "fit", counting)
    return calls


def _band_by_hand(name: str, x, y, target, result) -> tuple[float, float]:
    """The band from its parts, without attach_band: the shipped band model of the method fed
    with the signals of a fresh ShiftSignals, widened to hold the sampling interval."""
    model = calibration_artifact.load_calibration(SHIPPED_CALIBRATION).bands[name]
    signals = ShiftSignals().fit(np.asarray(x, np.float64), y).transform(
        np.asarray(target, np.float64)).to_record()
    low, high = model.interval(signals, result.accuracy, result.level)
    return (min(float(low[0]), result.interval[0]), max(float(high[0]), result.interval[1]))


def test_plain_fit_and_estimate_fit_no_signal_and_read_no_calibration(
    signal_fits: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_file() -> None:
        raise AssertionError("a plain estimate read the calibration")

    monkeypatch.setattr(calibration_artifact, "active_calibration", no_file)
    monkeypatch.setattr(attach_band, "active_calibration", no_file)
    x, y, target = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)
        results = {m: get_estimator(m, **p).fit(x, y).estimate(target) for m, p in METHODS.items()}
    assert signal_fits == []
    assert all(r.band_pending for r in results.values())
    assert all(math.isfinite(r.accuracy) and math.isfinite(r.interval[0])
               for r in results.values())


def test_the_band_is_fitted_once_when_read_and_shared_by_the_methods(
    signal_fits: list[int]
) -> None:
    x, y, target = _data()
    results = {m: get_estimator(m, **p).fit(x, y).estimate(target) for m, p in METHODS.items()}
    assert signal_fits == []
    for name, result in results.items():
        low, high = result.shift_interval
        assert not result.band_pending
        assert low <= result.interval[0] <= result.interval[1] <= high, name
    assert signal_fits == [1]  # one panel fit for the seven methods of one validation set


@pytest.mark.parametrize("name", list(METHODS))
def test_lazy_band_equals_the_band_asked_for_and_its_parts(name: str) -> None:
    x, y, target = _data(1)
    est = get_estimator(name, **METHODS[name]).fit(x, y)
    eager = est.estimate(target, band=True)
    assert not eager.band_pending
    lazy = est.estimate(target)
    assert lazy.band_pending
    assert lazy.shift_interval == eager.shift_interval
    assert lazy.to_record() == eager.to_record()
    assert eager.shift_interval == pytest.approx(_band_by_hand(name, x, y, target, eager),
                                                 abs=1e-12)


def test_a_pending_band_keeps_the_arrays_of_its_estimate_through_a_refit() -> None:
    x, y, target = _data(2)
    other_x, other_y, _ = _data(3)
    est = get_estimator("ac").fit(x, y)
    pending = est.estimate(target)
    est.fit(other_x, other_y)
    assert pending.shift_interval == pytest.approx(
        _band_by_hand("ac", x, y, target, pending), abs=1e-12)


def test_the_estimator_references_its_validation_arrays_without_a_copy() -> None:
    x, y, _ = _data(4)
    est = get_estimator("ac").fit(x, y)  # float32: the caller's array, not a float64 copy
    assert est.val_logits_ is x
    x64 = x.astype(np.float64)
    assert get_estimator("doc").fit(x64, y).val_logits_ is x64


def test_plain_ac_works_with_the_calibration_variable_pointing_nowhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    x, y, target = _data(5)
    shipped = get_estimator("ac").fit(x, y).estimate(target, band=True)
    missing = tmp_path / "nowhere" / "calibration.json"
    monkeypatch.setenv(CALIBRATION_ENV, str(missing))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = get_estimator("ac").fit(x, y).estimate(target)
        assert caught == []  # the estimate never looks at the calibration
        assert result.accuracy == shipped.accuracy and result.interval == shipped.interval
        band = result.shift_interval
        again = get_estimator("ac").fit(x, y).estimate(target, band=True).shift_interval
    assert band == again == shipped.shift_interval  # the shipped calibration's band
    assert len(caught) == 1 and caught[0].category is CalibrationWarning
    text = str(caught[0].message)
    assert str(missing) in text and CALIBRATION_ENV in text and "does not exist" in text
    assert "alsa-bench calibrate" in text and "unset" in text


def test_a_damaged_calibration_file_falls_back_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    x, y, target = _data(6)
    shipped = get_estimator("doc").fit(x, y).estimate(target, band=True).shift_interval
    damaged = tmp_path / "calibration.json"
    damaged.write_text(json.dumps({"format": "something else"}))
    monkeypatch.setenv(CALIBRATION_ENV, str(damaged))
    with pytest.warns(CalibrationWarning, match="cannot be read") as caught:
        band = get_estimator("doc").fit(x, y).estimate(target, band=True).shift_interval
    assert band == shipped and len(caught) == 1
    assert "unset ALSA_BENCH_CALIBRATION" in str(caught[0].message)
    # the file in use is the shipped one: what auto's diagnostics name and the cache key hashes
    assert calibration_artifact.active_calibration_path() == SHIPPED_CALIBRATION
    damaged.write_text("{not json")
    assert calibration_artifact.active_calibration_path() == SHIPPED_CALIBRATION


def test_a_damaged_state_folder_calibration_blames_no_variable_the_user_never_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """`alsa-bench` names the state folder's calibration.json itself (flows.configure_environment
    sets both variables); the warning then says what the file is and how to fix it."""
    import flows

    assert flows.STATE_CALIBRATION_ENV == calibration_artifact.STATE_CALIBRATION_ENV
    assert flows.CALIBRATION_ENV == CALIBRATION_ENV
    x, y, target = _data(6)
    damaged = tmp_path / "calibration.json"
    damaged.write_text("{not json")
    monkeypatch.setenv(CALIBRATION_ENV, str(damaged))
    monkeypatch.setenv(calibration_artifact.STATE_CALIBRATION_ENV, str(damaged))
    with pytest.warns(CalibrationWarning, match="cannot be read") as caught:
        get_estimator("doc").fit(x, y).estimate(target, band=True)
    text = str(caught[0].message)
    assert "the state folder's calibration" in text and "rerun `alsa-bench calibrate`" in text
    assert CALIBRATION_ENV not in text and "unset" not in text


def test_a_score_with_a_map_keeps_its_band_pending_and_gets_the_map_interval() -> None:
    from estimators import ScoreMap

    x, y, target = _data(7)
    score_map = ScoreMap("ols").fit(np.linspace(0.2, 0.9, 12),
                                    np.linspace(0.3, 0.95, 12) + 0.01 * np.sin(np.arange(12)))
    result = get_estimator("nuclear-norm", score_map=score_map).fit(x, y).estimate(target)
    assert result.band_pending
    assert result.interval == score_map.prediction_interval(result.diagnostics["score"],
                                                            result.level)
    # the shipped calibration has no band for a score (the benchmark stores no accuracy for it)
    assert "nuclear-norm" not in calibration_artifact.load_calibration(SHIPPED_CALIBRATION).bands
    assert all(math.isnan(v) for v in result.shift_interval) and not result.band_pending


def test_no_calibration_at_all_breaks_no_method_that_does_not_need_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    from estimators.trust.auto import Auto

    x, y, target = _data(7)
    monkeypatch.setattr(calibration_artifact, "SHIPPED_CALIBRATION", tmp_path / "gone.json")
    monkeypatch.setenv(CALIBRATION_ENV, str(tmp_path / "nowhere.json"))
    with pytest.warns(CalibrationWarning, match="does not exist"):
        result = get_estimator("ac").fit(x, y).estimate(target, band=True)
    assert 0.0 <= result.accuracy <= 1.0 and math.isfinite(result.interval[0])
    assert all(math.isnan(v) for v in result.shift_interval)  # no band without a calibration
    with pytest.raises(ValueError, match="Auto needs a calibration and none is installed"):
        Auto().fit(x, y)


def test_a_stale_chosen_calibration_is_used_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    x, y, target = _data(8)
    data = json.loads(SHIPPED_CALIBRATION.read_text())
    data["source"]["code_hash"] = "f" * 64  # fit by other calibration code
    stale = tmp_path / "calibration.json"
    stale.write_text(json.dumps(data))
    plain = get_estimator("doc").fit(x, y).estimate(target, band=True)  # the shipped band
    monkeypatch.setenv(CALIBRATION_ENV, str(stale))
    with pytest.warns(CalibrationWarning, match="is used, but it was fit by code ffffffffffff"):
        band = get_estimator("doc").fit(x, y).estimate(target, band=True).shift_interval
    assert band == plain.shift_interval  # the same bands: the stale file is used, not refused
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per file
        get_estimator("ac").fit(x, y).estimate(target, band=True)
