"""Synthetic shift for text: 7 seeded character- and word-level corruptions at 5 severities.

The text counterpart of :mod:`.synthetic` (same family name ``synthetic``, same report order),
for datasets of the ``text`` modality, whose samples are 1-d ``object`` arrays of Python
``str`` (e.g. Rotten Tomatoes snippets). Every corruption is a pure function
``f(text, severity, rng) -> str`` of one text, its severity (1 mild to 5 strong) and a seeded
:class:`numpy.random.Generator`; :func:`corrupt_texts` applies one to a batch, giving each text
its own child generator drawn from the batch's generator.

Random draws never depend on the severity: a corruption draws the same arrays (one uniform per
character or word, and for substitutions one more to pick the replacement) at every severity and
compares them with the severity's parameter. So with one seed a higher severity hits a superset
of the positions of a lower one, with the same replacements (``char_swap`` nearly so, since its
pairs never overlap; ``word_shuffle`` sorts the same random keys in larger windows), and outputs
depend only on the texts, the corruption, the severity and the seed. No corruption ever returns
an empty (or whitespace-only) text: where one would, the text's first word is kept.

=================  =====  ==================================  ============================
corruption         level  parameter                           severities 1 … 5
=================  =====  ==================================  ============================
``keyboard_typo``  char   rate: fraction of letters replaced  0.02, 0.05, 0.10, 0.20, 0.30
``char_swap``      char   rate: fraction of letter pairs      0.02, 0.05, 0.10, 0.20, 0.30
``char_delete``    char   rate: fraction of letters deleted   0.02, 0.05, 0.10, 0.20, 0.30
``word_dropout``   word   rate: fraction of words dropped     0.05, 0.10, 0.20, 0.30, 0.40
``word_shuffle``   word   window: words per shuffled window   2, 3, 4, 6, 8
``case_punct``     char   rate: per letter, mark and word     0.02, 0.05, 0.10, 0.20, 0.30
``ocr_confusion``  char   rate: fraction of confusable units  0.05, 0.10, 0.20, 0.35, 0.50
=================  =====  ==================================  ============================

What they do (``TEXT_CORRUPTIONS`` keys, parameters in :data:`TEXT_PARAMETERS`):

* ``keyboard_typo``: replace an ASCII letter by a random neighbour on a QWERTY keyboard
  (:data:`QWERTY_NEIGHBOURS`, letters only), keeping its case;
* ``char_swap``: swap two adjacent letters inside a word (pairs taken left to right, never
  overlapping);
* ``char_delete``: delete a letter;
* ``word_dropout``: drop a whole word (whitespace token); the others keep their order and one
  word always survives;
* ``word_shuffle``: shuffle the words inside consecutive, non-overlapping windows;
* ``case_punct``: flip the case of an ASCII letter, delete an ASCII punctuation mark, append one
  of ``, . ; : ! ? ' " -`` to a word (words are never split or merged);
* ``ocr_confusion``: OCR-like confusions (:data:`OCR_CONFUSIONS`): ``rn`` <-> ``m``, ``cl`` <->
  ``d``, ``vv`` <-> ``w``, ``l`` -> ``1``/``I``, ``I`` -> ``l``/``1``, ``O``/``o`` -> ``0``,
  ``e`` <-> ``c``, ``a`` -> ``o``, ``h`` <-> ``b``, ``S`` -> ``5``, ``B`` -> ``8``, ``g`` ->
  ``q``, ``u`` -> ``v``, ``t`` -> ``f`` and a few more.

Words are whitespace-separated tokens; the word-level corruptions and ``case_punct`` join the
remaining words with single spaces, the other character-level ones keep the text's whitespace.
``keyboard_typo`` keeps the length of the text; ``case_punct`` and ``word_shuffle`` keep the
multiset of words once lower-cased and stripped of punctuation. Only the standard library and
numpy are used.

The family's splits are ``<corruption>-<severity>`` (7 x 5 = 35), each the corruption applied to
one fixed, seeded, class-stratified *text base subset* of :data:`TEXT_BASE_SUBSET_SIZE` clean
texts (:func:`text_base_subset`), so every corruption and severity shows the same snippets.

References
----------
.. [1] D. Pruthi, B. Dhingra and Z. C. Lipton, "Combating Adversarial Misspellings with Robust
   Word Recognition", ACL 2019 (swap, drop, add and keyboard typos).
.. [2] X. Wang, H. Wang and D. Yang, "Measure and Improve Robustness in NLP Models: A Survey",
   NAACL 2022.
.. [3] Y. Belinkov and Y. Bisk, "Synthetic and Natural Noise Both Break Neural Machine
   Translation", ICLR 2018 (letter swaps and scrambles, keyboard typos).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from tasks.data.spec import TargetPool
from tasks.data.families import ShiftFamily, TargetSplitSpec, split_rng
from tasks.data.shifts.clean import clean_indices, stratified_subset

__all__ = [
    "OCR_CONFUSIONS",
    "QWERTY_NEIGHBOURS",
    "TEXT_BASE_SUBSET_SIZE",
    "TEXT_CORRUPTIONS",
    "TEXT_PARAMETERS",
    "TEXT_SEVERITIES",
    "case_punct",
    "char_delete",
    "char_swap",
    "corrupt_texts",
    "keyboard_typo",
    "ocr_confusion",
    "text_base_subset",
    "word_dropout",
    "word_shuffle",
]

#: Severity levels of every text corruption.
TEXT_SEVERITIES: Final[tuple[int, ...]] = (1, 2, 3, 4, 5)

#: Size of the class-stratified base subset that the text corruptions are applied to.
TEXT_BASE_SUBSET_SIZE: Final[int] = 250

TextCorruptionFn = Callable[[str, int, np.random.Generator], str]

_CHAR_RATES: Final[tuple[float, ...]] = (0.02, 0.05, 0.10, 0.20, 0.30)

#: Per corruption, its parameter (``"rate"`` or ``"window"``) and the values of severities 1 to
#: 5, strictly growing.
TEXT_PARAMETERS: Final[dict[str, tuple[str, tuple[float, ...]]]] = {
    "keyboard_typo": ("rate", _CHAR_RATES),
    "char_swap": ("rate", _CHAR_RATES),
    "char_delete": ("rate", _CHAR_RATES),
    "word_dropout": ("rate", (0.05, 0.10, 0.20, 0.30, 0.40)),
    "word_shuffle": ("window", (2, 3, 4, 6, 8)),
    "case_punct": ("rate", _CHAR_RATES),
    "ocr_confusion": ("rate", (0.05, 0.10, 0.20, 0.35, 0.50)),
}

_ROWS: Final[tuple[str, ...]] = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _qwerty_neighbours() -> dict[str, str]:
    """Letter neighbours on a staggered QWERTY keyboard (each row shifted right of the last)."""
    out: dict[str, str] = {}
    for r, row in enumerate(_ROWS):
        for j, key in enumerate(row):
            near = [row[k] for k in (j - 1, j + 1) if 0 <= k < len(row)]
            if r > 0:  # the row above is shifted left: keys j and j + 1 touch this one
                near += [_ROWS[r - 1][k] for k in (j, j + 1) if k < len(_ROWS[r - 1])]
            if r + 1 < len(_ROWS):  # the row below is shifted right: keys j - 1 and j
                near += [_ROWS[r + 1][k] for k in (j - 1, j) if 0 <= k < len(_ROWS[r + 1])]
            out[key] = "".join(sorted(near))
    return out


#: Lower-case letter -> its QWERTY neighbours (letters only), e.g. ``"s" -> "adewxz"``.
QWERTY_NEIGHBOURS: Final[dict[str, str]] = _qwerty_neighbours()

#: OCR confusions: a source of one or two characters -> what it may be read as. A text is cut
#: into confusable units left to right, two-character sources first.
OCR_CONFUSIONS: Final[dict[str, tuple[str, ...]]] = {
    "rn": ("m",),
    "cl": ("d",),
    "vv": ("w",),
    "m": ("rn",),
    "d": ("cl",),
    "w": ("vv",),
    "l": ("1", "I"),
    "I": ("l", "1"),
    "i": ("l",),
    "O": ("0",),
    "o": ("0",),
    "e": ("c",),
    "c": ("e",),
    "a": ("o",),
    "h": ("b",),
    "b": ("h",),
    "S": ("5",),
    "B": ("8",),
    "g": ("q",),
    "u": ("v",),
    "t": ("f",),
    "Z": ("2",),
    "G": ("6",),
    "0": ("O",),
    "1": ("l",),
    "5": ("S",),
    "8": ("B",),
}

_ASCII_LETTERS: Final[frozenset[str]] = frozenset(string.ascii_letters)
_PUNCTUATION: Final[frozenset[str]] = frozenset(string.punctuation)
_INSERTED_MARKS: Final[str] = ",.;:!?'\"-"
_OCR_PAIRS: Final[frozenset[str]] = frozenset(k for k in OCR_CONFUSIONS if len(k) == 2)


# ----------------------------------------------------------------------------- helpers


def _parameter(name: str, severity: int) -> float:
    """The parameter of corruption ``name`` at ``severity`` (validated)."""
    if (
        isinstance(severity, bool)
        or not isinstance(severity, (int, np.integer))
        or int(severity) not in TEXT_SEVERITIES
    ):
        raise ValueError(f"severity must be an integer in 1..5; got {severity!r}.")
    return TEXT_PARAMETERS[name][1][int(severity) - 1]


def _keep_one_token(out: str, text: str) -> str:
    """``out``, or the first word of ``text`` where ``out`` is empty or whitespace only."""
    if out.strip():
        return out
    words = text.split()
    return words[0] if words else text


# ----------------------------------------------------------------------------- character level


def keyboard_typo(text: str, severity: int, rng: np.random.Generator) -> str:
    """Replace ASCII letters by a random QWERTY neighbour, keeping their case.

    Parameters
    ----------
    text : str
        One text.
    severity : int
        1 to 5; the fraction of letters replaced is ``TEXT_PARAMETERS["keyboard_typo"]``
        (0.02, 0.05, 0.10, 0.20, 0.30).
    rng : numpy.random.Generator
        Draws two uniforms per character (whether it is hit, which neighbour replaces it),
        whatever the severity.

    Returns
    -------
    str
        A text of the same length; every changed character is a neighbour
        (:data:`QWERTY_NEIGHBOURS`) of the original, in the same case.
    """
    rate = _parameter("keyboard_typo", severity)
    draws = rng.random((2, len(text)))
    chars = list(text)
    for i in np.flatnonzero(draws[0] < rate).tolist():
        c = chars[i]
        if c not in _ASCII_LETTERS:
            continue
        near = QWERTY_NEIGHBOURS[c.lower()]
        new = near[int(draws[1, i] * len(near))]
        chars[i] = new.upper() if c.isupper() else new
    return "".join(chars)


def char_swap(text: str, severity: int, rng: np.random.Generator) -> str:
    """Swap adjacent letters inside words.

    Parameters
    ----------
    text : str
        One text.
    severity : int
        1 to 5; each pair of adjacent letters is swapped with probability
        ``TEXT_PARAMETERS["char_swap"]`` (0.02, 0.05, 0.10, 0.20, 0.30). Pairs are taken left
        to right; a letter already swapped does not start another pair.
    rng : numpy.random.Generator
        Draws one uniform per character (for the pair it starts), whatever the severity.

    Returns
    -------
    str
        A text of the same length and the same letters per word.
    """
    rate = _parameter("char_swap", severity)
    u = rng.random(len(text))
    chars = list(text)
    last = -1  # right-hand position of the previous swap
    for i in np.flatnonzero(u < rate).tolist():
        if i <= last or i + 1 >= len(chars):
            continue
        if chars[i].isalpha() and chars[i + 1].isalpha():
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
            last = i + 1
    return "".join(chars)


def char_delete(text: str, severity: int, rng: np.random.Generator) -> str:
    """Delete letters.

    Parameters
    ----------
    text : str
        One text.
    severity : int
        1 to 5; the fraction of letters deleted is ``TEXT_PARAMETERS["char_delete"]``
        (0.02, 0.05, 0.10, 0.20, 0.30).
    rng : numpy.random.Generator
        Draws one uniform per character, whatever the severity.

    Returns
    -------
    str
        The text without the deleted letters (whitespace untouched), or its first word if
        nothing but whitespace would be left.
    """
    rate = _parameter("char_delete", severity)
    u = rng.random(len(text))
    chars = list(text)
    for i in np.flatnonzero(u < rate).tolist():
        if chars[i].isalpha():
            chars[i] = ""
    return _keep_one_token("".join(chars), text)


def case_punct(text: str, severity: int, rng: np.random.Generator) -> str:
    """Flip the case of letters, delete punctuation marks and append new ones to words.

    Parameters
    ----------
    text : str
        One text.
    severity : int
        1 to 5; the rate ``TEXT_PARAMETERS["case_punct"]`` (0.02, 0.05, 0.10, 0.20, 0.30) is
        the probability that an ASCII letter flips case, that an ASCII punctuation mark is
        deleted, and that a word gets one of ``, . ; : ! ? ' " -`` appended.
    rng : numpy.random.Generator
        Draws one uniform per character, then two per word (whether a mark is appended,
        which one), whatever the severity.

    Returns
    -------
    str
        The words joined by single spaces; a word left empty (a lone mark deleted) is dropped,
        and the first word of ``text`` is returned if none is left. Lower-cased and stripped of
        punctuation, the words are those of ``text``.
    """
    rate = _parameter("case_punct", severity)
    n = len(text)
    u = rng.random(n)
    words = text.split()
    insert = rng.random((2, len(words)))
    hit = (u < rate).tolist()
    added = (insert[0] < rate).tolist()
    out: list[str] = []
    pos = 0
    for w, word in enumerate(words):
        start = text.index(word, pos)
        pos = start + len(word)
        chars = []
        for k, c in enumerate(word):
            if hit[start + k]:
                if c in _ASCII_LETTERS:
                    c = c.swapcase()
                elif c in _PUNCTUATION:
                    continue
            chars.append(c)
        if added[w]:
            chars.append(_INSERTED_MARKS[int(insert[1, w] * len(_INSERTED_MARKS))])
        if chars:
            out.append("".join(chars))
    return _keep_one_token(" ".join(out), text)


def ocr_confusion(text: str, severity: int, rng: np.random.Generator) -> str:
    """Replace characters by what OCR confuses them with (``rn`` -> ``m``, ``l`` -> ``1``, ...).

    Parameters
    ----------
    text : str
        One text.
    severity : int
        1 to 5; each confusable unit (a source of :data:`OCR_CONFUSIONS`; the text is cut into
        units left to right, two-character sources first) is replaced with probability
        ``TEXT_PARAMETERS["ocr_confusion"]`` (0.05, 0.10, 0.20, 0.35, 0.50).
    rng : numpy.random.Generator
        Draws two uniforms per character (whether the unit starting there is replaced, by
        which reading), whatever the severity.

    Returns
    -------
    str
        The confused text (never empty: no replacement is empty).
    """
    rate = _parameter("ocr_confusion", severity)
    n = len(text)
    draws = rng.random((2, n))
    hit = (draws[0] < rate).tolist()
    out: list[str] = []
    i = 0
    while i < n:
        pair = text[i : i + 2]
        if pair in _OCR_PAIRS:
            src = pair
        elif text[i] in OCR_CONFUSIONS:
            src = text[i]
        else:
            out.append(text[i])
            i += 1
            continue
        if hit[i]:
            targets = OCR_CONFUSIONS[src]
            out.append(targets[int(draws[1, i] * len(targets))])
        else:
            out.append(src)
        i += len(src)
    return "".join(out)


# ----------------------------------------------------------------------------- word level


def word_dropout(text: str, severity: int, rng: np.random.Generator) -> str:
    """Drop whole words, never all of them.

    Parameters
    ----------
    text : str
        One text.
    severity : int
        1 to 5; each word (whitespace token) is dropped with probability
        ``TEXT_PARAMETERS["word_dropout"]`` (0.05, 0.10, 0.20, 0.30, 0.40).
    rng : numpy.random.Generator
        Draws one uniform per word, whatever the severity.

    Returns
    -------
    str
        The remaining words in their order, joined by single spaces; if every word would be
        dropped, the one least likely to be (largest uniform) is kept.
    """
    rate = _parameter("word_dropout", severity)
    words = text.split()
    if not words:
        return text
    u = rng.random(len(words))
    kept = [w for w, x in zip(words, (u >= rate).tolist()) if x]
    if not kept:
        kept = [words[int(np.argmax(u))]]
    return " ".join(kept)


def word_shuffle(text: str, severity: int, rng: np.random.Generator) -> str:
    """Shuffle the order of words inside consecutive, non-overlapping windows.

    Parameters
    ----------
    text : str
        One text.
    severity : int
        1 to 5; the window has ``TEXT_PARAMETERS["word_shuffle"]`` (2, 3, 4, 6, 8) words (the
        last one what is left).
    rng : numpy.random.Generator
        Draws one uniform key per word, whatever the severity; each window is sorted by its
        words' keys.

    Returns
    -------
    str
        The same words, permuted within windows, joined by single spaces.
    """
    window = int(_parameter("word_shuffle", severity))
    words = text.split()
    if not words:
        return text
    keys = rng.random(len(words))
    out: list[str] = []
    for start in range(0, len(words), window):
        order = np.argsort(keys[start : start + window], kind="stable").tolist()
        out.extend(words[start + k] for k in order)
    return " ".join(out)


#: Text corruptions, in report order: name -> ``f(text, severity, rng) -> str``.
TEXT_CORRUPTIONS: Final[dict[str, TextCorruptionFn]] = {
    "keyboard_typo": keyboard_typo,
    "char_swap": char_swap,
    "char_delete": char_delete,
    "word_dropout": word_dropout,
    "word_shuffle": word_shuffle,
    "case_punct": case_punct,
    "ocr_confusion": ocr_confusion,
}


def _check_texts(texts: Sequence[str] | np.ndarray) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise ValueError(
            f"texts must be a 1-d sequence of str, not a single {type(texts).__name__}."
        )
    if isinstance(texts, np.ndarray):
        if texts.ndim != 1:
            raise ValueError(
                f"texts must be a 1-d sequence of str; got an array of shape {texts.shape}."
            )
        items = texts.tolist()
    elif isinstance(texts, Sequence):
        items = list(texts)
    else:
        raise ValueError(f"texts must be a 1-d sequence of str; got {type(texts).__name__}.")
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise ValueError(
                f"texts must hold only str; texts[{i}] is a {type(t).__name__} ({t!r})."
            )
        if not t.strip():
            raise ValueError(f"texts must hold non-empty str; texts[{i}] is {t!r}.")
    return [str(t) for t in items]


def corrupt_texts(
    texts: Sequence[str] | np.ndarray, name: str, severity: int, rng: np.random.Generator
) -> np.ndarray:
    """Apply text corruption ``name`` at ``severity`` to every text.

    Parameters
    ----------
    texts : sequence of str or numpy.ndarray
        1-d: a list or tuple of str, or a 1-d (``object`` or unicode) array; no text may be
        empty or whitespace only.
    name : str
        A key of :data:`TEXT_CORRUPTIONS`.
    severity : int
        1 (mild) to 5 (strong).
    rng : numpy.random.Generator
        Seeded generator. One 63-bit seed per text is drawn from it first, in order, and
        each text is corrupted with its own generator of that seed; so the output depends only
        on the texts, ``name``, ``severity`` and the seed, and with one seed a text draws the
        same random pattern at every severity (see the module docstring).

    Returns
    -------
    numpy.ndarray
        ``object`` array of ``str``, one per text, none empty.

    Raises
    ------
    ValueError
        If ``name`` is not a text corruption (the message lists them), ``severity`` is not an
        integer in 1..5 (bools and strings are not), or ``texts`` is not a 1-d sequence of
        non-empty str.
    TypeError
        If ``rng`` is not a :class:`numpy.random.Generator`.
    """
    if not isinstance(name, str) or name not in TEXT_CORRUPTIONS:
        raise ValueError(
            f"name must be a text corruption, one of {', '.join(TEXT_CORRUPTIONS)}; "
            f"got {name!r}."
        )
    _parameter(name, severity)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator; got {type(rng).__name__}.")
    items = _check_texts(texts)
    fn = TEXT_CORRUPTIONS[name]
    out = np.empty(len(items), dtype=object)
    if not items:
        return out
    seeds = rng.integers(0, np.iinfo(np.int64).max, size=len(items)).tolist()
    sev = int(severity)
    for i, (text, seed) in enumerate(zip(items, seeds)):
        child = np.random.Generator(np.random.PCG64(seed))
        out[i] = _keep_one_token(fn(text, sev, child), text)
    return out


# ----------------------------------------------------------------------------- family


def text_base_subset(dataset: str, pool: TargetPool) -> np.ndarray:
    """Indices of the text base subset that the text corruptions are applied to.

    Parameters
    ----------
    dataset : str
        Dataset key (seeds the draw: ``split_rng(dataset, "text-base")``).
    pool : TargetPool
        Test pool of the dataset (texts).

    Returns
    -------
    numpy.ndarray
        :data:`TEXT_BASE_SUBSET_SIZE` clean indices, stratified by class (fewer for small
        pools); sorted ``int64``.
    """
    return stratified_subset(
        pool.labels, clean_indices(pool), TEXT_BASE_SUBSET_SIZE, split_rng(dataset, "text-base")
    )


def _splits() -> list[TargetSplitSpec]:
    out = []
    for name in TEXT_CORRUPTIONS:
        parameter, values = TEXT_PARAMETERS[name]
        for sev in TEXT_SEVERITIES:
            out.append(
                TargetSplitSpec(
                    f"{name}-{sev}",
                    "synthetic",
                    name,
                    sev,
                    (
                        ("severity", float(sev)),
                        (parameter, float(values[sev - 1])),
                        ("size", float(TEXT_BASE_SUBSET_SIZE)),
                    ),
                )
            )
    return out


def _generate(
    dataset: str, split: TargetSplitSpec, pool: TargetPool, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    idx = text_base_subset(dataset, pool)
    base = [pool.samples[int(i)] for i in idx]
    texts = corrupt_texts(base, split.shift, int(split.severity or 0), rng)
    return texts, pool.labels[idx]


#: Text corruptions at 5 severities; the ``synthetic`` family of the text modality (the image
#: one is in :mod:`.synthetic`, same name and order).
FAMILIES: Final[tuple[ShiftFamily, ...]] = (
    ShiftFamily("synthetic", 1, ("text",), _splits, _generate),
)
