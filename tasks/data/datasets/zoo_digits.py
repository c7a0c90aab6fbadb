"""``zoo-digits``: scikit-learn's bundled 8x8 handwritten digits, as 28x28 images.

Data: ``sklearn/datasets/data/digits.csv.gz`` of the installed scikit-learn (what
:func:`sklearn.datasets.load_digits` reads; the UCI "Optical Recognition of Handwritten Digits"
test set, Alpaydin & Kaynak 1998, CC BY 4.0): 1,797 digits by 13 writers (not recorded per
digit), each an 8x8 grid of counts 0-16 (the on-pixels of a 4x4 block of a 32x32 bitmap) and
its class 0-9. The file is read as data (pinned by its SHA-256), scikit-learn is not imported.

Images: the counts are scaled to ``0..255`` (``round(v * 255 / 16)``), the 8x8 grid is resized
to 20x20 with bilinear interpolation (PIL) and centred on a black 28x28 canvas (as MNIST frames
its 20x20 digits), so that every image shift family of the project (tuned for 28x28 grey
images) and the ``lenet`` backbone apply. The resize adds no information: a model sees the same
64 values, smoothed.

Splits (seeded, stratified by class): about 900 training digits, 300 validation, the rest (594) the
``clean`` pool; ``synthetic`` corrupts and ``domain`` blends a class-stratified base subset of
that pool, ``label_shift`` re-draws its class priors. The source is class-balanced (no natural
grouping is recorded for a digit).
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Final

import numpy as np
from PIL import Image

from tasks.data.datasets._text_sources import stage_package_file
from tasks.data.datasets._zoo import grey_to_inputs, grouped_splits, require_file
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool

__all__ = ["SPECS", "digits_to_images", "read_digits"]

ORDER: Final[int] = 600
NAME: Final[str] = "zoo-digits"
FILE: Final[str] = "digits.csv.gz"
SHA256: Final[str] = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"
#: Side of the resized digit inside the 28x28 canvas.
DIGIT_SIDE: Final[int] = 20
SIDE: Final[int] = 28


def raw_path(root: Path | str) -> Path:
    """``<root>/zoo-digits/raw/digits.csv.gz``."""
    return Path(root) / NAME / "raw" / FILE


def raw_files(root: Path | str) -> list[Path]:
    """The one staged file."""
    return [raw_path(root)]


def stage(root: Path | str) -> list[Path]:
    """Copy ``digits.csv.gz`` out of the installed scikit-learn, verified."""
    stage_package_file("sklearn", f"datasets/data/{FILE}", "scikit-learn", raw_path(root), SHA256)
    return raw_files(root)


def read_digits(path: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """The 8x8 count grids ``(n, 8, 8)`` (``uint8`` 0-16) and labels of ``digits.csv.gz``.

    Raises
    ------
    ValueError
        If a row does not hold 64 counts in 0..16 and a label in 0..9.
    """
    path = Path(path)
    data = np.loadtxt(gzip.open(path, "rt"), delimiter=",", ndmin=2)
    if data.shape[1] != 65:
        raise ValueError(f"{path}: expected 65 columns (64 counts and the label); got "
                         f"{data.shape[1]}.")
    counts, labels = data[:, :64], data[:, 64]
    if counts.min() < 0 or counts.max() > 16 or labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{path}: counts must lie in 0..16 and labels in 0..9.")
    return counts.reshape(-1, 8, 8).astype(np.uint8), labels.astype(np.int64)


def digits_to_images(grids: np.ndarray) -> np.ndarray:
    """8x8 count grids to 28x28 ``uint8`` images (module docstring)."""
    out = np.zeros((grids.shape[0], SIDE, SIDE), dtype=np.uint8)
    start = (SIDE - DIGIT_SIDE) // 2
    for i, grid in enumerate(grids):
        grey = Image.fromarray(np.rint(grid.astype(np.float64) * 255 / 16).astype(np.uint8))
        big = grey.resize((DIGIT_SIDE, DIGIT_SIDE), Image.Resampling.BILINEAR)
        out[i, start : start + DIGIT_SIDE, start : start + DIGIT_SIDE] = np.asarray(big)
    return out


@lru_cache(maxsize=2)
def _splits(root: str) -> tuple[SourceSplits, TargetPool]:
    grids, labels = read_digits(require_file(raw_path(root), "zoo-image"))
    return grouped_splits(
        digits_to_images(grids), labels, np.zeros(labels.size, np.int64), 10,
        sizes=(900, 300, 597), target_cap=0, seed=1998, take=lambda x, i: x[i],
        concat=lambda parts: np.concatenate(parts), where=NAME,
    )


def load_source(root: Path | str) -> SourceSplits:
    """About 900 training and 300 validation digits."""
    return _splits(str(Path(root).resolve()))[0]


def load_target_pool(root: Path | str) -> TargetPool:
    """The other 594 digits (every one sub-population 0)."""
    return _splits(str(Path(root).resolve()))[1]


_RECIPE: Final = MappingProxyType({"epochs": 30})

SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME, suite="zoo-image",
        description="scikit-learn's 8x8 handwritten digits (UCI optdigits), 28x28",
        modality="image", n_classes=10, class_names=tuple(str(d) for d in range(10)),
        input_shape=(1, SIDE, SIDE),
        target_families=("clean", "synthetic", "label_shift", "domain"),
        stage=stage, raw_files=raw_files, load_source=load_source,
        load_target_pool=load_target_pool, to_inputs=grey_to_inputs,
        backbones=("mlp", "lenet"),
        recipes=MappingProxyType({"mlp": _RECIPE, "lenet": _RECIPE}),
        source_package="scikit-learn==1.9.1 (PyPI; sklearn/datasets/data/digits.csv.gz)",
        licence="CC BY 4.0 (UCI optdigits); scikit-learn BSD-3-Clause",
        in_default_bench=False,
    ),
)
