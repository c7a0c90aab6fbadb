"""Extract stage: logits of a trained classifier on its validation split and every target split.

The checkpoint's staged dataset is found (under ``storage.paths.data_dir()``, else the root
recorded at training) and the digest of its raw files checked against the one recorded
at training; the validation split is re-drawn with the dataset's fixed split seed (the same
samples the training run held out), and the target splits come from the shift cache
(:mod:`tasks.stages.splits`, generated on first use). Logits come from the modality's adapter
(:mod:`tasks.models.modalities`): batches of images, or one full-batch pass over each split's graph.
All logits are computed and checked first (one row per sample, ``n_classes`` columns, finite,
labels in range), with the model in eval mode and no gradients; only then are they published as
one immutable, content-addressed Parquet file (:func:`storage.results.write_logits_file`) under
the results root. :func:`compute_logits` stops there (it is what a Dask worker runs: it never
opens the database); :func:`ingest_logits` is the single writer's half, replacing the run's
partition in one transaction (:func:`storage.results.ingest`).
A split that fails the checks writes nothing.

Beside the logits, the stage stores the classifier's **penultimate features** (the input of its
output layer, :mod:`tasks.models.penultimate`) of the validation split, every target split and
a seeded subsample of at most :data:`storage.features.TRAIN_SUBSAMPLE` training rows, as
content-addressed ``float16`` ``.npy`` files (:mod:`storage.features`) that the logits file's
footer lists and ingestion records in ``feature_files``; the feature-aware estimators read them.
A backbone without a linear output layer (the bag-of-words text model) stores none, and
``features=False`` turns them off. Capturing them leaves the logits bit-identical.

Splits written (``storage.logits.SplitInfo``):

* ``val``: role ``"val"``, shift family ``"source"``, shift ``"val"``, no severity;
* one per :func:`tasks.data.targets.target_splits` entry: role ``"target"`` with the split's family,
  shift and severity.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from storage.db import connect
from storage.features import TRAIN_SPLIT, TRAIN_SUBSAMPLE, FeatureEntry, write_features
from storage.logits import SplitInfo, run_digest
from storage.paths import data_dir, db_path
from storage.results import ingest, results_root, write_logits_file
from storage.runs import RunInfo
from tasks.models.backbones import check_backbone, get_backbone
from tasks.data.datasets import get_dataset_spec
from storage.hashing import file_sha256
from tasks.data.files import files_digest
from tasks.models.modalities import get_adapter
from tasks.models.penultimate import predict_with_features
from tasks.runtime.refs import CheckpointRef, DatasetRef, LogitsRef, resolve
from tasks.stages.splits import iter_target_splits
from tasks.runtime.checkpoints import load_checkpoint, read_sidecar
from tasks.runtime.devices import resolve_device
from tasks.runtime.reproducible import ComputeMode, compute_mode
from tasks.runtime.threads import pinned_threads

logger = logging.getLogger(__name__)

#: Shift family and shift recorded for the validation split.
VAL_FAMILY = "source"
VAL_SHIFT = "val"


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def staged_dataset(checkpoint: CheckpointRef, meta: dict, sidecar: dict) -> DatasetRef:
    """Find the checkpoint's staged dataset and check it is the data the model was trained on."""
    spec = get_dataset_spec(checkpoint.dataset)
    expected = str(meta.get("dataset_sha256"))
    # this state folder's data first: a copied folder never reads the folder it was copied from
    roots = [data_dir().resolve()]
    if sidecar.get("dataset_root"):
        recorded = Path(resolve(str(sidecar["dataset_root"])))
        if recorded != roots[0]:
            roots.append(recorded)
    found: list[str] = []
    for root in roots:
        files = spec.raw_files(root)
        if not all(p.is_file() for p in files):
            found.append(f"{str(root)!r}: not staged")
            continue
        sha = files_digest(files)
        if sha == expected:
            return DatasetRef(name=spec.name, root=str(root), sha256=sha)
        found.append(f"{str(root)!r}: digest {sha[:12]}")
    raise ValueError(
        f"The dataset {spec.name!r} that {checkpoint.run_key!r} was trained on (digest "
        f"{expected[:12]}) is not staged: {'; '.join(found)}. Re-run the download and train "
        f"stages."
    )


