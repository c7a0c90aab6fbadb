"""The estimate stage's one path (compute_estimates + ingest_estimates) on a synthetic run.

The run is published as a logits file (as the extract stage does) and ingested into a
temporary DuckDB file; the estimates are computed from the file and ingested in this process.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import storage
import storage.logits
from estimators import available_estimators
from estimators.core.base import Estimator
from estimators.core.registry import ESTIMATORS
from storage import (
    NotFoundError,
    RunInfo,
    connect,
    estimates_digest,
    read_anchors,
    read_estimates,
)
from storage.results import ResultCorruptError, ingest, write_logits_file
from tasks.methods import all_method_names, default_method_names
from tasks.runtime.refs import EstimatesRef, LogitsRef
from tasks.stages.estimate import compute_estimates
from tests.storage._helpers import add_run, make_split
from tests.tasks._stages import estimate

RUN = "toy.mlp.s7"
TARGETS = (("clean", 120, 0.8), ("noise-3", 90, 0.5), ("shift-1", 80, 0.6))


class Spy(Estimator):
    """Records what it is given; estimates the mean max-softmax (a deterministic number)."""

    name: ClassVar[str] = "spy"
    seen_fit: ClassVar[list[tuple[np.ndarray, np.ndarray]]] = []
    seen_estimate: ClassVar[list[tuple[Any, ...]]] = []

    def __init__(self, *, seed: int = 0, shrink: float = 1.0) -> None:
        self.seed = seed
        self.shrink = shrink

    def _fit(self, val_logits, val_labels):
        type(self).seen_fit.append((val_logits.copy(), val_labels.copy()))

    def _estimate(self, target_logits):
        type(self).seen_estimate.append((target_logits.copy(),))
        z = target_logits - target_logits.max(axis=1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        return float(p.max(axis=1).mean() * self.shrink), None, {"n": len(target_logits)}


class AnchorSpy(Spy):
    """A Spy with ALSA-like fitted anchors."""

    name: ClassVar[str] = "anchor-spy"

    def _fit(self, val_logits, val_labels):
        self.positions_ = val_logits[:5].astype(np.float32)
        self.peaks_ = np.linspace(-6, 6, 5).astype(np.float32)
        self.variances_ = np.full(5, 5.0, dtype=np.float32)


class Broken(Spy):
    name: ClassVar[str] = "broken"

    def _fit(self, val_logits, val_labels):
        raise FloatingPointError("diverged")


@pytest.fixture
def spies(monkeypatch):
    for cls in (Spy, AnchorSpy, Broken):
        monkeypatch.setitem(ESTIMATORS, cls.name, cls)
    monkeypatch.setattr(Spy, "seen_fit", [])
    monkeypatch.setattr(Spy, "seen_estimate", [])
    return Spy


def _publish(db, arrays, run_key=RUN, seed=7, targets=TARGETS) -> LogitsRef:
    """Publish a run's splits as a logits file beside ``db`` and ingest it."""
    splits = [(storage.SplitInfo("val", "val", None, None, None), *arrays["val"])]
    for name, _, _ in targets:
        family, _, sev = name.partition("-")
        info = storage.SplitInfo(name, "target", family, family, int(sev) if sev else None)
        splits.append((info, *arrays[name]))
    n_classes = arrays["val"][0].shape[1]
    run = RunInfo(run_key, "toy", "toy", "mlp", seed, n_classes)
    published = write_logits_file(run, splits, db.parent / "results")
    with connect(db) as con:
        ingest(con, published.path)
    return LogitsRef(run_key=run_key, db_path=str(db), digest="", path=published.path,
                     sha256=published.sha256)


@pytest.fixture
def run_db(tmp_path):
    db = tmp_path / "bench.duckdb"
    with connect(db) as con:
        arrays = add_run(con, np.random.default_rng(1), RUN, n_val=150, targets=TARGETS, seed=7)
    return db, arrays, _publish(db, arrays)


def _true_accuracy(arrays, split):
    logits, labels = arrays[split]
    return float(np.mean(logits.argmax(1) == labels))


