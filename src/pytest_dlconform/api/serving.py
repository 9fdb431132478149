"""Model servers on loopback: TorchServe (archive, start, stop) and why TF Serving cannot run here.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..harness.serving import (
    HANDLER_SOURCE,
    TorchServe,
    archive,
    missing_requirements,
    tf_serving_unavailable,
    undeclared_yaml,
)

__all__ = [
    "HANDLER_SOURCE",
    "TorchServe",
    "archive",
    "missing_requirements",
    "tf_serving_unavailable",
    "undeclared_yaml",
]
