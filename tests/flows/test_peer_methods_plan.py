"""Which methods the estimate stage and the peers step run (issue 32), decided by the flow."""

from __future__ import annotations

import pytest

from tasks.methods import (
    PROJNORM_ENV,
    default_method_names,
    peer_method_names,
    peer_reading_method_names,
    projnorm_by_default,
)
from tasks.plan import make_plan


def _split(suite: str, methods=None, device: str = "cpu"):
    from flows.benchmark import _run_methods

    return _run_methods(make_plan(suite, seeds=2), methods, device)


def test_defaults_leave_gde_to_the_peers_step_and_aline_too_where_a_run_has_peers(monkeypatch):
    monkeypatch.setenv(PROJNORM_ENV, "auto")
    alone, with_peers = _split("fmnist")
    assert "projnorm" not in alone  # ProjNorm left out on the CPU
    assert "aline-s" in alone and "gde" not in alone  # a run without peers: ALine on one model
    assert [m for m in default_method_names() if m in alone] == alone  # the defaults' order
    assert not set(with_peers) & {*peer_method_names(), *peer_reading_method_names()}
    assert {"ac", "alsa-g", "entropy", "distcs", "dispersion"} <= set(with_peers)
    assert "projnorm" not in with_peers and "gnnevaluator" not in with_peers
    graph_alone, graph_peers = _split("graph")
    assert "gnnevaluator" in graph_alone and "gnnevaluator" in graph_peers


def test_projnorm_is_named_for_image_runs_where_it_is_affordable(monkeypatch):
    monkeypatch.setenv(PROJNORM_ENV, "on")
    alone, with_peers = _split("fmnist")
    assert "projnorm" in alone and "projnorm" in with_peers
    assert "aline-s" in alone and "aline-s" not in with_peers and "gde" not in alone
    assert [m for m in default_method_names() if m in alone] == alone  # the defaults' order
    graph_alone, _ = _split("graph")
    assert "projnorm" not in graph_alone  # ProjNorm is for image runs only


def test_named_methods_are_kept_but_the_peer_methods(monkeypatch):
    alone, with_peers = _split("fmnist", ["ac", "gde", "aline-d"])
    assert alone == ["ac", "aline-d"] and with_peers == ["ac"]
    alone, with_peers = _split("fmnist", ["gde"])
    assert alone == [] and with_peers == []  # nothing for the estimate stage


def test_the_projnorm_switch(monkeypatch):
    for value, want in (("on", True), ("ON", True), ("off", False)):
        monkeypatch.setenv(PROJNORM_ENV, value)
        assert projnorm_by_default("cpu") is want
    monkeypatch.setenv(PROJNORM_ENV, "auto")
    assert projnorm_by_default("cpu") is False
    monkeypatch.setenv(PROJNORM_ENV, "maybe")
    with pytest.raises(ValueError, match="ALSA_BENCH_PROJNORM must be on, off or auto; got "
                                         "'maybe'"):
        projnorm_by_default("cpu")
