"""The import hook that applies a mutant in the process it runs in.

:func:`install` puts a finder first on ``sys.meta_path``. When the mutant's target module
is imported, the finder lets the ordinary finders locate it and wraps its loader's
``exec_module``, so the mutant's ``apply`` runs right after the module's own code, before
anyone else sees the module. Each process records the outcome in ``DLCONFORM_MUTANT_LOG``
(one line per process: ``applied`` or ``failed``), so the runner can tell a mutant the
suites never reached from one they did not catch. A failing ``apply`` never breaks the
framework's import: it is recorded and the run becomes a harness error.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from . import ENV_VAR, LOG_VAR, Mutant, get

EXTRA_MODULES_VAR = "DLCONFORM_MUTANT_MODULES"  # more library modules (comma-separated), e.g. a test's own mutants
applied: list[str] = []  # names applied in this process (the tests read it)


def _log(line: str) -> None:
    path = os.environ.get(LOG_VAR)
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:  # one short append per process: atomic enough on POSIX
            fh.write(f"{os.getpid()} {line}\n")
    except OSError:
        pass


def _apply(m: Mutant) -> None:
    try:
        m.apply()
    except Exception as exc:  # recorded for the runner (harness error); the import itself goes on
        _log(f"failed {m.name}: {type(exc).__name__}: {exc}".replace("\n", " "))
        traceback.print_exc(file=sys.stderr)
        return
    applied.append(m.name)
    _log(f"applied {m.name} argv={' '.join(sys.argv[:2])[:120]}")


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, m: Mutant) -> None:
        self.mutant = m

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != self.mutant.target:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        m = self.mutant

        def exec_module(module: ModuleType) -> None:
            original(module)
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]  # once per process
            _apply(m)

        loader.exec_module = exec_module  # type: ignore[method-assign]  # this module's own loader instance
        return spec


def _extra_modules() -> None:
    import importlib

    for name in filter(None, os.environ.get(EXTRA_MODULES_VAR, "").split(",")):
        importlib.import_module(name.strip())


def install(name: str) -> Mutant:
    """Apply mutant ``name`` when its target is imported (now, if it already is)."""
    _extra_modules()
    m = get(name)
    if m.target in sys.modules:
        _apply(m)
    else:
        sys.meta_path.insert(0, _Finder(m))
    return m


def from_environment() -> None:
    """What our sitecustomize runs: install the mutant ``DLCONFORM_MUTANT`` names, if any."""
    name = os.environ.get(ENV_VAR, "").strip()
    if not name:
        return
    try:
        install(name)
    except KeyError:
        _log(f"failed {name}: no such mutant")
