"""The fit cache never unpickles a file this state folder did not sign."""

from __future__ import annotations

import os
import pickle
import stat

import pytest

from tasks.monitor.fit_cache import KEY_BYTES, MAGIC, FitCache


class _Planted:
    """Unpickling this runs ``os.system``: what an attacker would plant."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_round_trip_and_a_private_key(tmp_path):
    cache = FitCache(tmp_path / "fits")
    path = cache.store("ab", {"x": [1, 2]})
    assert cache.load("ab") == {"x": [1, 2]} and path.read_bytes().startswith(MAGIC)
    key = tmp_path / "fits" / ".key"
    assert len(key.read_bytes()) == KEY_BYTES
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert cache.load("cd") is None


def test_a_planted_pickle_is_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    cache = FitCache(tmp_path / "fits")
    cache.store("ab", 1)  # makes the key
    payload = pickle.dumps({"key": "ab", "value": _Planted(str(marker))})
    (tmp_path / "fits" / "ab.fit").write_bytes(MAGIC + b"0" * 64 + b"\n" + payload)
    assert cache.load("ab") is None
    assert not marker.exists()  # the signature check came first
    assert not (tmp_path / "fits" / "ab.fit").exists()  # deleted: the caller refits


def test_a_file_from_another_state_folder_is_refit(tmp_path):
    mine, theirs = FitCache(tmp_path / "a"), FitCache(tmp_path / "b")
    theirs.store("ab", "their fit")
    mine.store("cd", "mine")
    (tmp_path / "a" / "ab.fit").write_bytes((tmp_path / "b" / "ab.fit").read_bytes())
    assert not mine.verify("ab") and mine.load("ab") is None
    assert theirs.load("ab") == "their fit"


def test_edited_truncated_or_renamed_files_are_refit(tmp_path):
    cache = FitCache(tmp_path)
    data = cache.store("ab", list(range(100))).read_bytes()
    (tmp_path / "ab.fit").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert cache.load("ab") is None
    (tmp_path / "ab.fit").write_bytes(data[: len(data) // 2])
    assert cache.load("ab") is None
    cache.store("ef", "value of ef")
    os.replace(tmp_path / "ef.fit", tmp_path / "ab.fit")  # signed, but under another key
    assert cache.load("ab") is None


def test_a_damaged_key_makes_a_new_one(tmp_path):
    cache = FitCache(tmp_path)
    cache.store("ab", 1)
    (tmp_path / ".key").write_bytes(b"short")
    assert cache.load("ab") is None  # signed with the lost key: refit
    cache.store("ab", 2)
    assert cache.load("ab") == 2 and len((tmp_path / ".key").read_bytes()) == KEY_BYTES


def test_keys_must_be_hex(tmp_path):
    with pytest.raises(ValueError, match="lowercase hex"):
        FitCache(tmp_path).path("../x")
