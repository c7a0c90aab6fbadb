"""Dataset registry: one :class:`DatasetSpec` per dataset key.

Adding a dataset means writing its module (stage, load source, load target pool) and adding one
entry to :data:`DATASETS`. Target splits are made from the target pool by :mod:`tasks.shifts`,
per the families a spec lists.

Examples
--------
>>> spec = get_dataset_spec("fmnist-coarse")
>>> spec.n_classes, spec.class_names
(3, ('tops', 'footwear', 'other'))
"""

from __future__ import annotations

from typing import Final

from . import fmnist
from .base import DatasetSpec, SourceSplits, TargetPool, imbalanced_counts

__all__ = [
    "DATASETS",
    "DatasetSpec",
    "SourceSplits",
    "TargetPool",
    "available_datasets",
    "get_dataset_spec",
    "imbalanced_counts",
]


DATASETS: Final[dict[str, DatasetSpec]] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            name="fmnist",
            suite="fmnist",
            description=(
                "Fashion-MNIST, 10 classes; imbalanced 1:3 source, corruptions, label shift, "
                "MNIST-M style photo blend"
            ),
            modality="image",
            n_classes=10,
            class_names=fmnist.CLASS_NAMES,
            input_shape=fmnist.INPUT_SHAPE,
            target_families=("clean", "synthetic", "label_shift", "domain"),
            stage=fmnist.stage_fashion_mnist,
            raw_files=fmnist.raw_files,
            load_source=fmnist.load_source_fmnist,
            load_target_pool=fmnist.load_target_pool_fmnist,
            to_inputs=fmnist.images_to_inputs,
        ),
        DatasetSpec(
            name="fmnist-coarse",
            suite="fmnist",
            description=(
                "Fashion-MNIST remapped to 3 coarse classes (tops / footwear / other); "
                "novel sub-classes in the targets (BREEDS style)"
            ),
            modality="image",
            n_classes=3,
            class_names=fmnist.COARSE_CLASS_NAMES,
            input_shape=fmnist.INPUT_SHAPE,
            target_families=("clean", "subpopulation"),
            stage=fmnist.stage_fashion_mnist,
            raw_files=fmnist.raw_files,
            load_source=fmnist.load_source_coarse,
            load_target_pool=fmnist.load_target_pool_coarse,
            to_inputs=fmnist.images_to_inputs,
        ),
    )
}


def available_datasets() -> tuple[str, ...]:
    """Registered dataset keys, sorted."""
    return tuple(sorted(DATASETS))


def get_dataset_spec(name: str) -> DatasetSpec:
    """Look up a dataset by key.

    Parameters
    ----------
    name : str
        Registry key, e.g. ``"fmnist"``.

    Returns
    -------
    DatasetSpec

    Raises
    ------
    ValueError
        If ``name`` is not registered; the message lists the valid keys.
    """
    try:
        return DATASETS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"dataset must be one of {', '.join(available_datasets())}; got {name!r}."
        ) from None
