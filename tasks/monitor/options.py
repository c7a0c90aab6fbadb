"""What one ``alsa-bench monitor`` run is asked to do, checked once: :class:`MonitorOptions`.

The command line and the Prefect flow both build their options here, so a bad ``--chunk``,
method or threshold is refused in the same words, naming the option, before any file is read.

Examples
--------
>>> parse_chunk("file").kind, parse_chunk("5000").rows, parse_chunk("1w").period
('file', None, '1w')
>>> check_alert_below(0.75), check_alert_drop(5)
(0.75, 5.0)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

__all__ = [
    "DEFAULT_METHODS",
    "LEVEL",
    "MIN_ROWS",
    "ChunkRule",
    "MonitorOptions",
    "check_alert_below",
    "check_alert_drop",
    "check_methods",
    "make_options",
    "parse_chunk",
]

#: Nominal coverage of every band and interval the monitor stores (the estimators' default,
#: :data:`estimators.core.base.DEFAULT_LEVEL`; copied so that checking options imports no torch; a
#: test checks the copy).
LEVEL: Final[float] = 0.9
#: Rows below which a chunk's own sampling noise dominates its estimate (the estimators'
#: ``SmallSampleWarning`` threshold, ``estimators.core._validation.MIN_TARGET_ROWS``; a test checks).
MIN_ROWS: Final[int] = 30
#: The method run when ``-m`` is not given: the recommended combination.
DEFAULT_METHODS: Final[tuple[str, ...]] = ("auto",)
#: Periods of the timestamp column that ``--chunk`` accepts.
PERIODS: Final[tuple[str, ...]] = ("1d", "1w")
_ROWS: Final = re.compile(r"^[0-9]+$")


@dataclass(frozen=True)
class ChunkRule:
    """How production rows are cut into chunks (``--chunk``).

    Attributes
    ----------
    kind : {"file", "rows", "period"}
        One chunk per file; fixed row counts across files in name order; periods of the
        timestamp column.
    rows : int or None
        Rows per chunk (``kind == "rows"``).
    period : {"1d", "1w"} or None
        UTC day, or ISO week starting on Monday (``kind == "period"``).
    """

    kind: str
    rows: int | None = None
    period: str | None = None

    @property
    def label(self) -> str:
        """The rule as the user writes it: ``file``, ``10000``, ``1d``, ``1w``."""
        if self.kind == "rows":
            return str(self.rows)
        if self.kind == "period":
            return str(self.period)
        return "file"


def parse_chunk(value: Any) -> ChunkRule:
    """Parse ``--chunk``: ``file``, a positive row count, ``1d`` or ``1w``.

    Raises
    ------
    ValueError
        Naming ``--chunk``, what it accepts and what came.
    """
    text = str(value).strip().lower() if value is not None else "file"
    if text == "file":
        return ChunkRule("file")
    if text in PERIODS:
        return ChunkRule("period", period=text)
    if _ROWS.match(text) and int(text) >= 1:
        return ChunkRule("rows", rows=int(text))
    raise ValueError(
        "--chunk must be 'file' (one chunk per file), a number of rows >= 1 (e.g. 10000), "
        f"'1d' or '1w' (periods of the timestamp column); got {value!r}."
    )


def check_alert_below(value: Any) -> float | None:
    """``--alert-below FRACTION``: an accuracy in (0, 1], or None for no such alert.

    Raises
    ------
    ValueError
        For a percent (``75``), a non-number or a value outside (0, 1].
    """
    if value is None:
        return None
    number = _number(value, "--alert-below")
    if not 0.0 < number <= 1.0:
        hint = f" (a percent? write {number / 100:g})" if 1.0 < number <= 100.0 else ""
        raise ValueError(f"--alert-below must be an accuracy as a fraction in (0, 1], e.g. 0.75; "
                         f"got {value!r}{hint}.")
    return number


def check_alert_drop(value: Any) -> float | None:
    """``--alert-drop POINTS``: percentage points in (0, 100), or None for no such alert.

    Raises
    ------
    ValueError
        For a fraction-looking value is fine (0.5 = half a point); a non-number, 0, a negative
        value or 100 and above are refused.
    """
    if value is None:
        return None
    number = _number(value, "--alert-drop")
    if not 0.0 < number < 100.0:
        raise ValueError(f"--alert-drop must be percentage points in (0, 100), e.g. 5 for an "
                         f"estimate 5 points below the reference's; got {value!r}.")
    return number


def _number(value: Any, option: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{option} must be a number; got {value!r}.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{option} must be a number; got {value!r}.") from None
    if not math.isfinite(number):
        raise ValueError(f"{option} must be a finite number; got {value!r}.")
    return number


def check_methods(methods: Any) -> tuple[str, ...]:
    """``-m METHOD``: registry keys that estimate from logits alone; default ``auto``.

    Raises
    ------
    ValueError
        Naming the unknown keys and the ones available, or a method that needs features or a
        score map.
    """
    from estimators import feature_estimators, score_estimators
    from tasks.methods import estimator_names

    if not methods:
        return DEFAULT_METHODS
    if isinstance(methods, str):
        methods = [methods]
    chosen = tuple(dict.fromkeys(str(m).strip() for m in methods))
    known = list(estimator_names(scores=False, opt_in=True))
    unknown = [m for m in chosen if m not in known]
    if unknown:
        features = set(feature_estimators())
        scores = set(score_estimators())
        for name in unknown:
            if name in features:
                raise ValueError(f"-m {name}: it needs the classifier's features, which "
                                 "production logit files do not carry; choose a logit method "
                                 f"({', '.join(known)}).")
            if name in scores:
                raise ValueError(f"-m {name}: a score, not an accuracy, without a score map; "
                                 f"choose one of {', '.join(known)}.")
        raise ValueError(f"-m: unknown method {', '.join(map(repr, unknown))}; available: "
                         f"{', '.join(known)}.")
    return chosen


@dataclass(frozen=True)
class MonitorOptions:
    """One monitor run, checked.

    Attributes
    ----------
    reference : Path
        Logits and labels the estimators are fitted on (``.npz`` / ``.parquet``).
    production : str
        A folder, or a glob of ``.npz`` / ``.parquet`` files.
    chunk : ChunkRule
    methods : tuple of str
        Registry keys (default ``("auto",)``).
    alert_below : float or None
        Alert when a chunk's band lies wholly below this accuracy.
    alert_drop : float or None
        Alert when an estimate lies more than this many percentage points below the
        reference's own estimate.
    labels : str or None
        A file, folder or glob of label files for production files (matched by file name, or
        by content when they hold logits too).
    level : float
        Nominal coverage of the bands (0.9).
    run_id : str or None
        Recorded with every estimate (the Prefect flow-run id, or the CLI's own id).
    """

    reference: Path
    production: str
    chunk: ChunkRule = field(default_factory=lambda: ChunkRule("file"))
    methods: tuple[str, ...] = DEFAULT_METHODS
    alert_below: float | None = None
    alert_drop: float | None = None
    labels: str | None = None
    level: float = LEVEL
    run_id: str | None = None


def make_options(
    reference: Any,
    production: Any,
    *,
    chunk: Any = "file",
    methods: Any = None,
    alert_below: Any = None,
    alert_drop: Any = None,
    labels: Any = None,
    run_id: str | None = None,
) -> MonitorOptions:
    """Check every option and build :class:`MonitorOptions` (files are read later).

    Raises
    ------
    ValueError
        One line naming the option (``--reference``, ``--production``, ``--chunk``, ``-m``,
        ``--alert-below``, ``--alert-drop``, ``--labels``), what it expects and what came.
    """
    if reference is None or not str(reference).strip():
        raise ValueError("--reference is required: a .npz or .parquet file of logits with "
                         "labels (as `alsa-bench estimate --val` takes).")
    if production is None or not str(production).strip():
        raise ValueError("--production is required: a folder, or a glob of .npz/.parquet "
                         "files (e.g. 'batches/*.parquet').")
    ref = Path(str(reference)).expanduser()
    if not ref.is_file():
        raise ValueError(f"--reference {str(ref)!r}: no such file.")
    if ref.suffix.lower() not in (".npz", ".parquet"):
        raise ValueError(f"--reference must be a .npz or .parquet file; got {str(ref)!r}.")
    if labels is not None and not str(labels).strip():
        labels = None
    return MonitorOptions(
        reference=ref,
        production=str(production),
        chunk=parse_chunk(chunk),
        methods=check_methods(methods),
        alert_below=check_alert_below(alert_below),
        alert_drop=check_alert_drop(alert_drop),
        labels=None if labels is None else str(labels),
        run_id=run_id,
    )
