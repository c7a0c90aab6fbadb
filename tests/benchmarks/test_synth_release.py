"""``benchmarks/synth_release.py``: tiny generated releases read back by the real loaders.

Every dataset is generated once at ``--scale 0.001`` (each part at its small minimum) and read
through its loader's own functions, offline; the marker is seen by the catalog and the reports,
and real and synthetic results never mix in one state folder.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks import synth_release as synth
from tasks.data.datasets import get_dataset_spec
from tasks.data.synthetic import (
    BANNER, SyntheticMixError, check_provenance, clear_marker, is_synthetic, read_marker,
    read_provenance,
)

SCALE = 0.001


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no network in these tests")

    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("synth") / "data"
    for name in synth.DATASETS:
        synth.generate(name, base, scale=SCALE, seed=3, jobs=1)
    return base


@pytest.mark.parametrize("name", [n for n in synth.DATASETS if n != "imagenet"])
def test_every_release_round_trips_through_its_loader(root: Path, name: str) -> None:
    spec = get_dataset_spec(name)
    files = spec.stage(root)
    assert files and all(Path(p).exists() for p in files)
    source = spec.load_source(root)
    pool = spec.load_target_pool(root)
    assert len(source.val_y) > 0 and len(pool.labels) > 0
    assert int(np.max(pool.labels)) < spec.n_classes
    marker = read_marker(root, name)
    assert marker is not None and marker["complete"] is True
    assert (marker["seed"], marker["scale"], marker["generator"]) == (3, SCALE, synth.GENERATOR)
    assert marker["commit"]


def test_imagenet_is_the_flat_release_sorted_by_the_loader(root: Path) -> None:
    from tasks.data.datasets import imagenet
    from tasks.data.errors import DatasetUnavailableError

    archives = root / "imagenet" / "ILSVRC2012"
    assert (archives / "ILSVRC2012_img_val.tar").is_file()
    assert (archives / "ILSVRC2012_devkit_t12.tar.gz").is_file()
    paths, labels = imagenet.read_imagenet_val(root)
    assert paths.size == 100 and labels.max() < 1000
    for _, _, _, folder, *_ in imagenet.V2_SETS:
        v2_paths, _ = imagenet.read_imagenet_v2(root, folder)
        assert v2_paths.size == 100
    assert imagenet.to_inputs(paths[:2]).shape == (2, 3, 224, 224)
    with pytest.raises(DatasetUnavailableError, match="weights"):  # never generated
        imagenet.stage(root)


def test_cifar_files_have_the_release_byte_layout(root: Path) -> None:
    from tasks.data.datasets import cifar

    raw = (root / cifar.CIFAR10_DIR / "data_batch_1").read_bytes()
    assert raw[:2] == b"\x80\x02" and b"numpy.core.multiarray" in raw and b"_codecs" not in raw
    batch = pickle.loads(raw, encoding="bytes")
    assert batch[b"data"].dtype == np.uint8 and batch[b"data"].shape[1] == 3072
    assert isinstance(batch[b"labels"], list)
    v1 = np.load(root / cifar.CIFAR10_1_DIR / cifar.CIFAR10_1_FILES[0])
    v1_labels = np.load(root / cifar.CIFAR10_1_DIR / cifar.CIFAR10_1_FILES[1])
    assert v1.dtype == np.uint8 and v1.shape[1:] == (32, 32, 3) and v1_labels.dtype == np.int32
    c = np.load(root / cifar.CIFAR10_C_DIR / "fog.npy", mmap_mode="r")
    labels = np.load(root / cifar.CIFAR10_C_DIR / "labels.npy")
    assert c.dtype == np.uint8 and c.shape == (500, 32, 32, 3) and labels.shape == (500,)


def test_tinyimagenet_is_both_releases_in_their_layouts(root: Path, tmp_path: Path) -> None:
    from PIL import Image

    from tasks.data.datasets import tinyimagenet as tiny

    base = root / tiny.DATASET_DIR
    assert (base / "wnids.txt").read_text().split() == list(tiny.WNIDS)
    assert len((base / "words.txt").read_text().splitlines()) == 200
    wnid = tiny.WNIDS[5]
    assert len(list((base / "train" / wnid / "images").glob(f"{wnid}_*.JPEG"))) == 2
    box = (base / "train" / wnid / f"{wnid}_boxes.txt").read_text().splitlines()[0].split("\t")
    assert box[0] == f"{wnid}_0.JPEG" and len(box) == 5
    note = (base / "val" / "val_annotations.txt").read_text().splitlines()
    fields = note[0].split("\t")
    assert len(note) == 20 and fields[0] == "val_0.JPEG" and len(fields) == 6
    assert len(list((base / "test" / "images").glob("test_*.JPEG"))) == 20
    with Image.open(base / "val" / "images" / "val_0.JPEG") as img:
        assert (img.format, img.size) == ("JPEG", (64, 64))
    folders = sorted(p.relative_to(root / tiny.C_DIR).as_posix()
                     for p in (root / tiny.C_DIR).glob("*/*"))
    assert folders == sorted(f"{c}/{s}" for c in tiny.CORRUPTIONS for s in tiny.SEVERITIES)
    fog = list((root / tiny.C_DIR / "fog" / "5").glob("n*/test_*.JPEG"))
    assert len(fog) == 20
    # the same files whatever the number of processes
    synth.generate("tinyimagenet", tmp_path / "two", scale=SCALE, seed=3, jobs=2)
    for rel in (f"{tiny.DATASET_DIR}/train/{wnid}/images/{wnid}_1.JPEG",
                f"{tiny.DATASET_DIR}/val/images/val_7.JPEG",
                next(p.relative_to(root).as_posix() for p in fog)):
        assert (tmp_path / "two" / rel).read_bytes() == (root / rel).read_bytes()


def test_real_size_counts_are_the_releases() -> None:
    assert synth.rows(50_000, 1.0, 500) == 50_000 and synth.rows(50_000, SCALE, 500) == 500
    assert synth.TINY_COUNTS == {"train_per_class": 500, "val": 10_000, "test": 10_000,
                                 "corrupted": 10_000}
    assert (synth.ARXIV_NODES, synth.ARXIV_EDGES) == (169_343, 1_166_243)
    assert sum(synth.AMAZON_SPLITS.values()) == 539_502
    assert sum(sum(g) for g in synth.WATERBIRDS_GROUPS.values()) == 11_788
    assert [n for n, _ in synth.OFFICE_DOMAINS.values()] == [2_817, 498, 795]


def test_ogbn_arxiv_graph_drifts_with_the_year(root: Path) -> None:
    from tasks.data.datasets import ogbn_arxiv

    graph = ogbn_arxiv.load_graph(root, cache=False)
    assert graph.x.shape == (400, 128) and graph.edge_index.shape == (2, 2000)
    year = np.asarray(graph.year)
    old, new = graph.x[year <= 2010].mean(0), graph.x[year >= 2018].mean(0)
    assert np.abs(old - new).mean() > 0.05


def test_signal_is_learnable_and_degraded_by_the_corruptions(root: Path) -> None:
    from tasks.data.datasets import cifar

    source = cifar.load_source_cifar10(root)
    pool = cifar.load_target_pool_cifar10(root)

    def flat(x: np.ndarray) -> np.ndarray:
        return np.asarray(x, np.float32).reshape(len(x), -1)

    mu = np.stack([flat(source.train_x[source.train_y == c]).mean(0) for c in range(10)])

    def accuracy(x: np.ndarray, y: np.ndarray) -> float:
        d = ((flat(x)[:, None, :] - mu[None]) ** 2).sum(-1)
        return float((d.argmin(1) == np.asarray(y)).mean())

    clean = accuracy(pool.samples[pool.subgroups == 0], pool.labels[pool.subgroups == 0])
    k = len(pool.extras["labels"]) // 5
    worst = [accuracy(pool.extras[n][4 * k:], pool.extras["labels"][4 * k:])
             for n in cifar.CORRUPTIONS]
    assert clean > 0.5  # 10 classes: chance is 0.1
    assert np.mean(worst) < clean - 0.03


def test_generation_refuses_to_overwrite_a_real_release(tmp_path: Path) -> None:
    from tasks.data.datasets import mnist

    real = tmp_path / mnist.MNIST_DIR / "train-images-idx3-ubyte.gz"
    real.parent.mkdir(parents=True)
    real.write_bytes(b"real")
    with pytest.raises(ValueError, match="real release"):
        synth.generate("mnist", tmp_path, scale=SCALE)
    assert real.read_bytes() == b"real" and not is_synthetic(tmp_path, "mnist")
    with pytest.raises(ValueError, match="scale must be"):
        synth.generate("mnist", tmp_path / "x", scale=2.0)
    assert synth.main(["mnist", "--root", str(tmp_path)]) == 2


def test_catalog_and_cli_show_a_synthetic_release(state_home: Path) -> None:
    from typer.testing import CliRunner

    import typer

    from flows.fetch_cli import datasets_command
    from tasks.catalog import dataset_status

    data = state_home / "data"
    synth.generate("mnist", data, scale=SCALE)
    status = dataset_status("mnist", data)
    assert status.present and status.synthetic
    assert not dataset_status("cifar10", data).synthetic
    app = typer.Typer()
    app.command("datasets")(datasets_command)
    app.command("other")(lambda: None)
    runner = CliRunner()
    records = {r["name"]: r for r in json.loads(runner.invoke(app, ["datasets", "--json"]).stdout)}
    assert records["mnist"]["synthetic"] is True and records["fmnist"]["synthetic"] is False
    assert "synthetic" in runner.invoke(app, ["datasets"]).stdout
    assert clear_marker(data, "mnist") and not dataset_status("mnist", data).synthetic


def test_mixing_real_and_synthetic_results_is_refused(tmp_path: Path) -> None:
    state, data = tmp_path / "state", tmp_path / "state" / "data"
    data.mkdir(parents=True)
    # a state folder with real results and no record (older than the record): real
    synth_marker = synth.generate("ogbn-arxiv", data, scale=SCALE)
    with pytest.raises(SyntheticMixError) as err:
        check_provenance(state, "ogbn-arxiv", data, has_results=True)
    message = str(err.value)
    assert str(state) in message and "'ogbn-arxiv'" in message and "ALSA_BENCH_HOME" in message
    assert str(synth_marker) in message
    # no results yet: the kind is recorded, and kept
    assert check_provenance(state, "ogbn-arxiv", data, has_results=False) is True
    assert read_provenance(state)["ogbn-arxiv"]["synthetic"] is True
    assert check_provenance(state, "ogbn-arxiv", data, has_results=True) is True
    # the real release comes back: refused while synthetic results are stored
    clear_marker(data, "ogbn-arxiv")
    with pytest.raises(SyntheticMixError, match="synthetic \\(generated\\) data"):
        check_provenance(state, "ogbn-arxiv", data, has_results=True)


def test_run_command_check_reads_the_stored_runs(state_home: Path) -> None:
    from flows.cli import _check_data_provenance
    from storage import RunInfo, connect, upsert_run

    with connect() as con:
        upsert_run(con, RunInfo("mnist.cnn3.s0", "mnist", "mnist", "cnn3", 0, 10))
    plan = SimpleNamespace(datasets=["mnist"])
    _check_data_provenance([plan])  # real data, real results: fine
    synth.generate("mnist", state_home / "data", scale=SCALE, force=True)
    with pytest.raises(SyntheticMixError, match="'mnist'"):
        _check_data_provenance([plan])


def test_report_on_synthetic_data_carries_the_banner(tmp_path: Path, state_home: Path) -> None:
    from storage.paths import db_path
    from tasks.report import write_report
    from tests.tasks.test_report import _fill_db

    _fill_db(db_path(), np.random.default_rng(0))
    md_path = tmp_path / "reports" / "toy" / "report.md"
    write_report(out_dir=tmp_path / "reports", publish_artifacts=False)
    assert BANNER not in md_path.read_text()
    (state_home / "data").mkdir(parents=True, exist_ok=True)
    from tasks.data.synthetic import write_marker

    write_marker(state_home / "data", "toy", {"generator": "test"})
    check_provenance(state_home, "toy", state_home / "data", has_results=False)
    write_report(out_dir=tmp_path / "reports", publish_artifacts=False)
    md = md_path.read_text()
    assert md.startswith(BANNER) and "toy" in md.splitlines()[0] + md
    assert (tmp_path / "reports" / "toy" / "mae.txt").read_text().startswith("SYNTHETIC DATA")
