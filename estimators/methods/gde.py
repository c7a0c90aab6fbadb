r"""GDE: the Generalization Disagreement Equality (Jiang et al., ICLR 2022).

Two classifiers :math:`h, h'` of the same architecture, trained on the same data with different
seeds (and compared at the same epoch), disagree on an unlabelled target set about as often as
either errs:

.. math:: \widehat{\mathrm{err}}_T(h) = \frac1m \sum_{i=1}^{m} \mathbf{1}\big[h(x_i) \ne
          h'(x_i)\big], \qquad \widehat{\mathrm{acc}}_T(h) = 1 - \widehat{\mathrm{err}}_T(h),

an equality that holds in expectation when the ensemble of such models is well calibrated
(class-wise), and that needs no label and no validation fit. With :math:`k > 1` peers the
estimate is the mean agreement over the peers, :math:`\frac1k \sum_j \frac1m \sum_i
\mathbf{1}[h(x_i) = h'_j(x_i)]` (Jiang et al.'s expectation over the ensemble, estimated with
the peers at hand).

The reference code (``saurabhgarg1996/ATC_code``, ``get_GDE_acc.py``:
``evaluate_disagreement``, and the COT repository's ``GDE`` branch) predicts the target accuracy
as the fraction of rows on which the two networks' argmax match; this is what
:class:`GDE` computes from the two models' logits. A temperature does not change an argmax, so
GDE is the same before and after temperature scaling (METHODS §10.2), and so is any per-row
constant or float32 rounding of either model's logits.

The validation set is not needed for the estimate. ``fit`` measures the same quantity on it
(``val_agreement``, against the classifier's validation accuracy: how far the equality is off
in distribution, a diagnostic) and the per-row residual variance of the agreement indicator
against correctness, which widens the sampling interval.

``per_sample`` is the per-row agreement :math:`\frac1k\sum_j \mathbf{1}[h(x_i) = h'_j(x_i)]` (a
0/1 indicator with one peer), so ``per_class`` is the agreement among the rows predicted as each
class.

References
----------
.. [1] Jiang, Y., Nagarajan, V., Baek, C. and Kolter, J. Z. "Assessing Generalization of SGD via
   Disagreement", ICLR 2022.
.. [2] Garg, S. et al. "Leveraging Unlabeled Data to Predict Out-of-Distribution Performance",
   ICLR 2022 (GDE as a baseline, Table 1; ``ATC_code/get_GDE_acc.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..core._features import FeatureArray
from ..core._peers import PeerPredictions, check_peer_logits, require_peer
from ..core._validation import check_logits
from ..core.base import Estimator
from ..core.params import Param
from ..core.registry import register

__all__ = ["GDE", "disagreement_rate"]


def disagreement_rate(logits: ArrayLike, peer_logits: ArrayLike) -> float:
    r"""The fraction of rows on which two models' predicted classes differ,
    :math:`\frac1m\sum_i \mathbf{1}[\arg\max_k z_{ik} \ne \arg\max_k z'_{ik}]`.

    Parameters
    ----------
    logits, peer_logits : array-like of shape (m, c)
        The two models' logits on the same rows (binary ``(m,)`` / ``(m, 1)`` accepted).

    Raises
    ------
    ValueError
        Malformed logits, or the two arrays differ in rows or classes.

    Examples
    --------
    >>> z = [[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]]
    >>> disagreement_rate(z, [[1.0, 0.0], [2.0, 1.0], [0.0, 4.0]])
    0.6666666666666666
    """
    z = check_logits(logits, "logits", keep_float32=True)
    peers = check_peer_logits(peer_logits, "peer_logits", n_rows=int(z.shape[0]),
                              rows_of="logits", n_classes=int(z.shape[1]))
    return float(np.mean(peers.predictions != z.argmax(axis=1)[None, :]))


def _agreement(predicted: NDArray[np.int64], peers: PeerPredictions) -> NDArray[np.float64]:
    """Per row, the fraction of peers that predict the classifier's class."""
    agree: NDArray[np.float64] = np.mean(peers.predictions == predicted[None, :], axis=0,
                                         dtype=np.float64)
    return agree


@register("gde")
class GDE(Estimator):
    r"""GDE: target accuracy = agreement of the classifier with an independently trained peer.

    .. math:: \widehat{\mathrm{acc}}_{GDE} = \frac{1}{k\,m}\sum_{j=1}^{k}\sum_{i=1}^{m}
              \mathbf{1}\big[\arg\max_c z_{ic} = \arg\max_c z^{(j)}_{ic}\big]

    Needs the peer's logits on the validation and target rows: ``fit(val_logits, val_labels,
    peer_val_logits=...)`` and ``estimate(target_logits, peer_target_logits=...)``; a call
    without them is refused in one line. It has no hyper-parameter.

    Notes
    -----
    ``diagnostics``: ``disagreement`` (:math:`1 - \widehat{\mathrm{acc}}`), ``n_peers``,
    ``val_agreement`` and ``val_accuracy`` (the equality measured in distribution).

    Examples
    --------
    >>> z = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0], [1.0, 2.0]])
    >>> peer = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.0, 2.0]])
    >>> est = GDE().fit(z, [0, 1, 0, 1], peer_val_logits=peer)
    >>> est.estimate(z, peer_target_logits=peer).accuracy
    0.75
    """

    needs_peer: ClassVar[bool] = True
    PARAMS: ClassVar[tuple[Param, ...]] = ()

    def _fit(self, val_logits: NDArray[np.float64], val_labels: NDArray[np.int64]) -> None:
        peers = self.fit_peers_
        assert peers is not None  # fit() refuses a call without them
        predicted = val_logits.argmax(axis=1)
        self.val_agreement_ = float(np.mean(_agreement(predicted, peers)))

    def _residual_variance(self, logits: NDArray[np.float64], labels: NDArray[np.int64]) -> float:
        """Per-row variance of the agreement against correctness on the validation rows, at
        least the binomial :math:`a_S(1 - a_S)`."""
        peers = self.fit_peers_
        assert peers is not None
        predicted = logits.argmax(axis=1)
        correct = (predicted == labels).astype(np.float64)
        a = float(correct.mean())
        resid = float(np.mean((_agreement(predicted, peers) - correct) ** 2))
        return max(resid, a * (1.0 - a))

    def _estimate(self, target_logits: NDArray[np.float64]) -> Any:
        raise require_peer(type(self).__name__, self.name, "peer_target_logits", "estimate")

    def _estimate_with_peers(
        self, target_logits: NDArray[np.float64], target_features: FeatureArray | None,
        target_peers: PeerPredictions | None,
    ) -> tuple[float, NDArray[np.float64] | None, Mapping[str, Any]]:
        assert target_peers is not None  # estimate() refuses a call without them
        per_sample = _agreement(target_logits.argmax(axis=1), target_peers)
        accuracy = float(per_sample.mean())
        return accuracy, per_sample, {
            "disagreement": 1.0 - accuracy, "n_peers": target_peers.n_peers,
            "val_agreement": self.val_agreement_, "val_accuracy": self.val_accuracy_,
        }
