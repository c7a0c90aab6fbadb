"""The ablation flow's labelled estimator variants: ALSA with parameters frozen, swept alpha and
anchor counts, stored under labels such as ``alsa-g[freeze=positions]``.

The estimate stage stores results under registry keys; :func:`estimate_variants` stores each
variant under its label (:func:`variant_label`), and :func:`ablation_task` is its ``@task``.
Like the estimate stage, it never opens the database: it reads the run's published logits file
and publishes its rows as a content-addressed estimates file, which the flow process ingests
(:func:`tasks.stages.healing.ingest_result`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from prefect import task

from tasks.runtime.refs import EstimatesRef, LogitsRef
from tasks.stages.common import STAGE_CACHE, forget_failure_record, log_task_failure

logger = logging.getLogger("tasks.stages.ablations")

__all__ = ["ablation_task", "estimate_variants", "variant_label"]


@task(
    name="ablate",
    cache_policy=STAGE_CACHE,
    on_failure=[log_task_failure, forget_failure_record],
    task_run_name="ablate-{logits.run_key}",
)
def ablation_task(
    logits: LogitsRef,
    variants: dict[str, tuple[str, dict[str, Any]]],
    code_version: str,
) -> EstimatesRef:
    """Estimate every target split of one run with labelled estimator variants.

    See :func:`estimate_variants`; the returned file is ingested by the flow.
    """
    return estimate_variants(logits, variants, code_version=code_version)


def variant_label(method: str, **params: Any) -> str:
    """Name under which a variant's estimates are stored: ``method[key=value,...]``.

    Sequences are joined with ``+``; with no parameters the label is ``method[default]``.

    Examples
    --------
    >>> variant_label("alsa-g", freeze=("peaks", "variances"))
    'alsa-g[freeze=peaks+variances]'
    >>> variant_label("alsa-g", alpha=0.5)
    'alsa-g[alpha=0.5]'
    """
    if not params:
        return f"{method}[default]"

    def text(value: Any) -> str:
        if isinstance(value, (list, tuple)):
            return "+".join(map(str, value))
        return str(value)

    return f"{method}[{','.join(f'{k}={text(v)}' for k, v in sorted(params.items()))}]"


def estimate_variants(
    logits: LogitsRef,
    variants: dict[str, tuple[str, dict[str, Any]]],
    *,
    code_version: str = "",
    results: str | Path | None = None,
) -> EstimatesRef:
    """Fit labelled estimator variants on a run's validation split and estimate its targets.

    Like :func:`tasks.stages.estimate.compute_estimates` (the same fitting loop and row builder),
    but each result is stored under its label (e.g. ``alsa-g[freeze=positions]``) rather than
    the registry key, so ablations sit beside the main estimates without replacing them.
    Anchors and per-class estimates of variants are not stored.

    Parameters
    ----------
    logits : LogitsRef
        The run's published logits (from the extract stage).
    variants : dict of str to (str, dict)
        ``label -> (registry key, hyper-parameters)``; labels should contain ``[`` so reports
        tell them from registry keys (:func:`variant_label`).
    code_version : str, default ""
        Stored with every row.
    results : str or Path, optional
        Results root; default the root ``logits.path`` lies in.

    Returns
    -------
    EstimatesRef
        The published estimates file and the digest over its rows;
        :func:`tasks.stages.estimate.ingest_estimates` stores them.

    Raises
    ------
    ValueError
        If ``variants`` is empty, a label is a registry key, or a method or parameter is
        unknown.
    storage.results.ResultCorruptError
        If the logits file is missing or changed.
    storage.errors.NotFoundError
        If the file holds no target split.
    """
    from tasks.methods import estimator_names
    from tasks.stages.estimate import estimate_rows, publish_estimates, read_run_logits

    if not variants:
        raise ValueError("variants must name at least one (label -> (method, params)); got none.")
    registered = estimator_names(features=True)
    clashes = [label for label in variants if label in registered]
    if clashes:
        raise ValueError(
            f"variant labels must differ from registry keys (they would replace the main "
            f"estimates); got {clashes}."
        )
    content, targets = read_run_logits(logits)
    rows, _ = estimate_rows(content, targets, variants, code_version, per_class=False)
    return publish_estimates(logits, rows, {}, results)
