"""Run keys named compactly, so that ``report --compare`` names every run that differs on one
screen: ``fmnist.{lenet,mlp,resnet}.s0-2`` for the nine runs of three backbones and three seeds.

Used by :mod:`tasks.report.compare`; the keys are those of
:func:`tasks.runtime.checkpoints.run_key` (``"{dataset}.{backbone}.s{seed}"``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

__all__ = ["run_names"]

#: ``dataset.backbone.sSEED``: a dataset may hold dots, a backbone does not.
_RUN_KEY: Final = re.compile(r"^(?P<dataset>.+)\.(?P<backbone>[^.]+)\.s(?P<seed>\d+)$")


def _seed_ranges(seeds: Sequence[int]) -> str:
    """``s0-2`` for seeds 0, 1 and 2; ``s0,2`` for 0 and 2; ``s0-2,5`` for 0, 1, 2 and 5."""
    ordered = sorted(set(seeds))
    spans: list[tuple[int, int]] = []
    for seed in ordered:
        if spans and seed == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], seed)
        else:
            spans.append((seed, seed))
    return "s" + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def run_names(keys: Sequence[str]) -> str:
    """Every run of ``keys``, named compactly enough for a screen.

    Runs ``dataset.backbone.sSEED`` are grouped by dataset, then by backbone: a backbone's
    seeds become ranges (``fmnist-coarse.lenet.s0-2``), and the backbones of one dataset that
    share their seeds go in braces (``fmnist-coarse.{lenet,resnet}.s0-2``, as a shell expands
    it). A key of another shape is listed as it is. The 72 runs of ``make bench`` take 8 names.

    Parameters
    ----------
    keys : sequence of str
        Run keys, in any order (repeats count once).

    Returns
    -------
    str
        The names, comma-separated, datasets in the order they first appear in the sorted keys.
    """
    by_dataset: dict[str, dict[str, list[int]]] = {}
    others: list[str] = []
    for key in sorted(set(keys)):
        match = _RUN_KEY.match(key)
        if match is None:
            others.append(key)
            continue
        by_dataset.setdefault(match["dataset"], {}).setdefault(
            match["backbone"], []).append(int(match["seed"]))
    names: list[str] = []
    for dataset, backbones in by_dataset.items():
        by_seeds: dict[str, list[str]] = {}
        for backbone, seeds in backbones.items():
            by_seeds.setdefault(_seed_ranges(seeds), []).append(backbone)
        for seeds, group in by_seeds.items():
            shown = group[0] if len(group) == 1 else "{" + ",".join(group) + "}"
            names.append(f"{dataset}.{shown}.{seeds}")
    return ", ".join(names + others)
