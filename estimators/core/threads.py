"""How many threads an estimator's torch work uses: the work size and the idle cores decide.

Torch's default is one intra-op thread per core of the machine. On a machine whose cores are
shared (a second process computing, the 2-core benchmark machine running two jobs), every
parallel region then waits for the thread whose core is taken: ALSA-G's fit at n = 10,000,
c = 10, k = 1,000 took 16.5 s with 2 threads and one of the 2 cores busy, against 5.6 s with
1 thread (``benchmarks/bench_busy_core.py``, ``docs/PERFORMANCE.md``). :func:`auto_threads`
therefore takes

``min(ceiling, idle cores, work // WORK_PER_THREAD)`` (at least 1)

where ``ceiling`` is torch's current setting (a caller's pin such as
``tasks.runtime.threads.pinned_threads`` or ``OMP_NUM_THREADS`` is never exceeded), the idle
cores are the cores this process may run on (``os.sched_getaffinity``) minus the other tasks
running on the machine right now (the running count of ``/proc/loadavg``, the instantaneous
figure: the 1-minute load average lags a busy process by a minute), and
:data:`WORK_PER_THREAD` is the work (rows x anchors per pass) below which a second thread does not
pay. An explicit thread count (ALSA's ``n_threads``) bypasses all of it.

Inside the benchmark pipeline the count is not chosen here: a stage task pins its threads
(``tasks.runtime.threads.pinned_threads`` sets torch's count and ``ALSA_BENCH_TASK_THREADS``), and
the pipeline promises the same numbers in every layout and on every run. A choice that reads the
machine's load would move the last bits of an estimate with whatever else was running, so while
that variable is set :func:`auto_threads` returns the pinned count (torch's setting), as before.

The thread count changes no estimate beyond float round-off: a blocked sum is added in a
different order (``docs/PERFORMANCE.md`` gives the measured difference).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["PINNED_ENV", "WORK_PER_THREAD", "auto_threads", "busy_cores", "torch_threads", "usable_cores"]

#: Work units (rows x anchors of one pass over the data) per thread: below 2x this, one thread.
#: At n = 10,000, k = 1,000 (6.7M per cross-fitted member) two threads paid on a quiet machine
#: (2.1 s against 2.9 s, docs/ALSA.md "Speed with the defaults"); small fits (a few hundred
#: rows, the tests) gain nothing from a second thread and pay its start-up per block.
WORK_PER_THREAD = 1_000_000

_LOADAVG = "/proc/loadavg"

#: Set by the pipeline while a stage task's threads are pinned (``tasks.runtime.threads``).
PINNED_ENV = "ALSA_BENCH_TASK_THREADS"


def usable_cores() -> int:
    """Cores this process may run on (``os.sched_getaffinity``, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def busy_cores(samples: int = 3) -> int:
    """Other tasks running on the machine right now (0 where the system does not say).

    The fourth field of ``/proc/loadavg`` counts the runnable tasks, this one included; the
    smallest of ``samples`` readings filters out short-lived ones (a shell, a daemon waking).
    """
    counts = []
    for _ in range(max(1, samples)):
        try:
            with open(_LOADAVG, encoding="ascii") as fh:
                running = fh.read().split()[3].split("/")[0]
            counts.append(int(running) - 1)
        except (OSError, IndexError, ValueError):
            return 0
    return max(0, min(counts))


def auto_threads(work: int, ceiling: int | None = None) -> int:
    """Threads for a torch computation of ``work`` units (rows x anchors per pass).

    Parameters
    ----------
    work : int
        Size of one pass, in elements of the (rows x anchors) blocks.
    ceiling : int, optional
        Upper bound; default torch's current ``get_num_threads()``.

    Returns
    -------
    int
        ``min(ceiling, usable_cores() - busy_cores(), work // WORK_PER_THREAD)``, at least 1.

    Examples
    --------
    >>> auto_threads(1_000, ceiling=8)
    1
    >>> 1 <= auto_threads(10**12, ceiling=2) <= 2
    True
    """
    if ceiling is None:
        import torch

        ceiling = torch.get_num_threads()
    if os.environ.get(PINNED_ENV, "").isdigit():  # a pipeline task's pin: deterministic
        return max(1, int(ceiling))
    by_size = int(work) // WORK_PER_THREAD
    if by_size <= 1 or ceiling <= 1:
        return 1
    idle = usable_cores() - busy_cores()
    return max(1, min(int(ceiling), idle, by_size))


@contextlib.contextmanager
def torch_threads(n_threads: int | None, work: int) -> Iterator[int]:
    """Run a block with ``n_threads`` torch intra-op threads (None: :func:`auto_threads` of
    ``work``), then restore torch's setting. Yields the count in use."""
    import torch

    before = torch.get_num_threads()
    threads = int(n_threads) if n_threads is not None else auto_threads(work, before)
    if threads == before:
        yield threads
        return
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(before)
