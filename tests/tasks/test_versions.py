"""Stage code versions: which source files each stage depends on, and what changes them.

Two kinds of proof: on miniature project trees (files with real ``import`` statements) that the
version follows the import closure and nothing else; and on the real tree, that every project
module a stage's entry points actually load at run time is hashed, and that adding or editing a
dataset moves no other dataset's train/extract version.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.stages.versions import (
    GLUE_MODULES,
    method_code_version,
    method_files,
    PROJECT_ROOT,
    STAGE_ROOTS,
    STAGES,
    code_versions,
    dataset_roots,
    module_closure,
    parse_refresh,
    stage_code_version,
    stage_files,
)

# ------------------------------------------------------------------------- miniature projects
MINI = {
    "tasks/__init__.py": "",
    "tasks/runtime/refs.py": "REFS = 1\n",
    "tasks/stages/__init__.py": "",
    "tasks/stages/download.py": "from tasks.runtime.refs import REFS\n",
    "tasks/stages/train.py": "from tasks.stages import download\nfrom . import helpers\n",
    "tasks/stages/helpers.py": "X = 1\n",
    "tasks/stages/extract.py": "from tasks.stages.train import helpers\n",
    "tasks/stages/estimate.py": "def f():\n    from estimators.alsa import ALSA\n",
    "tasks/report/__init__.py": "import storage.anchors\nfrom estimators import alsa\n",
    "estimators/__init__.py": "",
    "estimators/alsa.py": "ALSA = 1\n",
    "estimators/cot.py": "COT = 1\n",
    "storage/__init__.py": "",
    "storage/anchors.py": "A = 1\n",
}


def _project(root: Path) -> Path:
    for rel, text in MINI.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "estimators" / "__pycache__").mkdir()
    (root / "estimators" / "__pycache__" / "alsa.cpython-311.pyc").write_bytes(b"\0")
    return root


def _versions(root: Path) -> dict[str, str]:
    return {stage: stage_code_version(stage, root) for stage in STAGES}


def _rel(paths: list[Path], root: Path) -> set[str]:
    return {p.relative_to(root.resolve()).as_posix() for p in paths}


def test_closure_follows_absolute_relative_and_function_level_imports(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert _rel(stage_files("train", root), root) == {
        "tasks/__init__.py", "tasks/stages/__init__.py", "tasks/stages/download.py",
        "tasks/runtime/refs.py", "tasks/stages/train.py", "tasks/stages/helpers.py",
    }
    # an import inside a function counts; a class name imported from a module does not add files
    assert "estimators/alsa.py" in _rel(stage_files("estimate", root), root)
    assert "estimators/cot.py" not in _rel(stage_files("estimate", root), root)


def test_editing_a_module_changes_exactly_the_stages_that_import_it(tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = _versions(root)
    (root / "estimators" / "alsa.py").write_text("ALSA = 2\n")
    after = _versions(root)
    assert {s for s in STAGES if after[s] != before[s]} == {"estimate", "report"}
    before = after
    (root / "tasks" / "stages" / "helpers.py").write_text("X = 2\n")
    after = _versions(root)
    assert {s for s in STAGES if after[s] != before[s]} == {"train", "extract"}


def test_new_import_counts_line_endings_do_not(tmp_path: Path) -> None:
    root = _project(tmp_path)
    before = stage_code_version("estimate", root)
    (root / "estimators" / "cot.py").write_text("COT = 2\n")  # not imported: no change
    assert stage_code_version("estimate", root) == before
    (root / "tasks" / "stages" / "estimate.py").write_text("from estimators import alsa, cot\n")
    assert stage_code_version("estimate", root) != before
    text = root / "tasks" / "report" / "__init__.py"
    text.write_bytes(b"import storage.anchors\n")
    unix = stage_code_version("report", root)
    text.write_bytes(b"import storage.anchors\r\n")
    assert stage_code_version("report", root) == unix


def test_pycache_is_ignored(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert all("__pycache__" not in p.parts for p in stage_files("report", root))


# --------------------------------------------------------------------------------- real tree
def test_every_stage_has_a_short_stable_version() -> None:
    assert tuple(STAGE_ROOTS) == STAGES
    versions = code_versions()
    assert set(versions) == set(STAGES)
    assert all(len(v) == 16 and int(v, 16) >= 0 for v in versions.values())
    assert versions == code_versions()


def _copy_tree(tmp_path: Path) -> Path:
    """A copy of the project's four packages, to edit without touching the real tree."""
    copy = tmp_path / "repo"
    for top in ("tasks", "estimators", "storage", "flows"):
        shutil.copytree(PROJECT_ROOT / top, copy / top,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_report_covers_alsa_and_anchor_storage() -> None:
    """The bug of the graph issue: a stale report was served after an ALSA change."""
    rels = _rel(stage_files("report"), PROJECT_ROOT)
    assert {"storage/anchors.py", "tasks/report/__init__.py"} <= rels
    assert any(r.startswith("estimators/methods/alsa/") for r in rels)
    assert "tasks/stages/train.py" not in rels


def test_editing_alsa_changes_estimate_and_report(tmp_path: Path) -> None:
    copy = _copy_tree(tmp_path)
    before = {s: stage_code_version(s, copy) for s in ("estimate", "report")}
    alsa = copy / "estimators" / "alsa"
    with open(alsa / "__init__.py" if alsa.is_dir() else copy / "estimators" / "alsa.py", "a") as handle:
        handle.write("\n# edited\n")
    with open(copy / "storage" / "anchors.py", "a") as handle:
        handle.write("\n# edited\n")
    after = {s: stage_code_version(s, copy) for s in ("estimate", "report")}
    assert after["estimate"] != before["estimate"]
    assert after["report"] != before["report"]


_LOADED = """
import json, sys
sys.path.insert(0, {root!r})
import {modules}
root = {root!r}
print(json.dumps(sorted(
    m.__file__[len(root) + 1:] for m in list(sys.modules.values())
    if getattr(m, "__file__", None) and m.__file__.startswith(root)
    and m.__file__.split("/")[len(root.split("/"))] in ("tasks", "estimators", "storage", "flows")
)))
"""


@pytest.mark.parametrize(
    ("stage", "dataset"),
    [("train", "fmnist"), ("extract", "fmnist"), ("extract", "arxiv-sim"), ("estimate", None),
     ("report", None)],
)
def test_modules_loaded_at_run_time_are_all_hashed(stage: str, dataset: str | None) -> None:
    """Import the stage's entry points in a fresh interpreter: every project module it loads,
    except the other members of the registries (discovered at run time, serving other
    datasets or modalities), is in the stage's file set."""
    roots = STAGE_ROOTS[stage] + (dataset_roots(stage, dataset) if dataset else ())
    code = _LOADED.format(root=str(PROJECT_ROOT), modules=", ".join(roots))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    hashed = _rel(stage_files(stage, dataset=dataset), PROJECT_ROOT)
    registry_members = {
        rel for rel in loaded
        if rel.split("/")[:3] in (["tasks", "data", "datasets"], ["tasks", "models", "backbones"],
                                  ["tasks", "data", "shifts"], ["tasks", "models", "modalities"])
        and not rel.endswith("__init__.py")
    }
    # what the other members import serves only them (e.g. tasks/data/graphs.py for graph datasets)
    others = [r[:-3].replace("/", ".") for r in registry_members - hashed]
    only_theirs = _rel(module_closure(others), PROJECT_ROOT) - hashed
    missing = loaded - hashed - registry_members - only_theirs
    assert not missing, f"{stage} loads {sorted(missing)} without hashing them"


def test_datasets_do_not_share_train_or_extract_versions_through_their_modules() -> None:
    fm = _rel(stage_files("extract", dataset="fmnist"), PROJECT_ROOT)
    gr = _rel(stage_files("extract", dataset="arxiv-sim"), PROJECT_ROOT)
    assert "tasks/data/datasets/fmnist.py" in fm and "tasks/data/datasets/arxiv_sim.py" not in fm
    assert "tasks/data/datasets/arxiv_sim.py" in gr and "tasks/data/datasets/fmnist.py" not in gr
    assert "tasks/data/shifts/synthetic.py" in fm and "tasks/data/shifts/synthetic.py" not in gr
    assert "tasks/data/shifts/temporal.py" in gr and "tasks/models/modalities/graph.py" in gr
    assert "tasks/models/backbones/graph.py" not in fm


def test_adding_or_editing_a_dataset_leaves_other_datasets_cached(tmp_path: Path) -> None:
    """Copy the tree, add a dataset module and edit another: fmnist's versions do not move."""
    copy = _copy_tree(tmp_path)
    code = (
        "import sys, json; sys.path.insert(0, {root!r});"
        "from tasks.stages.versions import stage_code_version as v;"
        "print(json.dumps({{d: [v(s, dataset=d) for s in ('download', 'train', 'extract')]"
        " for d in ('fmnist', 'arxiv-sim')}}))"
    ).format(root=str(copy))

    def versions() -> dict[str, list[str]]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, timeout=120, cwd=copy)
        return json.loads(out.stdout.strip().splitlines()[-1])

    before = versions()
    (copy / "tasks" / "data" / "datasets" / "brand_new.py").write_text(
        '"""A new dataset module."""\nORDER = 99\nSPECS = ()\n'
    )
    with open(copy / "tasks" / "data" / "datasets" / "arxiv_sim.py", "a") as handle:
        handle.write("\n# edited\n")
    after = versions()
    assert after["fmnist"] == before["fmnist"]
    assert all(a != b for a, b in zip(after["arxiv-sim"], before["arxiv-sim"], strict=True))


