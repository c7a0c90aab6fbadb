"""The pipeline's stages, and their code versions: a digest of the source each stage runs.

Prefect's ``TASK_SOURCE`` cache policy hashes only the source of the task function itself, so a
change in ``estimators/methods/alsa/`` would not invalidate a cached ``estimate`` task. Every stage task
therefore takes a ``code_version`` input computed here: a SHA-256 over the relative paths and
bytes of every project file the stage's code imports.

Which files
-----------
The file set is the **import closure** (:func:`module_closure`) of the stage's entry modules
(:data:`STAGE_ROOTS`), found by reading their ``import`` statements (top-level and inside
functions, relative or absolute) with :mod:`ast`, following only modules of this project
(:data:`PROJECT_PACKAGES`), and adding the ``__init__`` of every package on the way, since Python
runs those too. So every module whose behaviour a stage depends on is covered by construction:
a stage cannot silently read a module its version does not hash.

The registries (datasets, backbones, shift families) discover their members at run time and do
not import them statically, so the closure of a stage does not pull in every dataset. For a
given dataset the stage's version adds the modules that serve that dataset only
(:func:`dataset_roots`): the dataset's own module, its modality's adapter and backbones (train,
extract), and the modules implementing its shift families for its modality (extract). Adding or
editing one dataset therefore leaves every other dataset's cached train and extract results
valid.

:data:`STAGES` and :func:`parse_refresh` live here too, so the CLI can check a ``--refresh``
value without importing Prefect.

Examples
--------
>>> v = stage_code_version("estimate")
>>> len(v), v == stage_code_version("estimate")
(16, True)
>>> stage_code_version("train", dataset="fmnist") != stage_code_version("train", dataset="arxiv-sim")
True
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Final

#: Pipeline stages in execution order; refreshing one refreshes every later one.
STAGES: Final[tuple[str, ...]] = ("download", "train", "extract", "estimate", "report")
#: Refresh value meaning every stage.
REFRESH_ALL: Final[str] = "all"

#: Repository root: the folder holding ``tasks/``, ``estimators/``, ``storage/`` and ``flows/``.
PROJECT_ROOT: Final[Path] = Path(__file__).resolve().parents[2]

#: Top-level packages whose modules count as project code.
PROJECT_PACKAGES: Final[tuple[str, ...]] = ("tasks", "estimators", "storage", "flows")

#: Entry modules of each stage; the stage's files are their import closure.
STAGE_ROOTS: Final[dict[str, tuple[str, ...]]] = {
    "download": ("tasks.stages.download",),
    "train": ("tasks.stages.download", "tasks.stages.train"),
    "extract": ("tasks.stages.download", "tasks.stages.train", "tasks.stages.extract"),
    "estimate": ("tasks.stages.estimate",),
    "report": ("tasks.report",),
}


def _module_file(module: str, base: Path) -> Path | None:
    parts = module.split(".")
    if parts[0] not in PROJECT_PACKAGES:
        return None
    path = base.joinpath(*parts)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _imports(path: Path, module: str) -> set[str]:
    """Project modules named by the import statements of one file (all scopes)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return set()
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target:
                continue
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {m for m in found if m.split(".")[0] in PROJECT_PACKAGES}


def module_closure(roots: Iterable[str], root: Path | None = None) -> list[Path]:
    """Project files that importing ``roots`` can execute, by static reading of imports.

    Parameters
    ----------
    roots : iterable of str
        Dotted module names (``"tasks.report"``).
    root : Path, optional
        Project root; default :data:`PROJECT_ROOT`.

    Returns
    -------
    list of Path
        Absolute paths, sorted by relative path, without duplicates; every package
        ``__init__.py`` on the way included; names that are not project modules (a class
        imported with ``from x import Name``, third-party packages) are skipped.
    """
    base = (root or PROJECT_ROOT).resolve()
    seen: dict[str, Path] = {}
    todo = list(roots)
    done: set[str] = set()
    while todo:
        module = todo.pop()
        if module in done:
            continue
        done.add(module)
        parts = module.split(".")
        for i in range(1, len(parts)):  # parent packages run first
            todo.append(".".join(parts[:i]))
        path = _module_file(module, base)
        if path is None:
            continue
        seen[path.relative_to(base).as_posix()] = path
        todo.extend(_imports(path, module) - done)
    return [seen[rel] for rel in sorted(seen)]


def dataset_roots(stage: str, dataset: str) -> tuple[str, ...]:
    """Modules that serve one dataset at a stage (added to the stage's own roots).

    ``download``: the dataset's module. ``train``: also its modality's adapter and the modules
    of the backbones that apply to it.
    ``extract``: also the modules implementing its shift families for its modality.
    ``estimate``: for a modality with model-aware methods (graphs: GNNEvaluator; images:
    ProjNorm; each runs the model on the splits), their modules and the extract roots;
    otherwise nothing (stored logits only).
    ``report`` adds nothing.

    Raises
    ------
    ValueError
        If the dataset is unknown.
    """
    if stage not in ("download", "train", "extract", "estimate"):
        return ()
    from tasks.data.datasets import get_dataset_spec

    spec = get_dataset_spec(dataset)
    if stage == "estimate":
        # logit methods read stored logits only; model-aware ones (GNNEvaluator on graphs) also
        # run the model on the dataset's splits, so their runs depend on what extract does
        from tasks.methods import MODEL_AWARE_METHODS, MODEL_AWARE_MODULES

        modules = [MODEL_AWARE_MODULES[m] for m, mods in MODEL_AWARE_METHODS.items()
                   if spec.modality in mods]
        if not modules:
            return ()
        return (*modules, *dataset_roots("extract", dataset))
    out = [spec.module] if spec.module else []
    if stage in ("train", "extract"):
        from tasks.models.backbones import available_backbones, get_backbone_spec

        # the modules defining the backbones that apply (text: tasks.models.backbones.text and
        # tasks.models.backbones.distilbert), not just the one named after the modality
        backbone_modules = sorted({
            str(getattr(get_backbone_spec(b).build, "__module__", "") or "")
            for b in available_backbones(spec.modality) if spec.applies(b)
        })
        out += [f"tasks.models.modalities.{spec.modality}", *backbone_modules]
    if stage == "extract":
        from tasks.data.targets import family_implementation

        out += [family_implementation(f, spec.modality, spec.name).module for f in spec.target_families]
    return tuple(dict.fromkeys(m for m in out if m))


