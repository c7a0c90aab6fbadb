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

Layout: :mod:`.space` (the anchors' spaces), :mod:`.kernels` (distance, influence, cut-off and
the torch kernels), :mod:`.model` (fitted anchors, :func:`alsa_predict`,
:func:`anchors_surface`), :mod:`.fitting` (:func:`fit_alsa_anchors`), :mod:`.ensemble` (the
cross-fitted members), :mod:`.calibration` (reference statistics and the offset ``b``),
:mod:`.declaration` (the hyper-parameters, :data:`ALSA_PARAMS`) and :mod:`.estimator` (the
registered classes).
"""

from __future__ import annotations

from .declaration import (
    ALSA_DEFAULTS,
    ALSA_PARAMS,
    AUTO_ANCHORS_MAX,
    AUTO_ANCHORS_ROWS_PER_ANCHOR,
    DEFAULT_RECTIFY_QUANTILE,
    FREEZE_GROUPS,
    GRADIENTS,
    KERNEL_DEFAULTS,
    KERNELS,
    MAX_FIT_ROWS,
    MAX_REFERENCE_ROWS,
    OPTIMIZERS,
    RECTIFY_MODES,
    SAMPLINGS,
    STOP_RULES,
    THRESHOLD_RULES,
    Kernel,
    RectifyMode,
    check_alsa_params,
    normalize_freeze,
)
from .declaration import (
    _resolve_device as _resolve_device,
)
from .ensemble import CROSS_FIT_FOLDS
from .estimator import ALSA, ALSAE, ALSAG
from .fitting import auto_n_anchors, fit_alsa_anchors
from .kernels import alsa_influence, cosine_distance, kernel_alpha_value, rectification_threshold
from .model import (
    ALSAAnchors,
    ALSAFit,
    ALSAPrediction,
    alsa_accuracy,
    alsa_predict,
    anchors_surface,
)
from .model import (
    _auto_chunk as _auto_chunk,
)
from .model import (
    _torch_threads as _torch_threads,
)
from .space import DEFAULT_SPACE, SPACES, augmented_tau, canonical_logits

__all__ = [
    "ALSA",
    "ALSAE",
    "ALSAG",
    "ALSA_DEFAULTS",
    "ALSA_PARAMS",
    "AUTO_ANCHORS_MAX",
    "AUTO_ANCHORS_ROWS_PER_ANCHOR",
    "CROSS_FIT_FOLDS",
    "DEFAULT_RECTIFY_QUANTILE",
    "DEFAULT_SPACE",
    "FREEZE_GROUPS",
    "GRADIENTS",
    "KERNELS",
    "KERNEL_DEFAULTS",
    "MAX_FIT_ROWS",
    "MAX_REFERENCE_ROWS",
    "OPTIMIZERS",
    "RECTIFY_MODES",
    "SAMPLINGS",
    "SPACES",
    "STOP_RULES",
    "THRESHOLD_RULES",
    "ALSAAnchors",
    "ALSAFit",
    "ALSAPrediction",
    "Kernel",
    "RectifyMode",
    "alsa_accuracy",
    "alsa_influence",
    "alsa_predict",
    "anchors_surface",
    "augmented_tau",
    "auto_n_anchors",
    "canonical_logits",
    "check_alsa_params",
    "cosine_distance",
    "fit_alsa_anchors",
    "kernel_alpha_value",
    "normalize_freeze",
    "rectification_threshold",
]
