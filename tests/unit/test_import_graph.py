"""The package's modules import one way: down the layers of docs/architecture.md.

Every module of ``src/pytest_dlconform`` is parsed (no import runs): module-level and
function-local imports, absolute and relative, ``from . import x`` taken as the submodule
``x`` where ``x`` is one. From that graph:

- an edge from a module to one in a higher layer is an error, unless it is in
  KNOWN_UPWARD with the reason it is still there;
- a circle (a strongly connected set of modules) is an error, unless it is in KNOWN_CIRCLES
  exactly as listed;
- an entry of either list that the code no longer has is an error too: the lists only shrink.

That suites import only ``pytest_dlconform.api`` is tests/unit/test_import_direction.py.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "pytest_dlconform"
PACKAGE = "pytest_dlconform"

# Lowest first. A module's layer is that of the longest prefix listed (dotted names without
# the "pytest_dlconform." part; "" is the package's own __init__).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("", "core", "report.document")),
    ("frameworks", ("frameworks",)),
    ("harness", ("harness",)),
    ("programs", ("programs",)),
    ("checks", ("checks",)),
    ("distribution", ("harness.distribution",)),
    ("run", ("run", "report", "plugin")),
    ("surface", ("api", "cli")),
)
# Standalone reproduction scripts for upstream trackers: they import nothing of the package.
STANDALONE = ("report.findings",)

# Upward edges the code has today, (importer, imported), each with why it is still there.
KNOWN_UPWARD: dict[tuple[str, str], str] = {
}

# Circles the code has today, each as its full set of modules, with why it is still there.
KNOWN_CIRCLES: dict[frozenset[str], str] = {
}


def _name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(src: Path) -> dict[str, Path]:
    """Dotted name (without the package) of every module under ``src``."""
    return {_name(path, src): path for path in sorted(src.rglob("*.py"))}


def _absolute(name: str) -> str:
    return f"{PACKAGE}.{name}" if name else PACKAGE


def _relative(target: str) -> str:
    return target.removeprefix(PACKAGE).removeprefix(".")


def _imported(node: ast.AST, here: str, is_package: bool, known: Mapping[str, Path]) -> Iterator[str]:
    """The package's modules that one import statement names, without the package prefix."""
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = _absolute(here).split(".")
            if not is_package:
                base = base[:-1]
            base = base[: len(base) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        # `from pkg import x`: the submodule x where there is one, else a name of pkg itself
        targets = [f"{module}.{alias.name}" if _relative(f"{module}.{alias.name}") in known else module
                   for alias in node.names]
    else:
        return
    for target in targets:
        if target != PACKAGE and not target.startswith(PACKAGE + "."):
            continue
        name = _relative(target)
        while name not in known and name:
            name = name.rpartition(".")[0]
        yield name


def graph(src: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its body (itself left out)."""
    known = modules(src)
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found = edges.setdefault(name, set())
        for node in ast.walk(tree):
            found.update(_imported(node, name, path.name == "__init__.py", known))
        found.discard(name)
    return edges


def layer(name: str) -> int:
    best, level = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or (prefix and name.startswith(prefix + "."))) and len(prefix) > best:
                best, level = len(prefix), index
    if level < 0:
        raise AssertionError(f"module {_absolute(name)} is in no layer: add it to LAYERS (and docs/architecture.md)")
    return level


def circles(edges: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected sets of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges) + 100))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def upward_edges(edges: Mapping[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in edges.items() if not _standalone(a) for b in targets if layer(b) > layer(a)}


def _standalone(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in STANDALONE)


def _show(names: frozenset[str]) -> str:
    return "{" + ", ".join(sorted(names)) + "}"


def violations(src: Path) -> list[str]:
    edges = graph(src)
    bad = [f"{_absolute(a)} imports {_absolute(b)}: a standalone script imports the package"
           for a, targets in sorted(edges.items()) if _standalone(a) for b in sorted(targets)]
    upward = upward_edges(edges)
    names = [name for name, _ in LAYERS]
    bad += [f"new upward import: {_absolute(a)} ({names[layer(a)]}) imports {_absolute(b)} ({names[layer(b)]})"
            for a, b in sorted(upward - KNOWN_UPWARD.keys())]
    bad += [f"KNOWN_UPWARD lists {a} -> {b}, which the code no longer has: remove it"
            for a, b in sorted(KNOWN_UPWARD.keys() - upward)]
    found = set(circles(edges))
    bad += [f"new import circle: {_show(c)}" for c in sorted(found - KNOWN_CIRCLES.keys(), key=sorted)]
    bad += [f"KNOWN_CIRCLES lists {_show(c)}, which the code no longer has as such: update it"
            for c in sorted(KNOWN_CIRCLES.keys() - found, key=sorted)]
    return bad


def test_imports_point_down_the_layers_and_the_known_exceptions_still_exist() -> None:
    assert violations(SRC) == []


def test_every_module_is_in_a_layer() -> None:
    for name in modules(SRC):
        if not _standalone(name):
            layer(name)


def test_the_graph_resolves_relative_function_local_and_submodule_imports(tmp_path: Path) -> None:
    src = tmp_path / PACKAGE
    for folder in ("checks", "core", "run"):
        (src / folder).mkdir(parents=True)
        (src / folder / "__init__.py").write_text("")
    (src / "__init__.py").write_text("")
    (src / "core" / "exceptions.py").write_text("")
    (src / "run" / "settings.py").write_text("from ..core import exceptions\n")
    (src / "checks" / "__init__.py").write_text("from .numerics import X\n")
    (src / "checks" / "numerics.py").write_text("def f():\n    from ..run import settings\n"
                                                 "    import pytest_dlconform.checks\n")
    (src / "checks" / "other.py").write_text("from .. import core, not_a_module\nfrom ..core import exceptions\n"
                                             "from . import numerics\n")
    assert graph(src) == {
        "": set(),
        "core": set(),
        "core.exceptions": set(),
        "run": set(),
        "run.settings": {"core.exceptions"},
        "checks": {"checks.numerics"},
        "checks.numerics": {"checks", "run.settings"},
        "checks.other": {"core", "", "core.exceptions", "checks.numerics"},
    }


def test_the_check_sees_a_new_upward_edge_a_new_circle_and_a_stale_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / PACKAGE
    (src / "harness").mkdir(parents=True)
    (src / "core").mkdir()
    (src / "__init__.py").write_text("")
    (src / "core" / "__init__.py").write_text("")
    (src / "core" / "exceptions.py").write_text("def f():\n    from .. import plugin\n")
    (src / "plugin.py").write_text("from .core import exceptions\n")
    (src / "harness" / "__init__.py").write_text("")
    (src / "harness" / "a.py").write_text("from . import b\n")
    (src / "harness" / "b.py").write_text("from .a import x\n")
    monkeypatch.setattr(sys.modules[__name__], "KNOWN_UPWARD", {("frameworks.torch", "run.settings"): "gone"})
    monkeypatch.setattr(sys.modules[__name__], "KNOWN_CIRCLES", {frozenset({"report.compare", "run.shards"}): "gone"})
    assert violations(src) == [
        "new upward import: pytest_dlconform.core.exceptions (foundation) imports pytest_dlconform.plugin (run)",
        "KNOWN_UPWARD lists frameworks.torch -> run.settings, which the code no longer has: remove it",
        "new import circle: {core.exceptions, plugin}",
        "new import circle: {harness.a, harness.b}",
        "KNOWN_CIRCLES lists {report.compare, run.shards}, which the code no longer has as such: update it",
    ]


def test_the_longest_prefix_decides_a_layer() -> None:
    names = [name for name, _ in LAYERS]
    assert names[layer("report.document")] == "foundation"
    assert names[layer("report.results")] == "run"
    assert names[layer("harness.distribution.launch")] == "distribution"
    assert names[layer("harness.pool")] == "harness"
