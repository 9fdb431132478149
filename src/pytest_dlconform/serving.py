"""Moved to :mod:`pytest_dlconform.harness.serving`; this path keeps existing imports working."""

from __future__ import annotations

from .harness.serving import (
    ARCHIVER,
    HANDLER_SOURCE,
    INSTALL_HINT,
    SERVER,
    Response,
    StopReport,
    TorchServe,
    archive,
    missing_requirements,
    tf_serving_unavailable,
    undeclared_yaml,
)

__all__ = [
    "ARCHIVER", "HANDLER_SOURCE", "INSTALL_HINT", "SERVER", "Response", "StopReport", "TorchServe", "archive",
    "missing_requirements", "tf_serving_unavailable", "undeclared_yaml",
]
