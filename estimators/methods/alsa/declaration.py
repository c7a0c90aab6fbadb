"""ALSA's hyper-parameters, declared once (:data:`ALSA_PARAMS`), and the constants they name.

The estimator classes (:mod:`.estimator`), :func:`~estimators.methods.alsa.fit_alsa_anchors`,
:func:`~estimators.methods.alsa.alsa_predict` and :func:`~estimators.methods.alsa.anchors_surface` all read
their defaults and checks from here; ``docs/ESTIMATORS.md`` renders the table from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from ...core.params import Param, validate_params
from .space import DEFAULT_SPACE, SPACES

Kernel = Literal["gaussian", "exponential"]
RectifyMode = Literal["per-anchor", "total", "kernel", "none"]

#: The parameter groups that ``freeze`` may name (the paper's ablation "fix a / p / v / p&v").
FREEZE_GROUPS: tuple[str, ...] = ("positions", "peaks", "variances")
KERNELS: tuple[str, ...] = ("gaussian", "exponential")
RECTIFY_MODES: tuple[str, ...] = ("per-anchor", "total", "kernel", "none")
OPTIMIZERS: tuple[str, ...] = ("adam", "rmsprop", "sgd")
GRADIENTS: tuple[str, ...] = ("analytic", "autograd")
SAMPLINGS: tuple[str, ...] = ("uniform", "stratified")
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



def _paper_cut_off(v: Mapping[str, Any]) -> bool:
    return bool(v["threshold_rule"] == "paper" and v["rectify"] != "none")


def _alpha_acts(v: Mapping[str, Any], n_val: int) -> bool:
    return _paper_cut_off(v) or v["variance_mean"] == "auto"


def _unfrozen(group: str) -> Callable[[Mapping[str, Any], int], bool]:
    def active(v: Mapping[str, Any], n_val: int) -> bool:
        try:
            return group not in normalize_freeze(v["freeze"])
        except ValueError:
            return True
    return active


def _n_fit(v: Mapping[str, Any], n_val: int) -> int:
    return min(int(v["max_fit_rows"]), n_val // 2) if n_val > int(v["max_fit_rows"]) else n_val


def _check_freeze(value: Any, owner: str) -> None:
    normalize_freeze(value, owner)


def _check_device(value: Any, owner: str) -> None:
    _resolve_device(value, owner)


#: Every hyper-parameter of :class:`~estimators.methods.alsa.ALSA`, in ``__init__`` order. ``alsa-g`` and
#: ``alsa-e`` replace the defaults of ``kernel``, ``variance_mean`` and ``variance_std``
#: (:data:`KERNEL_DEFAULTS`). :func:`~estimators.methods.alsa.fit_alsa_anchors` documents each at length.
ALSA_PARAMS: tuple[Param, ...] = (
    Param("kernel", "choice", "gaussian", "Influence function: Gaussian-like (eq. 1, ALSA-G) "
          "or exponential (eq. 5, ALSA-E).", choices=KERNELS),
    Param("n_anchors", "int", "auto", "Anchors k (per member of the cross-fitted ensemble); "
          '"auto" is min(300, n // 4); more than n rows is capped with a warning.',
          low=1, special=("auto",)),
    Param("alpha", "float", 0.95, "Confidence interval of the paper's rectification cut-off "
          "(App. E).", low=0.0, high=1.0, low_open=True, high_open=True,
          acts='threshold_rule="paper" (rectify other than "none") or variance_mean="auto"',
          active=_alpha_acts,
          instead='threshold_rule="quantile" sets the cut-off from rectify_quantile'),
    Param("max_epochs", "int", 500, "Cap on full-batch updates (reaching it warns).", low=0,
          acts='stop_rule="paper" or "crossing", or max_epochs < min_epochs',
          active=lambda v, n: v["stop_rule"] != "fixed" or int(v["max_epochs"]) < int(
              v["min_epochs"]),
          instead='stop_rule="fixed" performs exactly min_epochs updates'),
    Param("seed", "int", 0, "Seeds anchor sampling, variance initialisation and the folds.",
          low=0),
    Param("device", "any", "auto", 'Torch device: "auto" (CUDA when available), "cpu", "cuda" '
          'or "cuda:<i>".', check=_check_device, accepts='`"auto"` or a torch device string',
          affects="speed"),
    Param("freeze", "any", (), "Groups kept at their initial values (the paper's ablation).",
          check=_check_freeze,
          accepts='str or sequence of `"positions"`, `"peaks"`, `"variances"`'),
    Param("peak", "float", 6.0, "Initial peak magnitude P and the constant of the paper's "
          "cut-off.", low=0.0, low_open=True),
    Param("variance_mean", "float", None, "Mean of the variance initialisation; None: the "
          'kernel\'s default (10 G, 5 E); "auto": from the anchors\' spacing.',
          low=0.0, low_open=True, special=("auto", None)),
    Param("variance_std", "float", None, "Std of the variance initialisation; None: the "
          "kernel's default (1 G, 0.5 E).", low=0.0, special=(None,)),
    Param("optimizer", "choice", "adam", "Full-batch optimiser.", choices=OPTIMIZERS),
    Param("lr_positions", "float", 0.01, "Learning rate of the positions (in units of the "
          "median validation logit norm).", low=0.0, low_open=True,
          acts='freeze without "positions"', active=_unfrozen("positions"),
          instead="the positions are frozen"),
    Param("lr_peaks", "float", 0.1, "Learning rate of the peaks.", low=0.0, low_open=True,
          acts='freeze without "peaks"', active=_unfrozen("peaks"),
          instead="the peaks are frozen"),
    Param("lr_variances", "float", 0.1, "Learning rate of the variances.", low=0.0,
          low_open=True, acts='freeze without "variances"', active=_unfrozen("variances"),
          instead="the variances are frozen"),
    Param("min_epochs", "int", 100, 'Updates performed (stop_rule="fixed"), or before the '
          "stopping rule may fire.", low=0),
    Param("tol", "float", 1e-5, "The paper's epsilon in eq. (10).", low=0.0, low_open=True,
          acts='stop_rule="paper" or "crossing"', active=lambda v, n: v["stop_rule"] != "fixed",
          instead='stop_rule="fixed" performs exactly min_epochs updates'),
    Param("rectify", "choice", "per-anchor", "Rectification test: every anchor's |p_j K_j| "
          "(App. E), |I| (eq. 8 literally), every K_j, or none.", choices=RECTIFY_MODES),
    Param("space", "choice", DEFAULT_SPACE, "Space of the anchors (`canonical_logits`); "
          '"raw" is the paper\'s.', choices=SPACES),
    Param("stop_rule", "choice", "fixed", "Exactly min_epochs updates, eq. (10) alone, or "
          "eq. (10) or a sign change of the gap.", choices=STOP_RULES),
    Param("calibrate", "bool", True, "Fit the offset b of q = sigmoid(I + b) so that eq. (10) "
          "holds exactly (False: the paper's b = 0)."),
    Param("anchor_sampling", "choice", "stratified", "Initial anchor rows: proportional to the "
          "(predicted class, correct) cells, or uniform.", choices=SAMPLINGS),
    Param("gradient", "choice", "analytic", "Closed-form gradients or torch autograd (the same "
          "maths; the closed form is 4-11x faster).", choices=GRADIENTS, affects="speed"),
    Param("chunk_size", "int", None, "Rows per block; None: about 2**19 (CPU) or 2**24 (CUDA) "
          "rows x anchors elements.", low=1, special=(None,), affects="speed"),
    Param("n_threads", "int", None, "Torch intra-op threads during fit and estimate (restored "
          "afterwards); None: chosen for the work size and the idle cores, at most torch's "
          "setting (`estimators.core.threads`).", low=1, special=(None,), affects="speed"),
    Param("threshold_rule", "choice", "quantile", "Rectification cut-off: a quantile over "
          "held-out in-distribution rows (size invariant), or the paper's eq. (23).",
          choices=THRESHOLD_RULES),
    Param("rectify_quantile", "float", DEFAULT_RECTIFY_QUANTILE, "In-distribution fraction "
          "rectified.", low=0.0, high=1.0, high_open=True,
          acts='threshold_rule="quantile" (rectify other than "none")',
          active=lambda v, n: v["threshold_rule"] == "quantile" and v["rectify"] != "none",
          instead='the cut-off is eq. (23) of threshold_rule="paper" (alpha and peak), or '
                  'rectify="none" rectifies nothing'),
    Param("max_fit_rows", "int", MAX_FIT_ROWS, "Above this many validation rows, train on a "
          "random min(max_fit_rows, n // 2) of them.", low=2,
          acts="more validation rows than the smaller of max_fit_rows and 10,000 (the default)",
          active=lambda v, n: n > min(int(v["max_fit_rows"]), MAX_FIT_ROWS),
          instead="every validation row is a training row either way"),
    Param("max_reference_rows", "int", MAX_REFERENCE_ROWS, "At most this many of the remaining "
          "rows set the cut-off and the offset.", low=2,
          acts="more held-out rows (validation rows not trained on) than the smaller of "
               "max_reference_rows and 100,000 (the default)",
          active=lambda v, n: n > int(v["max_fit_rows"]) and n - _n_fit(v, n) > min(
              int(v["max_reference_rows"]), MAX_REFERENCE_ROWS),
          instead="every held-out row is a reference row either way"),
)

#: Each parameter's default, by name (the shared class :class:`~estimators.methods.alsa.ALSA`'s).
ALSA_DEFAULTS: Mapping[str, Any] = {p.name: p.default for p in ALSA_PARAMS}


def check_alsa_params(owner: str, params: Mapping[str, Any]) -> None:
    """Validate whichever ALSA hyper-parameters ``params`` holds; messages name the parameter."""
    validate_params(ALSA_PARAMS, params, owner)
