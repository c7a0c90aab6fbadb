"""What a one-method edit costs: ``alsa-bench run`` again after a comment is added to one module.

Runs the real command line of a source tree (``python -m flows.cli run ARGS`` with the tree as
working directory, so this measures any commit: export one with ``git archive``) in a state
folder of its own, in phases, and prints the wall time and the stage counts of each:

* ``cold``: the first run (skipped with ``--skip-cold`` when the folder is already filled);
* ``warm``: the same run again, every stage cached;
* ``edited``: a comment line appended to ``--edit`` (a method's module), then the run again:
  what re-runs is what the cache keys of that tree say depends on the module;
* the module's bytes are then restored (a later run is cached again).

Example (the figures of docs/PERFORMANCE.md, "One method at a time")::

    git archive 8ca7204 | tar -x -C /tmp/before
    python benchmarks/bench_method_edit.py --tree /tmp/before --state /tmp/state-before \\
        --edit estimators/methods/cot.py -- --seeds 1
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def run_cli(tree: Path, state: Path, args: list[str]) -> tuple[float, list[str], int]:
    """Run ``alsa-bench run ARGS`` of ``tree`` on ``state``; wall seconds, summary lines, exit."""
    env = {**os.environ, "ALSA_BENCH_HOME": str(state), "PYTHONPATH": str(tree),
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    env.pop("ALSA_BENCH_RESULTS", None)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "flows.cli", "run", *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if re.match(r"Suite \S+ finished", line)]
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
    return seconds, lines, proc.returncode


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, required=True, help="source tree to run")
    parser.add_argument("--state", type=Path, required=True, help="its state folder")
    parser.add_argument("--edit", required=True, help="module to edit, relative to the tree")
    parser.add_argument("--skip-cold", action="store_true", help="the folder is filled already")
    parser.add_argument("run_args", nargs="*", help="arguments of `alsa-bench run`")
    args = parser.parse_args(argv)
    tree, state = args.tree.resolve(), args.state.resolve()
    module = tree / args.edit
    if not module.is_file():
        parser.error(f"--edit must name a file of the tree; {module} is not one")
    phases = ([] if args.skip_cold else ["cold"]) + ["warm", "edited"]
    original = module.read_bytes()
    try:
        for phase in phases:
            if phase == "edited":
                module.write_bytes(original + f"\n# edited at {time.time()}\n".encode())
            seconds, lines, code = run_cli(tree, state, args.run_args)
            print(f"{phase:7s} {seconds:8.1f} s  exit {code}")
            for line in lines:
                print(f"        {line}")
            sys.stdout.flush()
            if code != 0:
                return code
    finally:
        module.write_bytes(original)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
