r"""The trust layer's protocol: choices by grouped cross-validation on development groups, one
scoring of the sealed groups.

Every table here comes from :class:`~tasks.report.trust_rows.TrustRows` split by
:func:`~tasks.report.trust_rows.split_development`: each model class and band form is fit on
development groups only (leave-one-group-out for the *validation* column, all development groups
for the *sealed* column) and scored on the sealed groups once, through
:meth:`~tasks.report.trust_rows.SealedRows.score`. Groups weigh equally and rows within a group
equally: every figure is a mean over groups of the group's mean. Rows of a declared concept shift
(:attr:`tasks.data.families.ShiftFamily.concept_shift`) are never fit on; the tables show the
figures with and without them.

``benchmarks/trust_protocol.py`` runs it on databases and writes the tables that
``docs/BENCHMARK.md`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from estimators.trust.calibration_artifact import AUTO_MEMBER_SETS, CalibrationTable
from estimators.trust.selector import fit_selector, fit_shrink
from estimators.trust.shift_band import BandModel, fit_band
from estimators.trust.stacking import fit_stack
from tasks.report.trust_rows import SealedRows, TrustRows

__all__ = ["BAND_FORMS", "MODEL_CLASSES", "band_table", "ceilings", "fit_model", "group_mean",
           "grouped_cv", "learning_curve", "model_table"]

#: ``auto``'s members in the comparison (every label-free logit method).
MEMBERS: tuple[str, ...] = AUTO_MEMBER_SETS[0]
BASE = "alsa-e"


class Predictor(Protocol):
    def predict(self, signals: Mapping[str, Any],
                estimates: Mapping[str, Any]) -> NDArray[np.float64]: ...


@dataclass(frozen=True)
class _Single:
    """One method's estimate (``best single (dev)`` and ``alsa-e alone``)."""

    method: str

    def predict(self, signals: Mapping[str, Any],
                estimates: Mapping[str, Any]) -> NDArray[np.float64]:
        return np.atleast_1d(np.asarray(estimates[self.method], dtype=np.float64))


def group_mean(values: NDArray[np.float64], groups: NDArray[Any]) -> float:
    """Mean over groups of the group's mean (every group weighs the same)."""
    v, g = np.asarray(values, np.float64), np.asarray(groups)
    return float(np.mean([v[g == name].mean() for name in np.unique(g)]))


def _best_single(table: CalibrationTable) -> _Single:
    scores = {m: group_mean(np.abs(table.estimates[m] - table.truth), table.groups)
              for m in MEMBERS}
    return _Single(min(scores, key=lambda m: scores[m]))


#: The model classes compared: name -> fit(table) -> predictor.
MODEL_CLASSES: dict[str, Callable[[CalibrationTable], Predictor]] = {
    "alsa-e alone": lambda t: _Single(BASE),
    "best single (chosen on fit groups)": _best_single,
    "stacking (ridge correction of alsa-e)": lambda t: fit_stack(
        t.signals, t.estimates, t.truth, t.groups, MEMBERS),
    "shrinkage toward the members' median": lambda t: fit_shrink(
        t.estimates, t.truth, t.groups, MEMBERS, BASE),
    "gated selector (meta-features)": lambda t: fit_selector(
        t.signals, t.estimates, t.truth, t.groups, (BASE,) + tuple(m for m in MEMBERS
                                                                   if m != BASE)),
}


def _usable(rows: TrustRows) -> NDArray[np.bool_]:
    ok = np.isfinite(rows.table.truth) | np.isnan(rows.table.truth)
    for m in MEMBERS:
        ok &= np.isfinite(rows.table.estimates[m])
    return ok


def fit_model(kind: str, rows: TrustRows) -> Predictor:
    """Fit model class ``kind`` on ``rows`` (their concept-shift rows left out)."""
    if kind not in MODEL_CLASSES:
        raise ValueError(f"model class must be one of {', '.join(MODEL_CLASSES)}; got {kind!r}.")
    fit = rows.subset(_usable(rows) & ~rows.concept)
    return MODEL_CLASSES[kind](fit.table)


def _predict(model: Predictor, table: CalibrationTable) -> NDArray[np.float64]:
    return np.clip(model.predict(table.signals, table.estimates), 0.0, 1.0)


