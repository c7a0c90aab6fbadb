"""Peak memory of one dataset's train stage, in-process, sampled over time (issue 23).

Runs :func:`tasks.stages.train.train_classifier` on a staged dataset (``$ALSA_BENCH_HOME/data``,
e.g. a generated release) for ``--epochs`` on at most ``--max-train`` training rows, while a
thread samples the resident set every 0.2 s. Prints the peak and the seconds at which it came.
``--keep-heap`` keeps glibc on :func:`~tasks.runtime.allocator.keep_freed_memory`'s heap for
the whole stage (the behaviour before large photo batches switched to
:func:`~tasks.runtime.allocator.map_large_blocks`); ``--no-heap-tuning`` leaves glibc's malloc
untouched.

    ALSA_BENCH_HOME=/tmp/dry/waterbirds PYTHONPATH=. flock /tmp/heavy.lock \\
        python benchmarks/bench_train_memory.py waterbirds --backbone resnet18 --max-train 1200 \\
        [--keep-heap | --no-heap-tuning]

Results: docs/PERFORMANCE.md ("Waterbirds' train stage").
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path


def _rss_gib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**30


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--backbone", default="resnet18")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--max-train", type=int, default=None)
    ap.add_argument("--keep-heap", action="store_true",
                    help="never switch to map_large_blocks (the behaviour before the fix)")
    ap.add_argument("--no-heap-tuning", action="store_true",
                    help="leave glibc's malloc as it is (no tasks.runtime.allocator tuning)")
    args = ap.parse_args()
    from tasks.stages.download import stage_dataset
    from tasks.stages.train import train_classifier

    if args.no_heap_tuning:
        from tasks.runtime import allocator
        allocator.keep_freed_memory = lambda: False  # type: ignore[assignment]
    if args.keep_heap:
        from tasks.models.modalities import image
        image.map_large_blocks = lambda: False  # type: ignore[assignment]
    ref = stage_dataset(args.dataset)
    samples: list[tuple[float, float]] = []
    done = threading.Event()
    t0 = time.perf_counter()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.perf_counter() - t0, _rss_gib()))
            time.sleep(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    with tempfile.TemporaryDirectory() as tmp:
        train_classifier(ref, args.backbone, 0, epochs=args.epochs, device="cpu",
                         checkpoint_dir=Path(tmp), max_train_samples=args.max_train,
                         progress=False)
    done.set()
    thread.join()
    peak_t, peak = max(samples, key=lambda s: s[1])
    label = ("keep heap" if args.keep_heap else "no heap tuning" if args.no_heap_tuning
             else "default")
    print(f"{args.dataset} {args.backbone} {label}: "
          f"{time.perf_counter() - t0:.0f} s, peak RSS {peak:.2f} GiB at {peak_t:.0f} s; "
          f"RSS by 10 s: " + " ".join(f"{max(r for t, r in samples if i <= t < i + 10):.1f}"
                                     for i in range(0, int(samples[-1][0]), 10)))


if __name__ == "__main__":
    main()
