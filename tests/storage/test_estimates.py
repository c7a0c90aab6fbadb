"""Estimates: replace by (split, method), the report_rows view, the digest."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from storage import (
    EstimateRow,
    connect,
    estimates_digest,
    has_estimates,
    read_estimates,
    read_report_rows,
    write_estimates,
)

from ._helpers import RUN_KEY, add_run

REPORT_COLUMNS = [
    "suite", "dataset", "backbone", "seed", "shift_family", "shift", "severity", "n_target",
    "method", "estimated_accuracy", "true_accuracy", "abs_error", "run_key", "split",
    "interval_low", "interval_high", "interval_level",
]


def _row(
    split: str, method: str, est: float, true: float = 0.8, run_key: str = RUN_KEY
) -> EstimateRow:
    return EstimateRow(
        run_key=run_key, split=split, method=method, params_json='{"seed": 0}',
        estimated_accuracy=est, true_accuracy=true, abs_error=abs(est - true),
        fit_seconds=0.5, estimate_seconds=0.01, diagnostics_json='{"epochs": 3}', code_version="v1",
    )


@pytest.fixture
def con(tmp_path):
    with connect(tmp_path / "bench.duckdb") as con:
        yield con


def test_round_trip_and_has_estimates(con):
    rows = [_row("clean", "ac", 0.7), _row("noise-3", "ac", 0.6), _row("clean", "alsa-g", 0.75)]
    assert not has_estimates(con, RUN_KEY)
    assert write_estimates(con, RUN_KEY, rows) == 3
    assert has_estimates(con, RUN_KEY)
    assert read_estimates(con, RUN_KEY) == sorted(rows, key=lambda r: (r.split, r.method))
    created = con.sql("SELECT DISTINCT created_at IS NOT NULL FROM estimates").fetchall()
    assert created == [(True,)]


def test_rewrite_replaces_given_pairs_only(con):
    write_estimates(con, RUN_KEY, [_row("clean", "ac", 0.7), _row("clean", "doc", 0.71)])
    write_estimates(con, "other.run.s0", [_row("clean", "ac", 0.1, run_key="other.run.s0")])
    write_estimates(con, RUN_KEY, [_row("clean", "ac", 0.9)])
    got = {(r.split, r.method): r.estimated_accuracy for r in read_estimates(con, RUN_KEY)}
    assert got == {("clean", "ac"): 0.9, ("clean", "doc"): 0.71}
    assert [r.estimated_accuracy for r in read_estimates(con, "other.run.s0")] == [0.1]
    assert con.sql("SELECT count(*) FROM estimates").fetchall() == [(3,)]


def test_empty_rows_change_nothing(con):
    write_estimates(con, RUN_KEY, [_row("clean", "ac", 0.7)])
    assert write_estimates(con, RUN_KEY, []) == 0
    assert len(read_estimates(con, RUN_KEY)) == 1


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([_row("clean", "ac", 0.7, run_key="x")], r"rows\[0\].run_key must equal run_key"),
        ([_row("clean", "ac", 0.7), _row("clean", "ac", 0.6)], r"\('clean', 'ac'\) appears twice"),
        (
            [replace(_row("clean", "ac", 0.7), params_json="{oops")],
            r"rows\[0\].params_json must be a JSON",
        ),
        ([replace(_row("clean", "ac", 0.7), method="")], r"rows\[0\].method must be a non-empty"),
        (
            [replace(_row("clean", "ac", 0.7), abs_error="0.1")],
            r"rows\[0\].abs_error must be a number",
        ),
    ],
)
def test_bad_rows_are_rejected_before_writing(con, rows, message):
    write_estimates(con, RUN_KEY, [_row("clean", "ac", 0.5)])
    with pytest.raises(ValueError, match=message):
        write_estimates(con, RUN_KEY, rows)
    assert [r.estimated_accuracy for r in read_estimates(con, RUN_KEY)] == [0.5]


def test_non_row_is_a_type_error(con):
    with pytest.raises(TypeError, match=r"rows\[0\] must be an EstimateRow; got dict"):
        write_estimates(con, RUN_KEY, [{"split": "clean"}])


def test_report_rows_join_targets_with_runs(con, rng):
    add_run(con, rng, suite="toy")
    add_run(con, np.random.default_rng(3), "b.mlp.s1", suite="other", seed=1)
    splits = dict(
        con.sql(
            "SELECT split, true_accuracy FROM splits WHERE run_key = ?", params=[RUN_KEY]
        ).fetchall()
    )
    rows = [
        _row(split, method, 0.6, splits[split])
        for split in ("clean", "noise-3", "val")  # an estimate on 'val' never reaches the view
        for method in ("ac", "alsa-g")
    ]
    write_estimates(con, RUN_KEY, rows)
    write_estimates(con, "b.mlp.s1", [_row("clean", "ac", 0.5, run_key="b.mlp.s1")])
    df = read_report_rows(con)
    assert list(df.columns) == REPORT_COLUMNS
    assert len(df) == 5
    toy = read_report_rows(con, suite="toy")
    assert len(toy) == 4 and set(toy["split"]) == {"clean", "noise-3"}
    noise = toy[toy["split"] == "noise-3"].iloc[0]
    described = (noise["shift_family"], noise["shift"], noise["severity"], noise["n_target"])
    assert described == ("noise", "noise", 3, 120)
    assert noise["abs_error"] == pytest.approx(abs(0.6 - splits["noise-3"]))
    assert (noise["dataset"], noise["backbone"], noise["seed"]) == ("toy", "mlp", 0)
    empty = read_report_rows(con, suite="none")
    assert empty.empty and list(empty.columns) == REPORT_COLUMNS


def test_digest_ignores_order_and_timings_but_not_results():
    rows = [_row("clean", "ac", 0.7), _row("noise-3", "doc", 0.6)]
    base = estimates_digest(rows)
    assert base == estimates_digest(rows[::-1])
    timed = [
        replace(r, fit_seconds=9.0, estimate_seconds=3.0, diagnostics_json='{"t": 1}')
        for r in rows
    ]
    assert estimates_digest(timed) == base
    assert estimates_digest([replace(rows[0], estimated_accuracy=0.7000001), rows[1]]) != base
    assert estimates_digest([replace(rows[0], params_json='{"seed": 1}'), rows[1]]) != base
    assert estimates_digest(rows[:1]) != base


def test_a_score_method_without_accuracy_is_stored_as_null(con):
    import math

    row = _row("clean", "mano", math.nan)
    write_estimates(con, RUN_KEY, [row])
    stored = con.sql("SELECT estimated_accuracy IS NULL, abs_error IS NULL, true_accuracy "
                     "FROM estimates").fetchall()
    assert stored == [(True, True, 0.8)]
    back = read_estimates(con, RUN_KEY)[0]
    assert math.isnan(back.estimated_accuracy) and math.isnan(back.abs_error)
    assert con.sql("SELECT avg(abs_error) FROM estimates").fetchall() == [(None,)]