def _checked(
    info: SplitInfo, logits: np.ndarray, labels: np.ndarray, n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """The split's logits and labels after the checks of the module docstring."""
    labels = np.asarray(labels)
    if logits.ndim != 2 or logits.shape != (labels.shape[0], n_classes):
        raise ValueError(
            f"split {info.split!r}: expected logits of shape ({labels.shape[0]}, {n_classes}) "
            f"(one row per labelled sample, one column per class); got {logits.shape}."
        )
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(
            f"split {info.split!r} has label {int(labels.max())}, outside 0..{n_classes - 1}: the "
            f"class counts of the model and of the split disagree."
        )
    if not np.all(np.isfinite(logits)):
        raise ValueError(f"split {info.split!r}: the model produced NaN or infinite logits.")
    return logits, labels.astype(np.int64, copy=False)


def open_checkpoint(
    checkpoint: CheckpointRef,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], DatasetRef]:
    """A run's weights, metadata and staged dataset, after checking they are the ones trained.

    The file must exist, have the SHA-256 recorded at training, belong to the run, and its
    dataset must still be staged with the digest it was trained on. Every stage that loads a
    trained model (extract, the model-aware methods of the estimate stage) goes through here.

    Parameters
    ----------
    checkpoint : CheckpointRef
        From :func:`tasks.stages.train.train_classifier`.

    Returns
    -------
    state_dict, meta, sidecar : dict
        As :func:`tasks.stages.train.load_checkpoint` and :func:`tasks.stages.train.read_sidecar` return them.
    dataset : DatasetRef
        The staged dataset (:func:`staged_dataset`).

    Raises
    ------
    FileNotFoundError
        If the checkpoint file is missing.
    ValueError
        If the file changed since training, belongs to another run, or the staged dataset
        differs from the one trained on.
    """
    path = Path(checkpoint.path)
    if not path.is_file():
        raise FileNotFoundError(
            f"checkpoint file {str(path)!r} of run {checkpoint.run_key!r} does not exist; "
            f"re-run the train stage."
        )
    sha = file_sha256(path)
    if sha != checkpoint.sha256:
        raise ValueError(
            f"checkpoint file {str(path)!r} has SHA-256 {sha[:12]}..., not the "
            f"{checkpoint.sha256[:12]}... recorded when {checkpoint.run_key!r} was trained; "
            f"re-run the train stage."
        )
    state, meta = load_checkpoint(path)
    if meta.get("run_key") != checkpoint.run_key:
        raise ValueError(
            f"checkpoint file {str(path)!r} belongs to run {meta.get('run_key')!r}, not "
            f"{checkpoint.run_key!r}."
        )
    sidecar = read_sidecar(path)
    return state, meta, sidecar, staged_dataset(checkpoint, meta, sidecar)


#: Seed stream of the training subsample whose features are stored (mixed with the run seed).
TRAIN_SUBSAMPLE_STREAM = 0x5EED_FEA7


def train_subsample(n_train: int, seed: int, limit: int = TRAIN_SUBSAMPLE) -> np.ndarray:
    """Sorted positions of the training rows whose features are stored: all of them up to
    ``limit``, else ``limit`` drawn without replacement by ``numpy.random.default_rng([seed,
    TRAIN_SUBSAMPLE_STREAM])``, so a run's subsample is fixed by its seed.

    Examples
    --------
    >>> train_subsample(5, 0).tolist()
    [0, 1, 2, 3, 4]
    >>> len(train_subsample(50_000, 0)), bool((train_subsample(50_000, 0) == train_subsample(50_000, 0)).all())
    (10000, True)
    """
    if n_train <= limit:
        return np.arange(n_train, dtype=np.int64)
    rng = np.random.default_rng([int(seed), TRAIN_SUBSAMPLE_STREAM])
    return np.sort(rng.choice(n_train, size=limit, replace=False)).astype(np.int64)


