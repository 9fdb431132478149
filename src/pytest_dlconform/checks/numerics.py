"""Tolerance policy and normwise comparisons.

A tolerance comes from the dtype and the operation, never from what made a test green.
For a computation of ``ops`` chained elementary operations and reductions over at most
``reduction`` terms, the classic forward-error bound (Higham, *Accuracy and Stability of
Numerical Algorithms*, ch. 3: gamma_n = n*u/(1-n*u)) gives a normwise relative error of
order ``(ops + reduction) * u`` with ``u`` the dtype's unit round-off. We allow a factor
:data:`CONDITION` on top for the conditioning of smooth elementwise functions in the
generated programs (tanh, exp, logsumexp near saturation amplify relative error by a
small constant), and compare normwise: ``max|a - b| <= rtol * max|b|``, which is
scale-aware and does not blow up on entries that happen to be near zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import evidence

UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
# TensorFloat-32: TensorFlow runs float32 matmuls and convolutions on Ampere+ GPUs in TF32
# by default (tf.config.experimental.enable_tensor_float_32_execution); a 10-bit mantissa.
TF32_ROUNDOFF = 2.0**-11
CONDITION = 16.0


class ToleranceExceeded(AssertionError):
    pass


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    why: str

    def as_evidence(self) -> dict[str, Any]:
        return {"rtol": self.rtol, "tolerance_basis": self.why}


def tolerance(dtype: str, *, ops: int = 1, reduction: int = 1, device: str = "cpu",
              framework: str | None = None, matmul: bool = False) -> Tolerance:
    """Normwise relative tolerance for comparing a ``dtype`` result with an exact-ish reference."""
    u = UNIT_ROUNDOFF[dtype]
    basis = f"u({dtype})={u:.3g}"
    if dtype == "float32" and matmul and device != "cpu" and framework == "tensorflow":
        u, basis = TF32_ROUNDOFF, f"u(tf32)={TF32_ROUNDOFF:.3g} (TensorFlow's default TF32 matmul on GPU)"
    n = max(1, ops) + max(1, reduction)
    rtol = CONDITION * n * u
    return Tolerance(rtol, f"{CONDITION:g} * (ops {ops} + reduction {reduction}) * {basis}")


def combined(a: Tolerance, b: Tolerance) -> Tolerance:
    """Two independently rounded results compared with each other: errors add."""
    return Tolerance(a.rtol + b.rtol, f"({a.why}) + ({b.why})")


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
    """Normwise comparison; records evidence; returns the relative error."""
    __tracebackhide__ = True
    err, scale = normwise_error(actual, expected)
    rel = err / scale if scale > 0 else (0.0 if err == 0 else float("inf"))
    evidence.check(name or what, observed=rel, tolerance=tol.rtol, basis=tol.why)
    if not rel <= tol.rtol:
        raise ToleranceExceeded(
            f"{what}: max|actual - expected| / max|expected| = {rel:.3e}, but should be <= {tol.rtol:.3e} "
            f"[{tol.why}]; max abs error {err:.3e} at scale {scale:.3e}"
        )
    return rel


def assert_equal(actual: Any, expected: Any, *, what: str) -> None:
    """Bitwise equality, for claims that promise it; records evidence with tolerance 0."""
    __tracebackhide__ = True
    a, e = np.asarray(actual), np.asarray(expected)
    same = a.shape == e.shape and a.dtype == e.dtype and np.array_equal(a, e, equal_nan=a.dtype.kind in "fc")
    diff = 0.0 if same else (float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))) if a.shape == e.shape else float("inf"))
    evidence.check(what, observed=diff, tolerance=0.0)
    if not same:
        raise ToleranceExceeded(
            f"{what}: expected bitwise equality, got shape {a.shape}/{e.shape}, dtype {a.dtype}/{e.dtype}, max abs difference {diff:.3e}"
        )
