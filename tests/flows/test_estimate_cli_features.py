"""``alsa-bench estimate`` with feature arrays in the logit files (issue 25)."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from estimators import available_estimators, get_estimator
from storage.logit_files import load_feature_arrays
from tests.flows.test_estimate_cli import app, runner  # the one test app of the command


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(200, 6))
    zv = xv[:, :3] * 2 + rng.normal(size=(200, 3))
    yv = np.where(rng.random(200) < 0.8, zv.argmax(1), rng.integers(0, 3, 200))
    xt = rng.normal(size=(150, 6)) * 1.4
    zt = xt[:, :3] * 2
    xtr, ytr = rng.normal(size=(260, 6)), rng.integers(0, 3, 260)
    paths = {k: tmp_path / f"{k}.npz" for k in ("val", "val_plain", "target", "target_plain")}
    np.savez(paths["val"], logits=zv, labels=yv, features=xv, train_features=xtr,
             train_labels=ytr)
    np.savez(paths["val_plain"], logits=zv, labels=yv)
    np.savez(paths["target"], logits=zt, features=xt)
    np.savez(paths["target_plain"], logits=zt)
    paths["target_parquet"] = tmp_path / "target.parquet"
    pq.write_table(pa.table({"logits": zt.tolist(), "features": xt.tolist()}),
                   paths["target_parquet"])
    paths["target_columns"] = tmp_path / "target_columns.parquet"
    pq.write_table(pa.table({**{f"logit_{k}": zt[:, k] for k in range(3)},
                             **{f"feature_{k}": xt[:, k] for k in range(6)}}),
                   paths["target_columns"])
    paths["arrays"] = {"zv": zv, "yv": yv, "xv": xv, "xt": xt, "zt": zt, "xtr": xtr, "ytr": ytr}
    return paths


def invoke(*args):
    return runner.invoke(app, ["estimate", *map(str, args)])


def test_default_methods_add_the_feature_methods_when_both_files_have_features(files):
    result = invoke("--val", files["val"], "--target", files["target"], "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    # every method, the feature methods included, then auto (computed from the logit methods)
    assert [r["method"] for r in rows] == [*available_estimators(include_features=True), "auto"]
    a = files["arrays"]
    distcs = get_estimator("distcs").fit(
        a["zv"], a["yv"], val_features=a["xv"], train_features=a["xtr"], train_labels=a["ytr"])
    want = distcs.estimate(a["zt"], target_features=a["xt"]).accuracy
    assert next(r for r in rows if r["method"] == "distcs")["accuracy"] == pytest.approx(want)
    assert "note:" not in result.stderr


def test_default_methods_without_features_are_unchanged_and_quiet(files):
    result = invoke("--val", files["val_plain"], "--target", files["target_plain"], "--json")
    assert result.exit_code == 0, result.output
    assert [r["method"] for r in json.loads(result.stdout)] == [*available_estimators(), "auto"]
    assert result.stderr == ""


@pytest.mark.parametrize("val,target,missing", [
    ("val", "target_plain", "target_plain.npz holds no array 'features'"),
    ("val_plain", "target", "val_plain.npz holds no array 'features'"),
    ("val_plain", "target_plain", "val_plain.npz and .*target_plain.npz hold no array"),
])
def test_a_named_feature_method_without_features_is_skipped_with_a_note(files, val, target,
                                                                         missing):
    result = invoke("--val", files[val], "--target", files[target], "-m", "ac", "-m", "distcs",
                    "-m", "aline-s", "--json")
    assert result.exit_code == 0, result.output
    assert [r["method"] for r in json.loads(result.stdout)] == ["ac"]
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("note: skipped distcs, aline-s: they need the classifier's features")
    assert re.search(missing, line)


def test_only_feature_methods_and_no_features_is_one_error_line(files):
    result = invoke("--val", files["val"], "--target", files["target_plain"], "-m", "distcs")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: no method left to run: skipped distcs")


@pytest.mark.parametrize("target", ["target_parquet", "target_columns"])
def test_parquet_features_and_the_score_method(files, target):
    result = invoke("--val", files["val"], "--target", files[target], "-m", "dispersion",
                    "--json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    a = files["arrays"]
    want = get_estimator("dispersion").fit(a["zv"], a["yv"], val_features=a["xv"]).estimate(
        a["zt"], target_features=a["xt"]).diagnostics["score"]
    assert row["score"] == pytest.approx(want) and row["accuracy"] is None


def test_malformed_features_are_one_error_line_naming_the_file(files, tmp_path):
    a = files["arrays"]
    bad = tmp_path / "bad.npz"
    np.savez(bad, logits=a["zv"], labels=a["yv"], features=a["xv"][:-1])
    result = invoke("--val", bad, "--target", files["target"], "-m", "distcs")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: --val {bad}: val_features must have one row per row of "
                           "val_logits (200); got 199")
    short = tmp_path / "short.npz"
    np.savez(short, logits=a["zt"], features=a["xt"][:, :4])
    result = invoke("--val", files["val"], "--target", short, "-m", "aline-d")
    [line] = result.stderr.strip().splitlines()
    assert f"{short}: features must have the feature dimension of" in line


def test_parquet_cannot_hold_training_features(tmp_path):
    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"logits": [[0.0, 1.0]], "train_features": [[1.0]]}), path)
    with pytest.raises(ValueError, match="cannot share a parquet table with the logits"):
        load_feature_arrays(path)
    plain = tmp_path / "p.parquet"
    pq.write_table(pa.table({"logits": [[0.0, 1.0]]}), plain)
    assert load_feature_arrays(plain) == {}
