"""One chunked SHA-256 of a file, used by storage and tasks alike."""

from __future__ import annotations

import hashlib

import pytest

from storage.hashing import file_sha256


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_file_sha256_matches_hashlib_for_any_chunk(tmp_path, chunk):
    data = bytes(range(256)) * 41 + b"tail"
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert file_sha256(path, chunk=chunk) == hashlib.sha256(data).hexdigest()
    assert file_sha256(str(path)) == hashlib.sha256(data).hexdigest()


def test_every_file_hash_is_this_one():
    import storage.doctor
    import storage.results
    import tasks.models.backbones.pretrained as pretrained

    assert storage.results.file_sha256 is file_sha256
    assert storage.doctor.file_sha256 is file_sha256
    assert pretrained.file_sha256 is file_sha256


def test_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        file_sha256(tmp_path / "absent")
