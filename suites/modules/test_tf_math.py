"""modules.tf.math-functions: the tf.math functions no other claim calls, each called directly
(TensorFlow eager, CPU) with the parameters its docstring documents and checked against an
independent reference (suites/modules/_tf_math_reference.py): numpy for arithmetic, comparisons,
reductions and segment ops, mpmath at 40 digits for the special functions.

Table-driven. RECORDS maps each function name to a record: a function of ``tf`` that calls the
function on fixed float64 inputs (complex128 for angle/conj/imag/real; the integer and bool
dtypes the docstring names where the function is integral or logical) and returns the
comparisons (what, got, want, error bound) plus the documented edge modes it exercised:
division by zero of the *_no_nan functions, x = 0 of xdivy/xlogy/xlog1py, empty segments with
their documented fills (0 for segment_*, 1 for products, lowest/highest for unsorted max/min),
dropped negative ids and num_segments beyond the largest id, round-half-to-even, in_top_k's ties
and non-finite predictions, empty inputs of zero_fraction (NaN) and reduce_all/any, l2_normalize's
epsilon floor, lbeta's empty last dimension. acos, acosh, asin, atanh, atan2, cosh, sinh and tan
are also checked in float32 (2 ulp plus the reference's own rounding to float32). approx_max_k and
approx_min_k are checked as the docstring's example runs them (tf.function(jit_compile=True)) in
their records and eagerly in test_approx_k_eager. ``test_table_is_complete`` fails when an
assigned name has neither a record nor a one-line reason in OUT_OF_SCOPE.

Error model (docs/tolerances.md). Inputs are exact float64 numbers, so the only error is the
function's own. Elementwise, ``|got - want| <= rtol |want| + atol`` (_tf_math_reference.
assert_values; elementwise because special functions span many orders of magnitude):
- integer, bool, comparison, rounding, selection, sign/permutation, min/max: exact (rtol 0).
- IEEE arithmetic (+ - * / sqrt) is correctly rounded: u = 2^-53 per operation; a sum of n terms
  errs by at most (n - 1) u sum|terms| (Higham 3.1), given as atol; Horner's rule (polyval) by
  2 n u sum|c_i x^i| (Higham 5.1).
- elementary functions (acos, acosh, asin, atanh, atan2, cosh, sinh, tan, log, log1p, angle):
  OP = 4 u (2 ulp, the documented accuracy of libm/Eigen kernels, checks/numerics.py), plus u per
  arithmetic operation that follows.
- special functions: the peak relative error documented by Cephes (Moshier, whose algorithms
  Eigen's and TensorFlow's kernels implement) for the argument range used, never below OP u:
  i0 5.8e-16, i0e 5.4e-16, i1 1.9e-15, i1e 2.0e-15 (0..30); psi (digamma) 1.3e-15; ndtri
  7.2e-16; incbet (betainc) 6.9e-15 for a, b <= 5; igam/igamc 3.6e-14 (0..30); zeta 6.9e-16;
  lgamma 4 OP u. Where the function is computed from another (erfinv(y) = ndtri((1 + y)/2) /
  sqrt 2; erfcinv(y) = -ndtri(y / 2) / sqrt 2; polygamma(n, x) = (-1)^(n+1) n! zeta(n+1, x);
  lbeta = sum lgamma - lgamma(sum)), the error of the intermediate is carried through the
  outer function's derivative: erfinv's argument (1 + y)/2 rounds by u/2 absolutely, which
  erfinv' amplifies to atol = u |d erfinv/dy| (stated per record); lbeta's cancellation gives
  atol = 4 OP u (sum_i |lgamma(x_i)| + |lgamma(sum x)|); erfinv/erfcinv rtol 2 OP u (ndtri and
  the scaling); polygamma rtol = zeta's + psi's (n = 0) + 2 u; digamma near its positive root is a
  difference of terms of order 1, so its documented error is also absolute (atol = 1.3e-15).
- reductions: reduce_euclidean_norm (n + 2) u (n squares and sums, sqrt halves); l2_normalize
  (n + 4) u; reduce_std (2 n + 4) u relative plus the same times max|x| absolute (x - mean cancels);
  segment sums/means/sqrt_n 3 u sum|terms| absolute, products 3 u relative; max/min exact.
- float32 elementary functions: (OP + 1) u32 against the 40-digit value rounded to float32.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from pytest_dlconform.api import evidence, not_applicable

from . import _tf_math_reference as ref

CLAIM = "modules.tf.math-functions"
U = ref.U64
OP = ref.OP * U
U32 = 2.0 ** -24
F64 = np.float64

ASSIGNED = (
    "accumulate_n", "acos", "acosh", "add_n", "angle", "approx_max_k", "approx_min_k", "argmax", "argmin", "asin",
    "atan2", "atanh", "bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e", "betainc", "bincount", "ceil",
    "confusion_matrix", "conj", "cosh", "count_nonzero", "digamma", "divide_no_nan", "equal", "erfcinv", "erfinv",
    "floor", "floordiv", "floormod", "greater", "greater_equal", "igamma", "igammac", "imag", "in_top_k",
    "invert_permutation", "is_finite", "is_inf", "is_nan", "is_non_decreasing", "is_strictly_increasing",
    "l2_normalize", "lbeta", "less", "less_equal", "lgamma", "logical_and", "logical_not", "logical_or",
    "logical_xor", "maximum", "mod", "multiply_no_nan", "ndtri", "nextafter", "not_equal", "polygamma", "polyval",
    "real", "reciprocal", "reciprocal_no_nan", "reduce_all", "reduce_any", "reduce_euclidean_norm", "reduce_std",
    "rint", "round", "scalar_mul", "segment_max", "segment_mean", "segment_min", "segment_prod", "segment_sum",
    "sinh", "sobol_sample", "squared_difference", "tan", "truediv", "unsorted_segment_max",
    "unsorted_segment_mean", "unsorted_segment_min", "unsorted_segment_prod", "unsorted_segment_sqrt_n",
    "unsorted_segment_sum", "xdivy", "xlog1py", "xlogy", "zero_fraction", "zeta",
)
OUT_OF_SCOPE: dict[str, str] = {}


@dataclass
class Cmp:
    what: str
    got: Any
    want: Any
    rtol: float = 0.0
    atol: Any = 0.0
    dtype: Any = None


Result = tuple[list[Cmp], tuple[str, ...]]


def _np(t: Any) -> Any:
    return t.numpy() if hasattr(t, "numpy") else np.asarray(t)


def c(what: str, got: Any, want: Any, rtol: float = 0.0, atol: Any = 0.0, dtype: Any = None) -> Cmp:
    return Cmp(what, _np(got), np.asarray(want), rtol, atol, dtype)


# ----------------------------------------------------------------- inputs

UNIT = np.array([-1.0, -0.75, -0.3, -1e-5, 0.0, 1e-5, 0.3, 0.75, 1.0, 1.5, -1.5, np.nan])
WIDE = np.array([-20.0, -3.0, -1.0, -0.25, -1e-8, 0.0, 1e-8, 0.25, 1.0, 3.0, 20.0, np.nan])
POS = np.array([1e-6, 0.01, 0.5, 1.0, 1.5, 2.0, 3.5, 7.25, 12.0, 29.0])
BESSEL = np.array([-30.0, -8.0, -1.5, -0.1, 0.0, 1e-7, 0.1, 1.5, 8.0, 29.0])
INTS = np.array([7, -7, 7, -7, 0, 13, -13, 1], dtype=np.int64)
DENS = np.array([2, 2, -2, -2, 3, 5, 5, -1], dtype=np.int64)


def _unary_mp(tf: Any, name: str, fn: Callable[..., Any], x: np.ndarray, rtol: float, atol: Any = 0.0) -> list[Cmp]:
    got = getattr(tf.math, name)(tf.constant(x, tf.float64))
    return [c(f"tf.math.{name} float64", got, ref.mp_map(fn, x), rtol, atol)]


def _binary_mp(tf: Any, name: str, fn: Callable[..., Any], a: np.ndarray, b: np.ndarray, rtol: float,
               atol: Any = 0.0) -> list[Cmp]:
    got = getattr(tf.math, name)(tf.constant(a, tf.float64), tf.constant(b, tf.float64))
    return [c(f"tf.math.{name} float64", got, ref.mp_map(fn, a, b), rtol, atol)]


RECORDS: dict[str, Callable[[Any], Result]] = {}


def record(name: str) -> Callable[[Callable[[Any], Result]], Callable[[Any], Result]]:
    def put(fn: Callable[[Any], Result]) -> Callable[[Any], Result]:
        RECORDS[name] = fn
        return fn
    return put


# ----------------------------------------------------------------- sums and arithmetic


def _sum_records() -> None:
    for name in ("accumulate_n", "add_n"):
        def run(tf: Any, name: str = name) -> Result:
            rng = np.random.default_rng(3)
            xs = [rng.standard_normal((3, 4)) * 10.0 ** k for k in (0, 3, -2)]
            got = getattr(tf.math, name)([tf.constant(x, tf.float64) for x in xs])
            mag = sum(np.abs(x) for x in xs)
            return [c(f"tf.math.{name} of 3 float64 tensors", got, xs[0] + xs[1] + xs[2], 0.0, 2 * U * mag)], ()
        RECORDS[name] = run


_sum_records()


@record("scalar_mul")
def _scalar_mul(tf: Any) -> Result:
    x = WIDE[:-1]
    got = tf.math.scalar_mul(tf.constant(-2.75, tf.float64), tf.constant(x, tf.float64))
    return [c("tf.math.scalar_mul float64", got, -2.75 * x, U)], ()


@record("squared_difference")
def _squared_difference(tf: Any) -> Result:
    x, y = WIDE, WIDE[::-1].copy()
    got = tf.math.squared_difference(tf.constant(x, tf.float64), tf.constant(y, tf.float64))
    want = ref.mp_map(lambda a, b: (a - b) ** 2, x, y)
    return [c("tf.math.squared_difference float64 (x - y)^2", got, want, 3 * U)], ()


@record("truediv")
def _truediv(tf: Any) -> Result:
    x, y = WIDE, np.array([3.0, -7.0, 0.1, 2.0, 3.0, 0.0, -0.0, 9.0, 1e-300, 3.0, 0.0, 1.0])
    got = tf.math.truediv(tf.constant(x, tf.float64), tf.constant(y, tf.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        want = x / y
    gi = tf.math.truediv(tf.constant(INTS.astype(np.int32)), tf.constant(DENS.astype(np.int32)))
    return [c("tf.math.truediv float64 (x / 0 gives +-inf or NaN)", got, want, U),
            c("tf.math.truediv int32 inputs give float64", gi, INTS / DENS, U, dtype=F64)], ()


@record("reciprocal")
def _reciprocal(tf: Any) -> Result:
    x = np.array([3.0, -7.0, 0.1, 1e-300, 0.0, -0.0, np.inf, np.nan])
    with np.errstate(divide="ignore"):
        want = 1.0 / x
    return [c("tf.math.reciprocal float64 1/x", tf.math.reciprocal(tf.constant(x, tf.float64)), want, U)], ()


@record("reciprocal_no_nan")
def _reciprocal_no_nan(tf: Any) -> Result:
    x = np.array([3.0, -7.0, 0.1, 0.0, -0.0, 1e-5])
    want = np.where(x == 0, 0.0, 1.0 / np.where(x == 0, 1.0, x))
    got = tf.math.reciprocal_no_nan(tf.constant(x, tf.float64))
    return [c("tf.math.reciprocal_no_nan float64 (0 where x == 0)", got, want, U)], ("reciprocal_no_nan.x=0",)


@record("divide_no_nan")
def _divide_no_nan(tf: Any) -> Result:
    x = np.array([1.0, -2.0, 0.0, np.inf, np.nan, 5.0, 7.0])
    y = np.array([0.0, -0.0, 0.0, 0.0, 0.0, 4.0, -3.0])
    want = np.where(y == 0, 0.0, x / np.where(y == 0, 1.0, y))
    got = tf.math.divide_no_nan(tf.constant(x, tf.float64), tf.constant(y, tf.float64))
    return [c("tf.math.divide_no_nan float64 (0 where y == 0)", got, want, U)], ("divide_no_nan.y=0",)


@record("multiply_no_nan")
def _multiply_no_nan(tf: Any) -> Result:
    x = np.array([1.0, np.inf, np.nan, -np.inf, 2.5, -3.0])
    y = np.array([0.0, 0.0, 0.0, -0.0, 4.0, 0.5])
    want = np.where(y == 0, 0.0, x * y)
    got = tf.math.multiply_no_nan(tf.constant(x, tf.float64), tf.constant(y, tf.float64))
    return [c("tf.math.multiply_no_nan float64 (0 where y == 0, even for NaN/inf x)", got, want, U)], \
        ("multiply_no_nan.y=0",)


@record("xdivy")
def _xdivy(tf: Any) -> Result:
    x = np.array([0.0, 0.0, 0.0, 1.0, -2.0, 3.0])
    y = np.array([0.0, 5.0, np.inf, 4.0, 0.25, -7.0])
    want = np.where(x == 0, 0.0, x / np.where(x == 0, 1.0, y))
    got = tf.math.xdivy(tf.constant(x, tf.float64), tf.constant(y, tf.float64))
    return [c("tf.math.xdivy float64 (0 where x == 0)", got, want, U)], ("xdivy.x=0",)


@record("xlogy")
def _xlogy(tf: Any) -> Result:
    x = np.array([0.0, 0.0, 0.0, 1.0, -2.0, 3.0, 0.5])
    y = np.array([0.0, 5.0, -1.0, 4.0, 0.25, 1e-300, 1.0])
    want = ref.mp_map(lambda a, b: 0 if a == 0 else a * __import__("mpmath").log(b), x, y)
    got = tf.math.xlogy(tf.constant(x, tf.float64), tf.constant(y, tf.float64))
    return [c("tf.math.xlogy float64 x log y (0 where x == 0)", got, want, OP + U)], ("xlogy.x=0",)


@record("xlog1py")
def _xlog1py(tf: Any) -> Result:
    x = np.array([0.0, 0.0, 0.0, 1.0, -2.0, 3.0, 0.5])
    y = np.array([-1.0, 5.0, 1e-12, 4.0, -0.75, 1e-300, 0.0])
    want = ref.mp_map(lambda a, b: 0 if a == 0 else a * __import__("mpmath").log1p(b), x, y)
    got = tf.math.xlog1py(tf.constant(x, tf.float64), tf.constant(y, tf.float64))
    return [c("tf.math.xlog1py float64 x log(1 + y) (0 where x == 0)", got, want, OP + U)], ("xlog1py.x=0",)


def _floor_records() -> None:
    fx = np.array([7.5, -7.5, 7.5, -7.5, 0.0, 6.0, -6.0, 1.25])
    fy = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 4.0, 4.0, -0.5])

    @record("floordiv")
    def _floordiv(tf: Any) -> Result:
        gi = tf.math.floordiv(tf.constant(INTS), tf.constant(DENS))
        gf = tf.math.floordiv(tf.constant(fx, tf.float64), tf.constant(fy, tf.float64))
        return [c("tf.math.floordiv int64 (rounds toward -inf)", gi, INTS // DENS),
                c("tf.math.floordiv float64 floor(x / y)", gf, np.floor(fx / fy))], ()

    for name in ("floormod", "mod"):
        def run(tf: Any, name: str = name) -> Result:
            gi = getattr(tf.math, name)(tf.constant(INTS), tf.constant(DENS))
            gf = getattr(tf.math, name)(tf.constant(fx, tf.float64), tf.constant(fy, tf.float64))
            # floor(x / y) * y + floormod(x, y) = x, result with the sign of y (exact on these inputs)
            return [c(f"tf.math.{name} int64 (Python semantics)", gi, INTS - (INTS // DENS) * DENS),
                    c(f"tf.math.{name} float64", gf, fx - np.floor(fx / fy) * fy)], ()
        RECORDS[name] = run


_floor_records()


@record("nextafter")
def _nextafter(tf: Any) -> Result:
    x1 = np.array([1.0, 1.0, 0.0, 0.0, -1.0, 5e-324, np.inf, 2.0, np.nan])
    x2 = np.array([2.0, 0.0, 1.0, -1.0, -2.0, 0.0, 0.0, 2.0, 1.0])
    got = tf.math.nextafter(tf.constant(x1, tf.float64), tf.constant(x2, tf.float64))
    return [c("tf.math.nextafter float64 (next representable value toward x2)", got, np.nextafter(x1, x2))], ()


@record("maximum")
def _maximum(tf: Any) -> Result:
    x = np.array([-5.0, 0.0, 2.0, 3.0, -np.inf])
    y = np.array([-3.0, 0.0, 5.0, -1.0, 1.0])
    got = tf.math.maximum(tf.constant(x, tf.float64), tf.constant(y, tf.float64))
    gb = tf.math.maximum(tf.constant(x, tf.float64), tf.constant([-3.0], tf.float64))
    gi = tf.math.maximum(tf.constant(INTS), tf.constant(DENS))
    return [c("tf.math.maximum float64", got, np.where(x > y, x, y)),
            c("tf.math.maximum float64 broadcast", gb, np.where(x > -3.0, x, -3.0)),
            c("tf.math.maximum int64", gi, np.maximum(INTS, DENS))], ()


# ----------------------------------------------------------------- rounding


@record("ceil")
def _ceil(tf: Any) -> Result:
    return [c("tf.math.ceil float64", tf.math.ceil(tf.constant(WIDE * 1.3, tf.float64)), np.ceil(WIDE * 1.3))], ()


@record("floor")
def _floor(tf: Any) -> Result:
    return [c("tf.math.floor float64", tf.math.floor(tf.constant(WIDE * 1.3, tf.float64)), np.floor(WIDE * 1.3))], ()


HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999999999999994, 1.7, -1.7, 4503599627370497.0, np.inf,
                   np.nan])


def _half_even(x: np.ndarray) -> np.ndarray:
    """Round half to even, from the definition (not np.round): the nearer integer, the even one at a tie."""
    out = np.empty_like(x)
    for i, v in enumerate(x):
        if not math.isfinite(v):
            out[i] = v
            continue
        lo = math.floor(v)
        d = v - lo
        out[i] = lo + 1 if d > 0.5 or (d == 0.5 and lo % 2 == 1) else lo
    return out


@record("round")
def _round(tf: Any) -> Result:
    gi = tf.math.round(tf.constant(INTS))
    return [c("tf.math.round float64 (half to even)", tf.math.round(tf.constant(HALVES, tf.float64)), _half_even(HALVES)),
            c("tf.math.round int64 (identity)", gi, INTS)], ("round.half-to-even",)


@record("rint")
def _rint(tf: Any) -> Result:
    return [c("tf.math.rint float64 (half to even)", tf.math.rint(tf.constant(HALVES, tf.float64)), _half_even(HALVES))], \
        ("rint.half-to-even",)


# ----------------------------------------------------------------- comparisons and logic

CMP_X = np.array([1.0, 2.0, -0.0, np.nan, np.inf, -3.0, 2.0])
CMP_Y = np.array([1.0, 3.0, 0.0, np.nan, np.inf, -4.0, np.nan])


def _comparison_records() -> None:
    ops = {"equal": np.equal, "not_equal": np.not_equal, "greater": np.greater, "greater_equal": np.greater_equal,
           "less": np.less, "less_equal": np.less_equal}
    for name, op in ops.items():
        def run(tf: Any, name: str = name, op: Any = op) -> Result:
            fn = getattr(tf.math, name)
            with np.errstate(invalid="ignore"):
                return [c(f"tf.math.{name} float64 (IEEE: NaN unordered)", fn(tf.constant(CMP_X), tf.constant(CMP_Y)),
                          op(CMP_X, CMP_Y)),
                        c(f"tf.math.{name} int64 broadcast", fn(tf.constant(INTS), tf.constant(2, tf.int64)),
                          op(INTS, 2))], ()
        RECORDS[name] = run


_comparison_records()

BA = np.array([[True, True, False, False]] * 2)
BB = np.array([True, False, True, False])


def _logical_records() -> None:
    ops = {"logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor}
    for name, op in ops.items():
        def run(tf: Any, name: str = name, op: Any = op) -> Result:
            return [c(f"tf.math.{name} truth table (broadcast)", getattr(tf.math, name)(tf.constant(BA), tf.constant(BB)),
                      op(BA, BB))], ()
        RECORDS[name] = run


_logical_records()


@record("logical_not")
def _logical_not(tf: Any) -> Result:
    return [c("tf.math.logical_not", tf.math.logical_not(tf.constant(BB)), ~BB)], ()


FLAGS = np.array([0.0, -1.0, np.inf, -np.inf, np.nan, 5e-324, 1.7976931348623157e308])


@record("is_finite")
def _is_finite(tf: Any) -> Result:
    return [c("tf.math.is_finite float64", tf.math.is_finite(tf.constant(FLAGS)), np.isfinite(FLAGS))], ()


@record("is_inf")
def _is_inf(tf: Any) -> Result:
    return [c("tf.math.is_inf float64", tf.math.is_inf(tf.constant(FLAGS)), np.isinf(FLAGS))], ()


@record("is_nan")
def _is_nan(tf: Any) -> Result:
    return [c("tf.math.is_nan float64", tf.math.is_nan(tf.constant(FLAGS)), np.isnan(FLAGS))], ()


def _monotone(x: np.ndarray, strict: bool) -> bool:
    f = x.ravel()
    return bool(all((a < b) if strict else (a <= b) for a, b in itertools.pairwise(f)))


MONO = [np.array([1.0, 2.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]), np.array([[1.0, 2.0], [2.0, 5.0]]),
        np.array([3.0, 1.0]), np.array([7.0]), np.zeros((0,))]


def _monotone_records() -> None:
    for name, strict in (("is_non_decreasing", False), ("is_strictly_increasing", True)):
        def run(tf: Any, name: str = name, strict: bool = strict) -> Result:
            out = [c(f"tf.math.{name} on {x.tolist()} (row-major)", getattr(tf.math, name)(tf.constant(x, tf.float64)),
                     np.bool_(_monotone(x, strict))) for x in MONO]
            return out, (f"{name}.trivial",)
        RECORDS[name] = run


_monotone_records()


@record("count_nonzero")
def _count_nonzero(tf: Any) -> Result:
    x = np.array([[0.0, -0.0, 1.0], [np.nan, 0.0, -2.0]])
    nz = (x != 0) | np.isnan(x)
    return [c("tf.math.count_nonzero float64 (NaN counts, -0 does not)", tf.math.count_nonzero(tf.constant(x)),
              np.int64(nz.sum())),
            c("tf.math.count_nonzero axis=1 keepdims=True", tf.math.count_nonzero(tf.constant(x), axis=1, keepdims=True),
              nz.sum(1, keepdims=True).astype(np.int64)),
            c("tf.math.count_nonzero axis=0 dtype=int32", tf.math.count_nonzero(tf.constant(x), axis=0, dtype=tf.int32),
              nz.sum(0).astype(np.int32))], ("count_nonzero.axis",)


@record("reduce_all")
def _reduce_all(tf: Any) -> Result:
    return [c("tf.math.reduce_all", tf.math.reduce_all(tf.constant(BA)), np.bool_(BA.all())),
            c("tf.math.reduce_all axis=0 keepdims", tf.math.reduce_all(tf.constant(BA), axis=0, keepdims=True),
              BA.all(0, keepdims=True)),
            c("tf.math.reduce_all of an empty tensor is True", tf.math.reduce_all(tf.zeros((0,), tf.bool)),
              np.bool_(True))], ("reduce_all.empty",)


@record("reduce_any")
def _reduce_any(tf: Any) -> Result:
    return [c("tf.math.reduce_any", tf.math.reduce_any(tf.constant(BA)), np.bool_(BA.any())),
            c("tf.math.reduce_any axis=1", tf.math.reduce_any(tf.constant(BA & False), axis=1), (BA & False).any(1)),
            c("tf.math.reduce_any of an empty tensor is False", tf.math.reduce_any(tf.zeros((0,), tf.bool)),
              np.bool_(False))], ("reduce_any.empty",)


# ----------------------------------------------------------------- indices, counts


@record("argmax")
def _argmax(tf: Any) -> Result:
    x = np.array([[1.0, 9.0, -3.0], [4.0, -2.0, 8.0], [0.5, 3.0, 2.0]])
    return [c("tf.math.argmax axis=0", tf.math.argmax(tf.constant(x), axis=0), x.argmax(0)),
            c("tf.math.argmax axis=1 output_type=int32", tf.math.argmax(tf.constant(x), axis=1, output_type=tf.int32),
              x.argmax(1).astype(np.int32))], ()


@record("argmin")
def _argmin(tf: Any) -> Result:
    x = np.array([[1.0, 9.0, -3.0], [4.0, -2.0, 8.0], [0.5, 3.0, 2.0]])
    return [c("tf.math.argmin axis=0", tf.math.argmin(tf.constant(x), axis=0), x.argmin(0)),
            c("tf.math.argmin axis=1 output_type=int32", tf.math.argmin(tf.constant(x), axis=1, output_type=tf.int32),
              x.argmin(1).astype(np.int32))], ()


@record("invert_permutation")
def _invert_permutation(tf: Any) -> Result:
    p = np.array([3, 4, 0, 2, 1], dtype=np.int32)
    want = np.empty_like(p)
    want[p] = np.arange(p.size, dtype=np.int32)
    return [c("tf.math.invert_permutation int32 (y[x[i]] = i)", tf.math.invert_permutation(tf.constant(p)), want)], ()


@record("bincount")
def _bincount(tf: Any) -> Result:
    v = np.array([1, 1, 2, 3, 2, 4, 4, 5], dtype=np.int32)
    w = np.array([1.5, 5.0, 0.0, 1.0, 0.25, 5.0, 4.0, 5.0])
    two = np.array([[1, 0, 3], [2, 2, 0]], dtype=np.int32)
    counts = np.bincount(v).astype(np.int32)
    weighted = np.bincount(v, weights=w)
    row = np.stack([np.bincount(r, minlength=4) for r in two]).astype(np.int32)
    out = [c("tf.math.bincount", tf.math.bincount(tf.constant(v)), counts),
           c("tf.math.bincount weights float64 (sums the weights)", tf.math.bincount(tf.constant(v), weights=tf.constant(w)),
             weighted),
           c("tf.math.bincount minlength=9 pads", tf.math.bincount(tf.constant(v), minlength=9),
             np.bincount(v, minlength=9).astype(np.int32)),
           c("tf.math.bincount maxlength=3 drops larger values", tf.math.bincount(tf.constant(v), maxlength=3), counts[:3]),
           c("tf.math.bincount dtype=int64", tf.math.bincount(tf.constant(v), dtype=tf.int64), counts.astype(np.int64)),
           c("tf.math.bincount binary_output=True", tf.math.bincount(tf.constant(v), binary_output=True),
             (counts > 0).astype(np.int32)),
           c("tf.math.bincount axis=-1 (per row)", tf.math.bincount(tf.constant(two), axis=-1), row),
           c("tf.math.bincount of an empty array has length 0", tf.math.bincount(tf.zeros((0,), tf.int32)),
             np.zeros((0,), np.int32))]
    return out, ("bincount.weights", "bincount.minlength-maxlength", "bincount.binary_output", "bincount.axis=-1")


@record("confusion_matrix")
def _confusion_matrix(tf: Any) -> Result:
    labels = np.array([1, 2, 4, 0, 2, 2])
    preds = np.array([2, 2, 4, 0, 1, 2])
    w = np.array([1.0, 0.5, 2.0, 0.25, 3.0, 1.0])
    want = np.zeros((5, 5), np.int32)
    want_w = np.zeros((6, 6))
    for a, b, x in zip(labels, preds, w):
        want[a, b] += 1
        want_w[a, b] += x
    return [c("tf.math.confusion_matrix (rows labels, columns predictions)",
              tf.math.confusion_matrix(tf.constant(labels), tf.constant(preds)), want),
            c("tf.math.confusion_matrix num_classes=6 weights dtype=float64",
              tf.math.confusion_matrix(tf.constant(labels), tf.constant(preds), num_classes=6, weights=tf.constant(w),
                                       dtype=tf.float64), want_w)], ("confusion_matrix.weights",)


@record("in_top_k")
def _in_top_k(tf: Any) -> Result:
    pred = np.array([[1.2, -0.3, 2.8, 5.2], [0.1, 0.0, 0.0, 0.0], [0.0, 0.5, 0.3, 0.3], [0.0, 0.5, 0.3, 0.3],
                     [np.nan, 1.0, 2.0, 3.0], [np.inf, 1.0, 2.0, 3.0]], dtype=np.float32)
    targets = np.array([0, 1, 3, 0, 0, 0], dtype=np.int32)
    want = []
    for row, t in zip(pred, targets):
        v = row[t]
        want.append(bool(np.isfinite(v) and int((row > v).sum()) < 2))  # ties at the boundary count as in
    got = tf.math.in_top_k(tf.constant(targets), tf.constant(pred), 2)
    return [c("tf.math.in_top_k k=2 (ties straddling the boundary are in; non-finite predictions are not)", got,
              np.array(want))], ("in_top_k.ties",)


@record("zero_fraction")
def _zero_fraction(tf: Any) -> Result:
    x = np.array([0.0, 1.0, -0.0, 3.0, 0.0, 2.0, 5.0, 7.0])
    return [c("tf.math.zero_fraction float64 input gives float32", tf.math.zero_fraction(tf.constant(x)),
              np.float32(3 / 8)),
            c("tf.math.zero_fraction int32", tf.math.zero_fraction(tf.constant([0, 4, 0, 0], tf.int32)), np.float32(0.75)),
            c("tf.math.zero_fraction of an empty tensor is NaN", tf.math.zero_fraction(tf.zeros((0,), tf.float64)),
              np.float32(np.nan))], ("zero_fraction.empty",)


APPROX_X = np.random.default_rng(11).permutation(40).reshape(2, 20).astype(np.float32) / 4  # exact in float32


def _approx_k_checks(tf: Any, name: str, call: Callable[..., Any], how: str) -> list[Cmp]:
    """The documented properties of approx_max_k / approx_min_k through ``call(operand, k, **options)``:
    k values per row along reduction_dimension, sorted, equal to the operand at the returned (distinct)
    indices; with aggregate_to_topk=False at least k of them. The recall is noted (the docstring
    promises only a target for the approximation)."""
    largest = name == "approx_max_k"
    x = APPROX_X
    vals, idx = (_np(t) for t in call(tf.constant(x), 5))
    exact = np.sort(x, -1)[:, ::-1][:, :5] if largest else np.sort(x, -1)[:, :5]
    evidence.note(**{f"{name}_{how}_recall": float(np.mean([len(set(a) & set(b)) / 5 for a, b in
                                                           zip(vals.tolist(), exact.tolist())]))})
    va, ia = (_np(t) for t in call(tf.constant(x), 4, aggregate_to_topk=False))
    v0, i0 = (_np(t) for t in call(tf.constant(x), 1, reduction_dimension=0, recall_target=0.5))
    return [c(f"tf.math.{name} ({how}) values are operand[indices]", vals, np.take_along_axis(x, idx, -1)),
            c(f"tf.math.{name} ({how}) returns k values per row, sorted", vals,
              -np.sort(-vals, -1) if largest else np.sort(vals, -1)),
            c(f"tf.math.{name} ({how}) indices are distinct", np.array([len(set(r)) for r in idx.tolist()]),
              np.array([5, 5])),
            c(f"tf.math.{name} ({how}) aggregate_to_topk=False gives at least k per row",
              np.array(va.shape[1] >= 4 and va.shape[0] == 2), np.array(True)),
            c(f"tf.math.{name} ({how}) aggregate_to_topk=False values are operand[indices]", va,
              np.take_along_axis(x, ia, -1)),
            c(f"tf.math.{name} ({how}) reduction_dimension=0 values are operand[indices]", v0,
              np.take_along_axis(x, i0, 0))]


def _approx_k_records() -> None:
    """Checked as the docstring's own example runs it, under tf.function(jit_compile=True) ('We
    encourage users to wrap approx_max_k with jit'); test_approx_k_eager checks the eager calls."""
    for name in ("approx_max_k", "approx_min_k"):
        def run(tf: Any, name: str = name) -> Result:
            fn = getattr(tf.math, name)
            cache: dict[tuple[Any, ...], Any] = {}

            def jit(operand: Any, k: int, **options: Any) -> Any:
                key = (k, *sorted(options.items()))
                if key not in cache:
                    cache[key] = tf.function(lambda v: fn(v, k, **options), jit_compile=True)
                return cache[key](operand)
            return _approx_k_checks(tf, name, jit, "jit_compile"), \
                (f"{name}.aggregate_to_topk=False", f"{name}.reduction_dimension=0")
        RECORDS[name] = run


