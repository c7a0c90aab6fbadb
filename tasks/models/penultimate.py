"""The penultimate representation of any backbone: the input of its output layer.

The feature-aware estimators (:mod:`estimators.features.distcs`, :mod:`estimators.features.aline`,
:mod:`estimators.features.dispersion`) read what the classifier's last linear layer reads: the pooled
512 features of a ResNet18, the hidden units of an MLP or of a MiniLM head, a GNN's node
embedding (``NodeClassifier.embed``), DistilBERT's pooled output. Every backbone of this project
ends in an ``nn.Linear`` whose output *is* the model's output, so one rule finds it without a
per-backbone list:

    the penultimate features of a forward pass are the input of the last ``nn.Linear`` called
    in it, provided that layer's output is the tensor the model returns.

:class:`PenultimateCapture` hooks every ``nn.Linear`` of a model (``register_forward_hook``)
and the model itself; at the end of each model forward it keeps the last linear layer's input
(as ``float16`` on the CPU, the storage dtype) if that layer produced the model's output, and
otherwise records that the model has no output layer it can name (the bag-of-words text model,
an ``EmbeddingBag`` plus a bias, has none): :meth:`PenultimateCapture.features` then returns
None and the pipeline stores no features for that run. Hooks read tensors and change nothing,
so logits computed under a capture are bit-identical to logits computed without one.

Examples
--------
>>> import torch
>>> from torch import nn
>>> model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).eval()
>>> x = torch.ones(5, 4)
>>> with PenultimateCapture(model) as cap, torch.inference_mode():
...     logits = model(x)
>>> cap.features().shape, str(cap.features().dtype)
((5, 3), 'float16')
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["FEATURE_DTYPE", "PenultimateCapture"]

#: Storage dtype of penultimate features (half the bytes of float32; the methods compute in
#: float32/float64 and lose nothing they measure at this precision).
FEATURE_DTYPE = np.float16


class PenultimateCapture:
    """Collect the input of a model's output layer over every forward pass inside the block.

    Parameters
    ----------
    model : torch.nn.Module
        The classifier. It is not modified; the hooks are removed when the block ends.

    Notes
    -----
    One forward of ``model`` gives one chunk; :meth:`features` concatenates the chunks in call
    order, which is the order of the logits an adapter concatenates.
    """

    def __init__(self, model: nn.Module) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}.")
        self.model = model
        self._handles: list[Any] = []
        self._last: tuple[torch.Tensor, torch.Tensor] | None = None
        self._chunks: list[np.ndarray] = []
        self._missing = False

    # ---------------------------------------------------------------------------- the hooks
    def _on_linear(self, module: nn.Module, inputs: tuple[Any, ...], output: Any) -> None:
        if inputs and isinstance(inputs[0], torch.Tensor) and isinstance(output, torch.Tensor):
            self._last = (inputs[0], output)

    def _on_model(self, module: nn.Module, inputs: tuple[Any, ...], output: Any) -> None:
        last, self._last = self._last, None
        if last is None or not isinstance(output, torch.Tensor) or last[1] is not output:
            self._missing = True  # no linear layer produced what the model returned
            return
        x = last[0].detach()
        flat = x if x.ndim == 2 else x.reshape(output.shape[0], x.shape[-1] * (
            x[0].numel() // x.shape[-1] if x.shape[0] else 1))
        self._chunks.append(flat.float().cpu().numpy().astype(FEATURE_DTYPE))

    # ---------------------------------------------------------------------------- the block
    def __enter__(self) -> PenultimateCapture:
        self._chunks, self._missing, self._last = [], False, None
        for module in self.model.modules():
            if isinstance(module, nn.Linear):
                self._handles.append(module.register_forward_hook(self._on_linear))
        self._handles.append(self.model.register_forward_hook(self._on_model))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    # ---------------------------------------------------------------------------- the result
    def features(self) -> np.ndarray | None:
        """``(n, d)`` ``float16`` features of every forward in call order, or None when some
        forward had no output layer to read (or no forward ran)."""
        if self._missing or not self._chunks:
            return None
        return np.concatenate(self._chunks) if len(self._chunks) > 1 else self._chunks[0]

    def unpermute(self, order: np.ndarray) -> None:
        """Put the captured rows back in sample order after forwards ran over ``order``
        (row ``i`` captured is sample ``order[i]``), as an adapter that sorts by length does
        with its logits. Nothing happens when no features were captured."""
        features = self.features()
        order = np.asarray(order, dtype=np.int64)
        if features is None:
            return
        if features.shape[0] != order.shape[0]:
            raise ValueError(
                f"order must have one entry per captured row ({features.shape[0]}); got "
                f"{order.shape[0]}.")
        rows = np.empty_like(features)
        rows[order] = features
        self._chunks = [rows]


# ------------------------------------------------------------------------- per modality
def predict_with_features(
    adapter: Any, model: nn.Module, spec: Any, samples: Any, device: torch.device,
    batch_size: int,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Logits as ``adapter.predict`` returns them (bit-identical) and the penultimate features.

    The features are ``(n, d)`` ``float16``, one row per logits row, or None when the backbone
    has no output layer to read. The modality adapters (:mod:`tasks.models.modalities`) are not
    changed for this (their code is part of the train stage's cache key, so touching them would
    retrain every model); where an adapter's forwards do not map one to one to its rows, this
    function knows how they map:

    * **graph**: one full-batch forward gives every node's embedding; the split's nodes are kept;
    * **text**: the adapter memoises logits by text and sorts texts by length; the texts its
      memo does not hold yet go through one forward pass, run as ``adapter.predict`` runs it
      (same texts, same order, so the logits are the ones it returns), which also captures their
      features; both are memoised for the run's later splits (:func:`_text`);
    * **image** and anything else: the forwards are the adapter's batches, in row order.

    Parameters
    ----------
    adapter : tasks.models.modalities.base.ModalityAdapter
    model : torch.nn.Module
    spec : DatasetSpec
    samples : split samples of the adapter's modality
    device : torch.device
    batch_size : int

    Returns
    -------
    logits : ndarray of shape (n, n_classes), float32
    features : ndarray of shape (n, d), float16, or None
    """
    if getattr(adapter, "name", "") == "graph":
        return _graph(model, samples, device)
    if getattr(adapter, "name", "") == "text":
        return _text(adapter, model, spec, samples, device, batch_size)
    with PenultimateCapture(model) as capture:
        logits = adapter.predict(model, spec, samples, device, batch_size)
    features = capture.features()
    if features is None or features.shape[0] != logits.shape[0]:
        return logits, None
    return logits, features


