"""Model-aware methods: estimators that need the trained model, not only its logits.

GNNEvaluator (Zheng et al., NeurIPS 2023; :mod:`tasks.models.gnnevaluator`) builds meta-graphs from the
validation graph, runs the frozen GNN on them and learns to regress accuracy from the embeddings.
ProjNorm (Yu et al., ICML 2022; :mod:`tasks.models.projnorm`) fine-tunes copies of the network
from its initialisation, on the training data and on each pseudo-labelled target split, and
scores the split by their distance in parameter space.
They cannot live in :mod:`estimators` (which sees logits only), so the estimate stage calls
:func:`model_aware_rows` for the run's checkpoint. Their rows go to the same ``estimates`` table
under the method names ``"gnnevaluator"`` and ``"projnorm"``, so the report treats them like any
other method (ProjNorm's as a score: its ``diagnostics["score"]``, with no accuracy of its own,
is mapped to one as MaNo's is, :mod:`tasks.report.scores`).

**ProjNorm is cached per (run, split)** (:func:`projnorm_cache_path`): one fine-tune per target
split is the expensive part of a run's estimates, so each split's score is kept in
``<state>/cache/projnorm/<run>/`` under a key of everything it depends on (the checkpoint's and
the staged dataset's hashes, the split's name and generator version, the configuration, the
device type and the code of :mod:`tasks.models.projnorm`), and an estimate stage re-run for
another reason (another method, a new calibration) re-reads it instead of fine-tuning again.

Target labels are still never read by the methods: :meth:`FittedGNNEvaluator.estimate` gets the
target graph and its nodes, ProjNorm the target samples (labelled by the model's argmax); the
true accuracy beside them comes from the ``splits`` table.
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

__all__ = ["model_aware_rows", "projnorm_cache_path", "projnorm_rows"]

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
    method : {"gnnevaluator", "projnorm"}
        Which method (:func:`projnorm_rows` for ProjNorm).
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
    if method == "projnorm":
        return projnorm_rows(checkpoint, targets, params=params, code_version=code_version,
                             device=device)
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



def projnorm_cache_path(root: Path, run_key: str, parts: Mapping[str, Any]) -> Path:
    """Where the ProjNorm score of one (run, split) is kept: ``<root>/<run>/<split>-<key>.json``
    with ``key`` the first 20 hex digits of a SHA-256 of ``parts`` (everything the score
    depends on, canonical JSON; ``parts["split"]`` names the split)."""
    import hashlib
    import json

    digest = hashlib.sha256(json.dumps(dict(parts), sort_keys=True, default=str).encode())
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(parts["split"]))
    return root / run_key / f"{safe}-{digest.hexdigest()[:20]}.json"


def projnorm_rows(
    checkpoint: CheckpointRef,
    targets: Sequence[SplitInfo],
    *,
    params: Mapping[str, Any] | None = None,
    code_version: str = "",
    device: str = "auto",
    cache_root: Path | None = None,
) -> list[EstimateRow]:
    r"""ProjNorm of every target split of a run (:mod:`tasks.models.projnorm`), cached per split.

    The reference copy is fine-tuned once, from the run's initialisation (rebuilt as the train
    stage built it: ``torch.manual_seed(seed)`` then the backbone), on the rows the model was
    trained on with their labels; each split not in the cache then gets its pseudo-label
    fine-tune. Every row has no accuracy of its own (NaN, stored as NULL) and the score in
    ``diagnostics["score"]``; ``params`` holds the configuration with the resolved ``steps`` and
    ``steps_scale`` (steps / 500, the authors' count), ``fit_seconds`` the reference fine-tune
    (0 when every split came from the cache) and ``estimate_seconds`` the split's own (its
    recorded time when cached, ``diagnostics["cached"]`` saying so).

    Raises
    ------
    FileNotFoundError, ValueError
        As :func:`model_aware_rows`; a parameter that is not a field of
        :class:`tasks.models.projnorm.ProjNormConfig`.
    """
    import json
    import math

    import numpy as np
    import torch

    from storage.errors import NotFoundError
    from storage.paths import state_dir
    from tasks.data.datasets import get_dataset_spec
    from tasks.data.files import atomic_target
    from tasks.models.backbones import get_backbone, get_backbone_spec
    from tasks.models.modalities.image import _batch
    from tasks.models.projnorm import fit_projnorm
    from tasks.runtime.allocator import keep_freed_memory
    from tasks.runtime.devices import resolve_device
    from tasks.runtime.threads import pinned_threads
    from tasks.stages.extract import open_checkpoint
    from tasks.stages.rows import estimate_row
    from tasks.stages.splits import generator_version, iter_target_splits
    from tasks.stages.train import _subsample
    from tasks.stages.versions import files_version, module_closure

    state, meta, _, dataset = open_checkpoint(checkpoint)
    config = model_aware_config("projnorm", params or {}, checkpoint.seed)
    dev = resolve_device(device)
    spec = get_dataset_spec(checkpoint.dataset).for_backbone(checkpoint.backbone)
    if get_backbone_spec(checkpoint.backbone).pretrained:
        raise ValueError(f"projnorm fine-tunes the network from its initialisation; backbone "
                         f"{checkpoint.backbone!r} of run {checkpoint.run_key!r} is used with "
                         "its published weights and was never trained.")
    steps = config.resolved_steps(dev)
    code = files_version(module_closure(("tasks.models.projnorm",)), "projnorm")
    base_parts = {
        "checkpoint": checkpoint.sha256, "dataset": dataset.sha256, "config": asdict(config),
        "steps": steps, "device": dev.type, "code": code,
        "splits": generator_version(checkpoint.dataset),
    }
    folder = (cache_root if cache_root is not None
              else state_dir() / "cache" / "projnorm")
    wanted = {t.split: t for t in targets}
    cached: dict[str, dict[str, Any]] = {}
    for name in wanted:
        path = projnorm_cache_path(folder, checkpoint.run_key, {**base_parts, "split": name})
        if path.is_file():
            try:
                cached[name] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                path.unlink(missing_ok=True)  # a damaged entry is recomputed
    keep_freed_memory()
    rows: list[EstimateRow] = []
    fit_seconds = 0.0
    config_params: dict[str, Any] = {**asdict(config), "steps": steps,
                                     "steps_scale": steps / 500}
    with pinned_threads():
        fitted = None
        if len(cached) < len(wanted):
            n_classes, shape = int(meta["n_classes"]), tuple(meta["input_shape"])
            model = get_backbone(checkpoint.backbone, n_classes, shape)
            model.load_state_dict(state, strict=True)
            model.to(dev).eval()
            torch.manual_seed(int(meta["seed"]))  # the train stage's initialisation, rebuilt
            initial = {k: v.detach().clone() for k, v in
                       get_backbone(checkpoint.backbone, n_classes, shape).state_dict().items()}
            source = spec.load_source(Path(dataset.root))
            from tasks.models.modalities import get_adapter

            adapter = get_adapter(spec.modality)
            keep = _subsample(adapter.size(source.train_x), meta.get("max_train_samples"),
                              int(meta["seed"]))
            train_x = adapter.take(source.train_x, keep)
            train_y = np.asarray(source.train_y)[keep]
            t0 = time.perf_counter()
            fitted = fit_projnorm(model, initial, lambda x: _batch(spec, x, dev), train_x,
                                  train_y, config, dev)
            fit_seconds = time.perf_counter() - t0
            config_params = fitted.params()
        for split, samples, _labels in (iter_target_splits(dataset) if fitted is not None
                                        else ()):
            if split.name not in wanted or split.name in cached:
                continue
            score, report = fitted.score(samples)
            entry = {"score": score, "final_loss": report["final_loss"],
                     "seconds": report["seconds"], "steps": report["steps"],
                     "reference_final_loss": fitted.reference_report["final_loss"]}
            path = projnorm_cache_path(folder, checkpoint.run_key,
                                       {**base_parts, "split": split.name})
            with atomic_target(path) as tmp:
                tmp.write_text(json.dumps(entry, sort_keys=True) + "\n", encoding="utf-8")
            cached[split.name] = {**entry, "fresh": True}
    missing = sorted(set(wanted) - set(cached))
    if missing:
        raise NotFoundError(
            f"run {checkpoint.run_key!r}: stored target splits {missing} are no longer made by "
            f"the dataset's shift families; re-run the extract stage."
        )
    for info in targets:
        entry = cached[info.split]
        rows.append(estimate_row(
            checkpoint.run_key, info, "projnorm", math.nan, params=config_params,
            diagnostics={"score": entry["score"], "pseudo_final_loss": entry["final_loss"],
                         "reference_final_loss": entry.get("reference_final_loss"),
                         "cached": not entry.get("fresh", False)},
            interval=(math.nan, math.nan), level=0.9, fit_seconds=fit_seconds,
            estimate_seconds=float(entry["seconds"]), code_version=code_version,
        ))
    logger.info("Run %s: projnorm (%d steps on %s) on %d splits, %d from the cache, reference "
                "in %.1f s", checkpoint.run_key, steps, dev.type, len(rows),
                len(rows) - sum(1 for e in cached.values() if e.get("fresh")), fit_seconds)
    return rows
