"""``alsa-bench`` with the test-only ``tiny`` dataset registered: for subprocess CLI tests.

The kill battery runs the real command line in a child process (its own process group, so that
``ALSA_BENCH_KILL_AT`` can SIGKILL the whole group without touching pytest). A child cannot see
the ``tiny_suite`` fixture's monkeypatching, so this entry point registers the same dataset
(3 classes of banded noise, targets ``clean`` and one 100-image label-shift draw) and then hands
``sys.argv`` to the CLI::

    python -m tests.flows._tiny_cli run --suite tiny -b mlp --epochs 1 -m ac
"""

from __future__ import annotations

import tasks.data.datasets as datasets
import tasks.data.shifts.label_shift as label_shift
from tasks.data.datasets import DatasetSpec
from tasks.data.datasets.fmnist import images_to_inputs
from tests.flows.conftest import (
    TINY_CLASSES,
    TINY_SUITE,
    _load_pool,
    _load_source,
    _raw_files,
    _stage,
)


def register_tiny() -> None:
    """Register dataset ``tiny`` (suite ``tiny``) exactly as the ``tiny_suite`` fixture does."""
    datasets.DATASETS["tiny"] = DatasetSpec(
        name="tiny", suite=TINY_SUITE, description="test-only: 3 classes of banded noise",
        modality="image", n_classes=TINY_CLASSES, class_names=("top", "middle", "bottom"),
        input_shape=(1, 28, 28), target_families=("clean", "label_shift"), stage=_stage,
        raw_files=_raw_files, load_source=_load_source, load_target_pool=_load_pool,
        to_inputs=images_to_inputs,
    )
    label_shift.LABEL_SHIFT_ALPHAS = (1.0,)
    label_shift.LABEL_SHIFT_DRAWS = 1
    label_shift.LABEL_SHIFT_SIZE = 100


if __name__ == "__main__":
    register_tiny()
    from flows.cli import app

    app(prog_name="alsa-bench")
