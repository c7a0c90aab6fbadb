"""Fault injection for the reliability battery: kill the whole run at a named stage boundary.

Set ``ALSA_BENCH_KILL_AT`` to a stage name (``download``, ``train``, ``extract``, ``estimate``,
``report``) and the pipeline sends ``SIGKILL`` to its own process group when it reaches the
start of that stage, exactly as ``kill -9`` from outside would, but at a known point instead of
after a sleep; ``<stage>:end`` kills right after the stage's output is written (and, for stages
whose results the flow ingests, after the ingest). ``ALSA_BENCH_KILL_AFTER=N`` lets the first
``N`` matching boundaries pass, so the third ``train`` of a suite can be the one killed.

Only the tests and ``make test-reliability`` set these variables; with them unset,
:func:`kill_point` costs one dictionary look-up.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Final

__all__ = ["KILL_AFTER_ENV", "KILL_AT_ENV", "kill_point"]

#: Environment variable naming the boundary to kill at: ``<stage>`` or ``<stage>:end``.
KILL_AT_ENV: Final[str] = "ALSA_BENCH_KILL_AT"
#: Environment variable: how many matching boundaries to let pass first (default 0).
KILL_AFTER_ENV: Final[str] = "ALSA_BENCH_KILL_AFTER"

_passed: dict[str, int] = {}


def kill_point(stage: str, moment: str = "start") -> None:
    """SIGKILL this process group if ``ALSA_BENCH_KILL_AT`` names this boundary.

    Parameters
    ----------
    stage : str
        Stage name.
    moment : {"start", "end"}, default "start"
        Which boundary of the stage this is.
    """
    wanted = os.environ.get(KILL_AT_ENV)
    if not wanted:
        return
    here = stage if moment == "start" else f"{stage}:{moment}"
    if wanted != here:
        return
    allowed = int(os.environ.get(KILL_AFTER_ENV, "0") or 0)
    seen = _passed.get(here, 0)
    _passed[here] = seen + 1
    if seen < allowed:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    except OSError:  # no process group of our own (rare): kill this process alone
        pass
    os.kill(os.getpid(), signal.SIGKILL)
