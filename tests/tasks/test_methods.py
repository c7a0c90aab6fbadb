"""tasks.methods: the one method registry (names, defaults, modalities, --param checks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tasks.methods import (
    all_method_names,
    check_method_names,
    check_method_params,
    default_method_names,
    estimator_names,
    methods_for_modality,
    resolve_methods,
)

ROOT = Path(__file__).resolve().parents[2]
#: Callers still to be routed through tasks.methods.estimator_names (owned by other edits of
#: issue 21); empty this set once they are.
NOT_YET_ROUTED: set[str] = set()


#: The registry keys of the estimator contract (shared/DESIGN.md), in its order: written out
#: here, not read from the registry whose lists are under test.
CONTRACT = ("ac", "doc", "im", "atc-mc", "atc-ne", "cot", "alsa-g", "alsa-e")


def test_full_list_is_the_estimators_then_the_model_aware_methods() -> None:
    names = all_method_names()
    assert len(set(names)) == len(names)
    assert [m for m in names if m in CONTRACT] == list(CONTRACT)
    assert {"mano", "nuclear-norm", "shift-gate", "auto", "distcs", "aline-s", "aline-d",
            "dispersion"} <= set(names)
    # the model-aware methods after every estimator (peer methods among them)
    assert names[-2:] == ("gnnevaluator", "projnorm") and "gde" in names


def test_defaults_leave_out_the_opt_in_methods_and_put_the_feature_methods_last() -> None:
    defaults = default_method_names()
    assert [m for m in defaults if m in CONTRACT] == list(CONTRACT)
    assert "shift-gate" not in defaults and "auto" not in defaults  # opt-in: only when named
    assert {"mano", "nuclear-norm"} <= set(defaults)  # scores run; the report maps them
    # the feature methods, then the peer methods (run by the peers step where a run has a peer)
    features = ["distcs", "aline-s", "aline-d", "dispersion", "gde"]
    assert defaults[-len(features):] == tuple(features)
    assert defaults[-len(features) - 2:-len(features)] == ("gnnevaluator", "projnorm")
    assert {"entropy"} <= set(defaults)
    assert estimator_names(scores=False, opt_in=False)[:len(CONTRACT)] == CONTRACT


def test_a_new_estimator_takes_the_place_its_flags_give_it(monkeypatch) -> None:
    """Registered methods are placed by their class flags alone: a plain one among the
    defaults, an opt-in one only in the full list, a feature one last."""
    from estimators import ESTIMATORS, Estimator

    class Plain(Estimator):
        def _fit(self, z, y): ...  # pragma: no cover
        def _estimate(self, z): ...  # pragma: no cover

    class OptIn(Plain):
        opt_in = True

    class NeedsFeatures(Plain):
        needs_features = True

    for key, cls in (("new-plain", Plain), ("new-opt-in", OptIn), ("new-features", NeedsFeatures)):
        monkeypatch.setitem(ESTIMATORS, key, cls)
    defaults = default_method_names()
    assert "new-plain" in defaults and "new-opt-in" not in defaults
    assert defaults[-2:] == ("new-features", "gde")  # feature methods, then peer methods
    assert defaults.index("new-plain") < defaults.index("gnnevaluator")
    assert {"new-plain", "new-opt-in", "new-features"} <= set(all_method_names())
    assert "new-features" not in estimator_names() and "new-features" in \
        estimator_names(features=True)


def test_only_tasks_methods_reads_the_estimator_registry_list() -> None:
    callers = [
        str(path.relative_to(ROOT)) for folder in ("flows", "tasks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if re.search(r"\bavailable_estimators\(", path.read_text(encoding="utf-8"))
    ]
    assert [c for c in callers if c not in NOT_YET_ROUTED] == ["tasks/methods.py"]


def test_check_method_names_messages() -> None:
    assert check_method_names(("ac", "alsa-g")) == ["ac", "alsa-g"]
    with pytest.raises(ValueError, match=r"Unknown estimator\(s\) \['nope'\] in methods"):
        check_method_names(["nope"])
    with pytest.raises(ValueError, match=r"^method must be one of ac, .*; got 'magic'\.$"):
        check_method_names(["ac", "magic"], argument="--method")
    with pytest.raises(ValueError, match="--method must not repeat a method"):
        check_method_names(["ac", "ac"], argument="--method")
    with pytest.raises(ValueError, match="not a single string"):
        check_method_names("ac")
    with pytest.raises(ValueError, match="at least one"):
        check_method_names([])


def test_resolve_methods_defaults_and_params() -> None:
    names, params = resolve_methods(None, None)
    assert names == list(default_method_names()) and params == {}
    with pytest.raises(ValueError, match="not among the methods to run"):
        resolve_methods(["ac"], {"alsa-g": {"alpha": 0.9}})


def test_methods_for_modality() -> None:
    assert methods_for_modality(["alsa-g", "gnnevaluator"], "graph") == ["alsa-g", "gnnevaluator"]
    assert methods_for_modality(["gnnevaluator"], "image") == []
    with pytest.raises(ValueError, match="none of the methods gnnevaluator applies to suite 'x'"):
        methods_for_modality(["gnnevaluator"], "image", where="suite 'x'")


def test_check_method_params() -> None:
    check_method_params({"alsa-g": {"alpha": 0.9}, "gnnevaluator": {"epochs": 3}})
    with pytest.raises(ValueError, match=r"^--param alsa-g\.alpha: "):
        check_method_params({"alsa-g": {"alpha": 2}})
    with pytest.raises(ValueError, match="--param magic.x: method must be one of"):
        check_method_params({"magic": {"x": 1}})
    with pytest.raises(ValueError, match="add --method alsa-g"):
        check_method_params({"alsa-g": {"alpha": 0.9}}, ["ac"])
    with pytest.raises(ValueError, match="--param gnnevaluator.nope"):
        check_method_params({"gnnevaluator": {"nope": 1}})


def test_build_estimator_seeds_only_what_draws_at_random(recwarn) -> None:
    import numpy as np

    from estimators.core.exceptions import InertParameterWarning
    from tasks.methods import build_estimator

    assert build_estimator("alsa-g", {}, 3).get_params()["seed"] == 3
    assert build_estimator("cot", {"mode": "sampled"}, 3).get_params()["seed"] == 3
    exact = build_estimator("cot", {}, 3)
    assert exact.get_params()["seed"] == 0  # exact transport draws nothing: default kept
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(200, 4))
    exact.fit(logits, rng.integers(0, 4, 200))
    assert not [w for w in recwarn if issubclass(w.category, InertParameterWarning)]


def test_the_shift_gate_gets_the_run_seed_when_its_covariate_method_uses_one() -> None:
    from tasks.methods import build_estimator

    assert build_estimator("shift-gate", {}, 7).get_params()["seed"] is None  # COT exact
    sampled = build_estimator("shift-gate", {"covariate_params": {"mode": "sampled"}}, 7)
    assert sampled.get_params()["seed"] == 7
