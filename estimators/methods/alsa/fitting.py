"""Training ALSA anchors on a labelled validation set: :func:`fit_alsa_anchors`."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import erfinv

from ...core._validation import check_labels, check_logits, is_binary_shape
from ...core.exceptions import ConvergenceWarning
from . import kernels as _k
from .calibration_offset import _calibration_bias, _leave_anchor_out, _reference_stats
from .declaration import (
    AUTO_ANCHORS_MAX,
    AUTO_ANCHORS_ROWS_PER_ANCHOR,
    DEFAULT_RECTIFY_QUANTILE,
    KERNEL_DEFAULTS,
    MAX_FIT_ROWS,
    MAX_REFERENCE_ROWS,
    Kernel,
    RectifyMode,
    _resolve_device,
    check_alsa_params,
    normalize_freeze,
)
from .ensemble import CROSS_FIT_FOLDS, _combine_members, fold_assignment
from .model import _BLOCK_ELEMENTS, ALSAAnchors, ALSAFit, _auto_chunk, _torch_threads
from .space import DEFAULT_SPACE, augmented_tau, canonical_logits


def auto_n_anchors(n_val: int) -> int:
    """``n_anchors="auto"``: ``min(300, max(1, n_val // 4))`` anchors.

    300 is the tuned count at ``n_val = 2,000``; below 1,200 rows it falls to one anchor per
    four validation rows, the ratio measured best on small validation sets (``docs/ALSA.md``).
    """
    return int(min(AUTO_ANCHORS_MAX, max(1, n_val // AUTO_ANCHORS_ROWS_PER_ANCHOR)))



def _sample_anchor_rows(
    correct: NDArray[np.bool_],
    predicted: NDArray[np.int64],
    k: int,
    sampling: str,
    rng: np.random.Generator,
) -> NDArray[np.int64]:
    """Indices of the validation rows that initialise the anchor positions (no replacement)."""
    n = correct.shape[0]
    if sampling == "uniform":
        return np.sort(rng.choice(n, size=k, replace=False))
    # stratified: proportional allocation over (predicted class, correctness) cells
    cell = predicted * 2 + correct.astype(np.int64)
    cells, counts = np.unique(cell, return_counts=True)
    quota = counts * k / n
    take = np.floor(quota).astype(np.int64)
    rest = k - int(take.sum())
    if rest > 0:
        order = np.argsort(-(quota - take), kind="stable")
        take[order[:rest]] += 1
    chosen = [
        rng.choice(np.flatnonzero(cell == c), size=int(t), replace=False)
        for c, t in zip(cells, take)
        if t > 0
    ]
    return np.sort(np.concatenate(chosen))



def fit_alsa_anchors(
    val_logits: Any,
    val_labels: Any,
    *,
    kernel: Kernel = "gaussian",
    n_anchors: int | Literal["auto"] = "auto",
    peak: float = 6.0,
    variance_mean: float | Literal["auto"] | None = None,
    variance_std: float | None = None,
    freeze: str | Sequence[str] = (),
    optimizer: str = "adam",
    lr_positions: float = 0.01,
    lr_peaks: float = 0.1,
    lr_variances: float = 0.1,
    max_epochs: int = 500,
    min_epochs: int = 100,
    tol: float = 1e-5,
    alpha: float = 0.95,
    space: str = DEFAULT_SPACE,
    stop_rule: str = "fixed",
    calibrate: bool = True,
    anchor_sampling: str = "stratified",
    gradient: str = "analytic",
    chunk_size: int | None = None,
    seed: int = 0,
    device: str = "auto",
    n_threads: int | None = None,
    rectify: RectifyMode = "per-anchor",
    threshold_rule: str = "quantile",
    rectify_quantile: float = DEFAULT_RECTIFY_QUANTILE,
    max_fit_rows: int = MAX_FIT_ROWS,
    max_reference_rows: int = MAX_REFERENCE_ROWS,
) -> ALSAFit:
    r"""Learn ALSA anchors on a labelled validation set (Sec. 3.1 and 3.4, eq. 9 and 10).

    Positions are sampled from the validation logits, peaks set to ``+peak`` / ``-peak`` by the
    correctness of the sampled row, variances drawn from
    :math:`N(\mu_v, \sigma_v^2)`. Then full-batch gradient steps on the mean BCE (eq. 9 / n)
    run until the stopping rule holds, checked after each forward pass before the update, or
    until ``max_epochs`` updates (then a :class:`~estimators.core.exceptions.ConvergenceWarning`).
    With :math:`g_t = \frac1n \sum_i q_t(z_i) - \mathrm{acc}_S` the signed gap after ``t``
    updates, ``stop_rule="paper"`` stops when :math:`|g_t| <` ``tol`` (eq. 10);
    ``stop_rule="crossing"`` also stops when :math:`g_t g_{t-1} < 0` and
    :math:`\min(|g_t|, |g_{t-1}|) < 10^{-3}`: the gap changed sign, so eq. (10) held with equality
    somewhere between the two parameter sets, one of which is within 0.1 point of it; the one
    with the smaller :math:`|g|` is returned. ``stop_rule="fixed"`` (default) ignores the gap and
    stops after exactly ``min_epochs`` updates; with ``calibrate=True`` eq. (10) then holds
    exactly through the calibration offset. Both gap-based rules are knife edges: when the gap
    hovers near 0 for many updates, which update first satisfies them is decided by float
    rounding (a 1e-6 relative jitter of the inputs moved the crossing stop from 228 to 273
    updates and the estimate by 1.1 points); a fixed count does not.

    Logits are mapped into ``space`` (:func:`canonical_logits`) in float64, then rounded once to
    float32, so float32 and float64 copies of the same numbers give the same fit.

    Parameters
    ----------
    val_logits : array-like of shape (n, c), (n,) or (n, 1)
        Raw validation logits (not temperature-scaled); ``(n,)`` / ``(n, 1)`` are a binary
        model's positive-class logits ``s``, read as ``[0, s]``.
    val_labels : array-like of shape (n,)
        Integer labels; only the correctness of ``argmax`` is used.
    kernel : {"gaussian", "exponential"}, default "gaussian"
        Eq. (1) (ALSA-G) or eq. (5) (ALSA-E).
    n_anchors : int or "auto", default "auto"
        ``k`` (per member of the cross-fitted ensemble, see ``threshold_rule``, where ``n`` is
        a member's ``2n/3`` training rows). ``"auto"``: :func:`auto_n_anchors`,
        ``min(300, n // 4)``, never more than the validation rows, so no warning. An explicit ``k > n`` is capped at ``n`` with a warning.
        Measured (``benchmarks/tune_alsa.py``, table in ``docs/ALSA.md``): at ``n = 2,000``, 300
        and 1000 anchors tie, 100 is worse; 300 is 3x cheaper.
    peak : float, default 6.0
        Initial peak magnitude ``P``; App. E's "reliable maximum peak" (sigmoid(6) = 0.9975).
    variance_mean : float, "auto" or None, default None
        :math:`\mu_v`; None takes the kernel's default (:data:`KERNEL_DEFAULTS`: 10 for the
        Gaussian-like kernel, 5 for the exponential one; halving or doubling it raised the tuning
        MAE by 1.1-3.0 points). ``"auto"`` sets it so that, at the median nearest-anchor
        distance ``d``, the kernel equals its ``alpha`` cut-off value: ``erfinv(alpha)/d``
        (Gaussian) or ``sqrt(-ln(1-alpha)/d)`` (exponential); it measured worse than the fixed
        defaults.
    variance_std : float or None, default None
        :math:`\sigma_v`; None takes the kernel's default, a tenth of the mean (1.0 and 0.5),
        between the measured 0 and 0.2 x mean.
    freeze : str or sequence of str, default ()
        Groups kept at their initial values: any of ``"positions"``, ``"peaks"``, ``"variances"``
        (the paper's ablation, Sec. 4.2: fix a, fix p, fix v, fix p&v).
    optimizer : {"adam", "rmsprop", "sgd"}, default "adam"
        Full-batch optimiser (betas 0.9/0.999 for Adam, momentum 0.9 for SGD). Adam measured best.
    lr_positions : float, default 0.01
        Learning rate of the positions, in units of the median validation logit norm, so the fit
        is invariant to rescaling the logits. 0.01 met eq. (10) in every tuning fit and about
        twice as soon as 0.1, at the same MAE.
    lr_peaks, lr_variances : float, default 0.1
        Learning rates of peaks and variances. Between 0.01 and 0.3 the MAE was flat; 0.1 met
        eq. (10) most often and soonest (0.01 and 0.03 often ran into the cap).
    max_epochs : int, default 500
        Cap on parameter updates; above the slowest measured stop of the default configuration.
    min_epochs : int, default 100
        With ``stop_rule="fixed"`` (default): the number of updates. Otherwise the updates
        performed before the stopping rule may fire (the paper has none; a value above
        ``max_epochs`` means the fit runs to ``max_epochs``). With
        ``stop_rule="crossing"`` the gap first crosses ``acc_S`` within a few updates, before the
        anchors have learned anything; 100 measured best on the tuning problems (``docs/ALSA.md``;
        0 and 50 cost 0.3-2 points; a fixed 200 or 300 no better and less stable).
    tol : float, default 1e-5
        The paper's epsilon in eq. (10).
    alpha : float, default 0.95
        Only used by ``variance_mean="auto"``.
    space : {"augmented", "centered", "logprob", "raw"}, default "augmented"
        Where the anchors live (:func:`canonical_logits`). ``"raw"`` is the paper's logit space,
        which depends on the arbitrary per-row offset of the logits and is blind to confidence
        for ``c = 2``; ``"augmented"`` (centred logits plus the constant coordinate ``tau``) is
        invariant to that offset and sees the confidence of binary models (measurements in
        ``docs/ALSA.md``).
    stop_rule : {"fixed", "crossing", "paper"}, default "fixed"
        ``"fixed"``: exactly ``min_epochs`` updates (eq. 10 is met by ``calibrate``);
        ``"paper"``: eq. (10) alone; ``"crossing"``: eq. (10) or a sign change of the gap (see
        above). The paper's rule alone is a knife edge: whether some pass lands within 1e-5 of
        ``acc_S`` depends on float rounding, and fits that miss it run on to ``max_epochs``.
    calibrate : bool, default True
        After training, fit the offset ``b`` of :math:`q = \sigma(I(z) + b)` so that eq. (10)
        holds exactly (:math:`\frac1n\sum_i q(z_i) = \mathrm{acc}_S` to float64 rounding)
        instead of to within the gap left by the stop. Full-batch Adam makes the mean of ``q``
        oscillate around ``acc_S`` by up to about 1 point from one update to the next, and
        float-rounding-level changes of the inputs shift that oscillation; the offset removes
        the part of it that is a common shift of every influence. False is the paper's form.
    anchor_sampling : {"stratified", "uniform"}, default "stratified"
        ``"stratified"``: random rows without replacement, allocated proportionally to the
        (predicted class, correct) cells of the validation set, so the initial anchors mirror its
        composition; ``"uniform"``: plain random rows without replacement (the paper's wording).
        The two tie on MAE; stratified fits met eq. (10) sooner (latest 224 vs 412 epochs).
    gradient : {"analytic", "autograd"}, default "analytic"
        Closed-form gradients (module :mod:`estimators.methods.alsa.kernels`) or torch autograd; the
        closed form measured 4-11x faster per epoch on CPU.
    chunk_size : int or None, default None
        Rows per block; None picks about 2**19 (CPU) or 2**24 (CUDA) rows x anchors elements.
    seed : int, default 0
        Seeds anchor sampling and variance initialisation; CPU results are deterministic.
    device : str, default "auto"
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:<i>"``.
    n_threads : int or None, default None
        Torch intra-op threads during the fit (restored afterwards); None: the count
        :func:`estimators.core.threads.auto_threads` picks for ``n * k`` (rows x anchors) and the idle
        cores, never more than torch's setting.
    rectify : {"per-anchor", "total", "kernel", "none"}, default "per-anchor"
        The rectification test (:func:`alsa_predict`) whose cut-off ``threshold_rule`` fits.
    threshold_rule : {"quantile", "paper"}, default "quantile"
        ``"quantile"`` (size invariant, label-free on the target): the cut-off ``t`` is the
        ``rectify_quantile`` quantile of the rectification statistic (e.g.
        :math:`\max_j |p_j| K_j(z)`) over in-distribution *reference* rows the anchors were not
        fitted to, and the offset ``b`` solves
        :math:`\frac{1}{n_R}\sum_{i\in R} [\,\mathbb 1(s_i<t)/c + \mathbb 1(s_i \ge t)\,
        \sigma(I_i+b)\,] = \mathrm{acc}_R`, so an in-distribution target is rectified at the
        rate ``rectify_quantile`` and estimated without bias at any ``n``. Reference rows: the
        held-out rows when ``n > max_fit_rows``. Otherwise (``n >= 6``) a *cross-fitted
        ensemble* of :data:`CROSS_FIT_FOLDS` (3) anchor sets: the rows are split at random into
        3 folds; member ``f`` is trained on the other two folds (``n_anchors`` is per member,
        ``"auto"`` read at ``2n/3`` rows) and sets its own ``t_f`` and ``b_f`` as above on fold
        ``f``, which it never saw; the estimate is the mean of the members' ``q``
        (:attr:`ALSAAnchors.members`, :func:`alsa_predict`). Every validation row is a reference
        row exactly once. The former reference, the training rows scored without the anchor
        initialised on each (:func:`_leave_anchor_out`, now only for ``n < 6``), over-estimated
        real binary text models by 3.5-6 points: the other anchors had still been fitted to those
        rows (``docs/ALSA.md``). The fit costs about 2x a single fit (3 fits on ``2n/3`` rows).
        ``"paper"``: App. E's eq. (23)
        cut-off :math:`t = P e^{-\mathrm{erfinv}(\alpha)^2}` (an absolute influence value, whose
        rectified fraction drifts with ``n``: ``docs/ALSA.md``) and ``b`` fitted on unrectified
        ``q``.
    rectify_quantile : float in [0, 1), default 0.01
        In-distribution rectified fraction of ``threshold_rule="quantile"``; 0.01 is the
        fraction eq. (23) rectified at ``n = 10,000`` (where the defaults were tuned).
    max_fit_rows : int, default 10000
        Above this many validation rows the anchors are trained on a uniform random subsample
        of ``min(max_fit_rows, n // 2)`` rows, so the fit cost is bounded (``docs/ALSA.md``).
    max_reference_rows : int, default 100000
        At most this many of the remaining rows are the reference of ``threshold_rule``.

    Returns
    -------
    ALSAFit
    """
    import torch

    owner = "fit_alsa_anchors"
    hyper = {k: v for k, v in locals().items() if k not in ("val_logits", "val_labels", "owner")}
    check_alsa_params(owner, hyper)
    if variance_mean is None:
        variance_mean = KERNEL_DEFAULTS[kernel]["variance_mean"]
    if variance_std is None:
        variance_std = KERNEL_DEFAULTS[kernel]["variance_std"]
    binary = _is_binary(val_logits)
    z = check_logits(val_logits, "val_logits", keep_float32=True)  # rows converted when used
    labels = check_labels(
        val_labels, "val_labels", z.shape[0], z.shape[1], binary_logits=binary
    )
    freeze_set = normalize_freeze(freeze, owner)
    dev = _resolve_device(device, owner)
    n_all, c = z.shape
    predicted_all = z.argmax(axis=1)
    correct_all = predicted_all == labels
    rng = np.random.default_rng(seed)

    def _fit_on(
        fit_rows: NDArray[np.int64], ref_rows: NDArray[np.int64] | None, tau: float | None
    ) -> ALSAFit:
        return _fit_rows_impl(
            z, correct_all, predicted_all, fit_rows, ref_rows, tau, rng, freeze_set, dev,
            **{**hyper, "variance_mean": variance_mean, "variance_std": variance_std},
        )

    # training rows: all of them, or (n > max_fit_rows) a uniform subsample of
    # min(max_fit_rows, n // 2) rows (bounded cost); of the rest, at most max_reference_rows are
    # held out to set the cut-off and the offset
    if n_all > max_fit_rows:
        n_fit = min(int(max_fit_rows), n_all // 2)  # at least half held out
        perm = rng.permutation(n_all)
        fit_rows = np.sort(perm[:n_fit])
        ref_rows: NDArray[np.int64] | None = np.sort(
            perm[n_fit : n_fit + int(max_reference_rows)]
        )
    elif threshold_rule == "quantile" and n_all >= 2 * CROSS_FIT_FOLDS:
        # cross-fitted ensemble: member f is trained on the other folds and sets its cut-off and
        # offset on fold f (held out); every member sees the same tau so their positions share
        # one space
        K = CROSS_FIT_FOLDS
        fold = fold_assignment(n_all, rng, K)
        tau_all = augmented_tau(z) if space == "augmented" else 1.0
        members = [
            _fit_on(np.flatnonzero(fold != f), np.flatnonzero(fold == f), tau_all)
            for f in range(K)
        ]
        return _combine_members(members, float(np.mean(correct_all)), n_all)
    else:
        fit_rows = np.arange(n_all)
        ref_rows = None
    return _fit_on(fit_rows, ref_rows, None)


def _fit_rows_impl(
    z: NDArray[Any],
    correct_all: NDArray[np.bool_],
    predicted_all: NDArray[np.int64],
    fit_rows: NDArray[np.int64],
    ref_rows: NDArray[np.int64] | None,
    tau_fixed: float | None,
    rng: np.random.Generator,
    freeze_set: frozenset[str],
    dev: str,
    *,
    kernel: Kernel,
    n_anchors: int | Literal["auto"],
    peak: float,
    variance_mean: float | Literal["auto"],
    variance_std: float,
    optimizer: str,
    lr_positions: float,
    lr_peaks: float,
    lr_variances: float,
    max_epochs: int,
    min_epochs: int,
    tol: float,
    alpha: float,
    space: str,
    stop_rule: str,
    calibrate: bool,
    anchor_sampling: str,
    gradient: str,
    chunk_size: int | None,
    n_threads: int | None,
    rectify: str,
    threshold_rule: str,
    rectify_quantile: float,
    max_reference_rows: int,
    **_: Any,
) -> ALSAFit:
    """Train one anchor set on ``fit_rows``; reference = ``ref_rows`` (held out) or leave-anchor-out."""
    import torch

    c = z.shape[1]
    n = fit_rows.shape[0]
    k = auto_n_anchors(n) if n_anchors == "auto" else int(n_anchors)
    if k > n:
        warnings.warn(
            f"n_anchors={k} exceeds the {n} validation rows; using k={n} anchors (one per row).",
            UserWarning,
            stacklevel=4,
        )
        k = n
    predicted = predicted_all[fit_rows]
    correct = correct_all[fit_rows]
    rows = _sample_anchor_rows(correct, predicted, k, anchor_sampling, rng)
    z_fit = z[fit_rows]
    if tau_fixed is not None:
        tau = tau_fixed
    else:
        tau = augmented_tau(z_fit) if space == "augmented" else 1.0
    # canonical space in float64, then one rounding to float32 (the dtype of the kernels)
    zc = canonical_logits(z_fit, space, tau).astype(np.float32).astype(np.float64)
    norms = np.linalg.norm(zc, axis=1)
    scale = float(np.median(norms))
    if not scale > 0:
        scale = float(norms.max()) if norms.max() > 0 else 1.0
    a0 = (zc[rows] / scale).astype(np.float32)
    p0 = np.where(correct[rows], peak, -peak).astype(np.float32)
    if variance_mean == "auto":
        mu_v = _auto_variance_mean(a0, kernel, alpha)
    else:
        mu_v = float(variance_mean)
    v0 = rng.normal(mu_v, variance_std, size=k).astype(np.float32)

    t0 = time.perf_counter()
    chunk = _auto_chunk(k, chunk_size, dev)
    with _torch_threads(n_threads, n * k):
        U = _k.unit_rows(torch.as_tensor(zc, dtype=torch.float32, device=dev), center=False)
        y = torch.as_tensor(correct, dtype=torch.float32, device=dev)
        A = torch.as_tensor(a0, device=dev).clone()
        p = torch.as_tensor(p0, device=dev).clone()
        v = torch.as_tensor(v0, device=dev).clone()
        out = _k.train_anchors(
            U,
            y,
            A,
            p,
            v,
            kernel=kernel,
            freeze=freeze_set,
            lrs=(float(lr_positions), float(lr_peaks), float(lr_variances)),
            optimizer=optimizer,
            max_epochs=int(max_epochs),
            min_epochs=int(min_epochs),
            tol=float(tol),
            chunk=chunk,
            gradient=gradient,
            stop_rule=stop_rule,
        )
        # ---- reference pass: total influence and rectification statistic of in-distribution
        # rows the anchors were not fitted to (size invariance, docs/ALSA.md)
        if ref_rows is not None:
            reference = "held-out"
            zr = canonical_logits(z[ref_rows], space, tau).astype(np.float32)
            Ur = _k.unit_rows(torch.as_tensor(zr, device=dev), center=False)
            ref_correct = correct_all[ref_rows]
            infl, stat = _reference_stats(Ur, A, p, v, kernel, rectify, chunk)
            del Ur, zr
        else:
            ref_correct = correct
            infl, stat = _reference_stats(U, A, p, v, kernel, rectify, chunk)
            if threshold_rule == "quantile":
                reference = "leave-anchor-out"
                infl, stat = _leave_anchor_out(U, A, p, v, kernel, rectify, rows, infl, stat)
            else:
                reference = "training"
        positions = (A.detach().cpu().numpy() * scale).astype(np.float32)
        peaks = p.detach().cpu().numpy().astype(np.float32)
        variances = v.detach().cpu().numpy().astype(np.float32)
    acc_ref = float(np.mean(ref_correct))
    if threshold_rule == "quantile" and rectify != "none":
        cut = float(np.quantile(stat, rectify_quantile)) if rectify_quantile > 0 else 0.0
        threshold: float | None = cut
        rect_ref = stat < cut
    else:
        threshold = None
        rect_ref = np.zeros(stat.shape[0], dtype=bool)
    bias = 0.0
    if calibrate and 0.0 < acc_ref < 1.0:
        bias = _calibration_bias(infl, acc_ref, rect_ref, 1.0 / c)
    seconds = time.perf_counter() - t0
    if out.stop_reason == "max_epochs":
        warnings.warn(
            f"ALSA stopped at max_epochs={max_epochs} with |mean q(val) - acc_S| = "
            f"{out.train_gap:.2e} >= tol={tol:g}: the stopping rule ({stop_rule!r}) did not hold. "
            "The anchors are usable (history_['gap'] shows how close the fit came); to reach the "
            "rule raise max_epochs, or change n_anchors or the learning rates (docs/ALSA.md).",
            ConvergenceWarning,
            stacklevel=4,
        )
    acc = float(np.mean(correct))
    mean_q = np.asarray(out.history_mean_q, dtype=np.float64)
    history = {
        "loss": np.asarray(out.history_loss, dtype=np.float64),
        "mean_q": mean_q,
        "gap": np.abs(mean_q - acc),
    }
    return ALSAFit(
        anchors=ALSAAnchors(
            positions,
            peaks,
            variances,
            kernel=kernel,
            center=space == "centered",
            space=space,
            tau=tau,
            bias=bias,
            threshold=threshold,
            rectify=rectify if threshold is not None else None,
        ),
        n_epochs=out.n_epochs,
        stop_reason=out.stop_reason,
        train_gap=float(out.train_gap),
        history=history,
        val_accuracy=acc,
        scale=scale,
        seconds=seconds,
        n_fit_rows=int(n),
        n_reference_rows=int(stat.shape[0]),
        reference=reference,
        reference_rectified=float(np.mean(rect_ref)),
    )



def _is_binary(logits: Any) -> bool:
    """Whether ``logits`` has the binary positive-class shape ``(n,)`` / ``(n, 1)``."""
    try:
        return is_binary_shape(np.shape(logits))
    except ValueError:
        return False


def _auto_variance_mean(a0: NDArray[np.float32], kernel: Kernel, alpha: float) -> float:
    """Data-driven mu_v: the kernel meets its alpha cut-off at the median nearest-anchor gap."""
    a = a0.astype(np.float64)
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), _k.NORM_EPS)
    k = a.shape[0]
    if k < 2:
        return 5.0
    nearest = np.empty(k)
    block = max(1, _BLOCK_ELEMENTS // k)
    for s in range(0, k, block):
        d = np.clip(1.0 - a[s : s + block] @ a.T, 0.0, 2.0)
        d[np.arange(d.shape[0]), np.arange(s, s + d.shape[0])] = np.inf
        nearest[s : s + block] = d.min(axis=1)
    med = float(np.median(nearest))
    med = max(med, 1e-4)
    if kernel == "gaussian":
        return float(erfinv(alpha)) / med
    return math.sqrt(-math.log(1.0 - alpha) / med)
