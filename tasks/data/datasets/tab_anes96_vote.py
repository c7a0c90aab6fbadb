"""``anes96-vote``: Clinton or Dole in the 1996 American National Election Study.

Data: ``datasets/anes96/anes96.csv`` of ``statsmodels==0.15.0``, a CSV file of the installed
package, read as data and staged as Parquet. Licence: public domain (statsmodels' COPYRIGHT note);
statsmodels BSD-3-Clause. 944 rows kept, 2 classes, 9 numeric and 0 categorical input columns.
Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 522

#: Column names of the CSV file (its first line is not a plain header).
COLUMNS: Final[tuple[str, ...]] = (
    "popul", "TVnews", "selfLR", "ClinLR", "DoleLR", "PID", "age", "educ", "income", "vote",
)

TASK: Final[TabularTask] = TabularTask(
    name="anes96-vote",
    suite="zoo-tabular",
    description="Clinton or Dole in the 1996 American National Election Study",
    file=PackageFile(
        package="statsmodels",
        relative="datasets/anes96/anes96.csv",
        requirement="statsmodels==0.15.0",
        sha256="c124d8556d6f8c4329b1fea61e3dc6891c5e663f15b7fe5791235963420ba896",
        sep="\t",
        columns=COLUMNS,
        skiprows=1,
    ),
    licence="public domain (statsmodels' COPYRIGHT note); statsmodels BSD-3-Clause",
    target="vote",
    classes=(("0", "clinton"), ("1", "dole")),
    numeric=("popul", "TVnews", "selfLR", "ClinLR", "DoleLR", "PID", "age", "educ", "income"),
    categorical=(),
    rows=944,
    covariate_columns=("selfLR", "age"),
    subpop=None,
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
