"""Train stage: fit a backbone on a dataset's source split, save a checkpoint.

The stage is modality-neutral: it loads the dataset's source splits, checks that the backbone
accepts the dataset's modality, seeds torch, builds the model, and hands everything to the
modality's adapter (:mod:`tasks.models.modalities`), which owns the training loop (mini-batches with
AdamW and a one-cycle schedule for images; full-batch Adam with early stopping on one graph for
graphs; the recipe's numbers come from the backbone's :class:`~tasks.models.backbones.BackboneSpec`).
Torch uses :func:`~tasks.runtime.threads.default_threads` threads (``min(2, cpus)``, capped by ``$OMP_NUM_THREADS``;
restored afterwards).

Pretrained backbones
--------------------
A backbone whose :class:`~tasks.models.backbones.BackboneSpec` says ``pretrained`` (torchvision's
ImageNet classifiers, :mod:`tasks.models.backbones.pretrained`) is built with its published weights
and not trained: no optimizer, no epoch (``epochs`` and ``epochs_run`` are 0, ``n_train`` 0,
``max_train_samples`` None in the checkpoint). An ``epochs`` or ``max_train_samples`` passed
for it (``alsa-bench run --epochs 1`` over every suite) is ignored with a log line, so the
checkpoint stays the same bytes. Validation accuracy is measured and the checkpoint written
exactly as for a trained model, so extraction and estimation do not tell them apart.

Reproducibility
---------------
``torch.manual_seed(seed)`` fixes the initialisation (and dropout); the adapter seeds the batch
order from ``seed``; the source subset itself is drawn with the dataset's fixed split seed. On
the CPU with the same thread count this gives bit-identical weights, hence the same checkpoint
digest; in the reproducible mode (:mod:`tasks.runtime.reproducible`, the default) also on
another x86-64 CPU with AVX2. On CUDA the task switches cuDNN and torch to their deterministic
kernels in the reproducible mode; the fast mode is seeded only.

Checkpoint files
----------------
``<checkpoint_dir>/<run_key>.pt`` holds a dict of plain types that
``torch.load(path, weights_only=True)`` reads::

    {"format": 1,
     "state_dict": {name: CPU tensor},
     "meta": {"run_key", "dataset", "dataset_sha256", "backbone", "modality", "seed",
              "n_classes", "input_shape", "epochs", "epochs_run", "batch_size", "lr",
              "weight_decay", "max_train_samples", "n_train", "torch_version"}}

It contains nothing time- or machine-dependent, so retraining with the same inputs reproduces the
same bytes. ``<run_key>.json`` beside it records what does vary: training seconds, device,
dataset root, final training loss, validation accuracy, the early-stopping epoch, creation
time (the dataset root as ``$ALSA_BENCH_HOME/data`` when it lies in the state folder, so a
copied state folder finds its own copy), and how and where it was computed: ``compute`` (the
settings read back from the libraries, :func:`tasks.runtime.reproducible.effective_settings`),
``cpu_model`` and ``cpu_flags``. Both are written atomically.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch

from storage.paths import checkpoint_dir as default_checkpoint_dir
from tasks.models.backbones import check_backbone, get_backbone
from tasks.data.datasets import get_dataset_spec
from storage.hashing import file_sha256
from tasks.data.files import atomic_target
from tasks.models.modalities import get_adapter
from tasks.models.modalities.base import FitReport
from tasks.runtime.checkpoints import CHECKPOINT_FORMAT, run_key
from tasks.runtime.devices import resolve_device
from tasks.runtime.refs import CheckpointRef, DatasetRef, portable_path
from tasks.runtime.reproducible import (
    ComputeMode,
    compute_mode,
    cpu_flags,
    cpu_model,
    effective_settings,
)
from tasks.runtime.threads import pinned_threads

logger = logging.getLogger(__name__)

__all__ = ["train_classifier"]


_EVAL_BATCH: Final[int] = 2048










def _subsample(n: int, max_samples: int | None, seed: int) -> np.ndarray:
    if max_samples is None or max_samples >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng([seed, 7919]).permutation(n)[:max_samples])


def _check_int(value: Any, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")




def train_classifier(
    dataset: DatasetRef,
    backbone: str,
    seed: int,
    *,
    epochs: int | None = None,
    device: str = "auto",
    checkpoint_dir: Path | None = None,
    max_train_samples: int | None = None,
    progress: bool = True,
) -> CheckpointRef:
    """Train a classifier on the dataset's source split and save it as a checkpoint.

    Parameters
    ----------
    dataset : DatasetRef
        Staged dataset (from :func:`tasks.stages.download.stage_dataset`).
    backbone : str
        Backbone registry key (:func:`tasks.models.backbones.available_backbones`).
    seed : int
        Training seed (initialisation and batch order), >= 0.
    epochs : int, optional
        Number of epochs; default the backbone's recipe (:class:`~tasks.models.backbones.BackboneSpec`).
    device : str, default "auto"
        ``"auto"`` (CUDA when present), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    checkpoint_dir : Path, optional
        Folder of the checkpoint; default :func:`storage.paths.checkpoint_dir`.
    max_train_samples : int, optional
        Train on a seeded random subset of at most this many source training samples (for
        tests and quick runs); default all of them.
    progress : bool, default True
        Show a tqdm progress bar per epoch.

    Returns
    -------
    CheckpointRef
        Run key ``"{dataset}.{backbone}.s{seed}"``, the checkpoint path and its SHA-256.

    Raises
    ------
    TypeError
        If ``dataset`` is not a :class:`~tasks.runtime.refs.DatasetRef`.
    ValueError
        If the dataset or backbone is unknown, the backbone does not accept the dataset's
        modality (``lenet`` on a graph), or an argument is out of range.
    """
    if not isinstance(dataset, DatasetRef):
        raise TypeError(f"dataset must be a DatasetRef; got {type(dataset).__name__}.")
    _check_int(seed, "seed", 0)
    if epochs is not None:
        _check_int(epochs, "epochs", 1)
    if max_train_samples is not None:
        _check_int(max_train_samples, "max_train_samples", 1)
    data_spec = get_dataset_spec(dataset.name)
    net_spec = check_backbone(backbone, data_spec.modality, data_spec.name)
    if backbone in data_spec.recipes:  # the dataset's own recipe for this backbone (paper App. H)
        net_spec = dataclasses.replace(net_spec, **dict(data_spec.recipes[backbone]))
    data_spec = data_spec.for_backbone(net_spec.name)  # the backbone's own input transform
    adapter = get_adapter(data_spec.modality)
    pretrained = net_spec.pretrained
    if pretrained and (epochs is not None or max_train_samples is not None):
        logger.info(
            "backbone %r is pretrained (published weights, not trained): epochs=%r and "
            "max_train_samples=%r are ignored", net_spec.name, epochs, max_train_samples,
        )
        max_train_samples = None
    n_epochs = 0 if pretrained else epochs if epochs is not None else net_spec.epochs
    dev = resolve_device(device)
    key = run_key(data_spec.name, net_spec.name, seed)
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else default_checkpoint_dir()

    with pinned_threads() as threads:
        t0 = time.perf_counter()
        source = data_spec.load_source(Path(dataset.root))
        torch.manual_seed(seed)
        model = get_backbone(net_spec.name, data_spec.n_classes, data_spec.input_shape)
        if pretrained:
            keep = np.arange(0, dtype=np.int64)
            report = FitReport(final_train_loss=float("nan"), epochs_run=0)
            model.to(dev)
        else:
            keep = _subsample(adapter.size(source.train_x), max_train_samples, seed)
            train_x = adapter.take(source.train_x, keep)
            train_y = np.asarray(source.train_y)[keep]
            report = adapter.fit(
                model, net_spec, data_spec, (train_x, train_y), (source.val_x, source.val_y),
                epochs=n_epochs, seed=seed, device=dev, progress=progress, key=key,
            )
        last_loss = None if pretrained else report.final_train_loss
        train_seconds = time.perf_counter() - t0

        # 224-pixel ImageNet batches of 2,048 would take gigabytes: the recipe's batch size
        eval_batch = net_spec.batch_size if pretrained else _EVAL_BATCH
        val_logits = adapter.predict(model, data_spec, source.val_x, dev, eval_batch)
        val_accuracy = float(np.mean(val_logits.argmax(axis=1) == source.val_y))
        computed_with = effective_settings()  # read back while the task's pins hold

    state = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    meta: dict[str, Any] = {
        "run_key": key,
        "dataset": data_spec.name,
        "dataset_sha256": dataset.sha256,
        "backbone": net_spec.name,
        "modality": data_spec.modality,
        "seed": seed,
        "n_classes": data_spec.n_classes,
        "input_shape": list(data_spec.input_shape),
        "epochs": n_epochs,
        "epochs_run": report.epochs_run,
        "batch_size": net_spec.batch_size,
        "lr": net_spec.lr,
        "weight_decay": net_spec.weight_decay,
        "max_train_samples": max_train_samples,
        "n_train": int(keep.size),
        "torch_version": str(torch.__version__),
    }
    path = folder / f"{key}.pt"
    # Serialise in memory: torch.save names the zip's inner folder after the file it writes to,
    # and the temporary file's random name would make equal checkpoints differ byte-wise.
    buffer = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, "state_dict": state, "meta": meta}, buffer)
    with atomic_target(path) as tmp:
        tmp.write_bytes(buffer.getvalue())
    sidecar = {
        "run_key": key,
        "train_seconds": train_seconds,
        "device": str(dev),
        "threads": threads,
        "dataset_root": portable_path(dataset.root),  # relative to the state folder
        "final_train_loss": last_loss,
        "val_accuracy": val_accuracy,
        "n_val": source.n_val,
        "best_epoch": report.best_epoch,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        # how and where it was computed (the runs row's compute_* and cpu_* columns)
        "compute": computed_with,
        "cpu_model": cpu_model(),
        "cpu_flags": " ".join(sorted(cpu_flags())),
    }
    with atomic_target(path.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps(sidecar, indent=2) + "\n")
    del model
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    logger.info(
        "%s: %d epochs in %.1f s on %s, val accuracy %.4f", key, report.epochs_run,
        train_seconds, dev, val_accuracy,
    )
    return CheckpointRef(
        run_key=key,
        dataset=data_spec.name,
        backbone=net_spec.name,
        seed=seed,
        path=str(path.resolve()),
        sha256=file_sha256(path),
    )


# ------------------------------------------------------------------------------- the @task
from prefect import task  # noqa: E402  (the plain function above needs no Prefect)

from tasks.stages.common import (  # noqa: E402
    PINNED_STAGE_CACHE,
    forget_failure_record,
    log_task_failure,
)

@task(
    name="train",
    cache_policy=PINNED_STAGE_CACHE,
    on_failure=[log_task_failure, forget_failure_record],
    task_run_name="train-{dataset.name}-{backbone}-s{seed}",
)
def train_task(
    dataset: DatasetRef,
    backbone: str,
    seed: int,
    epochs: int | None,
    max_train_samples: int | None,
    device: str,
    checkpoint_dir: str,
    code_version: str,
    compute: ComputeMode,
    threads: int = 1,
) -> CheckpointRef:
    """Train one classifier (:func:`tasks.stages.train.train_classifier`) on ``threads`` threads
    in the run's compute mode (:func:`tasks.runtime.reproducible.compute_mode`). The mode is an
    input, so part of the cache key: a checkpoint trained in the fast mode is never reused by a
    reproducible run, nor the other way round."""
    with pinned_threads(threads), compute_mode(compute, device):
        return train_classifier(
            dataset, backbone, seed, epochs=epochs, device=device,
            checkpoint_dir=Path(checkpoint_dir), max_train_samples=max_train_samples,
            progress=False,
        )

