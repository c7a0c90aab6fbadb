"""The ``download`` flow: stage the raw files of a suite's datasets.

Launch it alone with ``python -m flows.download`` or the ``download`` deployment; the
``benchmark`` flow runs the same task.
"""

from __future__ import annotations

from prefect import flow

from flows.benchmark import run_pipeline
from tasks.plan import RunOptions, make_plan
from tasks.runtime.refs import DatasetRef


@flow(name="download", description="Stage the raw files of a suite's datasets")
def download(
    suite: str = "fmnist",
    datasets: list[str] | None = None,
    refresh: bool = False,
) -> list[DatasetRef]:
    """Stage every dataset of ``suite`` (or the ones named) and return their references.

    Parameters
    ----------
    suite : str, default "fmnist"
        Benchmark suite.
    datasets : list of str, optional
        Subset of the suite's datasets; default all.
    refresh : bool, default False
        Re-stage even where a cached result exists.

    Returns
    -------
    list of DatasetRef
    """
    plan = make_plan(suite, datasets=datasets)
    options = RunOptions(refresh=["download"] if refresh else None)
    return run_pipeline(plan, options, until="download").datasets


if __name__ == "__main__":
    for ref in download(suite="fmnist"):
        print(ref)
