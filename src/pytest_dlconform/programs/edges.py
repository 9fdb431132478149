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

from ..checks.numerics import SMALLEST_NORMAL, UNIT_ROUNDOFF
from .core import Array, Op, Params
from .derivatives import DERIVATIVES, SELU_ALPHA, SELU_SCALE, TANGENT_TERMS, _sig
from .errors import ULPS
from .ops import OPS
from .program import Program

MODES: Final = ("kink", "extreme", "nonfinite")
DTYPES: Final = ("float64", "float32")
BOTH: Final = ("tensorflow", "torch")
TORCH_AUTOGRAD: Final = ("https://pytorch.org/docs/stable/notes/autograd.html"
                         "#gradients-for-non-differentiable-functions")
#: torch's documented rules, in the words of the autograd notes (rule number -> summary).
TORCH_KINK_RULES: Final = {
    1: "differentiable there: the gradient",
    2: "locally convex: the sub-gradient of minimum norm",
    3: "locally concave: the super-gradient of minimum norm",
    4: "neither: a value by continuity (one of the one-sided derivatives), picked arbitrarily",
}
TF_API: Final = "https://www.tensorflow.org/api_docs/python/"
TORCH_API: Final = "https://pytorch.org/docs/stable/generated/"


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
    spec, u = OPS[op], UNIT_ROUNDOFF[dtype]
    f = lambda t: spec.ref([t], p, [])
    d = lambda t: DERIVATIVES[op](t, p)
    with np.errstate(all="ignore"):
        y, g = f(x), d(x)
        extra = spec.abs_scale(x, p) if spec.abs_scale else 0.0
        terms = spec.deriv_scale(x, p) if spec.deriv_scale else TANGENT_TERMS.get(op, lambda t: 0.0)(x)
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
#: The magnitude class of ops whose formula squares or cubes x (the others are "linear": their
#: formula's intermediates are at most a few times |x|, or exponentials that saturate).
_SQUARE: Final = frozenset({"square", "sqrt_c", "log_c", "log1p_sq", "asinh"})
#: x**3 in the formula, or |x|**-3 in its derivative's (rsqrt_c: -x (x**2 + c)**-1.5).
_CUBE: Final = frozenset({"cube", "pow_c", "rsqrt_c"})
#: sin and cos: neither framework documents their accuracy at large arguments (range
#: reduction); only the tiny magnitudes are checked.
TINY_ONLY: Final = frozenset({"sin", "cos"})
#: The log-sum-exp family: documented as numerically stable, checked on vectors.
LSE_OPS: Final = ("logsumexp", "softmax", "log_softmax", "logcumsumexp", "logaddexp")
VECTOR_LENGTH: Final = 36  # two packets of 16 float32 and a remainder
#: Elementwise ops with a float64 analytic derivative here: every elementwise op of the table.
ELEMENTWISE: Final = tuple(DERIVATIVES)


def magnitude_class(op: str, p: Params) -> str:
    if op == "pow_c":
        return "pow"  # (x**2 + c)**p: its limit depends on p (largest_magnitude)
    if op in _SQUARE:
        return "square"
    if op in _CUBE or (op == "gelu" and p.get("approximate") == "tanh"):
        return "cube"  # tanh-gelu's formula has 0.044715 x**3
    return "linear"


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
    stable = {
        "softplus": f"{TORCH_API}torch.nn.Softplus.html: 'For numerical stability the implementation reverts to "
                    "the linear function when input x beta > threshold'",
        "logsigmoid": f"{TF_API}tf/math/log_sigmoid: 'For numerical stability, we use y = -tf.nn.softplus(-x)'",
        "sigmoid": f"{TF_API}tf/math/sigmoid: 'For x in (-inf, inf), sigmoid(x) in (0, 1)' and its example "
                   "tf.sigmoid([-128., 0., 128.]) = [0., 0.5, 1.]",
        "elu": f"{TF_API}tf/nn/elu: example tf.nn.elu(-1000.0) = -1.0",
    }.get(op, "")
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


def _lse(x: Array) -> Array:
    m = np.max(x, axis=-1, keepdims=True)
    return np.squeeze(m, -1) + np.log(np.sum(np.exp(x - m), axis=-1))


