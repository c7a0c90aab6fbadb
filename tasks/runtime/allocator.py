"""Keep freed memory in the process: glibc ``mallopt`` tuning for large, short-lived tensors.

Full-batch message passing allocates a fresh ``(n_edges, width)`` tensor per layer and per
operation (gather, multiply, scatter): 60-70 MB each on a 30k-node citation graph. glibc serves
every allocation above its mmap threshold (at most 32 MiB) with a new ``mmap`` and returns it
with ``munmap`` when freed, so each operation first page-faults tens of megabytes of zeroed
memory. Measured on the 2-core benchmark machine (1 thread, a 130,000 x 128 float tensor):
``index_select`` 177 ms -> 11 ms, an elementwise multiply 157 ms -> 27 ms; one GCN training step
on ``arxiv-sim`` about 2 s -> 0.2 s.

:func:`keep_freed_memory` tells glibc to serve large blocks from the heap (``M_MMAP_MAX = 0``),
to keep up to 1 GiB of freed memory instead of trimming it (``M_TRIM_THRESHOLD``), and to grow
the heap 256 MiB at a time (``M_TOP_PAD``). It changes no result (allocation never changes
arithmetic), only how long the page faults take. The setting is process-wide and lasts until the
other policy below is applied (every stage applies this one when it starts); the price is up to
1 GiB of freed memory kept for reuse instead of returned to the system. On a C library without
``mallopt`` (macOS, musl) it does nothing.

The heap is the wrong place for a *large, varied* working set: a ResNet18 training step on 200
photos of 224 pixels holds about 4 GB of activations of many sizes (up to 640 MB), and served
from one heap that is never trimmed below its high-water mark, freed blocks too small for the
next step's tensors pile up. Waterbirds' train stage peaked at 8.2-9.0 GiB with the heap settings
and at 5.3 GiB without them, in the same time (``benchmarks/bench_train_memory.py``,
``docs/PERFORMANCE.md``). :func:`map_large_blocks` is the policy for that case: blocks of 32 MiB
and more get their own ``mmap`` again (returned to the system when freed), smaller ones come from
the heap, which is trimmed above 64 MiB of free top (glibc's own defaults once its adaptive
threshold has risen to its 32 MiB cap). The image adapter switches to it when a batch of inputs
alone passes :data:`LARGE_BATCH_BYTES`; the next stage's :func:`keep_freed_memory` switches
back. Neither changes a result.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

__all__ = ["LARGE_BATCH_BYTES", "keep_freed_memory", "map_large_blocks"]

logger = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
#: glibc's default cap on the number of mmap'd blocks.
_MMAP_MAX_DEFAULT = 65536
#: A batch of inputs this large (32 MiB: 167 photos of 224 x 224 x 3 float32) makes the image
#: adapter use :func:`map_large_blocks`.
LARGE_BATCH_BYTES = 32 << 20


def _mallopt(settings: tuple[tuple[int, int], ...], policy: str) -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # a list, not all(...): every setting is tried even if one is refused
    accepted = [mallopt(param, value) == 1 for param, value in settings]
    ok = all(accepted)
    logger.debug("glibc mallopt: %s %s", policy, "applied" if ok else "refused")
    return ok


def keep_freed_memory() -> bool:
    """Serve large blocks from a heap that keeps freed memory (the module docstring).

    Cheap (three ``mallopt`` calls): every stage applies it when it starts, which also undoes
    an earlier stage's :func:`map_large_blocks`.

    Returns
    -------
    bool
        True when glibc accepted every setting, False when the C library has no ``mallopt``.
    """
    return _mallopt(((_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, 1 << 30), (_M_TOP_PAD, 256 << 20)),
                    "keep freed memory")


def map_large_blocks() -> bool:
    """Give blocks of 32 MiB and more their own ``mmap`` again (the module docstring).

    Returns
    -------
    bool
        True when glibc accepted every setting, False when the C library has no ``mallopt``.
    """
    return _mallopt(((_M_MMAP_MAX, _MMAP_MAX_DEFAULT), (_M_MMAP_THRESHOLD, 32 << 20),
                     (_M_TRIM_THRESHOLD, 64 << 20), (_M_TOP_PAD, 128 << 10)),
                    "map large blocks")
