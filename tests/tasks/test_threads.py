"""Thread pinning of a stage task: torch, OMP and the task's own thread default; glibc settings."""

from __future__ import annotations

import os

import pytest
import torch

from tasks.runtime.threads import TASK_THREADS_ENV, pinned_threads


def test_pin_sets_and_restores_every_knob(monkeypatch):
    from tasks.runtime.threads import default_threads

    calls = []
    monkeypatch.setattr("tasks.runtime.allocator.keep_freed_memory", lambda: calls.append(1) or True)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv(TASK_THREADS_ENV, raising=False)
    before = torch.get_num_threads()
    with pinned_threads(3) as n:
        assert n == 3 and torch.get_num_threads() == 3
        assert os.environ["OMP_NUM_THREADS"] == "3" and os.environ[TASK_THREADS_ENV] == "3"
        assert default_threads() == 3  # the stage functions' own default follows the pin
    assert calls == [1]  # a fresh Dask worker gets the allocator settings too
    assert torch.get_num_threads() == before
    assert os.environ["OMP_NUM_THREADS"] == "1" and TASK_THREADS_ENV not in os.environ


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_count_is_named(bad):
    with pytest.raises(ValueError, match="threads_per_task must be an integer >= 1"):
        with pinned_threads(bad):
            pass
