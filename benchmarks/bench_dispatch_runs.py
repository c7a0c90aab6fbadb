"""Evidence across CPUs on one machine: the same pipeline run under different kernel preferences,
in the reproducible mode and in the fast mode, compared bit for bit.

A machine cannot become another CPU, but it can *prefer* other kernels: ``ATEN_CPU_CAPABILITY``
(``default``, ``avx2``, ``avx512``), ``ONEDNN_MAX_CPU_ISA`` lowered or raised, ``MKL_CBWR``,
``OPENBLAS_CORETYPE``, set in the environment before the command starts, are what another CPU
would pick on its own. Each configuration runs ``python -m flows.cli run ARGS`` in a fresh state
folder (``--root``/<name>), one after the other (never two trainings at once), and the table
compares every run with the first one:

* ``checkpoint``: the SHA-256 of each trained checkpoint (``runs.checkpoint_sha256``): ``same``
  when every run's checkpoint equals the first configuration's;
* ``logits``: logit rows that differ (of all rows joined on run, split and sample);
* ``estimates``: estimates that differ, and the largest absolute difference (as
  ``benchmarks/compare_databases.py`` counts them);
* ``train s`` / ``extract s``: the stage times the pipeline logged (``Completed in``), summed
  over the runs, and the wall time of the whole command.

A second table (``--by-backbone``) gives the cost of each configuration per backbone against
the first: the train stage's own compute time (``runs.train_seconds``, from data loading to the
last epoch) and the extract stage's (its log line ``logits of N splits ... computed in X s``),
summed over each backbone's runs. Unlike ``Completed in``, which counts from the moment a stage
was submitted, these leave out the time a task waited for a worker.

The reproducible configurations must all be identical to each other whatever the preference;
the fast ones show the drift each preference causes. Timings come from a shared machine: see the
load average printed with them.

    nice -n 10 python benchmarks/bench_dispatch_runs.py --root /tmp/dispatch
    nice -n 10 python benchmarks/bench_dispatch_runs.py --root /tmp/dispatch --reuse \\
        --configs pinned,fast/prefers-default     # adds a configuration, keeps the runs done
    nice -n 10 python benchmarks/bench_dispatch_runs.py --root /tmp/d --configs pinned,fast \\
        -- --suite fmnist --dataset fmnist-coarse --backbone lenet --seeds 1
    python benchmarks/bench_dispatch_runs.py --root /tmp/mode-cost --configs pinned,fast \\
        --by-backbone -- --seeds 3      # what the reproducible mode costs in `make bench`
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ARGS = ["--suite", "fmnist", "--dataset", "fmnist-coarse", "--backbone", "lenet",
                "--seeds", "1", "--no-artifacts"]
_KNOBS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR", "MKL_DYNAMIC",
          "MKL_ENABLE_INSTRUCTIONS",
          "OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", "ALSA_BENCH_TEXT_PRECISION",
          "ALSA_BENCH_REPRODUCIBLE", "ALSA_BENCH_PINNED_VARS", "CUBLAS_WORKSPACE_CONFIG")


def _numpy_above_avx2() -> str:
    """numpy's SIMD targets above AVX2 on this machine (what the reproducible mode turns off)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tasks.runtime.reproducible import pinned_environment

    return pinned_environment()["NPY_DISABLE_CPU_FEATURES"]


