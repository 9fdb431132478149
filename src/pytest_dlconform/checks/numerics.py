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
happen to be near zero. No safety factor sits on top of ``(ops + reduction) * u``:
docs/tolerances.md ("Fudge factors derived") has the measurements that show none is needed.

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

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import evidence
from ..core.floats import SMALLEST_NORMAL, TF32_ROUNDOFF, UNIT_ROUNDOFF

# One operation's rounding in units of u: the documented accuracy of the elementary functions,
# 2 ulp (module docstring); the same allowance as programs.errors.ULPS.
OP_ROUNDING = 4.0


def gamma(n: int, u: float) -> float:
    """gamma_n = n u / (1 - n u) (n at least 0): the relative error bound of n roundings, e.g. of
    an (n+1)-term sum or an n-term dot product; infinite where n u >= 1."""
    n = max(0, n)
    return n * u / (1.0 - n * u) if n * u < 1 else math.inf


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
    #: The precision the rounding model is made of (a key of :data:`UNIT_ROUNDOFF`, or
    #: "tf32"); None where unknown. It decides which canonical wrong answers the bound must
    #: reject (:func:`canonical_wrong_answers`: the 1 % scaling only in float32 and float64).
    dtype: str | None = None

    def as_evidence(self) -> dict[str, Any]:
        return {"rtol": self.rtol, "atol": self.atol, "tolerance_basis": self.why}

    def with_floor(self, atol: float, why: str) -> Tolerance:
        """This tolerance plus an absolute floor ``atol`` (errors add), with its derivation."""
        return Tolerance(self.rtol, f"{self.why} + atol {atol:.3g} [{why}]", self.atol + atol, self.dtype)


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
    precision = "tf32" if u == TF32_ROUNDOFF and dtype == "float32" else dtype
    tol = Tolerance(rtol, f"({OP_ROUNDING:g} * ops {ops} + reduction {reduction}) * {basis}", dtype=precision)
    n = max(1, ops) + max(1, reduction)
    if magnitude > 0:
        tol = tol.with_floor(rtol * magnitude, f"rtol * magnitude of the intermediates {magnitude:.3g}")
    if underflow:
        tol = tol.with_floor(n * SMALLEST_NORMAL[dtype],
                             f"{n} ops x smallest normal {SMALLEST_NORMAL[dtype]:.3g} (flush to zero)")
    return tol


# The canonical wrong answers every tolerance check is tried against (docs/tolerances.md,
# "Vacuous bounds"): a bound that accepts one of them cannot tell a broken framework from a
# working one, and its check is inconclusive, never "holds". The 1 + 1e-2 scaling is a wrong
# answer only where the dtype's rounding is far below 1e-2 (float32, float64: u <= 6e-8); in
# float16 and bfloat16 a legitimately derived bound can exceed 1 % of a many-term result.
SCALED_WRONG = 1e-2
_SCALE_DTYPES = frozenset({"float32", "float64"})


def canonical_wrong_answers(reference: Any, dtype: str | None = None) -> list[tuple[str, np.ndarray]]:
    """The wrong answers a check of ``reference`` must reject, by name: all zeros, the
    reference with its largest finite element NaN, the sign-flipped reference, and (float32,
    float64) the reference scaled by 1 + 1e-2. Answers equal to the reference are left out
    (zeros of an all-zero reference, the sign flip of one)."""
    ref = np.asarray(reference, dtype=np.float64)
    finite = np.isfinite(ref)
    nonzero = bool(np.any((ref != 0) & finite))
    out: list[tuple[str, np.ndarray]] = []
    if nonzero:
        out.append(("all zeros", np.where(finite, 0.0, ref)))
    if np.any(finite):
        nan = ref.copy()
        flat = np.where(finite.ravel(), np.abs(ref.ravel()), -1.0)
        nan.flat[int(np.argmax(flat))] = np.nan
        out.append(("one element NaN", nan))
    if nonzero:
        out.append(("sign-flipped", np.where(finite, -ref, ref)))
        if dtype is None or dtype in _SCALE_DTYPES:
            out.append((f"scaled by 1 + {SCALED_WRONG:g}", np.where(finite, ref * (1 + SCALED_WRONG), ref)))
    return out


def accepted_wrong_answers(reference: Any, accepts: Callable[[np.ndarray], bool], dtype: str | None = None) -> list[str]:
    """The names of the canonical wrong answers that ``accepts`` (the check's own pass
    condition, applied to a candidate in place of the framework's result) lets through."""
    return [name for name, wrong in canonical_wrong_answers(reference, dtype) if accepts(wrong)]


