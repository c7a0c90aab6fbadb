"""Checkpoint files of the train stage: their layout version, reading them back, their sidecar.

The train stage (:mod:`tasks.stages.train`) writes ``<checkpoint_dir>/<run_key>.pt`` (a dict of
plain types that ``torch.load(path, weights_only=True)`` reads) and ``<run_key>.json`` beside it;
the extract and estimate stages read them through this module. The layout is described in the
train stage's module docstring.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any, Final

import torch

__all__ = ["CHECKPOINT_FORMAT", "load_checkpoint", "read_sidecar", "run_key"]

def load_checkpoint(path: Path | str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a checkpoint written by :func:`tasks.stages.train.train_classifier` (``weights_only=True``).

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


#: Version of the checkpoint layout.
CHECKPOINT_FORMAT: Final[int] = 1


def run_key(dataset: str, backbone: str, seed: int) -> str:
    """The readable key of a run: ``"{dataset}.{backbone}.s{seed}"``."""
    return f"{dataset}.{backbone}.s{seed}"

