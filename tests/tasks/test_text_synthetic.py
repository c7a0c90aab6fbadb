"""Text corruptions of the ``synthetic`` family (tasks/data/shifts/text_synthetic.py)."""

from __future__ import annotations

import difflib
import string
from collections import Counter

import numpy as np
import pytest

from tasks.data.spec import TargetPool
from tasks.data.targets import family_implementation
from tasks.data.families import split_rng
from tasks.data.shifts.text_synthetic import (
    FAMILIES,
    TEXT_BASE_SUBSET_SIZE,
    TEXT_CORRUPTIONS,
    TEXT_PARAMETERS,
    TEXT_SEVERITIES,
    corrupt_texts,
    text_base_subset,
)

_SUBJECTS = (
    "the film", "this movie", "the director", "its cast", "the script", "Nolan's sequel",
    "the story", "a documentary", "the lead actress", "this comedy", "Spielberg", "the score",
)
_VERBS = ("is", "feels", "remains", "proves", "seems", "becomes")
_ADJECTIVES = (
    "brilliant", "tedious", "charming", "overlong", "heartfelt", "clumsy", "gorgeous",
    "predictable", "smart", "bland", "moving", "forgettable", "witty", "shallow",
)
_ADVERBS = ("often", "rarely", "surprisingly", "utterly", "almost", "never quite", "consistently")
_TAILS = (
    "from start to finish", "despite its flaws", "in the best possible way",
    "for most of its 120 minutes", "even when the plot drags", "and the audience knows it",
    "but never boring", "-- a rare treat in 2002", "without much to say about love or loss",
)
_SNIPPETS = (
    "the rock is destined to be the 21st century's new \" conan \" and that he's going to make "
    "a splash even greater than arnold schwarzenegger , jean-claud van damme or steven segal .",
    "It Is a Simply Brilliant, Often Moving and Clever film -- Smart; Bold!",
    "simplistic , silly and tedious .",
    "effective but too-tepid biopic",
)


def _sentences(n: int = 100) -> list[str]:
    """``n`` review-like sentences (mixed case, punctuation, digits), seeded."""
    rng = np.random.default_rng(7)

    def pick(options: tuple[str, ...]) -> str:
        return options[int(rng.integers(len(options)))]

    out = list(_SNIPPETS)
    while len(out) < n:
        s = f"{pick(_SUBJECTS)} {pick(_VERBS)} {pick(_ADVERBS)} {pick(_ADJECTIVES)} and "
        s += f"{pick(_ADJECTIVES)}, {pick(_TAILS)}"
        if rng.random() < 0.5:
            s += f"; {pick(_SUBJECTS)} {pick(_VERBS)} {pick(_ADJECTIVES)}"
        s += pick((".", "!", " ...", "?"))
        out.append(s[0].upper() + s[1:] if rng.random() < 0.5 else s)
    return out


SENTENCES = _sentences()
NAMES = list(TEXT_CORRUPTIONS)


def _damage(a: str, b: str) -> float:
    """Character-level edit damage: ``1 - ratio`` of difflib's matching blocks."""
    return 1.0 - difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _words(text: str) -> Counter[str]:
    """Multiset of lower-cased words without punctuation (empty ones dropped)."""
    table = str.maketrans("", "", string.punctuation)
    return Counter(w for w in (t.lower().translate(table) for t in text.split()) if w)


def _qwerty_neighbours(a: str, b: str) -> bool:
    """Whether keys ``a`` and ``b`` touch on a staggered QWERTY keyboard (from geometry)."""
    rows = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
    offsets = (0.0, 0.25, 0.75)
    where = {c: (r, j + offsets[r]) for r, row in enumerate(rows) for j, c in enumerate(row)}
    (ra, xa), (rb, xb) = where[a], where[b]
    if ra == rb:
        return abs(xa - xb) == 1.0
    return abs(ra - rb) == 1 and abs(xa - xb) < 1.0


# ----------------------------------------------------------------------------- registry


def test_table_of_corruptions_and_parameters():
    assert len(TEXT_CORRUPTIONS) >= 7
    assert NAMES[:7] == [
        "keyboard_typo", "char_swap", "char_delete", "word_dropout", "word_shuffle",
        "case_punct", "ocr_confusion",
    ]
    assert TEXT_SEVERITIES == (1, 2, 3, 4, 5)
    assert set(TEXT_PARAMETERS) == set(TEXT_CORRUPTIONS)
    for name, (parameter, values) in TEXT_PARAMETERS.items():
        assert parameter in ("rate", "window"), name
        assert len(values) == 5 and all(a < b for a, b in zip(values, values[1:])), name


