"""``alsa-bench estimate --peer-val FILE --peer-target FILE``: GDE on logit files (issue 32)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from estimators import available_estimators
from tests.flows.test_estimate_cli import app, runner  # the one test app of the command


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(2)
    yv = rng.integers(0, 3, 300)
    zv = rng.normal(size=(300, 3)) + 2.0 * np.eye(3)[yv]
    yt = rng.integers(0, 3, 200)
    zt = rng.normal(size=(200, 3)) * 1.4 + 1.5 * np.eye(3)[yt]
    pv, pt = zv + rng.normal(size=zv.shape), zt + rng.normal(size=zt.shape)
    paths = {k: tmp_path / f"{k}.npz" for k in ("val", "target", "peer_val", "peer_target")}
    np.savez(paths["val"], logits=zv, labels=yv)
    np.savez(paths["target"], logits=zt, labels=yt)
    np.savez(paths["peer_val"], logits=pv, labels=yv)  # labels in a peer file are not read
    np.savez(paths["peer_target"], logits=pt)
    paths["short"] = tmp_path / "short.npz"
    np.savez(paths["short"], logits=pt[:150])
    paths["arrays"] = {"zt": zt, "pt": pt, "yt": yt}
    return paths


def invoke(*args):
    return runner.invoke(app, ["estimate", *map(str, args)])


def test_peers_add_gde_to_the_default_methods_with_its_disagreement(files):
    result = invoke("--val", files["val"], "--target", files["target"], "--peer-val",
                    files["peer_val"], "--peer-target", files["peer_target"], "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["method"] for r in rows] == [*available_estimators(), "gde", "auto"]
    gde = next(r for r in rows if r["method"] == "gde")
    a = files["arrays"]
    agree = float(np.mean(a["zt"].argmax(1) == a["pt"].argmax(1)))
    assert gde["accuracy"] == pytest.approx(agree, abs=1e-15)
    assert gde["diagnostics"]["disagreement"] == pytest.approx(1 - agree, abs=1e-15)
    assert gde["true_accuracy"] == pytest.approx(np.mean(a["zt"].argmax(1) == a["yt"]))
    # the other methods are those of a run without peers
    plain = json.loads(invoke("--val", files["val"], "--target", files["target"],
                              "--json").stdout)
    for row in plain:
        if row["method"] != "auto":
            assert row["accuracy"] == next(r for r in rows if r["method"] == row["method"])[
                "accuracy"]


def test_a_named_gde_without_peers_is_skipped_with_a_note_or_refused(files):
    result = invoke("--val", files["val"], "--target", files["target"], "-m", "gde", "-m", "ac",
                    "--json")
    assert result.exit_code == 0, result.output
    assert [r["method"] for r in json.loads(result.stdout)] == ["ac"]
    assert "note: skipped gde: it needs a peer model" in result.stderr
    alone = invoke("--val", files["val"], "--target", files["target"], "-m", "gde")
    assert alone.exit_code == 2
    assert alone.stderr.startswith("error: no method left to run: skipped gde")


@pytest.mark.parametrize("which", ["--peer-val", "--peer-target"])
def test_one_peer_file_without_the_other_is_one_error_line(files, which):
    key = which.lstrip("-").replace("-", "_")
    result = invoke("--val", files["val"], "--target", files["target"], which, files[key])
    assert result.exit_code == 2
    other = "--peer-target" if which == "--peer-val" else "--peer-val"
    assert result.stderr.strip() == (f"error: {which} needs {other}: a peer model's logits on "
                                     "the validation rows and on the target rows, both or "
                                     "neither.")


def test_a_peer_file_with_other_rows_is_refused_naming_both_files(files):
    result = invoke("--val", files["val"], "--target", files["target"], "--peer-val",
                    files["peer_val"], "--peer-target", files["short"], "-m", "gde")
    assert result.exit_code == 2
    assert f"--peer-target {files['short']}: logits must have one row per row of --target " \
        f"{files['target']}: logits " \
           "(200); got 150 rows" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_method_with_an_accuracy_and_no_band_says_so(files):
    """GDE gives an accuracy, and the shipped calibration has no band for it: the JSON row and
    the table say 'none' and one note says why; a score without a map (mano) gives no accuracy,
    so it is not named; a method with a band is untouched."""
    from estimators.trust.calibration_artifact import SHIPPED_CALIBRATION, load_calibration

    bands = load_calibration(SHIPPED_CALIBRATION).bands
    assert "gde" not in bands and "ac" in bands
    base = ["--val", files["val"], "--target", files["target"], "--peer-val",
            files["peer_val"], "--peer-target", files["peer_target"], "-m", "ac", "-m", "gde",
            "-m", "mano"]
    result = invoke(*base, "--json")
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in json.loads(result.stdout)}
    assert rows["gde"]["shift_note"].startswith("none: the calibration in use has no band")
    assert rows["gde"]["shift_interval"] == [None, None] and rows["gde"]["accuracy"] > 0
    assert "shift_note" not in rows["ac"] and None not in rows["ac"]["shift_interval"]
    assert "shift_note" not in rows["mano"] and rows["mano"]["accuracy"] is None
    assert ("note: no shift band for gde: the calibration in use "
            f"({SHIPPED_CALIBRATION}) has none for it") in result.stderr
    table = invoke(*base)
    assert table.exit_code == 0, table.output
    gde_line = next(line for line in table.stdout.splitlines() if line.startswith("│ gde"))
    assert "none" in gde_line
    assert "recommended estimate" not in table.stdout  # auto is not in this table
