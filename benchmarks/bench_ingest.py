"""Time "compute anywhere, write once": publishing a logits Parquet file, and ingesting it.

For each size, a run of one validation split and ``--targets`` target splits of random float32
logits (``n`` rows in all, ``c`` classes) is published with
:func:`storage.results.write_logits_file` (what a worker does: Parquet write + SHA-256 + rename),
read back with :func:`storage.results.read_logits_file` (what the estimate task does), and
ingested into a fresh DuckDB file with :func:`storage.results.ingest` (what the flow process
does: hash check + one transaction + checkpoint). A second ingest of the same file is timed too
(the idempotent no-op: a hash and one look-up). Prints rows/s and MB/s (of raw float32 logits)
per step, and the file size; best of ``--repeat``.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_ingest.py                  # 1,000,000 x 10
    python benchmarks/bench_ingest.py --n 200000 --classes 100 --repeat 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage import RunInfo, SplitInfo, connect  # noqa: E402  (repository root on the path first)
from storage.results import (  # noqa: E402
    ingest,
    read_logits_file,
    verify_file,
    write_logits_file,
)


def _splits(n: int, c: int, targets: int, seed: int) -> list[tuple[SplitInfo, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    sizes = np.full(targets + 1, n // (targets + 1))
    sizes[0] += n - sizes.sum()
    out = []
    for i, size in enumerate(sizes):
        info = (SplitInfo("val", "val", "source", "val", None) if i == 0
                else SplitInfo(f"shift-{i}", "target", "synthetic", f"shift{i}", 1))
        out.append((info, rng.normal(size=(int(size), c)).astype(np.float32),
                    rng.integers(0, c, size=int(size))))
    return out


def measure(n: int, c: int, targets: int, repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` seconds of each step, and the file size in bytes."""
    run = RunInfo("bench.mlp.s0", "bench", "bench", "mlp", 0, c, "0" * 64, "bench", 1.0)
    splits = _splits(n, c, targets, 0)
    best: dict[str, float] = {}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
            root = Path(tmp) / "results"
            t0 = time.perf_counter()
            published = write_logits_file(run, splits, root)
            t1 = time.perf_counter()
            verify_file(published.path)
            t2 = time.perf_counter()
            read_logits_file(published.path, verify=False)
            t3 = time.perf_counter()
            with connect(Path(tmp) / "bench.duckdb") as con:
                t4 = time.perf_counter()
                ingest(con, published.path)
                t5 = time.perf_counter()
                ingest(con, published.path)
                t6 = time.perf_counter()
            size = Path(published.path).stat().st_size
        for name, seconds in (("write", t1 - t0), ("hash", t2 - t1), ("read", t3 - t2),
                              ("ingest", t5 - t4), ("re-ingest", t6 - t5)):
            best[name] = min(best.get(name, float("inf")), seconds)
    best["file_bytes"] = float(size)
    return best


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and print one line per step."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rows over all splits")
    parser.add_argument("--classes", type=int, nargs="+", default=[10])
    parser.add_argument("--targets", type=int, default=19, help="target splits (plus one val)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    for c in args.classes:
        res = measure(args.n, c, args.targets, args.repeat)
        raw_mb = args.n * c * 4 / 1e6
        print(f"n={args.n:,} x c={c}: {args.targets + 1} splits, raw logits {raw_mb:.1f} MB, "
              f"Parquet file {res['file_bytes'] / 1e6:.1f} MB")
        for step in ("write", "hash", "read", "ingest", "re-ingest"):
            s = res[step]
            print(f"  {step:<10} {s:7.3f} s  {args.n / s:12,.0f} rows/s  {raw_mb / s:8.1f} MB/s")


if __name__ == "__main__":
    main()