_approx_k_records()


# ----------------------------------------------------------------- reductions


@record("reduce_euclidean_norm")
def _reduce_euclidean_norm(tf: Any) -> Result:
    x = np.array([[3.0, -4.0, 12.0], [1e-3, 2.0, -0.5]])
    want = ref.mp_map(lambda a, b, d: __import__("mpmath").sqrt(a * a + b * b + d * d), x[:, 0], x[:, 1], x[:, 2])
    allw = float(np.sqrt(np.sum(x * x)))
    return [c("tf.math.reduce_euclidean_norm axis=1", tf.math.reduce_euclidean_norm(tf.constant(x), axis=1), want,
              (3 + 2) * U),
            c("tf.math.reduce_euclidean_norm all axes keepdims", tf.math.reduce_euclidean_norm(tf.constant(x), keepdims=True),
              np.full((1, 1), allw), (6 + 2) * U + 2 * U)], ()


@record("reduce_std")
def _reduce_std(tf: Any) -> Result:
    x = np.array([[1.0, 2.0, 4.0, 8.5], [100.0, 100.5, 99.0, 101.0]])
    def std(v: np.ndarray) -> float:
        import mpmath
        m = sum(mpmath.mpf(float(a)) for a in v) / len(v)
        return float(mpmath.sqrt(sum((mpmath.mpf(float(a)) - m) ** 2 for a in v) / len(v)))
    rows = np.array([std(r) for r in x])
    cols = np.array([std(col) for col in x.T])
    # mean: n roundings; x - mean cancels: absolute error (n+1) u max|x|, relative to std amplified by max|x|/std
    n = x.shape[1]
    atol_rows = (2 * n + 4) * U * np.abs(x).max(1)
    return [c("tf.math.reduce_std axis=1 (population: sqrt(mean((x - mean)^2)))", tf.math.reduce_std(tf.constant(x), 1),
              rows, (2 * n + 4) * U, atol_rows),
            c("tf.math.reduce_std axis=0", tf.math.reduce_std(tf.constant(x), 0), cols, 8 * U, 8 * U * np.abs(x).max(0)),
            c("tf.math.reduce_std all", tf.math.reduce_std(tf.constant(x)), np.float64(std(x.ravel())), 20 * U,
              20 * U * np.abs(x).max())], ()


