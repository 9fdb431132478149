"""The Keras adapter: which backend runs, requiring one, dtype policies, to-numpy.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..frameworks.keras import (
    active_backend,
    dtype_policy,
    require,
    to_numpy,
)

__all__ = [
    "active_backend",
    "dtype_policy",
    "require",
    "to_numpy",
]
