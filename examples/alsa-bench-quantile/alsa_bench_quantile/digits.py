"""``digits``: scikit-learn's 8 x 8 handwritten digits as an alsa-bench dataset (suite ``digits``).

The 1,797 images of :func:`sklearn.datasets.load_digits` (UCI optical recognition of
handwritten digits; shipped inside scikit-learn, so nothing is downloaded) are split once, with
a fixed seed, into 900 training, 400 validation and 497 test images. The targets are the clean
test set and alsa-bench's Dirichlet label shifts of it (shift families ``clean`` and
``label_shift``). Pixels are 0-16 grey levels; the model sees them divided by 16.

The module's ``SPECS`` is what the entry point ``digits = "alsa_bench_quantile.digits"`` gives
alsa-bench; it imports alsa-bench's data contract (:class:`tasks.data.spec.DatasetSpec`) and
nothing else of it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool

__all__ = ["SPECS", "load_source", "load_target_pool", "raw_files", "stage", "to_inputs"]

#: Images per part: training, validation, test (1,797 in all).
SIZES = (900, 400, 497)
SEED = 20260101


def raw_files(root: Path) -> list[Path]:
    """Where :func:`stage` writes the images: ``<root>/digits/digits.npz``."""
    return [Path(root) / "digits" / "digits.npz"]


def stage(root: Path) -> list[Path]:
    """Write scikit-learn's digits, shuffled once, as ``uint8`` images and their labels."""
    from sklearn.datasets import load_digits

    [path] = raw_files(root)
    if not path.is_file():
        data = load_digits()
        order = np.random.default_rng(SEED).permutation(len(data.target))
        images = data.images[order].astype(np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, images=images, labels=data.target[order].astype(np.int64))
        tmp.replace(path)
    return [path]


def _parts(root: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    with np.load(raw_files(root)[0], allow_pickle=False) as data:
        images, labels = data["images"], data["labels"]
    bounds = np.cumsum((0, *SIZES))
    return [(images[a:b], labels[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def load_source(root: Path) -> SourceSplits:
    """The training and validation images."""
    (train_x, train_y), (val_x, val_y), _ = _parts(root)
    return SourceSplits(train_x=train_x, train_y=train_y, val_x=val_x, val_y=val_y)


def load_target_pool(root: Path) -> TargetPool:
    """The test images, from which the clean and label-shifted targets are drawn."""
    _, _, (x, y) = _parts(root)
    return TargetPool(samples=x, labels=y, n_classes=10)


def to_inputs(images: np.ndarray) -> np.ndarray:
    """``uint8`` images ``(n, 8, 8)`` in 0-16 to ``float32`` inputs ``(n, 1, 8, 8)`` in [0, 1]."""
    return (np.asarray(images, dtype=np.float32) / 16.0)[:, None, :, :]


SPECS = (
    DatasetSpec(
        name="digits", suite="digits",
        description="scikit-learn's 8x8 handwritten digits (example plugin)",
        modality="image", n_classes=10, class_names=tuple(str(d) for d in range(10)),
        input_shape=(1, 8, 8), target_families=("clean", "label_shift"), stage=stage,
        raw_files=raw_files, load_source=load_source, load_target_pool=load_target_pool,
        to_inputs=to_inputs, backbones=("mlp",),
    ),
)
