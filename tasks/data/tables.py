"""Tabular samples: a block of rows with numeric and categorical columns, in raw form.

A tabular split's samples are one :class:`Table`: numeric columns as ``float64`` (``NaN`` is a
missing value) and categorical columns as ``int64`` codes into the dataset's declared levels
(``-1`` is a missing value). The levels are the dataset's, not the split's, so codes mean the
same thing in every split; which levels a model saw in training is the model's business
(:mod:`tasks.models.backbones.tabular` fits its preprocessing on the source training split).

Nothing here is fitted or scaled: the shift families (:mod:`tasks.data.shifts.tabular`) corrupt
and select raw rows, and the backbones encode them.

Examples
--------
>>> t = Table(np.array([[1.0], [np.nan], [3.0]]), np.array([[0], [1], [-1]]),
...           ("age",), ("sex",), (("f", "m"),))
>>> len(t), t.take(np.array([2, 0])).numeric[:, 0].tolist()
(3, [3.0, 1.0])
>>> t.missing_fraction()
0.3333333333333333
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Table", "concat_tables"]


@dataclass(frozen=True, eq=False)
class Table:
    """Rows of a tabular dataset: numeric and categorical columns, raw.

    Attributes
    ----------
    numeric : numpy.ndarray
        ``(n, p)`` ``float64``; ``NaN`` marks a missing value.
    categorical : numpy.ndarray
        ``(n, q)`` ``int64`` codes into :attr:`levels`; ``-1`` marks a missing value.
    numeric_names, categorical_names : tuple of str
        Column names, ``p`` and ``q`` of them.
    levels : tuple of tuple of str
        The levels of every categorical column (the dataset's, in code order).

    Raises
    ------
    ValueError
        If the shapes, dtypes, names or codes disagree.
    """

    numeric: np.ndarray = field(repr=False)
    categorical: np.ndarray = field(repr=False)
    numeric_names: tuple[str, ...]
    categorical_names: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...] = field(repr=False)

    def __post_init__(self) -> None:
        num = np.asarray(self.numeric)
        cat = np.asarray(self.categorical)
        if num.ndim != 2 or cat.ndim != 2 or num.shape[0] != cat.shape[0]:
            raise ValueError(
                f"numeric and categorical must be 2-d with one row per sample; got shapes "
                f"{num.shape} and {cat.shape}."
            )
        if num.dtype != np.float64 or cat.dtype != np.int64:
            raise ValueError(
                f"numeric must be float64 and categorical int64; got {num.dtype} and {cat.dtype}."
            )
        if num.shape[1] != len(self.numeric_names) or cat.shape[1] != len(self.categorical_names):
            raise ValueError(
                f"expected {num.shape[1]} numeric and {cat.shape[1]} categorical names; got "
                f"{len(self.numeric_names)} and {len(self.categorical_names)}."
            )
        if len(self.levels) != cat.shape[1]:
            raise ValueError(
                f"levels must list the levels of each of the {cat.shape[1]} categorical "
                f"columns; got {len(self.levels)} lists."
            )
        if cat.size:
            sizes = np.array([len(lv) for lv in self.levels], dtype=np.int64)
            if np.any(cat < -1) or np.any(cat >= sizes[None, :]):
                bad = int(np.flatnonzero(np.any((cat < -1) | (cat >= sizes[None, :]), axis=0))[0])
                raise ValueError(
                    f"categorical column {self.categorical_names[bad]!r} holds a code outside "
                    f"-1..{sizes[bad] - 1} (its {sizes[bad]} levels)."
                )

    def __len__(self) -> int:
        return int(self.numeric.shape[0])

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return len(self)

    @property
    def level_counts(self) -> tuple[int, ...]:
        """Number of levels of each categorical column."""
        return tuple(len(lv) for lv in self.levels)

    def take(self, index: Sequence[int] | np.ndarray) -> Table:
        """The rows at ``index`` (``int64`` positions), in that order."""
        idx = np.asarray(index, dtype=np.int64)
        return Table(self.numeric[idx], self.categorical[idx], self.numeric_names,
                     self.categorical_names, self.levels)

    def __getitem__(self, index: Any) -> Table:
        """Rows by an index array or a boolean mask (``pool.samples[idx]``)."""
        idx = np.asarray(index)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        return self.take(idx)

    def replace_values(self, numeric: np.ndarray | None = None,
                       categorical: np.ndarray | None = None) -> Table:
        """The same columns with new values (a corrupted copy)."""
        return Table(
            np.asarray(self.numeric if numeric is None else numeric, dtype=np.float64),
            np.asarray(self.categorical if categorical is None else categorical, dtype=np.int64),
            self.numeric_names, self.categorical_names, self.levels,
        )

    def numeric_column(self, name: str) -> np.ndarray:
        """The values of numeric column ``name``.

        Raises
        ------
        ValueError
            If the table has no numeric column of that name.
        """
        if name not in self.numeric_names:
            raise ValueError(
                f"column must be one of the numeric columns {list(self.numeric_names)}; got "
                f"{name!r}."
            )
        return self.numeric[:, self.numeric_names.index(name)]

    def categorical_column(self, name: str) -> np.ndarray:
        """The codes of categorical column ``name``.

        Raises
        ------
        ValueError
            If the table has no categorical column of that name.
        """
        if name not in self.categorical_names:
            raise ValueError(
                f"column must be one of the categorical columns {list(self.categorical_names)}; "
                f"got {name!r}."
            )
        return self.categorical[:, self.categorical_names.index(name)]

    def missing_fraction(self) -> float:
        """Share of missing cells over every column (0 for an empty table)."""
        cells = self.numeric.size + self.categorical.size
        if cells == 0:
            return 0.0
        return float((np.isnan(self.numeric).sum() + (self.categorical < 0).sum()) / cells)


def concat_tables(tables: Sequence[Table]) -> Table:
    """Rows of several tables of one schema, in order.

    Raises
    ------
    ValueError
        If no table is given or the schemas differ.
    """
    if not tables:
        raise ValueError("tables must hold at least one Table; got none.")
    first = tables[0]
    for t in tables[1:]:
        if (t.numeric_names, t.categorical_names, t.levels) != (
                first.numeric_names, first.categorical_names, first.levels):
            raise ValueError("tables must share one schema (column names and levels) to be joined.")
    return Table(np.concatenate([t.numeric for t in tables]),
                 np.concatenate([t.categorical for t in tables]),
                 first.numeric_names, first.categorical_names, first.levels)
