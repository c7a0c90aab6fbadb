"""``zoo-afinn``: the polarity of a word, from English words to Danish words and emoticons.

Data: the AFINN sentiment lexicons (Finn Årup Nielsen 2011; Open Database License, ODbL 1.0)
in ``afinn/data/`` of the ``afinn`` 0.1 sdist, read as an archive of data (:mod:`._zoo`): each
line is a word or phrase, a tab, and its valence, an integer from -5 to 5 rated by hand. The
task is negative (``0``, valence < 0) against positive (``1``, valence > 0); a text is one
entry (``"abandon"``, ``"cool stuff"``, ``":-)"``).

Natural shift: language and symbol
----------------------------------
=====  ==============  ====================================================================
group  split           entries
=====  ==============  ====================================================================
0      source          ``AFINN-en-165.txt``: 3,380 English words and phrases
1      ``danish``      ``AFINN-da-32.txt``: 3,552 Danish words (another language: the
                       encoder is English, the lexicon was made the same way)
2      ``emoticons``   ``AFINN-emoticon-8.txt``: 95 emoticons (symbols, no words at all)
=====  ==============  ====================================================================

A single word holds no second word to count: the backbones are the MiniLM ones (sub-word pieces
carry the signal), not the bag of words.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.datasets._zoo import grouped_splits, natural_targets, require_file, stage_zoo_member
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.texts import as_texts, take_texts

__all__ = ["SPECS", "read_lexicon"]

ORDER: Final[int] = 625
NAME: Final[str] = "zoo-afinn"
ARCHIVE: Final[str] = "afinn-0.1.tar.gz"
#: Lexicon file -> (group, pinned SHA-256).
FILES: Final[dict[str, tuple[int, str]]] = {
    "AFINN-en-165.txt": (0, "3a06ace6047b203fc1adff0dd3d498ff68528d9206b84242fbce4fc2083a389b"),
    "AFINN-da-32.txt": (1, "3c00ad7d9ce24ff540016ae3f092ea87a404c5018b4464ef2136d62a4c4f2fa1"),
    "AFINN-emoticon-8.txt": (
        2, "3ac601e37182b0ba183ce90d7b1ad41bed1ed371f5cb758bf577f0285e746e17"),
}
GROUPS: Final[dict[int, tuple[str, str]]] = {1: ("danish", "danish"), 2: ("emoticons", "emoticons")}
CLASSES: Final[tuple[str, ...]] = ("negative", "positive")


def raw_folder(root: Path | str) -> Path:
    """``<root>/zoo-afinn/raw``."""
    return Path(root) / NAME / "raw"


def raw_files(root: Path | str) -> list[Path]:
    """The three staged lexicons."""
    return [raw_folder(root) / name for name in FILES]


def stage(root: Path | str) -> list[Path]:
    """Read the three lexicons out of the afinn sdist, each verified."""
    for name, (_, sha256) in FILES.items():
        stage_zoo_member(ARCHIVE, f"afinn-0.1/afinn/data/{name}", raw_folder(root) / name, sha256)
    return raw_files(root)


def read_lexicon(path: Path | str) -> tuple[list[str], np.ndarray]:
    """Entries with a non-zero valence and their polarity (0 negative, 1 positive).

    Raises
    ------
    ValueError
        If the file is not UTF-8, or a line is not ``<entry><TAB><integer>``.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 ({exc.reason} at byte {exc.start}).") from None
    words, labels = [], []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        entry, sep, value = line.rpartition("\t")
        if not sep or not entry.strip() or not value.strip().lstrip("-+").isdigit():
            raise ValueError(f"{path.name}, line {i + 1}: expected <entry><TAB><valence>; got "
                             f"{line!r:.60}.")
        if int(value) != 0:
            words.append(entry.strip())
            labels.append(1 if int(value) > 0 else 0)
    return words, np.asarray(labels, np.int64)


@lru_cache(maxsize=2)
def _splits(root: str) -> tuple[SourceSplits, TargetPool]:
    words: list[str] = []
    labels, groups = [], []
    for name, (group, _) in FILES.items():
        found, y = read_lexicon(require_file(raw_folder(root) / name, "zoo-text"))
        words += found
        labels.append(y)
        groups.append(np.full(y.size, group, np.int64))
    return grouped_splits(
        as_texts(words, NAME), np.concatenate(labels), np.concatenate(groups), 2,
        sizes=(2000, 600, 780), target_cap=2000, seed=2011, take=take_texts,
        concat=lambda parts: np.concatenate(parts), where=NAME,
    )


def load_source(root: Path | str) -> SourceSplits:
    """Training and validation entries of the English lexicon."""
    return _splits(str(Path(root).resolve()))[0]


def load_target_pool(root: Path | str) -> TargetPool:
    """Held-out English entries (sub-population 0), Danish words (1), emoticons (2)."""
    return _splits(str(Path(root).resolve()))[1]


SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME, suite="zoo-text",
        description="polarity of an AFINN lexicon entry: English -> Danish words, emoticons",
        modality="text", n_classes=2, class_names=CLASSES, input_shape=(128,),
        target_families=("clean", "synthetic", "label_shift", "natural"),
        stage=stage, raw_files=raw_files, load_source=load_source,
        load_target_pool=load_target_pool, backbones=("minilm-mlp", "minilm-ft"),
        natural_targets=natural_targets(GROUPS),
        source_package="afinn==0.1 (PyPI sdist, read as data)",
        licence="ODbL 1.0 (AFINN lexicons)", in_default_bench=False,
    ),
)
