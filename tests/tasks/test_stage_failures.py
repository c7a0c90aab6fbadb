"""Failures said once and loudly (tasks.stages.common): every stage task logs its first
exception through alsa-bench's logger, and only a DuckDB lock conflict is ever retried."""

from __future__ import annotations

import logging

import pytest

from storage.errors import StorageLockedError
from tasks.stages.common import failure_line, log_task_failure, retry_on_lock


class _State:
    def __init__(self, exc: BaseException | None) -> None:
        self.exc = exc
        self.message = "no exception"

    def result(self):
        if self.exc is not None:
            raise self.exc
        return None


class _Run:
    name = "estimate-tiny.mlp.s0-ac"


def _stage_tasks():
    from tasks.stages.ablations import ablation_task
    from tasks.stages.download import download_task
    from tasks.stages.estimate import estimate_task
    from tasks.stages.extract import extract_task, prepare_splits_task
    from tasks.stages.report import report_task
    from tasks.stages.train import train_task

    return [download_task, train_task, extract_task, prepare_splits_task, estimate_task,
            report_task, ablation_task]


def test_every_stage_task_logs_its_failure_and_retries_only_a_lock_conflict() -> None:
    for task in _stage_tasks():
        assert log_task_failure in task.on_failure_hooks, task.name
        # the hook runs before the pickled exception is deleted
        assert task.on_failure_hooks.index(log_task_failure) == 0, task.name
        assert task.retries == 0 or task.retry_condition_fn is retry_on_lock, task.name


def test_the_failure_line_is_one_line_with_the_notes() -> None:
    exc = ValueError("alpha must be in (0, 1); got 1.5.\nmore detail")
    exc.add_note("while fitting 'alsa-g' on the validation split of run 'tiny.mlp.s0'")
    assert failure_line(exc) == ("ValueError: alpha must be in (0, 1); got 1.5. (while fitting "
                                 "'alsa-g' on the validation split of run 'tiny.mlp.s0')")
    assert failure_line(KeyError()) == "KeyError"


def test_log_task_failure_says_the_exception_once(caplog) -> None:
    with caplog.at_level(logging.ERROR, logger="tasks.stages"):
        log_task_failure(object(), _Run(), _State(TypeError("ref must be a LogitsRef")))
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("tasks.stages", "ERROR", "estimate-tiny.mlp.s0-ac failed: TypeError: ref must be a "
                                  "LogitsRef")]


@pytest.mark.parametrize("exc, retried", [
    (StorageLockedError("bench.duckdb is locked by process 7"), True),
    (ValueError("dataset must be one of fmnist; got 'x'."), False),
    (TypeError("bad"), False),
])
def test_retry_on_lock_retries_a_lock_conflict_only_and_says_so(caplog, exc, retried) -> None:
    with caplog.at_level(logging.WARNING, logger="tasks.stages.common"):
        assert retry_on_lock(object(), _Run(), _State(exc)) is retried
    said = [r.getMessage() for r in caplog.records]
    if retried:
        assert said == [f"{_Run.name}: another process holds the database's lock; retrying the "
                        f"task (StorageLockedError: {exc})."]
    else:
        assert said == []
    assert retry_on_lock(object(), _Run(), _State(None)) is False
