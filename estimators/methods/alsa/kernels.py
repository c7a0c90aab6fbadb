"""ALSA's kernels: cosine distance, influence, the rectification cut-off, and the torch kernels.

The public functions (:func:`cosine_distance`, :func:`alsa_influence`,
:func:`kernel_alpha_value`, :func:`rectification_threshold`) validate their inputs and compute
in float64 on small inputs. The rest (chunked forward passes, closed-form gradients, full-batch
training) is internal to :mod:`estimators.methods.alsa` and works on float32 tensors already on the
chosen device:

* ``U`` (n, c): unit-norm rows of the (optionally centred) logits, ``u_i = z_i / ||z_i||``.
* ``A`` (k, c): anchor positions; ``W = A / ||A||`` their unit directions.
* ``p`` (k,): signed peaks; ``v`` (k,): "variances", used only through ``v**2``.

With ``d_ij = 1 - <u_i, w_j>`` (eq. 3), ``g(d) = d**2`` for the Gaussian-like kernel
(eq. 1) and ``g(d) = d`` for the exponential one (eq. 5), ``K_ij = exp(-v_j**2 g(d_ij))``,
``I_i = sum_j p_j K_ij`` (eq. 2) and ``q_i = sigmoid(I_i)`` (eq. 4).

Closed-form gradients of the mean BCE ``L = (1/n) sum_i softplus(I_i) - y_i I_i`` (eq. 9 divided
by n), with ``e_i = (q_i - y_i) / n``::

    dL/dp_j = sum_i e_i K_ij
    dL/dv_j = -2 v_j p_j sum_i e_i K_ij g(d_ij)
    dL/dw_j = p_j v_j**2 sum_i e_i K_ij g'(d_ij) u_i          (g' = 2d or 1)
    dL/da_j = (dL/dw_j - <dL/dw_j, w_j> w_j) / ||a_j||

The sums over i are matrix products of (b, k) kernel blocks with (b,) or (b, c) vectors, so one
epoch costs two (b, c) x (c, k) products and about eight elementwise passes per row block, in
reused buffers, and never builds an (n, k, c) tensor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import NDArray
from scipy.special import erfinv

from ...core._validation import check_in_choices, check_logits, check_number
from ...maths.exact import exact_sqrt
from .declaration import KERNELS, Kernel
from .space import SPACES, canonical_logits

if TYPE_CHECKING:  # torch is imported lazily so that ``import estimators`` stays fast
    import torch

#: Lower clip of the kernel exponent ``-v^2 g(d)`` (exp(-80) = 1.8e-35 is still a normal float).
EXP_FLOOR = -80.0
#: Kernel values at or below this are set to exactly 0 (an influence below 6e-20 on a logit).
KERNEL_FLOOR = 1e-20

#: A sign change of the gap stops training (``stop_rule="crossing"``) only where one of the two
#: passes around it lands within this distance of acc_S (0.1 percentage point).
CROSSING_TOL = 1e-3

#: Norm below which a logit vector or an anchor position counts as zero (direction undefined).
NORM_EPS = 1e-12


def unit_rows(x: torch.Tensor, center: bool) -> torch.Tensor:
    """Rows of ``x`` (optionally centred by their mean) divided by their norm (zero rows stay 0)."""
    if center:
        x = x - x.mean(dim=1, keepdim=True)
    return cast("torch.Tensor", x / x.norm(dim=1, keepdim=True).clamp_min(NORM_EPS))


def block_buffers(
    rows: int, n_anchors: int, kernel: Kernel, like: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Reusable (rows, k) work buffers for :func:`kernel_block` (two or three, by kernel).

    Reusing them instead of allocating fresh 2 MiB tensors for every block measured 2.5x faster
    per epoch on CPU (fresh buffers are new pages to fault in).
    """
    count = 3 if kernel == "gaussian" else 2
    return tuple(like.new_empty((rows, n_anchors)) for _ in range(count))