@record("l2_normalize")
def _l2_normalize(tf: Any) -> Result:
    x = np.array([[3.0, 4.0], [1e-8, -1e-8], [0.0, 0.0], [-5.0, 12.0]])
    eps = 1e-12
    norm = np.sqrt(np.maximum((x * x).sum(1, keepdims=True), eps))
    out = [c("tf.math.l2_normalize axis=1 x / sqrt(max(sum x^2, epsilon))", tf.math.l2_normalize(tf.constant(x), axis=1),
             x / norm, 6 * U)]
    big = 1e-2
    norm0 = np.sqrt(np.maximum((x * x).sum(0, keepdims=True), big))
    out.append(c("tf.math.l2_normalize axis=0 epsilon=1e-2", tf.math.l2_normalize(tf.constant(x), axis=0, epsilon=big),
                 x / norm0, 9 * U))
    return out, ("l2_normalize.epsilon",)


@record("polyval")
def _polyval(tf: Any) -> Result:
    coeffs = [2.0, -3.5, 0.0, 1.25, -7.0]
    x = np.array([-2.0, -0.5, 0.0, 0.3, 1.0, 3.0])
    n = len(coeffs)
    mag = sum(abs(cf) * np.abs(x) ** (n - 1 - i) for i, cf in enumerate(coeffs))
    got = tf.math.polyval([tf.constant(cf, tf.float64) for cf in coeffs], tf.constant(x, tf.float64))
    gi = tf.math.polyval([2, 1, 0], 3)
    return [c("tf.math.polyval float64 (coeffs[0] the highest power)", got, ref.polyval(coeffs, x), 0.0, 2 * n * U * mag),
            c("tf.math.polyval int32", gi, np.int32(21))], ()


