"""The ALSA estimators of the registry: :class:`ALSA`, ``alsa-g`` (:class:`ALSAG`) and ``alsa-e``
(:class:`ALSAE`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...core._validation import check_logits
from ...core.base import Estimator
from ...core.params import with_defaults
from ...core.registry import register
from .declaration import ALSA_PARAMS, KERNEL_DEFAULTS, _resolve_device
from .fitting import fit_alsa_anchors
from .kernels import kernel_alpha_value, rectification_threshold
from .model import ALSAFit, ALSAPrediction, alsa_predict


class ALSA(Estimator):
    r"""ALSA estimator: learnable anchors in logit space (Liu et al., BMVC 2025, arXiv:2508.19613).

    Shared implementation of ``alsa-g`` (:class:`ALSAG`, Gaussian-like influence, eq. 1) and
    ``alsa-e`` (:class:`ALSAE`, exponential influence, eq. 5). ``fit`` learns ``k`` anchors on the
    validation logits (eq. 9, stopped by eq. 10); ``estimate`` returns the mean of
    :math:`q(z) = \sigma(\sum_j p_j e^{-v_j^2 g(d(z, a_j))})` over the target rows, with
    ``q := 1/c`` on rows no anchor influences by at least
    :math:`t = 6e^{-\mathrm{erfinv}(\alpha)^2}` (G) or :math:`6(1-\alpha)` (E) (eq. 8, App. E).
    Takes raw logits; temperature scaling is a no-op (cosine distance is scale invariant).

    Every default the paper leaves open was chosen by ``benchmarks/tune_alsa.py`` on tuning
    problems independent of the benchmark (digits images, Gaussian blobs; the table and the
    reading are in ``docs/ALSA.md``); :func:`fit_alsa_anchors` documents each one.

    Parameters
    ----------
    **params
        Keyword-only hyper-parameters, each declared once in :data:`ALSA_PARAMS` (``ALSA.PARAMS``:
        name, accepted values, default, one line; the table in ``docs/ESTIMATORS.md`` is rendered
        from it by :func:`estimators.core.param_docs.markdown_table`) and documented at length by
        :func:`fit_alsa_anchors`. ``alsa-g`` and ``alsa-e`` differ only in the defaults of
        ``kernel``, ``variance_mean`` and ``variance_std`` (:data:`KERNEL_DEFAULTS`; the shared
        class leaves the variances to the kernel with None).

    Attributes
    ----------
    positions_ : ndarray of shape (k, c + 1) (augmented space) or (k, c), float32
        Fitted anchor positions in logit space (for plots).
    peaks_ : ndarray of shape (k,), float32
        Fitted signed peaks.
    variances_ : ndarray of shape (k,), float32
        Fitted variances ``v`` (the kernels use ``v**2``).
    anchors_ : ALSAAnchors
        The three arrays together, as :func:`alsa_predict` takes them.
    history_ : dict of str to ndarray
        ``"loss"`` (mean BCE), ``"mean_q"`` and ``"gap"`` per forward pass (``n_epochs_ + 1``).
    n_epochs_ : int
        Parameter updates performed.
    stop_reason_ : str
        ``"fixed"``, ``"converged"``, ``"crossed"``, ``"max_epochs"`` or ``"all_frozen"``.
    train_gap_ : float
        Final ``|mean q(val) - acc_S|``.
    threshold_ : float
        Rectification cut-off ``t`` in use.
    fit_seconds_ : float
        Training wall-clock time.
    fit_result_ : ALSAFit
        Everything :func:`fit_alsa_anchors` returned.

    Examples
    --------
    >>> import numpy as np
    >>> from estimators import get_estimator
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 300)
    >>> z = rng.normal(size=(300, 3)); z[np.arange(300), y] += 2
    >>> est = get_estimator("alsa-e", n_anchors=30, device="cpu").fit(z, y)
    >>> 0.0 <= est.estimate(z).accuracy <= 1.0
    True
    """

    PARAMS = ALSA_PARAMS

    # ------------------------------------------------------------------ fit / estimate
    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = self._fit_anchors(val_logits, val_labels)
        for w in caught:  # re-issue so that the warning points at the caller's fit(...) line
            warnings.warn(w.message, w.category, stacklevel=3)
        self.fit_result_ = result
        self.anchors_ = result.anchors
        self.positions_ = result.anchors.positions
        self.peaks_ = result.anchors.peaks
        self.variances_ = result.anchors.variances
        self.history_ = result.history
        self.n_epochs_ = result.n_epochs
        self.stop_reason_ = result.stop_reason
        self.train_gap_ = result.train_gap
        self.fit_seconds_ = result.seconds
        self.device_ = _resolve_device(self.device)
        if result.anchors.threshold is not None:
            self.threshold_ = float(result.anchors.threshold)
        elif self.rectify == "kernel":
            self.threshold_ = kernel_alpha_value(self.kernel, self.alpha)
        else:
            self.threshold_ = rectification_threshold(self.kernel, self.alpha, self.peak)

    def _fit_anchors(
        self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]
    ) -> ALSAFit:
        return fit_alsa_anchors(
            val_logits,
            val_labels,
            kernel=self.kernel,
            n_anchors=self.n_anchors,
            peak=self.peak,
            variance_mean=self.variance_mean,
            variance_std=self.variance_std,
            freeze=self.freeze,
            optimizer=self.optimizer,
            lr_positions=self.lr_positions,
            lr_peaks=self.lr_peaks,
            lr_variances=self.lr_variances,
            max_epochs=self.max_epochs,
            min_epochs=self.min_epochs,
            tol=self.tol,
            alpha=self.alpha,
            space=self.space,
            stop_rule=self.stop_rule,
            calibrate=self.calibrate,
            anchor_sampling=self.anchor_sampling,
            gradient=self.gradient,
            chunk_size=self.chunk_size,
            seed=self.seed,
            device=self.device,
            n_threads=self.n_threads,
            rectify=self.rectify,
            threshold_rule=self.threshold_rule,
            rectify_quantile=self.rectify_quantile,
            max_fit_rows=self.max_fit_rows,
            max_reference_rows=self.max_reference_rows,
        )

    def _predict(self, logits: NDArray[np.float64]) -> ALSAPrediction:
        return alsa_predict(
            logits,
            self.anchors_,
            alpha=self.alpha,
            rectify=self.rectify,
            peak=self.peak,
            chunk_size=self.chunk_size,
            device=self.device_,
            n_threads=self.n_threads,
        )

    def _fitted_params(self) -> dict[str, Any]:
        """The fitted ``tau`` of the augmented space, so stored anchors can be re-used."""
        threshold = self.anchors_.threshold
        return {
            "space_tau": float(self.anchors_.tau),
            "bias": float(self.anchors_.bias),
            "rectify_threshold": None if threshold is None else float(threshold),
        }

    accepts_float32 = True  # float32 input is not copied to float64 (issue 11, memory)

    def _reference_size(self) -> int:
        """Rows the calibration offset was fitted on (held-out rows above ``max_fit_rows``)."""
        return int(self.fit_result_.n_reference_rows) or int(self.n_val_)

    def predict_proba_correct(self, logits: Any) -> NDArray[np.float64]:
        """Per-sample probability of a correct prediction after rectification (eq. 8).

        Parameters
        ----------
        logits : array-like of shape (n, c), (n,) or (n, 1)
            Raw logits with the class count seen at ``fit`` (binary positive-class logits for
            the 1-D shapes).

        Returns
        -------
        ndarray of shape (n,), float64
        """
        self._check_is_fitted()
        z = check_logits(logits, "logits", n_classes=self.n_classes_, keep_float32=True)
        return self._predict(z).q

    def _estimate(
        self, target_logits: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64], Mapping[str, Any]]:
        pred = self._predict(target_logits)
        diagnostics = {
            "n_epochs": self.n_epochs_,
            "stop_reason": self.stop_reason_,
            "train_gap": self.train_gap_,
            "rectified_fraction": pred.rectified_fraction,
            "n_rectified": int(pred.rectified.sum()),
            "threshold": pred.threshold,
            "mean_q_unrectified": float(np.mean(pred.q_raw)),
            "n_anchors": self.anchors_.n_anchors,
            "converged": self.stop_reason_ in ("fixed", "converged", "crossed"),
            "space": self.anchors_.space,
            "space_tau": self.anchors_.tau,
            "bias": self.anchors_.bias,
            "fit_seconds": self.fit_seconds_,
            "device": self.device_,
            "threshold_rule": self.threshold_rule,
            "n_fit_rows": self.fit_result_.n_fit_rows,
            "n_reference_rows": self.fit_result_.n_reference_rows,
            "reference": self.fit_result_.reference,
            "reference_rectified_fraction": self.fit_result_.reference_rectified,
        }
        return pred.accuracy, pred.q, diagnostics


@register("alsa-g")
class ALSAG(ALSA):
    """ALSA with the Gaussian-like influence function (eq. 1), registry key ``alsa-g``.

    See :class:`ALSA` for the parameters; ``kernel`` defaults to ``"gaussian"`` and the variance
    initialisation to the kernel's :data:`KERNEL_DEFAULTS`.
    """

    PARAMS = with_defaults(ALSA_PARAMS, kernel="gaussian", **KERNEL_DEFAULTS["gaussian"])


@register("alsa-e")
class ALSAE(ALSA):
    """ALSA with the exponential influence function (eq. 5), registry key ``alsa-e``.

    See :class:`ALSA` for the parameters; ``kernel`` defaults to ``"exponential"`` and the
    variance initialisation to the kernel's :data:`KERNEL_DEFAULTS`.
    """

    PARAMS = with_defaults(ALSA_PARAMS, kernel="exponential", **KERNEL_DEFAULTS["exponential"])
