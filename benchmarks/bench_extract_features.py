"""Extract cost of the penultimate features: compute_logits with and without them, one run.

    PYTHONPATH=. python benchmarks/bench_extract_features.py RUN_KEY   # e.g. fmnist.mlp.s0

Reads the checkpoint from .alsa-bench/checkpoints/ (run make bench first); writes into temporary
folders only. Prints wall time and result-file bytes, twice each way.
"""

import time, sys, tempfile, shutil
from pathlib import Path
from storage.hashing import file_sha256
from tasks.runtime.refs import CheckpointRef
from tasks.stages.extract import compute_logits
from tasks.runtime.threads import pinned_threads
run = sys.argv[1]; dataset, backbone, s = run.split(".")
path = Path(f".alsa-bench/checkpoints/{run}.pt")
ref = CheckpointRef(run_key=run, dataset=dataset, backbone=backbone, seed=int(s[1:]), path=str(path), sha256=file_sha256(path))
suite = {"fmnist": "fmnist", "fmnist-binary": "fmnist", "fmnist-coarse": "fmnist", "arxiv-sim": "graph"}.get(dataset, "text")
for features in (False, True, False, True):
    out = tempfile.mkdtemp()
    t = time.perf_counter()
    with pinned_threads(1):
        compute_logits(ref, suite=suite, db=Path(out) / "x.duckdb", device="cpu", results=out, features=features)
    dt = time.perf_counter() - t
    size = sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
    print(run, "features" if features else "logits only", f"{dt:.1f} s", f"{size/1e6:.1f} MB")
    shutil.rmtree(out)
