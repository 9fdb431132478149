"""What the tracing oracles share: the forward-error comparison of a traced or compiled
run with its float64 reference (:func:`assert_within`), that bound for a generated program,
widened for TF32 on GPUs (:func:`program_error_bound`), and the counter that names
generated functions (each one a new code object, file name and function name).

Importing this module imports no framework.
"""

from __future__ import annotations

import itertools
import math
import sys
from typing import Any

import numpy as np

from ... import evidence
from ..numerics import ToleranceExceeded

# Generated functions and programs take their names from one counter, so no two in a
# process share a name or a file name (dynamo keys its caches by both).
FRESH = itertools.count()


def assert_within(actual: Any, expected: Any, bound: float, *, what: str) -> float:
    """``max|actual - expected| <= bound`` (an absolute forward-error bound, e.g. from
    ``Program.error_bound``); records evidence; returns the error."""
    __tracebackhide__ = True
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        raise ToleranceExceeded(f"{what}: shape {a.shape}, but should be {e.shape}")
    finite = np.isfinite(e)
    err = float(np.max(np.abs(a[finite] - e[finite]))) if finite.any() else 0.0
    # Non-finite entries must match exactly (inf for inf, nan for nan).
    if not np.array_equal(np.isfinite(a), finite) or not np.array_equal(a[~finite], e[~finite], equal_nan=True):
        err = math.inf
    evidence.check(what, observed=err, tolerance=bound)
    if not err <= bound:
        raise ToleranceExceeded(
            f"{what}: max|actual - expected| = {err:.3e}, but should be <= {bound:.3e} (forward-error bound)"
        )
    return err


def _tf32_program(program: Any, framework: str) -> bool:
    """TensorFlow: its switch covers the whole program (as before). torch: contractions
    follow the cuBLAS switch, conv2d the cuDNN one."""
    from ...programs import OPS
    from ..tf32 import tf32_reason, torch_precision

    if framework != "torch":
        return tf32_reason(framework) is not None
    torch = sys.modules.get("torch")
    kinds = {"conv" if op.name == "conv2d" else "matmul" for op in program.ops
             if op.name == "conv2d" or OPS[op.name].category == "contraction"}
    return any(torch_precision(torch, kind) == "tf32" for kind in kinds)


def program_error_bound(case: Any, dtype: str, *, device: str, framework: str) -> float:
    """A generated program's forward-error bound (``programs.Program.error_bound``) for a run
    in ``dtype``. On Ampere and newer GPUs float32 may run in TF32, as the frameworks'
    switches say (checks.tf32: TensorFlow's matmuls and convolutions by default, torch's
    cuDNN convolutions by default and its matmuls when fp32_precision / allow_tf32 say so);
    TF32's unit round-off 2**-11 is float16's, so such a run gets float16's bound."""
    tf32 = device != "cpu" and dtype == "float32" and _tf32_program(case.program, framework)
    return float(case.program.error_bound(case.inputs, "float16" if tf32 else dtype))
