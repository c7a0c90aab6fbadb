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
(:func:`dataset_roots`): the dataset's own module, its modality's adapter and the run's backbone
(train, extract; every backbone that applies when no backbone is named), and the modules
implementing its shift families for its modality (extract). Adding or editing one dataset
therefore leaves every other dataset's cached train and extract results valid, and adding a
backbone (a module of its own, or a plugin) trains that backbone only.

One method, one key
-------------------
The pipeline caches estimates per run **and method** (:func:`method_code_version`): a method's
key is the closure of the estimate stage's own code, of the method's module (and of the methods
it builds at run time: ``auto``'s members, DistCS's base, the shift gate's covariate method:
:meth:`~estimators.core.base.Estimator.used_estimators`), and of the shift band stored with
every row (the trust layer's :mod:`~estimators.trust.attach_band` and the modules of its fixed
signal panel, :data:`~estimators.trust.shift_signals.PANEL`), plus the active calibration file.
``estimators/__init__.py``, which imports every method so that it registers, is neither hashed
nor followed (:data:`GLUE_MODULES`), and neither are the model-aware methods' modules for a
logit method. So adding a method, or editing one that is not a panel member, re-runs that
method's estimates only; editing a panel method (``ac``, ``doc``, ``atc-*``, ``im``) or the
trust layer re-runs every method, since every stored band depends on them.

Plugins
-------
Estimators, datasets and backbones installed by other distributions (entry points,
:mod:`tasks.runtime.plugins`) are hashed the same way: the closure of a plugin's module follows
the imports inside its own top-level package (:func:`tasks.runtime.plugins.plugin_packages`),
and its files enter the digest by their path inside that package. Editing an installed plugin
re-runs what it serves.

:data:`STAGES` and :func:`parse_refresh` live here too, so the CLI can check a ``--refresh``
value without importing Prefect.

Examples
--------
>>> v = stage_code_version("estimate")
>>> len(v), v == stage_code_version("estimate")
(16, True)
>>> stage_code_version("train", dataset="fmnist") != stage_code_version("train", dataset="arxiv-sim")
True
>>> method_code_version("alsa-g") != method_code_version("cot")
True
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

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

#: Modules a method's estimate key neither hashes nor follows, the registration glue: the top
#: of ``estimators/`` imports every method so that it registers (each method's own key covers
#: its module) and installs the band function (covered by :data:`BAND_ROOTS`); ``baselines``
#: imports the five baselines in the registry's order; ``core.plugins`` registers the
#: estimators of other distributions (each covered by its own key).
GLUE_MODULES: Final[tuple[str, ...]] = (
    "estimators", "estimators.methods.baselines", "estimators.core.plugins",
)

#: The model-aware methods' own modules (run by the estimate stage for those methods only).
MODEL_AWARE_MODULES: Final[tuple[str, ...]] = (
    "tasks.stages.model_aware", "tasks.models.gnnevaluator",
)

#: What the shift band stored with every estimate runs (the panel's methods are added by key).
BAND_ROOTS: Final[tuple[str, ...]] = ("estimators.trust.attach_band",)


