"""Tolerance policy and normwise comparisons: the project's one error model.

A tolerance comes from the dtype and the operation, never from what made a test green.
(docs/tolerances.md lists every check and what its bound is made of; this docstring is
the model they all share.)

Relative part. For a computation of ``ops`` chained elementary operations and reductions
over at most ``reduction`` terms, the classic forward-error bound (Higham, *Accuracy and
Stability of Numerical Algorithms*, ch. 3: gamma_n = n*u/(1-n*u)) gives a normwise
relative error of ``(OP_ROUNDING * ops + reduction) * u`` with ``u`` the dtype's unit
round-off: each operation errs by at most :data:`OP_ROUNDING` units of ``u`` (IEEE 754
arithmetic and sqrt are correctly rounded, <= 1 u; the elementary functions are not, and
their documented accuracy is at most 2 ulp = 4 u: glibc's "Known Maximum Errors in Math
Functions", Eigen's float tanh/exp "a couple of ulp", SLEEF's u10 kernels that torch's
vectorised CPU ops use 1 ulp), and a sum rounds once per term (recursive summation; pairwise
and blocked orders do better). Errors of earlier operations reach the result multiplied by
the normwise relative condition of what follows (``||J|| ||x|| / ||y||`` in the infinity
norm); the bound takes it as 1, which holds for products, sums of terms whose size the
bound is taken against, and the saturating functions (tanh, sigmoid, relu, sqrt). A caller
whose computation cancels or amplifies gets no extra factor: it states the magnitude of its
intermediates (below), the same first-order model written absolutely (crossframework
multiplies by the condition its reference measures layer by layer). We compare normwise,
``max|a - b| <= rtol * max|b|``, which is scale-aware and does not blow up on entries that
happen to be near zero. (Until issue 13 an unexplained factor ``CONDITION = 16`` sat on top
of ``(ops + reduction) * u``; docs/tolerances.md has the measurements behind its removal.)

Absolute part (the magnitude of the intermediates). The bound above is relative to the
*result*. It is only valid when the result is not much smaller than the quantities it
was computed from: Higham's bound for a sum is ``gamma_n * sum|terms|``, not
``gamma_n * |sum|``. Where the result can cancel (``1 - tanh(x)**2`` at |x| ~ 3, a
polynomial near a root, ``x*cos(x) + sin(x)``) or is exactly zero while its computation
is not (a softmax summed over its axis: identically 1, derivative identically 0, computed
from terms of size 1), the rounding error is set by the magnitude ``M`` of the
intermediates. :func:`tolerance` takes ``magnitude=M`` and adds the absolute floor
``atol = rtol * M``: the same rounding model applied to the size of what was actually
rounded. :func:`assert_close` accepts ``max|a - b| <= rtol * max|b| + atol``. A caller
with its own absolute bound (``Program.derivative_error_bound``) passes ``atol=`` directly.
A bound therefore never collapses to zero or to the size of a cancelled result, while a
wrong result that is wrong by more than the rounding of its own intermediates still fails.

Underflow. TensorFlow runs its CPU kernels with subnormal numbers flushed to zero (as do
XLA and GPUs' fast paths): a result below the smallest normal number may come back as 0.
``tolerance(..., underflow=True)`` adds the floor ``(ops + reduction) * smallest normal``
(negligible above it: 2.2e-308 in float64, 1.2e-38 in float32) for inputs that reach there.

Scale factors. A factor such as dropout's ``1/(1-p)`` is itself a rounded number: count
the roundings of the factor (``1 - p`` in float64, its rounding to the tensor dtype, the
division) as well as the multiply (checks/stats.py, :func:`~.stats.dropout_scale_bound`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import evidence

# Smallest positive normal number of each dtype: below it, a result may be flushed to zero.
SMALLEST_NORMAL = {"float64": 2.0**-1022, "float32": 2.0**-126, "float16": 2.0**-14, "bfloat16": 2.0**-126}
UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
# TensorFloat-32: TensorFlow runs float32 matmuls and convolutions on Ampere+ GPUs in TF32
# by default (tf.config.experimental.enable_tensor_float_32_execution); a 10-bit mantissa.
TF32_ROUNDOFF = 2.0**-11
# One operation's rounding in units of u: the documented accuracy of the elementary functions,
# 2 ulp (module docstring); the same allowance as programs.errors.ULPS.
OP_ROUNDING = 4.0


def rounding_terms(ops: int, reduction: int) -> float:
    """``OP_ROUNDING * ops + reduction`` (each at least 1): the bound's count of roundings, in u."""
    return OP_ROUNDING * max(1, ops) + max(1, reduction)


class ToleranceExceeded(AssertionError):
    pass


@dataclass(frozen=True)
class Tolerance:
    """``|a - b| <= rtol * max|b| + atol``; ``why`` states what each part is made of."""

    rtol: float
    why: str
    atol: float = 0.0

    def as_evidence(self) -> dict[str, Any]:
        return {"rtol": self.rtol, "atol": self.atol, "tolerance_basis": self.why}

    def with_floor(self, atol: float, why: str) -> Tolerance:
        """This tolerance plus an absolute floor ``atol`` (errors add), with its derivation."""
        return Tolerance(self.rtol, f"{self.why} + atol {atol:.3g} [{why}]", self.atol + atol)


