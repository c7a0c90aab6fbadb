"""Which of torch's elementwise and reduction kernels give other bits on another CPU.

Run on two machines in the reproducible mode (applied here before torch is imported) and
compare: each line is one kernel on fixed inputs drawn by numpy, at 1 and 2 threads, and its
output's digest. This is how ``torch.sqrt`` was found to be the one that differs between an
AMD EPYC (Zen 5) and an Intel Xeon (family 6, model 207), float32 and float64 alike, while
``exp``, ``log``, ``tanh``, ``erf``, ``sigmoid``, ``rsqrt`` and the row norms do not
(``docs/PERFORMANCE.md``, "Evidence across real CPUs"). ``torch.sqrt`` goes through MKL's
vector maths, whose code path depends on the CPU; the optimisers' fused step computes its root
with the square-root instruction, and so do ``np.sqrt`` and ``estimators.maths.exact``.

    python benchmarks/cpu_primitives.py --out this-cpu.json
    python benchmarks/cpu_primitives.py --compare A.json B.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
UNARY = ("sqrt", "rsqrt", "exp", "log", "tanh", "erf", "sigmoid", "reciprocal", "log1p",
         "expm1", "sin")


def record() -> dict[str, str]:
    """kernel -> digest of its output, in the reproducible mode, at 1 and 2 threads."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tasks.runtime.reproducible import apply_environment

    apply_environment(True)
    import numpy as np
    import torch

    from estimators.maths.exact import exact_sqrt
    from tasks.models.optim import adam
    from tasks.runtime.reproducible import deterministic_torch
    from tasks.runtime.threads import pinned_threads

    def digest(t: Any) -> str:
        return hashlib.sha256(np.ascontiguousarray(t.detach().numpy()).tobytes()).hexdigest()[:10]

    out: dict[str, str] = {}
    for threads in (1, 2):
        rng = np.random.default_rng(0)
        x = torch.from_numpy(rng.random(200000, dtype=np.float32) * 1e-3)
        with pinned_threads(threads), deterministic_torch(products=True):
            tag = f"{threads} thread{'s' if threads > 1 else ''}"
            for n in (8, 4096, 200000):
                out[f"sqrt float32, {n} values, {tag}"] = digest(torch.sqrt(x[:n]))
            out[f"sqrt float64, {tag}"] = digest(torch.sqrt(x.double()))
            out[f"exact_sqrt float32, {tag}"] = digest(exact_sqrt(x))
            out[f"exact_sqrt float64, {tag}"] = digest(exact_sqrt(x.double()))
            for name in UNARY[1:]:
                out[f"{name}, {tag}"] = digest(getattr(torch, name)(x))
            for n in (1000, 3333, 20000):
                a = torch.from_numpy(rng.standard_normal((n, 11)).astype(np.float32))
                out[f"row norms {n} x 11, {tag}"] = digest(a.norm(dim=1, keepdim=True))
            for fused in (False, True):
                p = torch.nn.Parameter(torch.from_numpy(rng.standard_normal(10000)
                                                        .astype(np.float32)))
                opt = (adam([p], lr=1e-3, decoupled=True) if fused
                       else torch.optim.AdamW([p], lr=1e-3, fused=False))
                for _ in range(3):
                    p.grad = torch.from_numpy(rng.standard_normal(10000).astype(np.float32))
                    opt.step()
                out[f"AdamW 3 steps, {'fused' if fused else 'for-loop'}, {tag}"] = digest(p)
    return out


def compare(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """One line per kernel, ``same`` or ``DIFFERS``, then a count.

    Raises
    ------
    ValueError
        If the two records share no kernel (not files of this script).
    """
    keys = [k for k in a if k in b]
    if not keys:
        raise ValueError("the two records share no kernel: both must be written by "
                         f"`cpu_primitives.py --out`; got keys {sorted(a)[:3]} and "
                         f"{sorted(b)[:3]}.")
    lines = [f"{'same   ' if a[k] == b[k] else 'DIFFERS'} {k}" for k in keys]
    differ = sum(a[k] != b[k] for k in keys)
    return lines + [f"{differ} of {len(keys)} kernels differ"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="write this machine's digests to this file")
    group.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = parser.parse_args(argv)
    if args.compare:
        missing = [str(p) for p in args.compare if not p.is_file()]
        if missing:
            parser.error(f"--compare takes two files written by --out; missing: {missing}.")
        try:
            print("\n".join(compare(*(json.loads(p.read_text()) for p in args.compare))))
        except ValueError as err:
            parser.error(str(err))
        return 0
    if args.out.is_dir():
        parser.error(f"--out must be a file path; {str(args.out)!r} is a folder.")
    args.out.write_text(json.dumps(record(), indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
