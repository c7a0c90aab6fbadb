"""The one healing path both layouts use: stage_call picks the task, settle trusts or recomputes."""

from __future__ import annotations

import pytest

from tasks.stages import healing
from tasks.stages.healing import FAILED, future_result, settle, stage_call


class FakeTask:
    name = "fake"

    def __init__(self, refreshed: bool = False) -> None:
        self.refreshed = refreshed

    def with_options(self, *, refresh_cache: bool) -> FakeTask:
        return FakeTask(refreshed=refresh_cache)


def test_settle_trusts_a_checked_result_and_recomputes_once_otherwise():
    reruns = []

    def rerun():
        reruns.append(1)
        return "fresh"

    assert settle("extract", "k", "cached", lambda r: True, rerun) == ("cached", False)
    assert settle("extract", "k", "cached", None, rerun) == ("cached", False)
    assert not reruns
    assert settle("extract", "k", "cached", lambda r: r == "fresh", rerun) == ("fresh", True)
    assert settle("extract", "k", FAILED, None, rerun) == ("fresh", True)  # a failed future
    assert len(reruns) == 2
    with pytest.raises(RuntimeError, match=r"Stage 'extract' \(k\) finished but its output is "
                                           r"missing: 'fresh'"):
        settle("extract", "k", "cached", lambda r: False, rerun)
    with pytest.raises(RuntimeError, match=r"^Stage 'estimate' finished"):
        settle("estimate", "", FAILED, lambda r: False, rerun)


def test_future_result_turns_a_failure_into_failed():
    class Future:
        def __init__(self, value):
            self.value = value

        def result(self):
            if isinstance(self.value, Exception):
                raise self.value
            return self.value

    assert future_result(Future("ref")) == "ref"
    assert future_result(Future(FileNotFoundError("logits gone"))) is FAILED
    assert repr(FAILED) == "FAILED"
    from storage.results import ResultCorruptError

    assert future_result(Future(ResultCorruptError("does not match its hash"))) is FAILED
    wrapped = RuntimeError("while reading")
    wrapped.__cause__ = FileNotFoundError("gone")
    assert future_result(Future(wrapped)) is FAILED
    # a deterministic failure is raised as it is: no healing rerun would change it
    for error in (ValueError("alpha must be in (0, 1)"), TypeError("ref must be a LogitsRef"),
                  RuntimeError("CUDA out of memory")):
        with pytest.raises(type(error), match=str(error).split("(")[0]):
            future_result(Future(error))


def test_a_recomputation_is_said_in_one_warning_line(caplog):
    with caplog.at_level("WARNING", logger="tasks.stages.healing"):
        settle("train", "tiny.mlp.s0", "cached", lambda r: r == "fresh", lambda: "fresh")
        settle("estimate", "tiny.mlp.s0 ac", FAILED, None, lambda: "fresh")
        settle("report", "r", "cached", lambda r: True, lambda: "never")  # trusted: nothing said
    assert [r.getMessage() for r in caplog.records] == [
        "Stage 'train' (tiny.mlp.s0) has a cached result whose output is missing or damaged; "
        "recomputing it.",
        "Stage 'estimate' (tiny.mlp.s0 ac) failed because a file it reads is missing or "
        "damaged; recomputing it.",
    ]


def test_stage_call_refreshes_or_discards_a_damaged_record(monkeypatch):
    from prefect.futures import PrefectConcurrentFuture

    seen = []
    monkeypatch.setattr(healing, "discard_damaged_record",
                        lambda task, args, kwargs, key="": seen.append((args, kwargs, key)))
    task = FakeTask()
    assert stage_call(task, "train", frozenset({"train"}), (1,), {}, key="r").refreshed
    assert seen == []  # a refreshed call ignores its record
    assert stage_call(task, "train", frozenset({"report"}), (1,), {"threads": 2}, key="r") is task
    assert seen == [((1,), {"threads": 2}, "r")]
    future = object.__new__(PrefectConcurrentFuture)  # upstream not finished: no key yet
    assert stage_call(task, "extract", frozenset(), (future, 2), {}, key="r") is task
    assert stage_call(task, "extract", frozenset(), (), {"checkpoint": future}, key="r") is task
    assert len(seen) == 1
