"""Time the DuckDB logit store: write, re-write and read back of one split.

Writes one validation split of ``n`` random float32 logits for each class count into a fresh
database in a temporary folder (its own run per class count), re-writes it (replace-partition
path), reads it back with :func:`storage.read_val` and digests the run with
:func:`storage.run_digest`. Prints one line per size with the best of ``--repeat`` timings.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_storage.py                # 200,000 x 10 and x 100
    python benchmarks/bench_storage.py --n 50000 --classes 10 --repeat 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage import (  # noqa: E402  (the repository root goes on the path first)
    RunInfo,
    SplitInfo,
    connect,
    read_val,
    run_digest,
    upsert_run,
    write_split,
)


def _best(times: list[float]) -> float:
    return min(times)


def bench(db: Path, n: int, n_classes: int, repeat: int) -> dict[str, float]:
    """Time write / re-write / read / digest of one ``n × n_classes`` split; best of ``repeat``."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(n, n_classes)).astype(np.float32)
    labels = rng.integers(0, n_classes, size=n)
    run_key = f"bench.c{n_classes}.s0"
    info = SplitInfo("val", "val", None, None, None)
    timings: dict[str, list[float]] = {"write": [], "rewrite": [], "read": [], "digest": []}
    with connect(db) as con:
        upsert_run(con, RunInfo(run_key, "bench", "bench", "none", 0, n_classes))
        for _ in range(repeat):
            con.execute("DELETE FROM logits WHERE run_key = ?", [run_key])
            con.execute("DELETE FROM splits WHERE run_key = ?", [run_key])
            con.execute("CHECKPOINT")
            t0 = time.perf_counter()
            write_split(con, run_key, info, logits, labels)
            timings["write"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            write_split(con, run_key, info, logits, labels)
            timings["rewrite"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            got, got_labels = read_val(con, run_key)
            timings["read"].append(time.perf_counter() - t0)
            if not (np.array_equal(got, logits) and np.array_equal(got_labels, labels)):
                raise AssertionError("round trip changed the data")
            t0 = time.perf_counter()
            run_digest(con, run_key)
            timings["digest"].append(time.perf_counter() - t0)
    return {key: _best(values) for key, values in timings.items()}


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the benchmark and print one line per class count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="samples per split")
    parser.add_argument(
        "--classes", type=int, nargs="+", default=[10, 100], help="class counts to time"
    )
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (best is printed)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="alsa-bench-storage-") as tmp:
        db = Path(tmp) / "bench.duckdb"
        header = ("shape", "MB", "write s", "rewrite s", "read s", "digest s")
        print("{:>16} {:>6} {:>8} {:>9} {:>7} {:>8}".format(*header))
        for c in args.classes:
            t = bench(db, args.n, c, args.repeat)
            mb = args.n * c * 4 / 1e6
            print(
                f"{f'{args.n:,} x {c}':>16} {mb:>6.0f} {t['write']:>8.2f} {t['rewrite']:>9.2f} "
                f"{t['read']:>7.2f} {t['digest']:>8.2f}"
            )
        print(f"database file: {db.stat().st_size / 1e6:.0f} MB after the last run")


if __name__ == "__main__":
    main()