#: name -> (the host's preference: environment before the command starts, extra CLI flags)
CONFIGS: dict[str, tuple[dict[str, str], list[str]]] = {
    "pinned": ({}, []),
    "pinned/prefers-default": ({"ATEN_CPU_CAPABILITY": "default",
                                "ONEDNN_MAX_CPU_ISA": "SSE41"}, []),
    "pinned/prefers-avx512": ({"ATEN_CPU_CAPABILITY": "avx512",
                               "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, []),
    "pinned/prefers-other-blas": ({"MKL_CBWR": "AUTO", "OPENBLAS_CORETYPE": "SkylakeX",
                                   "ONEDNN_MAX_CPU_ISA": "AVX2"}, []),
    "pinned/dask-worker": ({"ATEN_CPU_CAPABILITY": "default"}, ["--workers", "1"]),
    "fast": ({}, ["--fast"]),
    "fast/prefers-default": ({"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41"},
                             ["--fast"]),
    "fast/prefers-avx2": ({"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
                          ["--fast"]),
    # the fast mode as a CPU with AVX2 and no AVX-512 runs it (bench_reproducible.py's
    # host-avx2): every library's own kernels at that ISA, the text encoder in float32 (no
    # AVX512-BF16); the reproducible mode's cost against it is the pins' own, not the ISA's
    "fast/as-avx2-cpu": ({"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                          "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
                          "NPY_DISABLE_CPU_FEATURES": _numpy_above_avx2(),
                          "ALSA_BENCH_TEXT_PRECISION": "fp32"}, ["--fast"]),
}


def _run(name: str, home: Path, args: list[str]) -> dict[str, Any]:
    env_vars, flags = CONFIGS[name.split(" #")[0]]
    env = {k: v for k, v in os.environ.items() if k not in _KNOBS}
    env.update(env_vars)
    env["ALSA_BENCH_HOME"] = str(home)
    # the stages' own INFO lines (the extract stage's compute time, read by stage_costs), as the
    # deployments in prefect.yaml log them
    env.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "tasks,storage")
    env.pop("ALSA_BENCH_RESULTS", None)
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flows.cli", "run", *args, *flags], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    (home / "run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{name!r} failed (log: {home / 'run.log'}):\n{done.stderr[-2000:]}")
    return _times(home, wall)


def _times(home: Path, wall: float | None = None) -> dict[str, Any]:
    """The stage times of a run's log (and its wall time, kept in ``times.json``)."""
    log = (home / "run.log").read_text()
    record = home / "times.json"
    if wall is None:
        wall = json.loads(record.read_text())["wall"] if record.is_file() else float("nan")
    else:
        record.write_text(json.dumps({"wall": wall}))
    stage: dict[str, float] = {}
    for st, seconds in re.findall(r" - (train|extract|estimate)\s+\S+\s+Completed in ([\d.]+) s",
                                  log):
        stage[st] = stage.get(st, 0.0) + float(seconds)
    return {"wall": wall, **stage}


_EXTRACT_LINE = re.compile(r"(\S+): logits of \d+ splits \(\d+ rows\) computed in ([\d.]+) s")


def stage_costs(home: Path) -> dict[str, dict[str, float]]:
    """Compute seconds per backbone of one state folder: ``{backbone: {"runs", "train",
    "extract"}}``.

    ``train`` sums ``runs.train_seconds`` of the backbone's runs (``nan`` where a run has none);
    ``extract`` sums the extract stage's ``computed in`` seconds that ``run.log`` records for
    them (a run key logged twice, a healed rerun, counts its last line).
    """
    import duckdb

    con = duckdb.connect(str(home / "bench.duckdb"), read_only=True)
    rows = con.sql("SELECT run_key, suite, backbone, train_seconds FROM runs").fetchall()
    con.close()
    log = (home / "run.log").read_text() if (home / "run.log").is_file() else ""
    extract = {key: float(sec) for key, sec in _EXTRACT_LINE.findall(log)}
    costs: dict[str, dict[str, float]] = {}
    for run_key, suite, backbone, train in rows:
        c = costs.setdefault(f"{suite}/{backbone}", {"runs": 0, "train": 0.0, "extract": 0.0})
        c["runs"] += 1
        c["train"] += float("nan") if train is None else float(train)
        c["extract"] += extract.get(run_key, float("nan"))
    return dict(sorted(costs.items()))


def cost_table(costs: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """Lines of the per-backbone table: each configuration's train and extract seconds and
    their ratio to the first configuration's, then the totals (their ratio over the backbones
    that the first configuration ran too)."""
    names = list(costs)
    first = costs[names[0]]
    lines = [f"{'configuration':28} {'backbone':26} {'runs':>4} {'train s':>8} {'x first':>7} "
             f"{'extract s':>9} {'x first':>7}"]

    def ratio(a: float, b: float) -> str:
        return f"{a / b:6.2f}x" if b > 0 else f"{'-':>7}"

    for name in names:
        total = {"runs": 0, "train": 0.0, "extract": 0.0}
        both = {"train": [0.0, 0.0], "extract": [0.0, 0.0]}  # backbones the first one ran too
        for backbone, c in costs[name].items():
            ref = first.get(backbone)
            lines.append(f"{name:28} {backbone:26} {c['runs']:>4} {c['train']:8.1f} "
                         f"{ratio(c['train'], ref['train']) if ref else '-':>7} "
                         f"{c['extract']:9.1f} "
                         f"{ratio(c['extract'], ref['extract']) if ref else '-':>7}")
            for k in total:
                total[k] += c[k]
            if ref:
                for k in both:
                    both[k][0] += c[k]
                    both[k][1] += ref[k]
        lines.append(f"{name:28} {'(all)':26} {total['runs']:>4} {total['train']:8.1f} "
                     f"{ratio(*both['train']):>7} {total['extract']:9.1f} "
                     f"{ratio(*both['extract']):>7}")
    return lines


def _compare(db: Path, first: Path) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    con.execute(f"ATTACH '{str(first).replace(chr(39), chr(39) * 2)}' AS b (READ_ONLY)")
    ckpt = con.sql("SELECT count(*), sum(CASE WHEN n.checkpoint_sha256 = o.checkpoint_sha256 "
                   "THEN 0 ELSE 1 END) FROM runs n JOIN b.runs o USING (run_key)").fetchall()[0]
    logits = con.sql("SELECT count(*), sum(CASE WHEN n.logits = o.logits THEN 0 ELSE 1 END) "
                     "FROM logits n JOIN b.logits o USING (run_key, split, sample_index)"
                     ).fetchall()[0]
    est = con.sql(
        "SELECT count(*), sum(CASE WHEN n.estimated_accuracy IS NOT DISTINCT FROM "
        "o.estimated_accuracy THEN 0 ELSE 1 END), max(abs(n.estimated_accuracy - "
        "o.estimated_accuracy)), sum(CASE WHEN n.true_accuracy = o.true_accuracy THEN 0 ELSE 1 "
        "END) FROM estimates n JOIN b.estimates o USING (run_key, split, method)").fetchall()[0]
    shas = [r[0] for r in con.sql("SELECT checkpoint_sha256 FROM runs ORDER BY run_key"
                                  ).fetchall()]
    con.close()
    return {"runs": ckpt[0], "ckpt_differ": ckpt[1] or 0, "logit_rows": logits[0],
            "logits_differ": logits[1] or 0, "estimates": est[0], "est_differ": est[1] or 0,
            "est_max": est[2] or 0.0, "truth_differ": est[3] or 0, "shas": shas}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True, help="parent of the state folders")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help="configurations, comma-separated, the first is the reference: "
                        + ", ".join(CONFIGS))
    parser.add_argument("--no-run", action="store_true",
                        help="compare the state folders an earlier call left under --root")
    parser.add_argument("--reuse", action="store_true",
                        help="do not run again a configuration whose state folder under --root "
                        "holds a completed run of an earlier call (same position, name and run "
                        "arguments)")
    parser.add_argument("--by-backbone", action="store_true",
                        help="also print each configuration's train and extract compute seconds "
                        "per backbone, and their ratio to the first configuration's")
    parser.add_argument("run_args", nargs="*", help="after --: arguments of `alsa-bench run`")
    args = parser.parse_args()
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in names if c not in CONFIGS]
    if bad:
        parser.error(f"--configs must name configurations of {list(CONFIGS)}; got {bad}.")
    run_args = args.run_args or DEFAULT_ARGS
    print(f"# alsa-bench run {' '.join(run_args)}; load average {os.getloadavg()[0]:.2f} at "
          f"start; {os.cpu_count()} CPUs (shared machine)")
    results: dict[str, tuple[Path, dict[str, Any]]] = {}
    for i, name in enumerate(names):  # a name given twice runs twice (interleaved timings)
        label = name if name not in results else f"{name} #{i}"
        home = args.root / f"{i}-{re.sub(r'[^A-Za-z0-9]+', '-', name)}"
        done = (home / "times.json").is_file() and (home / "bench.duckdb").is_file()
        times = _times(home) if args.no_run or (args.reuse and done) \
            else _run(name, home, run_args)
        results[label] = (home, times)
        print(f"# ran {label!r} in {times['wall']:.0f} s (load {os.getloadavg()[0]:.2f})",
              flush=True)
    names = list(results)
    first = results[names[0]][0] / "bench.duckdb"
    print(f"{'configuration':28} {'checkpoint':>11} {'logits differ':>14} {'estimates differ':>17} "
          f"{'max |diff|':>10} {'truth differ':>12} {'train s':>8} {'extract s':>9} {'wall s':>7}")
    for name in names:
        home, t = results[name]
        c = _compare(home / "bench.duckdb", first)
        ckpt = "same" if c["ckpt_differ"] == 0 else f"{c['ckpt_differ']}/{c['runs']} differ"
        print(f"{name:28} {ckpt:>11} {c['logits_differ']:>6}/{c['logit_rows']:<7} "
              f"{c['est_differ']:>8}/{c['estimates']:<8} {c['est_max']:10.2e} "
              f"{c['truth_differ']:>12} {t.get('train', 0):8.1f} {t.get('extract', 0):9.1f} "
              f"{t['wall']:7.0f}")
    for name in names:
        shas = _compare(results[name][0] / "bench.duckdb", first)["shas"]
        print(f"# {name}: checkpoint sha256 {', '.join(s[:16] for s in shas)}")
    if args.by_backbone:
        print("\n".join(cost_table({name: stage_costs(results[name][0]) for name in names})))


if __name__ == "__main__":
    main()
