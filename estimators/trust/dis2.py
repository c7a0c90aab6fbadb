r"""Dis²: a (almost) distribution-free lower bound on the target accuracy, from logits alone.

Rosenfeld & Garg, "(Almost) Provable Error Bounds Under Distribution Shift via Disagreement
Discrepancy", NeurIPS 2023 (code: ``github.com/erosenfeld/disagree_discrep``, whose
``src/lib/critic.py`` and ``src/lib/validation.py`` this follows, strategy ``logits``).

For the classifier :math:`h` (the argmax of the logits) and any critic :math:`h'`,

.. math::

    \epsilon_T(h) \le \epsilon_S(h) + \Delta(h, h'),\qquad
    \Delta(h, h') = \Pr_T[h' \ne h] - \Pr_S[h' \ne h]

holds for the critic that labels the target as the truth does; the paper's assumption is that
the best *linear* critic on the logits disagrees with :math:`h` on the target at least as much,
relative to the source, as the truth does. So

.. math::

    \text{accuracy}_T \ge \hat a_S - \max_{h'} \hat\Delta(h, h') - \varepsilon,\qquad
    \varepsilon = \sqrt{\frac{(n_S + 4 n_T)\log(1/\delta)}{2\, n_S n_T}}

with :math:`\hat a_S` the classifier's accuracy on a held-out half of the labelled validation
set, :math:`\hat\Delta` measured on held-out halves of validation and target, and
:math:`n_S, n_T` the sizes of those halves. The critics are ``repeats`` linear maps
:math:`\mathbb R^c \to \mathbb R^c` of the logits, trained jointly by AdamW (lr 3e-3, weight
decay 5e-4, batches of 256) to agree with :math:`h` on the validation half (cross-entropy on
:math:`h`'s labels) and disagree on the target half (the paper's ``disagreement`` loss
:math:`\log(1 + e^{m})`, :math:`m` the mean logit margin of :math:`h`'s class over the others);
the bound takes the largest held-out discrepancy over critics and epochs.

It needs the target logits only (never target labels): the target half the critics train on
and the half they are scored on are both unlabelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core._validation import check_logits, check_val_inputs

__all__ = ["Dis2Bound", "dis2_lower_bound"]

#: The reference implementation's defaults (``src/eval/dis2.py``).
REPEATS = 30
EPOCHS = 50
BATCH = 256
DELTA = 0.01


@dataclass(frozen=True)
class Dis2Bound:
    """The Dis² bound of one target set.

    Attributes
    ----------
    lower : float
        :math:`\\max(\\hat a_S - \\hat\\Delta - \\varepsilon, 0)`, the lower bound on the target
        accuracy.
    val_accuracy : float
        :math:`\\hat a_S` on the held-out validation half.
    discrepancy : float
        :math:`\\max \\hat\\Delta` over the critics and epochs.
    epsilon : float
        The finite-sample term :math:`\\varepsilon` at ``delta``.
    """

    lower: float
    val_accuracy: float
    discrepancy: float
    epsilon: float


def _halves(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(n)
    k = n // 2
    return order[: n - k], order[n - k:]


def dis2_lower_bound(
    val_logits: Any,
    val_labels: Any,
    target_logits: Any,
    *,
    repeats: int = REPEATS,
    epochs: int = EPOCHS,
    delta: float = DELTA,
    seed: int = 0,
) -> Dis2Bound:
    r"""The Dis² lower bound on the accuracy of ``argmax(target_logits)``.

    Parameters
    ----------
    val_logits : array-like of shape (n, c)
        Labelled validation logits (the source).
    val_labels : array-like of shape (n,)
    target_logits : array-like of shape (m, c)
        Unlabelled target logits.
    repeats : int, default 30
        Critics trained at once (the bound takes the best).
    epochs : int, default 50
    delta : float in (0, 1), default 0.01
        The bound's failure probability for the finite-sample term.
    seed : int, default 0
        Seeds the halves, the batches and the critics' initialisation.

    Returns
    -------
    Dis2Bound

    Raises
    ------
    ValueError
        If an argument is out of range, or either set has fewer than 4 rows (two halves of
        at least 2).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 2000)
    >>> x = rng.normal(size=(2000, 3)) + 3.0 * np.eye(3)[y]
    >>> b = dis2_lower_bound(x[:1000], y[:1000], x[1000:], repeats=4, epochs=5)
    >>> truth = float(np.mean(x[1000:].argmax(1) == y[1000:]))
    >>> 0.0 <= b.lower <= truth
    True
    """
    import torch
    import torch.nn.functional as F

    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"The 'repeats' argument of dis2_lower_bound must be an integer >= 1; "
                         f"got {repeats!r}.")
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"The 'epochs' argument of dis2_lower_bound must be an integer >= 1; "
                         f"got {epochs!r}.")
    if not (isinstance(delta, (int, float)) and 0.0 < float(delta) < 1.0):
        raise ValueError(f"The 'delta' argument of dis2_lower_bound must be a number in (0, 1); "
                         f"got {delta!r}.")
    src, labels = check_val_inputs(val_logits, val_labels)
    tgt = check_logits(target_logits, "target_logits", n_classes=int(src.shape[1]))
    if src.shape[0] < 4 or tgt.shape[0] < 4:
        raise ValueError(
            f"dis2_lower_bound needs at least 4 validation and 4 target rows (two halves each); "
            f"got {src.shape[0]} and {tgt.shape[0]}."
        )
    rng = np.random.default_rng(seed)
    s_fit, s_val = _halves(src.shape[0], rng)
    t_fit, t_val = _halves(tgt.shape[0], rng)
    c = int(src.shape[1])
    gen = torch.Generator().manual_seed(int(seed))
    xs = torch.as_tensor(src, dtype=torch.float32)
    xt = torch.as_tensor(tgt, dtype=torch.float32)
    hs, ht = xs.argmax(1), xt.argmax(1)
    val_accuracy = float(np.mean(src[s_val].argmax(1) == labels[s_val]))
    stdv = 1.0 / math.sqrt(c)
    weight = (torch.rand((repeats, c, c), generator=gen) * 2 - 1) * stdv
    bias = (torch.rand((repeats, 1, c), generator=gen) * 2 - 1) * stdv
    weight.requires_grad_(True)
    bias.requires_grad_(True)
    # fused: its square root is the correctly rounded one, the same on every CPU (the default
    # step's torch.sqrt is MKL's vector maths, whose last bits depend on the CPU; measured in
    # tasks/models/optim.py)
    opt = torch.optim.AdamW([weight, bias], lr=3e-3, weight_decay=5e-4, fused=True)
    s_fit_t, t_fit_t = torch.as_tensor(s_fit), torch.as_tensor(t_fit)
    xs_val, hs_val = xs[torch.as_tensor(s_val)], hs[torch.as_tensor(s_val)]
    xt_val, ht_val = xt[torch.as_tensor(t_val)], ht[torch.as_tensor(t_val)]
    best = -math.inf
    steps = min(math.ceil(len(s_fit) / BATCH), math.ceil(len(t_fit) / BATCH))

    def margin_loss(out: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        agree = out.gather(2, pred.expand(out.shape[0], -1).unsqueeze(2))
        margin = (agree - out).sum(2) / max(c - 1, 1)
        return F.softplus(margin)

    for _ in range(epochs):
        s_order = s_fit_t[torch.randperm(len(s_fit), generator=gen)]
        t_order = t_fit_t[torch.randperm(len(t_fit), generator=gen)]
        for b in range(steps):
            si = s_order[b * BATCH:(b + 1) * BATCH]
            ti = t_order[b * BATCH:(b + 1) * BATCH]
            out_s = torch.einsum("nd,rdk->rnk", xs[si], weight) + bias
            out_t = torch.einsum("nd,rdk->rnk", xt[ti], weight) + bias
            src_loss = F.cross_entropy(out_s.reshape(-1, c), hs[si].repeat(repeats))
            trg_loss = margin_loss(out_t, ht[ti].unsqueeze(0)).mean()
            loss = repeats * (src_loss + trg_loss) / 2
            opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            opt.step()
        with torch.no_grad():
            agree_s = ((torch.einsum("nd,rdk->rnk", xs_val, weight) + bias).argmax(2)
                       == hs_val).double().mean(1)
            agree_t = ((torch.einsum("nd,rdk->rnk", xt_val, weight) + bias).argmax(2)
                       == ht_val).double().mean(1)
            best = max(best, float((agree_s - agree_t).max()))
    n_s, n_t = len(s_val), len(t_val)
    epsilon = math.sqrt((n_s + 4 * n_t) * math.log(1.0 / float(delta)) / (2.0 * n_t * n_s))
    return Dis2Bound(lower=max(val_accuracy - best - epsilon, 0.0), val_accuracy=val_accuracy,
                     discrepancy=best, epsilon=epsilon)
