"""Pin the thread count of a stage task, so every layout computes with the same threads.

A sum of floats depends on the order it is added in, and torch splits a reduction across its
threads: the same training on 1 and on 2 threads can differ in the last bits. The stage tasks
of :mod:`tasks.stages` therefore run inside :func:`pinned_threads` with one count, whether they
run in the flow process (sequential layout) or in a Dask worker (distributed layout), so both
layouts give identical numbers for the same ``threads_per_task``.

The pin sets torch's intra-op threads, the BLAS/OpenMP pools numpy uses (``threadpoolctl``),
``OMP_NUM_THREADS`` and ``ALSA_BENCH_TASK_THREADS`` for the duration of the task; the stage
functions' own thread default (:func:`default_threads`) takes the latter, so a pin of
16 on a 16-core machine gives 16 threads, not the 2 of the benchmark's 2-core budget. Stage
bodies that run outside a task (tests, benchmarks) call ``pinned_threads()`` with no count, which
pins :func:`default_threads`: one pinning function for every caller.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["TASK_THREADS_ENV", "default_threads", "default_threads_per_task", "pinned_threads"]


#: Set while a task's threads are pinned: the stage functions' own thread default
#: (:func:`default_threads`) uses it instead of its 2-thread cap.
TASK_THREADS_ENV = "ALSA_BENCH_TASK_THREADS"


def default_threads() -> int:
    """Torch threads for a stage: the task's pin (``$ALSA_BENCH_TASK_THREADS``, set by
    :func:`pinned_threads`) or ``min(2, cpu count)``, capped by
    ``$OMP_NUM_THREADS`` if set.

    Two threads match the benchmark's 2-core budget; an explicit ``OMP_NUM_THREADS`` (tests use
    1, deployments may set 2) lowers it, because torch's ``set_num_threads`` would otherwise
    override it and oversubscribe a shared machine.
    """
    pinned = os.environ.get("ALSA_BENCH_TASK_THREADS", "")
    if pinned.isdigit() and int(pinned) >= 1:  # a task's pin (tasks.runtime.threads.pinned_threads)
        return int(pinned)
    threads = min(2, os.cpu_count() or 1)
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) >= 1:
        threads = min(threads, int(env))
    return threads


def default_threads_per_task(workers: int = 0, *, reproducible: bool = False) -> int:
    """Threads each task gets: the machine's cores shared among the workers, or in the
    reproducible mode a fixed count.

    ``max(1, os.cpu_count() // max(workers, 1))``; in the reproducible mode
    :data:`tasks.runtime.reproducible.PINNED_THREADS` whatever the core count and the workers
    (a reduction split over 16 threads adds in another order than over 2). Either is capped by
    ``$OMP_NUM_THREADS`` where it is set (a shared machine, the tests), as
    :func:`default_threads` is.

    Parameters
    ----------
    workers : int, default 0
        Dask worker processes on this machine (0: the sequential layout, one task at a time).
    reproducible : bool, default False
        The reproducible mode's fixed count.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``workers`` is not an integer >= 0.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an integer >= 0; got {workers!r}.")
    if reproducible:
        from tasks.runtime.reproducible import PINNED_THREADS

        threads = PINNED_THREADS
    else:
        threads = max(1, (os.cpu_count() or 1) // max(workers, 1))
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) >= 1:
        threads = min(threads, int(env))
    return threads


@contextmanager
def pinned_threads(threads: int | None = None) -> Iterator[int]:
    """Run a block with ``threads`` torch, BLAS and OpenMP threads; restore them after.

    Parameters
    ----------
    threads : int, optional
        Thread count, at least 1; default :func:`default_threads`.

    Yields
    ------
    int
        ``threads``.

    Raises
    ------
    ValueError
        If ``threads`` is not an integer >= 1.
    """
    if threads is None:
        threads = default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads_per_task must be an integer >= 1; got {threads!r}.")
    import torch
    from threadpoolctl import threadpool_limits

    from tasks.runtime.allocator import keep_freed_memory

    # a Dask worker is a fresh process: without this, glibc serves every large tensor with a
    # new mmap and page-faults it in (measured: 14,756 mmap + 13,880 munmap calls in 12 s of one
    # worker, and 5 min 50 s of system time in a cold fmnist suite on 2 workers)
    keep_freed_memory()
    previous_torch = torch.get_num_threads()
    previous_env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", TASK_THREADS_ENV)}
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ[TASK_THREADS_ENV] = str(threads)  # default_threads honours the pin
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield threads
    finally:
        torch.set_num_threads(previous_torch)
        for key, value in previous_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
