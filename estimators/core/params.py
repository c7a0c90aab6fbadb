"""One declaration per hyper-parameter: validation, ``__init__``, ``get_params`` and the docs.

Every estimator class lists its hyper-parameters once, as ``PARAMS``, a tuple of :class:`Param`.
From that declaration :class:`~estimators.core.base.Estimator`

* synthesises a keyword-only ``__init__`` that stores each value under its name (with a
  ``__signature__``, so ``inspect.signature``, ``get_params``, cloning and ``repr`` work as for a
  hand-written one, and an unknown keyword is a ``TypeError``);
* validates every value at ``fit`` (scikit-learn's convention) with messages that name the
  parameter, the estimator, what was expected and what came;
* and :func:`estimators.core.param_docs.markdown_table` renders the parameter tables of ``docs/ESTIMATORS.md``
  (``python -m estimators.core.param_docs`` rewrites them; a test fails when they are out of date).

Adding a parameter is one line: a :class:`Param` in the class's ``PARAMS``.

>>> p = Param("n_bins", "int", 10, "Equal-width confidence bins.", low=1)
>>> p.validate(10, "IM")
>>> p.validate(0, "IM")
Traceback (most recent call last):
...
ValueError: The 'n_bins' parameter of IM must be in [1, inf]; got 0.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ._validation import check_in_choices, check_number

__all__ = [
    "Affects",
    "Param",
    "ParamKind",
    "inert_parameters",
    "make_init",
    "validate_params",
    "with_defaults",
]

#: What a parameter holds. ``"choice"``: one of ``choices``; ``"any"``: checked by ``check`` only.
ParamKind = Literal["bool", "int", "float", "str", "choice", "any"]

#: What a parameter changes: ``"estimate"`` (the numbers; the default) or ``"speed"`` (only
#: how fast or where they are computed: devices, threads, block sizes; estimates agree to float
#: round-off).
Affects = Literal["estimate", "speed"]

#: Machine form of ``Param.acts``: ``active(values, n_val)`` says whether the parameter has an
#: effect under the estimator's parameter ``values`` (every declared name) on ``n_val``
#: validation rows.
ParamActive = Callable[[Mapping[str, Any], int], bool]

#: A check the declaration cannot express: ``check(value, owner)`` raises ``ValueError``.
ParamCheck = Callable[[Any, str], object]

_KINDS: tuple[str, ...] = ("bool", "int", "float", "str", "choice", "any")


@dataclass(frozen=True)
class Param:
    """Declaration of one hyper-parameter.

    Attributes
    ----------
    name : str
        Keyword of ``__init__`` and attribute the value is stored under.
    kind : {"bool", "int", "float", "str", "choice", "any"}
        What the value must be. ``"int"`` / ``"float"`` take ``low`` / ``high``; ``"choice"``
        takes ``choices``; ``"any"`` is checked by ``check`` alone.
    default : object
        The value ``__init__`` stores when the keyword is not given.
    doc : str
        One line for the parameter tables.
    choices : tuple, default ()
        Allowed values of a ``"choice"`` parameter.
    low, high : float or None, default None
        Bounds of a number (None: unbounded).
    low_open, high_open : bool, default False
        Whether the bound itself is excluded.
    special : tuple, default ()
        Values accepted besides the kind, e.g. ``("auto",)`` or ``(None,)``.
    acts : str, default ""
        When the parameter has an effect, if not always (e.g. ``'stop_rule="fixed"'``), in
        words, for the tables and the warnings.
    active : callable or None, default None
        The same condition in code, ``active(values, n_val) -> bool`` (:data:`ParamActive`):
        ``fit`` warns (:class:`~estimators.core.exceptions.InertParameterWarning`) when the value
        differs from the default but the condition is false. None with ``acts`` set: the
        condition depends on the data in a way ``fit`` cannot tell (no warning).
    instead : str, default ""
        What decides the matter while the parameter is inert (e.g. ``"rectify_quantile sets the
        cut-off"``), for the warning.
    affects : {"estimate", "speed"}, default "estimate"
        ``"speed"``: the parameter chooses how (device, threads, block size), not what, is
        computed; estimates agree to float round-off whatever its value.
    accepts : str, default ""
        What the parameter accepts, in words, for the tables (default: derived from the
        declaration; needed for ``kind="any"``).
    check : callable or None, default None
        Extra check ``check(value, owner)`` run after the declared ones (or instead of them for
        ``kind="any"``); raises ``ValueError`` naming the parameter.
    """

    name: str
    kind: ParamKind
    default: Any
    doc: str
    choices: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    special: tuple[Any, ...] = ()
    acts: str = ""
    accepts: str = ""
    check: ParamCheck | None = dataclasses.field(default=None, compare=False, repr=False)
    active: ParamActive | None = dataclasses.field(default=None, compare=False, repr=False)
    instead: str = ""
    affects: Affects = "estimate"

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"Param {self.name!r}: kind must be one of {_KINDS}; got {self.kind!r}.")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"Param {self.name!r}: a 'choice' parameter needs choices.")
        if self.affects not in ("estimate", "speed"):
            raise ValueError(
                f"Param {self.name!r}: affects must be 'estimate' or 'speed'; got {self.affects!r}."
            )
        if self.active is not None and not self.acts:
            raise ValueError(f"Param {self.name!r}: an 'active' condition needs its 'acts' text.")

    def is_default(self, value: Any) -> bool:
        """Whether ``value`` equals the default (arrays, sequences and NaN compared safely).

        >>> Param("n", "int", 3, "N.").is_default(3), Param("f", "any", (), "F.").is_default([])
        (True, True)
        """
        return _same(value, self.default)

    def inert_message(self, owner: str, value: Any) -> str:
        """The warning for a non-default ``value`` that the configuration ignores."""
        text = (f"The {self.name!r} parameter of {owner} is set to {value!r} but has no effect "
                f"here: it acts only with {self.acts}.")
        if self.instead:
            text += f" Here {self.instead}."
        return text

    # ------------------------------------------------------------------ validation
    def is_special(self, value: Any) -> bool:
        """Whether ``value`` is one of the declared special values (compared safely)."""
        for s in self.special:
            if s is None:
                if value is None:
                    return True
            elif isinstance(value, str) and isinstance(s, str) and value == s:
                return True
        return False

    def validate(self, value: Any, owner: str) -> None:
        """Raise ``ValueError`` unless ``value`` is allowed; the message names ``owner``.

        ``owner`` is the estimator's class name (or a function's name), as in
        ``The 'alpha' parameter of ALSAG must be in (0.0, 1.0); got 1.0.``
        """
        if self.is_special(value):
            return
        kind = self.kind
        if kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(
                    f"The {self.name!r} parameter of {owner} must be a bool; got {value!r}."
                )
        elif kind == "choice":
            check_in_choices(value, self.name, owner, self.choices)
        elif kind == "str":
            if not isinstance(value, str):
                raise ValueError(
                    f"The {self.name!r} parameter of {owner} must be a string{self._or_special()}; "
                    f"got {value!r}."
                )
        elif kind in ("int", "float"):
            integer = kind == "int"
            if self.special and isinstance(value, str):
                noun = "an integer" if integer else "a number"
                raise ValueError(
                    f"The {self.name!r} parameter of {owner} must be {noun}"
                    f"{self._or_special()}; got {value!r}."
                )
            check_number(
                value, self.name, owner, low=self.low, high=self.high,
                low_open=self.low_open, high_open=self.high_open, integer=integer,
            )
        if self.check is not None:
            self.check(value, owner)

    def _or_special(self) -> str:
        return "".join(f" or {s!r}" for s in self.special)

    # ------------------------------------------------------------------ documentation
    def allowed(self) -> str:
        """What the parameter accepts, in words (the tables' second column)."""
        if self.accepts:
            return self.accepts
        if self.kind == "bool":
            text = "bool"
        elif self.kind == "choice":
            text = " \\| ".join(f"`{c!r}`".replace("'", '"') for c in self.choices)
        elif self.kind == "str":
            text = "str"
        elif self.kind == "any":
            text = ""
        else:
            text = "int" if self.kind == "int" else "float"
            if self.low is not None or self.high is not None:
                lo = "-inf" if self.low is None else _num(self.low)
                hi = "inf" if self.high is None else _num(self.high)
                text += (f" in {'(' if self.low_open else '['}{lo}, {hi}"
                         f"{')' if self.high_open else ']'}")
        extra = [_literal(s) for s in self.special]
        return " or ".join([t for t in [text, *extra] if t])


def _same(a: Any, b: Any) -> bool:
    """Equality that tolerates arrays, sequences of either type and NaN."""
    if a is b:
        return True
    if a is None or b is None:
        return False
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return isinstance(a, Mapping) and isinstance(b, Mapping) and dict(a) == dict(b)
    try:
        x, y = np.asarray(a), np.asarray(b)
        if x.dtype == object or y.dtype == object:
            return bool(a == b)
        return x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=x.dtype.kind == "f"))
    except (TypeError, ValueError):
        return False


