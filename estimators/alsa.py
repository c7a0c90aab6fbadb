r"""ALSA: Anchors in Logit Space for accuracy estimation (``alsa-g``, ``alsa-e``).

Reference: Liu et al., "ALSA: Anchors in Logit Space for Out-of-Distribution Accuracy
Estimation", BMVC 2025, arXiv:2508.19613. The authors released no code; this is an
implementation from the paper's equations, with every choice the paper leaves open exposed as a
parameter (see ``docs/ALSA.md`` for the measurements behind the defaults).

The method, with the paper's equation numbers:

* ``k`` anchors ``(a_j, p_j, v_j)``: position ``a_j`` in logit space, signed peak ``p_j`` and
  "variance" ``v_j`` (an inverse width: the kernels use ``v_j**2``).
* cosine distance (eq. 3): :math:`d(z, a) = 1 - \langle z, a\rangle / (\|z\|\,\|a\|) \in [0, 2]`.
* influence of one anchor: Gaussian-like (eq. 1) :math:`p_j \exp(-v_j^2 d^2)` or exponential
  (eq. 5) :math:`p_j \exp(-v_j^2 d)`; total influence (eq. 2) :math:`I(z) = \sum_j` of those.
* probability of a correct prediction (eq. 4): :math:`q(z) = \sigma(I(z))`.
* training (eq. 9, 10): full-batch BCE between ``q(z_i)`` and the correctness ``delta_i`` of the
  validation predictions, stopped when :math:`|\frac1n\sum_i q(z_i) - \mathrm{acc}_S| < 10^{-5}`.
* initialisation (Sec. 3.1): positions sampled from the validation logits, peaks ``+P`` / ``-P``
  by the correctness of the sampled point, variances from :math:`N(\mu_v, \sigma_v^2)`.
* rectification (eq. 7, 8 and App. E): a target point on which every anchor's influence is
  small, :math:`|p_j K_j(z)| < t` for all ``j``, gets ``q = 1/c``, with
  :math:`t = 6 e^{-\mathrm{erfinv}(\alpha)^2}` (Gaussian-like) or :math:`t = 6(1-\alpha)`
  (exponential) with ``threshold_rule="paper"``. The default ``threshold_rule="quantile"``
  (issue 11) sets ``t`` to the 1 % quantile of the test statistic on in-distribution rows the
  anchors were not fitted to, because the paper's absolute ``t`` rectified a share of
  in-distribution rows that grew with the validation size (``docs/ALSA.md``).
* estimate (eq. 7): the mean of the rectified ``q`` over the target set.

Cosine distance makes ALSA invariant to positive rescaling of the logits, so temperature scaling
is a no-op; it is *not* invariant to adding a constant vector (which softmax ignores). Feed raw
logits, not log-probabilities.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.special import erfinv

from . import _alsa_kernels as _k
from ._validation import (
    check_in_choices,
    check_labels,
    check_logits,
    check_number,
    is_binary_shape,
)
from .base import Estimator
from .exceptions import ConvergenceWarning
from .registry import register

__all__ = [
    "ALSA",
    "ALSAAnchors",
    "ALSAE",
    "ALSAFit",
    "ALSAG",
    "ALSAPrediction",
    "FREEZE_GROUPS",
    "alsa_accuracy",
    "alsa_influence",
    "alsa_predict",
    "cosine_distance",
    "fit_alsa_anchors",
    "kernel_alpha_value",
    "rectification_threshold",
]

Kernel = Literal["gaussian", "exponential"]
RectifyMode = Literal["per-anchor", "total", "kernel", "none"]

#: The parameter groups that ``freeze`` may name (the paper's ablation "fix a / p / v / p&v").
FREEZE_GROUPS: tuple[str, ...] = ("positions", "peaks", "variances")
KERNELS: tuple[str, ...] = ("gaussian", "exponential")
RECTIFY_MODES: tuple[str, ...] = ("per-anchor", "total", "kernel", "none")
OPTIMIZERS: tuple[str, ...] = ("adam", "rmsprop", "sgd")
GRADIENTS: tuple[str, ...] = ("analytic", "autograd")
SAMPLINGS: tuple[str, ...] = ("uniform", "stratified")
#: Spaces the anchors live in (:func:`canonical_logits`). ``"raw"`` is the paper's.
SPACES: tuple[str, ...] = ("augmented", "centered", "logprob", "raw")
#: Stopping rules (:func:`fit_alsa_anchors`): ``"paper"`` is eq. (10) alone.
STOP_RULES: tuple[str, ...] = ("fixed", "crossing", "paper")
#: Rectification cut-off rules (:func:`fit_alsa_anchors`): ``"quantile"`` (default, size
#: invariant) or ``"paper"`` (App. E, eq. 23: an absolute influence value).
THRESHOLD_RULES: tuple[str, ...] = ("quantile", "paper")
#: Default ``rectify_quantile``: the fraction of held-out in-distribution rows rectified.
DEFAULT_RECTIFY_QUANTILE = 0.01
#: Default ``max_fit_rows``: the anchors are trained on at most this many validation rows.
MAX_FIT_ROWS = 10_000
#: Default ``max_reference_rows``: held-out rows that set the cut-off and the offset.
MAX_REFERENCE_ROWS = 100_000
#: Folds of the cross-fitted ensemble that ``threshold_rule="quantile"`` fits when
#: ``n <= max_fit_rows`` (``docs/ALSA.md``, "ALSA at any validation size").
CROSS_FIT_FOLDS = 3
#: Default space, chosen by measurement (``benchmarks/tune_alsa.py``; ``docs/ALSA.md``).
DEFAULT_SPACE = "augmented"
#: Upper bound of ``n_anchors="auto"`` (the tuned k at n_val = 2,000).
AUTO_ANCHORS_MAX = 300
#: ``n_anchors="auto"`` uses one anchor per this many validation rows, up to the bound.
AUTO_ANCHORS_ROWS_PER_ANCHOR = 4

#: Defaults that depend on the kernel: ``v`` multiplies ``d**2`` in eq. (1) but ``d`` in eq. (5),
#: so one variance scale gives very different widths. Chosen by ``benchmarks/tune_alsa.py``
#: (table in ``docs/ALSA.md``).
KERNEL_DEFAULTS: dict[str, dict[str, float]] = {
    "gaussian": {"variance_mean": 10.0, "variance_std": 1.0},
    "exponential": {"variance_mean": 5.0, "variance_std": 0.5},
}

#: Elements of one (rows x anchors) float32 block on CPU: 2**19 elements = 2 MiB per buffer,
#: small enough to stay in cache (measured 1.5-2x faster per epoch than 16 MiB blocks).
_BLOCK_ELEMENTS = 1 << 19
#: The same on CUDA, where larger blocks amortise kernel launches: 2**24 elements = 64 MiB.
_BLOCK_ELEMENTS_CUDA = 1 << 24


# ============================================================================ small helpers
def kernel_alpha_value(kernel: Kernel, alpha: float) -> float:
    r"""Kernel value at the radius that encloses the mass fraction ``alpha`` (App. E).

    Gaussian-like: :math:`e^{-\mathrm{erfinv}(\alpha)^2}` (eq. 23 without the peak);
    exponential: :math:`1 - \alpha`.
    """
    _check_kernel(kernel, "kernel_alpha_value")
    check_number(
        alpha, "alpha", "kernel_alpha_value", low=0.0, high=1.0, low_open=True, high_open=True
    )
    if kernel == "gaussian":
        return float(math.exp(-float(erfinv(alpha)) ** 2))
    return float(1.0 - alpha)


def rectification_threshold(kernel: Kernel, alpha: float, peak: float = 6.0) -> float:
    r"""Cut-off ``t`` of the rectification (App. E, eq. 23 and the line after eq. 24).

    :math:`t = P\,e^{-\mathrm{erfinv}(\alpha)^2}` for the Gaussian-like kernel and
    :math:`t = P(1-\alpha)` for the exponential one, with the paper's "reliable maximum peak"
    ``P = 6``. For ``alpha = 0.95``: 0.8790 and 0.3.

    Parameters
    ----------
    kernel : {"gaussian", "exponential"}
    alpha : float in (0, 1)
        Confidence interval: the fraction of an anchor's influence mass inside the cut-off.
    peak : float, default 6.0
        The constant ``P``.
    """
    check_number(peak, "peak", "rectification_threshold", low=0.0, low_open=True)
    return float(peak) * kernel_alpha_value(kernel, alpha)


def _check_kernel(kernel: Any, owner: str) -> None:
    check_in_choices(kernel, "kernel", owner, KERNELS)


def canonical_logits(
    logits: Any, space: str = DEFAULT_SPACE, tau: float = 1.0
) -> NDArray[np.float64]:
    r"""Map logit rows into the space the anchors live in (float64).

    With :math:`\bar z = \frac1c \sum_k z_k` the row mean:

    * ``"raw"`` (the paper): :math:`z` itself. Adding a constant to a row (which softmax
      ignores) changes its direction, hence ALSA's estimate.
    * ``"centered"``: :math:`z - \bar z \mathbf 1`. Invariant to a per-row constant, but for
      ``c = 2`` every centred row is :math:`\pm(-m/2, m/2)` with margin :math:`m = z_1 - z_0`,
      so the cosine distance sees only the predicted class.
    * ``"logprob"``: :math:`\log\mathrm{softmax}(z) = z - \log\sum_k e^{z_k}`. Invariant to a
      per-row constant, not to rescaling (so not to temperature).
    * ``"augmented"``: :math:`\tilde z = [\,z - \bar z \mathbf 1,\ \tau\,] \in \mathbb R^{c+1}`,
      the centred logits plus one constant coordinate :math:`\tau`, the median norm of the
      centred validation logits over :math:`\sqrt{c-1}` (fitted, :func:`augmented_tau`). The
      cosine between two augmented rows depends on the direction of the centred logits *and*
      on their norms relative to :math:`\tau`
      (:math:`\angle(\tilde z, e_{c+1}) = \arctan(\|z - \bar z\mathbf 1\| / \tau)`), so the
      softmax's confidence is visible even for ``c = 2``. Invariant to a per-row constant and to
      rescaling validation and target logits together (``tau`` scales along), hence to
      temperature scaling.

    Parameters
    ----------
    logits : array-like of shape (n, c)
    space : {"augmented", "centered", "logprob", "raw"}
    tau : float, default 1.0
        The constant coordinate of ``"augmented"``; ignored otherwise.

    Returns
    -------
    ndarray of shape (n, c) or (n, c + 1) for ``"augmented"``, float64
    """
    check_in_choices(space, "space", "canonical_logits", SPACES)
    z = np.asarray(logits, dtype=np.float64)
    if space == "raw":
        return z
    if space == "logprob":
        zm = z - z.max(axis=1, keepdims=True)
        return zm - np.log(np.exp(zm).sum(axis=1, keepdims=True))
    zc = z - z.mean(axis=1, keepdims=True)
    if space == "centered":
        return zc
    return np.concatenate([zc, np.full((z.shape[0], 1), float(tau))], axis=1)


def augmented_tau(val_logits: Any) -> float:
    r"""The constant coordinate of the ``"augmented"`` space: the median centred-logit norm
    per free dimension.

    :math:`\tau = \mathrm{median}_i \|z_i - \bar z_i \mathbf 1\| / \sqrt{c - 1}` over the
    validation rows (1.0 if that is 0): the centred logits span ``c - 1`` dimensions, and the
    extra coordinate gets the typical magnitude of one of them (the RMS of a centred row's
    coordinates), so it weighs like one more class direction. For ``c = 2`` a typical row sits at
    45 degrees from the extra axis; for ``c = 10`` at about 72 degrees, so the angles between
    rows, which carry the class structure, are not swamped by the common coordinate (with the
    full median norm for every ``c``, ALSA lost 1-6 points on the 10-class problems).
    """
    zc = canonical_logits(val_logits, "centered")
    c = zc.shape[1]
    tau = float(np.median(np.linalg.norm(zc, axis=1))) / np.sqrt(max(c - 1, 1))
    return tau if tau > 0 else 1.0


def auto_n_anchors(n_val: int) -> int:
    """``n_anchors="auto"``: ``min(300, max(1, n_val // 4))`` anchors.

    300 is the tuned count at ``n_val = 2,000``; below 1,200 rows it falls to one anchor per
    four validation rows, the ratio measured best on small validation sets (``docs/ALSA.md``).
    """
    return int(min(AUTO_ANCHORS_MAX, max(1, n_val // AUTO_ANCHORS_ROWS_PER_ANCHOR)))


def normalize_freeze(freeze: Any, owner: str = "ALSA") -> frozenset[str]:
    """Turn ``freeze`` (a string or a sequence of strings) into a validated frozenset.

    Raises
    ------
    ValueError
        If an entry is not one of ``"positions"``, ``"peaks"``, ``"variances"``.
    """
    if freeze is None:
        return frozenset()
    items = (freeze,) if isinstance(freeze, str) else freeze
    try:
        items = tuple(items)
    except TypeError:
        raise ValueError(
            f"The 'freeze' parameter of {owner} must be a string or a sequence of strings from "
            f"{list(FREEZE_GROUPS)}; got {freeze!r}."
        ) from None
    for item in items:
        if item not in FREEZE_GROUPS:
            raise ValueError(
                f"The 'freeze' parameter of {owner} must name groups from {list(FREEZE_GROUPS)} "
                f"(e.g. freeze=('peaks', 'variances') for the paper's 'fix p&v'); got {item!r}."
            )
    return frozenset(items)


def _resolve_device(device: Any, owner: str = "ALSA") -> str:
    """``"auto"`` -> ``"cuda"`` when available else ``"cpu"``; checks that CUDA exists."""
    import torch

    if not isinstance(device, str):
        raise ValueError(
            f"The 'device' parameter of {owner} must be a string such as 'auto', 'cpu', 'cuda' "
            f"or 'cuda:0'; got {device!r}."
        )
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"The 'device' parameter of {owner} must be 'auto', 'cpu', 'cuda' or 'cuda:<index>'; "
            f"got {device!r}."
        ) from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(
            f"The 'device' parameter of {owner} must be a CPU or CUDA device; got {device!r}."
        )
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"The 'device' parameter of {owner} asks for {device!r} but torch sees no CUDA device; "
            "use device='cpu' or device='auto'."
        )
    return str(dev)


@contextlib.contextmanager
def _torch_threads(n_threads: int | None) -> Iterator[None]:
    """Set torch's intra-op thread count for the block only, then restore it."""
    import torch

    if n_threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n_threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _auto_chunk(n_anchors: int, chunk_size: int | None, device: str = "cpu") -> int:
    """Rows per block: ``chunk_size`` if given, else a block of about 2**19 (CPU) or 2**24
    (CUDA) float32 elements, at least 32 rows."""
    if chunk_size is not None:
        return int(chunk_size)
    budget = _BLOCK_ELEMENTS_CUDA if device.startswith("cuda") else _BLOCK_ELEMENTS
    return max(32, budget // max(1, n_anchors))


def _check_params(owner: str, params: Mapping[str, Any]) -> None:
    """Validate whichever ALSA hyper-parameters ``params`` holds; messages name the parameter."""
    choices = {
        "kernel": KERNELS,
        "rectify": RECTIFY_MODES,
        "optimizer": OPTIMIZERS,
        "gradient": GRADIENTS,
        "anchor_sampling": SAMPLINGS,
        "space": SPACES,
        "stop_rule": STOP_RULES,
        "threshold_rule": THRESHOLD_RULES,
    }
    for name, allowed in choices.items():
        if name in params:
            check_in_choices(params[name], name, owner, allowed)
    if "n_anchors" in params and params["n_anchors"] != "auto":
        if isinstance(params["n_anchors"], str):
            raise ValueError(
                f"The 'n_anchors' parameter of {owner} must be a positive integer or 'auto'; "
                f"got {params['n_anchors']!r}."
            )
        check_number(params["n_anchors"], "n_anchors", owner, low=1, integer=True)
    for name in ("chunk_size", "n_threads"):
        if name in params and params[name] is not None:
            check_number(params[name], name, owner, low=1, integer=True)
    for name in ("max_fit_rows", "max_reference_rows"):
        if name in params:
            check_number(params[name], name, owner, low=2, integer=True)
    if "rectify_quantile" in params:
        check_number(
            params["rectify_quantile"], "rectify_quantile", owner, low=0.0, high=1.0,
            high_open=True,
        )
    for name in ("max_epochs", "min_epochs", "seed"):
        if name in params:
            check_number(params[name], name, owner, low=0, integer=True)
    if "alpha" in params:
        check_number(
            params["alpha"], "alpha", owner, low=0.0, high=1.0, low_open=True, high_open=True
        )
    for name in ("peak", "lr_positions", "lr_peaks", "lr_variances", "tol"):
        if name in params:
            check_number(params[name], name, owner, low=0.0, low_open=True)
    if params.get("variance_mean", None) not in (None, "auto"):
        check_number(params["variance_mean"], "variance_mean", owner, low=0.0, low_open=True)
    if params.get("variance_std", None) is not None:
        check_number(params["variance_std"], "variance_std", owner, low=0.0)
    if "calibrate" in params and not isinstance(params["calibrate"], (bool, np.bool_)):
        raise ValueError(
            f"The 'calibrate' parameter of {owner} must be a bool; got {params['calibrate']!r}."
        )
    if "freeze" in params:
        normalize_freeze(params["freeze"], owner)
    if "device" in params:
        _resolve_device(params["device"], owner)


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
    members: tuple["ALSAAnchors", ...] = ()

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
        :class:`~estimators.exceptions.ConvergenceWarning` was issued) or ``"all_frozen"``.
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


# ============================================================================ functional API
def cosine_distance(
    logits: Any,
    positions: Any,
    *,
    space: str = "raw",
    tau: float = 1.0,
    center: bool = False,
) -> NDArray[np.float64]:
    r"""Cosine distance (eq. 3) between every logit row and every anchor, in float64.

    :math:`d(z, a) = 1 - \langle \phi(z), a\rangle / (\|\phi(z)\|\,\|a\|)`, clipped to
    ``[0, 2]``, where :math:`\phi` maps the logits into ``space`` (:func:`canonical_logits`;
    ``"raw"``, the identity, is eq. 3 as printed) and ``positions`` already live in that space.
    A zero vector has distance 1 to everything. Builds the full (n, k) matrix: meant for small
    inputs. ``center=True`` is the legacy spelling of ``space="centered"``.
    """
    if center and space == "raw":
        space = "centered"
    check_in_choices(space, "space", "cosine_distance", SPACES)
    z = canonical_logits(check_logits(logits, "logits"), space, tau)
    a = check_logits(positions, "positions", n_classes=z.shape[1], allow_binary=False)
    if space == "centered":
        a = a - a.mean(axis=1, keepdims=True)
    zn = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), _k.NORM_EPS)
    an = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), _k.NORM_EPS)
    return np.clip(1.0 - zn @ an.T, 0.0, 2.0)


