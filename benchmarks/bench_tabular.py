"""What one tabular run costs, per stage: wall and CPU seconds of train, extract and estimate.

On a shared machine the wall clock measures the other sessions as much as this code; the CPU
seconds of this process (``time.process_time``: user + system, every thread) do not, and for
stages that run on one or two threads they are close to the wall time the same stage takes on an
idle 2-core machine. The script runs the stage functions of the pipeline in this process, in a
fresh state folder, for every dataset x backbone x seed asked for, and prints one row per stage
and the totals, so a suite's cost can be read without a quiet machine.

Usage::

    nice -n 10 .venv/bin/python benchmarks/bench_tabular.py --suite tabular --seeds 3
    .venv/bin/python benchmarks/bench_tabular.py --dataset arrests --backbone tab-hgb --seeds 1
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="tabular")
    parser.add_argument("--dataset", action="append", default=None)
    parser.add_argument("--backbone", action="append", default=None)
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args(argv)
    home = tempfile.mkdtemp(prefix="bench-tabular-")
    os.environ["ALSA_BENCH_HOME"] = home

    from tasks.models.backbones import available_backbones
    from tasks.plan import suite_datasets
    from tasks.runtime.threads import pinned_threads
    from tasks.stages.download import stage_dataset
    from tasks.stages.estimate import compute_estimates, ingest_estimates
    from tasks.stages.extract import compute_logits, ingest_logits
    from tasks.stages.train import train_classifier

    datasets = args.dataset or list(suite_datasets(args.suite))
    backbones = args.backbone or list(available_backbones("tabular"))
    totals = {"train": [0.0, 0.0], "extract": [0.0, 0.0], "estimate": [0.0, 0.0]}
    print(f"state folder {home}; {len(datasets)} datasets x {len(backbones)} backbones x "
          f"{args.seeds} seeds")
    print(f"{'run':<36} {'stage':<9} {'wall s':>8} {'cpu s':>8}")

    def timed(label: str, stage: str, fn):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        totals[stage][0] += wall
        totals[stage][1] += cpu
        print(f"{label:<36} {stage:<9} {wall:8.2f} {cpu:8.2f}", flush=True)
        return out

    with pinned_threads():
        for name in datasets:
            ref = stage_dataset(name)
            for backbone in backbones:
                for seed in range(args.seeds):
                    label = f"{name}.{backbone}.s{seed}"
                    ckpt = timed(label, "train", lambda: train_classifier(
                        ref, backbone, seed, progress=False))
                    logits = timed(label, "extract", lambda: ingest_logits(
                        compute_logits(ckpt, suite=args.suite)))
                    timed(label, "estimate", lambda: ingest_estimates(
                        compute_estimates(logits)))
    wall = sum(v[0] for v in totals.values())
    cpu = sum(v[1] for v in totals.values())
    for stage, (w, c) in totals.items():
        print(f"{'total':<36} {stage:<9} {w:8.1f} {c:8.1f}")
    print(f"{'total':<36} {'all':<9} {wall:8.1f} {cpu:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