def inert_parameters(
    params: Sequence[Param], values: Mapping[str, Any], n_val: int
) -> list[Param]:
    """The declared parameters that ``values`` sets away from their default but that have no
    effect under ``values`` on ``n_val`` validation rows (their ``active`` condition is false).

    >>> tol = Param("tol", "float", 1e-5, "Tol.", acts='stop_rule="paper"',
    ...             active=lambda v, n: v["stop_rule"] == "paper")
    >>> [p.name for p in inert_parameters([tol], {"tol": 1e-3, "stop_rule": "fixed"}, 100)]
    ['tol']
    >>> inert_parameters([tol], {"tol": 1e-5, "stop_rule": "fixed"}, 100)
    []
    """
    out = []
    for p in params:
        if p.active is None or p.name not in values or p.is_default(values[p.name]):
            continue
        if not p.active(values, n_val):
            out.append(p)
    return out


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _literal(value: Any) -> str:
    """A default or special value as it is written in Python, in backticks."""
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, float):
        return f"`{value!r}`"
    return f"`{value!r}`"


# ============================================================================ declarations
def with_defaults(params: Sequence[Param], **defaults: Any) -> tuple[Param, ...]:
    """``params`` with some defaults replaced (a registered variant such as ``atc-ne``).

    >>> base = (Param("score", "choice", "a", "Score.", choices=("a", "b")),)
    >>> with_defaults(base, score="b")[0].default
    'b'
    """
    names = {p.name for p in params}
    unknown = sorted(set(defaults) - names)
    if unknown:
        raise ValueError(f"with_defaults: no parameter named {unknown}; declared: {sorted(names)}.")
    return tuple(
        dataclasses.replace(p, default=defaults[p.name]) if p.name in defaults else p
        for p in params
    )


