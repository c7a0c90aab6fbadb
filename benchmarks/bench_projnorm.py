"""What ProjNorm costs per target split, on the checkpoints of a benchmark state folder.

ProjNorm (``tasks/models/projnorm.py``) fine-tunes a copy of the network once on the training
data (the reference) and once per target split (the pseudo copy). This script times both, on
``--splits`` target splits of each run given, at the CPU default (50 steps) and, with
``--authors``, at the authors' 500 steps, then projects the cost of a whole run (every target
split) and of the offline ``make bench`` image suite. Each measurement runs in a fresh cache
folder, so nothing is read back.

    PYTHONPATH=. python benchmarks/bench_projnorm.py --run fmnist-coarse.lenet.s0 \\
        [--run ...] [--splits 3] [--authors] [--home .alsa-bench]

Results: docs/PERFORMANCE.md ("ProjNorm").
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True, help="run key (repeatable)")
    ap.add_argument("--splits", type=int, default=3, help="target splits timed per run")
    ap.add_argument("--authors", action="store_true", help="also time 500 steps")
    ap.add_argument("--home", default=".alsa-bench", help="the state folder")
    args = ap.parse_args()
    os.environ["ALSA_BENCH_HOME"] = str(Path(args.home).resolve())

    from storage.db import connect
    from storage.hashing import file_sha256
    from storage.logits import list_splits
    from storage.paths import checkpoint_dir, db_path
    from tasks.runtime.refs import CheckpointRef
    from tasks.stages.model_aware import projnorm_rows

    steps_list = [50, 500] if args.authors else [50]
    print("| run | target splits | steps | reference fine-tune (s) | per split (s) | "
          "whole run, projected (min) | wall of this measurement (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with connect(db_path(), read_only=True) as con:
        targets = {k: list_splits(con, k, role="target") for k in args.run}
    for key in args.run:
        dataset, backbone, seed = key.rsplit(".", 2)
        path = checkpoint_dir() / f"{key}.pt"
        ckpt = CheckpointRef(run_key=key, dataset=dataset, backbone=backbone,
                             seed=int(seed[1:]), path=str(path), sha256=file_sha256(path))
        chosen = targets[key][: args.splits]
        for steps in steps_list:
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                rows = projnorm_rows(ckpt, chosen, params={"steps": steps},
                                     cache_root=Path(tmp))
                wall = time.perf_counter() - start
            ref = rows[0].fit_seconds
            per_split = sum(r.estimate_seconds for r in rows) / len(rows)
            whole = (ref + per_split * len(targets[key])) / 60
            print(f"| `{key}` | {len(targets[key])} | {steps} | {ref:.1f} | {per_split:.2f} | "
                  f"{whole:.1f} | {wall:.1f} ({len(rows)} splits) |")


if __name__ == "__main__":
    main()
