"""Dask worker preload: register the test-only ``tiny`` dataset in a worker process.

The ``tiny_suite`` fixture registers the dataset in the test process only; a Dask worker is a
fresh process, so the parity test names this module in ``distributed.worker.preload``.
"""

from __future__ import annotations

import tasks.data.datasets as datasets
import tasks.data.shifts.label_shift as label_shift
from tests.flows.conftest import TINY_LABEL_SHIFT, tiny_spec

datasets.DATASETS["tiny"] = tiny_spec()
for _name, _value in TINY_LABEL_SHIFT.items():
    setattr(label_shift, _name, _value)
