"""The calibration's code hash: what it covers, that it ignores docstrings and comments, that
any change of the computing code changes it, and that a calibration fit records it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import estimators
from estimators.trust.calibration_artifact import (
    Calibration,
    calibration_code_files,
    code_hash,
)

ROOT = Path(estimators.__file__).resolve().parents[1]


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The calibration code copied under a new root."""
    for name in calibration_code_files():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_the_hash_covers_the_signals_the_fits_and_the_database_reading() -> None:
    files = calibration_code_files()
    for name in ("estimators/trust/shift_signals.py", "estimators/trust/shift_band.py",
                 "estimators/trust/stacking.py", "estimators/trust/calibration_artifact.py",
                 "estimators/maths/label_shift.py", "estimators/maths/temperature.py",
                 "tasks/report/trust_calibration.py"):
        assert name in files
    assert "estimators/trust/auto.py" not in files  # reads an artifact, fits none
    assert "estimators/trust/attach_band.py" not in files


def test_docstrings_and_comments_keep_the_hash_and_code_changes_it(copy: Path) -> None:
    before = code_hash(copy)
    assert before == code_hash()  # the same files, wherever they are
    signals = copy / "estimators/trust/shift_signals.py"
    text = signals.read_text()
    signals.write_text(text.replace('"""Label-free signals', '"""Other words on label-free '
                                    'signals', 1).replace("\nimport math\n",
                                                          "\n# a comment\nimport math\n", 1))
    assert signals.read_text() != text and code_hash(copy) == before
    signals.write_text(text.replace("Z_CLIP = 1000.0", "Z_CLIP = 999.0"))
    assert code_hash(copy) != before


def test_a_missing_part_of_the_calibration_code_is_an_error(copy: Path) -> None:
    for path in (copy / "tasks/report").glob("trust_*.py"):  # a pattern that matches nothing
        path.unlink()
    with pytest.raises(FileNotFoundError, match="tasks/report/trust_"):
        code_hash(copy)


def test_stale_reason_names_both_hashes_or_the_missing_one() -> None:
    now = code_hash()
    assert Calibration({}, {}, {"code_hash": now}).stale_reason() is None
    old = Calibration({}, {}, {"code_hash": "0" * 64}).stale_reason()
    assert old is not None and "000000000000" in old and now[:12] in old
    assert "records no code_hash" in (Calibration({}, {}, {}).stale_reason() or "")


def test_a_fit_records_the_hash_of_the_code_that_fit_it() -> None:
    from estimators.trust.calibration_artifact import CalibrationTable, fit_calibration
    from estimators.trust.shift_signals import PANEL

    rng = np.random.default_rng(0)
    n = 90
    sig = {k: rng.uniform(0, 0.1, n) for k in ("confidence_drop", "entropy_rise",
                                                "prediction_shift", "panel_spread")}
    sig |= {"val_accuracy": np.full(n, 0.9), "n_val": np.full(n, 900.0),
            "n_target": np.full(n, 300.0), **{f"panel_{m}": np.full(n, 0.85) for m in PANEL}}
    table = CalibrationTable(np.repeat(["a", "b", "c"], 30), np.full(n, "f"),
                             0.9 - sig["confidence_drop"], sig, {"ac": 0.9 - sig["entropy_rise"]})
    cal = fit_calibration(table, member_sets=())
    assert cal.source["code_hash"] == code_hash() and cal.stale_reason() is None