def _softmax(x: Array) -> Array:
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _lcse_vjp(x: Array, w: Array) -> Array:
    y = np.logaddexp.accumulate(x, axis=-1)  # g_i = sum_{j >= i} w_j exp(x_i - y_j)
    return np.sum(np.triu(np.ones((x.shape[-1],) * 2)) * w[..., None, :] * np.exp(x[..., :, None] - y[..., None, :]), -1)


#: op -> (params, value(x), vjp(x, w) -> gradient, cotangent length): float64 references on
#: the last axis (x may carry leading sign-pattern axes).
_LSE_REFS: Final[dict[str, tuple[dict[str, Any], Callable[[Array], Array], Callable[[Array, Array], Array]]]] = {
    "logsumexp": ({"dims": (-1,), "keepdims": False}, _lse, lambda x, w: w[..., :1] * _softmax(x)),
    "softmax": ({"axis": -1}, _softmax,
                lambda x, w: _softmax(x) * (w - np.sum(_softmax(x) * w, -1, keepdims=True))),
    "log_softmax": ({"axis": -1}, lambda x: x - _lse(x)[..., None],
                    lambda x, w: w - _softmax(x) * np.sum(w, -1, keepdims=True)),
    "logcumsumexp": ({"axis": -1, "reverse": False}, lambda x: np.logaddexp.accumulate(x, axis=-1), _lcse_vjp),
}
_LSE_SOURCES: Final = {
    "logsumexp": f"{TORCH_API}torch.logsumexp.html: 'The computation is numerically stabilized'; "
                 f"{TF_API}tf/math/reduce_logsumexp: 'It avoids overflows caused by taking the exp of large inputs "
                 "and underflows caused by taking the log of small inputs'",
    "softmax": f"{TORCH_API}torch.nn.functional.softmax.html: 're-scale them so that the elements lie in the range "
               f"[0, 1] and sum to 1'; {TF_API}tf/nn/softmax: 'The sum of all outputs generated by softmax is 1'",
    "log_softmax": f"{TORCH_API}torch.nn.functional.log_softmax.html: 'doing these two operations separately is "
                   "slower and numerically unstable. This function uses an alternative formulation to compute the "
                   f"output and gradient correctly'; {TF_API}tf/nn/log_softmax: logits - log(reduce_sum(exp(logits)))",
    "logcumsumexp": f"{TF_API}tf/math/cumulative_logsumexp: 'significantly more numerically stable than the "
                    f"equivalent tf.math.log(tf.math.cumsum(tf.math.exp(x)))'; {TORCH_API}torch.logcumsumexp.html",
    "logaddexp": f"{TORCH_API}torch.logaddexp.html: 'useful in statistics where the calculated probabilities of "
                 "events may be so small as to exceed the range of normal floating point numbers'; TensorFlow: "
                 "tf.math.reduce_logsumexp of the pair (its stability sentence)",
}


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
    if op == "logaddexp":
        return _logaddexp_extreme(dtype, label, x)
    params, f, vjp = _LSE_REFS[op]
    with np.errstate(all="ignore"):
        y = np.atleast_1d(f(x))
        w = np.arange(1.0, y.size + 1)
        g = vjp(x, w)
        e = ULPS * u * np.abs(x)
        ytol = np.atleast_1d(_sensitivity(f, x, e)) + ULPS * u * np.abs(y) + _floor(dtype)
        gtol = _sensitivity(lambda t: vjp(t, w), x, e) + ULPS * u * np.sum(np.abs(w)) * (1 + np.abs(g)) + _floor(dtype)
        gtol = gtol + _weights_term(x, dtype) * np.sum(np.abs(w))
    return Edge(op, "extreme", tuple(params.items()), label, dtype, (_t(x),), _t(y), _t(ytol), _t(w),
                (tuple((v,) for v in _t(g)),), (_t(gtol),), BOTH, BOTH, _LSE_SOURCES[op])


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
                _LSE_SOURCES["logaddexp"])


# --------------------------------------------------------------------------- kinks


def _kink_rule(op: str, p: Params, k: float) -> int:
    """torch's rule (TORCH_KINK_RULES) that applies at kink k, from the shape of the function
    there: one-sided derivatives equal (1), derivative jumping up with convex pieces (2),
    jumping down with concave pieces (3), otherwise (4)."""
    if op in ("celu", "softsign") or (op == "elu" and p["alpha"] == 1.0):
        return 1  # C1 at 0: both one-sided derivatives are 1
    if op in ("relu", "abs", "leaky_relu") or (op == "elu" and p["alpha"] < 1):
        return 2  # elu with alpha < 1: slopes alpha < 1, convex left piece
    if op in ("hardtanh", "relu6", "hardsigmoid"):  # flat outside, linear inside
        lower = {"hardtanh": p.get("min_val"), "relu6": 0.0, "hardsigmoid": -3.0}[op]
        return 2 if k == lower else 3
    return 4  # elu alpha > 1, selu (slope drops, convex left piece), hardswish, softplus's jump


