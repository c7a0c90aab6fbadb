"""Flow tests: one Prefect test server for the whole session, and a tiny test-only dataset.

Only tests that request ``prefect_server`` pay its startup (about 10-15 s on 2 cores); the CLI
tests in this folder do not. Heartbeats are off so a flow run does not wait a second at exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

TINY_SUITE = "tiny"
TINY_CLASSES = 3


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[None]:
    """A temporary Prefect API (SQLite in a temp folder) for every flow test of the session."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield


def _tiny_images(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` 28x28 uint8 images of 3 classes (a bright band per class) with noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, TINY_CLASSES, size=n).astype(np.int64)
    images = rng.normal(60.0, 40.0, size=(n, 28, 28))
    for c in range(TINY_CLASSES):
        images[labels == c, 9 * c : 9 * c + 9, :] += 90.0
    return np.clip(images, 0, 255).astype(np.uint8), labels


def _raw_files(root: Path) -> list[Path]:
    return [Path(root) / "tiny" / "tiny.npz"]


def _stage(root: Path) -> list[Path]:
    [path] = _raw_files(root)
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        train_x, train_y = _tiny_images(360, 1)
        pool_x, pool_y = _tiny_images(200, 2)
        np.savez(path, train_x=train_x, train_y=train_y, pool_x=pool_x, pool_y=pool_y)
    return [path]


def _load_source(root: Path):
    from tasks.data.datasets import SourceSplits

    with np.load(Path(root) / "tiny" / "tiny.npz") as data:
        x, y = data["train_x"], data["train_y"]
    return SourceSplits(train_x=x[:240], train_y=y[:240], val_x=x[240:], val_y=y[240:])


def _load_pool(root: Path):
    from tasks.data.datasets import TargetPool

    with np.load(Path(root) / "tiny" / "tiny.npz") as data:
        return TargetPool(samples=data["pool_x"], labels=data["pool_y"], n_classes=TINY_CLASSES)


def tiny_spec():
    """The ``tiny`` dataset entry (suite ``tiny``): 240 training images, 120 validation images,
    two target splits (``clean`` and one label-shifted draw of 100 images)."""
    from tasks.data.datasets import DatasetSpec
    from tasks.data.datasets.fmnist import images_to_inputs

    return DatasetSpec(
        name="tiny", suite=TINY_SUITE, description="test-only: 3 classes of banded noise",
        modality="image", n_classes=TINY_CLASSES, class_names=("top", "middle", "bottom"),
        input_shape=(1, 28, 28), target_families=("clean", "label_shift"), stage=_stage,
        raw_files=_raw_files, load_source=_load_source, load_target_pool=_load_pool, to_inputs=images_to_inputs,
    )


#: Label-shift settings of the tiny suite (module attribute -> value).
TINY_LABEL_SHIFT = {"LABEL_SHIFT_ALPHAS": (1.0,), "LABEL_SHIFT_DRAWS": 1, "LABEL_SHIFT_SIZE": 100}


@pytest.fixture
def tiny_suite(monkeypatch: pytest.MonkeyPatch) -> str:
    """Register dataset ``tiny`` (:func:`tiny_spec`) for one test."""
    import tasks.data.datasets as datasets
    import tasks.data.shifts.label_shift as label_shift

    monkeypatch.setitem(datasets.DATASETS, "tiny", tiny_spec())
    for name, value in TINY_LABEL_SHIFT.items():
        monkeypatch.setattr(label_shift, name, value)
    return TINY_SUITE
