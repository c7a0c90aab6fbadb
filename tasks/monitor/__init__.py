"""``alsa-bench monitor``: label-free accuracy of a deployed model, chunk by chunk, over time.

A reference set with labels, then batches of production logits without labels: every new chunk
is estimated once (with a shift-aware band), alerts fire when accuracy falls, realized accuracy
is joined in when labels arrive, and the history lives in DuckDB (:mod:`storage.monitor`).

Modules, in the order a run uses them:

=================  ============================================================================
``options``        the options, checked once (``--chunk``, ``-m``, ``--alert-below`` ...)
``files``          which production files are read, completeness, reading and checking a batch
``keys``           content hashes, chunk keys, estimator keys, fit keys (what is incremental)
``chunking``       files → chunks (``file``, ``ROWS``, ``1d``, ``1w``), one file in memory
``fit_cache``      fitted estimators kept per reference, signed (only our own files unpickled)
``estimation``     fitting on the reference, estimating a chunk, bands of small/empty chunks
``alerts``         the two alert rules and their direction
``realized``       labels → realized accuracy, the band's realized coverage
``figure``         the time-series figure
``runner``         one run, end to end: :func:`run_monitor`
``demo``           the offline 30-day Fashion-MNIST stream of ``alsa-bench monitor --demo``
=================  ============================================================================

``docs/MONITOR.md`` is the user's guide.
"""

from tasks.monitor.options import MonitorOptions, make_options
from tasks.monitor.runner import AlertRecord, MonitorResult, run_monitor

__all__ = ["AlertRecord", "MonitorOptions", "MonitorResult", "make_options", "run_monitor"]
