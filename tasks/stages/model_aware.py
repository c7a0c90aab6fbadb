"""Model-aware methods: estimators that need the trained model, not only its logits.

GNNEvaluator (Zheng et al., NeurIPS 2023; :mod:`tasks.models.gnnevaluator`) builds meta-graphs from the
validation graph, runs the frozen GNN on them and learns to regress accuracy from the embeddings.
It cannot live in :mod:`estimators` (which sees logits only), so the estimate stage calls
:func:`model_aware_rows` for the run's checkpoint. Its rows go to the same ``estimates`` table
under the method name ``"gnnevaluator"``, so the report treats it like any other method.

Target labels are still never read by the method: :meth:`FittedGNNEvaluator.estimate` gets the
target graph and its nodes; the true accuracy beside it comes from the ``splits`` table.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from storage.estimates import EstimateRow
from storage.logits import SplitInfo
from tasks.methods import MODEL_AWARE_METHODS, model_aware_config
from tasks.runtime.refs import CheckpointRef

__all__ = ["model_aware_rows"]

logger = logging.getLogger("tasks.stages.estimate")

def model_aware_rows(
    method: str,
    checkpoint: CheckpointRef,
    targets: Sequence[SplitInfo],
    *,
    params: Mapping[str, Any] | None = None,
    code_version: str = "",
    device: str = "auto",
) -> list[EstimateRow]:
    r"""Fit a model-aware method on the run's validation split and score every target split.

    Parameters
    ----------
    method : {"gnnevaluator"}
        Which method.
    checkpoint : CheckpointRef
        The trained classifier (verified against its recorded SHA-256 before use).
    targets : sequence of SplitInfo
        The run's stored target splits (name and true accuracy).
    params : mapping, optional
        Hyper-parameters (fields of :class:`tasks.models.gnnevaluator.GNNEvaluatorConfig`); the
        seed defaults to the run's.
    code_version : str, default ""
        Stored with every row.
    device : str, default "auto"
        Torch device.

    Returns
    -------
    list of EstimateRow
        One per target split. Its interval (level 0.90) is
        :math:`\hat a \pm z_{0.95}\sqrt{\mathrm{RMSE}_{meta}^2 + \hat a(1-\hat a)/n_T}`
        (:func:`estimators.core.base.sampling_interval` with the meta-regression's residual RMSE on
        its synthetic meta-set as the extra variance): the meta-model's own error plus target
        sampling noise.

    Raises
    ------
    FileNotFoundError
        If the checkpoint file is missing.
    ValueError
        If the method is unknown, the run's dataset is not of a modality the method applies to,
        the checkpoint changed (:func:`tasks.stages.extract.open_checkpoint`), or a parameter is
        unknown.
    """
    from estimators.core.base import DEFAULT_LEVEL, sampling_interval
    from storage.errors import NotFoundError
    from tasks.runtime.allocator import keep_freed_memory
    from tasks.models.backbones import get_backbone
    from tasks.data.datasets import get_dataset_spec
    from tasks.stages.rows import estimate_row
    from tasks.stages.extract import open_checkpoint
    from tasks.models.gnnevaluator import fit_gnnevaluator
    from tasks.stages.splits import iter_target_splits
    from tasks.runtime.devices import resolve_device
    from tasks.runtime.threads import pinned_threads

    if method not in MODEL_AWARE_METHODS:
        raise ValueError(
            f"method must be one of {', '.join(MODEL_AWARE_METHODS)}; got {method!r}."
        )
    spec = get_dataset_spec(checkpoint.dataset)
    if spec.modality not in MODEL_AWARE_METHODS[method]:
        raise ValueError(
            f"{method} applies to {'/'.join(MODEL_AWARE_METHODS[method])} runs; run "
            f"{checkpoint.run_key!r} is {spec.modality}."
        )
    state, meta, _, dataset = open_checkpoint(checkpoint)
    config = model_aware_config(method, params or {}, checkpoint.seed)
    dev = resolve_device(device)
    wanted = {t.split: t for t in targets}
    keep_freed_memory()
    rows: list[EstimateRow] = []
    with pinned_threads():
        model = get_backbone(checkpoint.backbone, int(meta["n_classes"]), tuple(meta["input_shape"]))
        model.load_state_dict(state, strict=True)
        model.to(dev).eval()
        source = spec.load_source(Path(dataset.root))
        t0 = time.perf_counter()
        fitted = fit_gnnevaluator(model, source.train_x, source.val_x, config, device=str(dev))
        fit_seconds = time.perf_counter() - t0
        diagnostics = fitted.diagnostics()
        config_params = asdict(config)
        for split, samples, _labels in iter_target_splits(dataset):
            info = wanted.get(split.name)
            if info is None:
                continue
            start = time.perf_counter()
            estimate = float(fitted.estimate(samples))
            interval = sampling_interval(
                estimate, int(info.n_samples), level=DEFAULT_LEVEL,
                extra_variance=float(fitted.meta_rmse_) ** 2,
            )
            rows.append(estimate_row(
                checkpoint.run_key, info, method, estimate, params=config_params,
                diagnostics=diagnostics, interval=interval, level=DEFAULT_LEVEL,
                fit_seconds=fit_seconds, estimate_seconds=time.perf_counter() - start,
                code_version=code_version,
            ))
    missing = sorted(set(wanted) - {r.split for r in rows})
    if missing:
        raise NotFoundError(
            f"run {checkpoint.run_key!r}: stored target splits {missing} are no longer made by "
            f"the dataset's shift families; re-run the extract stage."
        )
    logger.info("Run %s: %s fitted in %.1f s (meta RMSE %.4f), %d splits", checkpoint.run_key,
                method, fit_seconds, fitted.meta_rmse_, len(rows))
    return rows

