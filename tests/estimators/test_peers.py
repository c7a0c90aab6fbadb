"""Peer models in the estimator contract, GDE, and agreement-on-the-line with real peers (issue 32).

* every estimator takes ``peer_val_logits`` at ``fit`` and ``peer_target_logits`` at
  ``estimate``, keyword-only, validates them with messages naming the argument, and (unless it
  reads them) gives the same estimate with or without them;
* GDE refuses a call without its peer in one line and equals the disagreement of the two
  models' argmax computed independently here (loops over rows), for one or several peers, in
  the three binary shapes, and unchanged by a temperature, a per-row constant or float32;
* on a synthetic calibrated ensemble GDE recovers the true accuracy (the equality it rests on);
* ALine-S/-D with peers are their formula on the family backbone + peers (+ heads), with every
  agreement and accuracy recounted by loops.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from estimators import (
    ESTIMATORS,
    available_estimators,
    feature_estimators,
    get_estimator,
    peer_estimators,
)
from estimators.features.aline import aline_solve
from estimators.methods.gde import GDE, disagreement_rate

from .test_common import FAST_PARAMS, KEYS
from .test_features import DATA as FDATA
from .test_features import make as make_feature
from .test_features import fit_kwargs

pytestmark = pytest.mark.filterwarnings(
    "ignore::estimators.core.exceptions.ConvergenceWarning",
    "ignore::estimators.maths.temperature.TemperatureBoundWarning",
    "ignore::estimators.core.exceptions.FeatureFallbackWarning",
)

C = 4


def two_models(seed: int = 0, n_val: int = 300, n_target: int = 200, c: int = C):
    """Logits of a model and of two peers on the same validation and target rows."""
    rng = np.random.default_rng(seed)
    yv = rng.integers(0, c, n_val)
    base_v = np.eye(c)[yv] * 2.0
    base_t = rng.normal(size=(n_target, c)) * 0.8
    out = {"val_labels": yv}
    for name, s in (("z", 1.0), ("p1", 1.1), ("p2", 0.9)):
        out[f"{name}_val"] = base_v + rng.normal(size=(n_val, c)) * s
        out[f"{name}_target"] = base_t + rng.normal(size=(n_target, c)) * s
    return out


M = two_models()


def loop_agreement(z: np.ndarray, peers: list[np.ndarray]) -> float:
    """Mean over peers of the fraction of rows where both argmax agree, by explicit loops."""
    rates = []
    for p in peers:
        same = 0
        for i in range(z.shape[0]):
            a = max(range(z.shape[1]), key=lambda k: z[i, k])
            b = max(range(p.shape[1]), key=lambda k: p[i, k])
            same += int(a == b)
        rates.append(same / z.shape[0])
    return float(np.mean(rates))


def gde(peers_val, peers_target, z_val=M["z_val"], z_target=M["z_target"], **kw):
    est = GDE().fit(z_val, M["val_labels"], peer_val_logits=peers_val)
    return est, est.estimate(z_target, peer_target_logits=peers_target, **kw)


# ----------------------------------------------------------------------------- the contract
def test_peer_arguments_are_keyword_only_and_optional():
    from estimators.core.base import Estimator

    fit = inspect.signature(Estimator.fit).parameters["peer_val_logits"]
    est = inspect.signature(Estimator.estimate).parameters["peer_target_logits"]
    for p in (fit, est):
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None


def test_registry_lists_gde_only_on_request():
    assert peer_estimators() == ["gde"]
    assert "gde" not in available_estimators(include_scores=True, include_opt_in=True,
                                             include_features=True)
    assert available_estimators(include_peers=True)[-1] == "gde"
    assert ESTIMATORS["gde"].needs_peer is True
    assert {k for k, c in ESTIMATORS.items() if c.reads_peers} == {"aline-s", "aline-d"}


@pytest.mark.parametrize("key", KEYS)
def test_logit_methods_ignore_peers(key):
    plain = get_estimator(key, **FAST_PARAMS.get(key, {})).fit(
        M["z_val"], M["val_labels"]).estimate(M["z_target"])
    est = get_estimator(key, **FAST_PARAMS.get(key, {})).fit(
        M["z_val"], M["val_labels"], peer_val_logits=M["p1_val"])
    with_p = est.estimate(M["z_target"], peer_target_logits=M["p1_target"])
    assert with_p.accuracy == plain.accuracy or (np.isnan(plain.accuracy)
                                                 and np.isnan(with_p.accuracy))
    assert est.fit_peers_ is None  # nothing kept by a method that does not read peers


def _bad_peer_cases():
    pv = M["p1_val"]
    nan = pv.copy()
    nan[3, 1] = np.nan
    probs = np.exp(pv) / np.exp(pv).sum(axis=1, keepdims=True)
    return {
        "rows": (pv[:-2], r"peer_val_logits must have one row per row of val_logits \(300\); "
                          r"got 298 rows"),
        "classes": (pv[:, :3], r"peer_val_logits must have the class count of val_logits "
                               r"\(4\); got 3"),
        "NaN": (nan, r"peer_val_logits must be finite; got NaN or inf in 1 row\(s\)"),
        "probabilities": (probs, "peer_val_logits .*probabilit"),
        "text": (pv.astype(str), "peer_val_logits must be a numeric array"),
        "second of two": ([pv, pv[:10]], r"peer_val_logits must have one row per row of "
                                         r"val_logits \(300\); got 10 rows \(peer 1"),
        "empty list": ([], "peer_val_logits must hold at least one peer's logits"),
    }


@pytest.mark.parametrize("key", [*KEYS, "gde"])
@pytest.mark.parametrize("case", list(_bad_peer_cases()))
def test_bad_peer_logits_name_the_argument(key, case):
    bad, message = _bad_peer_cases()[case]
    est = get_estimator(key, **FAST_PARAMS.get(key, {}))
    with pytest.raises(ValueError, match=message) as e:
        est.fit(M["z_val"], M["val_labels"], peer_val_logits=bad)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("key", ["ac", "cot", "gde"])
def test_bad_target_peers_name_the_argument(key):
    est = get_estimator(key).fit(M["z_val"], M["val_labels"], peer_val_logits=M["p1_val"])
    with pytest.raises(ValueError, match=r"peer_target_logits must have one row per row of "
                                         r"target_logits \(200\); got 199"):
        est.estimate(M["z_target"], peer_target_logits=M["p1_target"][1:])
    with pytest.raises(ValueError, match=r"peer_target_logits must hold as many peers as "
                                         r"peer_val_logits did at fit \(1\); got 2"):
        est.estimate(M["z_target"], peer_target_logits=[M["p1_target"], M["p2_target"]])


# ----------------------------------------------------------------------------- GDE
def test_gde_refuses_a_call_without_its_peer_in_one_line():
    with pytest.raises(ValueError, match=r"GDE \('gde'\) needs a peer model: pass "
                                         r"fit\(\.\.\., peer_val_logits=\.\.\.\)") as e:
        GDE().fit(M["z_val"], M["val_labels"])
    assert "\n" not in str(e.value)
    est = GDE().fit(M["z_val"], M["val_labels"], peer_val_logits=M["p1_val"])
    with pytest.raises(ValueError, match=r"needs a peer model: pass estimate\(\.\.\., "
                                         r"peer_target_logits=\.\.\.\)") as e:
        est.estimate(M["z_target"])
    assert "\n" not in str(e.value)


def test_gde_is_the_disagreement_of_two_models_argmax_computed_independently():
    for seed in range(5):
        m = two_models(seed, n_target=137, c=3 + seed)
        est = GDE().fit(m["z_val"], m["val_labels"], peer_val_logits=m["p1_val"])
        res = est.estimate(m["z_target"], peer_target_logits=m["p1_target"])
        expected = loop_agreement(m["z_target"], [m["p1_target"]])
        assert res.accuracy == pytest.approx(expected, abs=1e-15)
        assert res.diagnostics["disagreement"] == pytest.approx(1.0 - expected, abs=1e-15)
        assert disagreement_rate(m["z_target"], m["p1_target"]) == pytest.approx(1 - expected)
        assert est.val_agreement_ == pytest.approx(loop_agreement(m["z_val"], [m["p1_val"]]))
        assert res.diagnostics["val_accuracy"] == pytest.approx(
            np.mean(m["z_val"].argmax(1) == m["val_labels"]))
        # per_sample is the 0/1 agreement indicator; per_class its mean per predicted class
        agree = (m["z_target"].argmax(1) == m["p1_target"].argmax(1)).astype(float)
        np.testing.assert_array_equal(res.per_sample, agree)
        for k in range(m["z_target"].shape[1]):
            rows = [i for i in range(137) if m["z_target"][i].argmax() == k]
            want = np.mean([agree[i] for i in rows]) if rows else np.nan
            np.testing.assert_allclose(res.per_class[k], want, equal_nan=True)


def test_gde_with_several_peers_is_the_mean_agreement():
    peers_v = [M["p1_val"], M["p2_val"]]
    peers_t = [M["p1_target"], M["p2_target"]]
    want = loop_agreement(M["z_target"], peers_t)
    for given_v, given_t in ((peers_v, peers_t), (np.stack(peers_v), np.stack(peers_t)),
                             (tuple(peers_v), tuple(peers_t))):
        _, res = gde(given_v, given_t)
        assert res.accuracy == pytest.approx(want, abs=1e-15)
        assert res.diagnostics["n_peers"] == 2


def test_gde_is_symmetric_and_one_with_itself():
    _, ab = gde(M["p1_val"], M["p1_target"])
    est = GDE().fit(M["p1_val"], M["val_labels"], peer_val_logits=M["z_val"])
    ba = est.estimate(M["p1_target"], peer_target_logits=M["z_target"])
    assert ab.accuracy == ba.accuracy
    _, same = gde(M["z_val"], M["z_target"])
    assert same.accuracy == 1.0


def test_gde_ignores_temperature_row_constants_and_float32():
    _, ref = gde(M["p1_val"], M["p1_target"])
    rng = np.random.default_rng(3)
    shift = rng.normal(size=(200, 1)) * 50.0
    variants = [
        (M["p1_val"] * 0.3, M["p1_target"] * 0.3, M["z_val"], M["z_target"]),
        (M["p1_val"], M["p1_target"] + shift, M["z_val"], M["z_target"] - shift),
        (M["p1_val"].astype(np.float32), M["p1_target"].astype(np.float32),
         M["z_val"].astype(np.float32), M["z_target"].astype(np.float32)),
    ]
    for pv, pt, zv, zt in variants:
        _, res = gde(pv, pt, z_val=zv, z_target=zt)
        assert res.accuracy == ref.accuracy


def test_gde_binary_peers_in_three_shapes_give_one_estimate():
    rng = np.random.default_rng(5)
    s_val, s_t = rng.normal(size=300), rng.normal(size=200)
    p_val, p_t = s_val + rng.normal(size=300), s_t + rng.normal(size=200)
    labels = (s_val + rng.normal(size=300) * 0.5 > 0).astype(int)
    results = []
    for shape in (lambda s: s, lambda s: s[:, None], lambda s: np.column_stack([0 * s, s])):
        est = GDE().fit(shape(s_val), labels, peer_val_logits=shape(p_val))
        results.append(est.estimate(shape(s_t), peer_target_logits=shape(p_t)).accuracy)
    assert results[0] == results[1] == results[2]
    assert results[0] == pytest.approx(np.mean((s_t > 0) == (p_t > 0)))


def test_gde_recovers_the_accuracy_of_a_calibrated_ensemble():
    """Jiang et al.'s equality: a model and its peer drawn independently from calibrated
    per-row class probabilities err and disagree at the same rate."""
    rng = np.random.default_rng(11)
    m, c = 60_000, 5
    probs = rng.dirichlet(np.full(c, 0.4), size=m)

    def sample() -> np.ndarray:  # one categorical draw per row (inverse CDF)
        u = rng.random((m, 1))
        return (probs.cumsum(axis=1) < u).sum(axis=1).clip(0, c - 1)

    y, h, h2 = sample(), sample(), sample()
    z, zp = np.log(np.eye(c)[h] + 1e-3), np.log(np.eye(c)[h2] + 1e-3)
    est = GDE().fit(z[:500], y[:500], peer_val_logits=zp[:500])
    res = est.estimate(z, peer_target_logits=zp)
    true = float(np.mean(h == y))
    assert abs(res.accuracy - true) < 4 * np.sqrt(2 * true * (1 - true) / m)
    assert abs(res.accuracy - true) < 0.01 < abs(res.accuracy - float(np.mean(y == y[::-1])))


# ----------------------------------------------------------------------------- ALine with peers
def feature_peers(seed: int = 1):
    """Two peers of the feature data's classifier: noisy copies of its logits."""
    rng = np.random.default_rng(seed)
    return ([FDATA["val_logits"] + rng.normal(size=FDATA["val_logits"].shape) * s
             for s in (0.7, 1.0)],
            [FDATA["target_logits"] + rng.normal(size=FDATA["target_logits"].shape) * s
             for s in (0.7, 1.0)])