def combined(a: Tolerance, b: Tolerance) -> Tolerance:
    """Two independently rounded results compared with each other: errors add."""
    return Tolerance(a.rtol + b.rtol, f"({a.why}) + ({b.why})", a.atol + b.atol, coarser(a.dtype, b.dtype))


def coarser(a: str | None, b: str | None) -> str | None:
    """Of two tolerances' precisions, the one with the larger unit round-off (None: unknown)."""
    if a is None or b is None:
        return a or b
    u = {**UNIT_ROUNDOFF, "tf32": TF32_ROUNDOFF}
    return a if u.get(a, 1.0) >= u.get(b, 1.0) else b


@dataclass(frozen=True)
class Difference:
    """How ``actual`` differs from ``expected`` (same shape): the one comparison every
    max-abs and normwise check is built on.

    Non-finite values are compared exactly: where the reference is NaN the result must be NaN,
    where it is +-inf the same infinity, and a non-finite result where the reference is finite
    is wrong. ``error`` is max|a - e| over the positions where both are finite, ``scale``
    max|e| over the reference's finite positions; ``mismatch`` is the first (C order) element
    whose non-finite value does not match, with both values, and ``mismatches`` how many do.
    """

    error: float
    scale: float
    #: Where the finite error is largest (None when no position is finite in both).
    at: tuple[int, ...] | None = None
    mismatch: tuple[int, ...] | None = None
    actual_value: complex | float = math.nan
    expected_value: complex | float = math.nan
    mismatches: int = 0

    @property
    def nonfinite_match(self) -> bool:
        """The non-finite values sit at the same places and are the same (NaN, +inf, -inf)."""
        return self.mismatch is None

    @property
    def max_abs(self) -> float:
        """max|a - e| with the non-finite rule: infinite where a non-finite value does not match."""
        return self.error if self.mismatch is None else math.inf

    def relative(self, scale: float | None = None) -> float:
        """:attr:`max_abs` relative to ``scale`` (default: :attr:`scale`); 0/0 is 0."""
        ref = self.scale if scale is None else scale
        err = self.max_abs
        return err / ref if ref > 0 else (0.0 if err == 0 else math.inf)

    def describe(self) -> str:
        """The first non-finite mismatch in words ("" where the non-finite values match)."""
        if self.mismatch is None:
            return ""
        where = f"element {list(self.mismatch)}" if self.mismatch else "the value"
        more = f" ({self.mismatches} elements differ in their non-finite values)" if self.mismatches > 1 else ""
        return f"{where} is {self.actual_value!r}, but should be {self.expected_value!r}{more}"


def difference(actual: Any, expected: Any) -> Difference:
    """Compare ``actual`` with the reference ``expected`` (same shape; raises
    :class:`ToleranceExceeded` otherwise) under the non-finite rule of :class:`Difference`."""
    a, e = _as_numbers(actual), _as_numbers(expected)
    if a.shape != e.shape:
        raise ToleranceExceeded(f"shape {a.shape}, but should be {e.shape}")
    fa, fe = np.isfinite(a), np.isfinite(e)
    both = fa & fe
    # Non-finite on both sides: equal (same infinity) or both NaN.
    same = ~fa & ~fe & ((a == e) | (np.isnan(a) & np.isnan(e)))
    bad = ~(both | same)
    d = np.where(both, np.abs(np.where(both, a, 0) - np.where(both, e, 0)), -1.0)
    scale = float(np.max(np.abs(np.where(fe, e, 0)), initial=0.0))
    at = _index(int(np.argmax(d)), d.shape) if both.any() else None
    error = float(np.max(d, initial=0.0))
    if not bad.any():
        return Difference(error, scale, at)
    k = _index(int(np.argmax(bad)), bad.shape)
    return Difference(error, scale, at, k, _item(a[k]), _item(e[k]), int(bad.sum()))


