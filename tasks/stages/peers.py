"""The peers step: methods that compare a run with other seeds' runs of the same model.

GDE (:mod:`estimators.methods.gde`) estimates a classifier's target accuracy by how often it
agrees with a second classifier of the same architecture trained on the same data with another
seed; agreement-on-the-line (ALine-S/-D, :mod:`estimators.features.aline`) fits its line on the
agreements of a family of independently trained models. The benchmark trains every dataset ×
backbone with several seeds on target splits shared across seeds, so the second model is
already there: once both runs' logits are published,
:func:`compute_peer_estimates` reads the two logits files (their hashes checked), checks that
the runs saw the same rows (:func:`check_same_rows`), fits each peer method on the validation
split with the peer's validation logits and estimates every target split with the peer's target
logits. Its rows go to the ordinary ``estimates`` table through
:func:`tasks.stages.rows.estimate_row`, published as their own content-addressed file
(:mod:`storage.results`) that the flow ingests beside the estimate stage's: the report treats
``gde`` as any method.

Which run is whose peer (:func:`peer_runs`): for every dataset × backbone with at least two
seeds, seed *s* is paired with the next seed and the last with the first (seeds ``0, 1, 2``:
``0 -> 1``, ``1 -> 2``, ``2 -> 0``), so that every run gets a GDE estimate from a model that is
its own seed's neighbour, each pair of a two-seed benchmark is used both ways (the two runs get
the same disagreement, compared with their own true accuracies), and no run is left out.
GDE's task is cached per (run, peer run): its inputs are both logits references, the methods
and their parameters, and the code version of this module's import closure
(:func:`peers_code_version`), so retraining either run, or a change of the code it runs,
recomputes it.

ALine-S and ALine-D, where a run has peers, run here too (the flow leaves them out of that run's
estimate stage): their family is the run's model and **every** other seed of its dataset ×
backbone (the authors' recipe of independently trained models), with no linear heads by
default (:data:`PEER_ALINE_PARAMS`: ``n_heads=0``; ``--param aline-s.n_heads=10`` adds them
back), and they read the run's stored features as in the estimate stage. Their task is cached
per (run, all its peers).

Target labels are never given to a method: the row check compares the two files' label arrays
(evaluation data) for equality only, and the estimates see logits.

>>> peer_runs(["d.lenet.s0", "d.lenet.s1", "d.lenet.s2", "d.mlp.s0"])
{'d.lenet.s0': ['d.lenet.s1', 'd.lenet.s2'], 'd.lenet.s1': ['d.lenet.s2', 'd.lenet.s0'], 'd.lenet.s2': ['d.lenet.s0', 'd.lenet.s1']}
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from storage.estimates import EstimateRow
from storage.results import LogitsContent
from tasks.methods import (
    build_estimator,
    peer_method_names,
    peer_reading_method_names,
    skip_feature_methods,
)
from tasks.runtime.refs import EstimatesRef, LogitsRef
from tasks.stages.estimate import per_class_record, publish_estimates, read_run_logits
from tasks.stages.rows import estimate_row

__all__ = [
    "PEER_ALINE_PARAMS",
    "check_same_rows",
    "compute_peer_estimates",
    "peer_runs",
    "peers_code_version",
    "peers_task",
    "stores_features",
]

logger = logging.getLogger("tasks.stages.peers")

_RUN_KEY = re.compile(r"^(?P<group>.+)\.s(?P<seed>\d+)$")

#: The peers step's defaults for the methods that read peers (under the user's parameters):
#: ALine's family is the run's model and its peers alone, the authors' recipe, which measured
#: better than adding the cheap heads (docs/PERFORMANCE.md, "ALine with the seeds as peers").
PEER_ALINE_PARAMS: dict[str, dict[str, Any]] = {"aline-s": {"n_heads": 0},
                                                "aline-d": {"n_heads": 0}}


def peer_runs(run_keys: Sequence[str]) -> dict[str, list[str]]:
    """The peers of every run that has one, the first being its GDE partner.

    Runs are grouped by dataset and backbone (``"{dataset}.{backbone}.s{seed}"``); in a group of
    at least two seeds, the peers of seed *s* are the following seeds in increasing order,
    wrapping around (the next seed first, the last seed's being the first one). A run alone in
    its group has no entry.

    Raises
    ------
    ValueError
        If a run key does not end in ``.s<seed>`` or is repeated.
    """
    groups: dict[str, list[tuple[int, str]]] = {}
    for key in run_keys:
        match = _RUN_KEY.match(key)
        if match is None:
            raise ValueError(f"run keys must read '<dataset>.<backbone>.s<seed>'; got {key!r}.")
        groups.setdefault(match["group"], []).append((int(match["seed"]), key))
    out: dict[str, list[str]] = {}
    for members in groups.values():
        keys = [k for _, k in sorted(members)]
        if len(set(keys)) != len(keys):
            raise ValueError(f"run keys must not repeat; got {sorted(keys)}.")
        for i, key in enumerate(keys):
            if len(keys) > 1:
                out[key] = [keys[(i + j) % len(keys)] for j in range(1, len(keys))]
    return out


def check_same_rows(run: LogitsContent, peer: LogitsContent) -> None:
    """Refuse a pair of runs that did not see the same rows in the same order.

    The two runs must be of the same dataset and backbone with different seeds, hold the same
    splits (names, roles, sizes) and, split by split, the same label arrays: with the targets
    generated from the dataset's fixed shift seed, never the training seed, that is what makes
    row ``i`` of a split the same sample in both files.

    Raises
    ------
    ValueError
        One line naming the two runs and the first difference.
    """
    a, b = run.run, peer.run
    who = f"runs {a.run_key!r} and {b.run_key!r}"
    if (a.dataset, a.backbone) != (b.dataset, b.backbone) or a.seed == b.seed:
        raise ValueError(f"{who} are not peers: a peer is the same dataset and backbone "
                         f"with another seed.")
    if a.n_classes != b.n_classes:
        raise ValueError(f"{who} differ in class count ({a.n_classes} and {b.n_classes}).")
    mine = {(s.split, s.role, s.n_samples) for s in run.splits}
    theirs = {(s.split, s.role, s.n_samples) for s in peer.splits}
    if mine != theirs:
        diff = sorted(mine ^ theirs)[:3]
        raise ValueError(f"{who} do not hold the same splits (name, role, rows): first "
                         f"differences {diff}; re-run the extract stage of both.")
    for info in run.splits:
        if not np.array_equal(run.arrays[info.split][1], peer.arrays[info.split][1]):
            raise ValueError(f"{who} hold split {info.split!r} with other labels or another "
                             f"row order: their rows are not the same samples.")


def compute_peer_estimates(
    logits: LogitsRef,
    peers: Sequence[LogitsRef],
    *,
    methods: Sequence[str] | None = None,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    code_version: str = "",
    results: str | Path | None = None,
) -> EstimatesRef:
    """Run the peer methods on one run against its peer(s) and publish the rows; no database.

    Parameters
    ----------
    logits : LogitsRef
        The run's published logits (:func:`tasks.stages.extract.compute_logits`).
    peers : sequence of LogitsRef
        Its peers' logits, the GDE partner first (:func:`peer_runs`); GDE reads the first, the
        methods that read peers (ALine-S/-D) every one.
    methods : sequence of str, optional
        Methods to run among :func:`tasks.methods.peer_method_names` (GDE) and
        :func:`tasks.methods.peer_reading_method_names` (ALine-S/-D); default the peer
        methods.
    method_params : mapping, optional
        Hyper-parameters per method, over :data:`PEER_ALINE_PARAMS` for ALine.
    code_version : str, default ""
        Stored with every row.
    results : str or Path, optional
        Results root; default the root ``logits.path`` lies in.

    Returns
    -------
    EstimatesRef
        The run's reference to the published file (as the estimate stage's).

    Raises
    ------
    ValueError
        No peer, a method that does not read peers, a parameter for another method, or runs
        that did not see the same rows (:func:`check_same_rows`).
    storage.results.ResultCorruptError
        If a logits file is missing or does not match its hash.
    """
    known = (*peer_method_names(), *peer_reading_method_names())
    names = list(peer_method_names()) if methods is None else list(methods)
    bad = [m for m in names if m not in known]
    if bad or not names:
        raise ValueError(f"methods must name methods that read peers, among {', '.join(known)}; "
                         f"got {names!r}.")
    params = {m: dict(v) for m, v in (method_params or {}).items()}
    stray = sorted(set(params) - set(names))
    if stray:
        raise ValueError(f"method_params has parameters for {stray}, which are not among the "
                         f"peer methods to run {names}.")
    if not peers:
        raise ValueError(f"run {logits.run_key!r} needs at least one peer run; got none.")
    content, targets = read_run_logits(logits)
    others = [read_run_logits(p)[0] for p in peers]
    for other in others:
        check_same_rows(content, other)
    run_key = content.run.run_key
    reading = [m for m in names if m in peer_reading_method_names()]
    if reading:
        have = content.features is not None and all(
            content.features.has(s.split) for s in content.splits)
        kept, note = skip_feature_methods(names, have, f"run {run_key!r} has none stored")
        if note is not None:
            logger.warning("Run %s: %s", run_key, note)
            names = kept
    rows: list[EstimateRow] = []
    val_logits, val_labels = content.val()
    for method in names:
        group = others if method in peer_reading_method_names() else others[:1]
        own = {**PEER_ALINE_PARAMS.get(method, {}), **params.get(method, {})}
        estimator = build_estimator(method, own, content.run.seed)
        features = _fit_features(content) if estimator.needs_features else {}
        start = time.perf_counter()
        estimator.fit(val_logits, val_labels, peer_val_logits=[o.val()[0] for o in group],
                      **features)
        fit_seconds = time.perf_counter() - start
        for info in targets:
            target_logits = content.target_logits(info.split)
            extra = ({"target_features": content.features.split(info.split)}
                     if estimator.needs_features and content.features is not None else {})
            start = time.perf_counter()
            result = estimator.estimate(
                target_logits, peer_target_logits=[o.target_logits(info.split) for o in group],
                band=True, **extra)
            seconds = time.perf_counter() - start
            record = result.to_record()
            peer_keys = [o.run.run_key for o in group]
            rows.append(estimate_row(
                run_key, info, method, result.accuracy,
                params={**record["params"],
                        "peer_run" if len(peer_keys) == 1 else "peer_runs":
                            peer_keys[0] if len(peer_keys) == 1 else peer_keys},
                diagnostics=record["diagnostics"], interval=result.interval,
                level=result.level, fit_seconds=fit_seconds, estimate_seconds=seconds,
                code_version=code_version,
                per_class_json=(None if result.per_class is None
                                else per_class_record(result.per_class, target_logits)),
                shift_interval=result.shift_interval,
            ))
        logger.info("Run %s: %s against %s on %d target splits", run_key, method,
                    ", ".join(o.run.run_key for o in group), len(targets))
    if not rows:
        raise ValueError(f"run {run_key!r}: no peer method left to run (the methods that "
                         f"need features were skipped: {', '.join(reading)}).")
    return publish_estimates(logits, rows, {}, results)


def stores_features(logits: LogitsRef) -> bool:
    """Whether a run's logits file names feature files (read from its footer alone), i.e.
    whether the methods that read features (ALine) can run on it."""
    from storage.results import _footer_feature_shas

    return bool(_footer_feature_shas(Path(logits.path)))


def _fit_features(content: LogitsContent) -> dict[str, Any]:
    """The fit keywords of a feature method (validation features, training subsample), as the
    estimate stage gives them (:func:`tasks.stages.estimate._fit_features`)."""
    assert content.features is not None
    [val] = [s.split for s in content.splits if s.role == "val"]
    train = content.features.train()
    return {"val_features": content.features.split(val),
            "train_features": None if train is None else train[0],
            "train_labels": None if train is None else train[1]}


def peers_code_version(dataset: str | None = None) -> str:
    """Digest of the source the peers step runs (this module's import closure).

    ``dataset`` is accepted for symmetry with the stages' versions and changes nothing: the
    step reads published logits only.
    """
    from tasks.stages.versions import files_version, module_closure

    del dataset
    return files_version(module_closure(("tasks.stages.peers",)), "peers")


# ------------------------------------------------------------------------------- the @task
from prefect import task  # noqa: E402  (the plain function above needs no Prefect)

from tasks.stages.common import PINNED_STAGE_CACHE, forget_failure_record  # noqa: E402
from tasks.runtime.threads import pinned_threads  # noqa: E402


@task(
    name="peers",
    cache_policy=PINNED_STAGE_CACHE,
    on_failure=[forget_failure_record],
    task_run_name="peers-{logits.run_key}",
)
def peers_task(
    logits: LogitsRef,
    peers: list[LogitsRef],
    methods: list[str] | None,
    method_params: dict[str, dict[str, Any]] | None,
    code_version: str,
    threads: int = 1,
) -> EstimatesRef:
    """The peer methods of one run against its peers
    (:func:`tasks.stages.peers.compute_peer_estimates`), cached per (run, peer run): the
    references carry both logits files' hashes."""
    with pinned_threads(threads):
        return compute_peer_estimates(logits, peers, methods=methods,
                                      method_params=method_params, code_version=code_version)