def test_unknown_stage_is_rejected() -> None:
    with pytest.raises(ValueError, match="stage must be one of download, train.*got 'fit'"):
        stage_code_version("fit")


def test_closure_of_a_non_project_module_is_empty() -> None:
    assert module_closure(["numpy", "json"]) == []


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


def test_shift_cache_version_covers_split_generation_not_training() -> None:
    from tasks.stages.splits import _version_files

    fm = _rel(list(_version_files("fmnist")), PROJECT_ROOT)
    assert {"tasks/data/shifts/synthetic.py", "tasks/data/families.py", "tasks/data/datasets/fmnist.py"} <= fm
    assert not fm & {"tasks/models/backbones/image.py", "tasks/models/modalities/image.py", "tasks/stages/train.py"}
    gr = _rel(list(_version_files("arxiv-sim")), PROJECT_ROOT)
    assert "tasks/data/shifts/temporal.py" in gr and "tasks/data/shifts/synthetic.py" not in gr


def test_estimate_of_a_graph_run_also_covers_what_gnnevaluator_runs() -> None:
    gr = _rel(stage_files("estimate", dataset="arxiv-sim"), PROJECT_ROOT)
    assert {"tasks/models/gnnevaluator.py", "tasks/models/backbones/graph.py", "tasks/data/shifts/temporal.py",
            "tasks/data/datasets/arxiv_sim.py"} <= gr
    # an image run's estimates can hold ProjNorm's, which fine-tunes the model on its splits
    im = _rel(stage_files("estimate", dataset="fmnist"), PROJECT_ROOT)
    assert {"tasks/models/projnorm.py", "tasks/models/modalities/image.py",
            "tasks/data/datasets/fmnist.py"} <= im
    assert "tasks/data/datasets/arxiv_sim.py" not in im
    text = _rel(stage_files("estimate", dataset="rt-reviews"), PROJECT_ROOT)
    assert _rel(stage_files("estimate"), PROJECT_ROOT) == text  # text: stored logits only


