r"""The sealed groups: sources that no design choice of the trust layer ever sees.

A *group* is a source of data (every Fashion-MNIST variant is one group, the three ParlSpeech
corpora are one; ``DatasetSpec.source_group``). A group is **sealed** iff

.. math:: \mathrm{int}\big(\mathrm{SHA256}(\texttt{SALT} + \texttt{name})\big) / 2^{256} <
          \texttt{SEALED_FRACTION}

a rule fixed (salt and threshold) before any result of the trust layer was looked at
(issue 31): it depends on the group's name only, so it cannot be tuned, and a group added later
is sealed or not by the same rule. Every choice of ``auto`` and the band (base method, signals,
model class, penalty, band form) is made by grouped cross-validation on the other
(*development*) groups, the calibration is fit on development groups only, and the sealed
groups are scored once, by the report (:mod:`tasks.report.trust_protocol`; :func:`tasks.report.trust_rows.split_development`).

``data/sealed_groups.json`` lists today's groups with their hash and verdict; a test holds it to
the rule and to at least a quarter of the groups sealed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["SALT", "SEALED_FRACTION", "THRESHOLD", "group_hash", "is_sealed", "sealed_groups",
           "sealed_record"]

#: Fixed before any result was looked at; never change it (a change unseals the test set).
SALT = "alsa-bench/issue-31/sealed-groups/v1:"
#: Expected share of sealed groups.
SEALED_FRACTION = 1.0 / 3.0
#: The rule's threshold: a group is sealed iff its hash, read as an integer, is below it.
THRESHOLD = 2 ** 256 // 3


def group_hash(name: str) -> str:
    """The SHA-256 (hex) of :data:`SALT` followed by the group's name."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"A group name must be a non-empty string; got {name!r}.")
    return hashlib.sha256((SALT + name).encode("utf-8")).hexdigest()


def is_sealed(name: str) -> bool:
    """Whether the group ``name`` is sealed (its hash, read as a fraction of 2**256, is below
    :data:`SEALED_FRACTION`).

    Examples
    --------
    >>> is_sealed("fashion-mnist") in (True, False)
    True
    """
    return int(group_hash(name), 16) < THRESHOLD


def sealed_groups(names: Iterable[str]) -> frozenset[str]:
    """The sealed ones among ``names``."""
    return frozenset(n for n in names if is_sealed(n))


def sealed_record(names: Iterable[str]) -> dict[str, object]:
    """The content of ``data/sealed_groups.json`` for the groups ``names``: the rule (salt,
    threshold as a fraction) and, per group in name order, its hash and verdict."""
    return {
        "rule": "sealed iff int(sha256(salt + group), 16) < 2**256 // 3",
        "salt": SALT,
        "sealed_fraction": SEALED_FRACTION,
        "groups": [{"group": n, "sha256": group_hash(n), "sealed": is_sealed(n)}
                   for n in sorted(set(names))],
    }
