"""Stage code versions: which source files each stage depends on, and what changes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.versions import (
    STAGE_SOURCES,
    STAGES,
    code_versions,
    parse_refresh,
    stage_code_version,
    stage_files,
)


def _project(root: Path) -> Path:
    """A miniature project tree with one file per source group."""
    files = {
        "tasks/refs.py": "refs",
        "tasks/download.py": "download",
        "tasks/datasets/__init__.py": "registry",
        "tasks/datasets/fmnist.py": "fmnist",
        "tasks/train.py": "train",
        "tasks/backbones.py": "backbones",
        "tasks/extract.py": "extract",
        "tasks/shifts/synthetic.py": "corruptions",
        "tasks/estimate.py": "estimate",
        "tasks/report.py": "report",
        "estimators/alsa.py": "alsa",
        "storage/schema.py": "schema",
        "storage/logits.py": "logits",
        "storage/estimates.py": "estimates",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "estimators" / "__pycache__").mkdir()
    (root / "estimators" / "__pycache__" / "alsa.cpython-311.pyc").write_bytes(b"\0")
    return root


def _versions(root: Path) -> dict[str, str]:
    return {stage: stage_code_version(stage, root) for stage in STAGES}


def test_every_stage_has_sources_and_a_short_stable_version() -> None:
    assert tuple(STAGE_SOURCES) == STAGES
    versions = code_versions()
    assert set(versions) == set(STAGES)
    assert all(len(v) == 16 and int(v, 16) >= 0 for v in versions.values())
    assert versions == code_versions()
    # The real tree: the estimate stage depends on the estimators, train does not.
    rels = {p.relative_to(Path(__file__).resolve().parents[2]).as_posix()
            for p in stage_files("estimate")}
    assert "estimators/base.py" in rels and "tasks/train.py" not in rels


def test_editing_an_estimator_changes_estimate_only(tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = _versions(root)
    (root / "estimators" / "alsa.py").write_text("alsa, edited")
    after = _versions(root)
    assert after["estimate"] != before["estimate"]
    for stage in ("download", "train", "extract", "report"):
        assert after[stage] == before[stage], stage


def test_editing_a_dataset_changes_every_stage_from_download(tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = _versions(root)
    (root / "tasks" / "datasets" / "fmnist.py").write_text("fmnist, edited")
    after = _versions(root)
    for stage in ("download", "train", "extract"):
        assert after[stage] != before[stage], stage
    assert after["estimate"] == before["estimate"]


def test_editing_a_shift_changes_extract_not_train(tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = _versions(root)
    (root / "tasks" / "shifts" / "synthetic.py").write_text("corruptions, edited")
    after = _versions(root)
    assert after["extract"] != before["extract"]
    assert after["train"] == before["train"]


def test_new_file_counts_line_endings_do_not(tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = stage_code_version("estimate", root)
    (root / "estimators" / "alsa.py").write_bytes(b"alsa")
    assert stage_code_version("estimate", root) == before
    (root / "estimators" / "cot.py").write_text("cot")
    assert stage_code_version("estimate", root) != before
    text = root / "tasks" / "report.py"
    text.write_bytes(b"a\nb\n")
    unix = stage_code_version("report", root)
    text.write_bytes(b"a\r\nb\r\n")
    assert stage_code_version("report", root) == unix


def test_pycache_is_ignored(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert all("__pycache__" not in p.parts for p in stage_files("estimate", root))


def test_unknown_stage_is_rejected() -> None:
    with pytest.raises(ValueError, match="stage must be one of download, train.*got 'fit'"):
        stage_code_version("fit")


@pytest.mark.parametrize(
    ("refresh", "expected"),
    [
        (None, set()),
        ([], set()),
        ("estimate", {"estimate", "report"}),
        (["report"], {"report"}),
        (["estimate", "train"], {"train", "extract", "estimate", "report"}),
        (["all"], set(STAGES)),
        (["download"], set(STAGES)),
    ],
)
def test_parse_refresh_includes_everything_downstream(refresh, expected) -> None:
    assert parse_refresh(refresh) == expected


def test_parse_refresh_rejects_unknown_stage() -> None:
    with pytest.raises(ValueError, match="refresh must name stages from download.*all; got 'fit'"):
        parse_refresh(["estimate", "fit"])
