"""``breast-cancer``: malignant or benign breast mass from 30 cell-nucleus measurements (WDBC).

Data: ``datasets/data/breast_cancer.csv`` of ``scikit-learn==1.9.1``, a CSV file of the installed
package, read as data and staged as Parquet. Licence: CC BY 4.0 (UCI WDBC); shipped in scikit-learn
(BSD-3-Clause). 569 rows kept, 2 classes, 30 numeric and 0 categorical input columns. Protocol and
shift families: :mod:`tasks.data.datasets._tabular` and :mod:`tasks.data.shifts.tabular`.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 498

#: Column names of the CSV file (its first line is not a plain header).
COLUMNS: Final[tuple[str, ...]] = (
    "mean radius", "mean texture", "mean perimeter", "mean area", "mean smoothness",
    "mean compactness", "mean concavity", "mean concave points", "mean symmetry",
    "mean fractal dimension", "radius error", "texture error", "perimeter error", "area error",
    "smoothness error", "compactness error", "concavity error", "concave points error",
    "symmetry error", "fractal dimension error", "worst radius", "worst texture",
    "worst perimeter", "worst area", "worst smoothness", "worst compactness", "worst concavity",
    "worst concave points", "worst symmetry", "worst fractal dimension", "target",
)

TASK: Final[TabularTask] = TabularTask(
    name="breast-cancer",
    suite="zoo-tabular",
    description="malignant or benign breast mass from 30 cell-nucleus measurements (WDBC)",
    file=PackageFile(
        package="sklearn",
        relative="datasets/data/breast_cancer.csv",
        requirement="scikit-learn==1.9.1",
        sha256="fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed",
        columns=COLUMNS,
        skiprows=1,
    ),
    licence="CC BY 4.0 (UCI WDBC); shipped in scikit-learn (BSD-3-Clause)",
    target="target",
    classes=(("0", "malignant"), ("1", "benign")),
    numeric=(
        "mean radius", "mean texture", "mean perimeter", "mean area", "mean smoothness",
        "mean compactness", "mean concavity", "mean concave points", "mean symmetry",
        "mean fractal dimension", "radius error", "texture error", "perimeter error",
        "area error", "smoothness error", "compactness error", "concavity error",
        "concave points error", "symmetry error", "fractal dimension error", "worst radius",
        "worst texture", "worst perimeter", "worst area", "worst smoothness", "worst compactness",
        "worst concavity", "worst concave points", "worst symmetry", "worst fractal dimension",
    ),
    categorical=(),
    rows=569,
    covariate_columns=("mean radius", "mean texture"),
    subpop=None,
    natural=None,
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