def alsa_influence(
    logits: Any,
    positions: Any,
    peaks: Any,
    variances: Any,
    *,
    kernel: Kernel = "gaussian",
    space: str = "raw",
    tau: float = 1.0,
    center: bool = False,
    per_anchor: bool = True,
) -> NDArray[np.float64]:
    r"""Influence of anchors on logit vectors, eq. (1) / (5) per anchor or eq. (2) in total.

    :math:`\mathrm{Infl}_j(z) = p_j \exp(-v_j^2\, d(z, a_j)^2)` (Gaussian-like) or
    :math:`p_j \exp(-v_j^2\, d(z, a_j))` (exponential), with ``d`` the cosine distance (eq. 3).
    Computed in float64 with the full (n, k) matrix: use :func:`alsa_predict` for large inputs.

    Parameters
    ----------
    logits : array-like of shape (n, c)
    positions : array-like of shape (k, c)
    peaks, variances : array-like of shape (k,)
    kernel : {"gaussian", "exponential"}, default "gaussian"
    space : {"raw", "centered", "logprob", "augmented"}, default "raw"
        Space of the positions; the logits are mapped into it (:func:`canonical_logits`).
    tau : float, default 1.0
        Extra coordinate of ``"augmented"``.
    center : bool, default False
        Legacy spelling of ``space="centered"``.
    per_anchor : bool, default True
        Return the (n, k) per-anchor influences; else the (n,) total influence.
    """
    _check_kernel(kernel, "alsa_influence")
    d = cosine_distance(logits, positions, space=space, tau=tau, center=center)
    p = np.asarray(peaks, dtype=np.float64).reshape(-1)
    v = np.asarray(variances, dtype=np.float64).reshape(-1)
    if p.shape[0] != d.shape[1] or v.shape[0] != d.shape[1]:
        raise ValueError(
            f"peaks and variances must have one entry per anchor ({d.shape[1]}); "
            f"got {p.shape[0]} and {v.shape[0]}."
        )
    g = d * d if kernel == "gaussian" else d
    infl = p[None, :] * np.exp(-(v * v)[None, :] * g)
    return infl if per_anchor else infl.sum(axis=1)


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
    until ``max_epochs`` updates (then a :class:`~estimators.exceptions.ConvergenceWarning`).
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
        Closed-form gradients (module :mod:`estimators._alsa_kernels`) or torch autograd; the
        closed form measured 4-11x faster per epoch on CPU.
    chunk_size : int or None, default None
        Rows per block; None picks about 2**19 (CPU) or 2**24 (CUDA) rows x anchors elements.
    seed : int, default 0
        Seeds anchor sampling and variance initialisation; CPU results are deterministic.
    device : str, default "auto"
        ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:<i>"``.
    n_threads : int or None, default None
        Torch intra-op threads during the fit (restored afterwards); None leaves torch's setting.
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
    _check_params(owner, hyper)
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
        fold = np.empty(n_all, dtype=np.int64)
        fold[rng.permutation(n_all)] = np.arange(n_all) % K
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
    with _torch_threads(n_threads):
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
        threshold: float | None = float(np.quantile(stat, rectify_quantile)) if (
            rectify_quantile > 0
        ) else 0.0
        rect_ref = stat < threshold
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