def test_rows_for_every_method_and_target_split(spies, run_db, caplog):
    db, arrays, logits = run_db
    with caplog.at_level(logging.INFO, logger="tasks.stages.estimate"):
        ref = estimate(logits, methods=["spy", "anchor-spy"], code_version="cv1")
    assert isinstance(ref, EstimatesRef) and ref.run_key == RUN and ref.db_path == str(db)
    with connect(db, read_only=True) as con:
        rows = read_estimates(con, RUN)
        positions, peaks, variances = read_anchors(con, RUN, "anchor-spy")
        with pytest.raises(NotFoundError):
            read_anchors(con, RUN, "spy")
    assert sorted((r.split, r.method) for r in rows) == sorted(
        (s, m) for s, _, _ in TARGETS for m in ("spy", "anchor-spy")
    )
    for row in rows:
        assert row.true_accuracy == _true_accuracy(arrays, row.split)
        assert row.abs_error == abs(row.estimated_accuracy - row.true_accuracy)
        assert row.code_version == "cv1" and row.estimate_seconds >= 0
        assert json.loads(row.params_json) == {"seed": 7, "shrink": 1.0}
        assert json.loads(row.diagnostics_json) == {"n": arrays[row.split][0].shape[0]}
    assert len({r.fit_seconds for r in rows if r.method == "spy"}) == 1
    assert ref.digest == estimates_digest(rows)
    np.testing.assert_array_equal(positions, arrays["val"][0][:5])
    np.testing.assert_array_equal(peaks, np.linspace(-6, 6, 5).astype(np.float32))
    assert variances.shape == (5,)
    assert any("fitted spy" in m for m in caplog.messages)
    assert any("published 6 estimates" in m for m in caplog.messages)


def test_estimators_see_target_logits_only(spies, run_db, monkeypatch):
    db, arrays, logits = run_db

    def forbidden(*args, **kwargs):
        raise AssertionError("the estimate stage read target labels")

    monkeypatch.setattr(storage.logits, "read_target_labels", forbidden)
    monkeypatch.setattr(storage, "read_target_labels", forbidden)
    estimate(logits, methods=["spy"])
    (val_logits, val_labels), = spies.seen_fit
    np.testing.assert_array_equal(val_logits, arrays["val"][0])
    np.testing.assert_array_equal(val_labels, arrays["val"][1])
    order = [name for name, _, _ in TARGETS]  # the file's order
    # the first call is fit's own, on the validation logits (the interval's residual variance)
    (fit_call, *target_calls) = spies.seen_estimate
    np.testing.assert_array_equal(fit_call[0], arrays["val"][0].astype(np.float64))
    assert len(target_calls) == len(TARGETS)
    for split, args in zip(order, target_calls):
        assert len(args) == 1  # logits, and nothing else
        np.testing.assert_array_equal(args[0], arrays[split][0].astype(np.float64))


def test_seed_given_in_method_params_wins(spies, run_db):
    db, _, logits = run_db
    estimate(logits, methods=["spy"], method_params={"spy": {"seed": 3, "shrink": 0.5}})
    with connect(db, read_only=True) as con:
        params = {r.params_json for r in read_estimates(con, RUN)}
    assert params == {json.dumps({"seed": 3, "shrink": 0.5}, sort_keys=True)}


def test_rerun_replaces_rows_and_keeps_the_digest(spies, run_db):
    db, _, logits = run_db
    first = estimate(logits, methods=["spy", "anchor-spy"])
    second = estimate(logits, methods=["spy", "anchor-spy"])
    assert first == second
    third = estimate(logits, methods=["spy"], method_params={"spy": {"shrink": 0.5}})
    assert third.digest != first.digest
    with connect(db, read_only=True) as con:
        rows = read_estimates(con, RUN)
        assert con.sql("SELECT count(*) FROM anchors").fetchall() == [(5,)]
    assert len(rows) == 2 * len(TARGETS)
    assert {json.loads(r.params_json)["shrink"] for r in rows if r.method == "spy"} == {0.5}
    assert {json.loads(r.params_json)["shrink"] for r in rows if r.method == "anchor-spy"} == {1.0}


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"methods": ["nope"]}, ValueError, r"Unknown estimator\(s\) \['nope'\]"),
        ({"methods": "spy"}, ValueError, "not a single string"),
        ({"methods": []}, ValueError, "at least one estimator"),
        ({"methods": ["spy", "spy"]}, ValueError, r"\['spy'\] more than once"),
        ({"methods": ["spy"], "method_params": {"ac": {}}}, ValueError, "'ac', which is not among"),
        (
            {"methods": ["spy"], "method_params": {"spy": 3}},
            ValueError,
            r"method_params\['spy'\] must be a mapping",
        ),
        (
            {"methods": ["spy"], "method_params": {"spy": {"bogus": 1}}},
            ValueError,
            "Invalid parameters",
        ),
    ],
)
def test_bad_arguments_are_named(spies, run_db, kwargs, error, message):
    db, _, logits = run_db
    with pytest.raises(error, match=message):
        estimate(logits, **kwargs)