# ------------------------------------------------------------------------ one method, one key
def _append(path: Path, text: str = "\n# edited\n") -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


METHOD_KEYS = ("ac", "atc-mc", "cot", "alsa-g", "alsa-e", "mano", "distcs", "auto")


def test_a_method_key_holds_its_module_the_band_and_not_the_other_methods() -> None:
    alsa = _rel(method_files("alsa-g"), PROJECT_ROOT)
    assert "estimators/methods/alsa/estimator.py" in alsa
    assert "estimators/methods/cot.py" not in alsa and "estimators/features/distcs.py" not in alsa
    assert "estimators/__init__.py" not in alsa  # it imports every method: not followed
    assert "tasks/stages/estimate.py" in alsa and "storage/results.py" in alsa
    # the stored band: the trust layer and its fixed panel of softmax methods
    assert {"estimators/trust/attach_band.py", "estimators/methods/ac.py",
            "estimators/methods/atc.py"} <= alsa
    assert "tasks/models/gnnevaluator.py" not in alsa  # a model-aware method's own module
    # what a method builds at run time: DistCS its base, auto its members
    assert "estimators/methods/cot.py" in _rel(method_files("distcs", params={"base": "cot"}),
                                              PROJECT_ROOT)
    auto = _rel(method_files("auto"), PROJECT_ROOT)
    assert {"estimators/trust/auto.py", "estimators/methods/alsa/estimator.py",
            "estimators/methods/cot.py"} <= auto
    gnn = _rel(method_files("gnnevaluator", dataset="arxiv-sim", backbone="gcn"), PROJECT_ROOT)
    assert {"tasks/models/gnnevaluator.py", "tasks/models/backbones/graph.py"} <= gnn


