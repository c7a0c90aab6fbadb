"""The torch device a stage runs on: ``"auto"`` picks CUDA when present, else the CPU."""

from __future__ import annotations

import torch

__all__ = ["resolve_device"]


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

