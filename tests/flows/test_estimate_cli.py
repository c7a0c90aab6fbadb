"""``estimate`` command on a tiny Typer app built here (no Prefect involved)."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from estimators import available_estimators
from flows.estimate_cli import estimate_command

app = typer.Typer()


@app.callback()
def _root() -> None:
    """Test app: makes ``estimate`` a sub-command, as in the real CLI."""


app.command("estimate")(estimate_command)
runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    val = rng.normal(size=(120, 3)) * 2
    val_y = np.where(rng.random(120) < 0.7, val.argmax(axis=1), rng.integers(0, 3, 120))
    target = rng.normal(size=(80, 3)) * 1.5
    target_y = np.where(rng.random(80) < 0.6, target.argmax(axis=1), rng.integers(0, 3, 80))
    paths = {
        "val": tmp_path / "val.npz",
        "target": tmp_path / "target.npz",
        "target_labelled": tmp_path / "target_labelled.parquet",
    }
    np.savez(paths["val"], logits=val, labels=val_y)
    np.savez(paths["target"], logits=target)
    pq.write_table(pa.table({"logits": target.tolist(), "label": target_y}),
                   paths["target_labelled"])
    paths["true_accuracy"] = float(np.mean(target.argmax(axis=1) == target_y))
    return paths


def invoke(*args: str):
    return runner.invoke(app, ["estimate", *map(str, args)])


def test_table_for_people_runs_every_method_by_default(files):
    result = invoke("--val", files["val"], "--target", files["target"])
    assert result.exit_code == 0, result.output
    for key in available_estimators():
        assert key in result.stdout
    assert "estimated accuracy" in result.stdout
    assert "true accuracy" not in result.stdout


def test_the_opt_in_shift_gate_runs_when_named_and_takes_params(files):
    default = invoke("--val", files["val"], "--target", files["target"])
    assert "shift-gate" not in default.stdout
    result = invoke("--val", files["val"], "--target", files["target"], "--method", "shift-gate",
                    "--param", "shift-gate.covariate=atc-ne", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["method"] == "shift-gate" and 0.0 <= row["accuracy"] <= 1.0
    assert row["params"]["covariate"] == "atc-ne"
    bad = invoke("--val", files["val"], "--target", files["target"], "--method", "shift-gate",
                 "--param", "shift-gate.covariate=nope")
    assert bad.exit_code != 0 and "covariate" in bad.output


def test_table_with_target_labels_shows_truth_and_error(files):
    result = invoke("--val", files["val"], "--target", files["target_labelled"],
                    "--method", "ac", "--method", "atc-ne")
    assert result.exit_code == 0, result.output
    assert "true accuracy" in result.stdout and "abs error" in result.stdout
    assert "atc-ne" in result.stdout and "cot" not in result.stdout


def test_json_without_target_labels(files):
    result = invoke("--val", files["val"], "--target", files["target"],
                    "--method", "doc", "--method", "cot", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["method"] for r in rows] == ["doc", "cot"]
    for row in rows:
        assert 0.0 <= row["accuracy"] <= 1.0 and row["n_target"] == 80
        assert "true_accuracy" not in row and "abs_error" not in row


def test_json_with_target_labels(files):
    result = invoke("--val", files["val"], "--target", files["target_labelled"],
                    "--method", "atc-mc", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["method"] == "atc-mc"
    assert row["true_accuracy"] == pytest.approx(files["true_accuracy"])
    assert row["abs_error"] == pytest.approx(abs(row["accuracy"] - files["true_accuracy"]))
    assert "threshold" in row["diagnostics"] and "temperature" in row["params"]


def _write_bad(tmp_path, files, kind):
    """Return CLI arguments for one user mistake."""
    rng = np.random.default_rng(1)
    val, target = files["val"], files["target"]
    if kind == "missing file":
        return ["--val", tmp_path / "absent.npz", "--target", target], \
            r"^error: --val \S*absent\.npz: file not found"
    if kind == "wrong extension":
        bad = tmp_path / "val.txt"
        bad.write_text("1 2 3")
        return (["--val", bad, "--target", target],
                r"^error: --val \S*val\.txt.*unsupported file type '\.txt'")
    if kind == "bad array":
        bad = tmp_path / "bad.npz"
        np.savez(bad, logits=rng.normal(size=(2, 5, 3)))
        return (["--val", val, "--target", bad],
                r"^error: --target \S*bad\.npz.*logits must be a 2-D array")
    if kind == "NaN logits":
        bad = tmp_path / "nan.npz"
        logits = rng.normal(size=(5, 3))
        logits[2, 1] = np.nan
        np.savez(bad, logits=logits)
        return (["--val", val, "--target", bad],
                r"^error: --target \S*nan\.npz: logits must be finite")
    if kind == "labels out of range":
        bad = tmp_path / "val_bad.npz"
        np.savez(bad, logits=rng.normal(size=(5, 3)), labels=np.array([0, 1, 2, 3, 0]))
        return (["--val", bad, "--target", target],
                r"^error: --val \S*val_bad\.npz: labels must hold class indices in \[0, 3\); "
                r"got 1 value outside it")
    if kind == "val without labels":
        return ["--val", target, "--target", target], r"^error: --val .*no labels found"
    if kind == "unknown method":
        return (["--val", val, "--target", target, "--method", "atc", "--method", "ac"],
                "unknown method 'atc'; available: ac, doc")
    if kind == "class mismatch":
        bad = tmp_path / "four.npz"
        np.savez(bad, logits=rng.normal(size=(6, 4)))
        return ["--val", val, "--target", bad], \
            r"class-count mismatch: --val \S+ has 3 classes but --target \S*four\.npz has 4"
    if kind == "missing --val":
        return ["--target", target], "missing option --val"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", [
    "missing file", "wrong extension", "bad array", "NaN logits", "labels out of range",
    "val without labels", "unknown method", "class mismatch", "missing --val",
])
def test_user_mistakes_give_one_error_line_and_exit_2(tmp_path, files, kind):
    args, pattern = _write_bad(tmp_path, files, kind)
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_warnings_go_to_stderr_prefixed(tmp_path, files):
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(30, 3))
    degenerate = tmp_path / "perfect.npz"
    np.savez(degenerate, logits=logits, labels=logits.argmax(axis=1))
    result = invoke("--val", degenerate, "--target", files["target"], "--method", "ac", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)[0]["method"] == "ac"
    assert any(line.startswith("warning: ac: The validation set is degenerate")
               for line in result.stderr.splitlines())


# --------------------------------------------------------------------------------- --param
def test_param_sets_a_hyper_parameter_and_is_recorded(files):
    result = invoke("--val", files["val"], "--target", files["target"], "-m", "alsa-g",
                    "--param", "alsa-g.rectify_quantile=0.2", "--param", "alsa-g.n_anchors=40",
                    "--json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["params"]["rectify_quantile"] == 0.2 and row["params"]["n_anchors"] == 40
    default = json.loads(invoke("--val", files["val"], "--target", files["target"],
                                "--method", "alsa-g", "--param", "alsa-g.n_anchors=40",
                                "--json").stdout)[0]
    assert default["accuracy"] != row["accuracy"]  # the parameter acts


def test_an_ignored_param_warns_naming_what_governs(files):
    result = invoke("--val", files["val"], "--target", files["target"], "-m", "alsa-g",
                    "--param", "alsa-g.alpha=0.9", "--param", "alsa-g.n_anchors=40", "--json")
    assert result.exit_code == 0, result.output
    assert re.search(r"warning: alsa-g: The 'alpha' parameter of ALSAG is set to 0\.9 but has "
                     r"no effect here: it acts only with threshold_rule=\"paper\".*"
                     r"rectify_quantile", result.stderr)


def test_short_method_option_matches_the_long_one(files):
    short = invoke("--val", files["val"], "--target", files["target"], "-m", "atc-ne", "--json")
    long = invoke("--val", files["val"], "--target", files["target"], "--method", "atc-ne",
                  "--json")
    assert short.exit_code == 0 and json.loads(short.stdout) == json.loads(long.stdout)


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("which", ["target", "both"])
def test_probability_files_are_refused_with_the_way_out(tmp_path, files, which):
    val = np.load(files["val"])
    target = np.load(files["target"])["logits"]
    p_target = tmp_path / "p_target.npz"
    np.savez(p_target, logits=_softmax(target))
    val_path = files["val"]
    if which == "both":
        val_path = tmp_path / "p_val.npz"
        np.savez(val_path, logits=_softmax(val["logits"]), labels=val["labels"])
    result = invoke("--val", val_path, "--target", p_target, "-m", "atc-ne")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "look like softmax probabilities" in line
    assert "np.log(p)" in line and "--inputs probabilities" in line
    ok = invoke("--val", val_path, "--target", p_target, "-m", "atc-ne", "--json",
                "--inputs", "probabilities")
    if which == "target":  # --inputs speaks for both files: the logits file is refused
        assert ok.exit_code == 2 and "val.npz: logits (--inputs probabilities) must be " \
            "probabilities" in ok.stderr
        return
    assert ok.exit_code == 0, ok.output
    truth = invoke("--val", files["val"], "--target", files["target"], "-m", "atc-ne", "--json")
    assert json.loads(ok.stdout)[0]["accuracy"] == pytest.approx(
        json.loads(truth.stdout)[0]["accuracy"], abs=1e-9)


def test_bad_inputs_option_is_one_error_line(files):
    result = invoke("--val", files["val"], "--target", files["target"], "--inputs", "scores")
    assert result.exit_code == 2
    assert "--inputs must be 'logits' or 'probabilities'; got 'scores'" in result.stderr


def test_unreadable_npz_does_not_advise_allow_pickle(tmp_path, files):
    bad = tmp_path / "bad.npz"
    bad.write_text("not an archive")
    result = invoke("--val", bad, "--target", files["target"])
    assert result.exit_code == 2
    assert "not a readable .npz archive" in result.stderr and "allow_pickle" not in result.stderr


def test_small_target_and_one_class_validation_warn_once_for_all_methods(tmp_path, files):
    val = np.load(files["val"])
    one_class = tmp_path / "one.npz"
    np.savez(one_class, logits=val["logits"], labels=np.zeros(len(val["labels"]), dtype=int))
    small = tmp_path / "small.npz"
    np.savez(small, logits=np.load(files["target"])["logits"][:10])
    result = invoke("--val", one_class, "--target", small, "-m", "ac", "-m", "doc", "--json")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert sum("only class 0 is present" in line for line in lines) == 1
    assert any(line.startswith("warning: ac, doc: target_logits has only 10 row(s)")
               for line in lines)


@pytest.mark.parametrize(
    ("param", "expected"),
    [
        ("alsa-g.alpha", "--param must look like METHOD.NAME=VALUE"),
        ("magic.alpha=1", "method must be one of ac, doc"),
        ("alsa-g.nope=1", "--param alsa-g.nope: Invalid parameters for estimator 'alsa-g'"),
        ("alsa-g.alpha=abc", "--param alsa-g.alpha: The 'alpha' parameter of ALSAG must be a"),
        ("alsa-g.alpha=1.5", "must be in (0.0, 1.0); got 1.5"),
        ("atc-mc.temperature_scaling=false", "'atc-mc' is not among the methods to run"),
        ("gnnevaluator.n_meta=8", "GNNEvaluator needs the trained graph model"),
    ],
)
def test_bad_param_is_one_clear_line_before_any_work(files, param, expected):
    result = invoke("--val", files["val"], "--target", files["target"], "--method", "alsa-g",
                    "--param", param)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0]
    assert "Traceback" not in result.output


def test_per_class_table_and_json(files):
    result = invoke("--val", files["val"], "--target", files["target"], "--method", "atc-mc",
                    "--method", "cot", "--per-class")
    assert result.exit_code == 0, result.output
    assert "per predicted class" in result.stdout and "class 2" in result.stdout
    rows = {r["method"]: r for r in json.loads(invoke(
        "--val", files["val"], "--target", files["target"], "--method", "atc-mc",
        "--method", "cot", "--json").stdout)}
    assert rows["cot"]["per_class"] is None and len(rows["atc-mc"]["per_class"]) == 3


# --------------------------------------------------------------------------- intervals (issue 11)
def test_interval_is_printed_and_follows_level(files):
    result = invoke("--val", files["val"], "--target", files["target"], "--method", "ac")
    assert result.exit_code == 0, result.output
    assert "90% interval" in result.stdout and "not the error a distribution shift" in (
        " ".join(result.stdout.split()))
    widths = {}
    for level in ("0.5", "0.99"):
        out = invoke("--val", files["val"], "--target", files["target"], "--method", "ac",
                     "--method", "alsa-e", "--level", level, "--json")
        assert out.exit_code == 0, out.output
        rows = json.loads(out.stdout)
        for row in rows:
            low, high = row["interval"]
            assert row["level"] == float(level)
            assert 0.0 <= low <= row["accuracy"] <= high <= 1.0
        widths[level] = rows[0]["interval"][1] - rows[0]["interval"][0]
    # a normal interval: the half-width scales with the normal quantile (2.5758 vs 0.6745)
    assert widths["0.99"] / widths["0.5"] == pytest.approx(2.5758 / 0.6745, rel=1e-3)


@pytest.mark.parametrize("level", ["1.5", "0", "1", "-0.2", "abc", "nan"])
def test_bad_level_is_one_error_line(files, level):
    result = invoke("--val", files["val"], "--target", files["target"], "--method", "ac",
                    "--level", level)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "'level'" in lines[0] and "(0, 1)" in lines[0] and "got" in lines[0]


# ----------------------------------------------------------------- score estimators (issue 12)
def test_score_estimators_do_not_run_by_default(files):
    result = invoke("--val", files["val"], "--target", files["target"], "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    methods = [row["method"] for row in rows]
    assert methods == available_estimators() + ["auto"]  # auto from their estimates, last
    assert [row["recommended"] for row in rows] == [False] * (len(rows) - 1) + [True]
    low, high = rows[-1]["shift_interval"]
    assert low <= rows[-1]["accuracy"] <= high
    # a method the shipped calibration has a band for shows it, around its interval; a method
    # added since has none yet (null) until `alsa-bench calibrate` fits one
    from estimators.trust.calibration_artifact import active_calibration

    bands = set(active_calibration().bands)
    assert {"ac", "doc", "im", "atc-mc", "atc-ne", "cot", "alsa-g", "alsa-e"} <= bands
    for r in rows[:-1]:
        if r["method"] in bands:
            assert r["shift_interval"][0] <= r["interval"][0], r
        else:
            assert r["shift_interval"] == [None, None], r
    assert "mano" not in methods and "nuclear-norm" not in methods


def test_named_score_estimator_shows_the_score_and_no_accuracy(files):
    from estimators.scores.mano import mano_score
    from estimators.scores.nuclear_norm import nuclear_norm_score

    target = np.load(files["target"])["logits"]
    result = invoke("--val", files["val"], "--target", files["target_labelled"],
                    "--method", "mano", "--method", "nuclear-norm", "--method", "ac", "--json")
    assert result.exit_code == 0, result.output
    rows = {row["method"]: row for row in json.loads(result.stdout)}
    assert rows["mano"]["accuracy"] is None and rows["mano"]["abs_error"] is None
    assert rows["mano"]["score"] == pytest.approx(mano_score(target), abs=1e-12)
    assert rows["nuclear-norm"]["score"] == pytest.approx(nuclear_norm_score(target), abs=1e-12)
    assert rows["mano"]["interval"] == [None, None]
    assert rows["ac"]["accuracy"] is not None and "score" not in rows["ac"]
    table = invoke("--val", files["val"], "--target", files["target_labelled"],
                   "--method", "mano", "--method", "ac")
    assert table.exit_code == 0, table.output
    mano_line = next(line for line in table.stdout.splitlines() if "mano" in line)
    assert "–" in mano_line and f"{mano_score(target):.4f}" in mano_line
    assert "score" in table.stdout


def test_score_map_param_gives_the_mapped_accuracy(files):
    from estimators.scores.nuclear_norm import nuclear_norm_score

    target = np.load(files["target"])["logits"]
    result = invoke("--val", files["val"], "--target", files["target"], "--method",
                    "nuclear-norm", "--param", "nuclear-norm.score_map=[0.5, 0.2]", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["accuracy"] == pytest.approx(0.5 * nuclear_norm_score(target) + 0.2, abs=1e-12)


@pytest.mark.parametrize("param, expected", [
    ("mano.score_map=[1, 2, 3]", "score_map"),
    ("mano.form=\"nope\"", "form"),
])
def test_bad_score_param_is_one_error_line(files, param, expected):
    result = invoke("--val", files["val"], "--target", files["target"], "--method", "mano",
                    "--param", param)
    assert result.exit_code == 2
    assert "error:" in result.output and expected in result.output


def test_score_param_without_the_method_is_refused(files):
    result = invoke("--val", files["val"], "--target", files["target"],
                    "--param", "mano.delta=3")
    assert result.exit_code == 2 and "not among the methods" in result.output


def test_default_level_copy_matches_the_estimators():
    from estimators.core.base import DEFAULT_LEVEL
    from flows import estimate_cli

    assert estimate_cli.DEFAULT_LEVEL == DEFAULT_LEVEL


def test_building_the_command_line_imports_neither_torch_nor_prefect():
    import subprocess
    import sys

    code = ("import sys, flows.cli; "
            "print(sorted(m for m in ('torch', 'prefect', 'torchvision') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