def test_missing_data_is_named(spies, run_db, tmp_path):
    import dataclasses

    db, arrays, logits = run_db
    with pytest.raises(ValueError, match="holds run 'toy.mlp.s7', not 'other.x.s0'"):
        compute_estimates(dataclasses.replace(logits, run_key="other.x.s0"), methods=["spy"])
    with pytest.raises(ResultCorruptError):
        compute_estimates(dataclasses.replace(logits, path=str(tmp_path / "gone.parquet")),
                          methods=["spy"])
    with pytest.raises(TypeError, match="LogitsRef with a result file"):
        compute_estimates(dataclasses.replace(logits, path=""), methods=["spy"])
    val_only = _publish(db, {"val": make_split(np.random.default_rng(2), 20, 4)},
                        run_key="val.only.s0", seed=0, targets=())
    with pytest.raises(NotFoundError, match="no target splits"):
        compute_estimates(val_only, methods=["spy"])


def test_fit_failure_names_method_and_writes_nothing(spies, run_db):
    db, _, logits = run_db
    with pytest.raises(FloatingPointError, match="diverged") as info:
        estimate(logits, methods=["spy", "broken"])
    assert any("'broken'" in note for note in info.value.__notes__)
    with connect(db, read_only=True) as con:
        assert read_estimates(con, RUN) == []


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_every_registered_estimator_on_the_real_registry(run_db):
    db, arrays, logits = run_db
    fast_alsa = {"n_anchors": 40, "max_epochs": 60}
    ref = estimate(
        logits, method_params={"alsa-g": fast_alsa, "alsa-e": fast_alsa}, code_version="real"
    )
    methods = available_estimators(include_scores=True)
    assert {"ac", "doc", "im", "atc-mc", "atc-ne", "cot", "alsa-g", "alsa-e", "mano",
            "nuclear-norm"} <= set(methods)
    with connect(db, read_only=True) as con:
        rows = read_estimates(con, RUN)
        anchors = {m: read_anchors(con, RUN, m) for m in ("alsa-g", "alsa-e")}
        nulls = con.sql("SELECT DISTINCT method FROM estimates WHERE estimated_accuracy IS NULL "
                        "ORDER BY method").fetchall()
    assert sorted((r.split, r.method) for r in rows) == sorted(
        (s, m) for s, _, _ in TARGETS for m in methods
    )
    # the score methods store their score and no accuracy (the report maps it)
    assert nulls == [("entropy",), ("mano",), ("nuclear-norm",)]
    for row in [r for r in rows if r.method in ("mano", "nuclear-norm", "entropy")]:
        from estimators import get_estimator

        score = json.loads(row.diagnostics_json)["score"]
        est = get_estimator(row.method).fit(*arrays["val"])
        assert score == pytest.approx(
            est.estimate(arrays[row.split][0]).diagnostics["score"], abs=1e-9)
        assert np.isnan(row.estimated_accuracy) and np.isnan(row.abs_error)
    rows = [r for r in rows if r.method not in ("mano", "nuclear-norm", "entropy")]
    for row in rows:
        assert np.isfinite(row.estimated_accuracy)
        assert row.true_accuracy == _true_accuracy(arrays, row.split)
        assert row.abs_error == abs(row.estimated_accuracy - row.true_accuracy)
        if row.method.startswith("alsa"):
            assert json.loads(row.params_json)["seed"] == 7
    for positions, peaks, variances in anchors.values():
        # the default space augments the 4 centred logits with one constant coordinate; below
        # 10,000 validation rows ALSA is a 3-fold cross-fitted ensemble of 40 anchors each
        assert positions.shape == (120, 5) and peaks.shape == variances.shape == (120,)
    with connect(db, read_only=True) as con:
        assert ref.digest == estimates_digest(read_estimates(con, RUN))


