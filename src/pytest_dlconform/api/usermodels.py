"""Registered models (--dl-model): what a factory returns (``UserModel``), their example
inputs and targets.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only. A
model factory imports ``from pytest_dlconform.api.usermodels import UserModel``.
"""

from __future__ import annotations

from ..run.usermodels import UserModel, example_inputs, example_targets

__all__ = [
    "UserModel",
    "example_inputs",
    "example_targets",
]
