"""Generated op programs (the op library, one module per family in pytest_dlconform.programs):
the strategies for programs and their inputs, and the known limits.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..programs import (
    LAYOUTS,
    TF_FORWARD_MODE,
    TORCH_FLOAT64_GRADIENT,
    TORCH_FORWARD_MODE,
    Op,
    Program,
    ProgramCase,
    input_recipes,
    op_names,
    program_cases,
    programs,
)

__all__ = [
    "LAYOUTS",
    "TF_FORWARD_MODE",
    "TORCH_FLOAT64_GRADIENT",
    "TORCH_FORWARD_MODE",
    "Op",
    "Program",
    "ProgramCase",
    "input_recipes",
    "op_names",
    "program_cases",
    "programs",
]