def _one_sided(op: str, p: Params, k: float) -> tuple[float, float]:
    """(left, right) derivative at kink k, in closed form from the documented formula."""
    low = {"hardtanh": p.get("min_val"), "relu6": 0.0, "hardsigmoid": -3.0, "hardswish": -3.0}.get(op)
    at_low = k == low
    table: dict[str, tuple[float, float]] = {
        "relu": (0.0, 1.0), "abs": (-1.0, 1.0), "leaky_relu": (p.get("negative_slope", 0.0), 1.0),
        "elu": (p.get("alpha", 1.0), 1.0), "selu": (SELU_SCALE * SELU_ALPHA, SELU_SCALE), "celu": (1.0, 1.0),
        "softsign": (1.0, 1.0), "hardtanh": (0.0, 1.0) if at_low else (1.0, 0.0),
        "relu6": (0.0, 1.0) if at_low else (1.0, 0.0), "hardsigmoid": (0.0, 1 / 6) if at_low else (1 / 6, 0.0),
        "hardswish": (0.0, -0.5) if at_low else (1.5, 1.0),
    }
    if op == "softplus":  # linear above beta x = threshold, softplus (derivative sigmoid(beta x)) up to it
        return float(_sig(np.array(p["beta"] * k))), 1.0
    return table[op]


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
    exact = op != "softplus"  # softplus's value at its threshold is log1p(exp(t)) / beta, rounded
    ytol = np.zeros_like(y) if exact else ULPS * u * np.abs(y) + _floor(dtype)
    allowed = [_torch_kink_grads(op, params, k) for k in ks]
    gtol = [ULPS * u * max(1.0, max(abs(a) for a in al)) for al in allowed]
    rules = sorted({_kink_rule(op, params, k) for k in ks})
    rule = "; ".join(f"rule {r}: {TORCH_KINK_RULES[r]}" for r in rules)
    source = f"{TORCH_AUTOGRAD} ({rule}); values: the documented formula of {op} at its kinks"
    return Edge(op, "kink", tuple(params.items()), "at " + ",".join(f"{k:g}" for k in ks), dtype, (_t(x),), _t(y),
                _t(ytol), _t(np.ones_like(x)), (tuple(allowed),), (tuple(gtol),), BOTH, ("torch",), source, rule)


#: The piecewise ops of the table (programs/ops/piecewise.py) whose kinks are checked.
KINK_OPS: Final = ("relu", "leaky_relu", "elu", "selu", "celu", "softplus", "softsign", "hardtanh", "relu6",
                   "hardsigmoid", "hardswish", "abs")


# --------------------------------------------------------------------------- non-finite inputs

_INF = math.inf
_FORMULA = "the documented formula evaluated in IEEE 754 arithmetic at +-inf (exp(-inf) = 0, 1/inf = 0, max/min)"
_TF_EXAMPLE = f"{TF_API}tf/math/{{op}}: the documented example tf.math.{{op}}([-inf, ..., inf])"