# ----------------------------------------------------------------- elementary functions


def _elementary_records() -> None:
    import mpmath
    table: dict[str, tuple[Any, np.ndarray]] = {
        "acos": (lambda v: mpmath.acos(v) if abs(v) <= 1 else mpmath.nan, UNIT),
        "asin": (lambda v: mpmath.asin(v) if abs(v) <= 1 else mpmath.nan, UNIT),
        "atanh": (lambda v: (mpmath.inf * mpmath.sign(v) if abs(v) == 1 else mpmath.atanh(v)) if abs(v) <= 1
                  else mpmath.nan, UNIT),
        "acosh": (lambda v: mpmath.acosh(v) if v >= 1 else mpmath.nan,
                  np.array([1.0, 1.0 + 2 ** -40, 1.5, 10.0, 1e10, 0.5, -2.0, np.inf, np.nan])),
        "cosh": (mpmath.cosh, WIDE),
        "sinh": (mpmath.sinh, WIDE),
        "tan": (mpmath.tan, np.array([-1.5, -0.7, -1e-9, 0.0, 1e-9, 0.7, 1.5, 1.5707963267948966, 3.0, 100.0, np.nan])),
    }
    for name, (fn, x) in table.items():
        def run(tf: Any, name: str = name, fn: Any = fn, x: np.ndarray = x) -> Result:
            x32 = x.astype(np.float32)
            with np.errstate(over="ignore"):
                want32 = ref.mp_map(fn, x32.astype(np.float64)).astype(np.float32)
            got32 = getattr(tf.math, name)(tf.constant(x32, tf.float32))
            # float32: the function's 2 ulp plus the reference's own rounding to float32 (u32)
            return [*_unary_mp(tf, name, fn, x, OP),
                    c(f"tf.math.{name} float32", got32, want32, (ref.OP + 1) * U32)], ()
        RECORDS[name] = run


