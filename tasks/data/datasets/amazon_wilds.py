"""``amazon-wilds``: Amazon-WILDS star ratings read with ``wilds``, the ALSA paper's A-WILDS rows.

Data
----
WILDS Amazon v2.1 (Koh et al. 2021; reviews from Ni et al. 2019, research use only), the version
that ``wilds`` 2.0.0 downloads. The task: predict the star rating (5 classes, ``0`` = 1 star ...
``4`` = 5 stars) of a product review from its text (``reviewText``). The official split scheme
(``user``) holds 539,502 reviews: shifts to reviewers never seen in training.

====================  ===========  =========  ==========================================
WILDS split           code         reviews    here
====================  ===========  =========  ==========================================
``train``             0            245,502    source training split
``id_val``            2             46,950    validation (``val`` in DuckDB)
``id_test``           4             46,950    target ``clean`` (pool sub-population 0)
``val`` (OOD)         1            100,050    target ``subpop1`` (paper: A-WILDS Subpop1)
``test`` (OOD)        3            100,050    target ``subpop2`` (paper: A-WILDS Subpop2)
====================  ===========  =========  ==========================================

The paper (App. F, H) uses ``id_val`` for validation and the OOD validation and test sets as the
two targets, "Subpop1" and "Subpop2"; the in-distribution test set is the extra ``clean``
target that every suite of this benchmark has. The target splits are made by the ``clean``
family (:mod:`tasks.data.shifts.text`) and the text ``subpopulation`` family
(:mod:`tasks.data.shifts.wilds_text`). Nothing is sub-sampled or re-balanced: the WILDS splits are
used as they are (the class-imbalance protocol of :mod:`tasks.data.spec` does not apply;
Amazon ratings are naturally skewed towards 5 stars).

On-disk layout (read by ``wilds``, never downloaded here)
--------------------------------------------------------
``wilds.get_dataset("amazon", root_dir=<root>, download=True)`` unpacks the release into
``<root>/amazon_v2.1/``::

    RELEASE_v2.1.txt     wilds' marker that the release is complete (without it wilds downloads)
    reviews.csv          every review of every split scheme, csv.QUOTE_NONNUMERIC, columns
                         reviewerID, asin, overall (1-5, a number), reviewTime, unixReviewTime,
                         reviewText, summary, verified, category, reviewYear
    splits/user.csv      column ``split``: one code per review row (-1 = not in the dataset)

``<root>`` is the pipeline's data root (``$ALSA_BENCH_HOME/data``). :func:`stage` only checks
that the three files are there and look like the release; the loaders call
``wilds.datasets.amazon_dataset.AmazonDataset(version="2.1", root_dir=root, download=False,
split_scheme="official")`` and check every text and label on the way in
(:func:`tasks.data.texts.as_texts`, :func:`tasks.data.texts.as_text_labels`): an empty review or a star
rating that is not an integer 1-5 (which ``wilds`` would silently turn into class ``-1``) is
refused with the WILDS split, the row within it, and the data row of ``reviews.csv`` named.

Cost
----
``wilds`` parses the whole ``reviews.csv`` with pandas on the first load of a process (about
2 GB compressed; expect minutes and several GB of memory); the parsed splits are then kept for
the process (:func:`functools.lru_cache`). Later stages hash the raw files
(:func:`raw_files`) to check the data did not change. Fine-tuning DistilBERT on the 245,502
training reviews and predicting the 294,000 evaluation reviews is GPU work; see
docs/TEXT_ONLINE.md for CPU runs on a subset (``--max-train-samples``).
"""

from __future__ import annotations

import csv
import logging
import re
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

import numpy as np

from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.texts import as_text_labels, as_texts

__all__ = [
    "CLASS_NAMES",
    "DATASET_DIR",
    "FETCH_HINT",
    "N_CLASSES",
    "RAW_FILES",
    "SPECS",
    "SPLIT_SCHEME",
    "VERSION",
    "WILDS_SPLITS",
    "dataset_folder",
    "load_source",
    "load_splits",
    "load_target_pool",
    "raw_files",
    "stage",
]

logger = logging.getLogger(__name__)

#: Registry position (after the offline text suite).
ORDER: Final[int] = 320