def _loop_rates(preds: np.ndarray, labels: np.ndarray | None):
    k = preds.shape[1]
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    agr = [sum(int(row[i] == row[j]) for row in preds) / len(preds) for i, j in pairs]
    acc = None if labels is None else [
        sum(int(preds[r, i] == labels[r]) for r in range(len(preds))) / len(preds)
        for i in range(k)]
    return np.array(agr), pairs, None if acc is None else np.array(acc)


@pytest.mark.parametrize("key", ["aline-s", "aline-d"])
def test_aline_with_peers_only_is_the_authors_recipe_on_backbone_and_peers(key):
    pv, pt = feature_peers()
    est = get_estimator(key, n_heads=0).fit(FDATA["val_logits"], FDATA["val_labels"],
                                            val_features=FDATA["val_features"],
                                            peer_val_logits=pv)
    res = est.estimate(FDATA["target_logits"], target_features=FDATA["target_features"],
                       peer_target_logits=pt)
    val_preds = np.column_stack([FDATA["val_logits"].argmax(1)] + [p.argmax(1) for p in pv])
    tgt_preds = np.column_stack([FDATA["target_logits"].argmax(1)] + [p.argmax(1) for p in pt])
    agr_id, pairs, acc_id = _loop_rates(val_preds, FDATA["val_labels"])
    agr_ood, _, _ = _loop_rates(tgt_preds, None)
    # the line through the three pairs' probits, fitted here with numpy's least squares
    n_id, n_ood = len(val_preds), len(tgt_preds)
    x = norm.ppf(np.clip(agr_id, 0.5 / n_id, 1 - 0.5 / n_id))
    y = norm.ppf(np.clip(agr_ood, 0.5 / n_ood, 1 - 0.5 / n_ood))
    slope, bias = np.linalg.lstsq(np.column_stack([x, np.ones_like(x)]), y, rcond=None)[0]
    pa = norm.ppf(np.clip(acc_id, 0.5 / n_id, 1 - 0.5 / n_id))
    want_s = norm.cdf(slope * pa[0] + bias)
    assert res.diagnostics["aline_s"] == pytest.approx(want_s, abs=1e-9)
    out = aline_solve(acc_id, agr_id, agr_ood, pairs, n_id=n_id, n_ood=n_ood)
    assert res.diagnostics["aline_d"] == pytest.approx(out["aline_d"][0], abs=1e-12)
    assert res.diagnostics["n_peers"] == 2 and res.diagnostics["n_pairs"] == 3
    assert res.diagnostics["head_id_accuracy"] is None
    assert res.diagnostics["peer_id_accuracy"] == pytest.approx(np.mean(acc_id[1:]))


