"""Tabular backbones: logistic regression, gradient-boosted trees and an MLP, each a
``torch.nn.Module`` whose whole state (preprocessing included) is tensors.

Every tabular classifier starts with a :class:`TableEncoder` fitted on the source training
split only; the tabular adapter (:mod:`tasks.models.modalities.tabular`) fits it, then fits the
model: scikit-learn for the two classical models (their fitted arrays are copied into buffers),
AdamW for the MLP. A checkpoint is therefore the project's ordinary one: ``torch.save`` of a
state dict of tensors, read back with ``torch.load(weights_only=True)``. No scikit-learn object
is ever pickled or unpickled; a reloaded model computes its logits from the stored arrays, in
the same order of operations as before it was saved, so they are bit-identical.

==========  =====================================================  ================================
key         model                                                  logits
==========  =====================================================  ================================
tab-logreg  ``sklearn.linear_model.LogisticRegression`` (L2,       ``x @ W.T + b`` on the one-hot
            C = 1, lbfgs) on a seeded 90 % of the training rows   encoding
tab-hgb     ``sklearn.ensemble.HistGradientBoostingClassifier``    the trees' raw score: the sum
            (up to 200 iterations, early stopping on a seeded      of the leaf values over the
            10 % of the training rows), its trees copied into      iterations plus the baseline,
            node arrays                                            as ``decision_function``
tab-mlp     torch MLP: one-hot encoding, 128 - 64 hidden units,    the output layer
            ReLU, dropout 0.1
==========  =====================================================  ================================

Encodings (:class:`TableEncoder`)
---------------------------------
``onehot`` (logistic regression, MLP): a numeric value is standardised with the training mean
and standard deviation after a missing value took the training median; a categorical column
becomes one indicator per declared level, and a level unseen in training (or a missing value)
leaves every indicator of the column at 0. The width is the dataset's ``input_shape``.
``ordinal`` (trees): numeric values as they are, missing values kept as ``NaN`` (the trees send
them where training taught them, or to the child with more training rows); a categorical value
as its level code, ``NaN`` when missing or unseen in training.

Why scikit-learn's trees and not LightGBM
-----------------------------------------
``HistGradientBoostingClassifier`` is LightGBM's algorithm (histograms, leaf-wise growth, native
missing values) inside scikit-learn, which the project already installs: no new binary
dependency, and its fitted trees are plain node arrays (``_predictors[i][k].nodes``) whose
prediction is a short, documented loop (``_predictor.pyx``: ``x <= threshold`` goes left, a
missing value follows ``missing_go_to_left``). :class:`GradientBoostedTrees` walks the same
arrays and adds the leaf values in scikit-learn's order (baseline, then iteration by
iteration), so its raw scores equal ``decision_function``'s bit for bit (tested).

Logits
------
Every model returns raw scores, never probabilities, as ``float32`` like every backbone (the two
classical models compute in ``float64``: ``scores`` returns that). A multi-class model returns one
column per class (``decision_function``'s ``c`` columns; their softmax is ``predict_proba``). A
binary model's ``decision_function`` is one column ``f`` (the log-odds of class 1); the logits are
``(-f/2, f/2)``, whose softmax is ``(1 - sigmoid(f), sigmoid(f))`` and whose difference is ``f``:
centred like a multinomial model's.

The seed
--------
The networks' seed draws their initial weights and batch order. The two classical models are
deterministic given their rows, so the seed draws their rows: logistic regression fits a seeded
90 % of the training rows, the trees hold out a seeded 10 % for early stopping. Three seeds are
three models, as for every other backbone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Final

import numpy as np
import torch
from torch import nn

from tasks.models.backbones.base import BackboneSpec

__all__ = [
    "FittedTabularModel",
    "GradientBoostedTrees",
    "LinearLogits",
    "SPECS",
    "TableEncoder",
    "TabularClassifier",
    "TabularMLP",
    "binary_logits",
]

#: Share of the training rows logistic regression fits (the seed draws which).
LOGREG_SUBSAMPLE: Final[float] = 0.9
#: Iterations and early-stopping hold-out of the trees.
HGB_MAX_ITER: Final[int] = 200
HGB_VALIDATION: Final[float] = 0.1


def binary_logits(score: torch.Tensor) -> torch.Tensor:
    """``(n,)`` log-odds ``f`` of class 1 → ``(n, 2)`` logits ``(-f/2, f/2)``."""
    half = score / 2
    return torch.stack([-half, half], dim=1)


class _Resizable(nn.Module):
    """A module whose buffers take the shapes of the state dict they load (fitted arrays whose
    size is known only after fitting: a table's columns, a forest's nodes)."""

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              local_metadata: dict[str, Any], strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        for name, buf in list(self._buffers.items()):
            stored = state_dict.get(prefix + name)
            if buf is not None and isinstance(stored, torch.Tensor) and (
                    stored.shape != buf.shape or stored.dtype != buf.dtype):
                self._buffers[name] = torch.empty_like(stored, device=buf.device)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)


class TableEncoder(_Resizable):
    """Preprocessing of a table, fitted on the source training split (module docstring).

    Parameters
    ----------
    mode : {"onehot", "ordinal"}
    """

    def __init__(self, mode: str) -> None:
        super().__init__()
        if mode not in ("onehot", "ordinal"):
            raise ValueError(f"mode must be 'onehot' or 'ordinal'; got {mode!r}.")
        self.mode = mode
        for name in ("median", "mean", "scale"):
            self.register_buffer(name, torch.zeros(0, dtype=torch.float64))
        self.register_buffer("level_counts", torch.zeros(0, dtype=torch.int64))
        self.register_buffer("seen", torch.zeros(0, dtype=torch.bool))
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))

    @property
    def width(self) -> int:
        """Columns of the encoding."""
        p = int(self.median.shape[0])
        if self.mode == "ordinal":
            return p + int(self.level_counts.shape[0])
        return p + int(self.level_counts.sum())

    def fit(self, table: Any) -> TableEncoder:
        """Fit on a :class:`~tasks.data.tables.Table` (the source training split)."""
        num = np.asarray(table.numeric, dtype=np.float64)
        if num.shape[0] == 0:
            raise ValueError("the encoder needs at least one training row; got none.")
        median = np.array([np.nanmedian(c) if np.any(~np.isnan(c)) else 0.0 for c in num.T])
        filled = np.where(np.isnan(num), median[None, :], num)
        mean = filled.mean(axis=0) if num.shape[1] else np.zeros(0)
        sd = filled.std(axis=0) if num.shape[1] else np.zeros(0)
        counts = np.array(table.level_counts, dtype=np.int64)
        seen = np.zeros(int(counts.sum()), dtype=bool)
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]) if counts.size else counts
        for j, off in enumerate(offsets):
            codes = np.asarray(table.categorical[:, j])
            seen[off + np.unique(codes[codes >= 0])] = True
        self.median = torch.from_numpy(median.astype(np.float64))
        self.mean = torch.from_numpy(mean.astype(np.float64))
        self.scale = torch.from_numpy(np.where(sd > 0, sd, 1.0).astype(np.float64))
        self.level_counts = torch.from_numpy(counts)
        self.seen = torch.from_numpy(seen)
        self.fitted = torch.ones((), dtype=torch.bool)
        return self

    def forward(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        """``(n, width)`` ``float64`` encoding of raw numeric and categorical columns."""
        if not bool(self.fitted):
            raise ValueError("the table encoder is not fitted; fit it on the training split "
                             "first (the tabular adapter does).")
        if numeric.shape[1] != self.median.shape[0] or categorical.shape[1] != \
                self.level_counts.shape[0]:
            raise ValueError(
                f"expected {self.median.shape[0]} numeric and {self.level_counts.shape[0]} "
                f"categorical columns; got {numeric.shape[1]} and {categorical.shape[1]}.")
        counts = self.level_counts
        offsets = torch.cumsum(counts, 0) - counts
        if self.mode == "ordinal":
            valid = categorical >= 0
            flat = (categorical.clamp_min(0) + offsets[None, :]).clamp_max(
                max(int(self.seen.shape[0]) - 1, 0))
            known = valid & self.seen[flat] if self.seen.numel() else valid
            codes = torch.where(known, categorical.to(torch.float64),
                                torch.full_like(categorical, float("nan"), dtype=torch.float64))
            return torch.cat([numeric.to(torch.float64), codes], dim=1)
        num = torch.where(torch.isnan(numeric), self.median[None, :], numeric)
        num = (num - self.mean[None, :]) / self.scale[None, :]
        onehot = torch.zeros((numeric.shape[0], int(counts.sum())), dtype=torch.float64,
                             device=numeric.device)
        valid = categorical >= 0
        if valid.any():
            rows, cols = torch.nonzero(valid, as_tuple=True)
            onehot[rows, categorical[rows, cols] + offsets[cols]] = 1.0
        onehot = onehot * self.seen[None, :].to(torch.float64)
        return torch.cat([num, onehot], dim=1)


class TabularClassifier(nn.Module):
    """A tabular classifier: ``forward(numeric, categorical) -> logits``, with its encoder."""

    encoder: TableEncoder

    def __init__(self, n_classes: int, mode: str) -> None:
        super().__init__()
        self.n_classes = int(n_classes)
        self.encoder = TableEncoder(mode)


class FittedTabularModel(TabularClassifier, ABC):
    """A classical model fitted in one call on the encoded training rows (``fit_arrays``)."""

    @abstractmethod
    def fit_arrays(self, x: np.ndarray, y: np.ndarray, seed: int) -> float:
        """Fit on encoded rows ``x`` (``float64``) and labels ``y``; return the training log
        loss."""


def _check_classes(classes: np.ndarray, n_classes: int, what: str) -> None:
    if not np.array_equal(np.asarray(classes), np.arange(n_classes)):
        raise ValueError(
            f"{what} needs every one of the {n_classes} classes among its training rows; it "
            f"got classes {np.asarray(classes).tolist()}."
        )


def _log_loss(logits: np.ndarray, y: np.ndarray) -> float:
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(y.size), y].mean())


class LinearLogits(FittedTabularModel):
    """Logistic regression: ``logits = onehot(x) @ weight.T + bias`` (buffers, no layer, so
    the model has no penultimate features)."""

    def __init__(self, n_classes: int, width: int) -> None:
        super().__init__(n_classes, "onehot")
        self.register_buffer("weight", torch.zeros((n_classes, width), dtype=torch.float64))
        self.register_buffer("bias", torch.zeros(n_classes, dtype=torch.float64))

    def fit_arrays(self, x: np.ndarray, y: np.ndarray, seed: int) -> float:
        from sklearn.linear_model import LogisticRegression

        rng = np.random.default_rng([int(seed), 0x106])
        keep = np.sort(rng.permutation(y.size)[: max(1, int(round(LOGREG_SUBSAMPLE * y.size)))])
        model = LogisticRegression(C=1.0, max_iter=2000)
        model.fit(x[keep], y[keep])
        _check_classes(model.classes_, self.n_classes, "logistic regression")
        coef = np.asarray(model.coef_, dtype=np.float64)
        bias = np.asarray(model.intercept_, dtype=np.float64)
        if self.n_classes == 2:  # one column f: logits (-f/2, f/2)
            coef, bias = np.vstack([-coef / 2, coef / 2]), np.array([-bias[0] / 2, bias[0] / 2])
        if coef.shape != tuple(self.weight.shape):
            raise ValueError(f"expected coefficients of shape {tuple(self.weight.shape)}; the "
                             f"encoding gave {coef.shape}.")
        self.weight = torch.from_numpy(np.ascontiguousarray(coef))
        self.bias = torch.from_numpy(np.ascontiguousarray(bias))
        return _log_loss(x[keep] @ coef.T + bias, y[keep])

    def scores(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        """``(n, c)`` ``float64`` logits (``forward`` returns them as ``float32``)."""
        x = self.encoder(numeric, categorical)
        return x @ self.weight.T + self.bias

    def forward(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        return self.scores(numeric, categorical).float()


class GradientBoostedTrees(FittedTabularModel, _Resizable):
    """Scikit-learn's histogram gradient boosting, its trees held as node arrays.

    Buffers (``N`` nodes over every tree, ``T = iterations x k`` trees in scikit-learn's order,
    iteration-major; ``k = 1`` for a binary problem, ``c`` otherwise): ``feature``,
    ``threshold``, ``left``, ``right`` (global node indices), ``missing_left``, ``is_leaf``,
    ``value``, ``roots`` (first node of each tree) and ``baseline`` (``k``).
    """

    def __init__(self, n_classes: int) -> None:
        super().__init__(n_classes, "ordinal")
        for name, dtype in (("feature", torch.int64), ("left", torch.int64),
                            ("right", torch.int64), ("roots", torch.int64),
                            ("threshold", torch.float64), ("value", torch.float64),
                            ("baseline", torch.float64), ("missing_left", torch.bool),
                            ("is_leaf", torch.bool)):
            self.register_buffer(name, torch.zeros(0, dtype=dtype))

    @property
    def trees_per_iteration(self) -> int:
        """``k``: 1 for a binary problem, the number of classes otherwise."""
        return 1 if self.n_classes == 2 else self.n_classes

    def fit_arrays(self, x: np.ndarray, y: np.ndarray, seed: int) -> float:
        from sklearn.ensemble import HistGradientBoostingClassifier

        model = HistGradientBoostingClassifier(
            max_iter=HGB_MAX_ITER, early_stopping=True, validation_fraction=HGB_VALIDATION,
            random_state=int(seed) % (2**32),
        )
        model.fit(x, y)
        _check_classes(model.classes_, self.n_classes, "the gradient-boosted trees")
        self.load_forest(model)
        with torch.no_grad():
            logits = self._logits(self._raw(torch.from_numpy(np.ascontiguousarray(x))))
        return _log_loss(logits.numpy(), y)

    def load_forest(self, model: Any) -> None:
        """Copy the trees of a fitted ``HistGradientBoostingClassifier`` into the buffers."""
        k = self.trees_per_iteration
        if model.n_trees_per_iteration_ != k:
            raise ValueError(f"expected {k} trees per iteration; the model has "
                             f"{model.n_trees_per_iteration_}.")
        parts: dict[str, list[np.ndarray]] = {n: [] for n in (
            "feature", "threshold", "left", "right", "missing_left", "is_leaf", "value")}
        roots, start = [], 0
        for iteration in model._predictors:
            for predictor in iteration:
                nodes = predictor.nodes
                if np.any(nodes["is_categorical"]):
                    raise ValueError("categorical splits are not supported: the encoder passes "
                                     "categories as ordinal codes.")
                roots.append(start)
                parts["feature"].append(nodes["feature_idx"].astype(np.int64))
                parts["threshold"].append(nodes["num_threshold"].astype(np.float64))
                parts["left"].append(nodes["left"].astype(np.int64) + start)
                parts["right"].append(nodes["right"].astype(np.int64) + start)
                parts["missing_left"].append(nodes["missing_go_to_left"].astype(bool))
                parts["is_leaf"].append(nodes["is_leaf"].astype(bool))
                parts["value"].append(nodes["value"].astype(np.float64))
                start += nodes.shape[0]
        for name, chunks in parts.items():
            setattr(self, name, torch.from_numpy(np.concatenate(chunks)))
        self.roots = torch.tensor(roots, dtype=torch.int64)
        self.baseline = torch.from_numpy(
            np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1).copy())

    def _raw(self, x: torch.Tensor) -> torch.Tensor:
        """``(n, k)`` raw scores of encoded rows ``x`` (``float64``), summed as scikit-learn
        sums them: the baseline, then every iteration's leaf values in order.

        One walker per (row, tree) starts at the tree's root; each step moves only the walkers
        not yet at a leaf (most reach one within a few levels), with scikit-learn's rule: a
        missing value follows ``missing_left``, else ``x <= threshold`` goes left. The walk runs
        in numpy on the CPU (half the time of the same walk in torch, measured on an 1,100-tree
        forest) and the scores come back on ``x``'s device.
        """
        if self.roots.numel() == 0:
            raise ValueError("the trees are not fitted; the tabular adapter fits them.")
        values = np.ascontiguousarray(x.detach().cpu().numpy(), dtype=np.float64)
        n, width = values.shape
        k, trees = self.trees_per_iteration, int(self.roots.numel())
        feature = self.feature.cpu().numpy()
        threshold = self.threshold.cpu().numpy()
        left, right = self.left.cpu().numpy(), self.right.cpu().numpy()
        missing_left, is_leaf = self.missing_left.cpu().numpy(), self.is_leaf.cpu().numpy()
        flat = values.ravel()
        node = np.tile(self.roots.cpu().numpy(), n)
        offset = np.repeat(np.arange(n, dtype=np.int64) * width, trees)
        active = np.flatnonzero(~is_leaf[node])
        while active.size:
            current = node[active]
            value = flat.take(offset.take(active) + feature.take(current))
            go_left = np.where(np.isnan(value), missing_left.take(current),
                               value <= threshold.take(current))
            step = np.where(go_left, left.take(current), right.take(current))
            node[active] = step
            active = active[~is_leaf.take(step)]
        leaves = self.value.cpu().numpy()[node].reshape(n, trees // k, k)
        raw = np.zeros((n, k), dtype=np.float64) + self.baseline.cpu().numpy()[None, :]
        for i in range(leaves.shape[1]):
            raw = raw + leaves[:, i, :]
        return torch.from_numpy(raw).to(x.device)

    def _logits(self, raw: torch.Tensor) -> torch.Tensor:
        return binary_logits(raw[:, 0]) if self.trees_per_iteration == 1 else raw

    def scores(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        """``(n, c)`` ``float64`` logits (``forward`` returns them as ``float32``)."""
        return self._logits(self._raw(self.encoder(numeric, categorical)))

    def forward(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        return self.scores(numeric, categorical).float()


class TabularMLP(TabularClassifier):
    """One-hot encoding, ``width - 128 - 64 - c``, ReLU, dropout 0.1 (``float32``)."""

    def __init__(self, n_classes: int, width: int, hidden: tuple[int, int] = (128, 64),
                 dropout: float = 0.1) -> None:
        super().__init__(n_classes, "onehot")
        self.body = nn.Sequential(
            nn.Linear(width, hidden[0]), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden[0], hidden[1]), nn.ReLU(), nn.Dropout(dropout),
        )
        self.head = nn.Linear(hidden[1], n_classes)

    def forward(self, numeric: torch.Tensor, categorical: torch.Tensor) -> torch.Tensor:
        x = self.encoder(numeric, categorical).to(self.head.weight.dtype)
        return self.head(self.body(x))


def _width(name: str, shape: tuple[int, ...]) -> int:
    if len(shape) != 1:
        raise ValueError(f"backbone {name!r} needs tabular inputs, input_shape=(one-hot width,); "
                         f"got {shape}.")
    return int(shape[0])


def _build_logreg(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    return LinearLogits(n_classes, _width("tab-logreg", shape))


def _build_hgb(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    _width("tab-hgb", shape)
    return GradientBoostedTrees(n_classes)


def _build_mlp(n_classes: int, shape: tuple[int, ...]) -> nn.Module:
    return TabularMLP(n_classes, _width("tab-mlp", shape))


SPECS: Final[tuple[BackboneSpec, ...]] = (
    BackboneSpec(
        "tab-logreg", _build_logreg, "logistic regression (L2, lbfgs) on the one-hot encoding",
        ("tabular",), epochs=1, batch_size=4096, lr=0.0, weight_decay=0.0,
    ),
    BackboneSpec(
        "tab-hgb", _build_hgb, "histogram gradient-boosted trees (scikit-learn), raw scores",
        ("tabular",), epochs=1, batch_size=4096, lr=0.1, weight_decay=0.0,
    ),
    BackboneSpec(
        "tab-mlp", _build_mlp, "MLP 128-64 on the one-hot encoding", ("tabular",),
        epochs=40, batch_size=128, lr=3e-3, weight_decay=1e-4,
    ),
)