#: Release version read (the latest that wilds 2.0.0 knows and downloads).
VERSION: Final[str] = "2.1"
#: Folder wilds unpacks the release into, under the data root.
DATASET_DIR: Final[str] = f"amazon_v{VERSION}"
#: WILDS split scheme: ``official`` = ``user`` (unseen reviewers).
SPLIT_SCHEME: Final[str] = "user"
#: Files of the release that the loader reads, relative to ``<root>/amazon_v2.1``.
RAW_FILES: Final[tuple[str, ...]] = (
    f"RELEASE_v{VERSION}.txt",
    "reviews.csv",
    f"splits/{SPLIT_SCHEME}.csv",
)
#: Columns of the release's ``reviews.csv``.
REVIEW_COLUMNS: Final[tuple[str, ...]] = (
    "reviewerID", "asin", "overall", "reviewTime", "unixReviewTime", "reviewText", "summary",
    "verified", "category", "reviewYear",
)
#: WILDS split codes of the ``user`` scheme, in the order the loader reads them.
WILDS_SPLITS: Final[dict[str, int]] = {
    "train": 0, "id_val": 2, "id_test": 4, "val": 1, "test": 3,
}
#: Pool sub-population of each evaluation split (0 = in-distribution, 1 = Subpop1, 2 = Subpop2).
POOL_SUBGROUPS: Final[dict[str, int]] = {"id_test": 0, "val": 1, "test": 2}

N_CLASSES: Final[int] = 5
CLASS_NAMES: Final[tuple[str, ...]] = ("1 star", "2 stars", "3 stars", "4 stars", "5 stars")

#: How to get the data (``{root}`` is filled in).
FETCH_HINT: Final[str] = (
    "on a machine with internet run `python -c \"import wilds; wilds.get_dataset('amazon', "
    "root_dir='{root}', download=True)\"` (wilds 2.0.0 downloads Amazon v2.1, a ~2 GB archive, "
    "and unpacks it into {root}/{folder}), then copy the folder {folder}/ to {root}/ here; "
    "alsa-bench never downloads it"
)


def dataset_folder(root: Path | str) -> Path:
    """``<root>/amazon_v2.1``: the folder wilds unpacks the release into (no IO)."""
    return Path(root) / DATASET_DIR


def raw_files(root: Path | str) -> list[Path]:
    """The release files the loader reads, in :data:`RAW_FILES` order (no IO)."""
    folder = dataset_folder(root)
    return [folder / rel for rel in RAW_FILES]


def _hint(root: Path) -> str:
    return FETCH_HINT.format(root=str(root), folder=DATASET_DIR)


def _missing_message(root: Path, missing: list[str]) -> str:
    folder = dataset_folder(root)
    if not folder.is_dir():
        what = f"Amazon-WILDS not found: no folder {str(folder)!r}"
        others = sorted(p.name for p in root.glob("amazon_v*") if p.is_dir())
        if root.name == DATASET_DIR or (root / "reviews.csv").is_file():
            what += (
                f" (the data root must be the folder that contains {DATASET_DIR}/, i.e. "
                f"{str(root.parent)!r})"
            )
        elif others:
            what += (
                f" (found {', '.join(others)}; this benchmark reads version {VERSION}, the one "
                f"wilds 2.0.0 downloads)"
            )
    else:
        what = f"Amazon-WILDS is incomplete under {str(folder)!r}: missing {', '.join(missing)}"
    return f"{what}; {_hint(root)}."


def _header(path: Path) -> list[str]:
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(
            f"Amazon-WILDS file {str(path)!r} is not a readable UTF-8 CSV ({exc})."
        ) from exc


def stage(root: Path | str) -> list[Path]:
    """Check that the Amazon-WILDS release is under ``<root>/amazon_v2.1``; download nothing.

    Parameters
    ----------
    root : Path or str
        Data root: the ``root_dir`` given to wilds, the folder containing ``amazon_v2.1/``.

    Returns
    -------
    list of Path
        :func:`raw_files`.

    Raises
    ------
    FileNotFoundError
        If the folder or one of :data:`RAW_FILES` is missing: one message saying what is
        missing, where it looked and how to get the data (:data:`FETCH_HINT`).
    ValueError
        If ``reviews.csv`` lacks a column of :data:`REVIEW_COLUMNS` or the split file has no
        ``split`` column.
    """
    root = Path(root)
    paths = raw_files(root)
    missing = [rel for rel, path in zip(RAW_FILES, paths) if not path.is_file()]
    if missing:
        raise FileNotFoundError(_missing_message(root, missing))
    header = _header(paths[1])
    absent = [c for c in REVIEW_COLUMNS if c not in header]
    if absent:
        raise ValueError(
            f"Amazon-WILDS file {str(paths[1])!r} must have the columns "
            f"{', '.join(REVIEW_COLUMNS)}; it lacks {', '.join(absent)} (header {header[:12]})."
            f" It is not the WILDS release file."
        )
    if "split" not in _header(paths[2]):
        raise ValueError(
            f"Amazon-WILDS split file {str(paths[2])!r} must have a column 'split'; got "
            f"{_header(paths[2])[:6]}."
        )
    return paths


