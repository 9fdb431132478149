"""Work in a fresh interpreter, with a deadline, leaving no process behind.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..frameworks.fresh import call, run_python

__all__ = [
    "call",
    "run_python",
]
