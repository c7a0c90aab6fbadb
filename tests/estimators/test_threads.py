"""Thread choice of the torch estimators (issue 24): automatic, capped, and harmless to numbers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from estimators import get_estimator
from estimators.core import threads as th


def test_small_work_takes_one_thread_and_a_ceiling_of_one_wins():
    assert th.auto_threads(10, ceiling=16) == 1
    assert th.auto_threads(10**12, ceiling=1) == 1


def test_large_work_takes_the_idle_cores_up_to_the_ceiling(monkeypatch):
    monkeypatch.delenv(th.PINNED_ENV, raising=False)
    monkeypatch.setattr(th, "usable_cores", lambda: 8)
    monkeypatch.setattr(th, "busy_cores", lambda samples=3: 0)
    assert th.auto_threads(10**12, ceiling=4) == 4
    monkeypatch.setattr(th, "busy_cores", lambda samples=3: 7)
    assert th.auto_threads(10**12, ceiling=4) == 1  # one idle core: one thread
    monkeypatch.setattr(th, "busy_cores", lambda samples=3: 5)
    assert th.auto_threads(10**12, ceiling=4) == 3
    assert th.auto_threads(3 * th.WORK_PER_THREAD, ceiling=8) == 3 - 0  # size cap


def test_busy_cores_reads_the_running_count(tmp_path, monkeypatch):
    fake = tmp_path / "loadavg"
    fake.write_text("1.00 0.50 0.25 3/120 999\n")
    monkeypatch.setattr(th, "_LOADAVG", str(fake))
    assert th.busy_cores() == 2
    monkeypatch.setattr(th, "_LOADAVG", str(tmp_path / "missing"))
    assert th.busy_cores() == 0


def test_torch_threads_restores_the_setting_and_an_explicit_count_wins():
    before = torch.get_num_threads()
    with th.torch_threads(1, work=10**12) as used:
        assert used == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with th.torch_threads(None, work=10) as used:
        assert used == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("key", ["alsa-g", "alsa-e"])
def test_one_and_two_threads_agree_to_float_round_off(key):
    rng = np.random.default_rng(3)
    y = rng.integers(0, 5, 3000)
    z = rng.normal(size=(3000, 5))
    z[np.arange(3000), y] += 2.0
    target = rng.normal(size=(2000, 5)) * 1.3
    results = []
    for n in (1, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = get_estimator(key, n_anchors=400, device="cpu", n_threads=n).fit(z, y)
        results.append(est.estimate(target).accuracy)
    # measured 1.1e-7 at n = 10,000, k = 1,000 (docs/PERFORMANCE.md); 1e-5 leaves room
    assert results[0] == pytest.approx(results[1], abs=1e-5)


def test_a_pipeline_pin_keeps_its_count_whatever_the_load(monkeypatch):
    """Inside a pinned stage task the count is the pin: numbers must not follow the load."""
    monkeypatch.setattr(th, "usable_cores", lambda: 8)
    monkeypatch.setattr(th, "busy_cores", lambda samples=3: 7)
    monkeypatch.setenv(th.PINNED_ENV, "2")
    assert th.auto_threads(10**12, ceiling=2) == 2
    assert th.auto_threads(1_000, ceiling=2) == 2
    monkeypatch.delenv(th.PINNED_ENV)
    assert th.auto_threads(10**12, ceiling=2) == 1