def _as_numbers(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    return arr.astype(np.complex128 if arr.dtype.kind == "c" else np.float64)


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _item(v: Any) -> complex | float:
    v = v.item() if hasattr(v, "item") else v
    return v if isinstance(v, complex) else float(v)


def normwise_error(actual: Any, expected: Any) -> tuple[float, float]:
    """``(max|a - e|, max|e|)`` under :func:`difference`'s non-finite rule (inf where it is broken)."""
    d = difference(actual, expected)
    return d.max_abs, d.scale


def precision_of(actual: Any, dtype: str | None = None) -> str | None:
    """``dtype`` or, without it, the float precision ``actual`` is held in (float16/32/64)."""
    if dtype is not None:
        return dtype
    name = str(getattr(actual, "dtype", ""))
    return name if name in UNIT_ROUNDOFF else None


def normwise_within(expected: Any, rtol: float, scale: float | None = None) -> Callable[[np.ndarray], bool]:
    """The pass condition ``max|w - expected| <= rtol * scale`` (default scale max|expected|)
    under the non-finite rule, as a predicate on a candidate ``w`` (for :func:`record_held`)."""
    return lambda w: difference(w, expected).relative(scale) <= rtol


def record_held(name: str, reference: Any, accepts: Callable[[np.ndarray], bool], *, observed: float,
                tolerance: float, dtype: str | None = None, **details: Any) -> list[str]:
    """Record a tolerance check whose result held: :func:`evidence.check`, unless its own pass
    condition ``accepts`` also lets a canonical wrong answer of ``reference`` through; then
    the check could not have failed and is recorded as :func:`evidence.inconclusive`.
    Returns the accepted wrong answers (empty: the check was conclusive)."""
    accepted = accepted_wrong_answers(reference, accepts, dtype)
    if accepted:
        evidence.inconclusive(name, reason=f"the bound accepts {', '.join(accepted)}", bound=tolerance,
                              observed=observed, **details)
    else:
        evidence.check(name, observed=observed, tolerance=tolerance, **details)
    return accepted


def assert_close(actual: Any, expected: Any, tol: Tolerance, *, what: str, name: str | None = None) -> float:
    """Normwise comparison ``max|a - e| <= rtol * max|e| + atol``; records evidence.

    Non-finite values must match the reference's exactly (:func:`difference`). Returns the
    relative error against the effective scale ``max|e| + atol / rtol`` (the result's size
    or the intermediates', whichever the bound is made of), which is ``<= rtol`` exactly
    when the comparison passes. A bound that also accepts a canonical wrong answer (all
    zeros, the sign flip, ...) is recorded as inconclusive, not as a check that held.
    """
    __tracebackhide__ = True
    d = difference(actual, expected)
    floor = tol.atol / tol.rtol if tol.rtol > 0 and tol.atol > 0 else 0.0
    effective = d.scale + floor
    rel = d.relative(effective)
    label = name or what
    if not rel <= tol.rtol:
        evidence.check(label, observed=rel, tolerance=tol.rtol, basis=tol.why, atol=tol.atol, scale=d.scale)
        if not d.nonfinite_match:
            raise ToleranceExceeded(f"{what}: {d.describe()} (non-finite values must match the reference's)")
        floor_text = f" + atol {tol.atol:.3e}" if tol.atol > 0 else ""
        raise ToleranceExceeded(
            f"{what}: max|actual - expected| = {d.error:.3e}, but should be <= rtol {tol.rtol:.3e} * max|expected| "
            f"{d.scale:.3e}{floor_text} [{tol.why}] (relative to the effective scale {effective:.3e}: {rel:.3e}; "
            f"largest at element {list(d.at or ())})"
        )
    record_held(label, expected, normwise_within(expected, tol.rtol, effective),
                observed=rel, tolerance=tol.rtol, dtype=precision_of(actual, tol.dtype), basis=tol.why,
                atol=tol.atol, scale=d.scale)
    return rel


def assert_equal(actual: Any, expected: Any, *, what: str) -> None:
    """Bitwise equality, for claims that promise it; records evidence with tolerance 0."""
    __tracebackhide__ = True
    a, e = np.asarray(actual), np.asarray(expected)
    same = a.shape == e.shape and a.dtype == e.dtype and np.array_equal(a, e, equal_nan=a.dtype.kind in "fc")
    d = difference(a, e) if not same and a.shape == e.shape else None
    diff = 0.0 if same else (d.max_abs if d is not None else float("inf"))
    evidence.check(what, observed=diff, tolerance=0.0)
    if not same:
        where = (d.describe() or f"max abs difference {d.error:.3e} at {list(d.at or ())}") if d else ""
        raise ToleranceExceeded(
            f"{what}: expected bitwise equality, got shape {a.shape}/{e.shape}, dtype {a.dtype}/{e.dtype}, "
            f"max abs difference {diff:.3e}" + (f"; {where}" if where else "")
        )
