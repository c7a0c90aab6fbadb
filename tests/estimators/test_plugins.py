"""estimators.core.plugins: estimators of other distributions register under their entry point."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from estimators import ESTIMATORS, get_estimator
from estimators.core import plugins
from tests.plugin_site import install_distribution, install_example


@pytest.fixture
def clean_registry(monkeypatch):
    """Plugins registered by a test leave the registry as it was."""
    monkeypatch.setattr(plugins, "_PLUGINS", {})
    saved = dict(ESTIMATORS)
    yield
    ESTIMATORS.clear()
    ESTIMATORS.update(saved)
    for name in [m for m in sys.modules if m.split(".")[0] in ("alsa_bench_quantile", "bad_est")]:
        del sys.modules[name]


def test_a_plugin_estimator_works_as_a_built_in_one(tmp_path, monkeypatch, clean_registry):
    monkeypatch.syspath_prepend(str(install_example(tmp_path / "site")))
    assert plugins.load_estimator_plugins() == {"cq-bin": "alsa-bench-quantile"}
    assert plugins.load_estimator_plugins() == {}  # loaded once
    assert plugins.plugin_estimators() == {"cq-bin": "alsa-bench-quantile"}
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 900)
    logits = rng.normal(size=(900, 3)) + 2.0 * np.eye(3)[labels]
    result = get_estimator("cq-bin", n_bins=4).fit(logits[:600], labels[:600]).estimate(
        logits[600:])
    assert result.method == "cq-bin" and 0.0 <= result.accuracy <= 1.0
    assert list(ESTIMATORS)[-1] == "cq-bin"  # after every built-in method


def test_broken_estimator_plugins_are_one_line_each(tmp_path, monkeypatch, caplog,
                                                    clean_registry):
    folder = install_distribution(
        tmp_path / "bad", "bad-estimators", "2.0",
        {"alsa_bench.estimators": {
            "abstract": "estimators:Estimator", "cot": "bad_est:Fine",
            "needs-args": "bad_est:NeedsArgs", "fine": "bad_est:Fine"}},
        files={"bad_est.py": (
            "from estimators import Estimator\n"
            "class Fine(Estimator):\n"
            "    def _fit(self, z, y): pass\n"
            "    def _estimate(self, z): return 0.5, None, {}\n"
            "class NeedsArgs(Fine):\n"
            "    def __init__(self, x): self.x = x\n")},
    )
    monkeypatch.syspath_prepend(str(folder))
    with caplog.at_level(logging.WARNING, logger="estimators.plugins"):
        added = plugins.load_estimator_plugins()
    assert added == {"fine": "bad-estimators"}
    lines = {r.getMessage().split("'")[1]: r.getMessage() for r in caplog.records}
    assert set(lines) == {"abstract", "cot", "needs-args"}
    assert all(line.count("\n") == 0 and line.endswith("skipped it.") for line in lines.values())
    assert "cannot be built with its defaults (TypeError" in lines["abstract"]
    assert "reuses the key of estimators.methods.cot.COT" in lines["cot"]
    assert "cannot be built with its defaults (TypeError" in lines["needs-args"]
    assert ESTIMATORS["cot"].__module__ == "estimators.methods.cot"