def validate_params(params: Sequence[Param], values: Mapping[str, Any], owner: str) -> None:
    """Validate whichever declared parameters ``values`` holds, in declaration order.

    Keys of ``values`` that are not declared are ignored (the constructor refuses them).
    """
    for p in params:
        if p.name in values:
            p.validate(values[p.name], owner)


def make_init(params: Sequence[Param]) -> Callable[..., None]:
    """A keyword-only ``__init__`` storing every declared parameter, with a true signature.

    Values are stored as given (validation happens at ``fit``). An unknown keyword raises
    ``TypeError`` as a hand-written ``__init__`` would.
    """
    names = tuple(p.name for p in params)
    defaults = {p.name: p.default for p in params}

    def __init__(self: Any, **kwargs: Any) -> None:
        for key in kwargs:
            if key not in defaults:
                raise TypeError(
                    f"{type(self).__name__}.__init__() got an unexpected keyword argument {key!r}"
                )
        for name in names:
            setattr(self, name, kwargs[name] if name in kwargs else defaults[name])

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    setattr(__init__, "__signature__", inspect.Signature(  # noqa: B010  (unknown to mypy)
        [self_param, *(inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=defaults[n])
                       for n in names)],
        return_annotation=None,
    ))
    __init__.__doc__ = "Store the hyper-parameters (keyword-only; validated at ``fit``)."
    return __init__