def _combine_members(members: list[ALSAFit], accuracy: float, n_all: int) -> ALSAFit:
    """The cross-fitted ensemble of ``members`` (one per fold) as one :class:`ALSAFit`.

    :func:`alsa_predict` averages the members' ``q``. The top-level anchor fields are the
    members' anchors concatenated with peaks divided by the member count, the mean offset and the
    mean cut-off over the member count: one anchor set whose total influence is the members' mean
    influence, an approximation of the ensemble for readers that store a single set.
    """
    K = len(members)
    anchors = [m.anchors for m in members]
    thresholds = [a.threshold for a in anchors]
    threshold = None if thresholds[0] is None else float(np.mean(thresholds)) / K
    first = anchors[0]
    combined = ALSAAnchors(
        np.concatenate([a.positions for a in anchors]).astype(np.float32),
        (np.concatenate([a.peaks for a in anchors]) / K).astype(np.float32),
        np.concatenate([a.variances for a in anchors]).astype(np.float32),
        kernel=first.kernel,
        center=first.center,
        space=first.space,
        tau=first.tau,
        bias=float(np.mean([a.bias for a in anchors])),
        threshold=threshold,
        rectify=first.rectify,
        members=tuple(anchors),
    )
    reasons = [m.stop_reason for m in members]
    n_ref = sum(m.n_reference_rows for m in members)
    return ALSAFit(
        anchors=combined,
        n_epochs=max(m.n_epochs for m in members),
        stop_reason="max_epochs" if "max_epochs" in reasons else reasons[0],
        train_gap=max(m.train_gap for m in members),
        history=members[0].history,
        val_accuracy=accuracy,
        scale=members[0].scale,
        seconds=sum(m.seconds for m in members),
        n_fit_rows=int(n_all),
        n_reference_rows=int(n_ref),
        reference="cross-fit",
        reference_rectified=float(
            sum(m.reference_rectified * m.n_reference_rows for m in members) / max(n_ref, 1)
        ),
    )


