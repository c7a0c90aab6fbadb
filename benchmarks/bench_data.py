"""Time the data side of the benchmark and show the accuracies it produces.

Measures, in a fresh state folder (so every step is cold unless ``--home`` points at a used one):

* staging seconds per dataset;
* shift generation seconds per dataset, cold (empty cache) and cached (everything read back);
* per dataset x backbone: training seconds, epochs, validation accuracy, logit extraction seconds,
  and the true accuracy on ``clean``, the mean / min / max over each shift family, and a few
  named shifted splits.

Run from the repository root::

    .venv/bin/python benchmarks/bench_data.py                  # both datasets, 3 backbones
    .venv/bin/python benchmarks/bench_data.py --datasets fmnist --backbones lenet --epochs 1

The machine's load average is printed first and last: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SHOWN_SPLITS = (
    "gaussian_noise-3",
    "rotate-3",
    "contrast-5",
    "label_shift-a0.3-d1",
    "mnistm-photo-3",
    "subpop-novel50",
    "subpop-novel100",
)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cpus"


def main(argv: list[str] | None = None) -> int:
    """Run the measurements and print them; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["fmnist", "fmnist-coarse"])
    parser.add_argument("--backbones", nargs="+", default=["mlp", "lenet", "resnet"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=None, help="default: each backbone's")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--home", default=None, help="state folder (default: a fresh temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary state folder")
    parser.add_argument(
        "--threads", type=int, default=None, help="cap torch threads (sets OMP_NUM_THREADS)"
    )
    args = parser.parse_args(argv)
    if args.threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)

    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="bench-data-"))
    os.environ["ALSA_BENCH_HOME"] = str(home)

    import duckdb
    import torch

    from tasks.stages.download import stage_dataset
    from tasks.stages.extract import compute_logits, ingest_logits
    from tasks.data.targets import target_splits
    from tasks.stages.splits import iter_target_splits, prepare_target_splits
    from tasks.runtime.checkpoints import read_sidecar
    from tasks.runtime.threads import default_threads
    from tasks.stages.train import train_classifier

    print(f"# bench_data  state={home}  torch={torch.__version__}  {_load()}")
    print(f"# torch threads inside stages: {default_threads()}; device={args.device}")
    try:
        refs = {}
        for name in args.datasets:
            t = time.perf_counter()
            refs[name] = stage_dataset(name)
            print(f"stage {name:14s} {time.perf_counter() - t:6.2f} s")
        for name, ref in refs.items():
            n_splits = len(target_splits(name))
            t = time.perf_counter()
            prepare_target_splits(ref)
            cold = time.perf_counter() - t
            t = time.perf_counter()
            rows = sum(int(y.shape[0]) for _, _, y in iter_target_splits(ref))
            cached = time.perf_counter() - t
            print(
                f"shifts {name:13s} {n_splits:3d} splits {rows:7d} rows: generate {cold:6.2f} s, "
                f"read cached {cached:5.2f} s"
            )

        print()
        header = (
            f"{'run':24s} {'ep':>2s} {'train_s':>7s} {'extr_s':>6s} {'val':>6s} {'clean':>6s}  "
            "family mean [min, max] ..."
        )
        print(header)
        db = home / "bench.duckdb"
        shown: list[tuple[str, str, float]] = []
        for name, ref in refs.items():
            for backbone in args.backbones:
                ckpt = train_classifier(
                    ref, backbone, args.seed, epochs=args.epochs, device=args.device, progress=False
                )
                side = read_sidecar(ckpt.path)
                t = time.perf_counter()
                ingest_logits(compute_logits(ckpt, db=db, device=args.device))
                extract_s = time.perf_counter() - t
                with duckdb.connect(str(db), read_only=True) as con:
                    rows = con.execute(
                        "SELECT split, role, shift_family, true_accuracy FROM splits "
                        "WHERE run_key = ?",
                        [ckpt.run_key],
                    ).fetchall()
                acc = {split: a for split, _, _, a in rows}
                families: dict[str, list[float]] = {}
                for _, role, fam, a in rows:
                    if role == "target" and fam != "clean":
                        families.setdefault(fam, []).append(a)
                fam_text = "  ".join(
                    f"{fam} {sum(v) / len(v):.3f} [{min(v):.3f}, {max(v):.3f}]"
                    for fam, v in sorted(families.items())
                )
                print(
                    f"{ckpt.run_key:24s} {read_checkpoint_epochs(ckpt.path):2d} "
                    f"{side['train_seconds']:7.1f} {extract_s:6.1f} {acc['val']:6.3f} "
                    f"{acc['clean']:6.3f}  {fam_text}",
                    flush=True,
                )
                shown += [(ckpt.run_key, s, acc[s]) for s in SHOWN_SPLITS if s in acc]
        print()
        print("selected shifted splits (true accuracy):")
        for run, split, a in shown:
            print(f"  {run:24s} {split:22s} {a:.3f}")
        print(f"# done; {_load()}")
    finally:
        if not args.home and not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    return 0


def read_checkpoint_epochs(path: str) -> int:
    """Number of epochs recorded in a checkpoint's metadata."""
    from tasks.runtime.checkpoints import load_checkpoint

    return int(load_checkpoint(path)[1]["epochs"])


if __name__ == "__main__":
    raise SystemExit(main())
