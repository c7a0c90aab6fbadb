"""``waterbirds``: Waterbirds (Sagawa et al. 2020) read with ``wilds``; the paper's Waterbirds row.

Data
----
Birds cropped from CUB-200-2011 pasted onto Places backgrounds; the label is the bird type
(``0`` landbird, ``1`` waterbird), the background (``place``: ``0`` land, ``1`` water) is a
spurious attribute. In the training split the background agrees with the bird 95 % of the
time (train groups landbird/land 3,498, landbird/water 184, waterbird/land 56,
waterbird/water 1,057), while the validation and test splits are balanced across backgrounds
within each class, so the rare groups become common: a sub-population shift.

=========  ==========  ======  ===============================================================
WILDS      code        images  here
=========  ==========  ======  ===============================================================
``train``  0           4,795   source training split (used whole)
``val``    1           1,199   validation (paper App. H.2: "the val set was used for
                               validation")
``test``   2           5,794   target pool; sub-population = group ``2 y + place``
=========  ==========  ======  ===============================================================

Target splits (family ``subpopulation``, paper row "Waterbirds-WILDS Subpop"):

* ``subpop-test``: the whole test split, the set the paper's row is measured on;
* ``subpop-landbird-land``, ``subpop-landbird-water``, ``subpop-waterbird-land``,
  ``subpop-waterbird-water``: the test images of one group each (:data:`GROUP_NAMES`). The
  minority groups (a bird on the "wrong" background) are where a model that learned the
  background fails, so the four splits spread the true accuracy far apart.

There is no ``clean`` split: Waterbirds has no in-distribution test set, and the ``val`` split,
the only other labelled data, is the validation set.

On-disk layout (read by ``wilds``)
----------------------------------
``wilds.get_dataset("waterbirds", root_dir=<root>, download=True)`` unpacks the WILDS archive
(:data:`WILDS_URL`) into ``<root>/waterbirds_v1.0/``::

    RELEASE_v1.0.txt   wilds' marker that the release is complete (without it wilds downloads)
    metadata.csv       img_id, img_filename, y, split, place, place_filename (one row per image)
    <img_filename>     e.g. 001.Black_footed_Albatross/Black_Footed_Albatross_0009_34.jpg

The loaders call ``wilds.get_dataset("waterbirds", version="1.0", root_dir=<root>,
download=False)`` and take labels (``y_array``), backgrounds (first column of
``metadata_array``), splits (``split_array``) and file names from it, after checking
``metadata.csv`` themselves: wilds accepts any integer as a label, so a ``y``, ``place`` or
``split`` outside its codes is refused here with the row named, and every listed image must
exist.

Downloads: WILDS publishes no checksum for this archive (its ``compressed_size`` is None too),
nor does the group-DRO tarball it repackages, and this project never invents one; so
:data:`SPECS` lists no ``sources`` and ``alsa-bench fetch waterbirds`` cannot download it. The
missing-data message says how to get it with ``wilds`` instead.

Samples are absolute image paths; ``to_inputs`` is :func:`tasks.data.datasets._vision.photos_to_inputs`
(RGB, shorter side 256, centre crop 224, ImageNet normalisation).
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import numpy as np

from tasks.data.families import ShiftFamily

from tasks.data.errors import DatasetUnavailableError
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.datasets._vision import INPUT_SHAPE, photos_to_inputs

__all__ = [
    "CLASS_NAMES",
    "DATASET_DIR",
    "GROUP_NAMES",
    "SPECS",
    "WILDS_SPLITS",
    "dataset_folder",
    "load_source",
    "load_splits",
    "load_target_pool",
    "raw_files",
    "stage",
]

#: Registry position (online vision suites after the offline suites).
ORDER: Final[int] = 440

NAME: Final[str] = "waterbirds"
#: Release version read (the only one wilds 2.0.0 knows).
VERSION: Final[str] = "1.0"
#: Folder wilds unpacks the release into, under the data root.
DATASET_DIR: Final[str] = f"waterbirds_v{VERSION}"
#: Where wilds 2.0.0 downloads the release (``WaterbirdsDataset._versions_dict``).
WILDS_URL: Final[str] = (
    "https://worksheets.codalab.org/rest/bundles/0x505056d5cdea4e4eaa0e242cbfe2daa4/contents/blob/"
)
RELEASE_FILE: Final[str] = f"RELEASE_v{VERSION}.txt"
METADATA_FILE: Final[str] = "metadata.csv"
#: Columns of ``metadata.csv`` that are read.
METADATA_COLUMNS: Final[tuple[str, ...]] = ("img_filename", "y", "split", "place")
#: WILDS split codes (``split`` column).
WILDS_SPLITS: Final[dict[str, int]] = {"train": 0, "val": 1, "test": 2}

N_CLASSES: Final[int] = 2
CLASS_NAMES: Final[tuple[str, ...]] = ("landbird", "waterbird")
PLACE_NAMES: Final[tuple[str, ...]] = ("land", "water")
#: Name of test-pool sub-population ``2 y + place``.
GROUP_NAMES: Final[tuple[str, ...]] = tuple(
    f"{bird}-{place}" for bird in CLASS_NAMES for place in PLACE_NAMES
)
#: Split of the whole test set.
WHOLE_TEST_SPLIT: Final[str] = "subpop-test"

#: How to get the data when it is missing (``{root}`` is filled in).
FETCH_HINT: Final[str] = (
    "WILDS publishes no checksum for the Waterbirds archive, so `alsa-bench fetch {name}` does "
    "not download it: on a machine with internet run `python -c \"import wilds; "
    "wilds.get_dataset('waterbirds', root_dir='{root}', download=True)\"` and copy the folder "
    "{folder}/ to {root}/ here"
)


def dataset_folder(root: Path | str) -> Path:
    """``<root>/waterbirds_v1.0``: the folder wilds unpacks the release into (no IO)."""
    return Path(root) / DATASET_DIR


def _unavailable(root: Path | str, missing: Path, more: int = 0) -> DatasetUnavailableError:
    extra = f" (and {more} more)" if more else ""
    hint = FETCH_HINT.format(name=NAME, root=str(root), folder=DATASET_DIR)
    return DatasetUnavailableError(
        f"dataset {NAME!r} is not on this machine: missing {str(missing)!r}{extra} under the "
        f"data root {str(root)!r}; {hint}."
    )


def _index_files(root: Path | str) -> list[Path]:
    folder = dataset_folder(root)
    return [folder / RELEASE_FILE, folder / METADATA_FILE]


def _listed_images(root: Path | str) -> list[Path]:
    """Image paths listed in ``metadata.csv`` (column ``img_filename``), in row order."""
    folder = dataset_folder(root)
    with open(folder / METADATA_FILE, newline="", encoding="utf-8") as handle:
        return [folder / row["img_filename"] for row in csv.DictReader(handle)]


def raw_files(root: Path | str) -> list[Path]:
    """The release marker, ``metadata.csv`` and every image it lists (reads only the CSV).

    When ``metadata.csv`` is missing or unreadable, only the two index files are returned (so
    the dataset counts as not staged, or its digest fails where it is read).
    """
    files = _index_files(root)
    try:
        return files + _listed_images(root)
    except (OSError, UnicodeDecodeError, KeyError, csv.Error):
        return files


def _read_metadata(root: Path | str) -> Any:
    """``metadata.csv`` as a DataFrame, every code checked (see the module docstring)."""
    import pandas as pd

    path = dataset_folder(root) / METADATA_FILE
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise ValueError(
            f"Waterbirds metadata {str(path)!r} is not a readable CSV ({exc})."
        ) from None
    absent = [c for c in METADATA_COLUMNS if c not in table.columns]
    if absent:
        raise ValueError(
            f"Waterbirds metadata {str(path)!r} must have the columns "
            f"{', '.join(METADATA_COLUMNS)}; it lacks {', '.join(absent)} (header "
            f"{list(table.columns)[:8]}). It is not the WILDS release file."
        )
    allowed = {
        "y": (0, 1, "0 (landbird) or 1 (waterbird)"),
        "place": (0, 1, "0 (land) or 1 (water)"),
        "split": (0, 2, "0 (train), 1 (val) or 2 (test)"),
    }
    for column, (low, high, what) in allowed.items():
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(
            ~np.isfinite(values) | (values != np.round(values)) | (values < low) | (values > high)
        )
        if bad.size:
            row = int(bad[0])
            raise ValueError(
                f"Waterbirds metadata {str(path)!r}, data row {row} (0-based, header not "
                f"counted; image {table['img_filename'].iloc[row]!r}): column {column} must be "
                f"{what}; got {table[column].iloc[row]!r}."
            )
    empty = [s for s, code in WILDS_SPLITS.items() if not (table["split"] == code).any()]
    if empty:
        raise ValueError(
            f"Waterbirds metadata {str(path)!r} has no image in the split(s) {', '.join(empty)}; "
            f"every split of {', '.join(WILDS_SPLITS)} must hold images."
        )
    return table


def stage(root: Path | str) -> list[Path]:
    """Check that the Waterbirds release is complete under ``<root>/waterbirds_v1.0``.

    Parameters
    ----------
    root : Path or str
        Data root: the ``root_dir`` given to wilds, the folder containing ``waterbirds_v1.0/``.

    Returns
    -------
    list of Path
        :func:`raw_files`.

    Raises
    ------
    DatasetUnavailableError
        If the marker, ``metadata.csv`` or a listed image is missing (one line: what, where,
        how to get it).
    ValueError
        If ``metadata.csv`` lacks a column or holds a code outside its range (row named).
    """
    for path in _index_files(root):
        if not path.is_file():
            raise _unavailable(root, path)
    table = _read_metadata(root)
    folder = dataset_folder(root)
    missing = [folder / name for name in table["img_filename"] if not (folder / name).is_file()]
    if missing:
        raise _unavailable(root, missing[0], len(missing) - 1)
    return raw_files(root)


def load_splits(root: Path | str) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every WILDS split: ``{name: (image paths, labels, places)}``.

    Parameters
    ----------
    root : Path or str
        Data root (the folder containing ``waterbirds_v1.0/``).

    Returns
    -------
    dict of str to (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        Keys of :data:`WILDS_SPLITS`; absolute image paths (``str`` array, metadata order),
        ``int64`` labels in ``{0, 1}`` and ``int64`` places in ``{0, 1}``.

    Raises
    ------
    DatasetUnavailableError, ValueError
        As :func:`stage`.
    """
    stage(root)
    import wilds

    with warnings.catch_warnings():
        # wilds builds its label tensor from pandas' read-only array; it never writes to it
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        data = wilds.get_dataset(
            "waterbirds", version=VERSION, root_dir=str(root), download=False
        )
    folder = dataset_folder(root)
    # wilds keeps the file names only in this attribute (get_input opens the image)
    names = np.asarray(data._input_array, dtype=str)
    paths = np.asarray([str((folder / n).resolve()) for n in names], dtype=str)
    y = data.y_array.numpy().astype(np.int64)
    place = data.metadata_array[:, 0].numpy().astype(np.int64)
    split = np.asarray(data.split_array, dtype=np.int64)
    out = {}
    for name, code in WILDS_SPLITS.items():
        idx = np.flatnonzero(split == code)
        out[name] = (paths[idx], y[idx], place[idx])
    return out


