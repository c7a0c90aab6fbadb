"""The ``extract`` flow: logits of every split of every run into DuckDB.

Stages and trains first (cached). Launch it alone with ``python -m flows.extract`` or the
``extract`` deployment; pass the same training parameters as the benchmark did to reuse its
checkpoints.
"""

from __future__ import annotations

from prefect import flow

from flows.benchmark import run_pipeline
from tasks.plan import RunOptions, make_plan
from tasks.runtime.refs import LogitsRef


@flow(name="extract", description="Extract logits of every split into DuckDB")
def extract(
    suite: str = "fmnist",
    backbones: list[str] | None = None,
    seeds: int | list[int] | None = None,
    datasets: list[str] | None = None,
    epochs: int | None = None,
    max_train_samples: int | None = None,
    device: str = "auto",
    batch_size: int = 1024,
    refresh: bool = False,
) -> list[LogitsRef]:
    """Write the validation and target logits of every run and return their references.

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
    epochs, max_train_samples : int, optional
        Training parameters of the checkpoints to use (as given to ``train``).
    device : str, default "auto"
        Torch device.
    batch_size : int, default 1024
        Inference batch size.
    refresh : bool, default False
        Re-extract even where cached logits exist.

    Returns
    -------
    list of LogitsRef
    """
    plan = make_plan(suite, datasets=datasets, backbones=backbones, seeds=seeds)
    options = RunOptions(refresh=["extract"] if refresh else None, epochs=epochs,
                         max_train_samples=max_train_samples, device=device,
                         batch_size=batch_size)
    return run_pipeline(plan, options, until="extract").logits


if __name__ == "__main__":
    for ref in extract(suite="fmnist", backbones=["lenet"], seeds=1):
        print(ref)