_elementary_records()


@record("atan2")
def _atan2(tf: Any) -> Result:
    import mpmath
    y = np.array([1.0, -1.0, 1.0, -1.0, 0.0, 3.0, -2.0, 1e-300, 5.0])
    x = np.array([1.0, 1.0, -1.0, -1.0, 1.0, 0.0, 0.0, 1.0, -1e-10])
    return _binary_mp(tf, "atan2", lambda a, b: mpmath.atan2(a, b), y, x, OP), ()


Z = np.array([3 + 4j, -1 + 0.5j, -2 - 1e-3j, 0.25 - 7j, 1e-300 + 0j, -5 + 0j])


@record("angle")
def _angle(tf: Any) -> Result:
    import mpmath
    want = np.array([float(mpmath.atan2(mpmath.mpf(z.imag), mpmath.mpf(z.real))) for z in Z])
    return [c("tf.math.angle complex128 atan2(imag, real)", tf.math.angle(tf.constant(Z)), want, OP, dtype=F64)], ()


@record("conj")
def _conj(tf: Any) -> Result:
    return [c("tf.math.conj complex128", tf.math.conj(tf.constant(Z)), Z.real - 1j * Z.imag)], ()


@record("real")
def _real(tf: Any) -> Result:
    return [c("tf.math.real complex128 gives float64", tf.math.real(tf.constant(Z)), Z.real)], ()


