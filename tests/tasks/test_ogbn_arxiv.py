"""ogbn-arxiv loader on a tiny graph in OGB's exact on-disk layout (offline, no torch.load).

The fake release comes from :func:`tests.tasks._ogb_fake.write_fake_ogbn_arxiv`; OGB's own CSV
reader (``ogb.io.read_graph_raw.read_csv_graph_raw``) reading the same folder proves the layout.
"""

from __future__ import annotations

import ast
import gzip
import inspect
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.data.datasets import ogbn_arxiv
from tasks.data.datasets.ogbn_arxiv import (
    CLASS_NAMES,
    N_CLASSES,
    N_FEATURES,
    OGBN_ARXIV_FILES,
    cache_file,
    load_graph,
    raw_files,
    read_class_names,
    stage_ogbn_arxiv,
)
from tests.tasks._ogb_fake import FakeArxiv, write_csv_gz, write_fake_ogbn_arxiv

UNPICKLED: list[str] = []


def _record_unpickle() -> str:
    UNPICKLED.append("unpickled")
    return "payload"


class _Trap:
    """Pickles to a call of :func:`_record_unpickle`: loading it would leave a trace."""

    def __reduce__(self):
        return (_record_unpickle, ())


@pytest.fixture
def fake(tmp_path: Path) -> tuple[Path, FakeArxiv]:
    root = tmp_path / "data"
    return root, write_fake_ogbn_arxiv(root, n_nodes=48, n_edges=200, seed=3)


