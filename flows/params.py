"""``--param METHOD.NAME=VALUE``: estimator hyper-parameters from the command line.

Used by ``alsa-bench estimate`` and ``alsa-bench run``. Each option sets one hyper-parameter of
one method::

    alsa-bench estimate --val v.npz --target t.npz --param alsa-g.alpha=0.9 --param alsa-g.n_anchors=500
    alsa-bench run --param alsa-e.space='"raw"' --param atc-mc.temperature_scaling=false

``VALUE`` is read as JSON when it parses (``0.9``, ``500``, ``true``, ``null``,
``["positions", "peaks"]``, ``"raw"``) and as a plain string otherwise (``alsa-g.space=raw``),
so numbers, booleans and lists need no quoting. The parameters are checked at once, before any
work starts, exactly as the Python API checks them: the method must exist, the name must be one
of its parameters, and the value must pass the estimator's own validation (type and range).
In the benchmark they are part of each estimate's cache key and are stored with every row's
``params``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["check_method_params", "parse_param_options"]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_param_options(options: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Turn ``["alsa-g.alpha=0.9", ...]`` into ``{"alsa-g": {"alpha": 0.9}, ...}``.

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
    >>> parse_param_options(["alsa-g.alpha=0.9", "alsa-g.space=raw", "cot.mode=\\"sampled\\""])
    {'alsa-g': {'alpha': 0.9, 'space': 'raw'}, 'cot': {'mode': 'sampled'}}
    """
    out: dict[str, dict[str, Any]] = {}
    for option in options:
        key, sep, text = str(option).partition("=")
        method, dot, name = key.strip().rpartition(".")
        if not sep or not dot or not method or not name.strip():
            raise ValueError(
                f"--param must look like METHOD.NAME=VALUE (e.g. alsa-g.alpha=0.9); got "
                f"{option!r}."
            )
        out.setdefault(method, {})[name.strip()] = _value(text.strip())
    return out


def check_method_params(
    params: dict[str, dict[str, Any]], methods: Sequence[str] | None = None
) -> None:
    """Validate parameters as the estimators will: names, types and ranges.

    Parameters
    ----------
    params : dict
        From :func:`parse_param_options`.
    methods : sequence of str, optional
        The methods that will run (``--method``); parameters for another method are refused.
        None means every method.

    Raises
    ------
    ValueError
        If a method is unknown or not among ``methods``, a parameter name is unknown, or a value
        fails the estimator's validation; the message names the ``--param`` at fault.
    """
    from estimators import available_estimators, get_estimator
    from tasks.model_aware import MODEL_AWARE_METHODS

    model_aware = tuple(MODEL_AWARE_METHODS)
    known = (*available_estimators(include_scores=True, include_opt_in=True), *model_aware)
    for method, values in params.items():
        where = ", ".join(f"{method}.{k}" for k in values)
        if method not in known:
            raise ValueError(
                f"--param {where}: method must be one of {', '.join(known)}; got {method!r}."
            )
        if methods is not None and method not in methods:
            raise ValueError(
                f"--param {where}: {method!r} is not among the methods to run "
                f"({', '.join(methods)}); add --method {method} or drop the parameter."
            )
        if method in model_aware:
            from tasks.model_aware import check_params

            try:
                check_params(method, values)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"--param {where}: {exc}") from None
            continue
        try:
            estimator = get_estimator(method, **values)
            estimator._validate_params()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"--param {where}: {exc}") from None