class _FeatureWriter:
    """Publishes a run's feature files while its logits are computed; stops (and stores none)
    at the first split whose features the backbone cannot give."""

    def __init__(self, root: Path, *, enabled: bool) -> None:
        self.root, self.enabled = root, enabled
        self.entries: list[FeatureEntry] = []
        self.created: list[Path] = []  # files this stage wrote, removed if it fails

    def discard(self) -> None:
        """Remove the files this stage wrote (it failed: nothing names them)."""
        for path in self.created:
            path.unlink(missing_ok=True)
        self.created.clear()

    def predict(self, adapter: Any, model: Any, spec: Any, samples: Any, device: Any,
                batch_size: int) -> tuple[np.ndarray, np.ndarray | None]:
        if not self.enabled:
            return adapter.predict(model, spec, samples, device, batch_size), None
        return predict_with_features(adapter, model, spec, samples, device, batch_size)

    def _stop(self, why: str) -> None:
        if self.enabled:
            logger.info("no penultimate features stored: %s", why)
        self.enabled, self.entries = False, []
        self.discard()

    def add(self, info: SplitInfo, features: np.ndarray | None) -> None:
        if not self.enabled:
            return
        if features is None:
            self._stop(f"the backbone gives none for split {info.split!r} (no linear output "
                       "layer)")
            return
        self.entries.append(write_features(self.root, info.split, info.role, features,
                                           created=self.created))

    def add_train(self, features: np.ndarray | None, labels: np.ndarray) -> None:
        if not self.enabled:
            return
        if features is None:
            self._stop("the backbone gives none for the training subsample")
            return
        if features.shape[0] == 0:  # no training set (a pretrained model): no train entry
            return
        self.entries.append(write_features(self.root, TRAIN_SPLIT, "train", features, labels,
                                           created=self.created))


def _compute_splits(adapter: Any, model: Any, spec: Any, source: Any, dataset: DatasetRef,
                    dev: Any, batch_size: int, n_classes: int,
                    computed: list[tuple[SplitInfo, np.ndarray, np.ndarray]],
                    feats: _FeatureWriter, seed: int) -> None:
    """Logits (into ``computed``) and features (through ``feats``) of every split of a run."""
    val_logits, val_features = feats.predict(adapter, model, spec, source.val_x, dev,
                                             batch_size)
    val_info = SplitInfo("val", "val", VAL_FAMILY, VAL_SHIFT, None)
    computed.append((val_info, *_checked(val_info, val_logits, source.val_y, n_classes)))
    feats.add(val_info, val_features)
    for split, samples, labels in iter_target_splits(dataset):
        logits, split_features = feats.predict(adapter, model, spec, samples, dev, batch_size)
        info = SplitInfo(split.name, "target", split.shift_family, split.shift, split.severity)
        computed.append((info, *_checked(info, logits, labels, n_classes)))
        feats.add(info, split_features)
    if feats.enabled:
        index = train_subsample(adapter.size(source.train_x), seed)
        _, train_features = feats.predict(adapter, model, spec,
                                          adapter.take(source.train_x, index), dev,
                                          batch_size)
        feats.add_train(train_features, np.asarray(source.train_y)[index])


