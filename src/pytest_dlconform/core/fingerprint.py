"""Which version of the claims and the suites a report was made with.

:func:`suite_hash` is a sha256 over the claim registry's TOML files and the suites' ``.py``
files of the installed package, in sorted order, each under its path inside the package.
Every report records it in its environment (``suite_hash``), so ``dlconform compare`` can
say when two reports were judged by different suites: a verdict that changed may then come
from a changed test, not from the framework.

It reads files only: no suite module and no framework is imported (the suites package is
found with :func:`importlib.util.find_spec`, which does not run its ``__init__``).
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources, util
from pathlib import Path

ENV_KEY = "suite_hash"


def _files() -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    registry = Path(str(resources.files("pytest_dlconform.core.claims")))
    found += [(f"claims/{p.name}", p) for p in registry.glob("*.toml") if p.is_file()]
    spec = util.find_spec("pytest_dlconform.suites")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        base = Path(root)
        found += [(f"suites/{p.relative_to(base).as_posix()}", p) for p in base.rglob("*.py")
                  if "__pycache__" not in p.parts and p.is_file()]
    return sorted(found)


@functools.lru_cache(maxsize=1)
def suite_hash() -> str:
    """``sha256:<hex>`` of the registry and the suites (line endings normalized)."""
    digest = hashlib.sha256()
    for name, path in _files():
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(path.read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return f"sha256:{digest.hexdigest()}"
