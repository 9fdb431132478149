"""Data and imports flow one way: suites use the public surface, the core never uses suites.

- Shipped suites (``suites/``, packaged as ``pytest_dlconform.suites``) import from
  ``pytest_dlconform`` only through ``pytest_dlconform.api`` (and its submodules) and their
  own suite modules; never the plugin, the session, the results or any other internal.
- Nothing under ``src/pytest_dlconform`` imports a suite module.
- ``pytest_dlconform.api`` itself imports no framework and does not load the plugin's run
  machinery (a user's own claim module imports it at collection).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "pytest_dlconform"
SUITES = ROOT / "suites"
PUBLIC = "pytest_dlconform.api"
SUITE_PACKAGE = "pytest_dlconform.suites"


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``; relative ones resolved against ``package``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "pytest_dlconform":  # `from pytest_dlconform import evidence`: the module it names
                found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, module))
    return found


def _package_of(path: Path, top: Path, name: str) -> str:
    """The package a file's relative imports start from (its folder, as a dotted name)."""
    return ".".join([name, *path.relative_to(top).parts[:-1]])


def suite_violations() -> list[str]:
    bad = []
    for path in sorted(SUITES.rglob("*.py")):
        package = _package_of(path, SUITES, SUITE_PACKAGE)
        for line, module in _imports(path, package):
            if not (module == "pytest_dlconform" or module.startswith("pytest_dlconform.")):
                continue  # frameworks, numpy, hypothesis, pytest, the standard library
            if module == PUBLIC or module.startswith(PUBLIC + ".") or module.startswith(SUITE_PACKAGE):
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line}: imports {module} (use {PUBLIC})")
    return bad


def core_violations() -> list[str]:
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        package = _package_of(path, SRC, "pytest_dlconform")
        for line, module in _imports(path, package):
            if module.startswith(SUITE_PACKAGE):
                bad.append(f"{path.relative_to(ROOT)}:{line}: the core imports the suite module {module}")
    return bad


def test_suites_import_only_the_public_surface() -> None:
    assert suite_violations() == []


def test_the_core_imports_no_suite() -> None:
    assert core_violations() == []


def test_the_check_sees_a_suite_reaching_into_the_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The direction check can fail: a suite that imports the plugin's stash key, a
    relative import out of the suites and a core module importing a suite are all named."""
    suites = tmp_path / "suites" / "area"
    suites.mkdir(parents=True)
    (suites / "conftest.py").write_text("from pytest_dlconform.plugin import KEY\nfrom ...run.session import Worker\n")
    (suites / "test_ok.py").write_text("from pytest_dlconform.api import evidence\nfrom . import _helpers\nimport numpy\n")
    src = tmp_path / "src" / "pytest_dlconform"
    src.mkdir(parents=True)
    (src / "cluster.py").write_text("from .suites.distributed import ranks\n")
    monkeypatch.setattr(sys.modules[__name__], "SUITES", tmp_path / "suites")
    monkeypatch.setattr(sys.modules[__name__], "SRC", src)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert suite_violations() == [
        "suites/area/conftest.py:1: imports pytest_dlconform.plugin (use pytest_dlconform.api)",
        "suites/area/conftest.py:2: imports pytest_dlconform.run.session (use pytest_dlconform.api)",
    ]
    assert core_violations() == [
        "src/pytest_dlconform/cluster.py:1: the core imports the suite module pytest_dlconform.suites.distributed",
    ]


def test_the_public_surface_imports_no_framework_and_no_run_machinery() -> None:
    code = (
        "import sys, pytest_dlconform.api as api\n"
        "heavy = sorted(m for m in ('tensorflow', 'torch', 'keras', 'jax', 'pytest_dlconform.run.session', "
        "'pytest_dlconform.report.results', 'pytest_dlconform.plugin') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == ""
