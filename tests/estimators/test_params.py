"""The hyper-parameter declarations (``PARAMS``, ``estimators/core/params.py``) of every estimator.

Each test is generated from the declarations, so a new estimator or parameter is covered by
declaring it.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from estimators import (
    ESTIMATORS,
    Param,
    check_estimator_params,
    estimator_params,
    get_estimator,
)
from estimators.methods.alsa import (
    ALSA,
    ALSA_DEFAULTS,
    alsa_predict,
    anchors_surface,
    fit_alsa_anchors,
)
from estimators.core.param_docs import (
    GENERATED_END,
    GENERATED_START,
    doc_blocks,
    documented_keys,
    markdown_table,
    render_doc,
)
from estimators.core.params import with_defaults

KEYS = list(ESTIMATORS)
DOC = Path(__file__).resolve().parents[2] / "docs" / "ESTIMATORS.md"

#: Values that the per-parameter ``check`` of each ``kind="any"`` parameter refuses.
BAD_ANY: dict[str, list[Any]] = {
    "device": ["tpu", 3],
    "freeze": ["bias", ("peaks", "p"), 3],
    "score_map": ["line", (1.0,), (True, 0.0)],
    "label_marginal": ["bogus"],
    "covariate": ["nope", "shift-gate", "mano", 3],
    "covariate_params": [[1, 2]],
    "methods": ["ac", ["nope"], ["ac", "ac"], [], [3]],
    "base_params": [[1, 2], 3],
}


def _bad_values(p: Param) -> list[Any]:
    """Wrong-type and out-of-range values for one declaration."""
    if p.kind == "bool":
        return ["yes", 1, None]
    if p.kind == "choice":
        return ["__not_a_choice__", None]
    if p.kind == "str":
        return [3]
    if p.kind == "any":
        return BAD_ANY[p.name]
    bad: list[Any] = ["x", [1]]
    if None not in p.special:
        bad.append(None)
    if p.kind == "int":
        bad.append(2.5)
    else:
        bad += [math.nan, math.inf]
    if p.low is not None:
        bad.append(p.low if p.low_open else p.low - 1)
    if p.high is not None:
        bad.append(p.high if p.high_open else p.high + 1)
    return bad


CASES = [
    pytest.param(key, p.name, value, id=f"{key}-{p.name}-{value!r}")
    for key in KEYS
    for p in estimator_params(key)
    for value in _bad_values(p)
]


def test_every_any_parameter_has_bad_examples():
    names = {p.name for key in KEYS for p in estimator_params(key) if p.kind == "any"}
    assert names <= set(BAD_ANY), f"add refused values to BAD_ANY for {names - set(BAD_ANY)}"


@pytest.mark.parametrize("key", KEYS)
def test_every_default_passes_its_own_validation(key):
    cls = ESTIMATORS[key]
    for p in cls.PARAMS:
        p.validate(p.default, cls.__name__)
    get_estimator(key)._validate_params()
    check_estimator_params(key, {})


@pytest.mark.parametrize("key", KEYS)
def test_init_signature_is_the_declaration(key):
    cls = ESTIMATORS[key]
    params = [p for p in inspect.signature(cls).parameters.values()]
    assert [p.name for p in params] == [p.name for p in cls.PARAMS]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)
    assert {p.name: p.default for p in params} == {p.name: p.default for p in cls.PARAMS}
    est = cls()
    assert est.get_params() == {p.name: p.default for p in cls.PARAMS}
    assert cls._param_names() == [p.name for p in cls.PARAMS]
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        cls(nope=1)
    with pytest.raises(TypeError):
        cls(1)
    if cls.PARAMS:
        assert repr(est).startswith(f"{cls.__name__}({cls.PARAMS[0].name}=")
    else:  # a method without hyper-parameters (gde)
        assert repr(est) == f"{cls.__name__}()"


@pytest.mark.parametrize(("key", "name", "value"), CASES)
def test_bad_value_is_refused_naming_the_parameter(key, name, value):
    owner = ESTIMATORS[key].__name__
    message = f"The '{name}' parameter of {owner} must "
    with pytest.raises(ValueError, match=message):
        check_estimator_params(key, {name: value})
    est = get_estimator(key, **{name: value})
    z = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 0.5], [0.2, 1.0]])
    with pytest.raises(ValueError, match=message):
        est.fit(z, np.array([0, 1, 1, 1]))
    assert not hasattr(est, "n_classes_")


def test_check_estimator_params_names_unknown_keys_and_methods():
    with pytest.raises(ValueError, match="Invalid parameters for estimator 'im'.*'n_bin'"):
        check_estimator_params("im", {"n_bin": 3})
    with pytest.raises(ValueError, match="Unknown estimator 'nope'"):
        estimator_params("nope")
    with pytest.raises(ValueError, match="'z_high' parameter of ShiftGate must be >= z_low"):
        check_estimator_params("shift-gate", {"z_low": 5.0, "z_high": 1.0})


def test_registered_variants_differ_only_in_declared_defaults():
    g, e = estimator_params("alsa-g"), estimator_params("alsa-e")
    diff = {p.name for p, q in zip(g, e) if p != q}
    assert diff == {"kernel", "variance_mean", "variance_std"}
    assert [p.name for p in ALSA.PARAMS] == [p.name for p in g]
    assert estimator_params("atc-ne") == with_defaults(estimator_params("atc-mc"),
                                                       score="negative_entropy")
    with pytest.raises(ValueError, match="no parameter named"):
        with_defaults(g, kernal="gaussian")


def test_functional_alsa_defaults_are_the_declaration():
    """fit_alsa_anchors and alsa_predict keep explicit signatures; their defaults must agree."""
    for fn in (fit_alsa_anchors, alsa_predict):
        for p in inspect.signature(fn).parameters.values():
            if p.name in ALSA_DEFAULTS:
                assert p.default == ALSA_DEFAULTS[p.name], (fn.__name__, p.name)


def test_docs_tables_are_generated_from_the_declarations():
    text = DOC.read_text(encoding="utf-8")
    assert render_doc(text) == text, "out of date: run python -m estimators.core.param_docs"
    # every method of the package has a table (a new one gets a generated section)
    assert set(doc_blocks(text)) == set(documented_keys())
    assert markdown_table("im").splitlines()[2].startswith("| `n_bins` | int in [1, inf] | `10` |")


def test_a_method_without_a_section_gets_a_generated_one(monkeypatch):
    """A new method needs no hand-written documentation: the generator lists it (its class
    summary and table) in the generated section, and drops it again once a section of its own
    holds its block."""
    from estimators import Estimator, Param

    class NewMethod(Estimator):
        """A new method: its first paragraph is its summary.

        More text that the generated section leaves out.
        """

        name = "brand-new"
        PARAMS = (Param("k", "int", 3, "How many.", low=1),)

        def _fit(self, z, y):  # pragma: no cover - never fitted here
            pass

        def _estimate(self, z):  # pragma: no cover
            return 0.5, None, {}

    monkeypatch.setitem(ESTIMATORS, "brand-new", NewMethod)
    text = "# Estimators\n\n<!-- params:ac -->\nold\n<!-- /params:ac -->\n"
    monkeypatch.setattr("estimators.core.param_docs.documented_keys", lambda: ["ac", "brand-new"])
    out = render_doc(text)
    generated = out[out.index(GENERATED_START):out.index(GENERATED_END)]
    assert "### `brand-new`" in generated
    assert "A new method: its first paragraph is its summary." in generated
    assert "More text" not in generated
    assert "| `k` | int in [1, inf] | `3` | How many. |" in generated
    assert "params:ac" not in generated and render_doc(out) == out
    own = out.replace("# Estimators\n", "# Estimators\n\n<!-- params:brand-new -->\n"
                                          "<!-- /params:brand-new -->\n")
    assert "### `brand-new`" not in render_doc(own)


def _problem(seed: int = 0, n: int = 240, c: int = 3):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    z = rng.normal(size=(n, c))
    z[np.arange(n), y] += 2.0
    return z, y


@pytest.mark.parametrize("params", [
    {},
    {"rectify": "total", "threshold_rule": "paper", "alpha": 0.9, "peak": 5.0},
    {"space": "raw", "kernel": "exponential"},
])
def test_anchors_surface_equals_alsa_predict_on_stored_anchors(params):
    z, y = _problem()
    est = get_estimator("alsa-g", n_anchors=12, min_epochs=20, device="cpu", **params).fit(z, y)
    target = z[:50] * 1.3 + 0.2
    stored = json.loads(json.dumps(est.estimate(target).to_record()["params"]))
    a = est.anchors_
    surface, anchors = anchors_surface(a.positions, a.peaks, a.variances, stored)
    single = type(a)(a.positions, a.peaks, a.variances, kernel=a.kernel, space=a.space,
                     tau=a.tau, bias=a.bias, threshold=a.threshold, rectify=est.rectify)
    expected = alsa_predict(target, single, alpha=est.alpha, rectify=est.rectify, peak=est.peak,
                            device="cpu").q
    np.testing.assert_array_equal(surface(target), expected)
    assert anchors.space == est.space and anchors.kernel == est.kernel
    assert anchors.tau == a.tau and anchors.bias == a.bias and anchors.threshold == a.threshold


def test_anchors_surface_falls_back_to_the_declared_defaults():
    pos = np.array([[1.0, 0.0], [0.0, 1.0]])
    surface, anchors = anchors_surface(pos, [2.0, -2.0], [3.0, 3.0], {})
    assert (anchors.kernel, anchors.rectify, anchors.space) == ("gaussian", "per-anchor", "raw")
    assert (anchors.tau, anchors.bias, anchors.threshold) == (1.0, 0.0, None)
    _, legacy = anchors_surface(pos, [2.0, -2.0], [3.0, 3.0], {"center": True})
    assert legacy.space == "centered"
    z = np.array([[3.0, 0.0], [0.0, 3.0], [1.0, 1.0]])
    expected = alsa_predict(z, anchors, alpha=ALSA_DEFAULTS["alpha"], peak=ALSA_DEFAULTS["peak"],
                            rectify=ALSA_DEFAULTS["rectify"], device="cpu").q
    np.testing.assert_array_equal(surface(z), expected)
