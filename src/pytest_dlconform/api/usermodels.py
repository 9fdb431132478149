"""Registered models (--dl-model): their example inputs and targets.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..run.usermodels import (
    example_inputs,
    example_targets,
)

__all__ = [
    "example_inputs",
    "example_targets",
]