# --------------------------------------------------------------------------- issue 11
def test_intervals_and_per_class_estimates_are_stored(run_db):
    from estimators import get_estimator
    from estimators.core.base import per_class_accuracy

    db, arrays, logits = run_db
    estimate(logits, methods=["ac", "doc"])
    with connect(db, read_only=True) as con:
        rows = {(r.split, r.method): r for r in read_estimates(con, RUN)}
        report = storage.read_report_rows(con)
    val_logits, val_labels = arrays["val"]
    for split, n, _ in TARGETS:
        logits = arrays[split][0].astype(np.float64)
        for method in ("ac", "doc"):
            # the same estimator fitted here independently gives the stored interval
            res = get_estimator(method).fit(val_logits, val_labels).estimate(logits)
            row = rows[(split, method)]
            assert (row.interval_low, row.interval_high) == pytest.approx(res.interval)
            assert row.interval_level == 0.9
            assert row.interval_low <= row.estimated_accuracy <= row.interval_high
        ac = json.loads(rows[(split, "ac")].per_class_json)
        expected = per_class_accuracy(
            get_estimator("ac").fit(val_logits, val_labels).estimate(logits).per_sample, logits
        )
        np.testing.assert_allclose(
            [np.nan if v is None else v for v in ac["estimated"]], expected, rtol=1e-12
        )
        assert ac["count"] == np.bincount(logits.argmax(1), minlength=logits.shape[1]).tolist()
        assert sum(ac["count"]) == n
        assert rows[(split, "doc")].per_class_json is None  # no per-sample probabilities
    assert {"interval_low", "interval_high", "interval_level"} <= set(report.columns)
    assert report["interval_level"].eq(0.9).all()


def test_the_opt_in_shift_gate_runs_only_when_named(run_db):
    db, _, logits = run_db
    estimate(logits, methods=["ac"], code_version="gate")
    estimate(logits, methods=["shift-gate"], code_version="gate")
    with connect(db, read_only=True) as con:
        rows = read_estimates(con, RUN)
    gate = [r for r in rows if r.method == "shift-gate"]
    assert len(gate) == len(TARGETS)
    assert all(0.0 <= r.estimated_accuracy <= 1.0 for r in gate)
    params = json.loads(gate[0].params_json)
    # its covariate method, COT's exact transport, draws nothing at random: no seed to pass on
    assert params["seed"] is None and params["covariate"] == "cot"
    assert "shift-gate" not in default_method_names() and "shift-gate" in all_method_names()


def test_feature_methods_are_skipped_with_a_note_when_a_run_stores_no_features(run_db, caplog):
    from tasks.methods import feature_method_names, peer_method_names

    db, _, logits = run_db
    n_peer = len(peer_method_names())
    assert default_method_names()[-len(feature_method_names()) - n_peer:-n_peer] == (
        feature_method_names())
    assert set(feature_method_names()) <= set(all_method_names())
    with caplog.at_level(logging.WARNING, logger="tasks.stages.estimate"):
        estimate(logits, methods=["ac", "distcs", "aline-s"], code_version="features")
    with connect(db, read_only=True) as con:
        methods = {r.method for r in read_estimates(con, RUN)}
    assert methods == {"ac"}
    notes = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert notes == [f"Run {RUN}: skipped distcs, aline-s: they need the classifier's features, "
                     f"and run {RUN!r} has none stored."]


def _features_of(logits: np.ndarray, rng: np.random.Generator, d: int = 12) -> np.ndarray:
    """Features that carry the logits (so the methods have a signal) plus noise."""
    return np.hstack([logits, rng.normal(size=(logits.shape[0], d - logits.shape[1]))])


