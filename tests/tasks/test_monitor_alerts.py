"""Alert rules: the band wholly below a threshold, a drop below the reference; only down."""

from __future__ import annotations

import math

import pytest

from tasks.monitor.alerts import check_alerts, describe


def test_below_needs_the_whole_band_below():
    assert check_alerts(0.70, (0.65, 0.749), 0.9, alert_below=0.75, alert_drop=None)[0].kind \
        == "below"
    assert check_alerts(0.70, (0.65, 0.75), 0.9, alert_below=0.75, alert_drop=None) == []
    assert check_alerts(0.70, (0.65, 0.80), 0.9, alert_below=0.75, alert_drop=None) == []


def test_drop_is_in_points_below_the_reference():
    [a] = check_alerts(0.79, (0.7, 0.9), 0.90, alert_below=None, alert_drop=10)
    assert (a.kind, a.direction) == ("drop", "down")
    assert a.threshold == pytest.approx(0.80) and a.value == 0.79
    assert check_alerts(0.81, (0.7, 0.9), 0.90, alert_below=None, alert_drop=10) == []


def test_a_rise_never_alerts_and_nan_never_alerts():
    assert check_alerts(0.99, (0.98, 1.0), 0.5, alert_below=0.75, alert_drop=1) == []
    assert check_alerts(math.nan, (0.0, 1.0), 0.9, alert_below=0.75, alert_drop=1) == []


def test_both_rules_and_their_lines():
    alerts = check_alerts(0.5, (0.4, 0.6), 0.9, alert_below=0.75, alert_drop=10)
    assert [a.kind for a in alerts] == ["below", "drop"]
    assert describe(alerts[1], "day-3.npz", "auto") == (
        "accuracy alert (down) on day-3.npz [auto]: estimate 0.500 is 40.0 points below the "
        "reference's 0.900 (--alert-drop 10)")
    assert alerts[0].to_record()["band"] == [0.4, 0.6]
