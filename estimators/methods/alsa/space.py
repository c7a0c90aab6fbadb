r"""The spaces ALSA's anchors live in: :func:`canonical_logits` and the ``tau`` of ``"augmented"``."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from ...core._validation import check_in_choices

#: Spaces the anchors live in (:func:`canonical_logits`). ``"raw"`` is the paper's.
SPACES: tuple[str, ...] = ("augmented", "centered", "logprob", "raw")
#: Default space, chosen by measurement (``benchmarks/tune_alsa.py``; ``docs/ALSA.md``).
DEFAULT_SPACE = "augmented"


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
        return cast("NDArray[np.float64]", zm - np.log(np.exp(zm).sum(axis=1, keepdims=True)))
    zc = z - z.mean(axis=1, keepdims=True)
    if space == "centered":
        return cast("NDArray[np.float64]", zc)
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
