"""Suite-only helpers of modules.tf.math-functions: the elementwise oracle, the float64 references
(numpy for arithmetic, mpmath at 40 digits for the special functions), the segment-reduction
reference with the documented empty-segment fills, and the first dimension of the Sobol sequence
derived from its definition. No framework is imported here.

The oracle, :func:`assert_values`, compares element by element (special functions span many
orders of magnitude, so a normwise bound would hide a wrong small value): every finite expected
element must satisfy ``|got - want| <= rtol * |want| + atol``, every non-finite expected element
must be matched exactly (NaN by NaN, +inf by +inf, -inf by -inf), and shape and dtype must be the
expected ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import mpmath
import numpy as np

from pytest_dlconform.api import evidence

#: mpmath working digits of the references; set per call (mpmath.workdps), never process-wide, so
#: importing the suite leaves mpmath (and sympy, which torch uses) at the precision it had.
DIGITS = 40
U64 = 2.0 ** -53
OP = 4  # one operation's documented accuracy, in units of u (docs/tolerances.md, OP_ROUNDING)


class ValueMismatch(AssertionError):
    """An element is outside its error bound, or shape, dtype or non-finite pattern differ."""


def assert_values(got: Any, want: Any, *, rtol: float, atol: float | np.ndarray = 0.0, what: str,
                  dtype: Any = None) -> float:
    """Elementwise ``|got - want| <= rtol |want| + atol``; non-finite values must match exactly.

    ``dtype`` (default: ``want``'s) is the dtype ``got`` must have. Returns the worst ratio of the
    error to its bound (<= 1 when it passes) and records it as evidence."""
    __tracebackhide__ = True
    g, w = np.asarray(got), np.asarray(want)
    expect = np.dtype(dtype) if dtype is not None else w.dtype
    if g.shape != w.shape or g.dtype != expect:
        raise ValueMismatch(f"{what}: got shape {g.shape} dtype {g.dtype}, expected shape {w.shape} dtype {expect}")
    if g.dtype.kind not in "fc":
        bad = np.flatnonzero((g != w).ravel())
        evidence.check(what, observed=float(bad.size), tolerance=0.0)
        if bad.size:
            i = int(bad[0])
            raise ValueMismatch(f"{what}: {bad.size} element(s) differ, first at flat index {i}: "
                                f"got {g.ravel()[i]!r}, expected {w.ravel()[i]!r}")
        return 0.0
    gc, wc = g.astype(np.complex128).ravel(), w.astype(np.complex128).ravel()
    finite = np.isfinite(wc)
    for i in np.flatnonzero(~finite):
        a, e = gc[i], wc[i]
        same = all((np.isnan(x) and np.isnan(y)) or x == y for x, y in ((a.real, e.real), (a.imag, e.imag)))
        if not same:
            evidence.check(what, observed=math.inf, tolerance=1.0)
            raise ValueMismatch(f"{what}: element {i} should be {w.ravel()[i]!r} (non-finite values must match), "
                                f"got {g.ravel()[i]!r}")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bound = rtol * np.where(finite, np.abs(wc), 0.0) + np.broadcast_to(np.asarray(atol, dtype=np.float64),
                                                                           w.shape).ravel()
        err = np.where(finite, np.abs(np.where(finite, gc, 0) - np.where(finite, wc, 0)), 0.0)
        err = np.where(finite & ~np.isfinite(gc), np.inf, err)
        ratio = np.where(err == 0, 0.0, err / np.where(bound > 0, bound, 0.0))
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    worst = int(np.argmax(ratio)) if ratio.size else 0
    observed = float(ratio[worst]) if ratio.size else 0.0
    evidence.check(what, observed=observed, tolerance=1.0, rtol=rtol)
    if observed > 1.0:
        raise ValueMismatch(
            f"{what}: element {worst} is {g.ravel()[worst]!r}, expected {w.ravel()[worst]!r}: |error| "
            f"{err[worst]:.3e} > bound {bound[worst]:.3e} (rtol {rtol:.3e}); error/bound {observed:.3e}")
    return observed


# ----------------------------------------------------------------- mpmath references


def mp_map(fn: Callable[..., Any], *arrays: np.ndarray) -> np.ndarray:
    """``fn`` elementwise at 40 digits on float64 inputs (exactly converted), rounded to float64.
    An mpmath error or a complex result (outside the real domain) gives NaN; ``inf`` stays."""
    bs = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64) for a in arrays])
    out = np.empty(bs[0].shape, dtype=np.float64)
    with mpmath.workdps(DIGITS):
        _fill(out, fn, bs)
    return out


def _fill(out: np.ndarray, fn: Callable[..., Any], bs: Sequence[np.ndarray]) -> None:
    for idx in np.ndindex(out.shape):
        args = [mpmath.mpf(float(b[idx])) for b in bs]
        try:
            v = fn(*args)
        except (ValueError, ZeroDivisionError):
            out[idx] = math.nan
            continue
        if isinstance(v, mpmath.mpc):
            out[idx] = float(v.real) if v.imag == 0 else math.nan
        else:
            out[idx] = float(v)


def lgamma(x: Any) -> Any:
    """log|Gamma(x)| (inf at the poles 0, -1, -2, ...)."""
    if x <= 0 and x == mpmath.floor(x):
        return mpmath.inf
    return mpmath.log(abs(mpmath.gamma(x)))


def digamma(x: Any) -> Any:
    if x <= 0 and x == mpmath.floor(x):
        return mpmath.nan
    return mpmath.digamma(x)


def i0e(x: Any) -> Any:
    return mpmath.exp(-abs(x)) * mpmath.besseli(0, x)


def i1e(x: Any) -> Any:
    return mpmath.exp(-abs(x)) * mpmath.besseli(1, x)


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularized incomplete beta I_x(a, b)."""
    return mpmath.betainc(a, b, 0, x, regularized=True)


def igamma(a: Any, x: Any) -> Any:
    """The regularized lower incomplete gamma P(a, x)."""
    return mpmath.gammainc(a, 0, x, regularized=True)


def igammac(a: Any, x: Any) -> Any:
    """The regularized upper incomplete gamma Q(a, x) = 1 - P(a, x)."""
    return mpmath.gammainc(a, x, mpmath.inf, regularized=True)


def erfinv(y: Any) -> Any:
    if abs(y) == 1:
        return mpmath.inf * mpmath.sign(y)
    return mpmath.erfinv(y)


def erfcinv(y: Any) -> Any:
    """erfc(erfcinv(y)) = y on (0, 2): erfinv(1 - y), 1 - y kept exact (working digits beyond y's exponent)."""
    if y == 0:
        return mpmath.inf
    if y == 2:
        return -mpmath.inf
    with mpmath.workdps(_digits_for(y)):
        return +mpmath.erfinv(1 - y)


def ndtri(p: Any) -> Any:
    """The inverse of the standard normal CDF: sqrt(2) erfinv(2p - 1)."""
    if p == 0:
        return -mpmath.inf
    if p == 1:
        return mpmath.inf
    with mpmath.workdps(_digits_for(p)):
        return +(mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1))


