"""The wheel ships every suite package, and the plugin module stays framework-free."""

from __future__ import annotations

import ast
import pathlib
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_suite_folder_is_a_listed_package():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        "pytest_dlconform.suites" + ".".join(["", *list(p.parent.relative_to(ROOT / "suites").parts)])
        for p in (ROOT / "suites").rglob("__init__.py")
    }
    on_disk |= {
        "pytest_dlconform" + ".".join(["", *list(p.parent.relative_to(ROOT / "src/pytest_dlconform").parts)])
        for p in (ROOT / "src/pytest_dlconform").rglob("__init__.py")
    }
    assert on_disk == listed, f"pyproject packages differ from the folders: missing {on_disk - listed}, stale {listed - on_disk}"


def test_suite_folders_all_have_init_files():
    for folder in (ROOT / "suites").iterdir():
        if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("test_*.py")):
            assert (folder / "__init__.py").exists(), f"{folder} has tests but no __init__.py: it would not ship"


def _top_level_imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_modules_loaded_with_the_plugin_import_no_framework_at_top_level():
    package = ROOT / "src/pytest_dlconform"
    session = [str(p.relative_to(package)) for p in sorted((package / "run" / "session").glob("*.py"))]
    for name in ("__init__.py", "plugin.py", *session, "run/settings.py", "core/devices.py", "report/results.py",
                 "report/document.py", "core/evidence.py", "run/profiles.py", "core/claims/__init__.py",
                 "frameworks/__init__.py", "frameworks/base.py"):
        heavy = _top_level_imports(package / name) & {"tensorflow", "torch", "keras"}
        assert not heavy, f"{name} imports {heavy} at module level"


def test_loading_the_plugin_imports_no_framework_numpy_or_run_module() -> None:
    """What every pytest run in a host environment pays: the plugin and its option table only."""
    import subprocess
    import sys

    code = ("import sys, pytest_dlconform.plugin\n"
            "print(sorted(m for m in ('torch', 'tensorflow', 'keras', 'jax', 'numpy', 'hypothesis',"
            " 'pytest_dlconform.run.session', 'pytest_dlconform.core.devices') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