def test_aline_family_is_backbone_then_peers_then_heads():
    pv, pt = feature_peers()
    est = make_feature("aline-d").fit(FDATA["val_logits"], FDATA["val_labels"],
                                      peer_val_logits=pv, **fit_kwargs())
    res = est.estimate(FDATA["target_logits"], target_features=FDATA["target_features"],
                       peer_target_logits=pt)
    preds = np.column_stack([FDATA["target_logits"].argmax(1)] + [p.argmax(1) for p in pt]
                            + [est.heads_.predict(FDATA["target_features"])])
    agr_ood, pairs, _ = _loop_rates(preds, None)
    out = aline_solve(est.acc_id_, est.agr_id_, agr_ood, pairs, n_id=est.n_id_,
                      n_ood=len(preds))
    assert res.accuracy == pytest.approx(out["aline_d"][0], abs=1e-12)
    assert len(est.acc_id_) == 1 + 2 + 4  # backbone, two peers, four heads (FEATURE_FAST)
    # the peers' ID accuracies are theirs, measured on the validation rows
    for j, p in enumerate(pv):
        assert est.acc_id_[1 + j] == pytest.approx(np.mean(p.argmax(1) == FDATA["val_labels"]))


def test_aline_refuses_zero_heads_without_peers_and_peers_on_one_side_only():
    with pytest.raises(ValueError, match="'n_heads' parameter of ALineS may be 0 only with "
                                         "peer models"):
        get_estimator("aline-s", n_heads=0).fit(FDATA["val_logits"], FDATA["val_labels"],
                                                **fit_kwargs())
    pv, pt = feature_peers()
    est = make_feature("aline-s").fit(FDATA["val_logits"], FDATA["val_labels"],
                                      peer_val_logits=pv, **fit_kwargs())
    with pytest.raises(ValueError, match="got peer logits at fit but not at estimate"):
        est.estimate(FDATA["target_logits"], target_features=FDATA["target_features"])
    plain = make_feature("aline-s").fit(FDATA["val_logits"], FDATA["val_labels"],
                                        **fit_kwargs())
    with pytest.raises(ValueError, match="got peer logits at estimate but not at fit"):
        plain.estimate(FDATA["target_logits"], target_features=FDATA["target_features"],
                       peer_target_logits=pt)


@pytest.mark.parametrize("key", [k for k in feature_estimators() if k not in
                                 ("aline-s", "aline-d")])
def test_other_feature_methods_ignore_peers(key):
    pv, pt = feature_peers()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = make_feature(key).fit(FDATA["val_logits"], FDATA["val_labels"], **fit_kwargs())
        a = plain.estimate(FDATA["target_logits"], target_features=FDATA["target_features"])
        est = make_feature(key).fit(FDATA["val_logits"], FDATA["val_labels"],
                                    peer_val_logits=pv, **fit_kwargs())
        b = est.estimate(FDATA["target_logits"], target_features=FDATA["target_features"],
                         peer_target_logits=pt)
    assert a.accuracy == b.accuracy or (np.isnan(a.accuracy) and np.isnan(b.accuracy))


def test_a_peer_method_without_its_peer_estimate_is_refused_when_defined() -> None:
    import pytest as _pytest

    from estimators import Estimator

    with _pytest.raises(TypeError, match="declares needs_peer or reads_peers, so it must "
                                         "implement _estimate_with_peers"):
        class Broken(Estimator):  # noqa: F841
            needs_peer = True

            def _fit(self, z, y): ...  # pragma: no cover
            def _estimate(self, z): ...  # pragma: no cover