def stage_files(stage: str, root: Path | None = None, *, dataset: str | None = None) -> list[Path]:
    """Source files a stage depends on (for one dataset, when given), sorted by relative path.

    Parameters
    ----------
    stage : {"download", "train", "extract", "estimate", "report"}
        Pipeline stage.
    root : Path, optional
        Project root; default :data:`PROJECT_ROOT`.
    dataset : str, optional
        Dataset key: adds :func:`dataset_roots`.

    Returns
    -------
    list of Path
        Absolute paths without duplicates, ``__pycache__`` never included.

    Raises
    ------
    ValueError
        If ``stage`` is not a known stage or ``dataset`` an unknown dataset.
    """
    try:
        roots = STAGE_ROOTS[stage]
    except (KeyError, TypeError):
        raise ValueError(
            f"stage must be one of {', '.join(STAGE_ROOTS)}; got {stage!r}."
        ) from None
    if dataset is not None:
        roots = roots + dataset_roots(stage, dataset)
    return module_closure(roots, root)


def stage_code_version(stage: str, root: Path | None = None, *, dataset: str | None = None) -> str:
    """Digest of the source a stage depends on, passed to its task as the ``code_version`` input.

    Parameters
    ----------
    stage : {"download", "train", "extract", "estimate", "report"}
        Pipeline stage.
    root : Path, optional
        Project root; default :data:`PROJECT_ROOT`.
    dataset : str, optional
        Dataset key; the version then covers the modules serving that dataset too
        (:func:`dataset_roots`) and no other dataset's.

    Returns
    -------
    str
        The first 16 hex digits of a SHA-256 over the stage name and, for every file of
        :func:`stage_files` in order, its relative path and bytes. Line endings are normalised,
        so a checkout with CRLF endings gets the same version.

    Raises
    ------
    ValueError
        If ``stage`` is not a known stage.
    """
    files = stage_files(stage, root, dataset=dataset)
    base = (root or PROJECT_ROOT).resolve()
    version = _digest(stage, tuple((p.relative_to(base).as_posix(), _stat(p)) for p in files),
                      base)
    if stage == "estimate":
        # the stored shift-aware bands come from the active calibration: a refit (alsa-bench
        # calibrate) re-runs the estimates
        from estimators.trust.calibration_artifact import active_calibration_path

        path = active_calibration_path()
        if path is not None and path.is_file():
            mixed = f"{version}:{hashlib.sha256(path.read_bytes()).hexdigest()}"
            version = hashlib.sha256(mixed.encode()).hexdigest()[:16]
    return version


def files_version(files: Iterable[Path], salt: str, root: Path | None = None) -> str:
    """The same digest over any list of project files (the shift cache uses it)."""
    base = (root or PROJECT_ROOT).resolve()
    rels = tuple((Path(p).resolve().relative_to(base).as_posix(), _stat(Path(p))) for p in files)
    return _digest(salt, rels, base)


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=256)
def _digest(stage: str, files: tuple[tuple[str, tuple[int, int]], ...], base: Path) -> str:
    # Keyed on (path, mtime, size) so repeated calls in one process read each file once; the
    # digest itself depends only on the paths and contents.
    h = hashlib.sha256(stage.encode())
    for rel, _ in files:
        h.update(b"\0" + rel.encode() + b"\0")
        h.update((base / rel).read_bytes().replace(b"\r\n", b"\n"))
    return h.hexdigest()[:16]


def code_versions(dataset: str | None = None) -> dict[str, str]:
    """Code version of every stage (for one dataset when given), e.g. for logging."""
    return {stage: stage_code_version(stage, dataset=dataset) for stage in STAGE_ROOTS}


def parse_refresh(refresh: str | Iterable[str] | None) -> frozenset[str]:
    """The stages to re-run for a ``refresh`` request: the named ones and everything after them.

    Parameters
    ----------
    refresh : str, iterable of str or None
        Stage names from :data:`STAGES`, or ``"all"``.

    Returns
    -------
    frozenset of str
        Empty for None or an empty list.

    Raises
    ------
    ValueError
        If a name is not a stage (the message lists the valid names).

    Examples
    --------
    >>> sorted(parse_refresh(["estimate"]))
    ['estimate', 'report']
    """
    if refresh is None:
        return frozenset()
    names = [refresh] if isinstance(refresh, str) else list(refresh)
    valid = (*STAGES, REFRESH_ALL)
    bad = [n for n in names if n not in valid]
    if bad:
        raise ValueError(
            f"refresh must name stages from {', '.join(valid)}; got {', '.join(map(repr, bad))}."
        )
    if not names:
        return frozenset()
    first = 0 if REFRESH_ALL in names else min(STAGES.index(n) for n in names)
    return frozenset(STAGES[first:])
