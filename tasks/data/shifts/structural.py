"""Graph ``clean`` and ``structural`` shifts: the held-out year, intact and perturbed.

Both start from the *base split*: the papers of the held-out year 2011
(:data:`tasks.data.temporal.PROTOCOL`) on the 2011 snapshot. It sits between the training
years (<= 2010) and the validation years (2012-2014) and was used by neither, so it is the
closest thing to in-distribution test data a temporal graph has, and the perturbations below
measure their own effect rather than time's.

===================  ===========================================================  ==============
split                perturbation (severity 1 ... 5)                              parameter
===================  ===========================================================  ==============
``clean``            none: the base split                                         --
``edge_drop-<s>``    remove each citation edge of the snapshot independently      p = 0.15, 0.3,
                     with probability p (all nodes keep their features)           0.5, 0.7, 0.9
``feature_noise-<s>``  add Gaussian noise to every node's features, per feature   sigma = 0.25,
                     scaled by that feature's standard deviation in the snapshot   0.5, 0.75, 1,
                                                                                  1.5
``class_prior-<s>``  re-draw the base nodes with Dirichlet class priors           alpha = 5, 2,
                     (:func:`tasks.data.shifts.label_shift.label_shift_indices`),       1, 0.5, 0.25
                     half as many nodes as the base split
===================  ===========================================================  ==============

Every perturbation draws from the split's own seeded generator
(:func:`tasks.data.families.split_rng`), so a split is the same on every run.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from tasks.data.spec import TargetPool
from tasks.data.temporal import PROTOCOL
from tasks.data.graphs import Graph, GraphSplit
from tasks.data.families import ShiftFamily, TargetSplitSpec
from tasks.data.shifts.label_shift import label_shift_indices
from tasks.data.shifts.temporal import year_split

__all__ = ["FAMILIES", "STRUCTURAL_LEVELS", "base_split", "perturb"]

#: Parameter of each structural shift at severities 1 to 5.
STRUCTURAL_LEVELS: Final[dict[str, tuple[float, ...]]] = {
    "edge_drop": (0.15, 0.3, 0.5, 0.7, 0.9),
    "feature_noise": (0.25, 0.5, 0.75, 1.0, 1.5),
    "class_prior": (5.0, 2.0, 1.0, 0.5, 0.25),
}
_PARAM: Final[dict[str, str]] = {
    "edge_drop": "p", "feature_noise": "sigma", "class_prior": "alpha",
}


def _graph_of(dataset: str, split: TargetSplitSpec, pool: TargetPool) -> Graph:
    if not isinstance(pool.samples, Graph):
        raise ValueError(
            f"split {split.name!r} needs a graph target pool; dataset {dataset!r} has "
            f"{type(pool.samples).__name__}."
        )
    return pool.samples


def base_split(graph: Graph) -> GraphSplit:
    """The held-out year's papers on its snapshot (the ``clean`` split of a graph)."""
    return year_split(graph, PROTOCOL.held_out_year)


def perturb(
    split: GraphSplit, shift: str, level: float, n_classes: int, rng: np.random.Generator
) -> GraphSplit:
    """Apply one structural shift of the module's table to a split.

    Parameters
    ----------
    split : GraphSplit
        The base split.
    shift : {"edge_drop", "feature_noise", "class_prior"}
        Which perturbation.
    level : float
        Its parameter (drop probability, noise scale, Dirichlet concentration).
    n_classes : int
        Number of classes (for the class priors).
    rng : numpy.random.Generator
        Seeded generator.

    Returns
    -------
    GraphSplit

    Raises
    ------
    ValueError
        If ``shift`` is not one of the table's.
    """
    g = split.graph
    if shift == "edge_drop":
        keep = rng.random(g.n_edges) >= level
        graph = Graph(g.x, g.edge_index[:, keep], g.y, g.year)
        return GraphSplit(graph, split.nodes)
    if shift == "feature_noise":
        scale = g.x.std(axis=0, keepdims=True).astype(np.float32)
        noise = rng.standard_normal(g.x.shape, dtype=np.float32) * scale * np.float32(level)
        return GraphSplit(Graph(g.x + noise, g.edge_index, g.y, g.year), split.nodes)
    if shift == "class_prior":
        labels = split.labels
        size = max(1, labels.size // 2)
        local, _ = label_shift_indices(labels, n_classes, float(level), size, rng)
        return split.take(np.sort(local))
    raise ValueError(f"shift must be one of {', '.join(STRUCTURAL_LEVELS)}; got {shift!r}.")


def _clean_splits() -> list[TargetSplitSpec]:
    return [TargetSplitSpec("clean", "clean", "clean", None, (("year", float(PROTOCOL.held_out_year)),))]


def _clean(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[GraphSplit, np.ndarray]:
    out = base_split(_graph_of(dataset, split, pool))
    return out, out.labels


def _structural_splits() -> list[TargetSplitSpec]:
    return [
        TargetSplitSpec(
            f"{shift}-{sev}", "structural", shift, sev,
            ((_PARAM[shift], level), ("year", float(PROTOCOL.held_out_year))),
        )
        for shift, levels in STRUCTURAL_LEVELS.items()
        for sev, level in enumerate(levels, start=1)
    ]


def _structural(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[GraphSplit, np.ndarray]:
    base = base_split(_graph_of(dataset, split, pool))
    out = perturb(base, split.shift, split.param(_PARAM[split.shift]), pool.n_classes, rng)
    return out, out.labels


#: ``clean`` for graphs and the ``structural`` family.
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("clean", 0, ("graph",), _clean_splits, _clean),
    ShiftFamily("structural", 6, ("graph",), _structural_splits, _structural),
)
