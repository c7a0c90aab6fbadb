"""``--param METHOD.NAME=VALUE`` parsing and validation (no Prefect, no files)."""

from __future__ import annotations

import pytest

from flows.params import check_method_params, parse_param_options


def test_values_are_json_when_they_parse_and_strings_otherwise() -> None:
    got = parse_param_options([
        "alsa-g.alpha=0.9", "alsa-g.n_anchors=500", "alsa-g.space=raw",
        'alsa-e.freeze=["positions", "peaks"]', "atc-mc.temperature_scaling=false",
        "alsa-g.alpha=0.8",
    ])
    assert got == {
        "alsa-g": {"alpha": 0.8, "n_anchors": 500, "space": "raw"},
        "alsa-e": {"freeze": ["positions", "peaks"]},
        "atc-mc": {"temperature_scaling": False},
    }
    check_method_params(got)  # all valid


@pytest.mark.parametrize("bad", ["alpha=0.9", "alsa-g.=1", ".alpha=1", "alsa-g.alpha"])
def test_malformed_options_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="--param must look like METHOD.NAME=VALUE"):
        parse_param_options([bad])


def test_model_aware_parameters_are_checked_by_their_own_config() -> None:
    check_method_params({"gnnevaluator": {"n_meta": 8, "epochs": 5}})
    with pytest.raises(ValueError, match="--param gnnevaluator.n_meta: n_meta must be a positive"):
        check_method_params({"gnnevaluator": {"n_meta": 0}})
    with pytest.raises(ValueError, match="unknown parameter"):
        check_method_params({"gnnevaluator": {"zzz": 1}})


def test_parameters_must_belong_to_a_method_that_runs() -> None:
    with pytest.raises(ValueError, match="'cot' is not among the methods to run"):
        check_method_params({"cot": {"mode": "exact"}}, ["alsa-g"])


def test_score_methods_take_parameters_too():
    check_method_params({"mano": {"norm_order": 6.0, "form": "code"}}, ["mano", "ac"])
    with pytest.raises(ValueError, match=r"--param mano\.form: .*form"):
        check_method_params({"mano": {"form": "nope"}}, ["mano"])
