"""The gated selector and the shrinkage model of ``auto`` (estimators/trust/selector.py)."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.trust.selector import (
    META_FEATURES, SelectorModel, ShrinkModel, auto_model_from_dict, fit_selector, fit_shrink,
    meta_features,
)


def _signals(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    drop = rng.uniform(0.0, 0.3, n)
    panel = 0.9 - drop
    return {"val_accuracy": np.full(n, 0.9), "n_classes": np.full(n, 10.0),
            "n_target": np.full(n, 1000.0), "val_overconfidence": np.full(n, 0.02),
            "confidence_drop": drop, "entropy_rise": drop / 2, "prediction_shift": drop / 3,
            "label_shift_z": rng.uniform(0, 50, n), "panel_spread": drop / 4,
            "panel_std": drop / 8, **{f"panel_{m}": panel for m in ("ac", "doc", "atc-mc",
                                                                     "atc-ne", "im")}}


def _rows(rng: np.random.Generator, n_groups: int = 8, per: int = 40):
    """Method "a" is exact where the confidence drop is small and off by 10 pp where it is
    large; method "b" is off by 3 pp everywhere."""
    sig = _signals(rng, n_groups * per)
    truth = rng.uniform(0.5, 0.9, n_groups * per)
    large = sig["confidence_drop"] > 0.15
    est = {"a": truth + np.where(large, 0.10, 0.0), "b": truth - 0.03}
    groups = np.repeat([f"g{i}" for i in range(n_groups)], per)
    return sig, est, truth, groups, large


def test_meta_features_are_the_documented_columns() -> None:
    sig = _signals(np.random.default_rng(0), 3)
    x = meta_features(sig)
    assert x.shape == (3, len(META_FEATURES))
    np.testing.assert_allclose(x[:, META_FEATURES.index("log_classes")], np.log(10.0))
    np.testing.assert_allclose(x[:, META_FEATURES.index("label_shift_z")],
                               np.log1p(sig["label_shift_z"]))
    np.testing.assert_allclose(x[:, META_FEATURES.index("panel_drop")],
                               sig["confidence_drop"])
    del sig["val_overconfidence"]
    assert np.isnan(meta_features(sig)[:, META_FEATURES.index("val_overconfidence")]).all()


def test_selector_leaves_the_base_where_the_signals_say_so() -> None:
    rng = np.random.default_rng(1)
    sig, est, truth, groups, large = _rows(rng)
    model = fit_selector(sig, est, truth, groups, ["a", "b"])
    t_sig, t_est, t_truth, _, t_large = _rows(np.random.default_rng(2), 2)
    chosen = np.array(model.choose(t_sig))
    # the base "a" where it is exact, "b" where "a" is 10 pp off (away from the boundary)
    far = np.abs(t_sig["confidence_drop"] - 0.15) > 0.04
    assert (chosen[far & ~t_large] == "a").all() and (chosen[far & t_large] == "b").all()
    pred = model.predict(t_sig, t_est)
    best_single = min(np.mean(np.abs(t_est[m] - t_truth)) for m in ("a", "b"))
    assert np.mean(np.abs(pred - t_truth)) < best_single


def test_an_infinite_margin_keeps_the_base_and_the_model_round_trips() -> None:
    rng = np.random.default_rng(3)
    sig, est, truth, groups, _ = _rows(rng)
    model = fit_selector(sig, est, truth, groups, ["a", "b"], margins=(float("inf"),))
    assert set(model.choose(sig)) == {"a"}
    again = SelectorModel.from_dict(model.to_dict())
    assert again.choose(sig) == model.choose(sig)
    bad = model.to_dict() | {"meta_features": ["x"]}
    with pytest.raises(ValueError, match="meta-features"):
        SelectorModel.from_dict(bad)


def test_selector_needs_two_groups_and_every_candidate() -> None:
    rng = np.random.default_rng(4)
    sig, est, truth, groups, _ = _rows(rng, n_groups=1)
    with pytest.raises(ValueError, match="at least 2 groups"):
        fit_selector(sig, est, truth, groups, ["a", "b"])
    sig, est, truth, groups, _ = _rows(rng)
    with pytest.raises(ValueError, match="candidate"):
        fit_selector(sig, est, truth, groups, ["a", "c"])


def test_shrinkage_weight_follows_where_the_truth_is() -> None:
    rng = np.random.default_rng(5)
    truth = rng.uniform(0.5, 0.9, 200)
    groups = np.repeat(["g1", "g2", "g3", "g4"], 50)
    # base biased by 5 pp; the median of the five members (base included) exact -> weight 1
    est = {"base": truth + 0.05, "m1": truth, "m2": truth, "m3": truth, "m4": truth + 0.2}
    model = fit_shrink(est, truth, groups, ["base", "m1", "m2", "m3", "m4"], "base")
    assert model.weight == 1.0
    np.testing.assert_allclose(model.predict({}, est), truth)
    # base exact, median off -> weight 0
    est = {"base": truth, "m1": truth - 0.1, "m2": truth - 0.1, "m3": truth}
    assert fit_shrink(est, truth, groups, ["base", "m1", "m2", "m3"], "base").weight == 0.0
    with pytest.raises(ValueError, match="base"):
        fit_shrink(est, truth, groups, ["m1", "m2"], "base")
    assert isinstance(model, ShrinkModel) and model.to_dict()["kind"] == "shrink"


def test_auto_model_records_round_trip_and_refuse_damage() -> None:
    rng = np.random.default_rng(6)
    sig, est, truth, groups, _ = _rows(rng)
    shrink = fit_shrink(est, truth, groups, ["a", "b"], "a")
    assert auto_model_from_dict(shrink.to_dict()) == shrink
    selector = fit_selector(sig, est, truth, groups, ["a", "b"])
    assert auto_model_from_dict(selector.to_dict()).choose(sig) == selector.choose(sig)
    with pytest.raises(ValueError, match="'shrink' or 'selector'"):
        auto_model_from_dict({"kind": "ridge"})
    with pytest.raises(ValueError, match="weight in"):
        auto_model_from_dict(shrink.to_dict() | {"weight": 2.0})
    with pytest.raises(ValueError, match="damaged"):
        auto_model_from_dict({"kind": "shrink"})