def test_stored_features_reach_the_feature_methods_exactly(tmp_path):
    """A run whose logits file lists feature files: the stage fits and estimates the feature
    methods on them, and its rows equal a direct computation on the same float16 arrays."""
    from estimators import get_estimator
    from storage.features import FeatureFileError, write_features
    from tasks.stages.estimate import read_run_logits

    db = tmp_path / "bench.duckdb"
    rng = np.random.default_rng(3)
    with connect(db) as con:
        arrays = add_run(con, rng, RUN, n_val=150, targets=TARGETS, seed=7)
    root = db.parent / "results"
    feats = {name: _features_of(arrays[name][0], rng) for name in ("val", *(t[0] for t in TARGETS))}
    train_x = _features_of(arrays["val"][0], rng)
    entries = [write_features(root, "val", "val", feats["val"])]
    entries += [write_features(root, name, "target", feats[name]) for name, _, _ in TARGETS]
    entries.append(write_features(root, "train", "train", train_x, arrays["val"][1]))
    splits = [(storage.SplitInfo("val", "val", None, None, None), *arrays["val"])]
    for name, _, _ in TARGETS:
        family, _, sev = name.partition("-")
        splits.append((storage.SplitInfo(name, "target", family, family,
                                         int(sev) if sev else None), *arrays[name]))
    published = write_logits_file(RunInfo(RUN, "toy", "toy", "mlp", 7, arrays["val"][0].shape[1]),
                                  splits, root, entries)
    with connect(db) as con:
        ingest(con, published.path)
        stored = con.execute("SELECT split, role, n_rows, dim FROM feature_files "
                             "WHERE run_key = ? ORDER BY split", [RUN]).fetchall()
    assert stored == sorted([("val", "val", 150, 12), ("train", "train", 150, 12),
                             *((n, "target", arrays[n][0].shape[0], 12) for n, _, _ in TARGETS)])
    ref = LogitsRef(run_key=RUN, db_path=str(db), digest="", path=published.path,
                    sha256=published.sha256)
    estimate(ref, methods=["ac", "distcs", "aline-s"], code_version="features")
    with connect(db, read_only=True) as con:
        rows = {(r.split, r.method): r for r in read_estimates(con, RUN)}
    half = {k: v.astype(np.float16) for k, v in feats.items()}
    for method in ("distcs", "aline-s"):
        est = get_estimator(method, seed=7).fit(
            arrays["val"][0], arrays["val"][1], val_features=half["val"],
            train_features=train_x.astype(np.float16), train_labels=arrays["val"][1])
        for name, _, _ in TARGETS:
            want = est.estimate(arrays[name][0], target_features=half[name]).accuracy
            assert rows[(name, method)].estimated_accuracy == pytest.approx(want, abs=1e-12)
    # a feature file changed on disk is refused by name, never read as if it were the stored one
    content, _ = read_run_logits(ref)
    victim = root / "features" / f"{entries[1].sha256}.npy"
    victim.write_bytes(victim.read_bytes()[:-2] + b"\x00\x01")
    with pytest.raises(FeatureFileError, match="does not match its name"):
        content.features.split(entries[1].split)


# --------------------------------------------------------------------------- one row builder
def test_ablation_variants_publish_the_same_rows_under_their_labels(run_db, monkeypatch):
    """estimate_variants never opens the database; its ingested rows equal the stage's."""
    from storage import db as storage_db
    from tasks.stages import ablations
    from tasks.stages.estimate import ingest_estimates

    db, _, logits = run_db
    main = estimate(logits, methods=["ac", "atc-mc"], code_version="cv")

    def no_database(*args, **kwargs):
        raise AssertionError("estimate_variants opened the database")

    with monkeypatch.context() as patch:
        patch.setattr(storage_db, "connect", no_database)
        patch.setattr("tasks.stages.estimate.connect", no_database)
        ref = ablations.estimate_variants(
            logits, {"ac[x]": ("ac", {}), "atc-mc[y]": ("atc-mc", {})}, code_version="cv")
    assert ref.path and Path(ref.path).parent.name == "estimates" and ref.db_path == str(db)
    ingest_estimates(ref)
    with connect(db, read_only=True) as con:
        rows = {(r.split, r.method): r for r in read_estimates(con, RUN)}
    assert len(rows) == 4 * len(TARGETS)  # the main rows are kept beside the variants
    for (split, label), row in rows.items():
        if "[" not in label:
            continue
        base = rows[(split, label.split("[")[0])]
        assert row.per_class_json is None  # variants store no per-class estimates
        for name in ("params_json", "estimated_accuracy", "true_accuracy", "abs_error",
                     "diagnostics_json", "code_version", "interval_low", "interval_high",
                     "interval_level"):
            assert getattr(row, name) == getattr(base, name), name
    assert rows[("clean", "ac")].per_class_json is not None
    assert main.digest != ref.digest


def test_estimate_row_is_canonical_json_with_nan_kept():
    import math

    from tasks.stages.rows import estimate_row

    info = storage.SplitInfo("clean", "target", "clean", "clean", None, 10, 0.75)
    row = estimate_row(
        RUN, info, "m", np.float32(0.5), params={"b": (1, 2), "a": np.int64(3)},
        diagnostics={"v": np.arange(2)}, interval=(math.nan, math.nan), level=math.nan,
        fit_seconds=1.0, estimate_seconds=2.0, code_version="cv",
    )
    assert row.params_json == '{"a": 3, "b": [1, 2]}'
    assert row.diagnostics_json == '{"v": [0, 1]}'
    assert (row.estimated_accuracy, row.true_accuracy, row.abs_error) == (0.5, 0.75, 0.25)
    assert math.isnan(row.interval_low) and math.isnan(row.interval_level)
    assert row.per_class_json is None and row.split == "clean"
