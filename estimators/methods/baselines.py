"""Import the baseline estimators so that they register, in the contract's key order.

``ac``, ``doc``, ``im``, ``atc-mc``, ``atc-ne``, ``cot`` (imported by :mod:`estimators`).
"""

from __future__ import annotations

from .ac import AC, average_confidence
from .doc import DoC, difference_of_confidences
from .im import IM, importance_weighted_accuracy
from .atc import ATC, ATCMC, ATCNE, atc_accuracy, fit_atc_threshold
from .cot import COT, cot_accuracy, cot_transport

__all__ = [
    "AC",
    "ATC",
    "ATCMC",
    "ATCNE",
    "COT",
    "DoC",
    "IM",
    "atc_accuracy",
    "average_confidence",
    "cot_accuracy",
    "cot_transport",
    "difference_of_confidences",
    "fit_atc_threshold",
    "importance_weighted_accuracy",
]
