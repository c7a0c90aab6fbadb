"""Train stage: fit a backbone on a dataset's class-imbalanced source split, save a checkpoint.

Recipe
------
Cross-entropy, AdamW (learning rate, weight decay, batch size and default epochs from the
backbone's :class:`~tasks.backbones.BackboneSpec`), one-cycle schedule (15 % warm-up, cosine
decay to zero). Torch uses :func:`default_threads` threads (``min(2, cpus)``, capped by
``$OMP_NUM_THREADS``; restored afterwards), the ``DataLoader`` no worker processes, and image
batches are channels-last (oneDNN convolutions run 1.2-2.5x faster on the CPU that way).

Reproducibility
---------------
``torch.manual_seed(seed)`` fixes the initialisation; a ``torch.Generator`` seeded with ``seed``
fixes the batch order (``DataLoader(shuffle=True, num_workers=0)``); the source subset itself is
drawn with the dataset's fixed split seed. On the CPU with the same thread count this gives
bit-identical weights, hence the same checkpoint digest. On CUDA the kernels are not
bit-deterministic; the run is still seeded.

Checkpoint files
----------------
``<checkpoint_dir>/<run_key>.pt`` holds a dict of plain types that
``torch.load(path, weights_only=True)`` reads::

    {"format": 1,
     "state_dict": {name: CPU tensor},
     "meta": {"run_key", "dataset", "dataset_sha256", "backbone", "seed", "n_classes",
              "input_shape", "epochs", "batch_size", "lr", "weight_decay",
              "max_train_samples", "n_train", "torch_version"}}

It contains nothing time- or machine-dependent, so retraining with the same inputs reproduces the
same bytes. ``<run_key>.json`` beside it records what does vary: training seconds, device,
dataset root, final training loss, validation accuracy, creation time. Both are written
atomically.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm

from storage.paths import checkpoint_dir as default_checkpoint_dir
from tasks.backbones import BackboneSpec, get_backbone, get_backbone_spec
from tasks.datasets import get_dataset_spec
from tasks.datasets._files import atomic_target, file_digest
from tasks.refs import CheckpointRef, DatasetRef

logger = logging.getLogger(__name__)

#: Version of the checkpoint layout.
CHECKPOINT_FORMAT: Final[int] = 1

_EVAL_BATCH: Final[int] = 2048


def run_key(dataset: str, backbone: str, seed: int) -> str:
    """The readable key of a run: ``"{dataset}.{backbone}.s{seed}"``."""
    return f"{dataset}.{backbone}.s{seed}"


def resolve_device(device: str) -> torch.device:
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` into a usable device.

    Parameters
    ----------
    device : str
        ``"auto"`` picks CUDA when available, else the CPU.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        If ``device`` is not a valid device string, or names CUDA when it is not available.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got {device!r}."
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asks for CUDA, which is not available here.")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got {device!r}.")
    return dev


def default_threads() -> int:
    """Torch threads for a stage: ``min(2, cpu count)``, capped by ``$OMP_NUM_THREADS`` if set.

    Two threads match the benchmark's 2-core budget; an explicit ``OMP_NUM_THREADS`` (tests use
    1, deployments may set 2) lowers it, because torch's ``set_num_threads`` would otherwise
    override it and oversubscribe a shared machine.
    """
    threads = min(2, os.cpu_count() or 1)
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) >= 1:
        threads = min(threads, int(env))
    return threads


@contextmanager
def limited_threads(n: int | None = None) -> Iterator[int]:
    """Run a block with a bounded torch thread count, restoring the previous value after.

    Parameters
    ----------
    n : int, optional
        Thread count; default :func:`default_threads`.

    Yields
    ------
    int
        The thread count in effect.
    """
    previous = torch.get_num_threads()
    threads = n if n is not None else default_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(previous)


def _memory_format(ndim: int) -> torch.memory_format:
    """Channels-last for image batches (oneDNN convolutions are 1.2-2.5x faster on CPU)."""
    return torch.channels_last if ndim == 4 else torch.contiguous_format


def predict_logits(
    model: nn.Module, inputs: np.ndarray, device: torch.device, batch_size: int = _EVAL_BATCH
) -> np.ndarray:
    """Logits of a model on float inputs, in eval mode without gradients.

    Parameters
    ----------
    model : torch.nn.Module
        Classifier already on ``device``.
    inputs : numpy.ndarray
        ``float32`` model inputs ``(n, *input_shape)``.
    device : torch.device
        Where to compute.
    batch_size : int, default 2048
        Rows per forward pass.

    Returns
    -------
    numpy.ndarray
        ``(n, n_classes)`` ``float32`` logits on the CPU.
    """
    model.eval()
    fmt = _memory_format(inputs.ndim)
    model.to(memory_format=fmt)
    chunks = []
    with torch.inference_mode():
        for start in range(0, inputs.shape[0], batch_size):
            batch = torch.from_numpy(np.ascontiguousarray(inputs[start : start + batch_size]))
            chunks.append(model(batch.to(device, memory_format=fmt)).float().cpu().numpy())
    if not chunks:  # no rows: one empty forward pass gives the right width
        with torch.inference_mode():
            empty = torch.from_numpy(np.ascontiguousarray(inputs[:0])).to(device)
            return model(empty).float().cpu().numpy()
    return np.concatenate(chunks).astype(np.float32, copy=False)


def _subsample(n: int, max_samples: int | None, seed: int) -> np.ndarray:
    if max_samples is None or max_samples >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng([seed, 7919]).permutation(n)[:max_samples])


def _check_int(value: Any, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}.")


def load_checkpoint(path: Path | str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a checkpoint written by :func:`train_classifier` (``weights_only=True``).

    Parameters
    ----------
    path : Path or str
        The ``.pt`` file.

    Returns
    -------
    state_dict : dict of str to torch.Tensor
        CPU tensors.
    meta : dict
        The metadata described in the module docstring.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the file is not a checkpoint of this format.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint file {str(path)!r} does not exist.")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as exc:
        raise ValueError(
            f"{str(path)!r} is not a readable alsa-bench checkpoint ({exc.__class__.__name__}); "
            f"re-run the train stage."
        ) from exc
    if not isinstance(blob, dict) or blob.get("format") != CHECKPOINT_FORMAT:
        got = blob.get("format") if isinstance(blob, dict) else type(blob).__name__
        raise ValueError(
            f"{str(path)!r} is not an alsa-bench checkpoint of format {CHECKPOINT_FORMAT}; "
            f"got format {got!r}."
        )
    return blob["state_dict"], blob["meta"]


def _fit(
    model: nn.Module,
    loader: DataLoader,
    recipe: BackboneSpec,
    n_epochs: int,
    device: torch.device,
    fmt: torch.memory_format,
    key: str,
    progress: bool,
) -> float:
    """Run the training loop of the module docstring; returns the last epoch's mean loss."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer,
        max_lr=recipe.lr,
        total_steps=max(1, n_epochs * len(loader)),
        pct_start=0.15,
        anneal_strategy="cos",
    )
    loss_fn = nn.CrossEntropyLoss()
    last_loss = float("nan")
    for epoch in range(n_epochs):
        model.train()
        running, seen = 0.0, 0
        bar = tqdm(
            loader,
            desc=f"train {key} epoch {epoch + 1}/{n_epochs}",
            disable=not progress,
            leave=False,
            unit="batch",
        )
        for xb, yb in bar:
            xb = xb.to(device, memory_format=fmt, non_blocking=True)
            yb = yb.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
            running += float(loss.detach()) * yb.shape[0]
            seen += yb.shape[0]
            bar.set_postfix(loss=f"{running / max(seen, 1):.3f}")
        last_loss = running / max(seen, 1)
        logger.info("%s epoch %d/%d: train loss %.4f", key, epoch + 1, n_epochs, last_loss)
    return last_loss


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
        Staged dataset (from :func:`tasks.download.stage_dataset`).
    backbone : str
        Backbone registry key (:func:`tasks.backbones.available_backbones`).
    seed : int
        Training seed (initialisation and batch order), >= 0.
    epochs : int, optional
        Number of epochs; default the backbone's recipe (:class:`~tasks.backbones.BackboneSpec`).
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
        If ``dataset`` is not a :class:`~tasks.refs.DatasetRef`.
    ValueError
        If the dataset or backbone is unknown, or an argument is out of range.
    """
    if not isinstance(dataset, DatasetRef):
        raise TypeError(f"dataset must be a DatasetRef; got {type(dataset).__name__}.")
    _check_int(seed, "seed", 0)
    if epochs is not None:
        _check_int(epochs, "epochs", 1)
    if max_train_samples is not None:
        _check_int(max_train_samples, "max_train_samples", 1)
    data_spec = get_dataset_spec(dataset.name)
    net_spec = get_backbone_spec(backbone)
    n_epochs = epochs if epochs is not None else net_spec.epochs
    dev = resolve_device(device)
    key = run_key(data_spec.name, net_spec.name, seed)
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else default_checkpoint_dir()

    with limited_threads() as threads:
        t0 = time.perf_counter()
        source = data_spec.load_source(Path(dataset.root))
        keep = _subsample(source.n_train, max_train_samples, seed)
        x_train = torch.from_numpy(data_spec.to_inputs(source.train_x[keep]))
        y_train = torch.from_numpy(source.train_y[keep].astype(np.int64))

        torch.manual_seed(seed)
        fmt = _memory_format(x_train.ndim)
        model = get_backbone(net_spec.name, data_spec.n_classes, data_spec.input_shape)
        model = model.to(dev, memory_format=fmt)
        loader = DataLoader(
            TensorDataset(x_train, y_train),
            batch_size=net_spec.batch_size,
            shuffle=True,
            num_workers=0,
            generator=torch.Generator().manual_seed(seed),
        )
        last_loss = _fit(model, loader, net_spec, n_epochs, dev, fmt, key, progress)
        train_seconds = time.perf_counter() - t0

        val_logits = predict_logits(model, data_spec.to_inputs(source.val_x), dev)
        val_accuracy = float(np.mean(val_logits.argmax(axis=1) == source.val_y))

    state = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    meta: dict[str, Any] = {
        "run_key": key,
        "dataset": data_spec.name,
        "dataset_sha256": dataset.sha256,
        "backbone": net_spec.name,
        "seed": seed,
        "n_classes": data_spec.n_classes,
        "input_shape": list(data_spec.input_shape),
        "epochs": n_epochs,
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
        "dataset_root": dataset.root,
        "final_train_loss": last_loss,
        "val_accuracy": val_accuracy,
        "n_val": source.n_val,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with atomic_target(path.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps(sidecar, indent=2) + "\n")
    del model
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    logger.info(
        "%s: %d epochs in %.1f s on %s, val accuracy %.4f", key, n_epochs, train_seconds, dev,
        val_accuracy,
    )
    return CheckpointRef(
        run_key=key,
        dataset=data_spec.name,
        backbone=net_spec.name,
        seed=seed,
        path=str(path.resolve()),
        sha256=file_digest(path),
    )


def read_sidecar(checkpoint_path: Path | str) -> dict[str, Any]:
    """The ``.json`` record written beside a checkpoint, or ``{}`` when it is missing.

    Parameters
    ----------
    checkpoint_path : Path or str
        The ``.pt`` file.

    Returns
    -------
    dict
        Training seconds, device, dataset root, validation accuracy, creation time.
    """
    path = Path(checkpoint_path).with_suffix(".json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