def kernel_block(
    U: torch.Tensor,
    W: torch.Tensor,
    v2: torch.Tensor,
    kernel: Kernel,
    out: tuple[torch.Tensor, ...] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Distances ``D``, ``G = g(D)`` and kernel values ``K = exp(-v^2 G)`` of one row block.

    ``G`` is ``D`` itself (same tensor) for the exponential kernel. ``out`` are buffers from
    :func:`block_buffers` with at least ``U.shape[0]`` rows; the results are views into them.
    ``D = 1 - <u, w>`` is not clipped (rounding can leave it 1e-7 outside [0, 2]); the kernel
    exponent is clipped to ``[EXP_FLOOR, 0]`` instead, so ``K`` lies in ``{0} U [1e-20, 1]``.
    """
    import torch

    b = U.shape[0]
    if out is None:
        out = block_buffers(b, W.shape[0], kernel, U)
    ones = U.new_ones((1, W.shape[0]))
    D = torch.addmm(ones, U, W.t(), beta=1.0, alpha=-1.0, out=out[0][:b])
    if kernel == "gaussian":
        G = torch.mul(D, D, out=out[1][:b])
        K = torch.mul(G, -v2, out=out[2][:b])
    else:
        G = D
        K = torch.mul(D, -v2, out=out[1][:b])
    # Two guards against subnormal floats, which x86 CPUs process 10-100x slower: the exponent
    # is clipped so exp() never underflows (torch's vectorised exp slows down there), and kernel
    # values below KERNEL_FLOOR become exact zeros, so that their products with the tiny
    # per-row residuals of the gradient (e_i ~ 1e-5 and smaller) are not subnormal either.
    K.clamp_(EXP_FLOOR, 0.0)
    K.exp_()
    torch.nn.functional.threshold_(K, KERNEL_FLOOR, 0.0)  # type: ignore[attr-defined]  # missing from torch's type hints
    return D, G, K


@dataclass
class TrainOutcome:
    """What :func:`train_anchors` returns (tensors are updated in place as well)."""

    n_epochs: int
    stop_reason: str
    train_gap: float
    mean_q: float
    loss: float
    history_loss: list[float] = field(default_factory=list)
    history_mean_q: list[float] = field(default_factory=list)


def _epoch_analytic(
    U: torch.Tensor,
    y: torch.Tensor,
    A: torch.Tensor,
    p: torch.Tensor,
    v: torch.Tensor,
    kernel: Kernel,
    chunk: int,
    need: tuple[bool, bool, bool],
) -> tuple[float, float, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """One full-batch forward pass with closed-form gradients, accumulated over row chunks.

    Returns ``(sum_q, sum_loss, grad_A, grad_p, grad_v)`` with sums in float64 and ``None`` for
    groups not in ``need = (positions, peaks, variances)``.
    """
    import torch

    need_a, need_p, need_v = need
    n = U.shape[0]
    with torch.no_grad():
        an = A.norm(dim=1, keepdim=True).clamp_min(NORM_EPS)
        W = A / an
        v2 = v * v
        sum_q = torch.zeros((), dtype=torch.float64, device=U.device)
        sum_loss = torch.zeros((), dtype=torch.float64, device=U.device)
        gp = torch.zeros_like(p) if need_p else None
        gvs = torch.zeros_like(v) if need_v else None
        # (c, k) accumulator: (b, c)^T @ (b, k) is 5x faster on CPU than (b, k)^T @ (b, c)
        gWt = A.new_zeros((A.shape[1], A.shape[0])) if need_a else None
        buffers = block_buffers(min(chunk, n), A.shape[0], kernel, U)
        for s in range(0, n, chunk):
            Uc = U[s : s + chunk]
            yc = y[s : s + chunk]
            D, G, K = kernel_block(Uc, W, v2, kernel, buffers)
            I = torch.mv(K, p)
            q = torch.sigmoid(I)
            sum_q += q.sum(dtype=torch.float64)
            sum_loss += (torch.nn.functional.softplus(I) - yc * I).sum(dtype=torch.float64)
            e = (q - yc) / n
            if gp is not None:
                gp += e @ K
            if kernel == "gaussian":
                if gvs is not None:
                    G.mul_(K)  # K * d^2
                    gvs += e @ G
                if gWt is not None:
                    D.mul_(K)  # K * d
                    gWt += torch.mm((Uc * e[:, None]).t(), D)
            else:
                if gWt is not None:
                    gWt += torch.mm((Uc * e[:, None]).t(), K)
                if gvs is not None:
                    D.mul_(K)  # K * d (G is D)
                    gvs += e @ D
        grad_p = gp
        grad_v = None if gvs is None else -2.0 * v * p * gvs
        grad_A = None
        if gWt is not None:
            coef = (2.0 if kernel == "gaussian" else 1.0) * p * v2
            gW = gWt.t() * coef[:, None]
            grad_A = (gW - (gW * W).sum(dim=1, keepdim=True) * W) / an
    return float(sum_q), float(sum_loss), grad_A, grad_p, grad_v


def loss_autograd(
    U: torch.Tensor,
    y: torch.Tensor,
    A: torch.Tensor,
    p: torch.Tensor,
    v: torch.Tensor,
    kernel: Kernel,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Differentiable ``(sum of BCE terms, q)`` of one row block (reference for the gradients)."""
    import torch

    W = A / A.norm(dim=1, keepdim=True).clamp_min(NORM_EPS)
    D = 1.0 - U @ W.t()
    G = D * D if kernel == "gaussian" else D
    # the same guards as kernel_block, so both gradient modes see the same function
    K = torch.exp((-(v * v) * G).clamp(EXP_FLOOR, 0.0))
    K = torch.nn.functional.threshold(K, KERNEL_FLOOR, 0.0)
    I = K @ p
    return (torch.nn.functional.softplus(I) - y * I).sum(), torch.sigmoid(I)


def _epoch_autograd(
    U: torch.Tensor,
    y: torch.Tensor,
    A: torch.Tensor,
    p: torch.Tensor,
    v: torch.Tensor,
    kernel: Kernel,
    chunk: int,
    need: tuple[bool, bool, bool],
) -> tuple[float, float, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """Same contract as :func:`_epoch_analytic`, with gradients from torch autograd."""
    import torch

    n = U.shape[0]
    leaves = [t.detach().requires_grad_(flag) for t, flag in zip((A, p, v), need)]
    sum_q = 0.0
    sum_loss = 0.0
    for s in range(0, n, chunk):
        loss_c, q = loss_autograd(  # type: ignore[call-arg]  # *leaves is (A, p, v)
            U[s : s + chunk], y[s : s + chunk], *leaves, kernel  # type: ignore[arg-type]
        )
        if any(need):
            (loss_c / n).backward()  # type: ignore[no-untyped-call]
        sum_q += float(q.detach().sum(dtype=torch.float64))
        sum_loss += float(loss_c.detach())
    grads = [leaf.grad if flag else None for leaf, flag in zip(leaves, need)]
    return sum_q, sum_loss, grads[0], grads[1], grads[2]


class _FullBatchOptimizer:
    """Adam, RMSprop or SGD with momentum, updating tensors in place from given gradients.

    The update rules are PyTorch's (``torch.optim.Adam`` with betas 0.9/0.999 and eps 1e-8,
    ``RMSprop`` with alpha 0.99 and eps 1e-8, ``SGD`` with momentum 0.9 and no dampening).
    They are written out because constructing a ``torch.optim`` optimiser imports
    ``torch._dynamo``, which costs about two seconds per process. Their square roots are the
    correctly rounded ones (:func:`~estimators.maths.exact.exact_sqrt`): ``torch.sqrt`` goes
    through MKL's vector maths, whose last bits depend on the CPU's vendor and model.
    """

    def __init__(self, kind: str, params: list[tuple[torch.Tensor, float]]) -> None:
        import torch

        self.kind = kind
        self.params = [t for t, _ in params]
        self.lrs = [float(lr) for _, lr in params]
        self.step_count = 0
        self.state1 = [torch.zeros_like(t) for t in self.params]
        self.state2 = [torch.zeros_like(t) for t in self.params] if kind == "adam" else []

    def step(self, grads: list[torch.Tensor]) -> None:
        """Apply one update; ``grads`` follows the order of the parameters given at creation."""
        self.step_count += 1
        t = self.step_count
        for i, (param, grad, lr) in enumerate(zip(self.params, grads, self.lrs)):
            if self.kind == "adam":
                m, v2 = self.state1[i], self.state2[i]
                m.mul_(0.9).add_(grad, alpha=0.1)
                v2.mul_(0.999).addcmul_(grad, grad, value=0.001)
                denom = (exact_sqrt(v2) / math.sqrt(1.0 - 0.999**t)).add_(1e-8)
                param.addcdiv_(m, denom, value=-lr / (1.0 - 0.9**t))
            elif self.kind == "rmsprop":
                sq = self.state1[i]
                sq.mul_(0.99).addcmul_(grad, grad, value=0.01)
                param.addcdiv_(grad, exact_sqrt(sq).add_(1e-8), value=-lr)
            else:
                buf = self.state1[i]
                if t == 1:
                    buf.copy_(grad)
                else:
                    buf.mul_(0.9).add_(grad)
                param.add_(buf, alpha=-lr)


def train_anchors(
    U: torch.Tensor,
    y: torch.Tensor,
    A: torch.Tensor,
    p: torch.Tensor,
    v: torch.Tensor,
    *,
    kernel: Kernel,
    freeze: frozenset[str],
    lrs: tuple[float, float, float],
    optimizer: str,
    max_epochs: int,
    min_epochs: int,
    tol: float,
    chunk: int,
    gradient: str,
    stop_rule: str = "crossing",
) -> TrainOutcome:
    """Full-batch training of ``(A, p, v)`` in place until the stopping rule or ``max_epochs``.

    The rule is checked after every forward pass, before the update it would trigger, so the
    returned gap is the exact gap of the returned parameters; ``n_epochs`` counts updates.
    With the signed gap ``g_t = mean q - acc`` after ``t`` updates: ``stop_rule="paper"`` stops
    when ``|g_t| < tol`` (eq. 10); ``"crossing"`` also stops when ``g_t * g_{t-1} < 0`` (the gap
    changed sign, so eq. 10 held exactly between the two parameter sets) and
    ``min(|g_t|, |g_{t-1}|) < CROSSING_TOL``, keeping whichever of the two has the smaller
    ``|g|`` (``stop_reason="crossed"``; the history then ends at it); ``"fixed"`` ignores the gap
    and stops after exactly ``min_epochs`` updates (``stop_reason="fixed"``; eq. 10 is then met
    by the calibration offset fitted afterwards).
    """
    import torch

    n = U.shape[0]
    acc = float(y.sum(dtype=torch.float64)) / n
    need = ("positions" not in freeze, "peaks" not in freeze, "variances" not in freeze)
    trained = [(t, lr) for t, flag, lr in zip((A, p, v), need, lrs) if flag]
    opt = _FullBatchOptimizer(optimizer, trained) if trained else None
    epoch_fn = _epoch_analytic if gradient == "analytic" else _epoch_autograd
    crossing = stop_rule == "crossing"
    history_loss: list[float] = []
    history_q: list[float] = []
    stop_reason = "max_epochs"
    epoch = 0
    mean_q = loss = gap = math.nan
    prev_signed = math.nan
    saved: list[torch.Tensor] = []
    while True:
        sum_q, sum_loss, gA, gp, gv = epoch_fn(U, y, A, p, v, kernel, chunk, need)
        mean_q = sum_q / n
        loss = sum_loss / n
        signed = mean_q - acc
        gap = abs(signed)
        history_loss.append(loss)
        history_q.append(mean_q)
        if stop_rule == "fixed" and epoch >= min_epochs:
            stop_reason = "fixed"
            break
        if epoch >= min_epochs and gap < tol:
            stop_reason = "converged"
            break
        if (
            crossing
            and epoch >= max(1, min_epochs)
            and signed * prev_signed < 0.0
            and min(gap, abs(prev_signed)) < CROSSING_TOL
        ):
            stop_reason = "crossed"
            if abs(prev_signed) < gap:  # the parameters before the last update are closer
                with torch.no_grad():
                    for t, old in zip((A, p, v), saved):
                        t.copy_(old)
                epoch -= 1
                gap = abs(prev_signed)
                history_loss.pop()
                history_q.pop()
                mean_q = history_q[-1]
                loss = history_loss[-1]
            break
        if epoch >= max_epochs or opt is None:
            stop_reason = "max_epochs" if opt is not None else "all_frozen"
            break
        with torch.no_grad():
            if crossing:
                if saved:
                    for t, old in zip((A, p, v), saved):
                        old.copy_(t)
                else:
                    saved = [t.detach().clone() for t in (A, p, v)]
            opt.step([g for g in (gA, gp, gv) if g is not None])
        prev_signed = signed
        epoch += 1
    return TrainOutcome(
        n_epochs=epoch,
        stop_reason=stop_reason,
        train_gap=gap,
        mean_q=mean_q,
        loss=loss,
        history_loss=history_loss,
        history_mean_q=history_q,
    )


def predict_block(
    U: torch.Tensor,
    W: torch.Tensor,
    p: torch.Tensor,
    v2: torch.Tensor,
    kernel: Kernel,
    rectify: str,
    threshold: float,
    out: tuple[torch.Tensor, ...] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Total influence, q = sigmoid(I) and the rectification mask of one row block."""
    import torch

    _, _, K = kernel_block(U, W, v2, kernel, out)
    I = torch.mv(K, p)
    q = torch.sigmoid(I)
    if rectify == "per-anchor":
        K.mul_(p.abs())
        mask = K.amax(dim=1) < threshold
    elif rectify == "kernel":
        mask = K.amax(dim=1) < threshold
    elif rectify == "total":
        mask = I.abs() < threshold
    else:
        mask = torch.zeros_like(q, dtype=torch.bool)
    return I, q, mask


# ============================================================================ float64 reference functions
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
    a = check_logits(positions, "positions", n_classes=z.shape[1], allow_binary=False,
                     reject_probabilities=False)
    if space == "centered":
        a = a - a.mean(axis=1, keepdims=True)
    zn = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), NORM_EPS)
    an = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), NORM_EPS)
    return cast("NDArray[np.float64]", np.clip(1.0 - zn @ an.T, 0.0, 2.0))


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