@record("imag")
def _imag(tf: Any) -> Result:
    return [c("tf.math.imag complex128 gives float64", tf.math.imag(tf.constant(Z)), Z.imag)], ()


# ----------------------------------------------------------------- special functions


def _special_records() -> None:
    import mpmath
    table: dict[str, tuple[Any, np.ndarray, float]] = {
        "bessel_i0": (lambda v: mpmath.besseli(0, v), BESSEL, 5.8e-16),
        "bessel_i0e": (ref.i0e, BESSEL, 5.4e-16),
        "bessel_i1": (lambda v: mpmath.besseli(1, v), BESSEL, 1.9e-15),
        "bessel_i1e": (ref.i1e, BESSEL, 2.0e-15),
        "digamma": (ref.digamma, np.array([1e-6, 0.01, 0.5, 1.0, 1.4616321449683622, 2.0, 7.25, 29.0, -0.5, -2.75]),
                    1.3e-15),
        "lgamma": (ref.lgamma, np.array([1e-6, 0.01, 0.5, 1.0, 2.0, 3.5, 7.25, 29.0, 1e5, -0.5, -2.75, 0.0, -3.0]),
                   4 * OP),
        "ndtri": (ref.ndtri, np.array([0.0, 1e-300, 1e-10, 0.01, 0.135, 0.3, 0.5, 0.7, 0.99, 1 - 2 ** -30, 1.0, -0.5, 1.5]),
                  7.2e-16),
    }
    for name, (fn, x, rtol) in table.items():
        # digamma: near its positive root the result is a difference of terms of order 1 (the
        # recurrence to the asymptotic series), so its documented error is also absolute (atol = rtol)
        atol = rtol if name == "digamma" else 0.0

        def run(tf: Any, name: str = name, fn: Any = fn, x: np.ndarray = x, rtol: float = rtol,
                atol: float = atol) -> Result:
            return _unary_mp(tf, name, fn, x, max(rtol, OP), atol), ()
        RECORDS[name] = run


