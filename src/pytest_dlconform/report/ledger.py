"""The claims ledger: every registered claim, printed for people (``dlconform claims``),
and the static check that the suites and the registry agree.

The check reads the suites' source (``ast``), never imports them: a suite module may
import a framework, and the ledger must work where none is installed.
"""

from __future__ import annotations

import ast
import json
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ..core import claims as registry

FORMATS = ("text", "markdown", "json")


def print_ledger(globs: Iterable[str] = ("*",), out: TextIO | None = None, fmt: str = "text") -> int:
    out = out or sys.stdout
    selected = registry.matching(globs)
    if fmt == "json":
        out.write(json.dumps([c.as_dict() for c in selected], indent=2, ensure_ascii=False) + "\n")
    elif fmt == "markdown":
        out.write(_markdown(selected))
    else:
        for claim in selected:
            out.write(_text(claim))
        out.write(f"{len(selected)} claims\n")
    return 0 if selected else 1


def _text(claim: registry.Claim) -> str:
    lines = [f"{claim.id}  [{', '.join(claim.frameworks)}]",
             textwrap.indent(textwrap.fill(claim.statement, 96), "    "),
             f"    source: {claim.source}"]
    if claim.seed_accuracy != "accurate":
        lines.append(f"    the seed's wording is {claim.seed_accuracy}: {claim.seed or '(see source)'}")
    elif claim.seed:
        lines.append(f"    seed: {claim.seed}")
    if claim.evidence:
        lines.append(f"    evidence: {claim.evidence}")
    return "\n".join(lines) + "\n"


def _markdown(selected: list[registry.Claim]) -> str:
    rows = ["| claim | statement | source | frameworks | seed's wording |", "|---|---|---|---|---|"]
    for c in selected:
        seed = f"**{c.seed_accuracy}**: {c.seed or ''}" if c.seed_accuracy != "accurate" else ""
        cells = [f"`{c.id}`", c.statement, c.source, ", ".join(c.frameworks), seed]
        rows.append("| " + " | ".join(x.replace("|", "\\|").replace("\n", " ") for x in cells) + " |")
    return "\n".join(rows) + f"\n\n{len(selected)} claims\n"


# ------------------------------------------------------------------ suites vs registry


@dataclass
class SuiteScan:
    """What the suites' source says about claims, without importing it."""

    uses: dict[str, list[str]] = field(default_factory=dict)  # claim id -> "file:line" of each marker
    unmarked: list[str] = field(default_factory=list)  # test functions without any claim marker
    dynamic: list[str] = field(default_factory=list)  # claim markers whose id is not a string literal


def scan_suites(root: str | Path) -> SuiteScan:
    scan = SuiteScan()
    base = Path(root)
    for path in sorted(base.rglob("test_*.py")):
        _scan_module(path, str(path.relative_to(base.parent)), scan)
    return scan


def _is_claim_marker(node: ast.AST) -> bool:
    """``pytest.mark.claim(...)``, ``mark.claim(...)``, as a call."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or node.func.attr != "claim":
        return False
    owner = node.func.value
    return (isinstance(owner, ast.Attribute) and owner.attr == "mark") or (isinstance(owner, ast.Name) and owner.id == "mark")


def _marker_ids(node: ast.AST, where: str, scan: SuiteScan, constants: dict[str, str]) -> bool:
    """Record the claim markers under ``node``; True if there is at least one.

    The id is a string literal or a module-level constant bound once to one
    (``CLAIM = "modules.dropout"``); anything else cannot be checked statically.
    """
    found = False
    for call in (n for n in ast.walk(node) if _is_claim_marker(n)):
        assert isinstance(call, ast.Call)
        found = True
        arg = call.args[0] if call.args else None
        value = arg.value if isinstance(arg, ast.Constant) else constants.get(arg.id) if isinstance(arg, ast.Name) else None
        if isinstance(value, str):
            scan.uses.setdefault(value, []).append(f"{where}:{call.lineno}")
        else:
            scan.dynamic.append(f"{where}:{call.lineno}")
    return found


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level names assigned exactly once, to a string literal."""
    seen: dict[str, list[object]] = {}
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        value = getattr(stmt, "value", None)
        for target in targets:
            if isinstance(target, ast.Name):
                seen.setdefault(target.id, []).append(value.value if isinstance(value, ast.Constant) else None)
    return {name: values[0] for name, values in seen.items() if len(values) == 1 and isinstance(values[0], str)}


