"""The one path of the extract and estimate stages, composed in this process as the flow does.

``extract`` = :func:`tasks.stages.extract.compute_logits` then ``ingest_logits``;
``estimate`` = :func:`tasks.stages.estimate.compute_estimates` then ``ingest_estimates``.
"""

from __future__ import annotations

from typing import Any

from tasks.runtime.refs import CheckpointRef, EstimatesRef, LogitsRef
from tasks.stages.estimate import compute_estimates, ingest_estimates
from tasks.stages.extract import compute_logits, ingest_logits


def extract(checkpoint: CheckpointRef, **kwargs: Any) -> LogitsRef:
    """Publish a run's logits and ingest them (keywords of ``compute_logits``)."""
    return ingest_logits(compute_logits(checkpoint, **kwargs))


def estimate(logits: LogitsRef, **kwargs: Any) -> EstimatesRef:
    """Publish a run's estimates and ingest them (keywords of ``compute_estimates``)."""
    return ingest_estimates(compute_estimates(logits, **kwargs))
