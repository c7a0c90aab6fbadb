"""Progress bars for long work on a terminal, and silence everywhere else.

Training (epochs), extraction (batches), downloads (bytes) and estimation (methods) can run for
minutes between two log lines. :func:`progress` wraps such a loop in a :mod:`tqdm` bar, and
:func:`progress_bar` gives a bar updated by hand (a download's bytes), but only when a person
is watching:

* ``sys.stderr`` is a terminal (``isatty()``), so logs redirected to a file or a pipe, CI and
  ``pytest`` stay free of carriage-return noise;
* the code is not running inside a Prefect task run or on a Dask worker, whose output goes to
  the run's logs (the stages log one line per epoch / split there instead);
* the environment variable :data:`ENV_VAR` (``ALSA_BENCH_PROGRESS``) does not say ``0``,
  ``off``, ``false`` or ``no``.

Otherwise the plain iterable comes back unchanged and the hand-updated bar is a no-op. A bar
only counts what passes through it: it never reorders, copies or skips an item and draws no
random number, so a run gives the same numbers with and without bars.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, Protocol, TypeVar

__all__ = ["ENV_VAR", "ProgressBar", "progress", "progress_bar", "progress_enabled"]

T = TypeVar("T")

#: Environment variable that turns every bar off (``0``, ``off``, ``false``, ``no``) or leaves the
#: choice to the checks above (unset, empty, ``1``, ``on``, ``true``, ``yes``, ``auto``).
ENV_VAR: Final[str] = "ALSA_BENCH_PROGRESS"
_OFF: Final[frozenset[str]] = frozenset({"0", "off", "false", "no"})
_AUTO: Final[frozenset[str]] = frozenset({"", "1", "on", "true", "yes", "auto"})


class ProgressBar(Protocol):
    """What :func:`progress_bar` yields: a :class:`tqdm.tqdm` or a silent stand-in."""

    def update(self, n: float = 1) -> Any:
        """Advance the bar by ``n`` units."""


class _Silent:
    """A bar that shows nothing (no terminal, a Prefect task or Dask worker, or turned off)."""

    def update(self, n: float = 1) -> None:
        """Do nothing."""


def _env_allows() -> bool:
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in _OFF:
        return False
    if value in _AUTO:
        return True
    raise ValueError(
        f"environment variable {ENV_VAR} must be one of 0, off, false, no (no progress bars) or "
        f"1, on, true, yes, auto (bars on a terminal); got {os.environ[ENV_VAR]!r}."
    )


def _stderr_is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):  # a closed or detached stream
        return False


def _in_prefect_task() -> bool:
    """Whether this thread runs a Prefect task (only looked up when Prefect is imported)."""
    if "prefect.context" not in sys.modules:
        return False
    from prefect.context import TaskRunContext

    return TaskRunContext.get() is not None


def _on_dask_worker() -> bool:
    """Whether this code runs on a Dask worker (only looked up when distributed is imported)."""
    if "distributed" not in sys.modules:
        return False
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:  # "No worker found": not on a worker
        return False
    return True


def progress_enabled() -> bool:
    """Whether a bar would be shown here and now.

    Returns
    -------
    bool
        True when ``sys.stderr`` is a terminal, the code runs neither in a Prefect task run
        nor on a Dask worker, and :data:`ENV_VAR` does not turn bars off.

    Raises
    ------
    ValueError
        If :data:`ENV_VAR` holds a value other than the ones listed there.
    """
    return (_env_allows() and _stderr_is_terminal() and not _in_prefect_task()
            and not _on_dask_worker())


def _check_total(total: Any) -> int | None:
    if total is None:
        return None
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ValueError(f"total must be None or an integer >= 0; got {total!r}.")
    return total


def progress(
    iterable: Iterable[T],
    *,
    total: int | None = None,
    desc: str | None = None,
    unit: str = "it",
    leave: bool = True,
    enabled: bool = True,
) -> Iterable[T]:
    """``iterable`` wrapped in a tqdm bar on a terminal, else ``iterable`` itself.

    Parameters
    ----------
    iterable : iterable
        The loop to show; it is iterated exactly as without a bar.
    total : int, optional
        Number of items when ``len(iterable)`` does not tell (a generator).
    desc : str, optional
        Label in front of the bar (``"train fmnist.mlp.s0"``).
    unit : str, default "it"
        What one item is (``"epoch"``, ``"batch"``, ``"method"``).
    leave : bool, default True
        Keep the finished bar on screen; False for inner loops (batches of one epoch).
    enabled : bool, default True
        The caller's own switch (a ``progress=False`` argument); False always gives the plain
        iterable.

    Returns
    -------
    iterable
        A :class:`tqdm.tqdm` over ``iterable`` when :func:`progress_enabled` and ``enabled``,
        else ``iterable`` unchanged (the same object).

    Raises
    ------
    ValueError
        If ``total`` is not None or an integer >= 0, or :data:`ENV_VAR` is malformed.
    """
    total = _check_total(total)
    if not enabled or not progress_enabled():
        return iterable
    from tqdm.std import tqdm  # not tqdm.auto: its asyncio class calls iter() once more

    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, dynamic_ncols=True)


@contextmanager
def progress_bar(
    *,
    total: int | None = None,
    initial: int = 0,
    desc: str | None = None,
    unit: str = "it",
    unit_scale: bool = False,
    leave: bool = True,
    enabled: bool = True,
) -> Iterator[ProgressBar]:
    """A bar advanced by hand with ``bar.update(n)`` (bytes of a download), closed on exit.

    Parameters
    ----------
    total : int, optional
        Units expected in all (None: unknown, the bar counts up).
    initial : int, default 0
        Units already done (the bytes of a resumed ``.part``).
    desc : str, optional
        Label in front of the bar.
    unit : str, default "it"
        What one unit is (``"B"`` for bytes).
    unit_scale : bool, default False
        Show ``12.3MB`` instead of ``12345678B``.
    leave : bool, default True
        Keep the finished bar on screen.
    enabled : bool, default True
        The caller's own switch; False always gives the silent bar.

    Yields
    ------
    ProgressBar
        A :class:`tqdm.tqdm` when :func:`progress_enabled` and ``enabled``, else a stand-in
        whose ``update`` does nothing.

    Raises
    ------
    ValueError
        If ``total`` is not None or an integer >= 0, ``initial`` is not an integer >= 0, or
        :data:`ENV_VAR` is malformed.
    """
    total = _check_total(total)
    if isinstance(initial, bool) or not isinstance(initial, int) or initial < 0:
        raise ValueError(f"initial must be an integer >= 0; got {initial!r}.")
    if not enabled or not progress_enabled():
        yield _Silent()
        return
    from tqdm.std import tqdm  # not tqdm.auto: its asyncio class calls iter() once more

    bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, unit_scale=unit_scale,
               unit_divisor=1024 if unit_scale else 1000, leave=leave, dynamic_ncols=True)
    try:
        yield bar
    finally:
        bar.close()