def _graph(model: nn.Module, samples: Any, device: torch.device
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """The graph adapter's ``predict`` (one full-batch forward), capturing the embeddings."""
    from tasks.models.modalities.graph import _as_split, graph_tensors
    from tasks.runtime.allocator import keep_freed_memory

    keep_freed_memory()
    split = _as_split(samples, "samples")
    model.to(device).eval()
    x, edges = graph_tensors(split.graph, device)
    with PenultimateCapture(model) as capture, torch.inference_mode():
        logits = model(x, edges)[torch.from_numpy(split.nodes).to(device)]
    features = capture.features()
    out = logits.float().cpu().numpy().astype(np.float32, copy=False)
    return out, None if features is None else features[split.nodes]


#: Features of the texts in the text adapter's logits memo: ``(memo, {text key: row})``, reset
#: whenever the adapter starts a new memo (another model, or new weights).
_TEXT_FEATURES: list[Any] = [None, {}]


def _text(adapter: Any, model: nn.Module, spec: Any, samples: Any, device: torch.device,
          batch_size: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Logits and head inputs of a text split in one forward pass per distinct text of the run.

    The texts the adapter's logits memo lacks are run exactly as ``adapter.predict`` would run
    them (the same texts in the same order through ``adapter._predict``, which sorts them by
    length), under a :class:`PenultimateCapture`; their logits go into the adapter's memo and
    their features into this module's memo beside it. Every other row is read from the memos.
    Target splits share most of their texts (label shift and domain mixtures re-sample the
    clean pool), so each distinct text of an extract stage meets the model once (the first
    version ran a second pass over every split's texts for the features alone: the extract
    stage of ``rt-reviews`` x ``minilm-ft`` took about twice as long).

    Returns ``(logits, None)`` for a model without an output layer to read (the bag-of-words
    model) and where the capture finds none.
    """
    from tasks.data.texts import as_texts, take_texts, text_key

    if not any(isinstance(m, nn.Linear) for m in model.modules()):
        return adapter.predict(model, spec, samples, device, batch_size), None
    texts = as_texts(samples, "predict")
    keys = [text_key(t) for t in texts]
    memo = adapter._memo_for(model)
    if _TEXT_FEATURES[0] is not memo:
        _TEXT_FEATURES[:] = [memo, {}]
    features: dict[str, np.ndarray] = _TEXT_FEATURES[1]
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        if k not in memo or k not in features:
            first.setdefault(k, i)
    if first:
        unique = take_texts(texts, list(first.values()))
        with PenultimateCapture(model) as capture:
            fresh = adapter._predict(model, spec, unique, device, batch_size)
        captured = capture.features()
        if captured is None or captured.shape[0] != len(first):
            return adapter.predict(model, spec, samples, device, batch_size), None
        lengths = _featurize_lengths(model, unique, device)  # the order _predict ran them in
        ran = (np.argsort(lengths, kind="stable") if lengths is not None
               else np.arange(len(first)))
        rows = np.empty_like(captured)
        rows[ran] = captured
        for k, row in zip(first, fresh):
            memo.setdefault(k, row)  # a logit row already served stays the one served
        features.update(zip(first, rows))
    n_out = int(getattr(spec, "n_classes", 0))
    if not keys:
        return np.zeros((0, n_out), dtype=np.float32), None
    logits = np.stack([memo[k] for k in keys]).astype(np.float32, copy=False)
    return logits, np.stack([features[k] for k in keys])


def _featurize_lengths(model: nn.Module, texts: Any, device: torch.device) -> Any:
    """The token lengths ``adapter._predict`` sorts ``texts`` by (None: kept in order)."""
    from tasks.models.modalities.text import _featurize

    return _featurize(model, texts, device, "predict").lengths()