_special_records()


def _erfinv_slope(y: np.ndarray) -> np.ndarray:
    """|d erfinv / dy| = sqrt(pi)/2 exp(erfinv(y)^2) (inf at +-1)."""
    e = ref.mp_map(ref.erfinv, y)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isfinite(e), math.sqrt(math.pi) / 2 * np.exp(np.nan_to_num(e) ** 2), 0.0)


@record("erfinv")
def _erfinv(tf: Any) -> Result:
    y = np.array([-1.0, -0.999, -0.5, -0.1, 0.0, 0.1, 0.5, 0.9, 0.999999, 1.0, 1.5, np.nan])
    return _unary_mp(tf, "erfinv", ref.erfinv, y, 2 * OP, U * _erfinv_slope(y)), ()


@record("erfcinv")
def _erfcinv(tf: Any) -> Result:
    y = np.array([0.0, 1e-300, 1e-10, 0.1, 0.5, 1.0, 1.5, 1.9, 2.0, -0.5, 2.5])
    return _unary_mp(tf, "erfcinv", ref.erfcinv, y, 2 * OP), ()


A_POS = np.array([0.5, 1.0, 2.5, 5.0, 0.1, 3.0, 1.0, 4.0])
X01 = np.array([0.0, 0.3, 0.5, 0.9, 1.0, 0.01, 0.75, 0.2])


@record("betainc")
def _betainc(tf: Any) -> Result:
    a, b = A_POS, A_POS[::-1].copy()
    got = tf.math.betainc(tf.constant(a), tf.constant(b), tf.constant(X01))
    return [c("tf.math.betainc float64 I_x(a, b), a, b <= 5", got, ref.mp_map(ref.betainc, a, b, X01), 6.9e-15)], ()


XG = np.array([0.0, 0.3, 2.5, 5.0, 0.1, 10.0, 29.0, 1.0])


@record("igamma")
def _igamma(tf: Any) -> Result:
    return _binary_mp(tf, "igamma", ref.igamma, A_POS, XG, 3.6e-14), ()


@record("igammac")
def _igammac(tf: Any) -> Result:
    return _binary_mp(tf, "igammac", ref.igammac, A_POS, XG, 3.6e-14), ()


@record("zeta")
def _zeta(tf: Any) -> Result:
    x = np.array([1.5, 2.0, 3.0, 4.5, 10.0, 2.0, 7.0])
    q = np.array([1.0, 0.5, 2.0, 10.0, 1.5, 25.0, 0.25])
    return _binary_mp(tf, "zeta", ref.zeta, x, q, max(6.9e-16, OP)), ()


@record("polygamma")
def _polygamma(tf: Any) -> Result:
    n = np.array([0.0, 1.0, 2.0, 3.0, 1.0, 4.0, 1.5])
    x = np.array([0.5, 0.5, 2.0, 10.0, 7.25, 1.0, 2.0])
    # (-1)^(n+1) n! zeta(n+1, x): zeta's error plus the factorial and sign product (2 u)
    return _binary_mp(tf, "polygamma", ref.polygamma, n, x, max(6.9e-16, OP) + 2 * U + 1.3e-15), ()


@record("lbeta")
def _lbeta(tf: Any) -> Result:
    import mpmath
    x = np.array([[0.5, 0.5], [2.0, 3.0], [1.0, 7.25], [0.1, 4.0], [3.0, 1.5]])
    x3 = np.array([[1.0, 2.0, 3.0], [0.5, 1.5, 2.5]])
    def mag(rows: np.ndarray) -> np.ndarray:
        return np.array([sum(abs(float(ref.lgamma(mpmath.mpf(float(v))))) for v in r)
                         + abs(float(ref.lgamma(mpmath.mpf(float(r.sum()))))) for r in rows])
    return [c("tf.math.lbeta float64 (K=2)", tf.math.lbeta(tf.constant(x)), ref.lbeta_rows(x), 0.0, 4 * OP * mag(x)),
            c("tf.math.lbeta float64 (K=3)", tf.math.lbeta(tf.constant(x3)), ref.lbeta_rows(x3), 0.0, 4 * OP * mag(x3)),
            # empty last dimension: 'the sum over the empty set is zero, and the product is one', so
            # Beta = 1 / Gamma(0) = 0 and log|Beta| = -inf
            c("tf.math.lbeta of an empty last dimension (Beta = 1 / Gamma(0))", tf.math.lbeta(tf.zeros((2, 0), tf.float64)),
              np.full(2, -np.inf))], ("lbeta.empty-last-dim",)


# ----------------------------------------------------------------- segment reductions

DATA = np.array([[1.0, -2.0], [3.5, 4.0], [-0.5, 8.0], [2.0, 0.25], [6.0, -1.0], [-3.0, 0.5], [0.75, 9.0]])
SORTED_IDS = np.array([0, 0, 1, 1, 1, 3, 3], dtype=np.int32)  # segment 2 is empty
UNSORTED_IDS = np.array([3, 0, -1, 3, 0, 1, -1], dtype=np.int32)  # -1 dropped; 2 and 4 empty
NUM = 5
LOWEST, HIGHEST = np.finfo(np.float64).min, np.finfo(np.float64).max


