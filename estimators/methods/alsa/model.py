"""Fitted ALSA anchors and what they predict: :class:`ALSAAnchors`, :func:`alsa_predict`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from ...core._validation import check_in_choices, check_logits
from ...core.threads import torch_threads
from . import kernels as _k
from .declaration import ALSA_DEFAULTS, Kernel, RectifyMode, _resolve_device, check_alsa_params
from .kernels import kernel_alpha_value, rectification_threshold
from .space import SPACES, canonical_logits

#: Elements of one (rows x anchors) float32 block on CPU: 2**19 elements = 2 MiB per buffer,
#: small enough to stay in cache (measured 1.5-2x faster per epoch than 16 MiB blocks).
_BLOCK_ELEMENTS = 1 << 19
#: The same on CUDA, where larger blocks amortise kernel launches: 2**24 elements = 64 MiB.
_BLOCK_ELEMENTS_CUDA = 1 << 24


def _torch_threads(
    n_threads: int | None, work: int = 0
) -> contextlib.AbstractContextManager[int]:
    """Torch's intra-op threads for the block only: ``n_threads``, or (None) the count
    :func:`estimators.core.threads.auto_threads` picks for ``work`` (rows x anchors per pass)."""
    return torch_threads(n_threads, work)


def _auto_chunk(n_anchors: int, chunk_size: int | None, device: str = "cpu") -> int:
    """Rows per block: ``chunk_size`` if given, else a block of about 2**19 (CPU) or 2**24
    (CUDA) float32 elements, at least 32 rows."""
    if chunk_size is not None:
        return int(chunk_size)
    budget = _BLOCK_ELEMENTS_CUDA if device.startswith("cuda") else _BLOCK_ELEMENTS
    return max(32, budget // max(1, n_anchors))



# ============================================================================ results
@dataclass(frozen=True)
class ALSAAnchors:
    r"""A fitted anchor set.

    Attributes
    ----------
    positions : ndarray of shape (k, c) or (k, c + 1), float32
        Anchor positions ``a_j`` in the anchors' space (:func:`canonical_logits`): logit units,
        with the extra coordinate ``tau`` direction last for ``space="augmented"``.
    peaks : ndarray of shape (k,), float32
        Signed peak influences ``p_j``.
    variances : ndarray of shape (k,), float32
        The paper's "variances" ``v_j``; the kernels use ``v_j**2`` (larger = narrower).
    kernel : {"gaussian", "exponential"}
        Influence function: eq. (1) or eq. (5).
    center : bool
        Legacy spelling of ``space="centered"``, used only when ``space`` is None.
    space : {"augmented", "centered", "logprob", "raw"} or None
        Space of the positions (:func:`canonical_logits`); None means ``"centered"`` if
        ``center`` else ``"raw"`` (anchors stored before the space existed).
    tau : float
        The constant extra coordinate of ``"augmented"`` (:func:`augmented_tau`).
    bias : float
        Offset ``b`` added to the total influence, :math:`q = \sigma(I(z) + b)`, fitted after
        training so that eq. (10) holds exactly on the validation set (0: the paper's form).
    threshold : float or None
        Rectification cut-off fitted by ``threshold_rule="quantile"`` (in the units of the
        ``rectify`` test it was fitted for); None: the paper's eq. (23) value, computed from
        ``alpha`` and ``peak`` at prediction time.
    rectify : str or None
        The rectification test ``threshold`` belongs to.
    members : tuple of ALSAAnchors, default ()
        The cross-fitted ensemble (``threshold_rule="quantile"`` with ``n <= max_fit_rows``):
        one anchor set per fold, each with its own offset and cut-off set on its held-out fold;
        :func:`alsa_predict` averages their ``q``. The fields above then hold the members'
        average model (anchors concatenated, peaks, and the mean cut-off, divided by the member
        count; the mean offset), an approximation for readers of a single anchor set. Empty:
        one anchor set.
    """

    positions: NDArray[np.float32]
    peaks: NDArray[np.float32]
    variances: NDArray[np.float32]
    kernel: Kernel = "gaussian"
    center: bool = False
    space: str | None = None
    tau: float = 1.0
    bias: float = 0.0
    threshold: float | None = None
    rectify: str | None = None
    members: tuple[ALSAAnchors, ...] = ()

    def __post_init__(self) -> None:
        if self.space is None:
            object.__setattr__(self, "space", "centered" if self.center else "raw")
        check_in_choices(self.space, "space", "ALSAAnchors", SPACES)

    @property
    def n_classes(self) -> int:
        """Class count ``c`` of the logits these anchors score."""
        width = int(np.shape(self.positions)[1])
        return width - 1 if self.space == "augmented" else width

    @property
    def n_anchors(self) -> int:
        """Number of anchors ``k``."""
        return int(self.peaks.shape[0])


@dataclass(frozen=True)
class ALSAFit:
    """Outcome of :func:`fit_alsa_anchors`.

    Attributes
    ----------
    anchors : ALSAAnchors
        The fitted anchors.
    n_epochs : int
        Parameter updates performed.
    stop_reason : str
        ``"fixed"`` (``min_epochs`` updates done, ``stop_rule="fixed"``), ``"converged"`` (eq. 10
        held), ``"crossed"`` (the gap changed sign, ``stop_rule="crossing"``), ``"max_epochs"``
        (cap reached, a
        :class:`~estimators.core.exceptions.ConvergenceWarning` was issued) or ``"all_frozen"``.
    train_gap : float
        ``|mean q(val) - acc_S|`` of the returned anchors (float64 accumulation).
    history : dict of str to ndarray
        ``"loss"`` (mean BCE), ``"mean_q"`` and ``"gap"`` per forward pass (``n_epochs + 1``).
    val_accuracy : float
        ``acc_S``.
    scale : float
        Median validation logit norm; positions are learned in units of it.
    seconds : float
        Wall-clock time of training plus the reference pass.
    n_fit_rows : int
        Validation rows the anchors were trained on (``min(n, max_fit_rows)``; for the
        cross-fitted ensemble all ``n``, each member on ``2n/3`` of them).
    n_reference_rows : int
        Rows that set the rectification cut-off and the offset ``b``.
    reference : str
        ``"held-out"`` (rows not used in training), ``"cross-fit"`` (each member of the
        cross-fitted ensemble on the fold it was not trained on, every validation row once),
        ``"leave-anchor-out"`` (the training rows,
        each scored without the anchor initialised on it) or ``"training"`` (the paper rule's
        calibration, on the training rows as they are).
    reference_rectified : float
        Fraction of reference rows below the cut-off.
    """

    anchors: ALSAAnchors
    n_epochs: int
    stop_reason: str
    train_gap: float
    history: dict[str, NDArray[np.float64]] = field(repr=False)
    val_accuracy: float
    scale: float
    seconds: float
    n_fit_rows: int = 0
    n_reference_rows: int = 0
    reference: str = "training"
    reference_rectified: float = 0.0


@dataclass(frozen=True)
class ALSAPrediction:
    """Per-sample output of :func:`alsa_predict`.

    Attributes
    ----------
    q : ndarray of shape (n,), float64
        Probability of a correct prediction after rectification (eq. 8).
    q_raw : ndarray of shape (n,), float64
        ``sigmoid(I(z))`` before rectification (eq. 4).
    influence : ndarray of shape (n,), float64
        Total influence ``I(z)`` (eq. 2).
    rectified : ndarray of shape (n,), bool
        Which rows were set to ``1/c`` (cross-fitted ensemble: by a majority of the members;
        ``q`` averages each member's own rectified ``q``).
    threshold : float
        The cut-off used (``t``, or the kernel value ``kappa_alpha`` for ``rectify="kernel"``).
    """

    q: NDArray[np.float64]
    q_raw: NDArray[np.float64]
    influence: NDArray[np.float64]
    rectified: NDArray[np.bool_]
    threshold: float

    @property
    def accuracy(self) -> float:
        """Estimated accuracy, the mean of ``q`` (eq. 7)."""
        return float(np.mean(self.q))

    @property
    def rectified_fraction(self) -> float:
        """Fraction of rows set to ``1/c``."""
        return float(np.mean(self.rectified))



def alsa_predict(
    logits: Any,
    anchors: ALSAAnchors,
    *,
    alpha: float = 0.95,
    rectify: RectifyMode = "per-anchor",
    peak: float = 6.0,
    chunk_size: int | None = None,
    device: str = "auto",
    n_threads: int | None = None,
) -> ALSAPrediction:
    r"""Per-sample probabilities of correctness with rectification (eq. 2, 4, 8), chunked.

    Rows are processed in blocks of ``chunk_size`` so memory stays ``O(chunk_size * k)`` for any
    number of rows.

    Parameters
    ----------
    logits : array-like of shape (n, c), (n,) or (n, 1)
        Raw target logits (binary positive-class logits for ``(n,)`` / ``(n, 1)``), mapped
        into the anchors' space (:func:`canonical_logits`) in float64 and rounded once to
        float32.
    anchors : ALSAAnchors
    alpha : float in (0, 1), default 0.95
        Confidence interval of the cut-off (App. E).
    rectify : {"per-anchor", "total", "kernel", "none"}, default "per-anchor"
        ``"per-anchor"``: ``q := 1/c`` when :math:`|p_j K_j(z)| < t` for every anchor (App. E);
        ``"total"``: when :math:`|I(z)| < t` (eq. 8 read literally); ``"kernel"``: when every
        kernel value is below :math:`\kappa_\alpha` (the per-anchor test with each anchor's own
        learned :math:`|p_j|` in place of 6); ``"none"``: never.
    peak : float, default 6.0
        The constant in ``t`` (App. E).
    chunk_size : int or None, default None
    device : str, default "auto"
    n_threads : int or None, default None
        Torch threads; None: :func:`estimators.core.threads.auto_threads` for ``n * k``.
    """
    import torch

    owner = "alsa_predict"
    check_alsa_params(
        owner,
        {
            "alpha": alpha,
            "rectify": rectify,
            "peak": peak,
            "chunk_size": chunk_size,
            "n_threads": n_threads,
        },
    )
    if not isinstance(anchors, ALSAAnchors):
        raise ValueError(
            f"anchors must be an ALSAAnchors (from fit_alsa_anchors(...).anchors or an estimator's "
            f"anchors_); got {type(anchors).__name__}."
        )
    if anchors.members:  # cross-fitted ensemble: the mean of the members' q
        preds = [
            alsa_predict(
                logits, m, alpha=alpha, rectify=rectify, peak=peak, chunk_size=chunk_size,
                device=device, n_threads=n_threads,
            )
            for m in anchors.members
        ]
        votes = np.sum([pr.rectified for pr in preds], axis=0)
        return ALSAPrediction(
            q=np.mean([pr.q for pr in preds], axis=0),
            q_raw=np.mean([pr.q_raw for pr in preds], axis=0),
            influence=np.mean([pr.influence for pr in preds], axis=0),
            rectified=2 * votes > len(preds),
            threshold=(
                float(anchors.threshold) if anchors.threshold is not None
                else float(np.mean([pr.threshold for pr in preds]))
            ),
        )
    positions = np.asarray(anchors.positions, dtype=np.float32)
    z = check_logits(logits, "logits", n_classes=anchors.n_classes, keep_float32=True)
    dev = _resolve_device(device, owner)
    kernel = anchors.kernel
    if anchors.threshold is not None and anchors.rectify in (None, rectify):
        threshold = float(anchors.threshold)  # fitted by threshold_rule="quantile"
    elif rectify == "kernel":
        threshold = kernel_alpha_value(kernel, alpha)
    else:
        threshold = rectification_threshold(kernel, alpha, peak)
    n, c = z.shape
    k = anchors.n_anchors
    chunk = _auto_chunk(k, chunk_size, dev)
    infl = np.empty(n, dtype=np.float64)
    q_raw = np.empty(n, dtype=np.float64)
    rect = np.empty(n, dtype=bool)
    with _torch_threads(n_threads, n * k), torch.no_grad():
        A = torch.as_tensor(positions, device=dev)
        W = _k.unit_rows(A, center=anchors.space == "centered")
        p = torch.as_tensor(np.asarray(anchors.peaks, dtype=np.float32), device=dev)
        v = torch.as_tensor(np.asarray(anchors.variances, dtype=np.float32), device=dev)
        v2 = v * v
        buffers = _k.block_buffers(min(chunk, n), k, kernel, W)
        for s in range(0, n, chunk):
            block = canonical_logits(z[s : s + chunk], cast(str, anchors.space), anchors.tau)
            zc = torch.as_tensor(block, dtype=torch.float32, device=dev)
            U = _k.unit_rows(zc, center=False)
            I, q, mask = _k.predict_block(U, W, p, v2, kernel, rectify, threshold, buffers)
            infl[s : s + chunk] = I.double().cpu().numpy()
            rect[s : s + chunk] = mask.cpu().numpy()
    from scipy.special import expit

    q_raw[:] = expit(infl + float(anchors.bias))  # eq. (4), with the calibration offset
    q_rec = np.where(rect, 1.0 / c, q_raw)
    return ALSAPrediction(q=q_rec, q_raw=q_raw, influence=infl, rectified=rect, threshold=threshold)


def alsa_accuracy(
    logits: Any,
    anchors: ALSAAnchors,
    *,
    alpha: float = 0.95,
    rectify: RectifyMode = "per-anchor",
    peak: float = 6.0,
    chunk_size: int | None = None,
    device: str = "auto",
    n_threads: int | None = None,
) -> float:
    """Estimated accuracy on a target set, eq. (7): the mean rectified ``q``.

    Same parameters as :func:`alsa_predict`, which this wraps.
    """
    return alsa_predict(
        logits,
        anchors,
        alpha=alpha,
        rectify=rectify,
        peak=peak,
        chunk_size=chunk_size,
        device=device,
        n_threads=n_threads,
    ).accuracy


def anchors_surface(
    positions: Any,
    peaks: Any,
    variances: Any,
    params: Mapping[str, Any],
    *,
    device: str = "cpu",
) -> tuple[Callable[[Any], NDArray[np.float64]], ALSAAnchors]:
    """Rebuild a fitted ALSA surface ``z -> q(z)`` from stored anchors and their parameters.

    ``params`` is what an estimate records (``AccuracyEstimate.params``: ``get_params()`` plus
    the fitted ``space_tau``, ``bias`` and ``rectify_threshold``). A missing key falls back to
    the declared default of :class:`ALSA` (:data:`ALSA_DEFAULTS`: ``kernel``, ``rectify``,
    ``alpha``, ``peak``), to the legacy reading of ``space`` for rows stored before the space
    existed (``"centered"`` if ``center`` else ``"raw"``), and to ``tau = 1``, ``b = 0`` and the
    paper's cut-off for the fitted values.

    Parameters
    ----------
    positions : array-like of shape (k, c) or (k, c + 1)
    peaks, variances : array-like of shape (k,)
    params : mapping
        The stored hyper-parameters (e.g. ``json.loads(row.params_json)``).
    device : str, default "cpu"
        Device of :func:`alsa_predict`.

    Returns
    -------
    surface : callable
        ``surface(logits)`` is the rectified ``q`` of :func:`alsa_predict` (ndarray of shape (n,)).
    anchors : ALSAAnchors

    Examples
    --------
    >>> import numpy as np
    >>> surface, anchors = anchors_surface(
    ...     [[1.0, 0.0], [0.0, 1.0]], [3.0, -3.0], [2.0, 2.0], {"space": "centered"})
    >>> anchors.kernel, anchors.space, anchors.rectify
    ('gaussian', 'centered', 'per-anchor')
    >>> surface(np.array([[2.0, 0.0], [0.0, 2.0]])).round(3)
    array([0.953, 0.047])
    """
    rectify = params.get("rectify", ALSA_DEFAULTS["rectify"])
    threshold = params.get("rectify_threshold")
    anchors = ALSAAnchors(
        positions=np.asarray(positions, dtype=np.float32),
        peaks=np.asarray(peaks, dtype=np.float32),
        variances=np.asarray(variances, dtype=np.float32),
        kernel=params.get("kernel", ALSA_DEFAULTS["kernel"]),
        center=bool(params.get("center", False)),
        space=params.get("space", "centered" if params.get("center") else "raw"),
        tau=float(params.get("space_tau", 1.0)),
        bias=float(params.get("bias", 0.0)),
        threshold=None if threshold is None else float(threshold),
        rectify=rectify,
    )
    alpha = float(params.get("alpha", ALSA_DEFAULTS["alpha"]))
    peak = float(params.get("peak", ALSA_DEFAULTS["peak"]))

    def surface(logits: Any) -> NDArray[np.float64]:
        return alsa_predict(
            logits, anchors, alpha=alpha, rectify=rectify, peak=peak, device=device
        ).q

    return surface, anchors
