"""Device facts a claim needs (e.g. whether a GPU supports bfloat16).

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..core.devices import bf16_support

__all__ = [
    "bf16_support",
]
