"""Text sample checks (tasks/data/texts.py): every bad row is named with its split and position."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from tasks.data.texts import as_text_labels, as_texts, take_texts, text_key


def test_texts_become_an_object_array_of_str() -> None:
    out = as_texts(["a fine film", np.str_("dull"), "caf\u00e9".encode()], "val")
    assert out.dtype == object and out.shape == (3,)
    assert out.tolist() == ["a fine film", "dull", "café"]
    assert all(type(t) is str for t in out)


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("", "empty or only whitespace"),
        ("  \n\t", "empty or only whitespace"),
        (b"caf\xe9", "not valid UTF-8"),
        ("bad \udcff surrogate", "lone surrogate"),
        (None, "expected a text (str); got NoneType"),
        (3.5, "expected a text (str); got float"),
    ],
)
def test_bad_rows_are_named_with_split_and_row(bad: object, fragment: str) -> None:
    with pytest.raises(ValueError, match="split 'clean', row 2") as err:
        as_texts(["ok", "fine", bad], "clean")
    assert fragment in str(err.value)


def test_a_single_string_or_a_2d_array_is_refused() -> None:
    with pytest.raises(ValueError, match="sequence of texts, one per sample; got a single str"):
        as_texts("one long text", "train")
    with pytest.raises(ValueError, match="one-dimensional array of texts; got shape"):
        as_texts(np.array([["a", "b"]], dtype=object), "train")


def test_labels_must_be_integers_in_range() -> None:
    assert as_text_labels([0, np.int64(1), 1], 2, "val").tolist() == [0, 1, 1]
    for bad, fragment in [("1", "got str '1'"), (1.0, "got float 1.0"), (True, "got bool True"),
                          (2, "got 2"), (-1, "got -1")]:
        with pytest.raises(ValueError, match=r"split 'val', row 1: labels must be integers") as e:
            as_text_labels([0, bad], 2, "val")
        assert fragment in str(e.value)


def test_take_texts_keeps_order_and_type() -> None:
    texts = as_texts(["a b", "c d", "e f"], "x")
    out = take_texts(texts, np.array([2, 0]))
    assert out.dtype == object and out.tolist() == ["e f", "a b"]


def test_text_key_is_the_sha256_of_the_utf8_bytes() -> None:
    assert text_key("café") == hashlib.sha256("café".encode()).hexdigest()
    assert text_key("a") != text_key("a ")