def _reference_stats(
    U: Any, A: Any, p: Any, v: Any, kernel: Kernel, rectify: str, chunk: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Total influence ``I(z_i)`` and the rectification statistic of every row of ``U``.

    The statistic is what :func:`alsa_predict` compares with the cut-off: ``max_j |p_j| K_j``
    (``"per-anchor"``), ``max_j K_j`` (``"kernel"``), ``|I|`` (``"total"``), 0 (``"none"``).
    """
    import torch

    W = A / A.norm(dim=1, keepdim=True).clamp_min(_k.NORM_EPS)
    v2 = v * v
    n = U.shape[0]
    infl = np.empty(n, dtype=np.float64)
    stat = np.zeros(n, dtype=np.float64)
    with torch.no_grad():
        buffers = _k.block_buffers(min(chunk, n), A.shape[0], kernel, U)
        pa = p.abs()
        for s in range(0, n, chunk):
            _, _, K = _k.kernel_block(U[s : s + chunk], W, v2, kernel, buffers)
            I = torch.mv(K, p)
            infl[s : s + chunk] = I.double().cpu().numpy()
            if rectify == "per-anchor":
                stat[s : s + chunk] = (K * pa).amax(dim=1).double().cpu().numpy()
            elif rectify == "kernel":
                stat[s : s + chunk] = K.amax(dim=1).double().cpu().numpy()
            elif rectify == "total":
                stat[s : s + chunk] = I.abs().double().cpu().numpy()
    return infl, stat


def _leave_anchor_out(
    U: Any,
    A: Any,
    p: Any,
    v: Any,
    kernel: Kernel,
    rectify: str,
    rows: NDArray[np.int64],
    infl: NDArray[np.float64],
    stat: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Score each anchor's initial row without that anchor (the training rows as held-out).

    Anchor ``j`` starts on row ``r_j`` with the peak sign of that row's correctness, so on
    ``r_j`` it memorises the label: :math:`I(z_{r_j})` and the rectification statistic are
    optimistic there. With :math:`k/n` up to 1/4 (``n_anchors="auto"``) this biased the
    in-distribution estimate by several points at ``n = 1,000``. Here
    :math:`I_{-j}(z_{r_j}) = I(z_{r_j}) - p_j K_j(z_{r_j})` and the statistic is taken over the
    other anchors; the other rows are unchanged.
    """
    import torch

    infl = infl.copy()
    stat = stat.copy()
    with torch.no_grad():
        W = A / A.norm(dim=1, keepdim=True).clamp_min(_k.NORM_EPS)
        idx = torch.as_tensor(rows, device=U.device)
        _, _, K = _k.kernel_block(U[idx], W, v * v, kernel)  # (k, k): row r_j vs every anchor
        diag = torch.diagonal(K).clone()
        own = (p * diag).double().cpu().numpy()
        infl[rows] = infl[rows] - own
        K.fill_diagonal_(0.0)
        if rectify == "per-anchor":
            stat[rows] = (K * p.abs()).amax(dim=1).double().cpu().numpy()
        elif rectify == "kernel":
            stat[rows] = K.amax(dim=1).double().cpu().numpy()
        elif rectify == "total":
            stat[rows] = np.abs(infl[rows])
    return infl, stat


def _calibration_bias(
    influence: NDArray[np.float64],
    accuracy: float,
    rectified: NDArray[np.bool_] | None = None,
    floor: float = 0.0,
) -> float:
    r"""The ``b`` with :math:`\frac1n \sum_i \tilde q_i(b) = \mathrm{acc}` (bisection).

    :math:`\tilde q_i(b) = 1/c` (``floor``) on ``rectified`` rows, else
    :math:`\sigma(I_i + b)`. The left side increases with ``b``, so the root is unique when it
    exists; 200 bisection steps on ``[-60, 60]`` in float64 reach it to rounding (an
    unreachable ``acc`` gives an end of the bracket); it stops early once the bracket is one
    float64 ulp wide (about 70 steps), where further steps change nothing.
    """
    from scipy.special import expit

    if rectified is None:
        rectified = np.zeros(influence.shape[0], dtype=bool)
    n = influence.shape[0]
    keep = influence[~rectified]
    fixed = float(rectified.sum()) * floor
    lo, hi = -60.0, 60.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:  # the bracket is one ulp wide: later steps change nothing
            break
        if (fixed + float(np.sum(expit(keep + mid)))) / n < accuracy:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


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
    """
    import torch

    owner = "alsa_predict"
    _check_params(
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
    with _torch_threads(n_threads), torch.no_grad():
        A = torch.as_tensor(positions, device=dev)
        W = _k.unit_rows(A, center=anchors.space == "centered")
        p = torch.as_tensor(np.asarray(anchors.peaks, dtype=np.float32), device=dev)
        v = torch.as_tensor(np.asarray(anchors.variances, dtype=np.float32), device=dev)
        v2 = v * v
        buffers = _k.block_buffers(min(chunk, n), k, kernel, W)
        for s in range(0, n, chunk):
            block = canonical_logits(z[s : s + chunk], anchors.space, anchors.tau)
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


# ============================================================================ estimator classes
class ALSA(Estimator):
    r"""ALSA estimator: learnable anchors in logit space (Liu et al., BMVC 2025, arXiv:2508.19613).

    Shared implementation of ``alsa-g`` (:class:`ALSAG`, Gaussian-like influence, eq. 1) and
    ``alsa-e`` (:class:`ALSAE`, exponential influence, eq. 5). ``fit`` learns ``k`` anchors on the
    validation logits (eq. 9, stopped by eq. 10); ``estimate`` returns the mean of
    :math:`q(z) = \sigma(\sum_j p_j e^{-v_j^2 g(d(z, a_j))})` over the target rows, with
    ``q := 1/c`` on rows no anchor influences by at least
    :math:`t = 6e^{-\mathrm{erfinv}(\alpha)^2}` (G) or :math:`6(1-\alpha)` (E) (eq. 8, App. E).
    Takes raw logits; temperature scaling is a no-op (cosine distance is scale invariant).

    Every default the paper leaves open was chosen by ``benchmarks/tune_alsa.py`` on tuning
    problems independent of the benchmark (digits images, Gaussian blobs; the table and the
    reading are in ``docs/ALSA.md``); :func:`fit_alsa_anchors` documents each one.

    Parameters
    ----------
    kernel : {"gaussian", "exponential"}
        Influence function; ``alsa-g`` defaults to ``"gaussian"``, ``alsa-e`` to ``"exponential"``.
    n_anchors : int or "auto", default "auto"
        Number of anchors ``k``; ``"auto"`` is ``min(300, n_val // 4)`` (:func:`auto_n_anchors`),
        an explicit value above the validation size is capped with a warning.
    alpha : float in (0, 1), default 0.95
        Confidence interval of the rectification cut-off (App. E), used with
        ``threshold_rule="paper"``. 0.8-0.99 measured within about 0.1 point of each other
        with the default anchors.
    max_epochs : int, default 500
        Cap on full-batch updates; reaching it issues a ``ConvergenceWarning``.
    seed : int, default 0
        Seeds anchor sampling and variance initialisation.
    device : str, default "auto"
        ``"auto"`` picks CUDA when available, else CPU.
    freeze : str or sequence of str, default ()
        Parameter groups kept at their initial value: ``"positions"``, ``"peaks"``,
        ``"variances"`` (the paper's ablation: fix a, fix p, fix v, fix p&v), e.g.
        ``get_estimator("alsa-g", freeze=("peaks", "variances"))``.
    peak : float, default 6.0
        Initial peak magnitude and the constant in ``t`` (App. E).
    variance_mean : float, "auto" or None
        Mean :math:`\mu_v` of the variance initialisation; ``alsa-g`` defaults to 10.0 and
        ``alsa-e`` to 5.0 (:data:`KERNEL_DEFAULTS`); None means the kernel's default.
    variance_std : float or None
        Standard deviation :math:`\sigma_v`; ``alsa-g`` 1.0, ``alsa-e`` 0.5.
    optimizer : {"adam", "rmsprop", "sgd"}, default "adam"
    lr_positions : float, default 0.01
        In units of the median validation logit norm.
    lr_peaks, lr_variances : float, default 0.1
    min_epochs : int, default 100
        Updates performed (``stop_rule="fixed"``), or before the stopping rule may fire.
    tol : float, default 1e-5
        Stopping tolerance of eq. (10).
    rectify : {"per-anchor", "total", "kernel", "none"}, default "per-anchor"
        Rectification test (see :func:`alsa_predict`); per-anchor is App. E's reading.
    space : {"augmented", "centered", "logprob", "raw"}, default "augmented"
        Space the anchors live in (:func:`canonical_logits`): ``"augmented"`` = centred logits
        plus a constant coordinate ``tau`` (median centred validation norm over
        ``sqrt(c - 1)``), invariant to a
        per-row constant and able to see confidence for ``c = 2``; ``"raw"`` is the paper's.
    stop_rule : {"fixed", "crossing", "paper"}, default "fixed"
        ``"fixed"``: exactly ``min_epochs`` updates, eq. (10) then met by the calibration
        offset; ``"paper"``: eq. (10) only; ``"crossing"``: also stop when the gap changes sign.
    calibrate : bool, default True
        Fit the offset ``b`` of :math:`q = \sigma(I + b)` after training so that eq. (10) holds
        exactly (False: the paper's form, ``b = 0``).
    anchor_sampling : {"stratified", "uniform"}, default "stratified"
    gradient : {"analytic", "autograd"}, default "analytic"
    chunk_size : int or None, default None
        Rows per block in fit and estimate; None picks about 2**19 (CPU) or 2**24 (CUDA)
        rows x anchors elements per block.
    n_threads : int or None, default None
        Torch threads during fit/estimate (restored afterwards).
    threshold_rule : {"quantile", "paper"}, default "quantile"
        Rectification cut-off: the ``rectify_quantile`` quantile over held-out reference rows
        (size invariant) or the paper's eq. (23) value (see :func:`fit_alsa_anchors`).
    rectify_quantile : float, default 0.01
    max_fit_rows : int, default 10000
        Train on a random subsample of ``min(max_fit_rows, n // 2)`` rows above this size.
    max_reference_rows : int, default 100000

    Attributes
    ----------
    positions_ : ndarray of shape (k, c + 1) (augmented space) or (k, c), float32
        Fitted anchor positions in logit space (for plots).
    peaks_ : ndarray of shape (k,), float32
        Fitted signed peaks.
    variances_ : ndarray of shape (k,), float32
        Fitted variances ``v`` (the kernels use ``v**2``).
    anchors_ : ALSAAnchors
        The three arrays together, as :func:`alsa_predict` takes them.
    history_ : dict of str to ndarray
        ``"loss"`` (mean BCE), ``"mean_q"`` and ``"gap"`` per forward pass (``n_epochs_ + 1``).
    n_epochs_ : int
        Parameter updates performed.
    stop_reason_ : str
        ``"fixed"``, ``"converged"``, ``"crossed"``, ``"max_epochs"`` or ``"all_frozen"``.
    train_gap_ : float
        Final ``|mean q(val) - acc_S|``.
    threshold_ : float
        Rectification cut-off ``t`` in use.
    fit_seconds_ : float
        Training wall-clock time.
    fit_result_ : ALSAFit
        Everything :func:`fit_alsa_anchors` returned.

    Examples
    --------
    >>> import numpy as np
    >>> from estimators import get_estimator
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 300)
    >>> z = rng.normal(size=(300, 3)); z[np.arange(300), y] += 2
    >>> est = get_estimator("alsa-e", n_anchors=30, device="cpu").fit(z, y)
    >>> 0.0 <= est.estimate(z).accuracy <= 1.0
    True
    """

    def __init__(
        self,
        *,
        kernel: Kernel = "gaussian",
        n_anchors: int | Literal["auto"] = "auto",
        alpha: float = 0.95,
        max_epochs: int = 500,
        seed: int = 0,
        device: str = "auto",
        freeze: str | Sequence[str] = (),
        peak: float = 6.0,
        variance_mean: float | Literal["auto"] | None = None,
        variance_std: float | None = None,
        optimizer: str = "adam",
        lr_positions: float = 0.01,
        lr_peaks: float = 0.1,
        lr_variances: float = 0.1,
        min_epochs: int = 100,
        tol: float = 1e-5,
        rectify: RectifyMode = "per-anchor",
        space: str = DEFAULT_SPACE,
        stop_rule: str = "fixed",
        calibrate: bool = True,
        anchor_sampling: str = "stratified",
        gradient: str = "analytic",
        chunk_size: int | None = None,
        n_threads: int | None = None,
        threshold_rule: str = "quantile",
        rectify_quantile: float = DEFAULT_RECTIFY_QUANTILE,
        max_fit_rows: int = MAX_FIT_ROWS,
        max_reference_rows: int = MAX_REFERENCE_ROWS,
    ) -> None:
        self.threshold_rule = threshold_rule
        self.rectify_quantile = rectify_quantile
        self.max_fit_rows = max_fit_rows
        self.max_reference_rows = max_reference_rows
        self.kernel = kernel
        self.n_anchors = n_anchors
        self.alpha = alpha
        self.max_epochs = max_epochs
        self.seed = seed
        self.device = device
        self.freeze = freeze
        self.peak = peak
        self.variance_mean = variance_mean
        self.variance_std = variance_std
        self.optimizer = optimizer
        self.lr_positions = lr_positions
        self.lr_peaks = lr_peaks
        self.lr_variances = lr_variances
        self.min_epochs = min_epochs
        self.tol = tol
        self.rectify = rectify
        self.space = space
        self.stop_rule = stop_rule
        self.calibrate = calibrate
        self.anchor_sampling = anchor_sampling
        self.gradient = gradient
        self.chunk_size = chunk_size
        self.n_threads = n_threads

    # ------------------------------------------------------------------ validation
    def _validate_params(self) -> None:
        _check_params(type(self).__name__, self.get_params())

    # ------------------------------------------------------------------ fit / estimate
    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = self._fit_anchors(val_logits, val_labels)
        for w in caught:  # re-issue so that the warning points at the caller's fit(...) line
            warnings.warn(w.message, w.category, stacklevel=3)
        self.fit_result_ = result
        self.anchors_ = result.anchors
        self.positions_ = result.anchors.positions
        self.peaks_ = result.anchors.peaks
        self.variances_ = result.anchors.variances
        self.history_ = result.history
        self.n_epochs_ = result.n_epochs
        self.stop_reason_ = result.stop_reason
        self.train_gap_ = result.train_gap
        self.fit_seconds_ = result.seconds
        self.device_ = _resolve_device(self.device)
        if result.anchors.threshold is not None:
            self.threshold_ = float(result.anchors.threshold)
        elif self.rectify == "kernel":
            self.threshold_ = kernel_alpha_value(self.kernel, self.alpha)
        else:
            self.threshold_ = rectification_threshold(self.kernel, self.alpha, self.peak)

    def _fit_anchors(
        self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]
    ) -> ALSAFit:
        return fit_alsa_anchors(
            val_logits,
            val_labels,
            kernel=self.kernel,
            n_anchors=self.n_anchors,
            peak=self.peak,
            variance_mean=self.variance_mean,
            variance_std=self.variance_std,
            freeze=self.freeze,
            optimizer=self.optimizer,
            lr_positions=self.lr_positions,
            lr_peaks=self.lr_peaks,
            lr_variances=self.lr_variances,
            max_epochs=self.max_epochs,
            min_epochs=self.min_epochs,
            tol=self.tol,
            alpha=self.alpha,
            space=self.space,
            stop_rule=self.stop_rule,
            calibrate=self.calibrate,
            anchor_sampling=self.anchor_sampling,
            gradient=self.gradient,
            chunk_size=self.chunk_size,
            seed=self.seed,
            device=self.device,
            n_threads=self.n_threads,
            rectify=self.rectify,
            threshold_rule=self.threshold_rule,
            rectify_quantile=self.rectify_quantile,
            max_fit_rows=self.max_fit_rows,
            max_reference_rows=self.max_reference_rows,
        )

    def _predict(self, logits: NDArray[np.float64]) -> ALSAPrediction:
        return alsa_predict(
            logits,
            self.anchors_,
            alpha=self.alpha,
            rectify=self.rectify,
            peak=self.peak,
            chunk_size=self.chunk_size,
            device=self.device_,
            n_threads=self.n_threads,
        )

    def _fitted_params(self) -> dict[str, Any]:
        """The fitted ``tau`` of the augmented space, so stored anchors can be re-used."""
        threshold = self.anchors_.threshold
        return {
            "space_tau": float(self.anchors_.tau),
            "bias": float(self.anchors_.bias),
            "rectify_threshold": None if threshold is None else float(threshold),
        }

    accepts_float32 = True  # float32 input is not copied to float64 (issue 11, memory)

    def _reference_size(self) -> int:
        """Rows the calibration offset was fitted on (held-out rows above ``max_fit_rows``)."""
        return int(self.fit_result_.n_reference_rows) or int(self.n_val_)

    def predict_proba_correct(self, logits: Any) -> NDArray[np.float64]:
        """Per-sample probability of a correct prediction after rectification (eq. 8).

        Parameters
        ----------
        logits : array-like of shape (n, c), (n,) or (n, 1)
            Raw logits with the class count seen at ``fit`` (binary positive-class logits for
            the 1-D shapes).

        Returns
        -------
        ndarray of shape (n,), float64
        """
        self._check_is_fitted()
        z = check_logits(logits, "logits", n_classes=self.n_classes_, keep_float32=True)
        return self._predict(z).q

    def _estimate(
        self, target_logits: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64], Mapping[str, Any]]:
        pred = self._predict(target_logits)
        diagnostics = {
            "n_epochs": self.n_epochs_,
            "stop_reason": self.stop_reason_,
            "train_gap": self.train_gap_,
            "rectified_fraction": pred.rectified_fraction,
            "n_rectified": int(pred.rectified.sum()),
            "threshold": pred.threshold,
            "mean_q_unrectified": float(np.mean(pred.q_raw)),
            "n_anchors": self.anchors_.n_anchors,
            "converged": self.stop_reason_ in ("fixed", "converged", "crossed"),
            "space": self.anchors_.space,
            "space_tau": self.anchors_.tau,
            "bias": self.anchors_.bias,
            "fit_seconds": self.fit_seconds_,
            "device": self.device_,
            "threshold_rule": self.threshold_rule,
            "n_fit_rows": self.fit_result_.n_fit_rows,
            "n_reference_rows": self.fit_result_.n_reference_rows,
            "reference": self.fit_result_.reference,
            "reference_rectified_fraction": self.fit_result_.reference_rectified,
        }
        return pred.accuracy, pred.q, diagnostics


def _subclass_init(kernel: Kernel) -> Any:
    """An ``__init__`` identical to :class:`ALSA`'s with the kernel's own defaults in the signature.

    The signature is what :meth:`Estimator.get_params` reads, so ``get_estimator("alsa-e")``
    reports ``kernel="exponential"`` and the exponential variance defaults.
    """
    base_sig = inspect.signature(ALSA.__init__)
    defaults: dict[str, Any] = {"kernel": kernel, **KERNEL_DEFAULTS[kernel]}

    def __init__(self: ALSA, **params: Any) -> None:
        for name, value in defaults.items():
            params.setdefault(name, value)
        ALSA.__init__(self, **params)

    params = [
        p.replace(default=defaults[p.name]) if p.name in defaults else p
        for p in base_sig.parameters.values()
    ]
    setattr(__init__, "__signature__", base_sig.replace(parameters=params))
    __init__.__doc__ = ALSA.__init__.__doc__
    return __init__


@register("alsa-g")
class ALSAG(ALSA):
    """ALSA with the Gaussian-like influence function (eq. 1), registry key ``alsa-g``.

    See :class:`ALSA` for the parameters; ``kernel`` defaults to ``"gaussian"``.
    """

    __init__ = _subclass_init("gaussian")


@register("alsa-e")
class ALSAE(ALSA):
    """ALSA with the exponential influence function (eq. 5), registry key ``alsa-e``.

    See :class:`ALSA` for the parameters; ``kernel`` defaults to ``"exponential"``.
    """

    __init__ = _subclass_init("exponential")
