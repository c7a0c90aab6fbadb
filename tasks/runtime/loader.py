"""How many processes decode image files during an inference pass (``--loader-workers``).

Photos (ImageNet, Office-31, Waterbirds) reach the model as file paths, decoded batch by batch
(JPEG decode, resize, crop, normalise). On a GPU that decoding is the whole cost of the extract:
one process decodes about 170-260 ImageNet JPEGs a second while an H100 runs the pretrained
backbones' forward pass at 12,000-63,000 images a second, and a pool of eight processes decodes
1,200-1,600 a second (``benchmarks/bench_gpu.py imagenet-extract``, docs/PERFORMANCE.md "The
GPU path on one H100").

The count is ``$ALSA_BENCH_LOADER_WORKERS`` (``alsa-bench run --loader-workers N`` sets it for
the run, and local Dask workers inherit it; set it on remote workers yourself), **0 by
default**: on the 2-core CPU decoding is 12-15 % of a pass and decoding processes take cores
from the forward pass (measured: 318 img/s with two against 348 in the calling process), and on
the GPU a first implementation (torch ``DataLoader`` workers) was measured 9x slower than one
process (23 against 200 img/s), while the process pool used now has not been measured there yet.
It never changes a number: the forward passes see the same batches, decoded by the same code, in
the same order.
"""

from __future__ import annotations

import os
from typing import Any, Final

import numpy as np

__all__ = ["LOADER_WORKERS_ENV", "convert_chunk", "loader_workers"]

#: Environment variable holding the count; ``alsa-bench run --loader-workers`` sets it.
LOADER_WORKERS_ENV: Final[str] = "ALSA_BENCH_LOADER_WORKERS"


def loader_workers() -> int:
    """Decoding processes for an inference pass over image files.

    Returns
    -------
    int
        ``$ALSA_BENCH_LOADER_WORKERS``, or 0 (decode in the calling process) when it is unset.

    Raises
    ------
    ValueError
        If the variable is set to anything but an integer >= 0 (naming it and its value).
    """
    raw = os.environ.get(LOADER_WORKERS_ENV, "").strip()
    if not raw:
        return 0
    if not raw.isdigit():
        raise ValueError(f"{LOADER_WORKERS_ENV} (--loader-workers) must be an integer >= 0; "
                         f"got {raw!r}.")
    return int(raw)


def convert_chunk(to_inputs: Any, rows: np.ndarray) -> np.ndarray:
    """What a decoding process runs: one chunk of samples to ``float32`` model inputs.

    Lives here, in a module that does not import torch, so a decoding process starts by
    importing only the dataset's own conversion (PIL and NumPy for photos).
    """
    return np.asarray(to_inputs(rows), dtype=np.float32)