def _nonfinite_table(p: Params) -> dict[str, list[tuple[float, float, tuple[str, ...], str]]]:
    """op -> [(input, documented output, frameworks, source)] at +-inf for parameters p."""
    both, formula = BOTH, _FORMULA
    a = p.get("alpha", 1.0)
    return {
        "relu": [(_INF, _INF, both, formula + ": max(0, x)"), (-_INF, 0.0, both, formula + ": max(0, x)")],
        "leaky_relu": [(_INF, _INF, both, formula + ": x if x >= 0, slope * x otherwise"),
                       (-_INF, -_INF, both, formula + ": x if x >= 0, slope * x otherwise")],
        "elu": [(_INF, _INF, both, formula + ": x if x > 0"), (-_INF, -a, both, formula + ": alpha (exp(x) - 1)")],
        "selu": [(_INF, _INF, both, formula + ": scale x"),
                 (-_INF, -SELU_SCALE * SELU_ALPHA, both, formula + ": scale alpha (exp(x) - 1)")],
        "celu": [(_INF, _INF, both, formula + ": max(0, x) + min(0, alpha (exp(x / alpha) - 1))"),
                 (-_INF, -a, both, formula + ": max(0, x) + min(0, alpha (exp(x / alpha) - 1))")],
        "softplus": [(_INF, _INF, both, f"{TORCH_API}torch.nn.Softplus.html: reverts to the linear function "
                                        "when input x beta > threshold"),
                     (-_INF, 0.0, both, formula + ": log(1 + exp(beta x)) / beta")],
        "hardtanh": [(_INF, p.get("max_val", 1.0), both, f"{formula}: max_val if x > max_val; {TF_API}"
                      "tf/clip_by_value: 'Any values greater than clip_value_max are set to clip_value_max'"),
                     (-_INF, p.get("min_val", -1.0), both, f"{formula}: min_val if x < min_val; {TF_API}"
                      "tf/clip_by_value: 'Any values less than clip_value_min are set to clip_value_min'")],
        "relu6": [(_INF, 6.0, both, formula + ": min(max(0, x), 6)"), (-_INF, 0.0, both, formula + ": min(max(0, x), 6)")],
        "hardsigmoid": [(_INF, 1.0, both, formula + ": 1 if x >= 3"), (-_INF, 0.0, both, formula + ": 0 if x <= -3")],
        # TensorFlow's hardswish here is x * relu6(x + 3) / 6, which is -inf * 0 at -inf: undefined.
        "hardswish": [(_INF, _INF, both, formula + ": x if x >= 3"), (-_INF, 0.0, ("torch",), formula + ": 0 if x <= -3")],
        "abs": [(_INF, _INF, both, formula + ": |x|"), (-_INF, _INF, both, formula + ": |x|")],
        "sigmoid": [(_INF, 1.0, both, formula + ": 1 / (1 + exp(-x))"), (-_INF, 0.0, both, formula + ": 1 / (1 + exp(-x))")],
        "logsigmoid": [(_INF, 0.0, both, formula + ": log(1 / (1 + exp(-x))); TF: -softplus(-x)"),
                       (-_INF, -_INF, both, formula + ": log(1 / (1 + exp(-x))); TF: -softplus(-x)")],
        "tanh": [(s * _INF, s * 1.0, ("tensorflow",), _TF_EXAMPLE.format(op="tanh")) for s in (1, -1)],
        "asinh": [(s * _INF, s * _INF, ("tensorflow",), _TF_EXAMPLE.format(op="asinh")) for s in (1, -1)],
        "sin": [(s * _INF, math.nan, ("tensorflow",), _TF_EXAMPLE.format(op="sin")) for s in (1, -1)],
        "cos": [(s * _INF, math.nan, ("tensorflow",), _TF_EXAMPLE.format(op="cos")) for s in (1, -1)],
    }


NONFINITE_OPS: Final = (*tuple(_nonfinite_table({})), "logsumexp", "softmax", "log_softmax", "logaddexp")
_VECTOR_NONFINITE: Final[dict[str, list[tuple[str, tuple[float, ...], tuple[float, ...]]]]] = {
    # op -> [(label, x, documented value)], both frameworks
    "logsumexp": [("-inf,0", (-_INF, 0.0), (0.0,)), ("-inf,-inf", (-_INF, -_INF), (-_INF,)),
                  ("inf,0", (_INF, 0.0), (_INF,))],
    "softmax": [("-inf,0,0", (-_INF, 0.0, 0.0), (0.0, 0.5, 0.5))],
    "log_softmax": [("-inf,0,0", (-_INF, 0.0, 0.0), (-_INF, -math.log(2), -math.log(2)))],
}


def _torch_limit_grads(op: str, p: Params, x: Array, y: Array, w: Array) -> tuple[tuple[float, ...], ...] | None:
    """torch rule 4 at +-inf: the gradient by continuity, only where every output is finite
    (the limit of the derivative exists there); None where an output is infinite or NaN."""
    if not np.all(np.isfinite(y)):
        return None
    with np.errstate(all="ignore"):
        if op in DERIVATIVES:
            return (_t(w * DERIVATIVES[op](np.clip(x, -1e300, 1e300), p)),)
        if op == "logsumexp":
            return (_t(w[0] * _softmax(np.clip(x, -1e300, 1e300))),)
        if op == "softmax":
            s = _softmax(np.clip(x, -1e300, 1e300))
            return (_t(s * (w - np.sum(s * w))),)
    return None