def grouped_cv(rows: TrustRows, kinds: Sequence[str]) -> dict[str, NDArray[np.float64]]:
    """Leave-one-group-out predictions of every model class on ``rows`` (development rows)."""
    out = {k: np.full(len(rows), np.nan) for k in kinds}
    for name in rows.group_names():
        held = rows.table.groups == name
        fit_rows = rows.subset(~held)
        test = rows.table.subset(held)
        for kind in kinds:
            out[kind][held] = _predict(fit_model(kind, fit_rows), test)
    return out


def _summary(err: NDArray[np.float64], groups: NDArray[Any], per_method: pd.DataFrame
             ) -> dict[str, float]:
    """Group-mean MAE, and the goals against the group's best single method."""
    frame = pd.DataFrame({"g": groups, "e": err}).groupby("g").e.mean()
    best_group = per_method.min(axis=1).reindex(frame.index)
    best_single = per_method.mean(axis=0).min()
    return {"group-mean MAE (pp)": float(frame.mean()),
            "within 1 pp of the group's best method": float(np.mean(frame - best_group <= 1.0)),
            "vs best single method (pp)": float(frame.mean() - best_single)}


def _per_method(table: CalibrationTable) -> pd.DataFrame:
    """Group-mean absolute error (pp) of every member, groups x methods."""
    data = {m: np.abs(table.estimates[m] - table.truth) * 100 for m in MEMBERS}
    return pd.DataFrame(data).groupby(table.groups).mean()