def _scan_module(path: Path, name: str, scan: SuiteScan) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    constants = _string_constants(tree)
    module_marked = False
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            module_marked = _marker_ids(stmt.value, name, scan, constants) or module_marked
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
            class_marked = any(_marker_ids(d, name, scan, constants) for d in stmt.decorator_list) or module_marked
            class_marked = _class_pytestmark(stmt, name, scan, constants) or class_marked
            for item in stmt.body:
                _scan_function(item, name, scan, class_marked, constants)
        else:
            _scan_function(stmt, name, scan, module_marked, constants)


def _class_pytestmark(cls: ast.ClassDef, name: str, scan: SuiteScan, constants: dict[str, str]) -> bool:
    marked = False
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            marked = _marker_ids(stmt.value, name, scan, constants) or marked
    return marked


def _scan_function(node: ast.stmt, name: str, scan: SuiteScan, inherited: bool, constants: dict[str, str]) -> None:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.name.startswith("test"):
        return
    marked = False
    for decorator in node.decorator_list:
        marked = _marker_ids(decorator, name, scan, constants) or marked
    if not (marked or inherited):
        scan.unmarked.append(f"{name}:{node.lineno} {node.name}")


@dataclass
class Coverage:
    unknown: dict[str, list[str]]  # claim ids used by tests but not registered -> where
    unchecked: list[str]  # registered claim ids that no test names
    unmarked: list[str]
    dynamic: list[str]

    @property
    def ok(self) -> bool:
        return not (self.unknown or self.unchecked or self.unmarked or self.dynamic)

    def lines(self) -> list[str]:
        out = [f"unknown claim id {cid!r} used at {', '.join(where)}: register it in claims/{cid.split('.')[0]}.toml "
               "or fix the marker" for cid, where in sorted(self.unknown.items())]
        out += [f"registered claim {cid!r} is checked by no test in the suites" for cid in self.unchecked]
        out += [f"test without a claim marker: {where}" for where in self.unmarked]
        out += [f"claim marker without a literal id (cannot be checked statically): {where}" for where in self.dynamic]
        return out


def coverage(root: str | Path, areas: Iterable[str] | None = None) -> Coverage:
    """Compare the suites under ``root`` with the registry (optionally only some areas)."""
    scan = scan_suites(root)
    wanted = set(areas) if areas is not None else set(registry.AREAS)
    known = {cid for cid, c in registry.registry().items() if c.area in wanted}
    # An id whose area is no area at all is always reported, whatever the filter.
    used = {cid: where for cid, where in scan.uses.items()
            if cid.split(".", 1)[0] in wanted or cid.split(".", 1)[0] not in registry.AREAS}
    return Coverage(
        unknown={cid: where for cid, where in used.items() if registry.get(cid) is None},
        unchecked=sorted(known - set(scan.uses)),
        unmarked=scan.unmarked,
        dynamic=scan.dynamic,
    )


def default_suites_root() -> Path:
    """The suites folder: the package ``pytest_dlconform.suites`` (``suites/`` in a checkout)."""
    from importlib import util

    spec = util.find_spec("pytest_dlconform.suites")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the package pytest_dlconform.suites is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def print_coverage(root: str | Path | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    result = coverage(root or default_suites_root())
    for line in result.lines():
        out.write(line + "\n")
    out.write("suites and claim registry agree\n" if result.ok else f"{len(result.lines())} problem(s)\n")
    return 0 if result.ok else 1
