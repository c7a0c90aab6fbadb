"""The ``ablations`` flow: ALSA with frozen parameter groups, and its α and anchor-count sweeps.

Over the logits the benchmark stored (upstream stages come from the cache), it fits labelled
variants of one ALSA estimator and stores their estimates beside the main ones:

* paper §4.2, Fig. 3: ``[default]`` (every parameter learnable, "Lrn"), ``[freeze=positions]``
  ("fix a"), ``[freeze=peaks]`` ("fix p"), ``[freeze=variances]`` ("fix v") and
  ``[freeze=peaks+variances]`` ("fix p&v");
* App. J, Fig. 9: the rectification confidence interval ``[alpha=...]``;
* App. J, Fig. 10: the number of anchors ``[n_anchors=...]``.

The report goes to ``<state>/reports/<suite>-ablations/`` in the benchmark's format, with
MAE-vs-parameter plots for the sweeps. Run it with ``alsa-bench run --ablations`` or ``python -m flows.ablations``.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from flows.benchmark import run_pipeline
from storage.paths import db_path, reports_dir
from tasks.plan import RunOptions, make_plan
from tasks.runtime.refs import ReportRef
from tasks.stages.ablations import ablation_task, variant_label
from tasks.stages.healing import ingest_result, output_exists, result_intact, run_stage
from tasks.stages.report import report_fingerprint, report_task
from tasks.stages.versions import parse_refresh, stage_code_version

#: Parameter groups frozen in the paper's ablation (fix a, fix p, fix v, fix p&v).
FREEZE_SETTINGS: tuple[tuple[str, ...], ...] = (
    ("positions",),
    ("peaks",),
    ("variances",),
    ("peaks", "variances"),
)
#: Confidence intervals of the α sweep (the estimator's default, 0.95, is the ``[default]`` run).
ALPHAS: tuple[float, ...] = (0.5, 0.8, 0.9, 0.99, 0.999)
#: Anchor counts of the anchor sweep (the estimator's default, 300, is the ``[default]`` run).
ANCHOR_COUNTS: tuple[int, ...] = (10, 50, 100, 500, 1000)


def ablation_variants(
    method: str = "alsa-g",
    *,
    freeze: bool = True,
    alphas: list[float] | None = None,
    anchor_counts: list[int] | None = None,
    base_params: dict[str, Any] | None = None,
) -> dict[str, tuple[str, dict[str, Any]]]:
    """Labelled variants of ``method``: its default, frozen groups, and the two sweeps.

    Parameters
    ----------
    method : str, default "alsa-g"
        ALSA registry key (``alsa-g`` or ``alsa-e``).
    freeze : bool, default True
        Include the four frozen-parameter variants.
    alphas : list of float, optional
        α values; default :data:`ALPHAS`; ``[]`` for none.
    anchor_counts : list of int, optional
        Anchor counts; default :data:`ANCHOR_COUNTS`; ``[]`` for none.
    base_params : dict, optional
        Hyper-parameters every variant shares (e.g. ``{"max_epochs": 200}``); not part of the
        labels.

    Returns
    -------
    dict of str to (str, dict)
        ``label -> (method, params)`` for :func:`tasks.stages.ablations.estimate_variants`.
    """
    base = dict(base_params or {})
    out: dict[str, tuple[str, dict[str, Any]]] = {variant_label(method): (method, dict(base))}
    if freeze:
        for groups in FREEZE_SETTINGS:
            out[variant_label(method, freeze=groups)] = (method, {**base, "freeze": list(groups)})
    for alpha in ALPHAS if alphas is None else alphas:
        out[variant_label(method, alpha=alpha)] = (method, {**base, "alpha": float(alpha)})
    for k in ANCHOR_COUNTS if anchor_counts is None else anchor_counts:
        out[variant_label(method, n_anchors=k)] = (method, {**base, "n_anchors": int(k)})
    return out


@flow(name="ablations", description="ALSA ablations: frozen parameters, alpha and anchor sweeps")
def ablations(
    suite: str = "fmnist",
    backbones: list[str] | None = None,
    seeds: int | list[int] | None = None,
    datasets: list[str] | None = None,
    method: str = "alsa-g",
    freeze: bool = True,
    alphas: list[float] | None = None,
    anchor_counts: list[int] | None = None,
    base_params: dict[str, Any] | None = None,
    epochs: int | None = None,
    max_train_samples: int | None = None,
    device: str = "auto",
    batch_size: int = 1024,
    refresh: bool = False,
    run_name: str | None = None,
    publish_artifacts: bool = True,
) -> ReportRef:
    """Fit ALSA variants on every run's stored logits and report them.

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
    method : str, default "alsa-g"
        ALSA registry key to ablate.
    freeze : bool, default True
        Include fix a / fix p / fix v / fix p&v.
    alphas : list of float, optional
        α sweep; default :data:`ALPHAS`.
    anchor_counts : list of int, optional
        Anchor-count sweep; default :data:`ANCHOR_COUNTS`.
    base_params : dict, optional
        Hyper-parameters shared by every variant.
    epochs, max_train_samples, device, batch_size
        Upstream parameters, as given to the benchmark (so its cached logits are reused).
    refresh : bool, default False
        Re-fit the variants even where cached.
    run_name : str, optional
        Report name; default ``<suite>-ablations``.
    publish_artifacts : bool, default True
        Publish the report as Prefect artifacts.

    Returns
    -------
    ReportRef
    """
    logger = get_run_logger()
    plan = make_plan(suite, datasets=datasets, backbones=backbones, seeds=seeds)
    variants = ablation_variants(
        method, freeze=freeze, alphas=alphas, anchor_counts=anchor_counts, base_params=base_params
    )
    options = RunOptions(epochs=epochs, max_train_samples=max_train_samples, device=device,
                         batch_size=batch_size)
    upstream = run_pipeline(plan, options, until="extract")
    fresh = parse_refresh(["estimate"] if refresh else None)
    version = stage_code_version("estimate")
    estimates = []
    for logits in upstream.logits:
        ref, outcome = run_stage(
            ablation_task, "estimate", fresh, logits, variants, version, key=logits.run_key,
            check=result_intact, ingest=ingest_result,  # published by the task, ingested here
        )
        logger.info("ablate   %-28s %s in %.2f s", outcome.key, outcome.state, outcome.seconds)
        estimates.append(ref)
    name = run_name or f"{plan.suite}-ablations"
    run_keys = [e.run_key for e in estimates]
    methods = sorted(variants)
    fingerprint = report_fingerprint(estimates, run_keys, methods)
    report, outcome = run_stage(
        report_task, "report", fresh, fingerprint, run_keys, str(db_path().resolve()),
        str(reports_dir().resolve()), name, methods, publish_artifacts,
        stage_code_version("report"), key=name,
        check=lambda ref: output_exists(ref, fingerprint=fingerprint),
    )
    logger.info("report   %-28s %s in %.2f s", outcome.key, outcome.state, outcome.seconds)
    return report


if __name__ == "__main__":
    from flows.benchmark import print_report

    print_report(ablations(suite="fmnist", backbones=["lenet"], seeds=1))
