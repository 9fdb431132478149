"""Processes, groups and clusters the distributed suites use: the per-worker pool of
process groups and clusters, a rank's context, the error a dead group raises, and results
computed once per run and shared by its xdist workers.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..harness.groups import (
    ClusterError,
)
from ..harness.pool import (
    GroupPool,
)
from ..harness.rank import (
    WorkerContext,
)
from ..harness.shared import SharedResults, compiler_caches, run_directory

__all__ = [
    "ClusterError",
    "GroupPool",
    "SharedResults",
    "WorkerContext",
    "compiler_caches",
    "run_directory",
]
