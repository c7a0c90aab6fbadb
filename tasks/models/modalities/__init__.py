"""Modality adapters: how a split of each modality is batched, trained on and predicted.

==========  ==========================================  ===============================
modality    a split's samples                           module
==========  ==========================================  ===============================
``image``   ``uint8``/float array ``(n, ...)``          :mod:`tasks.models.modalities.image`
``graph``   :class:`tasks.data.graphs.GraphSplit`            :mod:`tasks.models.modalities.graph`
``text``    ``object`` array of ``str`` ``(n,)``        :mod:`tasks.models.modalities.text`
``tabular`` :class:`tasks.data.tables.Table` (rows)          :mod:`tasks.models.modalities.tabular`
==========  ==========================================  ===============================

Examples
--------
>>> get_adapter("graph").cache_splits
False
"""

from __future__ import annotations

import importlib

from tasks.models.modalities.base import FitReport, ModalityAdapter

__all__ = ["FitReport", "ModalityAdapter", "available_modalities", "get_adapter"]

_MODULES = {
    "image": "tasks.models.modalities.image",
    "graph": "tasks.models.modalities.graph",
    "text": "tasks.models.modalities.text",
    "tabular": "tasks.models.modalities.tabular",
}


def available_modalities() -> tuple[str, ...]:
    """Modalities with an adapter, sorted."""
    return tuple(sorted(_MODULES))


def get_adapter(modality: str) -> ModalityAdapter:
    """The adapter of ``modality`` (its module is imported on first use).

    Raises
    ------
    ValueError
        If no adapter exists for ``modality``; the message lists those that do.
    """
    try:
        module = _MODULES[modality]
    except (KeyError, TypeError):
        raise ValueError(
            f"modality must be one of {', '.join(available_modalities())}; got {modality!r}."
        ) from None
    return importlib.import_module(module).ADAPTER
