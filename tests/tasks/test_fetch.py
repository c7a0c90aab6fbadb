"""``tasks.data.fetch`` against a real HTTP server on 127.0.0.1 serving tiny archives built here.

The server (:class:`_Server`) supports ``Range: bytes=N-`` and can be told to cut the
connection after K bytes, to serve wrong bytes, or to ignore ``Range``; it records every request.
A throw-away online dataset ``tinyfetch`` whose ``sources`` point at it is registered by
monkeypatching :data:`tasks.data.datasets.DATASETS`.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import http.server
import io
import json
import socket
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tasks.data.datasets import DATASETS, DatasetSpec
from tasks.data.errors import ChecksumError, DatasetUnavailableError
from tasks.data.spec import RemoteFile
from tasks.catalog import dataset_status
from tasks.data.fetch import (
    HAS_TAR_FILTERS,
    FetchError,
    NothingToFetchError,
    check_tar_member,
    check_zip_member,
    extract_archive,
    fetch_dataset,
    marker_path,
)

NAME = "tinyfetch"
ARRAYS = {"a.npy": np.arange(12, dtype=np.int64).reshape(3, 4),
          "b.npy": np.linspace(0.0, 1.0, 50, dtype=np.float32)}


# ------------------------------------------------------------------------------------- server
class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass

    def do_GET(self) -> None:  # the name http.server calls
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        if self.path not in srv.files:
            self.send_error(404, "Not Found")
            return
        data = srv.files[self.path]
        if srv.wrong_bytes:
            data = bytes(b ^ 0xFF for b in data)
        status, start = 200, 0
        wanted = self.headers.get("Range", "")
        if wanted.startswith("bytes=") and wanted.endswith("-") and not srv.ignore_range:
            start = int(wanted[len("bytes="):-1])
            if start >= len(data):
                self.send_error(416, "Range Not Satisfiable")
                return
            status = 206
        body = data[start:]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if srv.cut_after is not None:
            cut, srv.cut_after = srv.cut_after, None
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.cut_after: int | None = None
        self.wrong_bytes = False
        self.ignore_range = False

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


# ------------------------------------------------------------------------------------ archives
def _npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def _tar_gz(members: dict[str, bytes], extra: list[tarfile.TarInfo] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return buf.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _good_members() -> dict[str, bytes]:
    return {f"tinyset/{name}": _npy_bytes(arr) for name, arr in ARRAYS.items()}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------------ registry
def _raw_files(root: Path) -> list[Path]:
    return [Path(root) / "tinyset" / name for name in ARRAYS]


def _never(root: Path) -> None:
    raise AssertionError("the fetch code must not call a loader")


def _register(monkeypatch: pytest.MonkeyPatch, *sources: RemoteFile,
              raw_files=_raw_files) -> DatasetSpec:
    spec = DatasetSpec(
        name=NAME, suite=NAME, description="test-only: two arrays", modality="image",
        n_classes=2, class_names=("a", "b"), input_shape=(1, 2, 2), target_families=("clean",),
        stage=_never, raw_files=raw_files, load_source=_never, load_target_pool=_never,
        online=True, paper_row="none (test)", sources=tuple(sources),
    )
    monkeypatch.setitem(DATASETS, NAME, spec)
    return spec


def _serve(server: _Server, path: str, data: bytes, **remote) -> RemoteFile:
    server.files[path] = data
    fields = {"sha256": _sha(data), "filename": path.rsplit("/", 1)[-1], **remote}
    return RemoteFile(url=server.url(path), **fields)


def _assert_nothing_installed(root: Path) -> None:
    assert not (root / "tinyset").exists()
    assert not list(root.glob(".staging-*"))
    assert not list(root.rglob(".fetched-*"))


# --------------------------------------------------------------------------------------- tests
def test_good_tar_gz_is_verified_installed_and_marked(server, monkeypatch, tmp_path):
    data = _tar_gz(_good_members())
    remote = _serve(server, "/tiny.tar.gz", data)
    _register(monkeypatch, remote)
    root = tmp_path / "data"

    assert fetch_dataset(NAME, root, progress=False) == [root]

    for name, array in ARRAYS.items():
        np.testing.assert_array_equal(np.load(root / "tinyset" / name, allow_pickle=False), array)
    marker = json.loads(marker_path(root, remote).read_text())
    assert marker["sha256"] == hashlib.sha256(data).hexdigest()
    assert marker["url"] == remote.url and marker["fetched_at"]
    assert (root / "downloads" / "tiny.tar.gz").read_bytes() == data
    assert not list(root.rglob("*.part")) and not list(root.glob(".staging-*"))
    status = dataset_status(NAME, root)
    assert status.present and status.size_bytes == sum(
        (root / "tinyset" / n).stat().st_size for n in ARRAYS)


def test_zip_with_md5_into_a_dest_folder_and_a_plain_file(server, monkeypatch, tmp_path):
    zdata = _zip(_good_members())
    plain = _npy_bytes(ARRAYS["a.npy"])
    zremote = _serve(server, "/tiny.zip", zdata, sha256="", md5=hashlib.md5(zdata).hexdigest(),
                     dest="sub", size=len(zdata))
    fremote = _serve(server, "/weights.npy", plain, extract=False, dest="w")
    _register(monkeypatch, zremote, fremote)
    root = tmp_path / "data"

    paths = fetch_dataset(NAME, root, progress=False)

    assert paths == [root / "sub", root / "w" / "weights.npy"]
    np.testing.assert_array_equal(np.load(root / "sub" / "tinyset" / "b.npy"), ARRAYS["b.npy"])
    assert (root / "w" / "weights.npy").read_bytes() == plain
    assert marker_path(root, zremote) == root / "sub" / ".fetched-tiny.zip.json"
    marker = json.loads(marker_path(root, zremote).read_text())
    assert (marker["sha256"], marker["md5"]) == (_sha(zdata), zremote.md5)
    assert marker_path(root, fremote).is_file()


def test_wrong_bytes_raise_checksum_error_and_leave_nothing(server, monkeypatch, tmp_path):
    data = _tar_gz(_good_members())
    remote = _serve(server, "/tiny.tar.gz", data)
    _register(monkeypatch, remote)
    server.wrong_bytes = True
    root = tmp_path / "data"

    with pytest.raises(ChecksumError) as info:
        fetch_dataset(NAME, root, progress=False)

    message = str(info.value)
    assert "\n" not in message
    assert "tiny.tar.gz" in message and remote.sha256 in message and remote.url in message
    assert _sha(bytes(b ^ 0xFF for b in data)) in message
    assert not (root / "downloads" / "tiny.tar.gz").exists()
    assert not list(root.rglob("*.part"))
    _assert_nothing_installed(root)


def test_truncated_archive_with_matching_pin_fails_cleanly(server, monkeypatch, tmp_path):
    data = _tar_gz({"tinyset/big.bin": np.random.default_rng(0).bytes(200_000)})
    cut = data[: len(data) // 2]
    _register(monkeypatch, _serve(server, "/cut.tar.gz", cut))
    root = tmp_path / "data"

    with pytest.raises(FetchError, match=r"truncated or corrupt") as info:
        fetch_dataset(NAME, root, progress=False)

    assert "\n" not in str(info.value) and "cut.tar.gz" in str(info.value)
    _assert_nothing_installed(root)
    assert not (root / "downloads" / "cut.tar.gz").exists()


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def _device(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.CHRTYPE
    return info


@pytest.mark.parametrize(
    ("members", "extra", "bad"),
    [
        ({"../evil": b"owned"}, [], "../evil"),
        ({"/tmp/alsa-bench-evil": b"owned"}, [], "/tmp/alsa-bench-evil"),
        ({}, [_link("tinyset/passwd", "/etc/passwd", tarfile.SYMTYPE)], "tinyset/passwd"),
        ({}, [_link("tinyset/up", "../../outside", tarfile.SYMTYPE)], "tinyset/up"),
        ({}, [_link("tinyset/hard", "../etc/passwd", tarfile.LNKTYPE)], "tinyset/hard"),
        ({}, [_device("tinyset/null")], "tinyset/null"),
    ],
    ids=["dotdot", "absolute", "symlink-abs", "symlink-up", "hardlink-up", "device"],
)
@pytest.mark.parametrize("filters", [True, False], ids=["tar-filters", "python-before-3.11.4"])
def test_unsafe_tar_members_are_refused_by_name(server, monkeypatch, tmp_path, members, extra,
                                                 bad, filters):
    if filters and not HAS_TAR_FILTERS:
        pytest.skip("this Python has no tarfile extraction filters")
    monkeypatch.setattr("tasks.data.fetch.HAS_TAR_FILTERS", filters)
    # the good members come first: they must not survive the refusal either
    data = _tar_gz({**_good_members(), **members}, extra)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert bad in tar.getnames()  # tarfile kept the hostile name as written
    _register(monkeypatch, _serve(server, "/evil.tar.gz", data))
    root = tmp_path / "deep" / "data"

    with pytest.raises(FetchError, match="unsafe archive member") as info:
        fetch_dataset(NAME, root, progress=False)

    assert repr(bad) in str(info.value) and "\n" not in str(info.value)
    _assert_nothing_installed(root)
    assert not (tmp_path / "deep" / "evil").exists() and not (tmp_path / "evil").exists()
    assert not Path("/tmp/alsa-bench-evil").exists()


def test_without_tar_filters_members_are_checked_and_modes_cleaned(monkeypatch, tmp_path):
    """Python < 3.11.4 has no ``filter=``: the same check runs first and the modes lose set-id
    bits and group/other write, as the ``data`` filter would do."""
    monkeypatch.setattr("tasks.data.fetch.HAS_TAR_FILTERS", False)
    info = tarfile.TarInfo("tinyset/run.sh")
    info.size, info.mode = 2, 0o6777
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(_tar_gz({"tinyset/a.npy": b"ab"}, [info]))
    (tmp_path / "out").mkdir()
    extract_archive(archive, tmp_path / "out")
    assert (tmp_path / "out" / "tinyset" / "a.npy").read_bytes() == b"ab"
    assert (tmp_path / "out" / "tinyset" / "run.sh").stat().st_mode & 0o7777 == 0o755


def test_safe_internal_symlink_is_allowed():
    info = _link("tinyset/alias.npy", "a.npy", tarfile.SYMTYPE)
    assert check_tar_member(info) is info


@pytest.mark.parametrize("bad", ["../evil", "/abs/evil", "ok/../../evil", "C:/evil"])
def test_unsafe_zip_members_are_refused(server, monkeypatch, tmp_path, bad):
    with pytest.raises(ValueError, match="unsafe archive member"):
        check_zip_member(zipfile.ZipInfo(bad))
    data = _zip({**_good_members(), bad: b"owned"})
    _register(monkeypatch, _serve(server, "/evil.zip", data))
    root = tmp_path / "data"
    with pytest.raises(FetchError, match=bad.replace(".", r"\.")):
        fetch_dataset(NAME, root, progress=False)
    _assert_nothing_installed(root)


def test_zip_symlink_member_is_refused():
    info = zipfile.ZipInfo("tinyset/link")
    info.create_system, info.external_attr = 3, 0o120777 << 16
    with pytest.raises(ValueError, match="symbolic link"):
        check_zip_member(info)


def test_interrupted_transfer_keeps_part_and_resumes_with_range(server, monkeypatch, tmp_path):
    data = _tar_gz({"tinyset/big.bin": np.random.default_rng(1).bytes(100_000)})
    remote = _serve(server, "/big.tar.gz", data, size=len(data))
    _register(monkeypatch, remote)
    root = tmp_path / "data"
    part = root / "downloads" / "big.tar.gz.part"
    server.cut_after = 40_000

    with pytest.raises(FetchError, match="resume") as info:
        fetch_dataset(NAME, root, progress=False)

    assert "\n" not in str(info.value) and "alsa-bench fetch tinyfetch" in str(info.value)
    assert part.read_bytes() == data[:40_000]
    _assert_nothing_installed(root)

    fetch_dataset(NAME, root, progress=False)

    assert server.requests[-1] == ("/big.tar.gz", "bytes=40000-")
    assert (root / "downloads" / "big.tar.gz").read_bytes() == data
    assert (root / "tinyset" / "big.bin").stat().st_size == 100_000
    assert not part.exists()


def test_server_ignoring_range_restarts_from_zero(server, monkeypatch, tmp_path):
    data = _tar_gz(_good_members())
    _register(monkeypatch, _serve(server, "/tiny.tar.gz", data))  # no size: Content-Length only
    root = tmp_path / "data"
    server.cut_after = 100
    with pytest.raises(FetchError, match="interrupted after 100 of"):
        fetch_dataset(NAME, root, progress=False)
    server.ignore_range = True

    fetch_dataset(NAME, root, progress=False)

    assert server.requests[-1] == ("/tiny.tar.gz", "bytes=100-")  # asked, got a 200
    assert (root / "downloads" / "tiny.tar.gz").read_bytes() == data
    np.testing.assert_array_equal(np.load(root / "tinyset" / "a.npy"), ARRAYS["a.npy"])


def test_complete_dataset_is_not_fetched_again_unless_forced(server, monkeypatch, tmp_path):
    _register(monkeypatch, _serve(server, "/tiny.tar.gz", _tar_gz(_good_members())))
    root = tmp_path / "data"
    fetch_dataset(NAME, root, progress=False)
    assert len(server.requests) == 1

    (root / "downloads" / "tiny.tar.gz").unlink()  # the marker alone says it is done
    assert fetch_dataset(NAME, root, progress=False) == [root]
    assert len(server.requests) == 1

    (root / "tinyset" / "a.npy").write_bytes(b"damaged")
    fetch_dataset(NAME, root, progress=False, force=True)
    assert len(server.requests) == 2
    np.testing.assert_array_equal(np.load(root / "tinyset" / "a.npy"), ARRAYS["a.npy"])
    assert not list(root.glob(".staging-*"))


def test_a_verified_download_is_extracted_without_the_network(server, monkeypatch, tmp_path):
    data = _tar_gz(_good_members())
    _register(monkeypatch, _serve(server, "/tiny.tar.gz", data))
    root = tmp_path / "data"
    (root / "downloads").mkdir(parents=True)
    (root / "downloads" / "tiny.tar.gz").write_bytes(data)  # copied from another machine

    fetch_dataset(NAME, root, progress=False)

    assert server.requests == []
    assert dataset_status(NAME, root).present


def test_file_longer_than_the_published_size_is_refused(server, monkeypatch, tmp_path):
    data = _tar_gz(_good_members())
    _register(monkeypatch, _serve(server, "/tiny.tar.gz", data, size=len(data) - 10))
    root = tmp_path / "data"
    with pytest.raises(FetchError, match=f"more than the published {len(data) - 10} bytes"):
        fetch_dataset(NAME, root, progress=False)
    assert not list((root / "downloads").glob("tiny*"))


def test_http_and_network_errors_are_one_line(server, monkeypatch, tmp_path):
    missing = RemoteFile(url=server.url("/nope.tar.gz"), filename="nope.tar.gz",
                         sha256="0" * 64)
    _register(monkeypatch, missing)
    with pytest.raises(FetchError, match=r"HTTP 404 .*nope\.tar\.gz") as info:
        fetch_dataset(NAME, tmp_path, progress=False)
    assert "\n" not in str(info.value)

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _register(monkeypatch, dataclasses.replace(missing, url=f"http://127.0.0.1:{port}/x.tar.gz"))
    with pytest.raises(FetchError, match="cannot reach") as info:
        fetch_dataset(NAME, tmp_path, progress=False)
    assert isinstance(info.value, DatasetUnavailableError) and "\n" not in str(info.value)


def test_file_url_without_a_terminal_prints_no_progress(monkeypatch, tmp_path, capsys):
    data = _tar_gz(_good_members())
    source = tmp_path / "mirror" / "tiny.tgz"
    source.parent.mkdir()
    source.write_bytes(data)
    _register(monkeypatch, RemoteFile(url=source.as_uri(), filename="tiny.tgz", sha256=_sha(data),
                                      size=len(data)))
    root = tmp_path / "data"
    fetch_dataset(NAME, root)  # progress=True, but stderr is not a terminal: logs stay clean
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(np.load(root / "tinyset" / "b.npy"), ARRAYS["b.npy"])


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_fetch_on_a_terminal_shows_the_bytes(server, monkeypatch, tmp_path):
    big = {"tinyset/blob.bin": np.random.default_rng(1).bytes(3 * 2**20)}  # > one 1 MiB chunk
    data = _tar_gz(big)
    _register(monkeypatch, _serve(server, "/big.tar.gz", data))
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.delenv("ALSA_BENCH_PROGRESS", raising=False)
    seen: list[tuple[int, int | None]] = []

    import tasks.data.fetch as fetch_mod

    real_bar = fetch_mod.progress_bar

    def recording_bar(**kwargs):
        seen.append((kwargs["initial"], kwargs["total"]))
        return real_bar(**kwargs)

    monkeypatch.setattr(fetch_mod, "progress_bar", recording_bar)
    fetch_dataset(NAME, tmp_path / "data")

    out = terminal.getvalue()
    assert seen == [(0, len(data))]
    assert "fetch tinyfetch: big.tar.gz" in out
    assert "100%" in out and f"{len(data) / 2**20:.2f}M" in out  # unit_scale, divisor 1024
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    fetch_dataset(NAME, tmp_path / "again", progress=False)
    assert quiet.getvalue() == ""


# ------------------------------------------------------------------------------ ogbn-arxiv
def _arxiv_zip(tmp_path: Path, folder: str = "arxiv") -> tuple[bytes, object]:
    """The fake ogbn-arxiv release zipped the way OGB ships it: everything under ``arxiv/``."""
    from tests.tasks._ogb_fake import write_fake_ogbn_arxiv

    src = tmp_path / "release"
    expected = write_fake_ogbn_arxiv(src, n_nodes=40, n_edges=120, seed=5)
    members = {
        f"{folder}/{path.relative_to(src / 'ogbn_arxiv').as_posix()}": path.read_bytes()
        for path in sorted((src / "ogbn_arxiv").rglob("*")) if path.is_file()
    }
    return _zip(members), expected


def _ogb_pointing_at(server: _Server, monkeypatch, data: bytes) -> str:
    """ogb's real master table, with ogbn-arxiv's URL moved to the local server."""
    from tasks.data.datasets import ogbn_arxiv

    real = ogbn_arxiv._ogb_master_table
    path = "/ogb/data/nodeproppred/arxiv.zip"
    server.files[path] = data

    def table(ogb):
        frame = real(ogb).copy()
        assert frame.loc["url", "ogbn-arxiv"] == ogbn_arxiv.ARCHIVE_URL  # what ogb really says
        frame.loc["url", "ogbn-arxiv"] = server.url(path)
        return frame

    monkeypatch.setattr(ogbn_arxiv, "_ogb_master_table", table)
    monkeypatch.setattr(ogbn_arxiv, "ARCHIVE_SHA256", _sha(data))
    return path


def test_ogbn_arxiv_fetch_uses_ogbs_url_then_our_reader(server, monkeypatch, tmp_path):
    from tasks.data.datasets import ogbn_arxiv

    data, expected = _arxiv_zip(tmp_path)
    path = _ogb_pointing_at(server, monkeypatch, data)
    root = tmp_path / "data"

    assert fetch_dataset("ogbn-arxiv", root, progress=False) == [root / "ogbn_arxiv"]

    assert [p for p, _ in server.requests] == [path]
    graph = ogbn_arxiv.load_graph(root, cache=False)
    np.testing.assert_array_equal(graph.x, expected.x)
    np.testing.assert_array_equal(graph.edge_index, expected.edge_index)
    assert ogbn_arxiv.cache_file(root).is_file()  # verify_fetched read it once and cached it
    assert (root / "ogbn_arxiv" / "split" / "time" / "train.csv.gz").is_file()
    assert not (root / "ogbn_arxiv" / "arxiv").exists() and not (root / "arxiv").exists()
    status = dataset_status("ogbn-arxiv", root)
    assert status.present and status.fetchable
    # a second fetch trusts the marker and does not download again
    fetch_dataset("ogbn-arxiv", root, progress=False)
    assert len(server.requests) == 1


def test_ogbn_arxiv_archive_in_another_layout_is_refused(server, monkeypatch, tmp_path):
    data, _ = _arxiv_zip(tmp_path, folder="ogbn_arxiv")
    _ogb_pointing_at(server, monkeypatch, data)
    root = tmp_path / "data"
    with pytest.raises(FetchError, match=r"exactly one top-level folder 'arxiv/'") as info:
        fetch_dataset("ogbn-arxiv", root, progress=False)
    assert "\n" not in str(info.value)
    assert not (root / "ogbn_arxiv" / "raw").exists()


def test_ogbn_arxiv_files_the_reader_refuses_are_not_marked_fetched(server, monkeypatch, tmp_path):
    from tests.tasks._ogb_fake import write_csv_gz

    src = tmp_path / "bad"
    data, _ = _arxiv_zip(tmp_path)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:  # same release, one label out of range
        members = {info.filename: zf.read(info) for info in zf.infolist()}
    write_csv_gz(src / "label.csv.gz", np.full(40, 99))
    members["arxiv/raw/node-label.csv.gz"] = (src / "label.csv.gz").read_bytes()
    bad = _zip(members)
    _ogb_pointing_at(server, monkeypatch, bad)
    root = tmp_path / "data"
    with pytest.raises(FetchError, match=r"reader refuses the files .*label 99") as info:
        fetch_dataset("ogbn-arxiv", root, progress=False)
    assert "\n" not in str(info.value) and "--force" in str(info.value)
    assert not list(root.rglob(".fetched-*"))


def test_ogbn_arxiv_fetch_without_ogb_says_what_to_install(monkeypatch, tmp_path):
    from tasks.data.datasets import ogbn_arxiv

    for name in [m for m in sys.modules if m == "ogb" or m.startswith("ogb.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ogb", None)  # `import ogb` raises ImportError
    with pytest.raises(DatasetUnavailableError) as info:
        fetch_dataset("ogbn-arxiv", tmp_path, progress=False)
    message = str(info.value)
    assert "\n" not in message
    assert "needs the ogb package" in message and "pip install 'alsa-bench[ogb]'" in message
    assert "got ImportError" in message or "got ModuleNotFoundError" in message
    assert not (tmp_path / "downloads").exists()
    assert ogbn_arxiv.ARCHIVE_URL.endswith("/arxiv.zip")


def test_ogbn_arxiv_master_table_disagreeing_with_the_pin_is_refused(monkeypatch, tmp_path):
    from tasks.data.datasets import ogbn_arxiv

    real = ogbn_arxiv._ogb_master_table

    def newer(ogb):
        frame = real(ogb).copy()
        frame.loc["url", "ogbn-arxiv"] = "http://127.0.0.1:9/ogb/arxiv_v2.zip"
        return frame

    monkeypatch.setattr(ogbn_arxiv, "_ogb_master_table", newer)
    with pytest.raises(DatasetUnavailableError, match=r"names 'arxiv_v2.zip'.*update ARCHIVE_SHA256"):
        fetch_dataset("ogbn-arxiv", tmp_path, progress=False)


def test_importing_ogb_for_the_fetch_starts_no_version_check(monkeypatch):
    import threading

    from tasks.data.datasets import ogbn_arxiv

    for name in [m for m in sys.modules if m == "ogb" or m.startswith("ogb.")]:
        monkeypatch.delitem(sys.modules, name)
    before = set(threading.enumerate())
    release = ogbn_arxiv.ogb_release()
    assert (release.url, release.download_name) == (ogbn_arxiv.ARCHIVE_URL, "arxiv")
    assert set(threading.enumerate()) <= before  # ogb's outdated-check thread was not started


def test_datasets_without_sources_and_bad_arguments(monkeypatch, tmp_path):
    with pytest.raises(NothingToFetchError, match="offline and needs no fetch"):
        fetch_dataset("fmnist", tmp_path)
    with pytest.raises(NothingToFetchError, match="declares no files"):
        fetch_dataset("amazon-wilds", tmp_path)
    with pytest.raises(ValueError, match="dataset must be one of"):
        fetch_dataset("no-such-set", tmp_path)
    _register(monkeypatch, RemoteFile(url="http://127.0.0.1:9/x.tar.gz", filename="x.tar.gz",
                                      sha256="0" * 64))
    with pytest.raises(ValueError, match="timeout must be"):
        fetch_dataset(NAME, tmp_path, timeout=0)
    assert list(tmp_path.iterdir()) == []


def test_status_absent_and_guarded(monkeypatch, tmp_path):
    _register(monkeypatch, RemoteFile(url="http://127.0.0.1:9/x.tar.gz", filename="x.tar.gz",
                                      sha256="0" * 64))
    status = dataset_status(NAME, tmp_path)
    assert (status.present, status.size_bytes, status.fetchable) == (False, 0, True)

    def broken(root):
        raise OSError("layout check failed")

    _register(monkeypatch, raw_files=broken)
    record = dataset_status(NAME, tmp_path).to_record()
    assert record["present"] is False and record["online"] is True
    assert set(record) == {"name", "suite", "modality", "online", "present", "size_bytes",
                           "backbones", "paper_row", "fetchable", "synthetic", "group",
                           "in_default_bench", "source_package", "licence"}


def test_a_concurrent_fetch_of_the_same_file_is_refused(server, monkeypatch, tmp_path):
    _register(monkeypatch, _serve(server, "/tiny.tar.gz", _tar_gz(_good_members())))
    root = tmp_path / "data"
    (root / "downloads").mkdir(parents=True)
    with open(root / "downloads" / ".tiny.tar.gz.lock", "a+b") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(FetchError, match="another `alsa-bench fetch tinyfetch` is downloading"):
            fetch_dataset(NAME, root, progress=False)
    assert server.requests == []
    fetch_dataset(NAME, root, progress=False)  # released: it goes through
    assert (root / "tinyset" / "a.npy").is_file()


def test_an_archive_cannot_replace_the_downloads_folder(server, monkeypatch, tmp_path):
    data = _tar_gz({"a/x": b"x", "downloads/x": b"x"})
    _register(monkeypatch, _serve(server, "/bad.tar.gz", data))
    root = tmp_path / "data"
    with pytest.raises(FetchError, match="would replace alsa-bench's own folder"):
        fetch_dataset(NAME, root, progress=False)
    assert (root / "downloads" / "bad.tar.gz").is_file() and not (root / "a").exists()
    assert not list(root.glob(".staging-*")) and not list(root.rglob(".fetched-*"))


def test_a_complete_part_answered_416_is_verified_or_replaced(server, monkeypatch, tmp_path):
    data = _tar_gz(_good_members())
    _register(monkeypatch, _serve(server, "/tiny.tar.gz", data))  # no size pinned
    root = tmp_path / "data"
    part = root / "downloads" / "tiny.tar.gz.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(data)  # the transfer ended just before the rename

    fetch_dataset(NAME, root, progress=False)

    assert server.requests == [("/tiny.tar.gz", f"bytes={len(data)}-")]  # answered 416
    assert (root / "downloads" / "tiny.tar.gz").read_bytes() == data

    other = tmp_path / "other"
    part = other / "downloads" / "tiny.tar.gz.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"\0" * (len(data) + 5))  # not a prefix of the file: 416, then afresh
    fetch_dataset(NAME, other, progress=False)
    assert server.requests[-2:] == [("/tiny.tar.gz", f"bytes={len(data) + 5}-"),
                                    ("/tiny.tar.gz", None)]
    np.testing.assert_array_equal(np.load(other / "tinyset" / "a.npy"), ARRAYS["a.npy"])
