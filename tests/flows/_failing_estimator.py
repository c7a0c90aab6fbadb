"""A test-only estimator that always fails its fit, counting its calls in a file.

Registered as ``always-fails`` in the test process (the flow checks method names) and, as a
Dask worker preload, in each worker; every fit appends one line to the file named by
``ALSA_BENCH_TEST_FAILURES``, so a test can count how often the failing task really ran.
"""

from __future__ import annotations

import os
from typing import Any

from estimators import ESTIMATORS, Estimator

#: Environment variable naming the file each fit appends a line to.
COUNT_ENV = "ALSA_BENCH_TEST_FAILURES"


class AlwaysFails(Estimator):
    """Refuses every validation set (a deterministic ``ValueError``)."""

    name = "always-fails"

    def _fit(self, val_logits: Any, val_labels: Any) -> None:
        with open(os.environ[COUNT_ENV], "a", encoding="utf-8") as handle:
            handle.write("fit\n")
        raise ValueError("always-fails refuses every validation set")

    def _estimate(self, target_logits: Any) -> Any:  # pragma: no cover - never fitted
        raise AssertionError("not fitted")


# Registered at import only where a test asked for it (a Dask worker inherits the variable and
# preloads this module); the test process registers it with monkeypatch, so it never outlives
# the test and no other test's registry holds it.
if COUNT_ENV in os.environ:
    ESTIMATORS.setdefault("always-fails", AlwaysFails)
