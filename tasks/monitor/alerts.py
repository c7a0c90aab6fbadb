"""Alerts: when a chunk's accuracy is worse than the user said it may be, and in which direction.

Two rules, each optional (NannyML users asked for alerts that know which direction is bad,
NannyML #126: for accuracy only *down* is bad, so an estimate above the reference never alerts):

``--alert-below FRACTION`` (kind ``below``)
    The chunk's band lies wholly below ``FRACTION``: its upper end ``high < FRACTION``. The
    band is the shift-aware ``shift_interval`` (the sampling interval where the calibration has
    no band for the method). So an alert means "even the optimistic end is below", not "the
    point estimate dipped".
``--alert-drop POINTS`` (kind ``drop``)
    The estimate lies more than ``POINTS`` percentage points below the reference's own
    estimate (the same fitted estimator on the reference):
    ``reference - estimate > POINTS / 100``.

An empty chunk (no estimate) never alerts. Each alert is emitted three ways by the flow
(:mod:`flows.monitor`): a Prefect event ``alsa-bench.monitor.alert``, a log line, and a
flow-run artifact; the CLI prints it on stderr. An alert fires once, when its chunk is first
estimated; it is stored with the estimate (``alert``, ``alerts_json``).

Examples
--------
>>> alerts = check_alerts(0.62, (0.58, 0.66), 0.85, alert_below=0.7, alert_drop=10)
>>> [(a.kind, a.direction) for a in alerts]
[('below', 'down'), ('drop', 'down')]
>>> check_alerts(0.9, (0.85, 0.95), 0.85, alert_below=0.7, alert_drop=10)
[]
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Final

__all__ = ["ALERT_EVENT", "Alert", "check_alerts", "describe"]

#: Name of the Prefect event an alert is emitted as.
ALERT_EVENT: Final[str] = "alsa-bench.monitor.alert"
#: Lower accuracy is worse: the only direction that alerts.
DOWN: Final[str] = "down"


@dataclass(frozen=True)
class Alert:
    """One alert of one chunk and method.

    Attributes
    ----------
    kind : {"below", "drop"}
        Which rule fired.
    direction : str
        ``"down"``: accuracy fell (the only direction that is bad for accuracy).
    threshold : float
        ``--alert-below``, or the reference's estimate minus ``--alert-drop`` points.
    value : float
        What crossed it: the band's upper end (``below``) or the estimate (``drop``).
    estimate : float
    band : tuple of float
    reference_accuracy : float
    option : str
        The rule as given: ``--alert-below 0.75`` or ``--alert-drop 10``.
    """

    kind: str
    direction: str
    threshold: float
    value: float
    estimate: float
    band: tuple[float, float]
    reference_accuracy: float
    option: str

    def to_record(self) -> dict[str, Any]:
        """JSON-safe dict."""
        record = asdict(self)
        record["band"] = [float(self.band[0]), float(self.band[1])]
        return record


def check_alerts(
    estimate: float,
    band: tuple[float, float],
    reference_accuracy: float,
    *,
    alert_below: float | None,
    alert_drop: float | None,
) -> list[Alert]:
    """The alerts one estimate raises (empty when none, or when the estimate is NaN).

    Parameters
    ----------
    estimate : float
    band : tuple of float
        ``(low, high)``.
    reference_accuracy : float
        The fitted estimator's estimate of the reference itself.
    alert_below : float or None
        Fraction; alert when ``band[1] < alert_below``.
    alert_drop : float or None
        Percentage points; alert when ``reference_accuracy - estimate > alert_drop / 100``.

    Returns
    -------
    list of Alert
    """
    if not math.isfinite(estimate):
        return []
    out: list[Alert] = []
    low, high = float(band[0]), float(band[1])
    if alert_below is not None and math.isfinite(high) and high < alert_below:
        out.append(Alert("below", DOWN, float(alert_below), high, float(estimate), (low, high),
                         float(reference_accuracy), f"--alert-below {alert_below:g}"))
    if (alert_drop is not None and math.isfinite(reference_accuracy)
            and reference_accuracy - estimate > alert_drop / 100.0):
        out.append(Alert("drop", DOWN, float(reference_accuracy - alert_drop / 100.0),
                         float(estimate), float(estimate), (low, high),
                         float(reference_accuracy), f"--alert-drop {alert_drop:g}"))
    return out


def describe(alert: Alert, chunk: str, method: str) -> str:
    """One line for the log, stderr and the notification.

    Examples
    --------
    >>> a = check_alerts(0.62, (0.58, 0.66), 0.85, alert_below=0.7, alert_drop=None)[0]
    >>> print(describe(a, "day-24.npz", "auto"))  # doctest: +NORMALIZE_WHITESPACE
    accuracy alert (down) on day-24.npz [auto]: band [0.580, 0.660] lies wholly below
    --alert-below 0.7 (estimate 0.620)
    """
    head = f"accuracy alert ({alert.direction}) on {chunk} [{method}]"
    if alert.kind == "below":
        return (f"{head}: band [{alert.band[0]:.3f}, {alert.band[1]:.3f}] lies wholly below "
                f"{alert.option} (estimate {alert.estimate:.3f})")
    drop = 100.0 * (alert.reference_accuracy - alert.estimate)
    return (f"{head}: estimate {alert.estimate:.3f} is {drop:.1f} points below the reference's "
            f"{alert.reference_accuracy:.3f} ({alert.option})")