# ----------------------------------------------------------------------------- behaviour


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_and_seed_dependent(name):
    texts = SENTENCES[:40]
    out = corrupt_texts(texts, name, 3, np.random.default_rng(11))
    again = corrupt_texts(np.array(texts, dtype=object), name, 3, np.random.default_rng(11))
    other = corrupt_texts(tuple(texts), name, 3, np.random.default_rng(12))

    assert out.dtype == object and out.shape == (40,)
    assert all(type(t) is str and t.strip() for t in out)
    assert out.tolist() == again.tolist()
    assert out.tolist() != other.tolist()
    assert out.tolist() != texts


@pytest.mark.parametrize("name", NAMES)
def test_damage_grows_strictly_with_severity(name):
    damage = []
    for severity in TEXT_SEVERITIES:
        out = corrupt_texts(SENTENCES, name, severity, np.random.default_rng(3))
        damage.append(float(np.mean([_damage(a, b) for a, b in zip(SENTENCES, out)])))

    assert damage[0] > 0.0
    assert all(a < b for a, b in zip(damage, damage[1:])), damage


@pytest.mark.parametrize("name", ["word_shuffle", "case_punct"])
@pytest.mark.parametrize("severity", TEXT_SEVERITIES)
def test_shuffle_and_case_punct_keep_the_words(name, severity):
    out = corrupt_texts(SENTENCES, name, severity, np.random.default_rng(severity))

    for before, after in zip(SENTENCES, out):
        assert _words(after) == _words(before), (before, after)


@pytest.mark.parametrize("severity", TEXT_SEVERITIES)
def test_word_dropout_keeps_order_and_never_empties(severity):
    texts = SENTENCES + ["brilliant", "not good", "a b", "dull ."]
    for seed in range(5):
        out = corrupt_texts(texts, "word_dropout", severity, np.random.default_rng(seed))
        for before, after in zip(texts, out):
            words, kept = before.split(), after.split()
            assert 1 <= len(kept) <= len(words)
            it = iter(words)
            assert all(w in it for w in kept), (before, after)  # an ordered subsequence


@pytest.mark.parametrize("severity", TEXT_SEVERITIES)
def test_keyboard_typo_substitutes_qwerty_neighbours_in_case(severity):
    out = corrupt_texts(SENTENCES, "keyboard_typo", severity, np.random.default_rng(4))
    changed = 0
    for before, after in zip(SENTENCES, out):
        assert len(after) == len(before)
        for a, b in zip(before, after):
            if a == b:
                continue
            changed += 1
            assert a in string.ascii_letters and b in string.ascii_letters, (a, b)
            assert a.isupper() == b.isupper(), (a, b)
            assert _qwerty_neighbours(a.lower(), b.lower()), (a, b)
    assert changed > 0


@pytest.mark.parametrize("name", ["keyboard_typo", "char_delete", "word_dropout"])
def test_one_seed_hits_more_at_higher_severity(name):
    """With one seed, the damage of a text at a severity includes that of the lower one."""
    low = corrupt_texts(SENTENCES, name, 2, np.random.default_rng(9))
    high = corrupt_texts(SENTENCES, name, 4, np.random.default_rng(9))
    for text, a, b in zip(SENTENCES, low, high):
        if name == "keyboard_typo":
            hit_low = {i for i, (x, y) in enumerate(zip(text, a)) if x != y}
            assert all(b[i] == a[i] for i in hit_low)
        else:  # deletions: the high output is a subsequence of the low one
            split = list if name == "char_delete" else str.split
            it = iter(split(a))
            assert all(u in it for u in split(b)), (a, b)


@pytest.mark.parametrize("name", NAMES)
def test_never_returns_an_empty_text(name):
    texts = ["a", "I", "!", ". ,", "ok .", "Hi", "rn", "a b c"]
    for seed in range(20):
        out = corrupt_texts(texts, name, 5, np.random.default_rng(seed))
        assert all(t.strip() for t in out), out


def test_ocr_confusion_uses_ocr_readings():
    out = corrupt_texts(["modern clay ISLE BOB"] * 50, "ocr_confusion", 5, np.random.default_rng(0))
    seen = " ".join(out)
    assert "modem" in seen and "rnod" in seen and "day" in seen  # rn -> m, m -> rn, cl -> d
    assert "0" in seen and "5" in seen and "8" in seen and "l5LE" in seen  # O, S, B, I
    assert all(set(t) <= set("modern clay ISLE BOB") | set("rn1l0cdoOq5b8vfI2hwe") for t in out)