def nonfinite_edges(op: str, params: Params, dtype: str) -> list[Edge]:
    """The op's documented outputs at +-inf (one Edge per framework set)."""
    u = UNIT_ROUNDOFF[dtype]
    cases: list[tuple[str, tuple[tuple[float, ...], ...], tuple[float, ...], tuple[str, ...], str]] = []
    if op in _VECTOR_NONFINITE:
        cases = [(label, (x,), y, BOTH, _LSE_SOURCES[op] + "; " + _FORMULA) for label, x, y in _VECTOR_NONFINITE[op]]
    elif op == "logaddexp":
        cases = [("-inf,0|-inf,-inf|inf,0", ((-_INF, -_INF, _INF), (0.0, -_INF, 0.0)), (0.0, -_INF, _INF), BOTH,
                  _LSE_SOURCES[op] + "; " + _FORMULA)]
    else:
        rows = _nonfinite_table(params)[op]
        for fws in {r[2] for r in rows}:
            sel = [r for r in rows if r[2] == fws]
            cases.append(("+".join("inf" if r[0] > 0 else "-inf" for r in sel), (tuple(r[0] for r in sel),),
                          tuple(r[1] for r in sel), fws, "; ".join(sorted({r[3] for r in sel}))))
    if op in _LSE_REFS:
        params = _LSE_REFS[op][0]
    out = []
    for label, xs, y, fws, source in sorted(cases, key=lambda c: c[0]):
        w = np.arange(1.0, len(y) + 1)
        yarr = np.asarray(y)
        grads = _torch_limit_grads(op, params, np.asarray(xs[0]), yarr, w) if len(xs) == 1 else None
        if op == "logaddexp":  # (-inf, 0) only: the outputs of the others are infinite
            grads = None
        ytol = np.where(np.isfinite(yarr), ULPS * u * np.abs(yarr) + _floor(dtype), 0.0)
        g = None if grads is None else tuple(tuple((v,) for v in gi) for gi in grads)
        gtol = tuple(tuple(ULPS * u * (np.sum(w) + abs(v)) + _floor(dtype) for v in gi) for gi in grads or ())
        gfw = ("torch",) if g is not None and "torch" in fws else ()
        rule = "rule 4: the gradient by continuity (the limit of the derivative)" if gfw else ""
        out.append(Edge(op, "nonfinite", tuple(params.items()), label, dtype, xs, tuple(y), _t(ytol), _t(w[: len(y)]),
                        g, gtol, fws, gfw, source + (f"; gradient: {TORCH_AUTOGRAD}" if gfw else ""), rule))
    return out


# --------------------------------------------------------------------------- the table


def _each(**options: Sequence[Any]) -> list[dict[str, Any]]:
    n = max(len(v) for v in options.values())
    return [{k: v[i % len(v)] for k, v in options.items()} for i in range(n)]


_C: Final = (1.0, 0.25, 0.0625, 4.0)
#: The parameter values the op table draws (programs/samples.py's classes of these ops): each
#: documented parameter at its default and non-default values, both sides of a branch point.
PARAMS: Final[dict[str, list[dict[str, Any]]]] = {
    "gelu": _each(approximate=("none", "tanh")),
    **{name: _each(c=_C) for name in ("sqrt_c", "log_c", "rsqrt_c")},
    "pow_c": _each(p=(0.5, -0.5, 1.5, -1.5, 0.25), c=_C),
    "exp_tanh": _each(k=(1.0, 0.5, 2.0, 4.0)),
    "leaky_relu": _each(negative_slope=(0.125, 0.25, 0.5, 0.0625)),
    "elu": _each(alpha=(1.0, 0.5, 1.5)),
    "celu": _each(alpha=(1.0, 0.5, 2.0)),
    "softplus": [{"beta": 1.0, "threshold": 20.0}, {"beta": 0.5, "threshold": 1.0}, {"beta": 2.0, "threshold": 5.0}],
    "hardtanh": [{"min_val": -1.0, "max_val": 1.0}, {"min_val": -2.0, "max_val": 0.5}, {"min_val": -0.5, "max_val": 2.0}],
}


def _classes(op: str) -> list[dict[str, Any]]:
    return PARAMS.get(op, [{}])


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
