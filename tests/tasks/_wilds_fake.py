"""A tiny fake Amazon-WILDS release in the exact on-disk layout that ``wilds`` 2.0.0 reads.

``wilds.datasets.amazon_dataset.AmazonDataset`` (version 2.1, the latest that wilds 2.0.0 knows)
looks for ``<root>/amazon_v2.1/RELEASE_v2.1.txt`` (without it, it would try to download) and
reads::

    <root>/amazon_v2.1/reviews.csv       pandas.read_csv(..., quoting=csv.QUOTE_NONNUMERIC,
                                         keep_default_na=False, na_values=[]) with columns
                                         reviewerID, asin, overall, reviewTime, unixReviewTime,
                                         reviewText, summary, verified, category, reviewYear
    <root>/amazon_v2.1/splits/user.csv   column ``split``, one row per review: -1 not in the
                                         dataset, 0 train, 1 val (OOD), 2 id_val, 3 test (OOD),
                                         4 id_test

``overall`` is the star rating 1-5 (written unquoted, read as a float); every string column is
quoted. :func:`write_fake_amazon` writes such a folder with a few reviews per split, built from
the toy vocabulary of :mod:`tests.tasks._distilbert_fake`, and returns what it wrote.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tests.tasks._distilbert_fake import WORDS

#: Split codes of the ``user`` scheme.
SPLIT_CODES: dict[str, int] = {"train": 0, "val": 1, "id_val": 2, "test": 3, "id_test": 4}
#: Reviews per split of the default fake (plus :data:`N_OUTSIDE` rows with split -1).
DEFAULT_SIZES: dict[str, int] = {"train": 24, "val": 10, "id_val": 8, "test": 12, "id_test": 6}
N_OUTSIDE: int = 3

COLUMNS: tuple[str, ...] = (
    "reviewerID", "asin", "overall", "reviewTime", "unixReviewTime", "reviewText", "summary",
    "verified", "category", "reviewYear",
)


@dataclass
class FakeAmazon:
    """What :func:`write_fake_amazon` wrote.

    Attributes
    ----------
    folder : Path
        ``<root>/amazon_v2.1``.
    table : pandas.DataFrame
        The rows of ``reviews.csv`` with a ``split`` column added (codes as in the split file).
    """

    folder: Path
    table: pd.DataFrame = field(repr=False)

    def split(self, name: str) -> pd.DataFrame:
        """Rows of the WILDS split ``name`` (``"train"``, ``"val"``, ...), in file order."""
        return self.table[self.table["split"] == SPLIT_CODES[name]]


def _review(rng: np.random.Generator, stars: int) -> str:
    words = rng.choice(np.asarray(WORDS), size=int(rng.integers(4, 30)))
    return f"{stars} stars . " + " ".join(words.tolist())


def write_fake_amazon(
    root: Path,
    sizes: dict[str, int] | None = None,
    seed: int = 0,
    overrides: dict[tuple[str, int], dict[str, Any]] | None = None,
) -> FakeAmazon:
    """Write a fake ``amazon_v2.1`` folder under ``root``.

    Parameters
    ----------
    root : Path
        Data root (the folder that will contain ``amazon_v2.1/``).
    sizes : dict of str to int, optional
        Reviews per WILDS split; default :data:`DEFAULT_SIZES`.
    seed : int, default 0
        Seed of the texts, ratings, users and years.
    overrides : dict, optional
        ``{(split, row): {column: value}}``: replace values of the ``row``-th review of a split
        (e.g. an empty ``reviewText`` or a non-integer ``overall``).

    Returns
    -------
    FakeAmazon
    """
    sizes = dict(DEFAULT_SIZES if sizes is None else sizes)
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    order = [name for name in SPLIT_CODES for _ in range(sizes.get(name, 0))]
    order += ["outside"] * N_OUTSIDE
    order = [order[i] for i in rng.permutation(len(order))]
    seen: dict[str, int] = {}
    for i, name in enumerate(order):
        stars = int(rng.integers(1, 6))
        year = int(rng.integers(2005, 2019))
        row: dict[str, Any] = {
            "reviewerID": f"U{int(rng.integers(0, 9)):03d}" if name != "val" else f"V{i:03d}",
            "asin": f"B{int(rng.integers(0, 20)):05d}",
            "overall": float(stars),
            "reviewTime": f"01 1, {year}",
            "unixReviewTime": 1_100_000_000 + 1000 * i,
            "reviewText": _review(rng, stars),
            "summary": "toy summary",
            "verified": bool(i % 2),
            "category": ("Books", "Electronics", "Home_and_Kitchen")[i % 3],
            "reviewYear": year,
            "split": SPLIT_CODES.get(name, -1),
        }
        k = seen.get(name, 0)
        seen[name] = k + 1
        row.update((overrides or {}).get((name, k), {}))
        rows.append(row)
    table = pd.DataFrame(rows)
    folder = Path(root) / "amazon_v2.1"
    (folder / "splits").mkdir(parents=True, exist_ok=True)
    (folder / "RELEASE_v2.1.txt").write_text("Amazon WILDS v2.1 (fake, for tests)\n")
    table[list(COLUMNS)].to_csv(folder / "reviews.csv", index=False, quoting=csv.QUOTE_NONNUMERIC)
    table[["split"]].to_csv(folder / "splits" / "user.csv", index=False)
    return FakeAmazon(folder=folder, table=table)
