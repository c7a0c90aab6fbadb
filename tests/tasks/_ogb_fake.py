"""A tiny ogbn-arxiv in OGB's exact on-disk layout, for offline tests.

:func:`write_fake_ogbn_arxiv` writes ``<root>/ogbn_arxiv/`` the way the released ``arxiv.zip``
unpacks (see :mod:`tasks.data.datasets.ogbn_arxiv`): header-less gzip CSVs written by pandas with the
release's column counts, the ``time`` split, the ``mapping/`` files with their headers and
``RELEASE_v1.txt``. ``processed/`` is left out on purpose: the loader never reads it.

Features are written with 9 significant digits, so ``float32(float64(text))`` gives back the
``float32`` values exactly and tests can compare arrays with ``==``.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from tasks.data.datasets.ogbn_arxiv import CLASS_NAMES, DATASET_DIR, N_CLASSES, N_FEATURES

__all__ = ["FakeArxiv", "write_csv_gz", "write_fake_ogbn_arxiv"]

#: Default publication years: every year the temporal protocol touches (train <= 2010,
#: validation 2012-2014, one target split per year 2015-2020).
DEFAULT_YEARS: tuple[int, ...] = tuple(range(2005, 2021))


class FakeArxiv(NamedTuple):
    """The arrays written, as the loader must return them."""

    x: np.ndarray
    edge_index: np.ndarray
    y: np.ndarray
    year: np.ndarray


def write_csv_gz(path: Path, values: np.ndarray, *, float_format: str | None = None) -> None:
    """Write ``values`` (1-d or 2-d) as a header-less, index-less gzip CSV, like OGB's files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    values = np.asarray(values)
    frame = pd.DataFrame(values.reshape(len(values), -1) if values.ndim < 2 else values)
    frame.to_csv(path, header=False, index=False, compression="gzip", float_format=float_format)


def write_fake_ogbn_arxiv(
    root: Path,
    n_nodes: int = 64,
    n_edges: int = 256,
    seed: int = 0,
    years: tuple[int, ...] = DEFAULT_YEARS,
) -> FakeArxiv:
    """Write a random ogbn-arxiv-shaped graph under ``root/ogbn_arxiv``.

    Parameters
    ----------
    root : Path
        Data root (``ogbn_arxiv/`` is created inside it).
    n_nodes, n_edges : int
        Graph size. Every year of ``years`` is used by some node when ``n_nodes >= len(years)``.
    seed : int
        Seed of features, labels, years and edges.
    years : tuple of int
        Publication years to draw from (cycled, then shuffled).

    Returns
    -------
    FakeArxiv
        ``x`` ``(n_nodes, 128)`` ``float32``, ``edge_index`` ``(2, n_edges)`` ``int64`` (citing
        -> cited, mostly newer -> older, no self-loops), ``y`` and ``year`` ``(n_nodes,)``
        ``int64``.
    """
    if n_nodes < 2:
        raise ValueError(f"n_nodes must be >= 2 to draw edges without self-loops; got {n_nodes}.")
    rng = np.random.default_rng(seed)
    folder = Path(root) / DATASET_DIR
    x = rng.normal(0.0, 0.1, size=(n_nodes, N_FEATURES)).astype(np.float32)
    y = rng.integers(0, N_CLASSES, size=n_nodes).astype(np.int64)
    year = np.asarray(years, dtype=np.int64)[rng.permutation(n_nodes) % len(years)]
    src = rng.integers(0, n_nodes, size=n_edges)
    dst = (src + rng.integers(1, n_nodes, size=n_edges)) % n_nodes
    swap = year[src] < year[dst]  # a paper cites older papers (the release has a few exceptions)
    src, dst = np.where(swap, dst, src), np.where(swap, src, dst)
    edge_index = np.stack([src, dst]).astype(np.int64)

    raw = folder / "raw"
    write_csv_gz(raw / "edge.csv.gz", edge_index.T)
    write_csv_gz(raw / "node-feat.csv.gz", x, float_format="%.9g")
    write_csv_gz(raw / "node-label.csv.gz", y)
    write_csv_gz(raw / "node_year.csv.gz", year)
    write_csv_gz(raw / "num-node-list.csv.gz", np.array([n_nodes]))
    write_csv_gz(raw / "num-edge-list.csv.gz", np.array([n_edges]))

    ids = np.arange(n_nodes, dtype=np.int64)  # OGB's time split: <= 2017 / 2018 / >= 2019
    split = folder / "split" / "time"
    write_csv_gz(split / "train.csv.gz", ids[year <= 2017])
    write_csv_gz(split / "valid.csv.gz", ids[year == 2018])
    write_csv_gz(split / "test.csv.gz", ids[year >= 2019])

    mapping = folder / "mapping"
    mapping.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"label idx": range(N_CLASSES), "arxiv category": CLASS_NAMES}).to_csv(
        mapping / "labelidx2arxivcategeory.csv.gz", index=False, compression="gzip"
    )
    pd.DataFrame({"node idx": ids, "paper id": 9_000_000 + 7 * ids}).to_csv(
        mapping / "nodeidx2paperid.csv.gz", index=False, compression="gzip"
    )
    (mapping / "README.md").write_text("# ogbn-arxiv (fake, for tests)\n")
    (folder / "RELEASE_v1.txt").write_text("# Release note for ogbn-arxiv\n\n### v1: fake\n")
    return FakeArxiv(x=x, edge_index=edge_index, y=y, year=year)
