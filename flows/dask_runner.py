"""Build the Dask task runner of a distributed benchmark run (``--workers N`` / ``--dask-address``).

``workers=0`` and no address means the sequential layout (no task runner to build: the flow's
default runs each task in the flow process). Otherwise :func:`build_task_runner` returns a
``prefect_dask.DaskTaskRunner``:

* ``workers=N``: a ``distributed.LocalCluster`` of ``N`` worker **processes** with **one thread
  each** (a torch task owns its process; the thread count inside it is pinned per task by
  :mod:`tasks.runtime.threads`). On a machine with CUDA each local worker declares the resource
  ``GPU=1``, so the GPU tasks, submitted under ``dask.annotate(resources={"GPU": 1})``, run one
  per worker.
* ``dask_address="tcp://host:8786"``: an existing scheduler (``dask scheduler`` plus
  ``dask worker`` on each node, dask-jobqueue on SLURM, the Dask Kubernetes operator). Start
  the GPU nodes' workers with ``--resources GPU=1`` so GPU tasks are placed there; CPU-only
  workers then get the estimate tasks.

Workers must import this repository (same code version) and see the state folder's
``data/``, ``checkpoints/`` and results root (``$ALSA_BENCH_RESULTS``) at the same paths, and
Prefect's result folder; they never open the DuckDB file (docs/ARCHITECTURE.md, "Scaling out").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "GPU_RESOURCE",
    "build_task_runner",
    "check_layout",
    "gpu_annotation",
    "is_distributed",
    "shared_api_url",
]

#: Dask worker resource a GPU task asks for, one unit per task.
GPU_RESOURCE: str = "GPU"


def check_layout(workers: int, dask_address: str | None) -> None:
    """Validate ``workers`` and ``dask_address``.

    Raises
    ------
    ValueError
        If ``workers`` is not an integer >= 0, both are given, or the address has no scheme.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an integer >= 0 (0: sequential); got {workers!r}.")
    if dask_address is not None:
        if not isinstance(dask_address, str) or "://" not in dask_address:
            raise ValueError(
                f"dask_address must be a scheduler address such as 'tcp://host:8786'; got "
                f"{dask_address!r}."
            )
        if workers:
            raise ValueError(
                f"give either workers (a local cluster) or dask_address (an existing cluster), "
                f"not both; got workers={workers} and dask_address={dask_address!r}."
            )


def is_distributed(workers: int, dask_address: str | None) -> bool:
    """Whether the run uses Dask (``workers > 0`` or an address)."""
    check_layout(workers, dask_address)
    return bool(workers) or dask_address is not None


def build_task_runner(workers: int = 0, dask_address: str | None = None, *, gpu: bool = False) -> Any:
    """A ``DaskTaskRunner`` for the layout, or None for the sequential one.

    Parameters
    ----------
    workers : int, default 0
        Local worker processes (1 thread each).
    dask_address : str, optional
        Address of an existing scheduler; wins over a local cluster.
    gpu : bool, default False
        Declare ``GPU=1`` on each local worker (the resolved device is CUDA).

    Returns
    -------
    prefect_dask.DaskTaskRunner or None

    Raises
    ------
    ValueError
        As :func:`check_layout`.
    """
    if not is_distributed(workers, dask_address):
        return None
    from prefect_dask import DaskTaskRunner

    if dask_address is not None:
        return DaskTaskRunner(address=dask_address)
    cluster_kwargs: dict[str, Any] = {
        "n_workers": workers,
        "threads_per_worker": 1,
        "processes": True,
        "dashboard_address": None,
    }
    if gpu:
        cluster_kwargs["resources"] = {GPU_RESOURCE: 1}
    return DaskTaskRunner(cluster_kwargs=cluster_kwargs)


def gpu_annotation(gpu: bool) -> Any:
    """``dask.annotate(resources={"GPU": 1})`` for a GPU task, else a no-op context."""
    if not gpu:
        from contextlib import nullcontext

        return nullcontext()
    import dask

    return dask.annotate(resources={GPU_RESOURCE: 1})


@contextmanager
def shared_api_url() -> Iterator[str | None]:
    """Export the flow's Prefect API URL to the workers a local cluster spawns.

    Without ``PREFECT_API_URL`` in their environment, each local worker process would start its
    own temporary Prefect server (about 15 s each on 2 cores) and record its task runs there,
    out of the flow's sight. Inside a flow run this sets ``PREFECT_API_URL`` to the URL the flow
    talks to for the block, then restores it. (``alsa-bench run`` has exported the URL of its own
    server already, :func:`flows.server.prefect_api`; this covers flows called from Python.) Workers of a remote cluster need a server they can reach: start ``prefect server
    start`` and export ``PREFECT_API_URL`` on every node.

    Yields
    ------
    str or None
        The URL exported, or None outside a flow run.
    """
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    url = str(ctx.client.api_url) if ctx is not None and ctx.client is not None else None
    previous = os.environ.get("PREFECT_API_URL")
    if url is not None and previous is None:
        os.environ["PREFECT_API_URL"] = url
    try:
        yield url
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
