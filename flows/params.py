"""``--param METHOD.NAME=VALUE``: estimator hyper-parameters from the command line.

Used by ``alsa-bench estimate`` and ``alsa-bench run``. Each option sets one hyper-parameter of
one method::

    alsa-bench estimate --val v.npz --target t.npz --param alsa-g.rectify_quantile=0.05 --param alsa-g.n_anchors=500
    alsa-bench run --param alsa-e.space='"raw"' --param atc-mc.temperature_scaling=false

``VALUE`` is read as JSON when it parses (``0.9``, ``500``, ``true``, ``null``,
``["positions", "peaks"]``, ``"raw"``) and as a plain string otherwise (``alsa-g.space=raw``),
so numbers, booleans and lists need no quoting. The parameters are checked at once, before any
work starts, exactly as the Python API checks them: the method must exist, the name must be one
of its parameters, and the value must pass the estimator's own validation (type and range). A
parameter that the chosen configuration ignores (``alsa-g.alpha`` under the default
``threshold_rule="quantile"``, ``cot.batch_size`` outside ``mode="sampled"``) is accepted with a
warning naming the condition under which it acts (``Param.acts``).
In the benchmark they are part of each estimate's cache key and are stored with every row's
``params``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from tasks.methods import check_method_params

__all__ = ["auto_param_note", "check_method_params", "parse_param_options"]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_param_options(options: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Turn ``["alsa-g.n_anchors=500", ...]`` into ``{"alsa-g": {"n_anchors": 500}, ...}``.

    Parameters
    ----------
    options : iterable of str
        The values of the repeatable ``--param`` option.

    Returns
    -------
    dict
        Method -> parameter -> value, in the order given; a repeated parameter keeps its last
        value.

    Raises
    ------
    ValueError
        If an option is not of the form ``METHOD.NAME=VALUE``.

    Examples
    --------
    >>> parse_param_options(["alsa-g.rectify_quantile=0.05", "alsa-g.space=raw",
    ...                      "cot.mode=\\"sampled\\""])
    {'alsa-g': {'rectify_quantile': 0.05, 'space': 'raw'}, 'cot': {'mode': 'sampled'}}
    """
    out: dict[str, dict[str, Any]] = {}
    for option in options:
        key, sep, text = str(option).partition("=")
        method, dot, name = key.strip().rpartition(".")
        if not sep or not dot or not method or not name.strip():
            raise ValueError(
                f"--param must look like METHOD.NAME=VALUE (e.g. alsa-g.n_anchors=500); got "
                f"{option!r}."
            )
        out.setdefault(method, {})[name.strip()] = _value(text.strip())
    return out


def auto_param_note(params: Mapping[str, Mapping[str, Any]],
                    methods: Iterable[str]) -> str | None:
    """The ``note:`` line for a named ``auto`` beside a ``--param`` on one of its members.

    ``auto`` runs its members with default parameters (its calibration was fit on those), so a
    ``--param`` on ``alsa-e`` reaches the ``alsa-e`` row only; this says so instead of letting the
    two disagree without a word. None when ``auto`` is not named or no member is tuned.

    >>> auto_param_note({"alsa-e": {"n_anchors": 40}}, ["auto", "alsa-e"])[:60]
    'note: auto ran its members with default parameters (its cali'
    """
    if "auto" not in methods:
        return None
    from estimators.trust.auto import Auto

    try:
        members = set(Auto(**params.get("auto", {})).members())
    except ValueError:
        return None
    tuned = sorted(m for m in params if params[m] and m in members)
    if not tuned:
        return None
    return (f"note: auto ran its members with default parameters (its calibration was fit on "
            f"those): --param on {', '.join(tuned)} reached only the "
            f"{'method' if len(tuned) == 1 else 'methods'} of that name, not auto's members.")
