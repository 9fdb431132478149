"""Documented edge cases of the op library's ops: kinks, extreme magnitudes, non-finite inputs.

The op table (:mod:`.ops`) keeps every generated input within ``INPUT_MAX``, finite, and
``KINK_MARGIN`` away from kinks, so finite differences stay valid. This room holds what those
regimes leave out, each case with the sentence of documentation that defines it:

* ``kink``: the value and gradient exactly AT each kink of a piecewise op. The value is the
  documented formula's. torch documents its gradient convention once for every op (autograd
  notes, "Gradients for non-differentiable functions", :data:`TORCH_KINK_RULES`): 1. the
  gradient where one exists, 2. locally convex: the sub-gradient of minimum norm, 3. locally
  concave: the super-gradient of minimum norm, 4. otherwise a value by continuity (one of the
  one-sided derivatives), picked arbitrarily. TensorFlow documents no convention: its gradient
  at a kink is recorded as evidence, never asserted.
* ``extreme``: magnitudes from just above the smallest normal number (1e-300 in float64,
  2e-38 in float32) up to where the op's documented formula's own intermediates would overflow
  (x**2 or x**3 inside the formula: 1e150 or 1e100 in float64), passing the point where a naive
  exp overflows (1e3, 1e2), wherever the documented function is finite there; the
  log-sum-exp family (documented as numerically stable) with shifted inputs whose naive
  exponentials overflow. Value and gradient against the analytic float64 reference, within
  the error model of docs/tolerances.md ("Edge cases").
* ``nonfinite``: +-inf wherever the documentation defines the output: TensorFlow's own
  examples (tanh, asinh, sin, cos at +-inf), and formulas whose IEEE 754 evaluation at +-inf is
  defined (max(0, x), clipping, 1 / (1 + exp(-x)), log(sum(exp(x)))); torch gradients there
  where the output is finite (rule 4: by continuity). NaN inputs: no document defines the
  result of these ops for NaN (torch's rule 5 calls the gradient arbitrary), so none is checked.

:func:`edges` lists every case, :func:`judge` compares a framework's results with one (a pure
function, so tests can feed it wrong results), :func:`registered` the coverage-ledger rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import numpy as np

from ..core.floats import SMALLEST_NORMAL, UNIT_ROUNDOFF
from .core import ULPS, Array, Op, Params
from .derivatives import _sig
from .ops import OPS, RECORDS
from .program import Program
from .records import BOTH as BOTH
from .records import IEEE_FORMULA as _FORMULA
from .records import TF_API as TF_API
from .records import TORCH_API as TORCH_API
from .records import DerivativeFn, OpRecord

MODES: Final = ("kink", "extreme", "nonfinite")
DTYPES: Final = ("float64", "float32")
TORCH_AUTOGRAD: Final = ("https://pytorch.org/docs/stable/notes/autograd.html"
                         "#gradients-for-non-differentiable-functions")
#: torch's documented rules, in the words of the autograd notes (rule number -> summary).
TORCH_KINK_RULES: Final = {
    1: "differentiable there: the gradient",
    2: "locally convex: the sub-gradient of minimum norm",
    3: "locally concave: the super-gradient of minimum norm",
    4: "neither: a value by continuity (one of the one-sided derivatives), picked arbitrarily",
}


@dataclass(frozen=True)
class Edge:
    """One documented edge case: an op, parameters, inputs and what the docs say comes out.

    ``grads[i][j]`` lists the allowed values of entry j of the gradient of input i (more than
    one only under torch's rule 4); ``grads is None`` means no gradient is documented there.
    Tolerances are absolute, per entry (0: exact; derivation in docs/tolerances.md).
    """

    op: str
    mode: str
    params: tuple[tuple[str, Any], ...]
    label: str
    dtype: str
    xs: tuple[tuple[float, ...], ...]
    value: tuple[float, ...]
    value_tol: tuple[float, ...]
    w: tuple[float, ...]
    grads: tuple[tuple[tuple[float, ...], ...], ...] | None
    grad_tol: tuple[tuple[float, ...], ...]
    frameworks: tuple[str, ...]
    grad_frameworks: tuple[str, ...]
    source: str
    rule: str = ""

    @property
    def params_label(self) -> str:
        return ",".join(f"{k}={v!r}" for k, v in self.params) or "default"

    def program(self) -> Program:
        shapes = tuple((len(x),) for x in self.xs)
        args = tuple(range(len(shapes))) if len(shapes) > 1 else ()
        return Program(shapes, (Op(self.op, self.params, args),))

    def inputs(self) -> list[Array]:
        return [np.asarray(x, dtype=np.float64) for x in self.xs]

    def __repr__(self) -> str:
        return f"Edge({self.op!r} {self.mode} [{self.params_label}, {self.label}, {self.dtype}] x={self.xs})"


class EdgeMismatch(AssertionError):
    """A framework's value or gradient at a documented edge case is not the documented one.

    Carries every wrong entry: ``failed_entries`` (one message each, which a known divergence
    matches one by one) and ``errors`` (each entry's |error| / allowed error; inf where the
    documented value is not finite, NaN where the framework's is NaN)."""

    def __init__(self, *entries: str, errors: Sequence[float] = ()) -> None:
        super().__init__("\n".join(entries))
        self.failed_entries = tuple(entries)
        self.errors = tuple(float(e) for e in errors)

    @classmethod
    def joined(cls, wrong: Sequence[EdgeMismatch]) -> EdgeMismatch:
        """One mismatch carrying every entry of several (the cases of one test)."""
        return cls(*(m for w in wrong for m in w.failed_entries), errors=[e for w in wrong for e in w.errors])

    @property
    def worst(self) -> float:
        """The largest error of the wrong entries (NaN if one is NaN)."""
        return max(self.errors, key=lambda e: math.inf if math.isnan(e) else e, default=math.inf)


def _fmt(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


def _matches(got: float, allowed: Sequence[float], tol: float) -> bool:
    for want in allowed:
        if math.isnan(want):
            if math.isnan(got):
                return True
        elif math.isinf(want):
            if got == want:
                return True
        elif abs(got - want) <= tol:
            return True
    return False


def _error(got: float, allowed: Sequence[float], tol: float) -> float:
    """|got - nearest allowed| / tol: NaN for a NaN result, inf where none is finite or tol is 0."""
    if math.isnan(got):
        return math.nan
    finite = [a for a in allowed if math.isfinite(a)]
    if not finite:
        return 0.0 if got in allowed else math.inf
    err = min(abs(got - a) for a in finite)
    return err / tol if tol > 0 else (0.0 if err == 0 else math.inf)


def judge(edge: Edge, value: Array, grads: Sequence[Array] | None) -> float:
    """Raise EdgeMismatch naming every entry that differs from the documented value (or
    gradient); return the largest |error| / tolerance seen (0 where exact and equal)."""
    worst = 0.0
    wrong: list[str] = []
    errors: list[float] = []
    head = f"{edge.op} {edge.mode} [{edge.params_label}, {edge.dtype}]"
    got = np.asarray(value, dtype=np.float64).reshape(-1)
    x0 = edge.xs[0]
    for j, (g, want, tol) in enumerate(zip(got, edge.value, edge.value_tol)):
        if not _matches(float(g), (want,), tol):
            at = x0[j] if len(edge.xs) == 1 else [x[j] for x in edge.xs]
            wrong.append(f"{head}: value at x={at!r} is {float(g)!r}, documented {float(want)!r} "
                         f"(allowed error {tol:.3g}); {edge.source}")
            errors.append(_error(float(g), (want,), tol))
        elif tol > 0 and math.isfinite(want):
            worst = max(worst, abs(float(g) - want) / tol)
    if edge.grads is not None and grads is not None:
        for i, (gi, allowed_i, tol_i) in enumerate(zip(grads, edge.grads, edge.grad_tol)):
            flat = np.asarray(gi, dtype=np.float64).reshape(-1)
            for j, (g, allowed, tol) in enumerate(zip(flat, allowed_i, tol_i)):
                if not _matches(float(g), allowed, tol):
                    rule = f" ({edge.rule})" if edge.rule else ""
                    wrong.append(
                        f"{head}: gradient of input {i} at x={edge.xs[i][j]!r} (cotangent {_fmt(edge.w)}) is "
                        f"{float(g)!r}, documented {' or '.join(repr(float(a)) for a in allowed)}{rule} "
                        f"(allowed error {tol:.3g}); {edge.source}")
                    errors.append(_error(float(g), allowed, tol))
                    continue
                finite = [a for a in allowed if math.isfinite(a)]
                if tol > 0 and finite:
                    worst = max(worst, min(abs(float(g) - a) for a in finite) / tol)
    if wrong:
        raise EdgeMismatch(*wrong, errors=errors)
    return worst


# --------------------------------------------------------------------------- the error model



def _floor(dtype: str) -> float:
    return ULPS * SMALLEST_NORMAL[dtype]  # results below the smallest normal may be flushed to zero


def _sensitivity(f: Callable[[Array], Array], x: Array, e: Array) -> Array:
    """max over the sign patterns of ``|f(x + s * e) - f(x)|`` (s in {-1, 1}^n, one pattern for
    all entries of an elementwise f): to first order ``sum_k |df/dx_k| e_k`` exactly."""
    with np.errstate(all="ignore"):
        f0 = f(x)
        worst = np.zeros_like(f0)
        n = x.shape[-1] if x.ndim else 1
        for bits in range(2 ** n):
            signs = np.array([1.0 if bits >> k & 1 else -1.0 for k in range(n)])
            worst = np.maximum(worst, np.abs(f(x + signs * e) - f0))
    return np.asarray(worst)


def _rounded(x: Sequence[float], dtype: str) -> Array:
    return np.asarray(x, dtype=np.float64).astype(dtype).astype(np.float64)


def _elementwise_tolerances(op: str, p: Params, x: Array, dtype: str) -> tuple[Array, Array, Array, Array]:
    """(value, gradient, value tolerance, gradient tolerance) of an elementwise op at x.

    A conforming implementation in ``dtype`` is backward stable with the model of
    programs.errors: its result is ``f`` at an input within ``e = ULPS u (|x| + abs_scale)``
    (abs_scale: the op's documented cancellation, e.g. exp(x) - 1), rounded to a few ulps, and
    results below the smallest normal may be flushed. The same holds for ``f'``, plus a few ulps
    of the tangent rule's own terms (deriv_scale). Entry by entry (one entry per point)."""
    rec, u = RECORDS[op], UNIT_ROUNDOFF[dtype]
    spec, derivative = OPS[op], DERIVATIVES[op]
    f = lambda t: spec.ref([t], p, [])
    d = lambda t: derivative(t, p)
    with np.errstate(all="ignore"):
        y, g = f(x), d(x)
        extra = spec.abs_scale(x, p) if spec.abs_scale else 0.0
        terms = spec.deriv_scale(x, p) if spec.deriv_scale else rec.tangent_terms(x) if rec.tangent_terms else 0.0
    e = (ULPS * u * (np.abs(x) + extra))[:, None]  # a column: each point its own sign pattern
    ytol = _sensitivity(f, x[:, None], e)[:, 0] + ULPS * u * np.abs(y) + _floor(dtype)
    gtol = _sensitivity(d, x[:, None], e)[:, 0] + ULPS * u * (np.abs(g) + terms) + _floor(dtype)
    # f' computed from the rounded output (tanh: 1 - y**2; asinh: 1 / cosh(y)): y carries
    # ULPS u |y|, which moves f' by that times |df'/dy| = |f''| / |f'| (programs.errors).
    with np.errstate(all="ignore"):
        h = 2.0**-20 * np.abs(x)
        d2 = np.abs(d(x + h) - d(x - h)) / (2 * h)
        gtol = gtol + np.where(np.abs(g) > 0, ULPS * u * np.abs(y) * np.nan_to_num(d2 / np.abs(g)), 0.0)
    return y, g, ytol, gtol


# --------------------------------------------------------------------------- extreme magnitudes

#: (largest magnitude where the documented formula's intermediates stay finite (pow_c:
#: largest_magnitude), the magnitude
#: past which a naive exp(x) overflows, the tiny magnitude just above the smallest normal).
MAGNITUDES: Final = {
    "float64": {"linear": 1e300, "square": 1e150, "cube": 1e100, "exp": 1e3, "tiny": 1e-300},
    "float32": {"linear": 1e30, "square": 1e18, "cube": 1e12, "exp": 1e2, "tiny": 2e-38},
}


def _views(test: Callable[[OpRecord], object]) -> tuple[str, ...]:
    return tuple(name for name, r in RECORDS.items() if test(r))


#: sin and cos: neither framework documents their accuracy at large arguments (range
#: reduction); only the tiny magnitudes are checked.
TINY_ONLY: Final = frozenset(_views(lambda r: r.tiny_only))
#: The log-sum-exp family: documented as numerically stable, checked on vectors.
LSE_OPS: Final = _views(lambda r: r.stable)
VECTOR_LENGTH: Final = 36  # two packets of 16 float32 and a remainder
#: Each elementwise op's float64 analytic derivative (its record's).
DERIVATIVES: Final[dict[str, DerivativeFn]] = {n: r.derivative for n, r in RECORDS.items() if r.derivative}
#: Elementwise ops with a float64 analytic derivative: every elementwise op of the library.
ELEMENTWISE: Final = tuple(DERIVATIVES)


def magnitude_class(op: str, p: Params) -> str:
    """The op's extreme-magnitude class (its record's): "linear", "square", "cube" or "pow"."""
    return RECORDS[op].magnitude_class(p)


def largest_magnitude(op: str, p: Params, dtype: str) -> float:
    """The largest |x| checked: where the formula's intermediates and its derivative's stay
    normal. pow_c's are x**2, |x|**(2p) and |x|**(2(p - 1)) (the derivative 2p x (x**2 + c)**(p - 1)):
    the smallest |x| at which one of them leaves the normal range, halved, to a power of 10."""
    if magnitude_class(op, p) != "pow":
        return float(MAGNITUDES[dtype][magnitude_class(op, p)])
    big, small = math.log10(float(np.finfo(dtype).max)), math.log10(SMALLEST_NORMAL[dtype])
    logs = [(big if k > 0 else small) / k for k in (2.0, 2 * p["p"], 2 * (p["p"] - 1)) if k != 0]
    return float(10 ** math.floor(min(logs) - math.log10(2)))


def _extreme_source(op: str) -> str:
    stable = RECORDS[op].extreme_source
    base = (f"the documented formula of {op} (torch.* / torch.nn.functional.* and tf.* reference pages), finite at "
            "these magnitudes with finite intermediates; gradients: the derivative of that function")
    return f"{stable}; {base}" if stable else base


def elementwise_extreme(op: str, params: Params, dtype: str, drawn: Sequence[float] = ()) -> Edge:
    """The extreme-magnitude case of an elementwise op: +-big, +-(exp overflow), +-tiny, all
    representable in ``dtype``; or, given ``drawn`` (hypothesis draws them), those magnitudes."""
    m = MAGNITUDES[dtype]
    mags = [m["tiny"]] if op in TINY_ONLY else [largest_magnitude(op, params, dtype), m["exp"], m["tiny"]]
    points = [s * v for v in (drawn or mags) for s in (1.0, -1.0)]
    # Tiled to VECTOR_LENGTH entries: the frameworks' vectorised kernels (AVX-512 packets of 16
    # float32) and their scalar remainders both see every point (TensorFlow's float32
    # reciprocal is wrong only in the vectorised path).
    x = _rounded((points * (VECTOR_LENGTH // len(points) + 1))[:VECTOR_LENGTH], dtype)
    y, g, ytol, gtol = _elementwise_tolerances(op, params, x, dtype)
    label = "drawn" if drawn else "tiny" if op in TINY_ONLY else f"{magnitude_class(op, params)}+exp+tiny"
    return Edge(op, "extreme", tuple(params.items()), label, dtype, (_t(x),), _t(y), _t(ytol), _t(np.ones_like(x)),
                (tuple((v,) for v in _t(g)),), (_t(gtol),), BOTH, BOTH,
                _extreme_source(op))


def _t(a: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in np.asarray(a, dtype=np.float64).reshape(-1))


def _lse_points(dtype: str) -> dict[str, list[float]]:
    m = MAGNITUDES[dtype]
    big, t = m["linear"], m["tiny"]
    x = 1e4 if dtype == "float64" else 1e2  # exp(x) overflows (float64: 709.8, float32: 88.7)
    return {"apart": [big, -big, 0.0], "shifted-up": [x, x - 1, x - 2], "shifted-down": [-x, -x - 1, -x - 2],
            "tiny": [t, -t, 0.0]}


def lse_extreme(op: str, dtype: str, label: str) -> Edge:
    """A log-sum-exp-family case: 3-vectors whose naive exponentials overflow or underflow,
    or entries 1e300 apart; tolerances from the first-order sensitivity to a componentwise
    relative perturbation of ULPS u (all 8 sign patterns), plus a few ulps of the result."""
    u = UNIT_ROUNDOFF[dtype]
    x = _rounded(_lse_points(dtype)[label], dtype)
    rec = RECORDS[op]
    if rec.stable_ref is None:  # a binary op: pairs
        return _logaddexp_extreme(dtype, label, x)
    params, f, vjp = rec.stable_ref.params, rec.stable_ref.value, rec.stable_ref.vjp
    with np.errstate(all="ignore"):
        y = np.atleast_1d(f(x))
        w = np.arange(1.0, y.size + 1)
        g = vjp(x, w)
        e = ULPS * u * np.abs(x)
        ytol = np.atleast_1d(_sensitivity(f, x, e)) + ULPS * u * np.abs(y) + _floor(dtype)
        gtol = _sensitivity(lambda t: vjp(t, w), x, e) + ULPS * u * np.sum(np.abs(w)) * (1 + np.abs(g)) + _floor(dtype)
        gtol = gtol + _weights_term(x, dtype) * np.sum(np.abs(w))
    return Edge(op, "extreme", tuple(params.items()), label, dtype, (_t(x),), _t(y), _t(ytol), _t(w),
                (tuple((v,) for v in _t(g)),), (_t(gtol),), BOTH, BOTH, rec.stable_source)


def _weights_term(x: Array, dtype: str) -> float:
    """The softmax-weight term of the gradient model (docs/tolerances.md, 'Low-precision
    gradients'): the backward evaluates weights exp(x - m) from a rounded m (the output, or a
    log-space sum), whose exponent errs by u (|x| + |m|): relative 2 ULPS u max|x| per weight
    (each weight at most 1). Vacuous for entries 1e300 apart: only the values judge those."""
    return float(min(1.0, 2 * ULPS * UNIT_ROUNDOFF[dtype] * float(np.max(np.abs(x)))))


def _pair_weight(sign: float) -> Callable[[Array], Array]:
    """d logaddexp(a, b) / da (sign 1) or / db (sign -1) of pairs on the last axis."""
    return lambda t: _sig(sign * (t[..., 0] - t[..., 1]))


def _logaddexp_extreme(dtype: str, label: str, x: Array) -> Edge:
    u = UNIT_ROUNDOFF[dtype]
    a, b = x[:2], x[1:]  # pairs (x0, x1), (x1, x2)
    f = lambda ab: np.logaddexp(ab[..., 0], ab[..., 1])
    with np.errstate(all="ignore"):
        ab = np.stack([a, b], -1)
        y = f(ab)
        ga, gb = _sig(a - b), _sig(b - a)
        e = ULPS * u * np.abs(ab)
        ytol = _sensitivity(f, ab, e) + ULPS * u * np.abs(y) + _floor(dtype)
        gtol = [_sensitivity(_pair_weight(s), ab, e) + 2 * ULPS * u + _floor(dtype) + _weights_term(ab, dtype)
                for s in (1.0, -1.0)]
    return Edge("logaddexp", "extreme", (), label, dtype, (_t(a), _t(b)), _t(y), _t(ytol), _t(np.ones(2)),
                (tuple((v,) for v in _t(ga)), tuple((v,) for v in _t(gb))), (_t(gtol[0]), _t(gtol[1])), BOTH, BOTH,
                RECORDS["logaddexp"].stable_source)


# --------------------------------------------------------------------------- kinks


def _kink_rule(op: str, p: Params, k: float) -> int:
    """torch's rule (TORCH_KINK_RULES) that applies at kink k, from the shape of the function
    there (the op record's ``kink_rule``): one-sided derivatives equal (1), derivative
    jumping up with convex pieces (2), jumping down with concave pieces (3), otherwise (4)."""
    rule = RECORDS[op].kink_rule
    assert rule is not None, f"{op} has no kink rule"
    return rule(p, k)


def _one_sided(op: str, p: Params, k: float) -> tuple[float, float]:
    """(left, right) derivative at kink k, in closed form from the documented formula."""
    sides = RECORDS[op].one_sided
    assert sides is not None, f"{op} has no one-sided derivatives"
    return sides(p, k)


def _torch_kink_grads(op: str, p: Params, k: float) -> tuple[float, ...]:
    rule = _kink_rule(op, p, k)
    left, right = _one_sided(op, p, k)
    if rule == 1:
        return (right,)
    if rule in (2, 3):  # the element of [min, max] of least magnitude
        lo, hi = min(left, right), max(left, right)
        return (0.0,) if lo <= 0 <= hi else ((lo,) if abs(lo) < abs(hi) else (hi,))
    return (left, right)


def kink_edge(op: str, params: Params, dtype: str) -> Edge:
    """Every kink of a piecewise op at once: the documented value (exact where the formula is
    piecewise linear at a dyadic kink, else a few ulps), torch's documented gradient."""
    spec, u = OPS[op], UNIT_ROUNDOFF[dtype]
    assert spec.kinks is not None
    ks = spec.kinks(params)
    x = _rounded(ks, dtype)
    with np.errstate(all="ignore"):
        y = np.asarray(spec.ref([x], params, []), dtype=np.float64)
    # exact where the formula is piecewise linear at the kink (softplus's value at its
    # threshold is log1p(exp(t)) / beta, rounded)
    exact = RECORDS[op].kink_exact
    ytol = np.zeros_like(y) if exact else ULPS * u * np.abs(y) + _floor(dtype)
    allowed = [_torch_kink_grads(op, params, k) for k in ks]
    gtol = [ULPS * u * max(1.0, max(abs(a) for a in al)) for al in allowed]
    rules = sorted({_kink_rule(op, params, k) for k in ks})
    rule = "; ".join(f"rule {r}: {TORCH_KINK_RULES[r]}" for r in rules)
    source = f"{TORCH_AUTOGRAD} ({rule}); values: the documented formula of {op} at its kinks"
    return Edge(op, "kink", tuple(params.items()), "at " + ",".join(f"{k:g}" for k in ks), dtype, (_t(x),), _t(y),
                _t(ytol), _t(np.ones_like(x)), (tuple(allowed),), (tuple(gtol),), BOTH, ("torch",), source, rule)


#: The piecewise ops whose kinks are checked: those whose record gives torch's rule there.
KINK_OPS: Final = _views(lambda r: r.kink_rule is not None and r.one_sided is not None)


# --------------------------------------------------------------------------- non-finite inputs

_INF = math.inf


def _nonfinite_table(p: Params) -> dict[str, list[tuple[float, float, tuple[str, ...], str]]]:
    """op -> [(input, documented output, frameworks, source)] at +-inf for parameters p."""
    return {name: r.nonfinite(p) for name, r in RECORDS.items() if r.nonfinite is not None}


NONFINITE_OPS: Final = (*_views(lambda r: r.nonfinite is not None), *_views(lambda r: bool(r.nonfinite_vectors)))


def _torch_limit_grads(op: str, p: Params, x: Array, y: Array, w: Array) -> tuple[tuple[float, ...], ...] | None:
    """torch rule 4 at +-inf: the gradient by continuity, only where every output is finite
    (the limit of the derivative exists there); None where an output is infinite or NaN."""
    if not np.all(np.isfinite(y)):
        return None
    with np.errstate(all="ignore"):
        if op in DERIVATIVES:
            return (_t(w * DERIVATIVES[op](np.clip(x, -1e300, 1e300), p)),)
        ref = RECORDS[op].stable_ref
        if ref is not None:
            return (_t(ref.vjp(np.clip(x, -1e300, 1e300), w)),)
    return None


def nonfinite_edges(op: str, params: Params, dtype: str) -> list[Edge]:
    """The op's documented outputs at +-inf (one Edge per framework set)."""
    u = UNIT_ROUNDOFF[dtype]
    cases: list[tuple[str, tuple[tuple[float, ...], ...], tuple[float, ...], tuple[str, ...], str]] = []
    rec = RECORDS[op]
    if rec.nonfinite_vectors:
        cases = [(label, xs, y, BOTH, rec.stable_source + "; " + _FORMULA) for label, xs, y in rec.nonfinite_vectors]
    else:
        assert rec.nonfinite is not None, f"{op} has no documented values at +-inf"
        rows = rec.nonfinite(params)
        for fws in {r[2] for r in rows}:
            sel = [r for r in rows if r[2] == fws]
            cases.append(("+".join("inf" if r[0] > 0 else "-inf" for r in sel), (tuple(r[0] for r in sel),),
                          tuple(r[1] for r in sel), fws, "; ".join(sorted({r[3] for r in sel}))))
    if rec.stable_ref is not None:
        params = rec.stable_ref.params
    out = []
    for label, xs, y, fws, source in sorted(cases, key=lambda c: c[0]):
        w = np.arange(1.0, len(y) + 1)
        yarr = np.asarray(y)
        grads = _torch_limit_grads(op, params, np.asarray(xs[0]), yarr, w) if len(xs) == 1 else None
        ytol = np.where(np.isfinite(yarr), ULPS * u * np.abs(yarr) + _floor(dtype), 0.0)
        g = None if grads is None else tuple(tuple((v,) for v in gi) for gi in grads)
        gtol = tuple(tuple(ULPS * u * (np.sum(w) + abs(v)) + _floor(dtype) for v in gi) for gi in grads or ())
        gfw = ("torch",) if g is not None and "torch" in fws else ()
        rule = "rule 4: the gradient by continuity (the limit of the derivative)" if gfw else ""
        out.append(Edge(op, "nonfinite", tuple(params.items()), label, dtype, xs, tuple(y), _t(ytol), _t(w[: len(y)]),
                        g, gtol, fws, gfw, source + (f"; gradient: {TORCH_AUTOGRAD}" if gfw else ""), rule))
    return out


# --------------------------------------------------------------------------- the table


def classes(op: str) -> list[dict[str, Any]]:
    """The parameter values of an elementwise op's edge cases: its record's parameter classes
    (each documented parameter at its default and non-default values); ``[{}]`` for the others."""
    rec = RECORDS[op]
    if rec.derivative is None and rec.kink_rule is None:
        return [{}]
    return [dict(c.fixed) for c in rec.params] or [{}]


_classes = classes


@cache
def edges(mode: str, op: str) -> tuple[Edge, ...]:
    """Every documented case of ``op`` in ``mode``: each parameter class, each dtype (the
    extreme mode's hypothesis-drawn magnitudes are added by the suite)."""
    out: list[Edge] = []
    for dtype in DTYPES:
        if mode == "kink":
            out += [kink_edge(op, p, dtype) for p in _classes(op)]
        elif mode == "extreme" and op in LSE_OPS:
            out += [lse_extreme(op, dtype, label) for label in _lse_points(dtype)]
        elif mode == "extreme":
            out += [elementwise_extreme(op, p, dtype) for p in _classes(op)]
        elif mode == "nonfinite":
            for p in (_classes(op) if op in OPS and op not in LSE_OPS else [{}]):
                out += nonfinite_edges(op, p, dtype)
    return tuple(out)


def ops_for(framework: str, mode: str) -> list[str]:
    """The ops with at least one documented case in ``mode`` for ``framework``."""
    names = {"kink": KINK_OPS, "extreme": (*ELEMENTWISE, *LSE_OPS), "nonfinite": NONFINITE_OPS}[mode]
    return [op for op in names if any(framework in e.frameworks for e in edges(mode, op))]


def coverage_key(framework: str, edge: Edge) -> dict[str, str]:
    return {"framework": framework, "mode": edge.mode, "op": edge.op, "params": edge.params_label,
            "regime": edge.label, "dtype": edge.dtype, "layout": "contiguous"}


def registered() -> list[dict[str, str]]:
    """Every (framework, mode, op, parameter class, case, dtype) the edge suite visits."""
    return [coverage_key(fw, e) for fw in ("tensorflow", "torch") for mode in MODES for op in ops_for(fw, mode)
            for e in edges(mode, op) if fw in e.frameworks]