def _digits_for(y: Any) -> int:
    """Working digits that keep 1 - y (or 2p - 1) exact for a tiny y: DIGITS beyond its exponent."""
    return DIGITS + max(0, int(-mpmath.log10(abs(y)))) if y != 0 else DIGITS


def polygamma(n: Any, x: Any) -> Any:
    if n != mpmath.floor(n) or n < 0:
        return mpmath.nan
    return mpmath.psi(int(n), x)


def zeta(x: Any, q: Any) -> Any:
    """The Hurwitz zeta sum_n (q + n)^-x."""
    return mpmath.zeta(x, q)


def lbeta_rows(x: np.ndarray) -> np.ndarray:
    """log|B(x)| = sum_i lgamma(x_i) - lgamma(sum_i x_i) over the last axis."""
    out = np.empty(x.shape[:-1], dtype=np.float64)
    with mpmath.workdps(DIGITS):
        for idx in np.ndindex(out.shape):
            row = [mpmath.mpf(float(v)) for v in x[idx]]
            out[idx] = float(sum(lgamma(v) for v in row) - lgamma(sum(row)))
    return out


def polyval(coeffs: Sequence[float], x: np.ndarray) -> np.ndarray:
    """sum_i coeffs[i] x^(n-1-i) at 40 digits (coeffs[0] the highest power)."""
    n = len(coeffs)
    return mp_map(lambda v: sum(mpmath.mpf(c) * v ** (n - 1 - i) for i, c in enumerate(coeffs)), x)


# ----------------------------------------------------------------- segment reductions


def segment_reduce(data: np.ndarray, ids: np.ndarray, num_segments: int, kind: str, empty: float) -> np.ndarray:
    """output[i] = reduce(data[j] for ids[j] == i) along axis 0; ``empty`` where segment i has no
    entry; negative ids are dropped. kinds: sum, prod, max, min, mean, sqrt_n (sum / sqrt(count))."""
    out = np.full((num_segments, *data.shape[1:]), empty, dtype=data.dtype)
    for i in range(num_segments):
        rows = data[ids == i].astype(np.float64)
        if rows.shape[0] == 0:
            continue
        if kind == "max" or kind == "min":
            value = rows.max(0) if kind == "max" else rows.min(0)
        elif kind == "prod":
            value = rows.prod(0)
        else:  # sum; mean divides the sum by the count, sqrt_n by its square root
            n = rows.shape[0]
            value = rows.sum(0) / (n if kind == "mean" else math.sqrt(n) if kind == "sqrt_n" else 1)
        out[i] = value
    return out


# ----------------------------------------------------------------- Sobol sequence


def sobol_first_dimension(num_results: int, skip: int) -> np.ndarray:
    """The first coordinate of the Sobol sequence in Gray-code order (Antonov-Saleev): its
    direction numbers are v_k = 2^-k (all m_k = 1), so point n is the bit reversal of gray(n) =
    n ^ (n >> 1) read as a binary fraction: 0, 1/2, 3/4, 1/4, 3/8, 7/8, 5/8, 1/8, ..."""
    def point(n: int) -> float:
        g, x, k = n ^ (n >> 1), 0.0, 1
        while g:
            if g & 1:
                x += 2.0 ** -k
            g >>= 1
            k += 1
        return x
    return np.array([point(n) for n in range(skip, skip + num_results)])