def _package_base(top: str) -> Path | None:
    """The folder holding an installed top-level package or module (site-packages), or None."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve().parent
    if spec.origin and spec.origin.endswith(".py"):
        return Path(spec.origin).resolve().parent
    return None


def _module_file(module: str, bases: Mapping[str, Path]) -> Path | None:
    parts = module.split(".")
    base = bases.get(parts[0])
    if base is None:
        return None
    path = base.joinpath(*parts)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _imports(path: Path, module: str, packages: frozenset[str]) -> set[str]:
    """Modules of ``packages`` named by the import statements of one file (all scopes)."""
    st = path.stat()
    return {m for m in _file_imports(path, module, st.st_mtime_ns, st.st_size)
            if m.split(".")[0] in packages}


@lru_cache(maxsize=4096)
def _file_imports(path: Path, module: str, mtime_ns: int, size: int) -> frozenset[str]:
    # keyed on (mtime, size): a file is parsed once per process while it is unchanged
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return frozenset()
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
    return frozenset(found)


def _closure(
    roots: Iterable[str], root: Path | None = None, *, skip: Iterable[str] = (),
    packages: Iterable[str] = (),
) -> dict[str, Path]:
    """Relative name -> absolute path of every file of :func:`module_closure`."""
    base = (root or PROJECT_ROOT).resolve()
    bases: dict[str, Path] = dict.fromkeys(PROJECT_PACKAGES, base)
    for top in packages:
        if top not in bases and (found := _package_base(top)) is not None:
            bases[top] = found
    allowed = frozenset(bases)
    seen: dict[str, Path] = {}
    todo = list(roots)
    done: set[str] = set(skip)
    while todo:
        module = todo.pop()
        if module in done:
            continue
        done.add(module)
        parts = module.split(".")
        for i in range(1, len(parts)):  # parent packages run first
            todo.append(".".join(parts[:i]))
        path = _module_file(module, bases)
        if path is None:
            continue
        seen[path.relative_to(bases[parts[0]]).as_posix()] = path
        todo.extend(_imports(path, module, allowed) - done)
    return {rel: seen[rel] for rel in sorted(seen)}


def module_closure(
    roots: Iterable[str], root: Path | None = None, *, skip: Iterable[str] = (),
    packages: Iterable[str] = (),
) -> list[Path]:
    """Project files that importing ``roots`` can execute, by static reading of imports.

    Parameters
    ----------
    roots : iterable of str
        Dotted module names (``"tasks.report"``).
    root : Path, optional
        Project root; default :data:`PROJECT_ROOT`.
    skip : iterable of str, optional
        Modules neither hashed nor followed (:data:`GLUE_MODULES`); their submodules still are
        when something imports them by name.
    packages : iterable of str, optional
        Installed top-level packages (plugins) whose modules count besides the project's.

    Returns
    -------
    list of Path
        Absolute paths, sorted by relative path, without duplicates; every package
        ``__init__.py`` on the way included; names that are not project modules (a class
        imported with ``from x import Name``, third-party packages) are skipped.
    """
    return list(_closure(roots, root, skip=skip, packages=packages).values())


def _plugin_tops(roots: Iterable[str]) -> tuple[str, ...]:
    """The top-level packages among ``roots`` that belong to installed plugins."""
    tops = {r.split(".")[0] for r in roots} - set(PROJECT_PACKAGES)
    if not tops:
        return ()
    from tasks.runtime.plugins import plugin_packages

    return tuple(sorted(tops & plugin_packages()))


def dataset_roots(stage: str, dataset: str, backbone: str | None = None) -> tuple[str, ...]:
    """Modules that serve one dataset at a stage (added to the stage's own roots).

    ``download``: the dataset's module. ``train``: also its modality's adapter and the module
    of ``backbone`` (of every backbone that applies to the dataset when it is None).
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
        return (*modules, *dataset_roots("extract", dataset, backbone))
    out = [spec.module] if spec.module else []
    if stage in ("train", "extract"):
        from tasks.models.backbones import backbones_for, get_backbone_spec

        # the module defining the run's backbone (text: tasks.models.backbones.text or
        # tasks.models.backbones.distilbert), not just the one named after the modality; so a
        # backbone added in a module of its own (or a plugin) moves no other run's key
        names = backbones_for(spec) if backbone is None else (backbone,)
        backbone_modules = sorted({
            str(getattr(get_backbone_spec(b).build, "__module__", "") or "") for b in names
        })
        out += [f"tasks.models.modalities.{spec.modality}", *backbone_modules]
    if stage == "extract":
        from tasks.data.targets import family_implementation

        out += [family_implementation(f, spec.modality, spec.name).module for f in spec.target_families]
    return tuple(dict.fromkeys(m for m in out if m))


def stage_files(
    stage: str, root: Path | None = None, *, dataset: str | None = None,
    backbone: str | None = None,
) -> list[Path]:
    """Source files a stage depends on (for one dataset, when given), sorted by relative path.

    Parameters
    ----------
    stage : {"download", "train", "extract", "estimate", "report"}
        Pipeline stage.
    root : Path, optional
        Project root; default :data:`PROJECT_ROOT`.
    dataset : str, optional
        Dataset key: adds :func:`dataset_roots`.
    backbone : str, optional
        With ``dataset``: the run's backbone (train, extract), whose module alone is added.

    Returns
    -------
    list of Path
        Absolute paths without duplicates, ``__pycache__`` never included.

    Raises
    ------
    ValueError
        If ``stage`` is not a known stage or ``dataset`` an unknown dataset.
    """
    return list(_stage_closure(stage, root, dataset, backbone).values())


def _stage_closure(
    stage: str, root: Path | None, dataset: str | None, backbone: str | None
) -> dict[str, Path]:
    try:
        roots = STAGE_ROOTS[stage]
    except (KeyError, TypeError):
        raise ValueError(
            f"stage must be one of {', '.join(STAGE_ROOTS)}; got {stage!r}."
        ) from None
    if dataset is not None:
        roots = roots + dataset_roots(stage, dataset, backbone)
    return _closure(roots, root, packages=_plugin_tops(roots))


def stage_code_version(
    stage: str, root: Path | None = None, *, dataset: str | None = None,
    backbone: str | None = None,
) -> str:
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
    backbone : str, optional
        With ``dataset``: the run's backbone; the version covers its module and no other
        backbone's.

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
    version = _files_digest(stage, _stage_closure(stage, root, dataset, backbone))
    return _with_calibration(version) if stage == "estimate" else version


def method_roots(
    method: str, *, params: Mapping[str, Any] | None = None, dataset: str | None = None,
    backbone: str | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The modules one method's estimates run, and the modules its key skips.

    Parameters
    ----------
    method : str
        A method the estimate stage runs (:func:`tasks.methods.all_method_names`).
    params : mapping, optional
        Its hyper-parameters (they may name the methods it builds: DistCS's ``base``).
    dataset, backbone : str, optional
        The run's dataset and backbone; a model-aware method (GNNEvaluator) also runs what
        extract runs for them (:func:`dataset_roots`).

    Returns
    -------
    roots : tuple of str
        The estimate stage's module, the method's module and those of the methods it builds at
        run time (:meth:`~estimators.core.base.Estimator.used_estimators`, recursively), and
        what the stored band runs (:data:`BAND_ROOTS` and the signal panel's modules).
    skip : tuple of str
        :data:`GLUE_MODULES`, and for a logit method :data:`MODEL_AWARE_MODULES`.

    Raises
    ------
    ValueError
        If the method is unknown or a parameter is refused.
    """
    from tasks.methods import MODEL_AWARE_METHODS, all_method_names

    if method not in all_method_names():
        raise ValueError(
            f"method must be one of {', '.join(all_method_names())}; got {method!r}."
        )
    stage = STAGE_ROOTS["estimate"]
    if method in MODEL_AWARE_METHODS:
        extra = dataset_roots("estimate", dataset, backbone) if dataset is not None else ()
        return (*stage, *MODEL_AWARE_MODULES, *extra), GLUE_MODULES
    from estimators import ESTIMATORS, get_estimator
    from estimators.trust.shift_signals import PANEL

    modules: list[str] = []
    todo: list[tuple[str, Mapping[str, Any]]] = [(method, params or {})]
    seen: set[str] = set()
    while todo:
        key, values = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        modules.append(ESTIMATORS[key].__module__)
        todo.extend((k, {}) for k in get_estimator(key, **values).used_estimators())
    panel = [ESTIMATORS[k].__module__ for k in PANEL]
    roots = (*stage, *dict.fromkeys(modules), *BAND_ROOTS, *dict.fromkeys(panel))
    return roots, (*GLUE_MODULES, *MODEL_AWARE_MODULES)


def method_files(
    method: str, root: Path | None = None, *, params: Mapping[str, Any] | None = None,
    dataset: str | None = None, backbone: str | None = None,
) -> list[Path]:
    """Source files one method's estimates depend on (:func:`method_roots`), sorted."""
    return list(_method_closure(method, root, params, dataset, backbone).values())


def _method_closure(
    method: str, root: Path | None, params: Mapping[str, Any] | None, dataset: str | None,
    backbone: str | None = None,
) -> dict[str, Path]:
    roots, skip = method_roots(method, params=params, dataset=dataset, backbone=backbone)
    return _closure(roots, root, skip=skip, packages=_plugin_tops(roots))


def method_code_version(
    method: str, root: Path | None = None, *, params: Mapping[str, Any] | None = None,
    dataset: str | None = None, backbone: str | None = None,
) -> str:
    """Digest of what one method's estimates depend on: the estimate task's ``code_version``.

    The files of :func:`method_files` (the stage's code, the method's modules and those of the
    methods it builds, the shift band's), then the active calibration file (the stored bands
    and ``auto``'s combinations come from it). Another method's module, and
    ``estimators/__init__.py``, are not part of it: adding or editing a method leaves every
    other method's cached estimates valid, unless it is a member of the band's signal panel.

    Parameters
    ----------
    method : str
        Registry key (or a model-aware method).
    root : Path, optional
        Project root; default :data:`PROJECT_ROOT`.
    params : mapping, optional
        The method's hyper-parameters (they may name the methods it builds).
    dataset, backbone : str, optional
        The run's dataset and backbone (they matter for model-aware methods only).

    Returns
    -------
    str
        16 hex digits.

    Raises
    ------
    ValueError
        If the method is unknown or a parameter is refused.
    """
    closure = _method_closure(method, root, params, dataset, backbone)
    return _with_calibration(_files_digest("estimate", closure))


def _with_calibration(version: str) -> str:
    """``version`` mixed with the active calibration file's hash: the stored shift-aware bands
    come from it, so a refit (``alsa-bench calibrate``) re-runs the estimates."""
    from estimators.trust.calibration_artifact import active_calibration_path

    path = active_calibration_path()
    if path is not None and path.is_file():
        mixed = f"{version}:{hashlib.sha256(path.read_bytes()).hexdigest()}"
        version = hashlib.sha256(mixed.encode()).hexdigest()[:16]
    return version


def _files_digest(salt: str, files: Mapping[str, Path]) -> str:
    return _digest(salt, tuple((rel, str(path), _stat(path)) for rel, path in files.items()))


def files_version(files: Iterable[Path], salt: str, root: Path | None = None) -> str:
    """The same digest over any list of project files (the shift cache uses it)."""
    base = (root or PROJECT_ROOT).resolve()
    return _files_digest(salt, {Path(p).resolve().relative_to(base).as_posix(): Path(p)
                                for p in files})


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=1024)
def _digest(stage: str, files: tuple[tuple[str, str, tuple[int, int]], ...]) -> str:
    # Keyed on (path, mtime, size) so repeated calls in one process read each file once; the
    # digest itself depends only on the relative paths and contents.
    h = hashlib.sha256(stage.encode())
    for rel, path, _ in files:
        h.update(b"\0" + rel.encode() + b"\0")
        h.update(Path(path).read_bytes().replace(b"\r\n", b"\n"))
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