def _csv_rows(root: Path) -> np.ndarray:
    """Data row of ``reviews.csv`` (0-based, header not counted) of every wilds dataset index."""
    import pandas as pd

    codes = pd.read_csv(raw_files(root)[2], usecols=["split"])["split"].to_numpy()
    return np.flatnonzero(codes != -1)


def _row_note(root: Path, split: str, dataset_index: np.ndarray, row: int) -> str:
    try:
        csv_row = int(_csv_rows(root)[dataset_index[row]])
    except Exception:  # the note is a convenience; the split and row are already named
        return f" (WILDS split {split!r}, code {WILDS_SPLITS[split]} in splits/{SPLIT_SCHEME}.csv)"
    return (
        f" (WILDS split {split!r}, code {WILDS_SPLITS[split]}; it is data row {csv_row} of "
        f"{str(raw_files(root)[1])!r}, 0-based, header not counted)"
    )


def _as_rating(value: Any) -> int | None:
    """The class of a raw ``overall`` value, or None when it is not an integer 1-5."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        v = float(value)
        if v.is_integer() and 1 <= v <= 5:
            return int(v) - 1
    return None


def _dataset_parts(root: Path) -> dict[str, np.ndarray]:
    """wilds dataset indices of every split, from the split file (as ``AmazonDataset`` has them)."""
    import pandas as pd

    codes = pd.read_csv(raw_files(root)[2], usecols=["split"])["split"].to_numpy()
    codes = codes[codes != -1]
    return {name: np.flatnonzero(codes == code) for name, code in WILDS_SPLITS.items()}


def _bad_rating(root: Path) -> ValueError | None:
    """The error for the first star rating that is not an integer 1-5, or None.

    ``wilds`` maps such a rating to class ``-1`` (newer pandas: raises), and one quoted rating
    makes pandas read the whole column as text, so that no rating maps; this re-reads the
    column the way wilds does and names the first bad value, or the quoting.
    """
    import pandas as pd

    try:
        overall = pd.read_csv(
            raw_files(root)[1], usecols=["overall"], keep_default_na=False, na_values=[],
            quoting=csv.QUOTE_NONNUMERIC,
        )["overall"].to_numpy()[_csv_rows(root)]
        parts = _dataset_parts(root)
    except (OSError, ValueError, KeyError, IndexError, pd.errors.ParserError):
        return None
    for split, index in parts.items():
        for row, i in enumerate(index):
            if _as_rating(overall[i]) is None:
                value = overall[i].item() if isinstance(overall[i], np.generic) else overall[i]
                return ValueError(
                    f"split {split!r}, row {row}: the star rating (column overall) must be an "
                    f"integer from 1 to 5; got {type(value).__name__} {value!r:.40}"
                    f"{_row_note(root, split, index, row)}."
                )
    if overall.size and all(isinstance(v, str) for v in overall):
        split = next(name for name, index in parts.items() if index.size)
        return ValueError(
            f"{str(raw_files(root)[1])!r}: wilds read the star ratings (column overall) as text, "
            f"so none maps to a class (split {split!r}, row 0 holds "
            f"{overall[parts[split][0]]!r}); some rating is quoted: every rating must be an "
            f"unquoted number from 1 to 5."
        )
    return None


def _read(root: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Texts and labels of every WILDS split, checked (see the module docstring)."""
    stage(root)
    import pandas as pd
    from wilds.datasets.amazon_dataset import AmazonDataset

    try:
        with warnings.catch_warnings():
            # a rating outside 1-5 becomes class -1 (checked below), which pandas deprecates
            warnings.filterwarnings("ignore", message="Constructing a Categorical with a dtype")
            data = AmazonDataset(
                version=VERSION, root_dir=str(root), download=False, split_scheme="official"
            )
    except (ValueError, KeyError, TypeError, pd.errors.ParserError) as exc:
        bad = _bad_rating(root)
        if bad is not None:
            raise bad from None
        raise ValueError(
            f"wilds could not read the Amazon-WILDS release under {str(dataset_folder(root))!r} "
            f"({type(exc).__name__}: {exc}); delete it and fetch it again: {_hint(root)}."
        ) from exc
    split_array = np.asarray(data.split_array)
    y = data.y_array.numpy().astype(np.int64)
    parts = {
        name: np.flatnonzero(split_array == code).astype(np.int64)
        for name, code in WILDS_SPLITS.items()
    }
    empty = [name for name, index in parts.items() if index.size == 0]
    if empty:
        raise ValueError(
            f"Amazon-WILDS under {str(dataset_folder(root))!r} has no reviews in the WILDS "
            f"split(s) {', '.join(empty)} of splits/{SPLIT_SCHEME}.csv; every split of "
            f"{', '.join(WILDS_SPLITS)} must hold reviews."
        )
    if (y < 0).any():
        raise _bad_rating(root) or ValueError(
            f"wilds mapped some star ratings of {str(raw_files(root)[1])!r} to no class (-1); "
            f"every rating (column overall) must be an unquoted number from 1 to 5."
        )
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, index in parts.items():
        raw = [data.get_input(int(i)) for i in index]
        try:
            texts = as_texts(raw, name)
            labels = as_text_labels(y[index], N_CLASSES, name)
        except ValueError as exc:
            found = re.search(r"row (\d+)", str(exc))
            note = _row_note(root, name, index, int(found.group(1))) if found else ""
            raise ValueError(f"{str(exc).rstrip('.')}{note}.") from None
        out[name] = (texts, labels)
    del data
    logger.info(
        "Amazon-WILDS %s: %s", VERSION,
        ", ".join(f"{name} {labels.size}" for name, (_, labels) in out.items()),
    )
    return out


