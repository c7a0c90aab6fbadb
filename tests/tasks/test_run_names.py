"""``tasks.report.run_names``: every run named, compactly, and read back by an independent
expansion of the notation (``dataset.{a,b}.s0-2,5``)."""

from __future__ import annotations

import re

from tasks.report.run_names import run_names


def _expand(names: str) -> list[str]:
    """The run keys that ``run_names`` names: an independent reading of its notation."""
    keys = []
    for name in re.split(r", (?![^{]*})", names):
        m = re.fullmatch(r"(.+)\.(\{[^}]+\}|[^.{}]+)\.s([\d,-]+)", name)
        if m is None:
            keys.append(name)
            continue
        backbones = m[2].strip("{}").split(",")
        seeds = []
        for part in m[3].split(","):
            a, _, b = part.partition("-")
            seeds += range(int(a), int(b or a) + 1)
        keys += [f"{m[1]}.{bb}.s{seed}" for bb in backbones for seed in seeds]
    return sorted(keys)


def test_run_names_name_every_run_of_a_whole_bench_in_a_few_names() -> None:
    runs = {"fmnist-coarse": ["lenet", "mlp", "resnet"], "fmnist": ["lenet", "mlp", "resnet"],
            "fmnist-binary": ["lenet", "mlp", "resnet"], "arxiv-sim": ["gat", "gcn", "gin", "sage"],
            "rt-reviews": ["bow-linear", "minilm-ft", "minilm-mlp"],
            "sotu-party": ["bow-linear", "minilm-mlp"], "arrests": ["tab-hgb", "tab-logreg",
                                                                   "tab-mlp"],
            "chile-vote": ["tab-hgb", "tab-logreg", "tab-mlp"]}
    keys = [f"{d}.{b}.s{s}" for d, bs in runs.items() for b in bs for s in range(3)]
    assert len(keys) == 72  # make bench's runs
    names = run_names(keys[::-1])  # any order
    assert _expand(names) == sorted(keys)  # every run, none more
    assert names.startswith("arrests.{tab-hgb,tab-logreg,tab-mlp}.s0-2, arxiv-sim.{gat,gcn,")
    assert names.count(".s0-2") == 8  # one name per dataset
    assert len(names) < len(", ".join(keys)) / 4  # 324 characters for 1,585


def test_run_names_keep_gaps_separate_seed_sets_and_odd_keys() -> None:
    keys = ["d.a.s0", "d.a.s2", "d.a.s3", "d.a.s5", "d.b.s1", "d.c.s0", "d.c.s2", "d.c.s3",
            "d.c.s5", "x.y.z.mlp.s4", "odd-key", "d.a.s0"]
    names = run_names(keys)
    assert names == "d.{a,c}.s0,2-3,5, d.b.s1, x.y.z.mlp.s4, odd-key"
    assert _expand(names) == sorted(set(keys))
    assert run_names([]) == ""
