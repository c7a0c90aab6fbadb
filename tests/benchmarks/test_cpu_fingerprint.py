"""``benchmarks/cpu_fingerprint.py``: the comparison of two machines' records.

Recording runs the training workloads (about a minute on 2 cores: a benchmark, recorded in
docs/PERFORMANCE.md); these tests cover the comparison and its verdicts on hand-made records.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from benchmarks import cpu_fingerprint as fp


def _record(vendor: str = "AuthenticAMD") -> dict:
    cpu = fp.cpu_description(f"vendor_id\t: {vendor}\nmodel name\t: CPU\nflags\t\t: avx2 fma\n",
                             lscpu="L2 cache: 2 MiB\n")
    runs = {w: {"weights": f"w-{w}", "outputs": f"o-{w}", "capability": "AVX2", "seconds": 1.0}
            for w in ("mlp", "sage")}
    mode = {"workloads": runs, "estimates": {"alsa-g|s0": 0.8, "alsa-e|s0": 0.7},
            "fit_capability": "AVX2", "operations": {"exp  (ATen, Sleef)": "abc"}}
    return {"format": fp.FORMAT, "cpu": cpu, "versions": {"python": "3.11", "torch": "2.11.0"},
            "modes": {"pinned": mode, "host": copy.deepcopy(mode)}}


def test_identical_records_are_the_same_bits() -> None:
    lines, verdict = fp.compare(_record(), _record("GenuineIntel"))
    # per mode: 2 workloads, 2 methods' estimates, the operations
    assert verdict == ("same bits: all 5 results of the reproducible mode compared are identical "
                       "on both CPUs; the host mode (--fast) differs in 0 of 5")
    b = _record("GenuineIntel")
    del b["modes"]["host"]
    b["note"] = "a note"
    lines, verdict = fp.compare(_record(), b)
    assert verdict.endswith("the host mode was not recorded on both")
    assert "note on B: a note" in lines
    assert any("GenuineIntel" in line for line in lines)


def test_each_differing_result_is_named() -> None:
    a, b = _record(), _record("GenuineIntel")
    b["modes"]["pinned"]["workloads"]["sage"]["weights"] = "other"
    b["modes"]["pinned"]["estimates"]["alsa-e|s0"] = 0.7 + 2.5e-5
    b["modes"]["host"]["operations"]["exp  (ATen, Sleef)"] = "def"
    lines, verdict = fp.compare(a, b)
    assert verdict == "the reproducible mode differs between these CPUs in: sage, alsa-e"
    assert any("alsa-e estimates: 0 of 1 identical, largest |difference| 2.5e-05" in line
               for line in lines)
    assert any("differ: exp" in line for line in lines)  # the host mode's, reported only


def test_other_software_makes_the_records_incomparable() -> None:
    b = _record()
    b["versions"]["torch"] = "2.14.1"
    _, verdict = fp.compare(_record(), b)
    assert verdict.startswith("not comparable") and "torch 2.11.0 vs 2.14.1" in verdict


def test_a_file_of_another_kind_is_refused(tmp_path: Path, capsys) -> None:
    with pytest.raises(ValueError, match="the second record must be a file written by"):
        fp.compare(_record(), {"rows": []})
    good, bad = tmp_path / "a.json", tmp_path / "b.json"
    good.write_text(json.dumps(_record()))
    bad.write_text(json.dumps({"format": 99}))
    with pytest.raises(SystemExit):
        fp.main(["--compare", str(good), str(bad)])
    assert "the second record must be a file written by" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        fp.main(["--compare", str(good), str(tmp_path / "missing.json")])
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        fp.main(["--out", str(tmp_path), "--modes", "turbo"])
    assert "--modes must name pinned and/or host" in capsys.readouterr().err


def test_traces_part_at_the_first_differing_operation() -> None:
    rows = [["aten.mul.Tensor", "i0", "o0"], ["aten.sqrt.default", "i1", "o1"],
            ["aten.add.Tensor", "i2", "o2"]]
    a = {"trace": "mlp", "rows": rows}
    b = {"trace": "mlp", "rows": [rows[0], ["aten.sqrt.default", "i1", "xx"], rows[2]]}
    lines = fp.compare_traces(a, b)
    assert lines[1].startswith("#1: first differing output: aten.sqrt.default; its inputs are "
                               "identical")
    b["rows"][1] = ["aten.sqrt.default", "changed", "xx"]
    assert "its inputs already differ" in fp.compare_traces(a, b)[1]
    assert fp.compare_traces(a, a)[-1] == "no operation differs in the traced part"
    with pytest.raises(ValueError, match="both traces must follow one workload"):
        fp.compare_traces(a, {"trace": "alsa", "rows": []})


def test_primitives_are_compared_kernel_by_kernel(tmp_path: Path, capsys) -> None:
    from benchmarks import cpu_primitives as prim

    a = {"sqrt float32, 8 values, 1 thread": "aa", "exp, 1 thread": "bb"}
    b = {"sqrt float32, 8 values, 1 thread": "zz", "exp, 1 thread": "bb"}
    assert prim.compare(a, b) == ["DIFFERS sqrt float32, 8 values, 1 thread",
                                  "same    exp, 1 thread", "1 of 2 kernels differ"]
    with pytest.raises(ValueError, match="the two records share no kernel"):
        prim.compare(a, {"rows": 1})
    with pytest.raises(SystemExit):
        prim.main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert "missing:" in capsys.readouterr().err


def test_identical_results_under_other_software_are_said_so() -> None:
    b = _record("GenuineIntel")
    b["versions"]["torch"] = "2.14.1"
    _, verdict = fp.compare(_record(), b)
    assert verdict.startswith("not comparable: the software differs (torch 2.11.0 vs 2.14.1)")
    assert verdict.endswith("all 5 results of the reproducible mode compared are identical all "
                            "the same")
    b["modes"]["pinned"]["workloads"]["mlp"]["outputs"] = "other"
    _, verdict = fp.compare(_record(), b)
    assert "identical all the same" not in verdict


def test_two_records_of_one_cpu_model_are_not_called_two_cpus() -> None:
    _, verdict = fp.compare(_record(), _record())
    assert verdict.startswith("same bits: all 5 results of the reproducible mode compared are "
                              "identical in both records (one CPU model: run it on another CPU")


def test_a_library_one_record_does_not_list_does_not_block_the_comparison() -> None:
    """Records made before the tabular and text workloads list no scikit-learn or transformers:
    the libraries both records list are compared, the rest cannot have computed both."""
    b = _record("GenuineIntel")
    b["versions"]["sklearn"] = "1.9.1"
    _, verdict = fp.compare(_record(), b)
    assert verdict.startswith("same bits")


def test_a_workload_whose_files_are_missing_is_recorded_as_such(monkeypatch) -> None:
    calls: list[str] = []

    class _Bench:
        @staticmethod
        def _run(workload: str, mode: str, steps: int) -> dict:
            calls.append(workload)
            return {"weights": "w", "outputs": "o", "capability": "AVX2", "train_s": 1.0,
                    "predict_s": 0.5}

    monkeypatch.setattr(fp, "_load", lambda name: _Bench)
    monkeypatch.setattr(fp, "_alsa_worker", lambda part, pinned: {"alsa-g|s0": 0.8})
    monkeypatch.setattr(fp, "_installed", lambda workload: workload != "minilm")
    monkeypatch.setattr(fp, "_versions", lambda: {"python": "3.11", "torch": "2.14.1"})
    rec = fp.record(("mlp", "minilm"), steps=3, modes=("pinned",))
    assert calls == ["mlp"]
    assert rec["not_recorded"] == {"minilm": "its files are not installed"}
    assert list(rec["modes"]["pinned"]["workloads"]) == ["mlp"]
    assert rec["modes"]["pinned"]["workloads"]["mlp"]["seconds"] == 1.5


def test_the_tabular_workload_is_repeatable_and_depends_on_its_training() -> None:
    """The tabular workload (three backbones through the tabular adapter) gives one digest per
    computation, so a record's digest names what this CPU computed; a different amount of
    training gives another."""
    from threadpoolctl import threadpool_limits

    bench = fp._load("bench_reproducible")
    with threadpool_limits(1):
        first, again = bench._tabular(rows=600, epochs=2), bench._tabular(rows=600, epochs=2)
        longer = bench._tabular(rows=600, epochs=3)
    assert (first["weights"], first["outputs"]) == (again["weights"], again["outputs"])
    assert first["outputs"] != longer["outputs"]  # the MLP's third epoch moves its logits
    assert first["weights"] != longer["weights"]


def test_the_shipped_records_compare_and_the_reference_uses_the_pipelines_torch() -> None:
    """Every record in docs/reproducible/ is one `--compare` reads; `make cpu-check`'s reference
    exists and was made with the torch the Makefile installs (else it could only say "not
    comparable" on every machine)."""
    import re

    root = Path(fp.ROOT)
    makefile = (root / "Makefile").read_text()
    reference = re.search(r"^CPU_REFERENCE \?= (\S+)$", makefile, re.M)
    torch_pin = re.search(r"torch==(\S+)", makefile)
    assert reference and torch_pin
    ref = json.loads((root / reference.group(1)).read_text())
    assert ref["versions"]["torch"].split("+")[0] == torch_pin.group(1)
    assert {"mlp", "lenet", "resnet", "gcn", "sage", "gat", "tabular", "minilm", "alsa",
            "aline"} <= set(ref["modes"]["pinned"]["workloads"])
    records = sorted(p for p in (root / "docs" / "reproducible").glob("*.json")
                     if not p.name.endswith(".primitives.json"))
    assert len(records) >= 5
    for path in records:
        lines, verdict = fp.compare(ref, json.loads(path.read_text()))
        assert verdict and lines[0].startswith("A: AMD EPYC")
