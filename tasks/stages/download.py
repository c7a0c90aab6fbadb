"""Download stage: stage a registered dataset's raw files and return a :class:`DatasetRef`."""

from __future__ import annotations

from pathlib import Path

from storage.paths import data_dir
from tasks.data.datasets import get_dataset_spec
from tasks.data.files import files_digest
from tasks.runtime.refs import DatasetRef


def stage_dataset(name: str, root: Path | str | None = None) -> DatasetRef:
    """Stage the raw files of dataset ``name`` under ``root`` and fingerprint them.

    Staging is idempotent: verified files already in place are kept, so a second call only
    re-reads and re-hashes them.

    Parameters
    ----------
    name : str
        Dataset registry key (see :func:`tasks.data.datasets.available_datasets`).
    root : Path or str, optional
        Dataset root; default :func:`storage.paths.data_dir` (``$ALSA_BENCH_HOME/data``).

    Returns
    -------
    DatasetRef
        ``name``, the absolute root, and the SHA-256 over the names and bytes of the staged raw
        files (independent of ``root``).

    Raises
    ------
    ValueError
        If ``name`` is not a registered dataset.
    tasks.data.datasets.fmnist.DatasetUnavailableError
        If the files can be neither found nor downloaded (the message says how to install them).
    tasks.data.datasets.fmnist.ChecksumError
        If a file's checksum differs from the published one.
    """
    spec = get_dataset_spec(name)
    folder = Path(root) if root is not None else data_dir()
    folder = folder.resolve()
    files = spec.stage(folder)
    return DatasetRef(name=spec.name, root=str(folder), sha256=files_digest(files))


# ------------------------------------------------------------------------------- the @task
from prefect import task  # noqa: E402  (the plain function above needs no Prefect)

from tasks.stages.common import STAGE_CACHE, forget_failure_record, log_task_failure  # noqa: E402

@task(
    name="download",
    cache_policy=STAGE_CACHE,
    on_failure=[log_task_failure, forget_failure_record],
    task_run_name="download-{name}",
)
def download_task(name: str, root: str, code_version: str) -> DatasetRef:
    """Stage a dataset under ``root`` (:func:`tasks.stages.download.stage_dataset`)."""
    return stage_dataset(name, Path(root))

