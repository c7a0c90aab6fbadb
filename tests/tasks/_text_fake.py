"""A tiny sentiment dataset for pipeline tests: short "snippets" and long "reviews"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tasks.data.spec import DatasetSpec, SourceSplits, TargetPool
from tasks.data.texts import as_text_labels, as_texts

_GOOD = ["a wonderful", "a moving", "a brilliant", "a delightful", "a gripping", "a superb"]
_BAD = ["a dreadful", "a tedious", "a clumsy", "a boring", "a lifeless", "a dismal"]
_NOUNS = ["film", "drama", "comedy", "thriller", "story", "picture", "debut", "sequel"]


def _snippets(n: int, seed: int) -> tuple[list[str], list[int]]:
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        y = int(i % 2)
        adj = (_GOOD if y else _BAD)[rng.integers(6)]
        texts.append(f"{adj} {_NOUNS[rng.integers(8)]} , number {seed * 1000 + i} of the year .")
        labels.append(y)
    return texts, labels


def _raw(root: Path) -> list[Path]:
    return [Path(root) / "tiny-text" / "texts.json"]


def _stage(root: Path) -> list[Path]:
    path = _raw(root)[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    train, val, clean = _snippets(80, 1), _snippets(30, 2), _snippets(40, 3)
    reviews = []
    for i in range(12):
        y = i % 2
        body = " ".join(("the plot unfolds slowly and the cast does its job ." for _ in range(30)))
        verdict = (_GOOD if y else _BAD)[i % 6]
        reviews.append((f"{body} in the end review {i} finds {verdict} film .", y))
    path.write_text(json.dumps({"train": train, "val": val, "clean": clean,
                                "reviews": [[t for t, _ in reviews], [y for _, y in reviews]]}))
    return [path]


def _load(root: Path) -> dict:
    return json.loads(_raw(root)[0].read_text())


def _source(root: Path) -> SourceSplits:
    d = _load(root)
    return SourceSplits(as_texts(d["train"][0], "train"), as_text_labels(d["train"][1], 2, "train"),
                        as_texts(d["val"][0], "val"), as_text_labels(d["val"][1], 2, "val"))


def _pool(root: Path) -> TargetPool:
    d = _load(root)
    texts = as_texts(d["clean"][0] + d["reviews"][0], "pool")
    labels = as_text_labels(d["clean"][1] + d["reviews"][1], 2, "pool")
    groups = np.array([0] * len(d["clean"][0]) + [1] * len(d["reviews"][0]), dtype=np.int64)
    return TargetPool(texts, labels, 2, groups, (0,), (1,))


def tiny_text_spec(backbones: tuple[str, ...] | None = None) -> DatasetSpec:
    """The spec of dataset ``tiny-text`` (suite ``tiny-text``)."""
    return DatasetSpec(
        name="tiny-text", suite="tiny-text", description="test-only sentiment snippets",
        modality="text", n_classes=2, class_names=("negative", "positive"), input_shape=(128,),
        target_families=("clean", "label_shift", "domain"), stage=_stage, raw_files=_raw,
        load_source=_source, load_target_pool=_pool, backbones=backbones,
    )
