"""The ``estimate`` flow: fit every estimator on each run's validation logits, score its targets.

Runs the upstream stages first (cached). Launch it alone with ``python -m flows.estimate`` or the
``estimate`` deployment, e.g. after editing an estimator: its code version changes, so its
cached estimates (one task per run and method) are recomputed while the other methods',
training and extraction stay cached.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from flows.benchmark import run_pipeline
from tasks.plan import RunOptions, make_plan
from tasks.runtime.refs import EstimatesRef


@flow(name="estimate", description="Fit estimators and estimate every target split")
def estimate(
    suite: str = "fmnist",
    backbones: list[str] | None = None,
    seeds: int | list[int] | None = None,
    datasets: list[str] | None = None,
    methods: list[str] | None = None,
    method_params: dict[str, dict[str, Any]] | None = None,
    epochs: int | None = None,
    max_train_samples: int | None = None,
    device: str = "auto",
    batch_size: int = 1024,
    refresh: bool = False,
) -> list[EstimatesRef]:
    """Estimate target accuracy with every method on every run; return the estimate references.

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
    methods : list of str, optional
        Estimator keys; default all registered.
    method_params : dict, optional
        Hyper-parameters per method, e.g. ``{"alsa-g": {"n_anchors": 500}}``.
    epochs, max_train_samples : int, optional
        Training parameters of the checkpoints to use (as given to ``train``).
    device : str, default "auto"
        Torch device of training and extraction.
    batch_size : int, default 1024
        Inference batch size of extraction.
    refresh : bool, default False
        Re-estimate even where cached estimates exist.

    Returns
    -------
    list of EstimatesRef
    """
    plan = make_plan(suite, datasets=datasets, backbones=backbones, seeds=seeds)
    options = RunOptions(refresh=["estimate"] if refresh else None, epochs=epochs,
                         max_train_samples=max_train_samples, device=device,
                         batch_size=batch_size, methods=methods, method_params=method_params)
    return run_pipeline(plan, options, until="estimate").estimates


if __name__ == "__main__":
    for ref in estimate(suite="fmnist", backbones=["lenet"], seeds=1):
        print(ref)