@pytest.fixture
def no_unpickling(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.load, pickle and the OGB dataset classes all raise if anything calls them."""
    import pickle

    import torch

    def refuse(name: str):
        def _raise(*args, **kwargs):
            raise AssertionError(f"{name} must not be called by the ogbn-arxiv loader")

        return _raise

    monkeypatch.setattr(torch, "load", refuse("torch.load"))
    monkeypatch.setattr(pickle, "load", refuse("pickle.load"))
    monkeypatch.setattr(pickle, "loads", refuse("pickle.loads"))
    ogbn_arxiv._import_ogb()  # first import without ogb's PyPI version-check thread
    import ogb.nodeproppred as nodeproppred
    import ogb.nodeproppred.dataset as dataset_mod
    import ogb.nodeproppred.dataset_pyg as dataset_pyg

    for mod in (nodeproppred, dataset_pyg, dataset_mod):
        for cls in ("PygNodePropPredDataset", "NodePropPredDataset"):
            if hasattr(mod, cls):
                monkeypatch.setattr(getattr(mod, cls), "__init__", refuse(cls))


def assert_graph_equals(graph, expected: FakeArxiv) -> None:
    assert graph.x.dtype == np.float32 and graph.x.shape == expected.x.shape
    assert graph.edge_index.dtype == np.int64 and graph.y.dtype == np.int64
    assert graph.year.dtype == np.int64
    np.testing.assert_array_equal(graph.x, expected.x)
    np.testing.assert_array_equal(graph.edge_index, expected.edge_index)
    np.testing.assert_array_equal(graph.y, expected.y)
    np.testing.assert_array_equal(graph.year, expected.year)


# ----------------------------------------------------------------------------- layout and names


def test_raw_files_are_the_release_paths(tmp_path: Path) -> None:
    paths = raw_files(tmp_path)
    assert [p.relative_to(tmp_path / "ogbn_arxiv").as_posix() for p in paths] == list(
        OGBN_ARXIV_FILES
    )
    assert not (tmp_path / "ogbn_arxiv").exists()  # no IO


def test_class_names_match_the_release_mapping(fake) -> None:
    root, _ = fake
    assert len(CLASS_NAMES) == N_CLASSES == 40 and N_FEATURES == 128
    assert CLASS_NAMES[0] == "arxiv cs na" and CLASS_NAMES[24] == "arxiv cs lg"
    assert CLASS_NAMES[16] == "arxiv cs cv" and CLASS_NAMES[-1] == "arxiv cs dm"
    assert len(set(CLASS_NAMES)) == 40
    assert read_class_names(root) == CLASS_NAMES


def test_label_mapping_that_differs_is_refused(fake) -> None:
    root, _ = fake
    names = list(CLASS_NAMES)
    names[5], names[6] = names[6], names[5]
    pd.DataFrame({"label idx": range(40), "arxiv category": names}).to_csv(
        root / "ogbn_arxiv/mapping/labelidx2arxivcategeory.csv.gz", index=False, compression="gzip"
    )
    with pytest.raises(ValueError, match="differs from CLASS_NAMES at label 5"):
        stage_ogbn_arxiv(root)


# ----------------------------------------------------------------------------- loading


def test_load_returns_exactly_the_arrays_written(fake, no_unpickling) -> None:
    root, expected = fake
    assert stage_ogbn_arxiv(root) == raw_files(root)
    assert_graph_equals(load_graph(root, cache=False), expected)
    assert not cache_file(root).exists()


def test_ogb_raw_reader_agrees_on_the_fake_layout(fake, no_unpickling) -> None:
    from ogb.io.read_graph_raw import read_csv_graph_raw

    root, expected = fake
    (ogb_graph,) = read_csv_graph_raw(
        str(root / "ogbn_arxiv" / "raw"),
        add_inverse_edge=False,
        additional_node_files=["node_year"],
    )
    labels = pd.read_csv(
        root / "ogbn_arxiv/raw/node-label.csv.gz", compression="gzip", header=None
    ).values
    graph = load_graph(root)
    assert ogb_graph["num_nodes"] == graph.n_nodes
    assert ogb_graph["edge_feat"] is None
    np.testing.assert_array_equal(ogb_graph["edge_index"], graph.edge_index)
    assert ogb_graph["node_feat"].dtype == np.float32
    np.testing.assert_array_equal(ogb_graph["node_feat"], graph.x)
    np.testing.assert_array_equal(ogb_graph["node_year"][:, 0], graph.year)
    np.testing.assert_array_equal(labels[:, 0], graph.y)
    assert_graph_equals(graph, expected)


def test_split_files_are_in_ogb_time_layout(fake) -> None:
    root, expected = fake
    split = root / "ogbn_arxiv/split/time"
    parts = [
        pd.read_csv(split / f"{name}.csv.gz", compression="gzip", header=None).values.T[0]
        for name in ("train", "valid", "test")
    ]
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(48))
    assert expected.year[parts[0]].max() <= 2017 and set(expected.year[parts[1]]) <= {2018}
    assert (root / "ogbn_arxiv/RELEASE_v1.txt").is_file()


def test_cache_is_written_used_and_pickle_free(fake, no_unpickling, monkeypatch) -> None:
    root, expected = fake
    load_graph(root)
    path = cache_file(root)
    assert path.is_file()
    with np.load(path, allow_pickle=False) as data:  # every array loads without pickle
        assert {"x", "edge_index", "y", "year", "raw_digest", "version"} <= set(data.files)
        np.testing.assert_array_equal(data["x"], expected.x)

    def no_csv(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(ogbn_arxiv.pd, "read_csv", no_csv)
    monkeypatch.setattr(ogbn_arxiv, "read_class_names", lambda root: None)
    assert_graph_equals(load_graph(root), expected)


@pytest.mark.parametrize(
    "damage",
    ["garbage", "truncated", "wrong_digest", "pickled_object", "bad_labels"],
)
def test_bad_cache_is_ignored_and_rebuilt(fake, no_unpickling, damage: str) -> None:
    root, expected = fake
    load_graph(root)
    path = cache_file(root)
    good = path.read_bytes()
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    if damage == "garbage":
        path.write_bytes(b"not a zip file at all")
    elif damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "wrong_digest":
        arrays["raw_digest"] = np.str_("0" * 64)
        arrays["y"] = np.zeros_like(arrays["y"])
        with open(path, "wb") as handle:
            np.savez(handle, **arrays)
    elif damage == "pickled_object":
        arrays["x"] = np.array([_Trap()], dtype=object)
        with open(path, "wb") as handle:
            np.savez(handle, **arrays)
    else:
        arrays["y"] = np.full_like(arrays["y"], 99)
        with open(path, "wb") as handle:
            np.savez(handle, **arrays)
    assert_graph_equals(load_graph(root), expected)
    assert UNPICKLED == []
    with np.load(path, allow_pickle=False) as data:  # rebuilt
        np.testing.assert_array_equal(data["y"], expected.y)
        np.testing.assert_array_equal(data["x"], expected.x)


def test_changed_raw_files_invalidate_the_cache(fake) -> None:
    root, expected = fake
    load_graph(root)
    new_y = (expected.y + 1) % N_CLASSES
    write_csv_gz(root / "ogbn_arxiv/raw/node-label.csv.gz", new_y)
    np.testing.assert_array_equal(load_graph(root).y, new_y)


def test_loader_does_not_import_ogb_torch_or_pickle() -> None:
    tree = ast.parse(inspect.getsource(ogbn_arxiv))

    def imports(nodes) -> set[str]:
        found: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
        return found

    banned = {"ogb", "torch", "torch_geometric", "pickle", "dill", "joblib"}
    assert not imports(ast.walk(tree)) & (banned - {"ogb"})
    # ogb is imported in one place only: the fetch's `_import_ogb`, never by the reader
    importers = [fn.name for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
                 and "ogb" in imports(ast.walk(fn))]
    assert importers == ["_import_ogb"]


def test_loader_runs_with_ogb_unimportable(fake, monkeypatch) -> None:
    import sys

    root, expected = fake
    monkeypatch.setitem(sys.modules, "ogb", None)  # any `import ogb` would raise ImportError
    assert_graph_equals(load_graph(root, cache=False), expected)


def test_processed_pickle_is_never_read(fake, no_unpickling) -> None:
    root, expected = fake
    processed = root / "ogbn_arxiv/processed"
    processed.mkdir()
    import pickle

    (processed / "geometric_data_processed.pt").write_bytes(pickle.dumps(_Trap()))
    assert_graph_equals(load_graph(root), expected)
    assert UNPICKLED == []


# ----------------------------------------------------------------------------- errors


def test_missing_folder_says_where_and_how_to_fetch(tmp_path: Path) -> None:
    root = tmp_path / "nothing-here"
    with pytest.raises(FileNotFoundError) as info:
        load_graph(root)
    message = str(info.value)
    assert "\n" not in message
    assert str(root / "ogbn_arxiv") in message
    assert "PygNodePropPredDataset" not in message  # its reload unpickles: never advised
    assert "alsa-bench fetch ogbn-arxiv" in message and "alsa-bench[ogb]" in message
    assert f"{root}/ogbn_arxiv/raw/" in message


def test_root_pointing_at_the_dataset_folder_is_explained(fake) -> None:
    root, _ = fake
    with pytest.raises(FileNotFoundError, match="root must be the folder that contains"):
        stage_ogbn_arxiv(root / "ogbn_arxiv")


def test_missing_years_file_is_named(fake) -> None:
    root, _ = fake
    (root / "ogbn_arxiv/raw/node_year.csv.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"missing raw/node_year\.csv\.gz.*alsa-bench"):
        load_graph(root)


def test_short_years_file_is_named(fake) -> None:
    root, expected = fake
    write_csv_gz(root / "ogbn_arxiv/raw/node_year.csv.gz", expected.year[:-5])
    with pytest.raises(ValueError, match=r"node_year\.csv\.gz' has 43 rows; expected 48"):
        load_graph(root)


def test_missing_year_value_is_named(fake) -> None:
    root, expected = fake
    year = expected.year.astype(np.float64)
    year[7] = np.nan
    write_csv_gz(root / "ogbn_arxiv/raw/node_year.csv.gz", year)
    with pytest.raises(ValueError, match=r"node_year\.csv\.gz.*integer years.*row 7"):
        load_graph(root)


def test_edge_to_missing_node_is_named(fake) -> None:
    root, expected = fake
    edges = expected.edge_index.copy()
    edges[1, 10] = 48
    write_csv_gz(root / "ogbn_arxiv/raw/edge.csv.gz", edges.T)
    with pytest.raises(ValueError, match=r"inconsistent.*missing node: edge 10 is \d+ -> 48"):
        load_graph(root)


def test_label_out_of_range_is_named(fake) -> None:
    root, expected = fake
    y = expected.y.copy()
    y[4] = 40
    write_csv_gz(root / "ogbn_arxiv/raw/node-label.csv.gz", y)
    with pytest.raises(ValueError, match=r"label 40 at node 4; labels must be in \[0, 40\)"):
        load_graph(root)


def test_feature_rows_must_match_num_node_list(fake) -> None:
    root, _ = fake
    write_csv_gz(root / "ogbn_arxiv/raw/num-node-list.csv.gz", np.array([50]))
    with pytest.raises(ValueError, match=r"node-feat\.csv\.gz' has 48 rows; expected 50"):
        load_graph(root)


def test_not_gzip_is_refused(fake) -> None:
    root, _ = fake
    (root / "ogbn_arxiv/raw/edge.csv.gz").write_text("1,2\n")
    with pytest.raises(ValueError, match=r"edge\.csv\.gz' is not a readable gzip CSV"):
        stage_ogbn_arxiv(root)


def test_wrong_column_count_is_refused(fake) -> None:
    root, _ = fake
    with gzip.open(root / "ogbn_arxiv/raw/node-feat.csv.gz", "wt") as handle:
        handle.write("0.1,0.2,0.3\n")
    with pytest.raises(ValueError, match=r"node-feat\.csv\.gz' has 3 columns; expected 128"):
        stage_ogbn_arxiv(root)


# ------------------------------------------------------------------ the official evaluator
def test_split_accuracy_equals_ogbs_evaluator_on_the_arxiv_splits(fake, tmp_path) -> None:
    """The accuracy stored for every ogbn-arxiv split is what ``ogb``'s Evaluator reports."""
    ogbn_arxiv._import_ogb()  # first import without ogb's PyPI version-check thread
    from ogb.nodeproppred import Evaluator

    from storage import RunInfo, SplitInfo, connect, upsert_run, write_split
    from tasks.data.datasets.ogbn_arxiv import (
        load_source_ogbn_arxiv,
        load_target_pool_ogbn_arxiv,
    )
    from tasks.data.targets import generate_split, target_splits

    root, _ = fake
    source = load_source_ogbn_arxiv(root)
    pool = load_target_pool_ogbn_arxiv(root)
    splits = [("val", "val", None, source.val_y)]
    for split in target_splits("ogbn-arxiv"):
        if split.shift_family in ("clean", "temporal"):
            _samples, labels = generate_split("ogbn-arxiv", split, pool)
            if len(labels):
                splits.append((split.name, "target", split.shift_family, labels))
    assert len(splits) >= 4  # val, clean and several years

    evaluator = Evaluator("ogbn-arxiv")
    rng = np.random.default_rng(11)
    run_key = "ogbn-arxiv.gcn.s0"
    with connect(tmp_path / "bench.duckdb") as con:
        upsert_run(con, RunInfo(run_key, "ogbn-arxiv", "ogbn-arxiv", "gcn", 0, N_CLASSES))
        for name, role, family, labels in splits:
            labels = np.asarray(labels, dtype=np.int64)
            logits = rng.normal(size=(labels.size, N_CLASSES)).astype(np.float32)
            right = rng.random(labels.size) < 0.6  # about 60 % correct
            logits[np.flatnonzero(right), labels[right]] += 10.0
            info = write_split(con, run_key, SplitInfo(name, role, family, name, None),
                               logits, labels)
            official = evaluator.eval({"y_true": labels.reshape(-1, 1),
                                       "y_pred": logits.argmax(axis=1).reshape(-1, 1)})["acc"]
            assert info.true_accuracy == pytest.approx(official, abs=1e-12), name
            assert 0.0 < official < 1.0
