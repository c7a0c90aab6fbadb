"""Errors of the data side, shared by every dataset module and by ``alsa-bench fetch``."""

from __future__ import annotations

__all__ = ["ChecksumError", "DatasetUnavailableError"]


class DatasetUnavailableError(FileNotFoundError):
    """The dataset's files are neither staged, nor in a source folder, nor downloadable."""


class ChecksumError(ValueError):
    """A dataset file's checksum differs from the published one."""
