"""Temperature scaling (Guo et al., ICML 2017) as an exact one-dimensional convex solve.

Temperature scaling picks the single scalar :math:`T > 0` that minimises the validation negative
log-likelihood of ``softmax(Z / T)``. It never changes the argmax, so accuracy is unchanged; it
only re-shapes confidences. Every softmax baseline in the ATC and COT papers is applied to
temperature-scaled probabilities ("Post T"), which is why it is a pre-processing step here.

With :math:`\\beta = 1/T` the objective

.. math:: \\mathrm{NLL}(\\beta) = \\frac{1}{n} \\sum_i \\Big[\\log \\sum_k e^{\\beta Z_{ik}}
          - \\beta Z_{i, y_i}\\Big]

is convex in :math:`\\beta` (a log-sum-exp of affine functions minus a linear term), with
derivative

.. math:: \\mathrm{NLL}'(\\beta) = \\frac{1}{n} \\sum_i \\Big[\\sum_k
          \\operatorname{softmax}(\\beta Z_i)_k Z_{ik} - Z_{i, y_i}\\Big],

which is non-decreasing in :math:`\\beta` (its derivative is a mean of variances). The optimum
is the root of this derivative, found here by Brent's method in :math:`\\log \\beta` on the
bracket given by ``bounds``: no step size, no initial value, no iteration budget to tune. When the
derivative does not change sign inside the bracket (separable validation data keeps lowering the
NLL as :math:`T \\to 0`), the temperature is put at the bound and a
:class:`TemperatureBoundWarning` is emitted.

Reference implementations differ only in the optimiser: ``gpleiss/temperature_scaling`` (LBFGS
from T = 1.5), ``kundajelab/abstention`` (L-BFGS-B from T = 1, the one the ATC paper used) and
``luyuzhe111/COT`` (LBFGS from T = 1). All minimise the same objective, so they agree with this
solve up to their tolerances.

References
----------
.. [1] Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. "On Calibration of Modern Neural
   Networks", ICML 2017.
"""

from __future__ import annotations

import hashlib
import math
import threading
import warnings
from collections import OrderedDict
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq

from ..core._validation import check_labels, check_logits
from ..core.exceptions import NotFittedError
from .confidence import _log_softmax

__all__ = [
    "DEFAULT_BOUNDS",
    "TemperatureBoundWarning",
    "TemperatureScaling",
    "fit_temperature",
    "temperature_nll",
]

#: Default search interval for the temperature ``T`` (not for ``1/T``).
DEFAULT_BOUNDS: tuple[float, float] = (0.05, 100.0)


class TemperatureBoundWarning(UserWarning):
    """The fitted temperature sits at a bound of the search interval (e.g. separable val data)."""


