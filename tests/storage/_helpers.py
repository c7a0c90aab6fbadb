"""Shared builders for the storage tests: a run row and synthetic splits with known accuracy."""

from __future__ import annotations

import duckdb
import numpy as np

from storage import RunInfo, SplitInfo, upsert_run, write_split

RUN_KEY = "toy.mlp.s0"


def make_split(
    rng: np.random.Generator, n: int, n_classes: int, accuracy: float = 0.8
) -> tuple[np.ndarray, np.ndarray]:
    """Logits whose argmax matches the labels on about ``accuracy`` of the rows."""
    labels = rng.integers(0, n_classes, size=n)
    logits = rng.normal(size=(n, n_classes)).astype(np.float32)
    correct = rng.random(n) < accuracy
    wrong = (labels + 1 + rng.integers(0, n_classes - 1, size=n)) % n_classes
    top = np.where(correct, labels, wrong)
    logits[np.arange(n), top] += 5.0
    return logits, labels


def add_run(
    con: duckdb.DuckDBPyConnection,
    rng: np.random.Generator,
    run_key: str = RUN_KEY,
    *,
    n_classes: int = 4,
    n_val: int = 200,
    targets: tuple[tuple[str, int, float], ...] = (("clean", 150, 0.8), ("noise-3", 120, 0.5)),
    suite: str = "toy",
    seed: int = 0,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Store a run with a validation split and target splits; return the arrays by split."""
    upsert_run(con, RunInfo(run_key, suite, "toy", "mlp", seed, n_classes))
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    arrays["val"] = make_split(rng, n_val, n_classes, 0.8)
    write_split(con, run_key, SplitInfo("val", "val", None, None, None), *arrays["val"])
    for name, n, acc in targets:
        family, _, sev = name.partition("-")
        arrays[name] = make_split(rng, n, n_classes, acc)
        info = SplitInfo(name, "target", family, family, int(sev) if sev else None)
        write_split(con, run_key, info, *arrays[name])
    return arrays
