"""Speed and memory of ``alsa-bench monitor`` (issue 33, item 8), through the real command line.

Three measurements, each a fresh ``python -m flows.cli monitor`` process (start-up included),
``-m auto`` (the default: eight member methods, the signals and the combination):

1. **cold**: a new state folder, a reference of ROWS x CLASSES logits with labels, CHUNKS
   production files of ROWS x CLASSES: every chunk estimated, ``auto`` fitted once.
   Target: at most 3 minutes for 100 x 10,000 x 10.
2. **one new chunk**: one more file in the same folder, the same command again: the fitted
   estimators come from the cache, every known chunk is skipped, one chunk is estimated.
   Target: at most 15 s wall, start-up included.
3. **memory**: the peak resident memory of the cold run with a quarter of the chunks and with all
   of them, and of the one-new-chunk run: bounded by one chunk (and one file), not by the history.

The logits are synthetic but shaped like a classifier's: class-conditional Gaussians whose
separation drifts across the files (so the chunks differ and the estimators work). Peak memory
is the child's ``ru_maxrss`` from :func:`os.wait4`.

Usage::

    python benchmarks/bench_monitor.py                    # 100 x 10,000 x 10
    python benchmarks/bench_monitor.py --chunks 20 --rows 2000   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_stream(folder: Path, chunks: int, rows: int, classes: int, seed: int = 0) -> None:
    """The reference and ``chunks`` production files (float32 ``.npz``)."""
    rng = np.random.default_rng(seed)
    (folder / "prod").mkdir(parents=True, exist_ok=True)

    def draw(n: int, separation: float) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, classes, n)
        z = rng.normal(size=(n, classes)).astype(np.float32)
        z[np.arange(n), y] += np.float32(separation)
        return z, y

    z, y = draw(rows, 3.0)
    np.savez(folder / "ref.npz", logits=z, labels=y)
    for k in range(chunks):
        z, _ = draw(rows, 3.0 - 1.5 * k / max(chunks - 1, 1))
        np.savez(folder / "prod" / f"batch-{k:04d}.npz", logits=z)


def run_cli(args: list[str], home: Path) -> tuple[float, float, dict]:
    """One ``monitor`` command: wall seconds, peak RSS (MiB), its JSON output."""
    env = {**os.environ, "ALSA_BENCH_HOME": str(home), "PYTHONPATH": str(ROOT),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)  # the plain path: no Prefect server
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "monitor", *args, "--json"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"monitor exited {proc.returncode}:\n{err.decode()[-3000:]}")
    return wall, usage.ru_maxrss / 1024.0, json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--method", default="auto")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-monitor-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        write_stream(root, args.chunks, args.rows, args.classes)
        print(f"stream: {args.chunks} files x {args.rows} rows x {args.classes} classes, "
              f"reference {args.rows} rows ({time.perf_counter() - start:.1f} s to write)")
        common = ["--reference", str(root / "ref.npz"), "-m", args.method]

        quarter = max(1, args.chunks // 4)
        small = root / "small"
        (small / "prod").mkdir(parents=True)
        for k in range(quarter):
            os.link(root / "prod" / f"batch-{k:04d}.npz", small / "prod" / f"batch-{k:04d}.npz")
        wall_q, rss_q, rec_q = run_cli([*common, "--production", str(small / "prod")],
                                       root / "state-small")
        print(f"cold, {quarter} chunks: {wall_q:.1f} s wall, peak RSS {rss_q:.0f} MiB "
              f"({len(rec_q['new_chunks'])} chunks estimated)")

        wall_c, rss_c, rec_c = run_cli([*common, "--production", str(root / "prod")],
                                       root / "state")
        assert len(rec_c["new_chunks"]) == args.chunks, rec_c["new_chunks"][:3]
        print(f"cold, {args.chunks} chunks: {wall_c:.1f} s wall, peak RSS {rss_c:.0f} MiB "
              f"(target: <= 180 s for 100 x 10,000 x 10)")

        z = np.random.default_rng(99).normal(size=(args.rows, args.classes)).astype(np.float32)
        np.savez(root / "prod" / f"batch-{args.chunks:04d}.npz", logits=z)
        wall_n, rss_n, rec_n = run_cli([*common, "--production", str(root / "prod")],
                                       root / "state")
        assert rec_n["new_chunks"] == [f"batch-{args.chunks:04d}.npz"], rec_n["new_chunks"]
        assert all(rec_n["fits_from_cache"].values())
        print(f"one new chunk on a history of {args.chunks}: {wall_n:.1f} s wall, start-up "
              f"included, peak RSS {rss_n:.0f} MiB (target: <= 15 s); fits from the cache: "
              f"{rec_n['fits_from_cache']}")

        chunk_mib = args.rows * args.classes * 8 / 2**20
        print(f"memory: peak RSS {rss_q:.0f} MiB with {quarter} chunks, {rss_c:.0f} MiB with "
              f"{args.chunks} (one chunk as float64: {chunk_mib:.1f} MiB); a history "
              f"{args.chunks / quarter:.0f}x longer adds {rss_c - rss_q:+.0f} MiB")


if __name__ == "__main__":
    main()