def model_table(dev: TrustRows, sealed: SealedRows,
                kinds: Sequence[str] = tuple(MODEL_CLASSES)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Validation (leave-one-group-out on development groups) beside the sealed test.

    Returns
    -------
    table : DataFrame
        Per model class and row set (``all rows`` / ``without concept shifts``): validation
        and sealed group-mean MAE, the share of groups within 1 pp of their best single
        method, and the distance to the best single method's group-mean MAE (negative: better).
    sealed_rows : DataFrame
        The sealed scores per row and model class (for per-group tables).
    """
    dev = dev.subset(_usable(dev))
    cv = grouped_cv(dev, kinds)
    sealed_in = sealed.inputs
    keep = _usable(sealed_in)
    preds = {}
    for kind in kinds:
        p = np.full(len(sealed_in), np.nan)
        p[keep] = _predict(fit_model(kind, dev), sealed_in.table.subset(keep))
        preds[kind] = p
    preds.update({f"single:{m}": sealed_in.table.estimates[m] for m in MEMBERS})
    scored = sealed.score(preds)
    scored = scored[np.tile(keep, len(preds))]
    records = []
    for label, dev_mask in (("all rows", np.ones(len(dev), bool)),
                            ("without concept shifts", ~dev.concept)):
        d_table = dev.table.subset(dev_mask)
        d_methods = _per_method(d_table)
        s = scored if label == "all rows" else scored[~scored.concept]
        s_methods = s[s.name.str.startswith("single:")].pivot_table(
            index="group", columns="name", values="abs_error_pp", aggfunc="mean")
        for kind in kinds:
            v = _summary(np.abs(cv[kind][dev_mask] - d_table.truth) * 100, d_table.groups,
                         d_methods)
            sk = s[s.name == kind]
            t = _summary(sk.abs_error_pp.to_numpy(), sk.group.to_numpy(), s_methods)
            records.append({"rows": label, "model class": kind,
                            **{f"validation {k}": x for k, x in v.items()},
                            **{f"sealed {k}": x for k, x in t.items()}})
    return pd.DataFrame(records), scored


def learning_curve(dev: TrustRows, sealed: SealedRows, kind: str, sizes: Sequence[int],
                   draws: int, seed: int = 0) -> pd.DataFrame:
    """Sealed group-mean MAE of ``kind`` fit on ``n`` random development groups (``draws``
    draws per size; the size ``len(groups)`` once), beside ALSA-E's on the same rows."""
    dev = dev.subset(_usable(dev))
    sealed_in = sealed.inputs
    keep = _usable(sealed_in) & ~sealed_in.concept
    test = sealed_in.table.subset(keep)
    names = dev.group_names()
    rng = np.random.default_rng(seed)
    records = []
    for n in sizes:
        n_eff = min(int(n), len(names))
        for d in range(draws if n_eff < len(names) else 1):
            chosen = rng.choice(names, size=n_eff, replace=False)
            sub = dev.subset(np.isin(dev.table.groups, chosen))
            if len(np.unique(sub.table.groups[~sub.concept])) < 3:
                continue
            p = np.full(len(sealed_in), np.nan)
            p[keep] = _predict(fit_model(kind, sub), test)
            s = sealed.score({kind: p, BASE: sealed_in.table.estimates[BASE]})
            s = s[np.tile(keep, 2)]
            mae = s.groupby(["name", "group"]).abs_error_pp.mean().groupby("name").mean()
            records.append({"training groups": n_eff, "draw": d,
                            "sealed group-mean MAE (pp)": float(mae[kind]),
                            "alsa-e alone (pp)": float(mae[BASE])})
    return pd.DataFrame(records)


# ------------------------------------------------------------------------------ bands
def _classes_bin(table: CalibrationTable) -> NDArray[Any]:
    return np.where(table.signals["n_classes"] <= 2, "binary", "multiclass")


@dataclass(frozen=True)
class _BandForm:
    """A band form: one conformal band, or one per stratum (Mondrian conformal)."""

    strata: Callable[[CalibrationTable], NDArray[Any]] | None

    def fit(self, table: CalibrationTable, estimate: NDArray[np.float64]
            ) -> dict[str, BandModel]:
        keys = (np.full(len(table), "all") if self.strata is None else self.strata(table))
        out = {}
        for key in np.unique(keys):
            m = keys == key
            if len(np.unique(table.groups[m])) >= 2:
                out[str(key)] = fit_band({k: v[m] for k, v in table.signals.items()},
                                         estimate[m], table.truth[m], table.groups[m])
        if self.strata is not None and len(np.unique(table.groups)) >= 2:
            out["*"] = fit_band(table.signals, estimate, table.truth, table.groups)
        return out

    def interval(self, models: dict[str, BandModel], table: CalibrationTable,
                 estimate: NDArray[np.float64], level: float
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        keys = (np.full(len(table), "all") if self.strata is None else self.strata(table))
        low, high = np.full(len(table), np.nan), np.full(len(table), np.nan)
        for key in np.unique(keys):
            m = keys == key
            model = models.get(str(key), models.get("*"))
            if model is None:
                continue
            lo, hi = model.interval({k: v[m] for k, v in table.signals.items()}, estimate[m],
                                    level)
            low[m], high[m] = lo, hi
        return low, high


def _size_bin(table: CalibrationTable) -> NDArray[Any]:
    return np.where(table.signals["n_target"] < 1000, "small", "large")


def _spread_bin(table: CalibrationTable) -> NDArray[Any]:
    return np.where(table.signals["panel_spread"] < 0.05, "agree", "disagree")


#: Band forms compared on development groups: one band, or one per stratum of the class count,
#: the target size or the panel's disagreement (thresholds fixed beforehand, not tuned); a
#: stratum with fewer than 2 groups falls back to the one band.
BAND_FORMS: dict[str, _BandForm] = {
    "one conformal band": _BandForm(None),
    "by class count (binary / multiclass)": _BandForm(_classes_bin),
    "by target size (< 1000 / >= 1000 rows)": _BandForm(_size_bin),
    "by panel spread (< 5 pp / >= 5 pp)": _BandForm(_spread_bin),
}


def _band_summary(frame: pd.DataFrame, mae: pd.Series) -> dict[str, float]:
    per = frame.groupby("group").agg(coverage=("covered", "mean"), width=("width_pp", "mean"))
    width = float(per.width.mean())
    return {"groups with coverage >= 85 %": float(np.mean(per.coverage >= 0.85)),
            "mean coverage": float(per.coverage.mean()),
            "mean width (pp)": width, "MAE (pp)": float(mae.mean()),
            "width / MAE": width / float(mae.mean()) if float(mae.mean()) > 0 else np.nan}


def band_table(dev: TrustRows, sealed: SealedRows, estimates: Mapping[str, tuple[
        NDArray[np.float64], NDArray[np.float64]]], *, levels: Sequence[float] = (0.9,),
        forms: Sequence[str] = tuple(BAND_FORMS)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Coverage and width of each band form, level and method: validation (leave-one-group-out
    on development groups) beside sealed (fit on every development group).

    Parameters
    ----------
    estimates : Mapping[str, (dev array, sealed array)]
        Each method's estimates on the development and sealed rows (NaN where it has none):
        single methods, and ``auto``'s out-of-fold (development) and fit-on-development
        (sealed) predictions.
    levels : sequence of float
        Nominal levels of the band.

    Returns
    -------
    table : DataFrame
        Per method, form, level and row set, the share of groups whose coverage is >= 85 %,
        the mean coverage, mean width, MAE and width / MAE on each side.
    sealed_rows : DataFrame
        Sealed band rows (``SealedRows.score_bands``) of every method, form and level.
    """
    records, sealed_frames = [], []
    for method, (dev_est, sealed_est) in estimates.items():
        ok = np.isfinite(dev_est) & ~dev.concept
        if len(np.unique(dev.table.groups[ok])) < 3:
            continue
        d = dev.subset(np.isfinite(dev_est))
        d_est = dev_est[np.isfinite(dev_est)]
        s_ok = np.isfinite(sealed_est)
        s_err = sealed.score({"e": sealed_est}).abs_error_pp.to_numpy()
        d_err = np.abs(d_est - d.table.truth) * 100
        for form_name in forms:
            form = BAND_FORMS[form_name]
            folds = []
            for name in d.group_names():
                held = d.table.groups == name
                fit = ~held & ~d.concept
                if len(np.unique(d.table.groups[fit])) >= 2:
                    folds.append((held, form.fit(d.table.subset(fit), d_est[fit])))
            final = form.fit(d.table.subset(~d.concept), d_est[~d.concept])
            for level in levels:
                low, high = np.full(len(d), np.nan), np.full(len(d), np.nan)
                for held, models in folds:
                    lo, hi = form.interval(models, d.table.subset(held), d_est[held], level)
                    low[held], high[held] = lo, hi
                s_low = np.full(len(sealed_est), np.nan)
                s_high = np.full(len(sealed_est), np.nan)
                if s_ok.any():
                    lo, hi = form.interval(final, sealed.inputs.table.subset(s_ok),
                                           sealed_est[s_ok], level)
                    s_low[s_ok], s_high[s_ok] = lo, hi
                s_frame = sealed.score_bands({f"{method} | {form_name} | {level}":
                                              (s_low, s_high)})
                s_frame["abs_error_pp"] = s_err
                s_frame = s_frame[s_ok]
                sealed_frames.append(s_frame.assign(method=method, form=form_name, level=level))
                d_frame = pd.DataFrame({"group": d.table.groups, "concept": d.concept,
                                        "covered": (d.table.truth >= low - 1e-12)
                                        & (d.table.truth <= high + 1e-12),
                                        "width_pp": (high - low) * 100, "abs_error_pp": d_err})
                d_frame = d_frame[np.isfinite(low)]
                for label in ("all rows", "without concept shifts"):
                    dv = d_frame if label == "all rows" else d_frame[~d_frame.concept]
                    sv = s_frame if label == "all rows" else s_frame[~s_frame.concept]
                    if dv.empty or sv.empty:
                        continue
                    v = _band_summary(dv, dv.groupby("group").abs_error_pp.mean())
                    t = _band_summary(sv, sv.groupby("group").abs_error_pp.mean())
                    records.append({"method": method, "form": form_name, "level": level,
                                    "rows": label,
                                    **{f"validation {k}": x for k, x in v.items()},
                                    **{f"sealed {k}": x for k, x in t.items()}})
    return pd.DataFrame(records), pd.concat(sealed_frames, ignore_index=True)


# ------------------------------------------------------------------------------ ceilings
def _covering_widths(errors: NDArray[np.float64], share: float) -> tuple[float, float]:
    r"""The narrowest bands that hold ``share`` of one group's signed errors (pp), set with
    the labels: ``(symmetric, shortest)``.

    *symmetric*: :math:`2\,|e|_{(k)}`, the band :math:`\hat a \pm |e|_{(k)}` with
    :math:`k = \lceil \mathrm{share}\cdot n \rceil`; *shortest*: the shortest interval
    :math:`[e_{(i)}, e_{(i+k-1)}]` of the sorted errors (it may sit off centre: it knows the
    group's bias).

    >>> _covering_widths(np.array([-1.0, 2.0, 3.0, 4.0]), 0.75)
    (6.0, 2.0)
    """
    e = np.sort(np.asarray(errors, dtype=np.float64))
    k = max(1, int(np.ceil(share * len(e) - 1e-9)))
    symmetric = 2.0 * float(np.sort(np.abs(e))[k - 1])
    shortest = float(np.min(e[k - 1:] - e[:len(e) - k + 1]))
    return symmetric, shortest


def _ceiling_summary(frame: pd.DataFrame, coverage: float) -> dict[str, float]:
    """The ceilings of one side (validation or sealed) from its rows: ``group``, ``error_pp``
    (auto's signed error) and ``ae:<method>`` (each member's absolute error, pp)."""
    members = [c for c in frame.columns if c.startswith("ae:")]
    per = frame.groupby("group")[members].mean()
    best_single = float(per.mean(axis=0).min())
    by_group = float(per.min(axis=1).mean())
    by_split = float(frame[members].min(axis=1).groupby(frame.group).mean().mean())
    widths = np.array([_covering_widths(g.error_pp.to_numpy(), coverage)
                       for _, g in frame.groupby("group")])
    mae = float(frame.error_pp.abs().groupby(frame.group).mean().mean())
    return {"best single method (pp)": best_single,
            "each group's best method, with labels (pp)": by_group,
            "each split's best method, with labels (pp)": by_split,
            "a per-group selector's headroom (pp)": best_single - by_group,
            "auto (pp)": mae,
            f"symmetric band per group at {coverage:.0%}, with labels: width / MAE":
                float(widths[:, 0].mean()) / mae if mae > 0 else np.nan,
            f"shortest band per group at {coverage:.0%}, with labels: width / MAE":
                float(widths[:, 1].mean()) / mae if mae > 0 else np.nan}


def ceilings(dev: TrustRows, sealed: SealedRows, auto: tuple[NDArray[np.float64],
             NDArray[np.float64]], *, coverage: float = 0.85) -> pd.DataFrame:
    """What the goals ask against what any label-free model could reach on these groups.

    Computed *with* the labels, so none of it is an estimator: each figure bounds a class of
    models from below, and no choice is made on it.

    * **Selection:** the group-mean MAE of the best single method, of each group's best
      method and of each split's best method. A model that picks one method per group cannot
      beat the second; the goal "0.5 pp below the best single method" asks a label-free model
      for that share of the per-group headroom.
    * **Bands:** the narrowest band that covers ``coverage`` of each group's splits around
      ``auto`` with one symmetric half-width per group (:func:`_covering_widths`), and the
      shortest such interval (which knows each group's bias), as mean width over ``auto``'s
      MAE (the goal's ratio, :func:`band_table`). A symmetric band whose width does not vary
      within a group, however its width is set, is no narrower than the first.

    Parameters
    ----------
    dev, sealed : TrustRows, SealedRows
        :func:`~tasks.report.trust_rows.split_development`.
    auto : (dev array, sealed array)
        ``auto``'s estimates of the development rows (out of group) and the sealed rows (fit on
        the development groups), NaN where it has none.
    coverage : float
        The share of each group's splits the band must hold (item 5: 0.85).

    Returns
    -------
    DataFrame
        One row per side (``validation``, ``sealed``) and row set (``all rows``, ``without
        concept shifts``).
    """
    if not 0.0 < coverage <= 1.0:
        raise ValueError(f"The 'coverage' argument of ceilings must be a share in (0, 1]; got "
                         f"{coverage!r}.")
    d_auto, s_auto = (np.asarray(a, dtype=np.float64) for a in auto)
    for name, values, rows in (("development", d_auto, dev), ("sealed", s_auto, sealed.inputs)):
        if values.shape != (len(rows),):
            raise ValueError(f"The 'auto' argument of ceilings must hold one estimate per "
                             f"{name} row, shape ({len(rows)},); got shape {values.shape}.")
    scored = sealed.score({"auto": s_auto, **{f"ae:{m}": sealed.inputs.table.estimates[m]
                                              for m in MEMBERS}})
    sides = {}
    ok = np.isfinite(d_auto) & _usable(dev)
    frame = pd.DataFrame({"group": dev.table.groups, "concept": dev.concept,
                          "error_pp": (d_auto - dev.table.truth) * 100,
                          **{f"ae:{m}": np.abs(dev.table.estimates[m] - dev.table.truth) * 100
                             for m in MEMBERS}})
    sides["validation"] = frame[ok]
    first = scored[scored.name == "auto"].reset_index(drop=True)
    s_frame = pd.DataFrame({"group": first.group, "concept": first.concept,
                            "error_pp": (first.estimate - first.truth) * 100})
    for m in MEMBERS:
        s_frame[f"ae:{m}"] = scored[scored.name == f"ae:{m}"].abs_error_pp.to_numpy()
    s_ok = np.isfinite(s_auto) & _usable(sealed.inputs)
    sides["sealed"] = s_frame[s_ok]
    records = []
    for side, f in sides.items():
        for label in ("all rows", "without concept shifts"):
            sub = f if label == "all rows" else f[~f.concept.to_numpy(bool)]
            records.append({"side": side, "rows": label, "groups": int(sub.group.nunique()),
                            **_ceiling_summary(sub, coverage)})
    return pd.DataFrame(records)