def test_empty_batch():
    out = corrupt_texts([], "char_swap", 1, np.random.default_rng(0))
    assert out.dtype == object and out.shape == (0,)


# ----------------------------------------------------------------------------- bad input


def test_unknown_name_lists_the_corruptions():
    with pytest.raises(ValueError, match="name") as err:
        corrupt_texts(["fine"], "gaussian_noise", 1, np.random.default_rng(0))
    assert all(n in str(err.value) for n in NAMES)


@pytest.mark.parametrize("severity", [0, 6, -1, True, "3", 3.0, None])
def test_bad_severity(severity):
    with pytest.raises(ValueError, match="severity"):
        corrupt_texts(["fine"], "char_swap", severity, np.random.default_rng(0))


@pytest.mark.parametrize(
    "texts",
    [
        ["fine", 3],
        ["fine", b"bytes"],
        ["fine", None],
        np.array([["a", "b"], ["c", "d"]], dtype=object),
        "a single text",
        ["fine", "   "],
        ["fine", ""],
        42,
    ],
)
def test_bad_texts(texts):
    with pytest.raises(ValueError, match="texts"):
        corrupt_texts(texts, "char_swap", 2, np.random.default_rng(0))


def test_bad_rng():
    with pytest.raises(TypeError, match="rng"):
        corrupt_texts(["fine"], "char_swap", 2, 0)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- family


def _pool(n_per_class: int = 300) -> TargetPool:
    """Texts that carry their label and index: ``"<good|bad> film number <i> ..."``."""
    samples, labels = [], []
    for i in range(2 * n_per_class):
        label = i % 2
        word = "good" if label else "bad"
        samples.append(f"a {word} film , number {i} , with a {word} cast and a {word} story .")
        labels.append(label)
    return TargetPool(
        samples=np.array(samples, dtype=object), labels=np.array(labels, dtype=np.int64),
        n_classes=2,
    )


def test_family_registers_for_text():
    (family,) = FAMILIES
    assert (family.name, family.order, family.modalities) == ("synthetic", 1, ("text",))
    assert family_implementation("synthetic", "text") is family
    assert family_implementation("synthetic", "image") is not family

    splits = family.splits()
    names = [s.name for s in splits]
    assert len(splits) == len(TEXT_CORRUPTIONS) * 5 and len(set(names)) == len(names)
    for s in splits:
        assert s.shift_family == "synthetic" and s.shift in TEXT_CORRUPTIONS
        assert s.name == f"{s.shift}-{s.severity}"
        parameter, values = TEXT_PARAMETERS[s.shift]
        assert s.param("severity") == float(s.severity)
        assert s.param(parameter) == float(values[s.severity - 1])
        assert s.param("size") == float(TEXT_BASE_SUBSET_SIZE)


def test_generate_through_the_family():
    (family,) = FAMILIES
    pool = _pool()
    idx = text_base_subset("rt-test", pool)
    assert idx.size == TEXT_BASE_SUBSET_SIZE
    assert np.bincount(pool.labels[idx]).tolist() == [TEXT_BASE_SUBSET_SIZE // 2] * 2
    by_name = {s.name: s for s in family.splits()}

    for name in ("word_shuffle-5", "case_punct-4", "keyboard_typo-3", "word_dropout-5"):
        split = by_name[name]
        texts, labels = family.generate("rt-test", split, pool, split_rng("rt-test", name))
        again, _ = family.generate("rt-test", split, pool, split_rng("rt-test", name))

        assert texts.dtype == object and texts.shape == (TEXT_BASE_SUBSET_SIZE,)
        assert labels.dtype == np.int64 and np.array_equal(labels, pool.labels[idx])
        assert texts.tolist() == again.tolist()
        assert all(type(t) is str and t.strip() for t in texts)
        if split.shift in ("word_shuffle", "case_punct"):
            for t, i, y in zip(texts, idx, labels):
                assert _words(t) == _words(pool.samples[i])  # the text of the same sample
                assert ("good" if y else "bad") in _words(t)
        elif split.shift == "word_dropout":
            for t, i in zip(texts, idx):
                assert set(t.split()) <= set(pool.samples[i].split())
