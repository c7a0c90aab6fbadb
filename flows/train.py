"""The ``train`` flow: train the classifiers of a suite (datasets × backbones × seeds).

Stages the datasets first (cached). Launch it alone with ``python -m flows.train`` or the
``train`` deployment; the ``benchmark`` flow runs the same tasks with the same cache keys.
"""

from __future__ import annotations

from prefect import flow

from flows.benchmark import run_pipeline
from tasks.plan import RunOptions, make_plan
from tasks.runtime.refs import CheckpointRef


@flow(name="train", description="Train the classifiers of a suite")
def train(
    suite: str = "fmnist",
    backbones: list[str] | None = None,
    seeds: int | list[int] | None = None,
    datasets: list[str] | None = None,
    epochs: int | None = None,
    max_train_samples: int | None = None,
    device: str = "auto",
    refresh: bool = False,
) -> list[CheckpointRef]:
    """Train one classifier per dataset × backbone × seed and return the checkpoints.

    Parameters
    ----------
    suite : str, default "fmnist"
        Benchmark suite.
    backbones : list of str, optional
        Backbone keys; default all.
    seeds : int or list of int, optional
        Seed count or explicit seeds; default 1.
    datasets : list of str, optional
        Subset of the suite's datasets; default all.
    epochs : int, optional
        Training epochs; default each backbone's recipe.
    max_train_samples : int, optional
        Cap on training samples.
    device : str, default "auto"
        Torch device.
    refresh : bool, default False
        Retrain even where a cached checkpoint exists.

    Returns
    -------
    list of CheckpointRef
    """
    plan = make_plan(suite, datasets=datasets, backbones=backbones, seeds=seeds)
    options = RunOptions(refresh=["train"] if refresh else None, epochs=epochs,
                         max_train_samples=max_train_samples, device=device)
    return run_pipeline(plan, options, until="train").checkpoints


if __name__ == "__main__":
    for ref in train(suite="fmnist", backbones=["lenet"], seeds=1):
        print(ref)
