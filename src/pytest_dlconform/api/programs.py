"""Generated op programs (the op library, one module per family in pytest_dlconform.programs):
the strategies for programs and their inputs, the samples and modes of the op suites.

Part of the public surface for suites (:mod:`pytest_dlconform.api`); re-exports only.
"""

from __future__ import annotations

from ..programs import (
    LAYOUTS,
    Op,
    Program,
    ProgramCase,
    edges,
    input_recipes,
    op_names,
    program_cases,
    programs,
)
from ..programs.core import INPUT_MAX
from ..programs.errors import LINEAR_OPS, gradient_error_bound, low_precision_error_bound
from ..programs.ops import OWN_ID_OPS, PIECEWISE_LINEAR, documented_limit, excluded_dtypes
from ..programs.ops.normalization import NORM_OPS, min_variance
from ..programs.samples import (
    COMPILED_MODES,
    LOW_PRECISION_DTYPES,
    LOW_PRECISION_MODE,
    MODES,
    Sample,
    class_cases,
    coverage_key,
    layout_samples,
    ops_for,
    registered,
    sample_cases,
    samples,
)

__all__ = [
    "COMPILED_MODES",
    "INPUT_MAX",
    "LAYOUTS",
    "LINEAR_OPS",
    "LOW_PRECISION_DTYPES",
    "LOW_PRECISION_MODE",
    "MODES",
    "NORM_OPS",
    "OWN_ID_OPS",
    "PIECEWISE_LINEAR",
    "Op",
    "Program",
    "ProgramCase",
    "Sample",
    "class_cases",
    "coverage_key",
    "documented_limit",
    "edges",
    "excluded_dtypes",
    "gradient_error_bound",
    "input_recipes",
    "layout_samples",
    "low_precision_error_bound",
    "min_variance",
    "op_names",
    "ops_for",
    "program_cases",
    "programs",
    "registered",
    "sample_cases",
    "samples",
]
