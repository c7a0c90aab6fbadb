"""Model-aware methods: estimators that need the trained model, not only its logits.

GNNEvaluator (Zheng et al., NeurIPS 2023; :mod:`tasks.gnnevaluator`) builds meta-graphs from the
validation graph, runs the frozen GNN on them and learns to regress accuracy from the embeddings.
It cannot live in :mod:`estimators` (which sees logits only), so the estimate stage calls
:func:`model_aware_rows` for the run's checkpoint. Its rows go to the same ``estimates`` table
under the method name ``"gnnevaluator"``, so the report treats it like any other method.

Target labels are still never read by the method: :meth:`FittedGNNEvaluator.estimate` gets the
target graph and its nodes; the true accuracy beside it comes from the ``splits`` table.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Final

import numpy as np

from storage.estimates import EstimateRow
from storage.logits import SplitInfo
from tasks.refs import CheckpointRef

__all__ = ["MODEL_AWARE_METHODS", "check_params", "model_aware_rows"]

logger = logging.getLogger("tasks.estimate")

#: Model-aware method name -> the modalities it applies to.
MODEL_AWARE_METHODS: Final[dict[str, tuple[str, ...]]] = {"gnnevaluator": ("graph",)}


def _config(params: Mapping[str, Any], seed: int) -> Any:
    from tasks.gnnevaluator import GNNEvaluatorConfig

    known = {f.name for f in fields(GNNEvaluatorConfig)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(
            f"method_params['gnnevaluator'] has unknown parameter(s) {unknown}; known: "
            f"{', '.join(sorted(known))}."
        )
    values = {"seed": int(seed), **params}
    for key, value in list(values.items()):
        if isinstance(value, list):
            values[key] = tuple(value)
    return GNNEvaluatorConfig(**values)


def check_params(method: str, params: Mapping[str, Any]) -> None:
    """Validate a model-aware method's parameters without running it (for the CLI).

    Raises
    ------
    ValueError
        If the method is unknown, a name is not a parameter, or a value is out of range.
    """
    if method not in MODEL_AWARE_METHODS:
        raise ValueError(
            f"method must be one of {', '.join(MODEL_AWARE_METHODS)}; got {method!r}."
        )
    _config(params, 0)


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
        Hyper-parameters (fields of :class:`tasks.gnnevaluator.GNNEvaluatorConfig`); the
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
        (:func:`estimators.base.sampling_interval` with the meta-regression's residual RMSE on
        its synthetic meta-set as the extra variance): the meta-model's own error plus target
        sampling noise.

    Raises
    ------
    FileNotFoundError
        If the checkpoint file is missing.
    ValueError
        If the method is unknown, the run's dataset is not of a modality the method applies to,
        the checkpoint changed (:func:`tasks.extract.open_checkpoint`), or a parameter is
        unknown.
    """
    from estimators.base import DEFAULT_LEVEL, sampling_interval
    from storage.errors import NotFoundError
    from tasks.allocator import keep_freed_memory
    from tasks.backbones import get_backbone
    from tasks.datasets import get_dataset_spec
    from tasks.extract import open_checkpoint
    from tasks.gnnevaluator import fit_gnnevaluator
    from tasks.shifts.cache import iter_target_splits
    from tasks.train import limited_threads, resolve_device

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
    config = _config(params or {}, checkpoint.seed)
    dev = resolve_device(device)
    wanted = {t.split: t for t in targets}
    keep_freed_memory()
    rows: list[EstimateRow] = []
    with limited_threads():
        model = get_backbone(checkpoint.backbone, int(meta["n_classes"]), tuple(meta["input_shape"]))
        model.load_state_dict(state, strict=True)
        model.to(dev).eval()
        source = spec.load_source(Path(dataset.root))
        t0 = time.perf_counter()
        fitted = fit_gnnevaluator(model, source.train_x, source.val_x, config, device=str(dev))
        fit_seconds = time.perf_counter() - t0
        diagnostics = json.dumps(fitted.diagnostics(), sort_keys=True, default=_json_default)
        params_json = json.dumps(asdict(config), sort_keys=True, default=_json_default)
        for split, samples, _labels in iter_target_splits(dataset):
            info = wanted.get(split.name)
            if info is None:
                continue
            start = time.perf_counter()
            estimate = float(fitted.estimate(samples))
            low, high = sampling_interval(
                estimate, int(info.n_samples), level=DEFAULT_LEVEL,
                extra_variance=float(fitted.meta_rmse_) ** 2,
            )
            rows.append(
                EstimateRow(
                    run_key=checkpoint.run_key, split=split.name, method=method,
                    params_json=params_json, estimated_accuracy=estimate,
                    true_accuracy=float(info.true_accuracy),
                    abs_error=abs(estimate - float(info.true_accuracy)),
                    fit_seconds=fit_seconds, estimate_seconds=time.perf_counter() - start,
                    diagnostics_json=diagnostics, code_version=code_version,
                    interval_low=low, interval_high=high, interval_level=DEFAULT_LEVEL,
                )
            )
    missing = sorted(set(wanted) - {r.split for r in rows})
    if missing:
        raise NotFoundError(
            f"run {checkpoint.run_key!r}: stored target splits {missing} are no longer made by "
            f"the dataset's shift families; re-run the extract stage."
        )
    logger.info("Run %s: %s fitted in %.1f s (meta RMSE %.4f), %d splits", checkpoint.run_key,
                method, fit_seconds, fitted.meta_rmse_, len(rows))
    return rows


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    return str(value)
