"""``zoo-names``: the gender of a first name, from names of Western Europe to the rest of the world.

Data: ``nam_dict.txt`` of the ``gender-guesser`` 0.4.0 wheel (the data file of Jörg Michael's
``gender.c``, released under the GNU Free Documentation License; the package's code is GPLv3),
installed from PyPI and read as a data file (pinned by its SHA-256; the package is not
imported). Each line holds a gender code, a first name (``+`` joins the parts of a compound
name) and, per country of :data:`COUNTRIES`, how common the name is there (a hex digit 1-D, or a
blank). The task is male (``0``) against female (``1``) on the names coded ``M`` or ``F``
(the "mostly", "unisex" and equivalent-name lines are dropped, and so is a name coded both
``M`` and ``F``; a name listed twice is kept once, at its first line); a name's country is the
one where it is most common (first on ties).

Natural shift: region of origin
-------------------------------
======  ====================================================================================
group   countries
======  ====================================================================================
0       source: Western and Northern Europe, the British Isles and the USA (great_britain ...
        finland in :data:`COUNTRIES`)
1       ``east-europe``: Estonia ... Ukraine, Greece, Albania
2       ``west-asia``: Armenia, Azerbaijan, Georgia, the Stans, Turkey, Arabia, Israel
3       ``east-south-asia``: China, India, Japan, Korea, Vietnam
======  ====================================================================================

Names of ``other_countries`` are not used. A name is a short text (one to three words): the
backbones are the MiniLM ones (sub-word pieces carry the signal; a bag of whole words knows
nothing of a name it has not seen).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.datasets._text_sources import stage_package_file
from tasks.data.datasets._zoo import grouped_splits, natural_targets, require_file
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.texts import as_texts, take_texts

__all__ = ["COUNTRIES", "SPECS", "read_names"]

ORDER: Final[int] = 620
NAME: Final[str] = "zoo-names"
FILE: Final[str] = "nam_dict.txt"
SHA256: Final[str] = "bfe79b1f3533d188333c36d7b0722868b873b2d366bb15bed3ed9a4f85db3c8c"
#: The country columns of ``nam_dict.txt``, in order (gender_guesser.Detector.COUNTRIES).
COUNTRIES: Final[tuple[str, ...]] = tuple("""great_britain ireland usa italy malta portugal spain
    france belgium luxembourg the_netherlands east_frisia germany austria swiss iceland denmark
    norway sweden finland estonia latvia lithuania poland czech_republic slovakia hungary romania
    bulgaria bosniaand croatia kosovo macedonia montenegro serbia slovenia albania greece russia
    belarus moldova ukraine armenia azerbaijan georgia the_stans turkey arabia israel china india
    japan korea vietnam other_countries""".split())
#: Region (group) of every country column; -1 = not used.
_REGION: Final[tuple[int, ...]] = (
    *[0] * 20, *[1] * 22, *[2] * 7, *[3] * 5, -1,
)
REGIONS: Final[dict[int, tuple[str, str]]] = {
    1: ("east-europe", "names of Eastern and South-Eastern Europe"),
    2: ("west-asia", "names of Western and Central Asia"),
    3: ("east-south-asia", "names of East and South Asia"),
}
CLASSES: Final[tuple[str, ...]] = ("male", "female")
_COLUMNS: Final[slice] = slice(30, 30 + len(COUNTRIES))


def raw_path(root: Path | str) -> Path:
    """``<root>/zoo-names/raw/nam_dict.txt``."""
    return Path(root) / NAME / "raw" / FILE


def raw_files(root: Path | str) -> list[Path]:
    """The one staged file."""
    return [raw_path(root)]


def stage(root: Path | str) -> list[Path]:
    """Copy ``nam_dict.txt`` out of the installed gender-guesser package, verified."""
    stage_package_file("gender_guesser", f"data/{FILE}", "gender-guesser==0.4.0", raw_path(root),
                       SHA256)
    return raw_files(root)


def read_names(path: Path | str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Names coded ``M``/``F``, their label (0 male, 1 female) and their country column.

    Returns
    -------
    names : list of str
        ``+`` replaced by a space.
    labels : numpy.ndarray
        ``int64``.
    countries : numpy.ndarray
        ``int64`` index into :data:`COUNTRIES` of the country where the name is most common;
        -1 where no country has a value.

    Raises
    ------
    ValueError
        If the file is not UTF-8 or a name line is shorter than its country columns.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 ({exc.reason} at byte {exc.start}).") from None
    names, labels, countries = [], [], []
    for i, line in enumerate(text.splitlines()):
        if not line or line[0] in "#=":
            continue
        code = line.split()[0]
        if code not in ("M", "F"):
            continue
        if len(line) < _COLUMNS.stop:
            raise ValueError(f"{path.name}, line {i + 1}: shorter than its {len(COUNTRIES)} "
                             f"country columns ({len(line)} characters).")
        values = [int(c, 16) if c.strip() else 0 for c in line[_COLUMNS]]
        best = int(np.argmax(values)) if max(values) > 0 else -1
        names.append(line.split()[1].replace("+", " "))
        labels.append(CLASSES.index("male" if code == "M" else "female"))
        countries.append(best)
    genders: dict[str, set[int]] = {}
    for name, label in zip(names, labels, strict=True):
        genders.setdefault(name, set()).add(label)
    keep, seen = [], set()
    for i, name in enumerate(names):  # a name coded both M and F is dropped; one line per name
        if len(genders[name]) == 1 and name not in seen:
            keep.append(i)
            seen.add(name)
    return ([names[i] for i in keep], np.asarray(labels, np.int64)[keep],
            np.asarray(countries, np.int64)[keep])


@lru_cache(maxsize=2)
def _splits(root: str) -> tuple[SourceSplits, TargetPool]:
    names, labels, countries = read_names(require_file(raw_path(root), "zoo-text"))
    region = np.asarray(_REGION + (-1,), np.int64)[countries]  # country -1 -> the trailing -1
    return grouped_splits(
        as_texts(names, FILE), labels, region, len(CLASSES), sizes=(6000, 1500, 1500),
        target_cap=1500, seed=1508, take=take_texts,
        concat=lambda parts: np.concatenate(parts), where=NAME,
    )


def load_source(root: Path | str) -> SourceSplits:
    """Training and validation names of the source region."""
    return _splits(str(Path(root).resolve()))[0]


def load_target_pool(root: Path | str) -> TargetPool:
    """Held-out source names (sub-population 0) and one sub-population per other region."""
    return _splits(str(Path(root).resolve()))[1]


SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME, suite="zoo-text",
        description="gender of a first name: Western Europe -> Eastern Europe, W. and E. Asia",
        modality="text", n_classes=2, class_names=CLASSES, input_shape=(128,),
        target_families=("clean", "synthetic", "label_shift", "natural"),
        stage=stage, raw_files=raw_files, load_source=load_source,
        load_target_pool=load_target_pool, backbones=("minilm-mlp", "minilm-ft"),
        natural_targets=natural_targets({g: (n, n) for g, (n, _) in REGIONS.items()}),
        source_package="gender-guesser==0.4.0 (PyPI)",
        licence="GNU FDL (nam_dict.txt); package code GPLv3", in_default_bench=False,
    ),
)
