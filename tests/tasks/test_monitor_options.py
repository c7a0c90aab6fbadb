"""The monitor's options: one checked place, errors naming the option."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.monitor.options import (
    LEVEL,
    MIN_ROWS,
    check_alert_below,
    check_alert_drop,
    check_methods,
    make_options,
    parse_chunk,
)


def test_copied_constants_match_the_estimators():
    from estimators.core._validation import MIN_TARGET_ROWS
    from estimators.core.base import DEFAULT_LEVEL

    assert (LEVEL, MIN_ROWS) == (DEFAULT_LEVEL, MIN_TARGET_ROWS)


@pytest.mark.parametrize("text, kind, rows, period", [
    ("file", "file", None, None), ("FILE", "file", None, None), (None, "file", None, None),
    ("10000", "rows", 10000, None), ("1d", "period", None, "1d"), ("1w", "period", None, "1w"),
])
def test_chunk_rules(text, kind, rows, period):
    rule = parse_chunk(text)
    assert (rule.kind, rule.rows, rule.period) == (kind, rows, period)
    assert rule.label == (text.lower() if text else "file")


@pytest.mark.parametrize("text", ["0", "-5", "2d", "1.5", "daily", ""])
def test_bad_chunk_rules(text):
    with pytest.raises(ValueError, match=r"^--chunk must be 'file'.*got"):
        parse_chunk(text)


def test_alert_thresholds():
    assert check_alert_below("0.75") == 0.75 and check_alert_below(None) is None
    assert check_alert_drop("5") == 5.0 and check_alert_drop(None) is None
    with pytest.raises(ValueError, match=r"--alert-below .*got '75' \(a percent\? write 0.75\)"):
        check_alert_below("75")
    for bad in ("0", "-0.1", "abc", "nan", True):
        with pytest.raises(ValueError, match="--alert-below"):
            check_alert_below(bad)
    for bad in ("0", "100", "-3", "x"):
        with pytest.raises(ValueError, match="--alert-drop"):
            check_alert_drop(bad)


def test_methods():
    assert check_methods(None) == ("auto",)
    assert check_methods(["ac", "atc-mc", "ac"]) == ("ac", "atc-mc")
    with pytest.raises(ValueError, match=r"-m: unknown method 'nope'; available: ac, "):
        check_methods(["nope"])
    with pytest.raises(ValueError, match=r"-m distcs: it needs the classifier's features"):
        check_methods(["distcs"])
    with pytest.raises(ValueError, match=r"-m mano: a score"):
        check_methods(["mano"])


def test_make_options_names_the_missing_or_wrong_option(tmp_path):
    ref = tmp_path / "ref.npz"
    np.savez(ref, logits=np.eye(3), labels=[0, 1, 2])
    opts = make_options(ref, str(tmp_path), chunk="1w", methods=["ac"], alert_below="0.7")
    assert opts.chunk.period == "1w" and opts.methods == ("ac",) and opts.alert_below == 0.7
    with pytest.raises(ValueError, match="--reference is required"):
        make_options(None, "x")
    with pytest.raises(ValueError, match="--production is required"):
        make_options(ref, " ")
    with pytest.raises(ValueError, match="--reference .*no such file"):
        make_options(tmp_path / "missing.npz", "x")
    (tmp_path / "ref.csv").write_text("1")
    with pytest.raises(ValueError, match="--reference must be a .npz or .parquet"):
        make_options(tmp_path / "ref.csv", "x")
