r"""Is a difference between two benchmark runs host noise? The statistics of ``report --compare``.

Two runs on different hosts train different models, and a different model is a new draw,
like a new seed: so a cell's difference is judged against the seeds' spread :math:`s` (the
standard deviation over seeds, pooled over both sides where each has two or more) by the
two-sample *t* statistic

.. math:: t = \frac{\Delta}{s\,\sqrt{1/n_{yours} + 1/n_{ref}}}

(:math:`n` seeds a side; the degrees of freedom of the pooled standard deviation), and the
cells' *p*-values are corrected together by Benjamini and Hochberg's procedure (J. R. Stat.
Soc. B 57, 1995) at :data:`FDR` = 5 %. A cell is **within the seeds' spread** when the
correction keeps "host noise" for it. The methods that pool the seeds' models (the peers step:
GDE pairs seed *s* with the next seed, ALine fits one line on every seed's model,
:func:`tasks.methods.peer_method_names`, :func:`tasks.methods.peer_reading_method_names`) have
no such spread: their seeds share models, so their values agree across seeds far more closely
than a new draw of models moves them (ALine's line through three models moved by up to 23 pp
between two code versions, at a seed spread of 0.07-0.25 pp). Their cells are listed, never
judged by it. A plain "larger than one standard deviation" rule is not
a test: between two independent draws of 3 seeds it flags 22-29 % of the cells by chance
(:math:`P(|Z| > \sqrt{3/2})` with a known spread, :math:`P(|t_4| > \sqrt{3/2})` with a pooled
one), and it called the fast-mode page against a reproducible run "a real difference" (155 of
828 cells, 19 %).

Used by :func:`tasks.report.compare.compare`; kept apart so that the comparison's bookkeeping
and its statistics can each be read in one sitting.
"""

from __future__ import annotations

import math
from typing import Any, Final

import pandas as pd

__all__ = ["FDR", "benjamini_hochberg", "judge_cells", "pooled_methods", "two_sided_p"]

#: False-discovery rate of the cells judged beyond the seeds' spread (Benjamini-Hochberg).
FDR: Final[float] = 0.05


def judge_cells(cells: pd.DataFrame, ref_summary: pd.DataFrame, own_summary: pd.DataFrame,
                key_columns: list[str], *, per_seed: bool) -> pd.DataFrame:
    """Add ``spread``, ``delta``, ``digit_equal``, ``pooled``, ``se``, ``p`` and ``within`` to
    the compared cells (the columns :class:`tasks.report.compare.Comparison` documents).

    Parameters
    ----------
    cells : DataFrame
        ``key_columns`` + ``own``, ``ref`` (means), ``seeds`` (the seeds both hold).
    ref_summary, own_summary : DataFrame
        Indexed by ``key_columns``: ``mae_std`` and ``n_seeds`` of each side.
    per_seed : bool
        Both means are over the seeds both sides hold (else each over its own seeds).
    """
    cells = cells.copy()
    spread, dof, sizes = [], [], []
    for row in cells.itertuples(index=False):
        key = tuple(getattr(row, c) for c in key_columns)
        sides = [(float(summary.loc[key, "mae_std"]), int(summary.loc[key, "n_seeds"]))
                 for summary in (ref_summary, own_summary) if key in summary.index]
        sides = [(sd, n) for sd, n in sides if n >= 2 and math.isfinite(sd)]
        df = sum(n - 1 for _, n in sides)
        spread.append(math.sqrt(sum((n - 1) * sd ** 2 for sd, n in sides) / df) if df
                      else math.nan)
        dof.append(df)
        if not per_seed:  # each side's mean over its own seeds
            sizes.append((int(own_summary.loc[key, "n_seeds"]),
                          int(ref_summary.loc[key, "n_seeds"])))
        else:  # both means over the seeds both hold
            sizes.append((int(row.seeds), int(row.seeds)))
    cells["spread"] = spread
    cells["delta"] = cells["own"] - cells["ref"]
    cells["digit_equal"] = [f"{a:.2f}" == f"{b:.2f}" for a, b in zip(cells["own"], cells["ref"])]
    cells["pooled"] = cells["method"].isin(pooled_methods())
    cells["se"] = [math.nan if pooled else sd * math.sqrt(1.0 / a + 1.0 / b)
                   for sd, (a, b), pooled in zip(spread, sizes, cells["pooled"])]
    cells["p"] = [two_sided_p(d, se, df) for d, se, df in zip(cells["delta"], cells["se"], dof)]
    rejected = benjamini_hochberg(cells["p"].to_numpy(dtype=float), FDR)
    cells["within"] = [None if math.isnan(p) else not r for p, r in zip(cells["p"], rejected)]
    return cells


def pooled_methods() -> frozenset[str]:
    """Methods whose per-seed values share the seeds' models (the peers step)."""
    from tasks.methods import peer_method_names, peer_reading_method_names

    return frozenset(peer_method_names()) | frozenset(peer_reading_method_names())


def two_sided_p(delta: float, se: float, dof: int) -> float:
    """P(|T| >= |delta / se|) for Student's *t* with ``dof`` degrees of freedom (NaN without a
    spread; for noiseless cells, 1 where they agree and 0 where they do not)."""
    if not dof or not math.isfinite(se):
        return math.nan
    if se == 0.0:
        return 1.0 if abs(delta) < 1e-12 else 0.0
    from scipy.stats import t as student_t

    return float(2.0 * student_t.sf(abs(delta) / se, dof))


def benjamini_hochberg(p: Any, q: float) -> list[bool]:
    """Which of the finite ``p``-values the Benjamini-Hochberg step-up procedure rejects at
    false-discovery rate ``q`` (a NaN is never rejected and not counted).

    Examples
    --------
    >>> benjamini_hochberg([0.001, 0.04, 0.03, float("nan"), 0.9], 0.05)
    [True, False, False, False, False]
    >>> benjamini_hochberg([0.01, 0.02, 0.03], 0.05)
    [True, True, True]
    """
    import numpy as np

    values = np.asarray(p, dtype=float)
    finite = np.flatnonzero(np.isfinite(values))
    out = np.zeros(values.shape, bool)
    if finite.size:
        order = finite[np.argsort(values[finite], kind="stable")]
        passed = np.flatnonzero(values[order] <= q * np.arange(1, finite.size + 1) / finite.size)
        if passed.size:
            out[order[: passed[-1] + 1]] = True
    return [bool(v) for v in out]