@lru_cache(maxsize=1)
def _cached(root: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return _read(Path(root))


def load_splits(root: Path | str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every WILDS split of the ``user`` scheme: ``{name: (texts, labels)}``.

    Parameters
    ----------
    root : Path or str
        Data root (the folder containing ``amazon_v2.1/``).

    Returns
    -------
    dict of str to (numpy.ndarray, numpy.ndarray)
        Keys of :data:`WILDS_SPLITS`; texts an ``object`` array of ``str``, labels ``int64``
        in ``[0, 5)`` (stars minus one). Cached per resolved root for the process.

    Raises
    ------
    FileNotFoundError
        If the release is not there (:func:`stage`).
    ValueError
        If wilds cannot parse it, a split is empty, a review text is empty or not valid text,
        or a star rating is not an integer 1-5 (naming the split, the row within it and the
        data row of ``reviews.csv``).
    """
    return _cached(str(Path(root).resolve()))


def load_source(root: Path | str) -> SourceSplits:
    """WILDS ``train`` (training) and ``id_val`` (validation)."""
    splits = load_splits(root)
    return SourceSplits(
        train_x=splits["train"][0], train_y=splits["train"][1],
        val_x=splits["id_val"][0], val_y=splits["id_val"][1],
    )


def load_target_pool(root: Path | str) -> TargetPool:
    """``id_test`` (sub-population 0), OOD ``val`` (1) and OOD ``test`` (2), concatenated."""
    splits = load_splits(root)
    names = list(POOL_SUBGROUPS)
    samples = np.concatenate([splits[n][0] for n in names])
    labels = np.concatenate([splits[n][1] for n in names])
    groups = np.concatenate([
        np.full(splits[n][1].size, POOL_SUBGROUPS[n], dtype=np.int64) for n in names
    ])
    return TargetPool(
        samples=samples, labels=labels, n_classes=N_CLASSES, subgroups=groups,
        source_subgroups=(0,), novel_subgroups=(1, 2),
    )


SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name="amazon-wilds",
        suite="amazon-wilds",
        description="Amazon-WILDS v2.1 star ratings (user split): OOD reviewers = Subpop1/2",
        modality="text",
        n_classes=N_CLASSES,
        class_names=CLASS_NAMES,
        input_shape=(512,),
        target_families=("clean", "subpopulation"),
        stage=stage,
        raw_files=raw_files,
        load_source=load_source,
        load_target_pool=load_target_pool,
        online=True,
        paper_row="A-WILDS Subpop1, Subpop2 (Table 1)",
        backbones=("distilbert",),
    ),
)
