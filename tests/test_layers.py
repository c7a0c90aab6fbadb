"""The import layers of the product code: no circles, and no import against the layer order.

Every ``import`` statement of every product module (``flows``, ``tasks``, ``storage``,
``estimators``) is read with :mod:`ast`, at every scope (an import inside a function counts: it
runs as surely as one at the top), relative imports resolved. Each module belongs to one group
of :data:`LAYERS`, listed from the top down. A module may import:

* modules of its own group, as long as no circle forms;
* modules of any group of a *lower* layer.

It may not import a module of a higher layer (an arrow back up), nor one of another group of
its own layer (siblings stay apart: a shift family never imports a dataset module and a dataset
module never imports a shift family; what both need sits below them). Separately, the graph of
all imports between files must have no cycle at all.

A new module joins a group by its dotted name (longest matching prefix); a module that no group
covers fails :func:`test_every_product_module_has_a_layer`, so the table stays complete.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("flows", "tasks", "storage", "estimators")

#: Layers from the top down; each layer is a tuple of sibling groups (dotted-name prefixes).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("flows",),
    ("tasks.plan", "tasks.monitor"),
    ("tasks.stages",),
    ("tasks.report",),
    ("tasks.methods", "tasks.catalog"),
    ("tasks.models",),
    ("tasks.data.targets", "tasks.data.fetch"),
    ("tasks.data.datasets", "tasks.data.shifts"),
    ("tasks.data.finetune_weights",),
    ("tasks.data.families", "tasks.data.temporal", "tasks.data.pretrained_weights",
     "tasks.data.feature_cache"),
    ("tasks.data.spec", "tasks.data.files", "tasks.data.errors", "tasks.data.graphs",
     "tasks.data.texts", "tasks.data.tables", "tasks.data.synthetic", "tasks.data"),
    ("tasks.runtime", "tasks"),
    ("storage",),
    # inside estimators/: the package top (it wires the trust layer into the core's band slot),
    # the trust layer, the three method folders (siblings), shared maths, the core
    ("estimators",),
    ("estimators.trust",),
    ("estimators.methods", "estimators.scores", "estimators.features"),
    ("estimators.maths",),
    ("estimators.core",),
)


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _resolve(target: str, known: dict[str, Path]) -> str:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Project modules that ``name`` imports: ``from pkg import sub`` is an arrow to ``pkg.sub``
    when that is a module, else to ``pkg``; ``import a.b`` is an arrow to ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(_resolve(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else _resolve(base, known))
    return {m for m in found if m and m != name}


def _group(name: str) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for index, groups in enumerate(LAYERS):
        for group in groups:
            if name == group or name.startswith(group + "."):
                if best is None or len(group) > len(best[1]):
                    best = (index, group)
    return best


MODULES = _modules()
GRAPH = {name: _imports(name, path, MODULES) for name, path in MODULES.items()}


def test_every_product_module_has_a_layer() -> None:
    missing = sorted(m for m in MODULES if _group(m) is None)
    assert not missing, f"modules outside every layer of tests/test_layers.py: {missing}"


def _against_the_order(graph: dict[str, set[str]]) -> list[str]:
    """Every import of ``graph`` that points up the layers or across to a sibling group."""
    bad = []
    for source, targets in sorted(graph.items()):
        src = _group(source)
        for target in sorted(targets):
            dst = _group(target)
            if src is None or dst is None:
                continue
            if dst[0] < src[0]:
                bad.append(f"{source} -> {target} (imports upward: {src[1]} is below {dst[1]})")
            elif dst[0] == src[0] and dst[1] != src[1]:
                bad.append(f"{source} -> {target} (siblings {src[1]} and {dst[1]} stay apart)")
    return bad


def test_no_import_against_the_layer_order() -> None:
    bad = _against_the_order(GRAPH)
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


@pytest.mark.parametrize("source, target, why", [
    # the core reaching the trust layer (what Estimator.fit's band hook used to be)
    ("estimators.core.base", "estimators.trust.calibration_artifact", "imports upward"),
    ("estimators.maths.temperature", "estimators.methods.ac", "imports upward"),
    ("estimators.methods.ac", "estimators.trust.shift_signals", "imports upward"),
    ("estimators.features.dispersion", "estimators.scores.mano", "stay apart"),
    ("estimators.methods.cot", "estimators.features.distcs", "stay apart"),
    ("estimators.trust.auto", "estimators", "imports upward"),
    ("storage.paths", "tasks.plan", "imports upward"),
])
def test_the_order_check_catches(source: str, target: str, why: str) -> None:
    assert source in MODULES and target in MODULES
    graph = {name: set(targets) for name, targets in GRAPH.items()}
    graph[source].add(target)
    bad = [line for line in _against_the_order(graph) if line.startswith(f"{source} -> ")]
    assert len(bad) == 1 and bad[0].startswith(f"{source} -> {target} ") and why in bad[0], bad


def test_estimators_layers_read_from_the_files() -> None:
    """The graph holds the real arrows between the layers of estimators/ (a parse that lost
    them would pass the order check vacuously)."""
    assert "estimators.core.base" in GRAPH["estimators.methods.ac"] or any(
        t.startswith("estimators.core.") for t in GRAPH["estimators.methods.ac"])
    assert any(t.startswith("estimators.maths.") for t in GRAPH["estimators.methods.ac"])
    assert any(t.startswith("estimators.trust.") for t in GRAPH["estimators"])
    assert not any(t.startswith("estimators.trust") for t in GRAPH["estimators.core.base"])


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_circles() -> None:
    circles = _cycles(GRAPH)
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
])
def test_cycle_finder(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert _cycles(graph) == expected


def test_groups_resolve_by_longest_prefix() -> None:
    assert _group("tasks.data.datasets.cifar") == (7, "tasks.data.datasets")
    assert _group("tasks.data.finetune_weights") == (8, "tasks.data.finetune_weights")
    assert _group("tasks.data.spec") == (10, "tasks.data.spec")
    assert _group("tasks.runtime.threads") == (11, "tasks.runtime")
    assert _group("flows.cli") == (0, "flows")
    assert _group("estimators") == (13, "estimators")
    assert _group("estimators.trust.auto") == (14, "estimators.trust")
    assert _group("estimators.methods.alsa.kernels") == (15, "estimators.methods")
    assert _group("estimators.core.base") == (17, "estimators.core")