def load_source(root: Path | str) -> SourceSplits:
    """WILDS ``train`` (training, used whole) and ``val`` (validation)."""
    splits = load_splits(root)
    return SourceSplits(
        train_x=splits["train"][0], train_y=splits["train"][1],
        val_x=splits["val"][0], val_y=splits["val"][1],
    )


def load_target_pool(root: Path | str) -> TargetPool:
    """The WILDS ``test`` split; sub-population of an image = its group ``2 y + place``."""
    paths, y, place = load_splits(root)["test"]
    return TargetPool(
        samples=paths, labels=y, n_classes=N_CLASSES, subgroups=2 * y + place,
        source_subgroups=tuple(range(len(GROUP_NAMES))), novel_subgroups=(),
    )


def _subpop_splits() -> list[Any]:
    from tasks.data.families import TargetSplitSpec

    whole = TargetSplitSpec(WHOLE_TEST_SPLIT, "subpopulation", "test", None)
    return [whole] + [
        TargetSplitSpec(f"subpop-{group}", "subpopulation", group, None, (("group", float(g)),))
        for g, group in enumerate(GROUP_NAMES)
    ]


def _generate_subpop(
    dataset: str, split: Any, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The whole test pool, or the test images of one group (``split.param("group")``)."""
    if pool.subgroups is None:
        raise ValueError(
            f"split {split.name!r} needs a target pool whose subgroups mark the Waterbirds "
            f"groups; dataset {dataset!r} has none."
        )
    groups = np.asarray(pool.subgroups)
    if dict(split.params).get("group") is None:
        idx = np.arange(groups.size, dtype=np.int64)
    else:
        idx = np.flatnonzero(groups == int(split.param("group"))).astype(np.int64)
    if idx.size == 0:
        raise ValueError(
            f"split {split.name!r} of dataset {dataset!r} has no image: the test pool holds "
            f"groups {sorted(int(g) for g in np.unique(groups))}."
        )
    return np.asarray(pool.samples)[idx], np.asarray(pool.labels)[idx]


#: Waterbirds' own ``subpopulation`` family: the whole WILDS test split and each of its groups.
SUBPOP_FAMILY: Final = ShiftFamily("subpopulation", 3, ("image",), _subpop_splits, _generate_subpop)


#: The Waterbirds dataset (registry entry; :mod:`tasks.data.datasets` collects it).
SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME,
        suite="waterbirds",
        description="Waterbirds-WILDS: landbird vs waterbird, test groups (bird x background)",
        modality="image",
        n_classes=N_CLASSES,
        class_names=CLASS_NAMES,
        input_shape=INPUT_SHAPE,
        target_families=("subpopulation",),
        stage=stage,
        raw_files=raw_files,
        load_source=load_source,
        load_target_pool=load_target_pool,
        to_inputs=photos_to_inputs,
        online=True,
        paper_row="Waterbirds-WILDS Subpop (Table 1)",
        backbones=("resnet18",),
        recipes=MappingProxyType({
            "resnet18": MappingProxyType({
                "optimizer": "adam", "lr": 1e-3, "weight_decay": 0.0, "batch_size": 200,
                "epochs": 50, "patience": 5,
            }),
        }),
        own_families=(SUBPOP_FAMILY,),
    ),
)