def compute_logits(
    checkpoint: CheckpointRef,
    *,
    suite: str = "fmnist",
    db: str | Path | None = None,
    device: str = "auto",
    batch_size: int = 1024,
    code_version: str = "",
    results: str | Path | None = None,
    features: bool = True,
) -> LogitsRef:
    """Compute the logits of every split of one run and publish them as one Parquet file.

    Never opens the database: this is what a worker runs; :func:`ingest_logits` stores the rows.

    Parameters
    ----------
    checkpoint : CheckpointRef
        Trained classifier (from :func:`tasks.stages.train.train_classifier`).
    suite : str, default "fmnist"
        Benchmark suite recorded in the ``runs`` row; must be the dataset's suite.
    db : str or Path, optional
        The DuckDB file the flow will ingest into (default :func:`storage.paths.db_path`);
        never opened here. Without ``results``, the results root lies beside it.
    device : str, default "auto"
        ``"auto"`` (CUDA when present), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    batch_size : int, default 1024
        Rows per forward pass.
    code_version : str, default ""
        Version of the code, recorded in the ``runs`` row.
    results : str or Path, optional
        Results root (:func:`storage.results.results_root`); default ``$ALSA_BENCH_RESULTS``,
        else ``results/`` beside the database.
    features : bool, default True
        Also store the penultimate features of every split and of a seeded training subsample
        (see the module docstring).

    Returns
    -------
    LogitsRef
        With ``path`` and ``sha256`` of the published file and an empty ``digest`` (the
        rows are not ingested yet; :func:`ingest_logits` fills it in).

    Raises
    ------
    TypeError
        If ``checkpoint`` is not a :class:`~tasks.runtime.refs.CheckpointRef`.
    FileNotFoundError
        If the checkpoint file is missing.
    ValueError
        If the checkpoint file changed since training, belongs to another run, the staged
        dataset differs from the one trained on, the backbone does not take the dataset's
        modality, a split's labels or logits do not match the model's classes, or an argument
        is invalid. Nothing is written then.
    """
    if not isinstance(checkpoint, CheckpointRef):
        raise TypeError(f"checkpoint must be a CheckpointRef; got {type(checkpoint).__name__}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}.")
    if not isinstance(features, bool):
        raise ValueError(f"features must be True or False; got {features!r}.")
    spec = get_dataset_spec(checkpoint.dataset)
    if suite != spec.suite:
        raise ValueError(
            f"suite must be the suite of dataset {spec.name!r} ({spec.suite!r}); got {suite!r}."
        )
    state, meta, sidecar, dataset = open_checkpoint(checkpoint)
    dev = resolve_device(device)
    database = Path(db) if db is not None else db_path()

    check_backbone(checkpoint.backbone, spec.modality, spec.name)
    adapter = get_adapter(spec.modality)

    t0 = time.perf_counter()
    computed: list[tuple[SplitInfo, np.ndarray, np.ndarray]] = []
    with pinned_threads():
        n_classes, input_shape = int(meta["n_classes"]), tuple(meta["input_shape"])
        if n_classes != spec.n_classes:
            raise ValueError(
                f"checkpoint {checkpoint.run_key!r} has {n_classes} classes but dataset "
                f"{spec.name!r} has {spec.n_classes}; re-run the train stage."
            )
        model = get_backbone(checkpoint.backbone, n_classes, input_shape)
        model.load_state_dict(state, strict=True)
        model.to(dev).eval()

        source = spec.load_source(Path(dataset.root))
        root = results_root(results, db=database)
        feats = _FeatureWriter(root, enabled=features)
        try:
            _compute_splits(adapter, model, spec, source, dataset, dev, batch_size, n_classes,
                            computed, feats, checkpoint.seed)
        except BaseException:
            feats.discard()
            raise
    del model
    compute_seconds = time.perf_counter() - t0

    train_seconds = sidecar.get("train_seconds")
    if not isinstance(train_seconds, (int, float)) or not math.isfinite(train_seconds):
        train_seconds = None
    trained_with = sidecar.get("compute")  # how the classifier was trained (issue 35 on)
    trained_with = trained_with if isinstance(trained_with, dict) else None
    run = RunInfo(
        run_key=checkpoint.run_key,
        suite=suite,
        dataset=checkpoint.dataset,
        backbone=checkpoint.backbone,
        seed=checkpoint.seed,
        n_classes=int(meta["n_classes"]),
        checkpoint_sha256=checkpoint.sha256,
        code_version=code_version,
        train_seconds=None if train_seconds is None else float(train_seconds),
        compute_mode=trained_with.get("mode") if trained_with is not None else None,
        compute_settings=(json.dumps(trained_with, sort_keys=True)
                          if trained_with is not None else None),
        cpu_model=_text_or_none(sidecar.get("cpu_model")),
        cpu_flags=_text_or_none(sidecar.get("cpu_flags")),
    )
    t1 = time.perf_counter()
    try:
        published = write_logits_file(run, computed, root, feats.entries)
    except BaseException:
        feats.discard()
        raise
    logger.info(
        "%s: logits of %d splits (%d rows) computed in %.1f s, published in %.1f s as %s%s",
        checkpoint.run_key,
        len(computed),
        sum(int(lab.shape[0]) for _, _, lab in computed),
        compute_seconds,
        time.perf_counter() - t1,
        published.path,
        f" with {len(feats.entries)} feature files ({feats.entries[0].dim}-d)" if feats.entries
        else " (no features)",
    )
    return LogitsRef(
        run_key=checkpoint.run_key, db_path=str(database), digest="", path=published.path,
        sha256=published.sha256,
    )


