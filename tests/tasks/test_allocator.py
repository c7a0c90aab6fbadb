"""glibc allocation policies (tasks/runtime/allocator.py) and when the image adapter switches."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from tasks.models.modalities import image
from tasks.runtime import allocator
from tasks.runtime.allocator import LARGE_BATCH_BYTES
from tasks.stages.versions import PROJECT_ROOT


class _FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

        def mallopt(param: int, value: int) -> int:
            self.calls.append((param, value))
            return 1

        self.mallopt = mallopt


def test_policies_set_the_documented_mallopt_values(monkeypatch):
    libc = _FakeLibc()
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: libc)
    assert allocator.keep_freed_memory() is True
    assert libc.calls == [(-4, 0), (-1, 1 << 30), (-2, 256 << 20)]
    libc.calls.clear()
    assert allocator.map_large_blocks() is True
    assert libc.calls == [(-4, 65536), (-3, 32 << 20), (-1, 64 << 20), (-2, 128 << 10)]


def test_no_mallopt_means_no_change(monkeypatch):
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: object())
    assert allocator.keep_freed_memory() is False
    assert allocator.map_large_blocks() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc only")
def test_freed_large_blocks_stay_with_the_heap_and_go_back_when_mapped():
    # a real process: 64 MiB allocated, touched and freed under each policy
    script = textwrap.dedent("""
        import numpy as np
        from tasks.runtime.allocator import keep_freed_memory, map_large_blocks
        def rss():
            return int(open('/proc/self/statm').read().split()[1]) * 4096
        def kept_after_free(policy, mib):
            policy()
            base = rss()
            a = np.ones(mib << 17)  # float64, touched
            del a
            return rss() - base
        # the heap keeps 64 MiB; then a 128 MiB block would grow it by 64 MiB more and keep
        # them too, unless the block is mapped and handed back
        print(kept_after_free(keep_freed_memory, 64) >> 20,
              kept_after_free(map_large_blocks, 128) >> 20)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    kept_heap, kept_mapped = int(out[0]), int(out[1])
    assert kept_heap >= 60          # the heap keeps the freed 64 MiB for reuse
    assert kept_mapped <= 4         # the mapped block went back to the system


def test_image_adapter_maps_large_cpu_batches_only(monkeypatch):
    calls = []
    monkeypatch.setattr(image, "map_large_blocks", lambda: calls.append(1) or True)
    photo = np.zeros((1, 3, 224, 224), np.float32)      # 588 KiB a row
    rows = -(-LARGE_BATCH_BYTES // photo.nbytes)          # the first batch size that reaches it
    assert image._large_batches_mapped(photo, rows, torch.device("cpu")) is True
    assert calls == [1]
    assert image._large_batches_mapped(photo, rows - 1, torch.device("cpu")) is False
    assert image._large_batches_mapped(photo, 200, torch.device("cuda")) is False
    fmnist = np.zeros((1, 1, 28, 28), np.float32)
    assert image._large_batches_mapped(fmnist, 2048, torch.device("cpu")) is False
    assert calls == [1]
