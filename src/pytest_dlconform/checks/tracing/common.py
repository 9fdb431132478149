"""What the tracing oracles share: the forward-error comparison of a traced or compiled
run with its float64 reference (:func:`assert_within`), that bound for a generated program,
widened for TF32 on GPUs (:func:`program_error_bound`), and the counter that names
generated functions (each one a new code object, file name and function name).

Importing this module imports no framework.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

from ...core import evidence
from ..numerics import ToleranceExceeded, difference, precision_of, record_held

# Generated functions and programs take their names from one counter, so no two in a
# process share a name or a file name (dynamo keys its caches by both).
FRESH = itertools.count()


def assert_within(actual: Any, expected: Any, bound: float, *, what: str, dtype: str | None = None) -> float:
    """``max|actual - expected| <= bound`` (an absolute forward-error bound, e.g. from
    ``Program.error_bound``); records evidence; returns the error.

    Non-finite entries must match exactly (inf for inf, nan for nan: numerics.difference).
    ``dtype`` (default: the precision ``actual`` is held in) decides the canonical wrong
    answers the bound must reject; one that accepts any is recorded as inconclusive.
    """
    __tracebackhide__ = True
    d = difference(actual, expected)
    err = d.max_abs
    if not err <= bound:
        evidence.check(what, observed=err, tolerance=bound)
        if not d.nonfinite_match:
            raise ToleranceExceeded(f"{what}: {d.describe()}; non-finite values must match the reference's")
        raise ToleranceExceeded(
            f"{what}: max|actual - expected| = {err:.3e}, but should be <= {bound:.3e} (forward-error bound; "
            f"largest at element {list(d.at or ())})"
        )
    record_held(what, expected, lambda w: difference(w, expected).max_abs <= bound, observed=err, tolerance=bound,
                dtype=precision_of(actual, dtype), scale=d.scale)
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