def ingest_logits(ref: LogitsRef) -> LogitsRef:
    """Ingest a run's published logits into its database (the single writer's half).

    Idempotent: a file the database already holds is not written again.

    Parameters
    ----------
    ref : LogitsRef
        From :func:`compute_logits`.

    Returns
    -------
    LogitsRef
        ``ref`` with ``digest`` set to :func:`storage.logits.run_digest` of the stored rows.

    Raises
    ------
    storage.results.ResultCorruptError
        If the file is missing or does not match its hash (delete it and rerun the stage).
    TypeError
        If ``ref`` is not a :class:`~tasks.runtime.refs.LogitsRef` with a file.
    """
    if not isinstance(ref, LogitsRef) or not ref.path:
        raise TypeError(f"ref must be a LogitsRef with a result file; got {ref!r}.")
    with connect(ref.db_path) as con:
        ingest(con, ref.path)
        digest = run_digest(con, ref.run_key)
    return replace(ref, digest=digest)


# ------------------------------------------------------------------------------- the @task
from prefect import task  # noqa: E402  (the plain function above needs no Prefect)
from prefect.cache_policies import NO_CACHE  # noqa: E402

from tasks.stages.common import (  # noqa: E402
    PINNED_STAGE_CACHE,
    forget_failure_record,
    log_task_failure,
)

@task(
    name="prepare-splits",
    cache_policy=NO_CACHE,
    on_failure=[log_task_failure],
    task_run_name="prepare-splits-{dataset.name}",
)
def prepare_splits_task(dataset: DatasetRef, threads: int = 1) -> str:
    """Generate a dataset's uncached target splits once, before its extracts fan out.

    On Dask workers, the extracts of several runs of one dataset would otherwise each generate
    the same missing splits at the same time (measured: the duplicate generation and writing
    took 44 % of two workers' time in a cold fmnist run). Idempotent and cheap when the cache is
    complete (:func:`tasks.stages.splits.prepare_target_splits` only checks the files), so it is
    not cached itself. The thread pin is the extracts', so both layouts generate the same bytes.
    """
    from tasks.stages.splits import prepare_target_splits

    with pinned_threads(threads):
        return str(prepare_target_splits(dataset))


@task(
    name="extract",
    cache_policy=PINNED_STAGE_CACHE,
    on_failure=[log_task_failure, forget_failure_record],
    task_run_name="extract-{checkpoint.run_key}",
)
def extract_task(
    checkpoint: CheckpointRef,
    suite: str,
    db: str,
    device: str,
    batch_size: int,
    code_version: str,
    compute: ComputeMode,
    results: str = "",
    threads: int = 1,
    features: bool = True,
) -> LogitsRef:
    """Publish the logits of every split of one run (:func:`tasks.stages.extract.compute_logits`)
    in the run's compute mode (an input: part of the cache key).

    Never opens the database ``db`` (it only names where the flow ingests): the returned
    reference points at a Parquet file under ``results`` for :func:`ingest_result`.
    """
    with pinned_threads(threads), compute_mode(compute, device):
        return compute_logits(
            checkpoint, suite=suite, db=db, device=device, batch_size=batch_size,
            code_version=code_version, results=results or None, features=features,
        )