def _check_bounds(bounds: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(
            f"bounds must be a pair (low, high) of temperatures; got {bounds!r}."
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 < lo < hi):
        raise ValueError(
            f"bounds must satisfy 0 < low < high < inf; got ({lo!r}, {hi!r})."
        )
    return lo, hi


def temperature_nll(val_logits: ArrayLike, val_labels: ArrayLike, temperature: float) -> float:
    """Mean negative log-likelihood of ``softmax(val_logits / temperature)`` (natural log).

    .. math:: \\mathrm{NLL}(T) = \\frac{1}{n} \\sum_i \\Big[\\log \\sum_k e^{Z_{ik}/T}
              - Z_{i, y_i}/T\\Big]

    Parameters
    ----------
    val_logits : array-like of shape (n_samples, n_classes)
        Raw, finite logits.
    val_labels : array-like of shape (n_samples,)
        Integer labels in ``[0, n_classes)``.
    temperature : float
        ``T > 0``.

    Returns
    -------
    float
    """
    logits = check_logits(val_logits, "val_logits")
    labels = check_labels(val_labels, "val_labels", logits.shape[0], logits.shape[1])
    if not (isinstance(temperature, (int, float, np.floating, np.integer)) and temperature > 0
            and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a finite number > 0; got {temperature!r}.")
    log_probs = _log_softmax(logits / float(temperature))
    return float(-log_probs[np.arange(labels.size), labels].mean())


def _nll_derivative(beta: float, logits: NDArray[np.float64], mean_true_logit: float) -> float:
    """``d NLL / d beta``: expected logit under ``softmax(beta Z)`` minus the true-class logit."""
    probs = np.exp(_log_softmax(beta * logits))
    return float(np.einsum("ij,ij->", probs, logits) / logits.shape[0] - mean_true_logit)


#: Temperatures already solved in this process, by the digest of their inputs (most recent
#: last): :func:`_fit_temperature` is deterministic, and the softmax methods, the shift signals'
#: panel and the signals themselves fit it again and again on the same validation set (eleven
#: times per validation set in the pipeline's estimate stage; 2.3 s each at 100,000 x 100).
_SOLVED: OrderedDict[tuple[Any, ...], tuple[float, str | None]] = OrderedDict()
#: Validation sets remembered.
_SOLVED_SIZE = 8
_SOLVED_LOCK = threading.Lock()


def _digest(array: NDArray[Any]) -> tuple[str, tuple[int, ...], bytes]:
    data = np.ascontiguousarray(array)
    return data.dtype.str, data.shape, hashlib.blake2b(data.data, digest_size=16).digest()


def _fit_temperature(
    logits: NDArray[np.float64], labels: NDArray[np.int64], bounds: tuple[float, float]
) -> float:
    """Solve for ``T`` on validated inputs (see :func:`fit_temperature`).

    The answer for the same inputs is remembered (:data:`_SOLVED`, keyed by the bytes of
    ``logits`` and ``labels`` and the bounds), so a later fit on the same validation set costs
    one hash; a bound warning is given again each time, as if solved anew.
    """
    key = (_digest(logits), _digest(labels), tuple(float(b) for b in bounds))
    with _SOLVED_LOCK:
        solved = _SOLVED.get(key)
        if solved is not None:
            _SOLVED.move_to_end(key)
    if solved is None:
        solved = _solve_temperature(logits, labels, bounds)
        with _SOLVED_LOCK:
            _SOLVED[key] = solved
            while len(_SOLVED) > _SOLVED_SIZE:
                _SOLVED.popitem(last=False)
    temperature, warning = solved
    if warning is not None:
        warnings.warn(warning, TemperatureBoundWarning, stacklevel=3)
    return temperature


def _solve_temperature(
    logits: NDArray[np.float64], labels: NDArray[np.int64], bounds: tuple[float, float]
) -> tuple[float, str | None]:
    """The temperature, and the bound warning's message when it ends on a bound."""
    t_lo, t_hi = bounds
    beta_lo, beta_hi = 1.0 / t_hi, 1.0 / t_lo
    mean_true = float(logits[np.arange(labels.size), labels].mean())
    g_lo = _nll_derivative(beta_lo, logits, mean_true)
    g_hi = _nll_derivative(beta_hi, logits, mean_true)
    if np.all(logits.max(axis=1) == logits.min(axis=1)):
        # Every row is constant: NLL''(beta) = mean softmax-variance = 0, the NLL does not depend
        # on T at all. No information; keep T = 1 (clipped into the bounds).
        return float(min(max(1.0, t_lo), t_hi)), None
    # g_hi <= 0 includes a derivative that underflows to exactly 0 because every row is already
    # saturated on its true class: the NLL is (numerically) minimal at the smallest T.
    if g_hi <= 0.0:
        return float(t_lo), (
            f"Temperature scaling: the validation NLL is still decreasing at the lower bound "
            f"T = {t_lo:g} (the validation logits look separable); the temperature was set to "
            f"that bound."
        )
    if g_lo >= 0.0:
        return float(t_hi), (
            f"Temperature scaling: the validation NLL is still decreasing at the upper bound "
            f"T = {t_hi:g}; the temperature was set to that bound."
        )
    log_beta = brentq(
        lambda u: _nll_derivative(math.exp(u), logits, mean_true),
        math.log(beta_lo),
        math.log(beta_hi),
        xtol=1e-12,
        rtol=4 * np.finfo(float).eps,
        maxiter=500,
    )
    return float(1.0 / math.exp(log_beta)), None


def fit_temperature(
    val_logits: ArrayLike,
    val_labels: ArrayLike,
    bounds: tuple[float, float] = DEFAULT_BOUNDS,
) -> float:
    """Fit the temperature ``T`` that minimises the validation NLL of ``softmax(Z / T)``.

    Solves :math:`\\mathrm{NLL}'(\\beta) = 0` for :math:`\\beta = 1/T` (a monotone equation,
    since the NLL is convex in :math:`\\beta`) by Brent's method in :math:`\\log \\beta`. At the
    optimum the expected logit under the calibrated softmax equals the mean true-class logit:

    .. math:: \\frac{1}{n}\\sum_i \\sum_k \\operatorname{softmax}(Z_i / T)_k Z_{ik}
              = \\frac{1}{n}\\sum_i Z_{i, y_i}

    Parameters
    ----------
    val_logits : array-like of shape (n_samples, n_classes)
        Raw validation logits (never probabilities; if only probabilities exist, pass
        ``log(p)``).
    val_labels : array-like of shape (n_samples,)
        Integer labels in ``[0, n_classes)``.
    bounds : tuple of float, default=(0.05, 100.0)
        Search interval ``(T_min, T_max)`` for the temperature.

    Returns
    -------
    float
        The fitted temperature, inside ``bounds``.

    Warns
    -----
    TemperatureBoundWarning
        If the optimum lies at (or beyond) a bound, e.g. perfectly separable validation data,
        for which the NLL keeps decreasing as ``T -> 0``.

    Raises
    ------
    ValueError
        For invalid logits, labels or bounds (the message names the argument).

    References
    ----------
    .. [1] Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. "On Calibration of Modern Neural
       Networks", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(2000, 5)) * 2.0
    >>> p = np.exp(z - z.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
    >>> y = np.array([rng.choice(5, p=row) for row in p])
    >>> round(fit_temperature(3.0 * z, y), 1)  # logits made 3x over-confident
    3.0
    """
    logits = check_logits(val_logits, "val_logits")
    labels = check_labels(val_labels, "val_labels", logits.shape[0], logits.shape[1])
    return _fit_temperature(logits, labels, _check_bounds(bounds))


class TemperatureScaling:
    """Composable temperature-scaling step: ``fit`` on validation data, ``transform`` logits.

    ``transform`` returns ``logits / temperature_``, so downstream code keeps working in logit
    space (softmax of the result gives the calibrated probabilities).

    Parameters
    ----------
    bounds : tuple of float, default=(0.05, 100.0)
        Search interval for the temperature.

    Attributes
    ----------
    temperature_ : float
        Fitted temperature ``T``.
    n_classes_ : int
        Class count seen at ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> ts = TemperatureScaling().fit([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0]], [0, 1, 1])
    >>> ts.transform([[4.0, 0.0]]).shape
    (1, 2)
    """

    def __init__(self, *, bounds: tuple[float, float] = DEFAULT_BOUNDS) -> None:
        self.bounds = bounds

    def fit(self, val_logits: ArrayLike, val_labels: ArrayLike) -> Self:
        """Fit ``temperature_`` by minimising the validation NLL (see :func:`fit_temperature`).

        Parameters
        ----------
        val_logits : array-like of shape (n_samples, n_classes)
        val_labels : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        bounds = _check_bounds(self.bounds)
        logits = check_logits(val_logits, "val_logits")
        labels = check_labels(val_labels, "val_labels", logits.shape[0], logits.shape[1])
        self.temperature_ = _fit_temperature(logits, labels, bounds)
        self.n_classes_ = int(logits.shape[1])
        return self

    def transform(self, logits: ArrayLike) -> NDArray[np.float64]:
        """Return ``logits / temperature_`` (validated, float64, a new array).

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        if not hasattr(self, "temperature_"):
            raise NotFittedError(
                "This TemperatureScaling instance is not fitted yet; "
                "call fit(val_logits, val_labels) first."
            )
        arr = check_logits(logits, "logits", n_classes=self.n_classes_)
        return arr / self.temperature_

    def fit_transform(self, val_logits: ArrayLike, val_labels: ArrayLike) -> NDArray[np.float64]:
        """``fit(val_logits, val_labels).transform(val_logits)``."""
        return self.fit(val_logits, val_labels).transform(val_logits)

    def __repr__(self) -> str:
        return f"TemperatureScaling(bounds={self.bounds!r})"