def _segment_records() -> None:
    # (function, empty-segment fill, rtol): tables keyed by the tf.math function's own name
    sorted_fills = (("segment_sum", 0.0, 0.0), ("segment_prod", 1.0, 3 * U), ("segment_max", 0.0, 0.0),
                    ("segment_min", 0.0, 0.0), ("segment_mean", 0.0, U))
    for name, fill, rtol in sorted_fills:
        kind = name.removeprefix("segment_")

        def run(tf: Any, name: str = name, kind: str = kind, fill: float = fill, rtol: float = rtol) -> Result:
            got = getattr(tf.math, name)(tf.constant(DATA), tf.constant(SORTED_IDS))
            want = ref.segment_reduce(DATA, SORTED_IDS, int(SORTED_IDS.max()) + 1, kind, fill)
            summed = kind not in ("max", "min", "prod")  # sum and mean: rounding grows with the sum of |terms|
            atol = 3 * U * ref.segment_reduce(np.abs(DATA), SORTED_IDS, 4, "sum", 0.0) if summed else 0.0
            return [c(f"tf.math.{name} float64 (sorted ids; empty segment gives {fill})", got, want, rtol, atol)], \
                ("segment.empty-segment",)
        RECORDS[name] = run
    unsorted_fills = (("unsorted_segment_sum", 0.0, 0.0, 0), ("unsorted_segment_prod", 1.0, 3 * U, 1),
                      ("unsorted_segment_max", LOWEST, 0.0, np.iinfo(np.int32).min),
                      ("unsorted_segment_min", HIGHEST, 0.0, np.iinfo(np.int32).max),
                      ("unsorted_segment_mean", 0.0, U, None), ("unsorted_segment_sqrt_n", 0.0, 3 * U, None))
    for name, fill, rtol, ifill in unsorted_fills:
        kind = name.removeprefix("unsorted_segment_")

        def run_u(tf: Any, name: str = name, kind: str = kind, fill: float = fill, rtol: float = rtol,
                  ifill: Any = ifill) -> Result:
            got = getattr(tf.math, name)(tf.constant(DATA), tf.constant(UNSORTED_IDS), NUM)
            want = ref.segment_reduce(DATA, UNSORTED_IDS, NUM, kind, fill)
            atol = (3 * U * ref.segment_reduce(np.abs(DATA), UNSORTED_IDS, NUM, "sum", 0.0)
                    if kind not in ("max", "min", "prod") else 0.0)
            out = [c(f"tf.math.{name} float64 (unsorted ids, -1 dropped, num_segments={NUM}, empty gives {fill})",
                     got, want, rtol, atol)]
            if ifill is not None:  # the integer kernels: sum, prod, max, min
                ints = (DATA * 4).astype(np.int32)
                gi = getattr(tf.math, name)(tf.constant(ints), tf.constant(UNSORTED_IDS), NUM)
                wi = ref.segment_reduce(ints, UNSORTED_IDS, NUM, kind, ifill).astype(np.int32)
                out.append(c(f"tf.math.{name} int32 (empty gives {ifill})", gi, wi))
            return out, ("unsorted_segment.dropped-negative-id", "unsorted_segment.empty-segment")
        RECORDS[name] = run_u


_segment_records()


@record("sobol_sample")
def _sobol_sample(tf: Any) -> Result:
    pts = _np(tf.math.sobol_sample(5, 16, dtype=tf.float64))
    skipped = _np(tf.math.sobol_sample(3, 8, skip=5, dtype=tf.float64))
    f32 = _np(tf.math.sobol_sample(2, 4))
    inside = np.array([bool(((p >= 0) & (p < 1)).all()) for p in (pts, skipped, f32)])
    return [c("tf.math.sobol_sample shape [num_results, dim] float64", np.array(pts.shape), np.array([16, 5])),
            c("tf.math.sobol_sample values in [0, 1)", inside, np.array([True, True, True])),
            c("tf.math.sobol_sample first dimension is the Sobol (Gray-code) sequence", pts[:, 0],
              ref.sobol_first_dimension(16, _sobol_offset(pts[:, 0]))),
            c("tf.math.sobol_sample skip=5 continues the sequence 5 points later", skipped,
              _np(tf.math.sobol_sample(3, 13, dtype=tf.float64))[5:]),
            c("tf.math.sobol_sample default dtype float32 (the same dyadic points)", f32,
              pts[:4, :2].astype(np.float32))], \
        ("sobol_sample.skip",)


def _sobol_offset(first: np.ndarray) -> int:
    """0 if the sequence starts at the origin point n = 0, else 1 (implementations differ on
    whether the all-zero point is emitted; both are the Sobol sequence)."""
    return 0 if first[0] == 0.0 else 1


# ----------------------------------------------------------------- tests

EDGE_MODES = sorted({
    "reciprocal_no_nan.x=0", "divide_no_nan.y=0", "multiply_no_nan.y=0", "xdivy.x=0", "xlogy.x=0", "xlog1py.x=0",
    "round.half-to-even", "rint.half-to-even", "is_non_decreasing.trivial", "is_strictly_increasing.trivial",
    "count_nonzero.axis", "reduce_all.empty", "reduce_any.empty", "bincount.weights", "bincount.minlength-maxlength",
    "bincount.binary_output", "bincount.axis=-1", "confusion_matrix.weights", "in_top_k.ties", "zero_fraction.empty",
    "approx_max_k.aggregate_to_topk=False", "approx_min_k.aggregate_to_topk=False", "approx_max_k.reduction_dimension=0",
    "approx_min_k.reduction_dimension=0", "l2_normalize.epsilon",
    "segment.empty-segment", "unsorted_segment.dropped-negative-id", "unsorted_segment.empty-segment",
    "sobol_sample.skip", "lbeta.empty-last-dim",
})


def _cpu_only(dl_device: str) -> None:
    if dl_device != "cpu":
        not_applicable("the claim is about TensorFlow's CPU kernels (eager, CPU); it runs once, on the cpu device")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", sorted(RECORDS))
def test_function_matches_reference(tf, dl_device, name):
    _cpu_only(dl_device)
    with tf.device("/CPU:0"), ref.mpmath.workdps(ref.DIGITS):  # the records' own mpmath sums and maps
        comparisons, modes = RECORDS[name](tf)
    assert comparisons, f"record {name} compares nothing"
    for cmp in comparisons:
        ref.assert_values(cmp.got, cmp.want, rtol=cmp.rtol, atol=cmp.atol, what=cmp.what, dtype=cmp.dtype)
    evidence.covers(name, *modes)


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", ["approx_max_k", "approx_min_k"])
def test_approx_k_eager(tf, dl_device, name):
    """The same documented properties called eagerly (the docstring documents no jit requirement)."""
    _cpu_only(dl_device)
    with tf.device("/CPU:0"):
        comparisons = _approx_k_checks(tf, name, getattr(tf.math, name), "eager")
    for cmp in comparisons:
        ref.assert_values(cmp.got, cmp.want, rtol=cmp.rtol, atol=cmp.atol, what=cmp.what, dtype=cmp.dtype)
    evidence.covers(name, f"{name}.aggregate_to_topk=False", f"{name}.reduction_dimension=0")


@pytest.mark.claim(CLAIM)
@pytest.mark.parametrize("name", ["approx_max_k", "approx_min_k"])
def test_approx_k_float64(tf, dl_device, name):
    """'operand: Array to search for max-k. Must be a floating number type': float64 included."""
    _cpu_only(dl_device)
    x = APPROX_X.astype(np.float64)
    fn = tf.function(lambda v: getattr(tf.math, name)(v, 5), jit_compile=True)
    with tf.device("/CPU:0"):
        vals, idx = (_np(t) for t in fn(tf.constant(x)))
    ref.assert_values(vals, np.take_along_axis(x, idx, -1), rtol=0.0, what=f"tf.math.{name} float64 values")
    evidence.covers(name)


@pytest.mark.claim(CLAIM)
def test_table_is_complete(tf):
    missing = [n for n in ASSIGNED if n not in RECORDS and n not in OUT_OF_SCOPE]
    assert not missing, f"tf.math functions without a record in suites/modules/test_tf_math.py: {missing}"
    absent = [n for n in ASSIGNED if not callable(getattr(tf.math, n, None))]
    assert not absent, f"tf.math no longer exports {absent}"
    extra = sorted(set(RECORDS) - set(ASSIGNED))
    assert not extra, f"records for functions not in the assigned list: {extra}"
    evidence.note(records=len(RECORDS), out_of_scope=sorted(OUT_OF_SCOPE))
    evidence.covers("table-complete")