def test_editing_or_adding_a_method_moves_only_its_own_keys(tmp_path: Path) -> None:
    """On a copy of the tree: a new method (its module and the one import line in
    estimators/__init__.py) moves no key; an edit of ALSA moves ALSA's keys and auto's (its
    member) only; an edit of AC, a member of the band's signal panel, moves every key."""
    copy = _copy_tree(tmp_path)

    def keys() -> dict[str, str]:
        return {m: method_code_version(m, copy) for m in METHOD_KEYS}

    before = keys()
    (copy / "estimators" / "methods" / "brand_new.py").write_text(
        '"""A new method."""\nfrom ..core.registry import register\n')
    _append(copy / "estimators" / "__init__.py",
            "from .methods import brand_new as _brand_new  # noqa: E402,F401\n")
    assert keys() == before

    _append(copy / "estimators" / "methods" / "alsa" / "estimator.py")
    after_alsa = keys()
    moved = {m for m in METHOD_KEYS if after_alsa[m] != before[m]}
    assert moved == {"alsa-g", "alsa-e", "auto"}

    _append(copy / "estimators" / "methods" / "ac.py")
    after_ac = keys()
    assert all(after_ac[m] != after_alsa[m] for m in METHOD_KEYS)


def test_a_method_key_follows_its_parameters_and_refuses_unknown_names() -> None:
    assert method_code_version("distcs", params={"base": "cot"}) != method_code_version("distcs")
    with pytest.raises(ValueError, match="method must be one of ac, .*got 'nope'"):
        method_code_version("nope")


def test_train_and_extract_keys_are_per_backbone(tmp_path: Path) -> None:
    """A run's train and extract keys hash its own backbone's module: a backbone added in a
    module of its own, or another backbone module edited, moves no other run's key."""
    text = _rel(stage_files("train", dataset="rt-reviews", backbone="bow-linear"), PROJECT_ROOT)
    assert "tasks/models/backbones/text.py" in text
    assert "tasks/models/backbones/distilbert.py" not in text
    copy = _copy_tree(tmp_path)
    runs = [("fmnist", "mlp"), ("arxiv-sim", "gcn"), ("rt-reviews", "bow-linear")]

    def keys() -> dict[tuple[str, str, str], str]:
        return {(s, d, b): stage_code_version(s, copy, dataset=d, backbone=b)
                for s in ("train", "extract") for d, b in runs}

    before = keys()
    (copy / "tasks" / "models" / "backbones" / "brand_new.py").write_text(
        '"""A new backbone module."""\nSPECS = ()\n')
    assert keys() == before
    _append(copy / "tasks" / "models" / "backbones" / "graph.py")
    after = keys()
    assert {k for k in after if after[k] != before[k]} == {
        ("train", "arxiv-sim", "gcn"), ("extract", "arxiv-sim", "gcn")}


@pytest.mark.parametrize("method", ["alsa-g", "distcs"])
def test_modules_a_method_loads_are_hashed_or_serve_other_methods(method: str) -> None:
    """Import what one method's estimate task runs in a fresh interpreter: every project module
    it loads is in the method's file set, or is ``estimators/__init__.py`` (which imports every
    method to register it), or serves only other methods or other registry members."""
    from estimators import ESTIMATORS

    modules = f"tasks.stages.estimate, estimators, {ESTIMATORS[method].__module__}"
    code = _LOADED.format(root=str(PROJECT_ROOT), modules=modules)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    hashed = _rel(method_files(method), PROJECT_ROOT)
    others = [cls.__module__ for key, cls in ESTIMATORS.items() if key != method]
    theirs = _rel(module_closure(others, skip=GLUE_MODULES), PROJECT_ROOT)
    registry_members = {
        rel for rel in loaded
        if rel.split("/")[:3] in (["tasks", "data", "datasets"], ["tasks", "models", "backbones"],
                                  ["tasks", "data", "shifts"], ["tasks", "models", "modalities"])
    }
    members_own = _rel(module_closure([r[:-3].replace("/", ".") for r in registry_members]),
                       PROJECT_ROOT)
    glue = {"estimators/__init__.py", "estimators/methods/baselines.py",
            "estimators/core/plugins.py"}  # GLUE_MODULES: registration only
    missing = loaded - hashed - theirs - registry_members - members_own - glue
    assert not missing, f"{method} loads {sorted(missing)} without hashing them"
