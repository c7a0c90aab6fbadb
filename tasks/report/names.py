"""Method and shift-family names in the report: display order, ablation variants, file keys.

Every table, figure and list of the report shows methods and shift families in one order:

* **methods**: :func:`method_order`, derived from the registries that own the names
  (:func:`estimators.available_estimators`, :data:`tasks.methods.MODEL_AWARE_METHODS`) by a
  rule: the estimators that return an accuracy on their own in registry order (GDE among
  them), then the model-aware methods that do (not ProjNorm, a score), then ALSA's
  (``alsa-*``, alphabetically), the proposed method last as in the paper's tables. Score
  methods (mapped in a section of their own) and opt-in methods get no rank; they and unknown
  names follow alphabetically. A variant ``alsa-g[alpha=0.5]`` takes the
  rank of its base name.
* **shift families**: :data:`FAMILY_DISPLAY_ORDER`, the paper's order (in-distribution, then the
  natural shift, then the constructed ones), over the families of
  :data:`tasks.data.shifts.SHIFT_FAMILIES` (a test checks that both name the same set; a family
  the registry gains before this tuple does follows in registry order). Unknown families follow
  alphabetically, the pooled ``all`` comes last.

The registries are read on first use (not on import), so ``import tasks.report`` stays free of
torch. ``METHOD_ORDER`` and ``FAMILY_ORDER`` are the resulting tuples.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any, Final

__all__ = [
    "ALL_FAMILIES",
    "FAMILY_DISPLAY_ORDER",
    "TEMPORAL_FAMILY",
    "artifact_key",
    "family_order",
    "family_rank",
    "is_variant",
    "method_order",
    "method_rank",
    "methods_in_order",
    "parse_variant",
]

#: The shift family whose splits are test years (graph suites).
TEMPORAL_FAMILY: Final[str] = "temporal"
#: Name of the pseudo shift family that pools every target split of a dataset.
ALL_FAMILIES: Final[str] = "all"
#: How the report lists the shift families of :data:`tasks.data.shifts.SHIFT_FAMILIES`.
FAMILY_DISPLAY_ORDER: Final[tuple[str, ...]] = (
    "clean", "natural", "synthetic", "covariate", "label_shift", "domain", "subpopulation",
    "temporal", "structural",
)
_KEY_RE: Final = re.compile(r"[^a-z0-9]+")
_VARIANT_RE: Final = re.compile(r"^(?P<base>[^\[]+)\[(?P<spec>[^\]]*)\]$")
#: Prefix of the proposed method's registry keys, shown after every other method.
_ALSA_PREFIX: Final[str] = "alsa"


@cache
def method_order() -> tuple[str, ...]:
    """The methods that have a display rank, in display order (see the module docstring).

    Examples
    --------
    >>> method_order()[:3], method_order()[-2:]
    (('ac', 'doc', 'im'), ('alsa-e', 'alsa-g'))
    """
    from tasks.methods import MODEL_AWARE_METHODS, MODEL_AWARE_SCORES, estimator_names

    # accuracy on their own: no score, no opt-in method; GDE (a peer method) among them
    own = estimator_names(scores=False, opt_in=False, peers=True)
    return (
        *(m for m in own if not m.startswith(_ALSA_PREFIX)),
        *(m for m in MODEL_AWARE_METHODS if m not in MODEL_AWARE_SCORES),
        *sorted(m for m in own if m.startswith(_ALSA_PREFIX)),
    )


@cache
def family_order() -> tuple[str, ...]:
    """The registry's shift families in display order (see the module docstring)."""
    from tasks.data.shifts import SHIFT_FAMILIES

    shown = [f for f in FAMILY_DISPLAY_ORDER if f in SHIFT_FAMILIES]
    return (*shown, *(f for f in SHIFT_FAMILIES if f not in shown))


def __getattr__(name: str) -> Any:
    # METHOD_ORDER / FAMILY_ORDER read the registries, so they are computed on first access
    if name == "METHOD_ORDER":
        return method_order()
    if name == "FAMILY_ORDER":
        return family_order()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def method_rank(method: str) -> tuple[int, str]:
    """Sort key of a method label: its base name's display rank, then the label."""
    order = method_order()
    base = method.split("[", 1)[0]
    rank = order.index(base) if base in order else len(order)
    return (rank, method)


def family_rank(family: str) -> tuple[int, str]:
    """Sort key of a shift family: display rank, unknown ones alphabetically, ``all`` last."""
    order = family_order()
    if family == ALL_FAMILIES:
        return (len(order) + 1, family)
    rank = order.index(family) if family in order else len(order)
    return (rank, family)


def methods_in_order(methods: Sequence[str]) -> list[str]:
    """The distinct methods of ``methods`` in display order."""
    return sorted(set(methods), key=method_rank)


def is_variant(method: str) -> bool:
    """Whether a method name is an ablation variant such as ``alsa-g[freeze=positions]``."""
    return "[" in method


def parse_variant(method: str) -> tuple[str, dict[str, str]]:
    """Split a method label into its registry key and variant parameters.

    Examples
    --------
    >>> parse_variant("alsa-g[freeze=peaks+variances]")
    ('alsa-g', {'freeze': 'peaks+variances'})
    >>> parse_variant("alsa-g[default]"), parse_variant("atc-mc")
    (('alsa-g', {}), ('atc-mc', {}))
    """
    match = _VARIANT_RE.match(method)
    if not match:
        return method, {}
    params: dict[str, str] = {}
    for part in match["spec"].split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            params[key.strip()] = value.strip()
    return match["base"], params


def artifact_key(text: str) -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) made from ``text``; the report's
    file names use it too.

    Examples
    --------
    >>> artifact_key("fmnist_Ablations report")
    'fmnist-ablations-report'
    """
    key = _KEY_RE.sub("-", text.lower()).strip("-")
    return key or "report"