def tolerance(dtype: str, *, ops: int = 1, reduction: int = 1, device: str = "cpu",
              framework: str | None = None, matmul: bool = False, magnitude: float = 0.0,
              underflow: bool = False) -> Tolerance:
    """Normwise tolerance for comparing a ``dtype`` result with an exact-ish reference.

    ``magnitude``: the largest intermediate the result is computed from (the sum of the
    absolute values of the terms that cancel); it adds the absolute floor rtol * magnitude
    (see the module docstring). Leave it 0 only where the result cannot cancel.
    ``underflow``: inputs may drive results below the smallest normal number, where they may
    be flushed to zero; adds ``(ops + reduction) * smallest normal`` (module docstring).
    """
    u = UNIT_ROUNDOFF[dtype]
    basis = f"u({dtype})={u:.3g}"
    if dtype == "float32" and matmul and device != "cpu":
        # matmul: the computation has float32 matmuls (or convolutions); their framework's
        # switches say whether a GPU may run them in TF32 (checks.tf32, read at call time).
        from .tf32 import tf32_reason

        why = tf32_reason(framework)
        if why:
            u, basis = TF32_ROUNDOFF, f"u(tf32)={TF32_ROUNDOFF:.3g} ({why}, on GPUs of compute capability >= 8.0)"
    terms = rounding_terms(ops, reduction)
    rtol = terms * u
    tol = Tolerance(rtol, f"({OP_ROUNDING:g} * ops {ops} + reduction {reduction}) * {basis}")
    n = max(1, ops) + max(1, reduction)
    if magnitude > 0:
        tol = tol.with_floor(rtol * magnitude, f"rtol * magnitude of the intermediates {magnitude:.3g}")
    if underflow:
        tol = tol.with_floor(n * SMALLEST_NORMAL[dtype],
                             f"{n} ops x smallest normal {SMALLEST_NORMAL[dtype]:.3g} (flush to zero)")
    return tol


def combined(a: Tolerance, b: Tolerance) -> Tolerance:
    """Two independently rounded results compared with each other: errors add."""
    return Tolerance(a.rtol + b.rtol, f"({a.why}) + ({b.why})", a.atol + b.atol)


def normwise_error(actual: Any, expected: Any) -> tuple[float, float]:
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape:
        raise ToleranceExceeded(f"shape {a.shape}, but should be {e.shape}")
    scale = float(np.max(np.abs(e))) if e.size else 0.0
    err = float(np.max(np.abs(a - e))) if e.size else 0.0
    if not np.all(np.isfinite(a)) and not np.array_equal(np.isfinite(a), np.isfinite(e)):
        return float("inf"), scale
    return err, scale


def assert_close(actual: Any, expected: Any, tol: Tolerance, *, what: str, name: str | None = None) -> float:
    """Normwise comparison ``max|a - e| <= rtol * max|e| + atol``; records evidence.

    Returns the relative error against the effective scale ``max|e| + atol / rtol`` (the
    result's size or the intermediates', whichever the bound is made of), which is
    ``<= rtol`` exactly when the comparison passes.
    """
    __tracebackhide__ = True
    err, scale = normwise_error(actual, expected)
    floor = tol.atol / tol.rtol if tol.rtol > 0 and tol.atol > 0 else 0.0
    effective = scale + floor
    rel = err / effective if effective > 0 else (0.0 if err == 0 else float("inf"))
    evidence.check(name or what, observed=rel, tolerance=tol.rtol, basis=tol.why, atol=tol.atol, scale=scale)
    if not rel <= tol.rtol:
        floor_text = f" + atol {tol.atol:.3e}" if tol.atol > 0 else ""
        raise ToleranceExceeded(
            f"{what}: max|actual - expected| = {err:.3e}, but should be <= rtol {tol.rtol:.3e} * max|expected| "
            f"{scale:.3e}{floor_text} [{tol.why}] (relative to the effective scale {effective:.3e}: {rel:.3e})"
        )
    return rel


def assert_equal(actual: Any, expected: Any, *, what: str) -> None:
    """Bitwise equality, for claims that promise it; records evidence with tolerance 0."""
    __tracebackhide__ = True
    a, e = np.asarray(actual), np.asarray(expected)
    same = a.shape == e.shape and a.dtype == e.dtype and np.array_equal(a, e, equal_nan=a.dtype.kind in "fc")
    diff = 0.0 if same else (
        float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))) if a.shape == e.shape else float("inf"))
    evidence.check(what, observed=diff, tolerance=0.0)
    if not same:
        raise ToleranceExceeded(
            f"{what}: expected bitwise equality, got shape {a.shape}/{e.shape}, dtype {a.dtype}/{e.dtype}, "
            f"max abs difference {diff:.3e}"
        )
