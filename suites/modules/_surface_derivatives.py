"""The derivative table of the public-surface records (tf.math, tf.nn, torch.nn.functional).

One :class:`Spec` per record name of suites/modules/test_tf_math.py, test_tf_nn.py and
test_torch_functional.py: how the record's function is called as a function of float64 inputs
(``fn(module, xs)``, one output tensor: several outputs are flattened and concatenated, which is
linear and changes no derivative), the inputs (deterministic, per record) with the reason for
their choice (kinks, discontinuities and domain edges kept away), and its kind:

* ``smooth``: twice differentiable at the inputs (H v checked against finite differences);
* ``linear`` / ``piecewise-linear``: the second derivative is zero away from the kinks, so H v
  must be exactly 0 (:func:`assert_zero_hessian`);
* ``op-library``: the same function is an op of pytest_dlconform.programs, already checked to
  second order by suites/autodiff (skipped here, counted);
* ``not-differentiable``: integer/boolean valued, piecewise constant, or no floating input
  (listed with the reason);
* ``no-float64``: the function has no float64 kernel (the eager float64 claim cannot be checked).

This module imports no framework; the suite passes the module in.
"""
# ruff: noqa: B023 - every loop variable is bound by an enclosing (lambda n: ...)(n) factory or a default argument

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

KINDS = ("smooth", "linear", "piecewise-linear", "op-library", "not-differentiable", "no-float64")
DIFFERENTIABLE = ("smooth", "linear", "piecewise-linear")
ZERO_HESSIAN = ("linear", "piecewise-linear")
TF_MATH, TF_NN, TORCH_F = "tf.math", "tf.nn", "torch.nn.functional"


@dataclass(frozen=True)
class Spec:
    ns: str
    name: str
    kind: str
    why: str  # the input choice (differentiable) or the reason (the others)
    fn: Callable[[Any, list[Any]], Any] | None = None
    inputs: Callable[[], list[np.ndarray]] | None = field(default=None, compare=False)
    ops: int = 8  # longest chain of rounded operations (error model, see the suite docstring)
    terms: int = 1  # longest sum
    own_ops: tuple[str, ...] = ()  # the function's own (forward) TensorFlow ops, see is_refusal

    @property
    def differentiable(self) -> bool:
        return self.kind in DIFFERENTIABLE


def _rng(name: str, k: int) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(f"{name}/{k}".encode()))


def uni(name: str, k: int, shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
    return _rng(name, k).uniform(lo, hi, shape)


def away(name: str, k: int, shape: tuple[int, ...], lo: float = 0.3, hi: float = 1.5) -> np.ndarray:
    """|x| in [lo, hi] with a random sign: at least ``lo`` from a kink at 0."""
    r = _rng(name, k)
    return r.uniform(lo, hi, shape) * r.choice([-1.0, 1.0], shape)


def spaced(name: str, k: int, shape: tuple[int, ...], gap: float = 0.1) -> np.ndarray:
    """Distinct values ``gap`` apart (a random permutation): a max/min/sort never ties, and its
    winner does not change within the finite-difference steps."""
    n = int(np.prod(shape))
    return (_rng(name, k).permutation(n) - n / 2 + 0.5).reshape(shape) * gap


def validate(table: Sequence[Spec]) -> list[str]:
    """The table's own consistency: known kinds, a reason for every entry, a function and inputs
    for every differentiable one, and none for the others; unique names."""
    bad = []
    seen: set[str] = set()
    for s in table:
        if s.name in seen:
            bad.append(f"{s.ns}.{s.name}: listed twice")
        seen.add(s.name)
        if s.kind not in KINDS:
            bad.append(f"{s.ns}.{s.name}: unknown kind {s.kind!r}")
        if not s.why.strip():
            bad.append(f"{s.ns}.{s.name}: no reason/input choice stated")
        if s.differentiable and (s.fn is None or s.inputs is None):
            bad.append(f"{s.ns}.{s.name}: {s.kind} but no function or inputs")
        if not s.differentiable and s.fn is not None:
            bad.append(f"{s.ns}.{s.name}: {s.kind} but has a function to differentiate")
    return bad


def assert_zero_hessian(spec: Spec, max_abs_hvp: float, max_abs_fd: float, mode: str) -> None:
    """A linear or piecewise-linear function's H v is exactly zero away from its kinks; a nonzero
    one means the function is not what the table says (or its second derivative is wrong)."""
    if spec.kind in ZERO_HESSIAN:
        assert max_abs_hvp == 0.0, (
            f"{spec.ns}.{spec.name}: max |H v| = {max_abs_hvp:.3g} from {mode}, but the table classifies it "
            f"{spec.kind}, so its second derivative is zero away from its kinks (finite differences of the "
            f"gradient: max {max_abs_fd:.3g})")


#: The frameworks' documented refusals of a derivative they do not implement (as suites/autodiff/
#: test_second_order.py): torch's "derivative for ... is not implemented", TensorFlow's "No gradient
#: defined for operation". TensorFlow's "gradient registry has no entry for: XGrad" (a backward op
#: of a differentiable function has no gradient) is NOT a refusal: it is a violation.
REFUSALS = {
    "torch": re.compile(r"derivative for .* is not implemented|not implemented for .*(double backward|forward AD)|"
                        r"does not support (it|forward AD)|Trying to use forward AD", re.S),
    "tensorflow": re.compile(r"No gradient defined for operation", re.S),
}


def is_refusal(framework: str, exc: BaseException, own_ops: Sequence[str] = ()) -> bool:
    """The framework's documented refusal; for TensorFlow also "gradient registry has no entry for: Op"
    where Op is the function's OWN forward op (``own_ops``: TensorFlow implements no gradient for the
    function at all, its way of saying "not implemented"), never a backward op of a differentiable one."""
    if not isinstance(exc, (RuntimeError, NotImplementedError, LookupError)):
        return False
    if REFUSALS[framework].search(str(exc)):
        return True
    m = re.search(r"gradient registry has no entry for: (\w+)", str(exc))
    return framework == "tensorflow" and m is not None and m.group(1) in own_ops


def _nd(reason: str) -> tuple[str, str]:
    return ("not-differentiable", reason)


# =========================================================================== tf.math

BOOL = "boolean output (no derivative)"
INT_OUT = "integer-valued output: piecewise constant, derivative 0 where defined"
ROUND = "rounds to an integer value: piecewise constant (jumps at the integers/halves), derivative 0 a.e."


def _tfm() -> list[Spec]:
    S: list[Spec] = []

    def add(name: str, kind: str, why: str, fn: Any = None, inputs: Any = None, ops: int = 8, terms: int = 1,
            own: tuple[str, ...] = ()) -> None:
        S.append(Spec(TF_MATH, name, kind, why, fn, inputs, ops, terms, own))

    for n in ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_not",
              "logical_or", "logical_xor", "is_finite", "is_inf", "is_nan", "is_non_decreasing",
              "is_strictly_increasing", "in_top_k", "reduce_all", "reduce_any"):
        add(n, *_nd(BOOL))
    for n in ("ceil", "floor", "round", "rint"):
        add(n, *_nd(ROUND))
    add("floordiv", *_nd("floor(x / y): piecewise constant, derivative 0 a.e."))
    add("argmax", *_nd("integer indices"))
    add("argmin", *_nd("integer indices"))
    add("count_nonzero", *_nd(INT_OUT))
    add("zero_fraction", *_nd("fraction of zero entries: piecewise constant"))
    add("invert_permutation", *_nd("integer input and output"))
    add("sobol_sample", *_nd("no floating input (dimension, count, skip are integers)"))
    add("nextafter", *_nd("the neighbouring float of x1 toward x2: a step function on the float grid (no derivative "
                          "in the real sense)"))
    add("approx_max_k", "no-float64", "ApproxTopK has half/bfloat16/float32 kernels only (tf.raw_ops.ApproxTopK T)")
    add("approx_min_k", "no-float64", "ApproxTopK has half/bfloat16/float32 kernels only (tf.raw_ops.ApproxTopK T)")

    def u(n: str, k: int, shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
        return uni(n, k, shape, lo, hi)

    sh = (2, 3)
    add("accumulate_n", "linear", "3 standard-uniform (2, 3) tensors", lambda tf, x: tf.math.accumulate_n(x),
        lambda: [u("acc", k, sh, -1, 1) for k in range(3)], 2, 3)
    add("add_n", "linear", "3 standard-uniform (2, 3) tensors", lambda tf, x: tf.math.add_n(x),
        lambda: [u("addn", k, sh, -1, 1) for k in range(3)], 2, 3)
    add("scalar_mul", "smooth", "scalar in [0.5, 2] and x uniform in [-1, 1] (bilinear)",
        lambda tf, x: tf.math.scalar_mul(x[0], x[1]), lambda: [np.array(1.3), u("sm", 1, sh, -1, 1)], 2)
    add("squared_difference", "smooth", "x, y uniform in [-2, 2]", lambda tf, x: tf.math.squared_difference(x[0], x[1]),
        lambda: [u("sqd", 0, sh, -2, 2), u("sqd", 1, sh, -2, 2)], 3)
    add("truediv", "smooth", "y with |y| in [0.5, 2] (away from the pole at 0)", lambda tf, x: tf.math.truediv(x[0], x[1]),
        lambda: [u("td", 0, sh, -2, 2), away("td", 1, sh, 0.5, 2)], 2)
    add("reciprocal", "smooth", "|x| in [0.5, 2] (away from the pole)", lambda tf, x: tf.math.reciprocal(x[0]),
        lambda: [away("rc", 0, sh, 0.5, 2)], 2)
    add("reciprocal_no_nan", "smooth", "|x| in [0.5, 2] (away from x = 0, where it is defined 0)",
        lambda tf, x: tf.math.reciprocal_no_nan(x[0]), lambda: [away("rcn", 0, sh, 0.5, 2)], 2)
    add("divide_no_nan", "smooth", "|y| in [0.5, 2] (away from y = 0, where it is defined 0)",
        lambda tf, x: tf.math.divide_no_nan(x[0], x[1]), lambda: [u("dnn", 0, sh, -2, 2), away("dnn", 1, sh, 0.5, 2)], 2)
    add("multiply_no_nan", "smooth", "|y| in [0.5, 2] (away from y = 0, where the product is defined 0)",
        lambda tf, x: tf.math.multiply_no_nan(x[0], x[1]), lambda: [u("mnn", 0, sh, -2, 2), away("mnn", 1, sh, 0.5, 2)], 2)
    add("xdivy", "smooth", "|x| in [0.3, 1.5], |y| in [0.5, 2] (away from x = 0 and the pole)",
        lambda tf, x: tf.math.xdivy(x[0], x[1]), lambda: [away("xd", 0, sh), away("xd", 1, sh, 0.5, 2)], 2)
    add("xlogy", "smooth", "|x| in [0.3, 1.5] (away from x = 0), y in [0.5, 3] (log's domain)",
        lambda tf, x: tf.math.xlogy(x[0], x[1]), lambda: [away("xl", 0, sh), u("xl", 1, sh, 0.5, 3)], 3)
    add("xlog1py", "smooth", "|x| in [0.3, 1.5] (away from x = 0), y in [-0.5, 2] (1 + y > 0)",
        lambda tf, x: tf.math.xlog1py(x[0], x[1]), lambda: [away("xl1", 0, sh), u("xl1", 1, sh, -0.5, 2)], 3)

    def mod_inputs(n: str) -> list[np.ndarray]:
        y = u(n, 1, sh, 1.0, 2.0)
        q = _rng(n, 2).integers(-3, 3, sh) + u(n, 3, sh, 0.2, 0.8)  # x / y at least 0.2 from an integer
        return [q * y, y]

    for n in ("floormod", "mod"):
        add(n, "piecewise-linear", "y in [1, 2], x = y (k + f) with f in [0.2, 0.8] (x / y away from the jumps)",
            (lambda n: lambda tf, x: getattr(tf.math, n)(x[0], x[1]))(n), (lambda n: lambda: mod_inputs(n))(n), 3)
    add("maximum", "piecewise-linear", "x, y distinct values 0.1 apart (no ties)", lambda tf, x: tf.math.maximum(x[0], x[1]),
        lambda: list(spaced("max", 0, (2, 2, 3))), 1)
    for n, lo, hi in (("acos", -0.9, 0.9), ("asin", -0.9, 0.9), ("atanh", -0.9, 0.9), ("acosh", 1.2, 4.0),
                      ("cosh", -3, 3), ("sinh", -3, 3), ("tan", -1.2, 1.2), ("bessel_i0", -4, 4), ("bessel_i1", -4, 4),
                      ("digamma", 0.5, 5), ("lgamma", 0.5, 5), ("ndtri", 0.05, 0.95), ("erfinv", -0.9, 0.9),
                      ("erfcinv", 0.1, 1.9)):
        add(n, "smooth", f"x in [{lo}, {hi}] (inside the domain, away from its edges/poles)",
            (lambda n: lambda tf, x: getattr(tf.math, n)(x[0]))(n), (lambda n, lo, hi: lambda: [u(n, 0, sh, lo, hi)])(n, lo, hi))
    for n in ("bessel_i0e", "bessel_i1e"):
        add(n, "smooth", "|x| in [0.3, 4] (exp(-|x|) has a kink at 0)",
            (lambda n: lambda tf, x: getattr(tf.math, n)(x[0]))(n), (lambda n: lambda: [away(n, 0, sh, 0.3, 4)])(n))
    add("atan2", "smooth", "x in [0.3, 2], y in [-2, 2] (away from the origin and the branch cut x < 0, y = 0)",
        lambda tf, x: tf.math.atan2(x[0], x[1]), lambda: [u("at2", 0, sh, -2, 2), u("at2", 1, sh, 0.3, 2)])
    add("angle", "smooth", "z = complex(a, b), a in [0.3, 2] (away from the origin and the branch cut)",
        lambda tf, x: tf.math.angle(tf.complex(x[0], x[1])), lambda: [u("ang", 0, sh, 0.3, 2), u("ang", 1, sh, -2, 2)])
    add("real", "linear", "z = complex(a, b), a, b in [-2, 2]", lambda tf, x: tf.math.real(tf.complex(x[0], x[1])),
        lambda: [u("re", 0, sh, -2, 2), u("re", 1, sh, -2, 2)], 1)
    add("imag", "linear", "z = complex(a, b), a, b in [-2, 2]", lambda tf, x: tf.math.imag(tf.complex(x[0], x[1])),
        lambda: [u("im", 0, sh, -2, 2), u("im", 1, sh, -2, 2)], 1)
    add("conj", "linear", "z = complex(a, b); output [real, imag] of conj(z)",
        lambda tf, x: (lambda c: tf.concat([tf.math.real(c), tf.math.imag(c)], 0))(tf.math.conj(tf.complex(x[0], x[1]))),
        lambda: [u("cj", 0, sh, -2, 2), u("cj", 1, sh, -2, 2)], 1)
    a_c, b_c = np.array([[0.5, 1.0, 2.5], [5.0, 0.7, 3.0]]), np.array([[2.0, 1.5, 0.5], [1.0, 4.0, 2.0]])
    add("betainc", "smooth", "x in [0.1, 0.9] (inside (0, 1)); a, b fixed in [0.5, 5] (TF's gradient is for x only: "
        "its gradient registry returns None for a and b)",
        lambda tf, x: tf.math.betainc(tf.constant(a_c, tf.float64), tf.constant(b_c, tf.float64), x[0]),
        lambda: [u("bi", 0, sh, 0.1, 0.9)], 16)
    for n in ("igamma", "igammac"):
        add(n, "smooth", "a in [0.5, 3], x in [0.5, 5] (positive, away from 0)",
            (lambda n: lambda tf, x: getattr(tf.math, n)(x[0], x[1]))(n),
            (lambda n: lambda: [u(n, 0, sh, 0.5, 3), u(n, 1, sh, 0.5, 5)])(n), 64)
    add("zeta", "smooth", "q in [0.5, 3]; x fixed in {2, 3, 4.5} (TF's gradient is for q only)",
        lambda tf, x: tf.math.zeta(tf.constant([[2.0, 3.0, 4.5], [2.0, 3.0, 4.5]], tf.float64), x[0]),
        lambda: [u("ze", 0, sh, 0.5, 3)], 16)
    add("polygamma", "smooth", "x in [0.5, 4]; n fixed in {0, 1, 2} (an integer order)",
        lambda tf, x: tf.math.polygamma(tf.constant([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]], tf.float64), x[0]),
        lambda: [u("pg", 0, sh, 0.5, 4)], 16)
    add("lbeta", "smooth", "x in [0.5, 3] (positive), shape (3, 2)", lambda tf, x: tf.math.lbeta(x[0]),
        lambda: [u("lb", 0, (3, 2), 0.5, 3)], 16, 3)
    add("reduce_euclidean_norm", "smooth", "x uniform in [-1, 1], shape (3, 4), axis=1 (norms away from 0)",
        lambda tf, x: tf.math.reduce_euclidean_norm(x[0], axis=1), lambda: [away("ren", 0, (3, 4))], 6, 4)
    add("reduce_std", "smooth", "x uniform in [-1, 1], shape (3, 4), axis=1 (rows not constant)",
        lambda tf, x: tf.math.reduce_std(x[0], axis=1), lambda: [u("rs", 0, (3, 4), -1, 1)], 8, 4)
    add("l2_normalize", "smooth", "x with |x| in [0.3, 1.5], shape (3, 4), axis=1 (sum x^2 above epsilon)",
        lambda tf, x: tf.math.l2_normalize(x[0], axis=1), lambda: [away("l2n", 0, (3, 4))], 8, 4)
    add("polyval", "smooth", "4 coefficients and x in [-2, 2] (a polynomial in both)",
        lambda tf, x: tf.math.polyval([x[0][i] for i in range(4)], x[1]),
        lambda: [u("pv", 0, (4,), -2, 2), u("pv", 1, (5,), -2, 2)], 8, 4)
    ids = np.array([0, 0, 1, 1, 1, 3], np.int32)
    uids = np.array([3, 0, -1, 3, 0, 1], np.int32)
    for n, kind in (("segment_sum", "linear"), ("segment_mean", "linear"), ("segment_max", "piecewise-linear"),
                    ("segment_min", "piecewise-linear"), ("segment_prod", "smooth")):
        add(n, kind, "data (6, 2), sorted ids [0 0 1 1 1 3] (segment 2 empty); distinct values 0.1 apart (max/min: no ties; "
            "prod: no zero factor)",
            (lambda n: lambda tf, x: getattr(tf.math, n)(x[0], tf.constant(ids)))(n),
            (lambda n: lambda: [spaced(n, 0, (6, 2))])(n), 4, 3)
    for n, kind in (("unsorted_segment_sum", "linear"), ("unsorted_segment_mean", "linear"),
                    ("unsorted_segment_sqrt_n", "linear"), ("unsorted_segment_max", "piecewise-linear"),
                    ("unsorted_segment_min", "piecewise-linear"), ("unsorted_segment_prod", "smooth")):
        add(n, kind, "data (6, 2), ids [3 0 -1 3 0 1] (a dropped -1), num_segments 5 (empty segments dropped from the "
            "output: their fill is a constant); distinct values 0.1 apart",
            (lambda n: lambda tf, x: tf.gather(getattr(tf.math, n)(x[0], tf.constant(uids), 5), [0, 1, 3]))(n),
            (lambda n: lambda: [spaced(n, 0, (6, 2))])(n), 4, 3)
    w_bin = np.array([1, 2, 2, 3, 1], np.int32)
    add("bincount", "linear", "weights uniform in [-1, 1] of values [1 2 2 3 1] (the sum of the weights per value is "
        "linear in the weights)", lambda tf, x: tf.math.bincount(tf.constant(w_bin), weights=x[0]),
        lambda: [u("bc", 0, (5,), -1, 1)], 2, 3, ("DenseBincount", "Bincount"))
    add("confusion_matrix", "linear", "weights uniform in [-1, 1], labels [1 2 0 2], predictions [2 2 0 1]",
        lambda tf, x: tf.math.confusion_matrix([1, 2, 0, 2], [2, 2, 0, 1], num_classes=3, weights=x[0], dtype=tf.float64),
        lambda: [u("cm", 0, (4,), -1, 1)], 2, 2)
    return S


# =========================================================================== tf.nn


def _tfn() -> list[Spec]:
    S: list[Spec] = []

    def add(name: str, kind: str, why: str, fn: Any = None, inputs: Any = None, ops: int = 8, terms: int = 1) -> None:
        S.append(Spec(TF_NN, name, kind, why, fn, inputs, ops, terms))

    def u(n: str, k: int, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
        return uni(n, k, shape, lo, hi)

    for n in ("gelu", "silu", "swish"):
        add(n, "op-library", f"tf.nn.{n} is the op library's {'silu' if n == 'swish' else n} (tf.nn.swish is tf.nn.silu): "
            "checked to second order by suites/autodiff/test_second_order.py")
    for n, r in (("in_top_k", BOOL), ("zero_fraction", "fraction of zero entries: piecewise constant"),
                 ("collapse_repeated", "integer labels and lengths"), ("ctc_unique_labels", "integer labels"),
                 ("compute_accidental_hits", "integer ids and constant weights"),
                 ("all_candidate_sampler", "sampled integer ids"), ("fixed_unigram_candidate_sampler", "sampled integer ids"),
                 ("learned_unigram_candidate_sampler", "sampled integer ids"),
                 ("ctc_greedy_decoder", "decoded integer labels; TF registers CTCGreedyDecoder not differentiable "
                                        "(ops.NotDifferentiable in ctc_ops.py)"),
                 ("ctc_beam_search_decoder", "decoded integer labels; TF registers CTCBeamSearchDecoder not "
                                             "differentiable (ops.NotDifferentiable in ctc_ops.py)")):
        add(n, *_nd(r))
    for n in ("max_pool3d", "avg_pool3d"):
        add(n, "no-float64", "MaxPool3D/AvgPool3D have half/bfloat16/float32 CPU kernels only (tf.raw_ops T)")
    for n in ("local_response_normalization", "lrn"):
        add(n, "no-float64", "LRN has half/bfloat16/float32 kernels only (tf.raw_ops.LRN T)")
    for n in ("approx_max_k", "approx_min_k"):
        add(n, "no-float64", "ApproxTopK has half/bfloat16/float32 kernels only (tf.raw_ops.ApproxTopK T)")

    add("conv1d", "smooth", "x (1, 6, 2), filters (3, 2, 2) uniform in [-1, 1], stride 2, SAME (bilinear)",
        lambda tf, x: tf.nn.conv1d(x[0], x[1], stride=2, padding="SAME"), lambda: [u("c1", 0, (1, 6, 2)), u("c1", 1, (3, 2, 2))],
        4, 6)
    add("conv3d", "smooth", "x (1, 3, 3, 3, 1), filters (2, 2, 2, 1, 2), VALID (bilinear)",
        lambda tf, x: tf.nn.conv3d(x[0], x[1], [1] * 5, "VALID"),
        lambda: [u("c3", 0, (1, 3, 3, 3, 1)), u("c3", 1, (2, 2, 2, 1, 2))],
        4, 8)
    add("conv1d_transpose", "smooth", "y (1, 3, 2), filters (3, 2, 2), stride 2, SAME, output (1, 6, 2) (bilinear)",
        lambda tf, x: tf.nn.conv1d_transpose(x[0], x[1], [1, 6, 2], 2, "SAME"),
        lambda: [u("c1t", 0, (1, 3, 2)), u("c1t", 1, (3, 2, 2))],
        4, 6)
    add("conv3d_transpose", "smooth", "y (1, 2, 2, 2, 1), filters (2, 2, 2, 1, 1), stride 1, VALID, output (1, 3, 3, 3, 1)",
        lambda tf, x: tf.nn.conv3d_transpose(x[0], x[1], [1, 3, 3, 3, 1], [1] * 5, "VALID"),
        lambda: [u("c3t", 0, (1, 2, 2, 2, 1)), u("c3t", 1, (2, 2, 2, 1, 1))], 4, 8)
    add("conv_transpose", "smooth", "2-D: y (1, 2, 2, 2), filters (2, 2, 1, 2), stride 2, VALID, output (1, 4, 4, 1)",
        lambda tf, x: tf.nn.conv_transpose(x[0], x[1], [1, 4, 4, 1], strides=2, padding="VALID"),
        lambda: [u("ct", 0, (1, 2, 2, 2)), u("ct", 1, (2, 2, 1, 2))], 4, 8)
    add("atrous_conv2d", "smooth", "x (1, 5, 5, 1), filters (2, 2, 1, 2), rate 2, VALID",
        lambda tf, x: tf.nn.atrous_conv2d(x[0], x[1], 2, "VALID"), lambda: [u("ac", 0, (1, 5, 5, 1)), u("ac", 1, (2, 2, 1, 2))],
        4, 4)
    add("atrous_conv2d_transpose", "smooth", "y (1, 3, 3, 2), filters (2, 2, 1, 2), rate 2, VALID, output (1, 5, 5, 1)",
        lambda tf, x: tf.nn.atrous_conv2d_transpose(x[0], x[1], [1, 5, 5, 1], 2, "VALID"),
        lambda: [u("act", 0, (1, 3, 3, 2)), u("act", 1, (2, 2, 1, 2))], 4, 8)
    add("depthwise_conv2d", "smooth", "x (1, 4, 4, 2), filter (2, 2, 2, 1), stride 1, VALID",
        lambda tf, x: tf.nn.depthwise_conv2d(x[0], x[1], [1, 1, 1, 1], "VALID"),
        lambda: [u("dw", 0, (1, 4, 4, 2)), u("dw", 1, (2, 2, 2, 1))], 4, 4)
    add("separable_conv2d", "smooth", "x (1, 4, 4, 2), depthwise (2, 2, 2, 1), pointwise (1, 1, 2, 2), VALID (trilinear)",
        lambda tf, x: tf.nn.separable_conv2d(x[0], x[1], x[2], [1, 1, 1, 1], "VALID"),
        lambda: [u("sc", 0, (1, 4, 4, 2)), u("sc", 1, (2, 2, 2, 1)), u("sc", 2, (1, 1, 2, 2))], 6, 6)
    add("depthwise_conv2d_backprop_input", "smooth", "filter (2, 2, 1, 1) and out_backprop (1, 3, 3, 1), input size "
        "(1, 4, 4, 1), VALID (bilinear in both)",
        lambda tf, x: tf.nn.depthwise_conv2d_backprop_input([1, 4, 4, 1], x[0], x[1], [1, 1, 1, 1], "VALID"),
        lambda: [u("dbi", 0, (2, 2, 1, 1)), u("dbi", 1, (1, 3, 3, 1))], 4, 4)
    add("depthwise_conv2d_backprop_filter", "smooth", "input (1, 4, 4, 1) and out_backprop (1, 3, 3, 1), filter size "
        "(2, 2, 1, 1), VALID (bilinear in both)",
        lambda tf, x: tf.nn.depthwise_conv2d_backprop_filter(x[0], [2, 2, 1, 1], x[1], [1, 1, 1, 1], "VALID"),
        lambda: [u("dbf", 0, (1, 4, 4, 1)), u("dbf", 1, (1, 3, 3, 1))], 4, 9)
    add("with_space_to_batch", "smooth", "x (1, 5, 5, 1), op a VALID convolution with filters (2, 2, 1, 1), dilation 2",
        lambda tf, x: tf.nn.with_space_to_batch(x[0], (2, 2), "VALID", lambda inp, num_spatial_dims, padding:
                                                tf.nn.convolution(inp, x[1], padding=padding), filter_shape=(2, 2)),
        lambda: [u("wsb", 0, (1, 5, 5, 1)), u("wsb", 1, (2, 2, 1, 1))], 4, 4)
    add("dilation2d", "piecewise-linear", "x distinct values 1 apart, filter in [0, 0.3] distinct: each window's max "
        "is decided by x alone, with a gap of at least 0.7 (no ties)",
        lambda tf, x: tf.nn.dilation2d(x[0], x[1], [1, 1, 1, 1], "VALID", "NHWC", [1, 1, 1, 1]),
        lambda: [spaced("d2", 0, (1, 4, 4, 1), 1.0), spaced("d2", 1, (2, 2, 1), 0.07) + 0.15], 2)
    add("erosion2d", "piecewise-linear", "x distinct values 1 apart, filter in [0, 0.3] distinct (no ties in the window min)",
        lambda tf, x: tf.nn.erosion2d(x[0], x[1], [1, 1, 1, 1], "VALID", "NHWC", [1, 1, 1, 1]),
        lambda: [spaced("e2", 0, (1, 4, 4, 1), 1.0), spaced("e2", 1, (2, 2, 1), 0.07) + 0.15], 2)
    for n, arg in (("max_pool", (1, 4, 4, 2)), ("max_pool1d", (1, 6, 2))):
        add(n, "piecewise-linear", f"x {arg} distinct values 0.1 apart, ksize 2, stride 2, VALID (no ties)",
            (lambda n: lambda tf, x: getattr(tf.nn, n)(x[0], 2, 2, "VALID"))(n),
            (lambda n, arg: lambda: [spaced(n, 0, arg)])(n, arg), 1)
    for n, arg in (("avg_pool", (1, 4, 4, 2)), ("avg_pool1d", (1, 6, 2))):
        add(n, "linear", f"x {arg} uniform in [-1, 1], ksize 3, stride 2, SAME (partial windows at the edge)",
            (lambda n: lambda tf, x: getattr(tf.nn, n)(x[0], 3, 2, "SAME"))(n),
            (lambda n, arg: lambda: [u(n, 0, arg)])(n, arg), 2, 9)
    add("max_pool_with_argmax", "piecewise-linear", "x (1, 4, 4, 1) distinct values 0.1 apart, ksize 2, stride 2; the values "
        "output (the argmax is integer)", lambda tf, x: tf.nn.max_pool_with_argmax(x[0], 2, 2, "VALID")[0],
        lambda: [spaced("mpa", 0, (1, 4, 4, 1))], 1)
    for n, kind in (("fractional_max_pool", "piecewise-linear"), ("fractional_avg_pool", "linear")):
        add(n, kind, "x (1, 5, 5, 1) distinct values 0.1 apart, ratio [1, 1.5, 1.5, 1], pseudo_random, seed=5 (the same "
            "pooling regions on every call); the output values",
            (lambda n: lambda tf, x: getattr(tf.nn, n)(x[0], [1.0, 1.5, 1.5, 1.0], pseudo_random=True, seed=5)[0])(n),
            (lambda n: lambda: [spaced(n, 0, (1, 5, 5, 1))])(n), 2, 4)
    add("bias_add", "linear", "x (2, 3, 4) and bias (4,) uniform in [-1, 1]", lambda tf, x: tf.nn.bias_add(x[0], x[1]),
        lambda: [u("ba", 0, (2, 3, 4)), u("ba", 1, (4,))], 1)
    add("crelu", "piecewise-linear", "|x| in [0.3, 1.5] (away from the kink at 0)", lambda tf, x: tf.nn.crelu(x[0]),
        lambda: [away("cr", 0, (2, 3))], 1)
    add("l2_loss", "smooth", "x uniform in [-1, 1], (3, 4)", lambda tf, x: tf.nn.l2_loss(x[0]),
        lambda: [u("l2l", 0, (3, 4))], 3, 12)
    add("l2_normalize", "smooth", "|x| in [0.3, 1.5], (3, 4), axis=-1 (sum x^2 above epsilon)",
        lambda tf, x: tf.nn.l2_normalize(x[0], axis=-1), lambda: [away("nl2", 0, (3, 4))], 8, 4)
    add("batch_norm_with_global_normalization", "smooth", "x (2, 3), mean, variance in [0.5, 2] (positive), beta, gamma",
        lambda tf, x: tf.nn.batch_norm_with_global_normalization(x[0], x[1], x[2], x[3], x[4], 1e-3, True),
        lambda: [u("bn", 0, (2, 3)), u("bn", 1, (3,)), u("bn", 2, (3,), 0.5, 2), u("bn", 3, (3,)), u("bn", 4, (3,))], 8)
    add("normalize_moments", "smooth", "counts 4 (constant); mean_ss, variance_ss in [1, 3], shift in [-1, 1]; "
        "output [mean, variance]",
        lambda tf, x: tf.concat(list(tf.nn.normalize_moments(tf.constant(4.0, tf.float64), x[0], x[1], x[2])), 0),
        lambda: [u("nm", 0, (3,), 1, 3), u("nm", 1, (3,), 1, 3), u("nm", 2, (3,))], 6)
    add("sufficient_statistics", "smooth", "x (4, 3), shift (3,) uniform in [-1, 1], axes [0]; output [mean_ss, variance_ss]",
        lambda tf, x: (lambda r: tf.concat([r[1], r[2]], 0))(tf.nn.sufficient_statistics(x[0], [0], shift=x[1])),
        lambda: [u("ss", 0, (4, 3)), u("ss", 1, (3,))], 3, 4)
    add("weighted_moments", "smooth", "x (4, 3) in [-1, 1], frequency weights in [0.5, 2] (positive), axes [0]; output "
        "[mean, variance]", lambda tf, x: tf.concat(list(tf.nn.weighted_moments(x[0], [0], x[1])), 0),
        lambda: [u("wm", 0, (4, 3)), u("wm", 1, (4, 3), 0.5, 2)], 8, 4)
    add("scale_regularization_loss", "linear", "4 losses in [0, 1]", lambda tf, x: tf.nn.scale_regularization_loss(x[0]),
        lambda: [u("srl", 0, (4,), 0, 1)], 1, 4)
    add("space_to_depth", "linear", "x (1, 4, 4, 1), block 2", lambda tf, x: tf.nn.space_to_depth(x[0], 2),
        lambda: [u("s2d", 0, (1, 4, 4, 1))], 1)
    add("depth_to_space", "linear", "x (1, 2, 2, 4), block 2", lambda tf, x: tf.nn.depth_to_space(x[0], 2),
        lambda: [u("d2s", 0, (1, 2, 2, 4))], 1)
    add("space_to_batch", "linear", "x (1, 3, 3, 1), block [2, 2], paddings [[1, 0], [1, 0]]",
        lambda tf, x: tf.nn.space_to_batch(x[0], [2, 2], [[1, 0], [1, 0]]), lambda: [u("s2b", 0, (1, 3, 3, 1))], 1)
    add("softmax_cross_entropy_with_logits", "smooth", "labels = p / sum(p) with p (2, 4) in [0.2, 1] (each row a valid "
        "probability distribution, as the docstring requires; the loss is differentiable in the labels too), logits in [-3, 3]",
        lambda tf, x: tf.nn.softmax_cross_entropy_with_logits(x[0] / tf.reduce_sum(x[0], -1, keepdims=True), x[1]),
        lambda: [u("sce", 0, (2, 4), 0.2, 1), u("sce", 1, (2, 4), -3, 3)], 10, 4)
    add("sparse_softmax_cross_entropy_with_logits", "smooth", "logits (3, 4) in [-3, 3], labels [0 3 1]",
        lambda tf, x: tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant([0, 3, 1]), x[0]),
        lambda: [u("ssce", 0, (3, 4), -3, 3)], 8, 4)
    add("log_poisson_loss", "smooth", "targets z in [1.5, 4] (z > 1: the Stirling term's branch) and log_input in [-2, 2]; "
        "output [compute_full_loss=False, True]",
        lambda tf, x: tf.concat([tf.nn.log_poisson_loss(x[0], x[1]), tf.nn.log_poisson_loss(x[0], x[1], True)], 0),
        lambda: [u("lpl", 0, (4,), 1.5, 4), u("lpl", 1, (4,), -2, 2)], 10)
    add("isotonic_regression", "piecewise-linear", "x (2, 5) uniform in [-1, 1]: block means of fixed blocks (linear) "
        "away from a change of the blocks; the values output",
        lambda tf, x: tf.nn.isotonic_regression(x[0])[0], lambda: [u("iso", 0, (2, 5))], 4, 5)
    lab = np.array([[1, 2]], np.int32)
    add("ctc_loss", "smooth", "logits (4, 1, 3) in [-2, 2], labels [1 2], blank 0, time-major",
        lambda tf, x: tf.nn.ctc_loss(tf.constant(lab), x[0], tf.constant([2]), tf.constant([4]), logits_time_major=True,
                                     blank_index=0), lambda: [u("ctc", 0, (4, 1, 3), -2, 2)], 16, 12)
    rows = np.array([[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]], np.int64)
    ids_ = np.array([0, 2, 5, 1, 3, 2], np.int64)

    def emb(tf: Any, x: list[Any], safe: bool) -> Any:
        sp_ids = tf.SparseTensor(rows, ids_, [3, 3])
        sp_w = tf.SparseTensor(rows, x[1], [3, 3])
        if safe:
            return tf.nn.safe_embedding_lookup_sparse(x[0], sp_ids, sp_w, combiner="sqrtn")
        return tf.nn.embedding_lookup_sparse(x[0], sp_ids, sp_w, combiner="mean")

    add("embedding_lookup_sparse", "smooth", "params (6, 2) in [-1, 1], sparse weights in [0.5, 2] (positive), "
        "combiner mean (a ratio in the weights)", lambda tf, x: emb(tf, x, False),
        lambda: [u("els", 0, (6, 2)), u("els", 1, (6,), 0.5, 2)], 8, 3)
    add("safe_embedding_lookup_sparse", "smooth", "params (6, 2) in [-1, 1], sparse weights in [0.5, 2] (positive: none "
        "pruned), combiner sqrtn", lambda tf, x: emb(tf, x, True),
        lambda: [u("sels", 0, (6, 2)), u("sels", 1, (6,), 0.5, 2)], 8, 3)
    sv = (np.array([4, 5, 0], np.int64), np.array([[0.5, 1.2], [0.8, 0.3]]), np.array([0.4, 0.9, 1.1]))

    def sampled(tf: Any, x: list[Any], fname: str) -> Any:
        return getattr(tf.nn, fname)(x[0], x[1], tf.constant([[1, 6], [2, 3]], tf.int64), x[2], num_sampled=3,
                                     num_classes=7, num_true=2, sampled_values=(tf.constant(sv[0]), tf.constant(sv[1]),
                                                                                tf.constant(sv[2])))

    for n in ("nce_loss", "sampled_softmax_loss"):
        add(n, "smooth", "weights (7, 3), biases (7,), inputs (2, 3) in [-1, 1]; fixed sampled_values (no accidental hits)",
            (lambda n: lambda tf, x: sampled(tf, x, n))(n),
            (lambda n: lambda: [u(n, 0, (7, 3)), u(n, 1, (7,)), u(n, 2, (2, 3))])(n), 10, 5)
    return S


# =========================================================================== torch.nn.functional


def _tf() -> list[Spec]:
    S: list[Spec] = []

    def add(name: str, kind: str, why: str, fn: Any = None, inputs: Any = None, ops: int = 8, terms: int = 1) -> None:
        S.append(Spec(TORCH_F, name, kind, why, fn, inputs, ops, terms))

    def u(n: str, k: int, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
        return uni(n, k, shape, lo, hi)

    for n in ("sigmoid", "tanh"):
        add(n, "op-library", f"F.{n} is torch.{n}, the op library's {n}: checked to second order by "
            "suites/autodiff/test_second_order.py")
    add("one_hot", *_nd("integer input and output"))
    for n in ("rrelu",):
        add(n, "piecewise-linear", "training=False (the documented deterministic slope (lower + upper) / 2); |x| in "
            "[0.3, 1.5]", lambda T, x: T.nn.functional.rrelu(x[0], 0.1, 0.4, training=False), lambda: [away("rr", 0, (2, 3))], 1)
    add("rrelu_", "piecewise-linear", "in place on a copy, training=False; |x| in [0.3, 1.5]",
        lambda T, x: T.nn.functional.rrelu_(x[0].clone(), 0.1, 0.4, training=False), lambda: [away("rr_", 0, (2, 3))], 1)
    sh = (2, 3)
    add("glu", "smooth", "x (2, 4) uniform in [-2, 2], dim=-1", lambda T, x: T.nn.functional.glu(x[0]),
        lambda: [u("glu", 0, (2, 4), -2, 2)], 4)
    add("softmin", "smooth", "x (2, 4) uniform in [-2, 2], dim=1", lambda T, x: T.nn.functional.softmin(x[0], dim=1),
        lambda: [u("smn", 0, (2, 4), -2, 2)], 6, 4)
    add("hardshrink", "piecewise-linear", "|x| in [0.3, 1.5] with |x| - 0.5 at least 0.1 from 0 (lambd 0.5: a jump)",
        lambda T, x: T.nn.functional.hardshrink(x[0], 0.5), lambda: [np.sign(away("hs", 0, sh)) * np.array(
            [[0.3, 0.65, 1.2], [0.2, 0.9, 1.5]])], 1)
    add("softshrink", "piecewise-linear", "|x| in {0.2, 0.3, 0.65, 0.9, 1.2, 1.5}, at least 0.15 from lambd 0.5",
        lambda T, x: T.nn.functional.softshrink(x[0], 0.5), lambda: [np.sign(away("ss", 0, sh)) * np.array(
            [[0.3, 0.65, 1.2], [0.2, 0.9, 1.5]])], 1)
    add("threshold", "piecewise-linear", "x at least 0.15 from the threshold 0.5",
        lambda T, x: T.nn.functional.threshold(x[0], 0.5, -7.0), lambda: [np.array([[0.3, 0.65, 1.2], [-0.2, 0.9, 0.1]])], 1)
    add("threshold_", "piecewise-linear", "in place on a copy; x at least 0.15 from the threshold 0.5",
        lambda T, x: T.nn.functional.threshold_(x[0].clone(), 0.5, -7.0),
        lambda: [np.array([[0.3, 0.65, 1.2], [-0.2, 0.9, 0.1]])], 1)
    for n, call in (("relu_", lambda F, t: F.relu_(t)), ("leaky_relu_", lambda F, t: F.leaky_relu_(t, 0.2)),
                    ("hardtanh_", lambda F, t: F.hardtanh_(t, -0.5, 1.0))):
        add(n, "piecewise-linear", "in place on a copy (the documented in-place variant); |x| in [0.3, 1.5] and "
            "|x| not within 0.1 of the hardtanh bounds -0.5, 1",
            (lambda call: lambda T, x: call(T.nn.functional, x[0].clone()))(call),
            (lambda n: lambda: [np.array([[0.3, -0.8, 1.2], [-0.35, 0.7, -1.4]])])(n), 1)
    for n, call in (("elu_", lambda F, t: F.elu_(t, 0.7)), ("celu_", lambda F, t: F.celu_(t, 1.5)),
                    ("selu_", lambda F, t: F.selu_(t))):
        add(n, "smooth", "in place on a copy; |x| in [0.3, 1.5] (the second derivative jumps at 0)",
            (lambda call: lambda T, x: call(T.nn.functional, x[0].clone()))(call),
            (lambda n: lambda: [away(n, 0, sh)])(n), 4)
    add("normalize", "smooth", "|x| in [0.3, 1.5], (3, 4), p=2, dim=1 (norms above eps)",
        lambda T, x: T.nn.functional.normalize(x[0], dim=1), lambda: [away("nrm", 0, (3, 4))], 8, 4)
    add("rms_norm", "smooth", "x (2, 4), weight (4,) in [-1, 1], eps 1e-5",
        lambda T, x: T.nn.functional.rms_norm(x[0], (4,), x[1], 1e-5),
        lambda: [u("rms", 0, (2, 4)), u("rms", 1, (4,))], 8, 4)
    add("local_response_norm", "smooth", "x (1, 4, 2, 2) in [-1, 1], size 3, alpha 0.3, beta 0.75, k 2",
        lambda T, x: T.nn.functional.local_response_norm(x[0], 3, 0.3, 0.75, 2.0), lambda: [u("lrn", 0, (1, 4, 2, 2))], 8, 3)
    add("pairwise_distance", "smooth", "x1, x2 (3, 4) in [-1, 1] (distances away from 0), p=2",
        lambda T, x: T.nn.functional.pairwise_distance(x[0], x[1]), lambda: [u("pwd", 0, (3, 4)), u("pwd", 1, (3, 4))], 6, 4)
    add("pdist", "smooth", "4 points in R^3 uniform in [-1, 1] (distinct), p=2", lambda T, x: T.nn.functional.pdist(x[0]),
        lambda: [u("pd", 0, (4, 3))], 6, 3)
    add("pixel_shuffle", "linear", "x (1, 4, 2, 2), r=2", lambda T, x: T.nn.functional.pixel_shuffle(x[0], 2),
        lambda: [u("ps", 0, (1, 4, 2, 2))], 1)
    add("pixel_unshuffle", "linear", "x (1, 1, 4, 4), r=2", lambda T, x: T.nn.functional.pixel_unshuffle(x[0], 2),
        lambda: [u("pus", 0, (1, 1, 4, 4))], 1)
    add("channel_shuffle", "linear", "x (1, 6, 2, 1), groups 2", lambda T, x: T.nn.functional.channel_shuffle(x[0], 2),
        lambda: [u("cs", 0, (1, 6, 2, 1))], 1)
    add("native_channel_shuffle", "linear", "x (1, 6, 2, 1), groups 3",
        lambda T, x: T.nn.functional.native_channel_shuffle(x[0], 3), lambda: [u("ncs", 0, (1, 6, 2, 1))], 1)
    add("unfold", "linear", "x (1, 2, 4, 4), kernel 2, stride 2", lambda T, x: T.nn.functional.unfold(x[0], 2, stride=2),
        lambda: [u("uf", 0, (1, 2, 4, 4))], 1)
    add("fold", "linear", "columns (1, 4, 9), output (4, 4), kernel 2, stride 1 (overlapping sums)",
        lambda T, x: T.nn.functional.fold(x[0], (4, 4), 2), lambda: [u("fo", 0, (1, 4, 9))], 2, 4)
    for d in (1, 2, 3):
        shape = (1, 2, 5, 4, 3)[: 2 + d]
        out = (3, 2, 2)[:d]
        add(f"adaptive_avg_pool{d}d", "linear", f"x {shape} in [-1, 1], output {out}",
            (lambda d, out: lambda T, x: getattr(T.nn.functional, f"adaptive_avg_pool{d}d")(x[0], out))(d, out),
            (lambda d, shape: lambda: [u(f"aap{d}", 0, shape)])(d, shape), 2, 8)
        for n in (f"adaptive_max_pool{d}d", f"adaptive_max_pool{d}d_with_indices"):
            call = (lambda n, out: lambda T, x: (lambda r: r[0] if isinstance(r, tuple) else r)(
                getattr(T.nn.functional, n)(x[0], out)))(n, out)
            add(n, "piecewise-linear", f"x {shape} distinct values 0.1 apart (no ties), output {out}; the values output",
                call, (lambda n, shape: lambda: [spaced(n, 0, shape)])(n, shape), 1)
        add(f"lp_pool{d}d", "smooth", f"x {(1, 2, 4, 4, 4)[:2 + d]} in [0.3, 1.5] (positive: x^p smooth, the root of a "
            "positive sum), p=2, kernel 2",
            (lambda d: lambda T, x: getattr(T.nn.functional, f"lp_pool{d}d")(x[0], 2.0, 2))(d),
            (lambda d: lambda: [u(f"lp{d}", 0, (1, 2, 4, 4, 4)[:2 + d], 0.3, 1.5)])(d), 8, 8)
        ushape = (1, 1, 4, 4, 4)[: 2 + d]
        idx = None

        def unpool(T: Any, x: list[Any], d: int = d, ushape: tuple[int, ...] = ushape) -> Any:
            F = T.nn.functional
            base = T.from_numpy(spaced(f"unp{d}", 1, ushape))
            _, i = getattr(F, f"max_pool{d}d")(base, 2, return_indices=True)
            return getattr(F, f"max_unpool{d}d")(x[0], i, 2)

        del idx
        add(f"max_unpool{d}d", "linear", f"values {(1, 1, 2, 2, 2)[:2 + d]} in [-1, 1], indices of a max_pool{d}d (k=2) of a "
            "fixed input", unpool, (lambda d: lambda: [u(f"mu{d}", 0, (1, 1, 2, 2, 2)[:2 + d])])(d), 1)
    add("avg_pool1d", "linear", "x (1, 2, 7) in [-1, 1], kernel 3, stride 2, padding 1, ceil_mode, count_include_pad=False",
        lambda T, x: T.nn.functional.avg_pool1d(x[0], 3, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda: [u("ap1", 0, (1, 2, 7))], 2, 3)
    for d in (2, 3):
        shp = (1, 1, 5, 5, 5)[: 2 + d]
        for n in (f"fractional_max_pool{d}d", f"fractional_max_pool{d}d_with_indices"):
            def frac(T: Any, x: list[Any], n: str = n, d: int = d) -> Any:
                samples = T.full((1, 1, d), 0.37, dtype=x[0].dtype)
                r = getattr(T.nn.functional, n)(x[0], 2, output_size=(3,) * d, _random_samples=samples)
                return r[0] if isinstance(r, tuple) else r
            add(n, "piecewise-linear", f"x {shp} distinct values 0.1 apart; fixed _random_samples 0.37 (the same regions "
                "on every call), kernel 2, output 3; the values output", frac,
                (lambda n, shp: lambda: [spaced(n, 0, shp)])(n, shp), 1)
    add("interpolate", "linear", "x (1, 1, 3, 3) in [-1, 1], size (4, 5), bicubic, align_corners=False (linear in x)",
        lambda T, x: T.nn.functional.interpolate(x[0], size=(4, 5), mode="bicubic"), lambda: [u("itp", 0, (1, 1, 3, 3))],
        8, 16)
    add("affine_grid", "linear", "theta (1, 2, 3) in [-1, 1], size (1, 1, 3, 4)",
        lambda T, x: T.nn.functional.affine_grid(x[0], [1, 1, 3, 4], align_corners=False),
        lambda: [u("ag", 0, (1, 2, 3))], 3, 3)
    add("grid_sample", "smooth", "input (1, 1, 3, 4) and grid (1, 2, 3, 2) in [-0.9, 0.9] (inside, not on a pixel "
        "boundary), bilinear, zeros padding (bilinear in the grid within a cell)",
        lambda T, x: T.nn.functional.grid_sample(x[0], x[1], align_corners=False),
        lambda: [u("gs", 0, (1, 1, 3, 4)), u("gs", 1, (1, 2, 3, 2), -0.9, 0.9)], 12, 4)
    add("bilinear", "smooth", "x1 (2, 3), x2 (2, 4), weight (2, 3, 4), bias (2,) in [-1, 1] (trilinear)",
        lambda T, x: T.nn.functional.bilinear(x[0], x[1], x[2], x[3]),
        lambda: [u("bl", 0, (2, 3)), u("bl", 1, (2, 4)), u("bl", 2, (2, 3, 4)), u("bl", 3, (2,))], 4, 12)
    add("conv_tbc", "smooth", "x (4, 1, 2), weight (3, 2, 2), bias (2,), pad 1 (bilinear)",
        lambda T, x: T.nn.functional.conv_tbc(x[0], x[1], x[2], 1),
        lambda: [u("tbc", 0, (4, 1, 2)), u("tbc", 1, (3, 2, 2)), u("tbc", 2, (2,))], 4, 6)
    eb_idx, eb_off = np.array([1, 2, 4, 0, 4, 3]), np.array([0, 2, 2])

    def bag(T: Any, x: list[Any]) -> Any:
        return T.nn.functional.embedding_bag(T.from_numpy(eb_idx), x[0], T.from_numpy(eb_off), mode="sum",
                                             per_sample_weights=x[1])

    add("embedding_bag", "smooth", "weight (5, 2), per_sample_weights (6,) in [-1, 1], mode sum, an empty bag (bilinear)",
        bag, lambda: [u("eb", 0, (5, 2)), u("eb", 1, (6,))], 2, 3)

    def seeded(T: Any, call: Callable[[], Any]) -> Any:
        with T.random.fork_rng(devices=[]):
            T.manual_seed(1234)
            return call()

    add("gumbel_softmax", "smooth", "logits (3, 4) in [-1, 1], tau 0.7, soft; the noise fixed by seeding every call "
        "(torch.manual_seed in a forked RNG): a smooth function of the logits",
        lambda T, x: seeded(T, lambda: T.nn.functional.gumbel_softmax(x[0], tau=0.7)), lambda: [u("gs", 2, (3, 4))], 8, 4)
    for n, shape in (("dropout1d", (2, 3, 4)), ("dropout2d", (2, 3, 2, 2)), ("dropout3d", (1, 3, 2, 2, 2)),
                     ("alpha_dropout", (3, 4)), ("feature_alpha_dropout", (2, 3, 2, 2))):
        add(n, "linear", f"x {shape} in [-1, 1], p 0.3, training=True, the mask fixed by seeding every call: affine in x",
            (lambda n: lambda T, x: seeded(T, lambda: getattr(T.nn.functional, n)(x[0], 0.3, training=True)))(n),
            (lambda n, shape: lambda: [u(n, 0, shape)])(n, shape), 2)
    e, heads = 4, 2
    w_in = uni("mha", 9, (3 * e, e), -0.5, 0.5)
    b_in = uni("mha", 10, (3 * e,), -0.5, 0.5)
    wo, bo = uni("mha", 11, (e, e), -0.5, 0.5), uni("mha", 12, (e,), -0.5, 0.5)

    def mha(T: Any, x: list[Any]) -> Any:
        c = lambda a: T.from_numpy(a)
        out, _ = T.nn.functional.multi_head_attention_forward(x[0], x[1], x[2], e, heads, c(w_in), c(b_in), None, None,
                                                              False, 0.0, c(wo), c(bo), need_weights=False)
        return out

    add("multi_head_attention_forward", "smooth", "query (2, 1, 4), key, value (3, 1, 4) in [-1, 1]; projections fixed",
        mha, lambda: [u("mha", 0, (2, 1, 4)), u("mha", 1, (3, 1, 4)), u("mha", 2, (3, 1, 4))], 16, 12)
    return S


TABLES: dict[str, list[Spec]] = {TF_MATH: _tfm(), TF_NN: _tfn(), TORCH_F: _tf()}
FRAMEWORK = {TF_MATH: "tensorflow", TF_NN: "tensorflow", TORCH_F: "torch"}


def spec(ns: str, name: str) -> Spec:
    return next(s for s in TABLES[ns] if s.name == name)


def checks_of(ns: str) -> tuple[str, ...]:
    """The checks each differentiable record of ``ns`` registers (ledger rows): TensorFlow's
    forward-over-reverse (tf.autodiff.ForwardAccumulator) costs ~0.35 s a record here, so it is
    reverse-over-reverse only."""
    return ("grad", "hvp-rr", "hvp-fr") if FRAMEWORK[ns] == "torch" else ("grad", "hvp-rr")


def quick_sample(ns: str, seed: int, per_kind: int = 1) -> list[str]:
    """The quick profile's records of ``ns``: ``per_kind`` smooth and ``per_kind`` zero-Hessian
    records, rotated by ``--dl-seed`` (successive seeds visit every record)."""
    out: list[str] = []
    for kinds in (("smooth",), ZERO_HESSIAN):
        names = [s.name for s in TABLES[ns] if s.kind in kinds]
        start = seed % len(names)
        out += (names[start:] + names[:start])[:per_kind]
    return out


# =========================================================================== the checks (framework-agnostic)

EPS = float(np.finfo(np.float64).eps)
TERMS_ULPS = 4.0  # order-one terms of a gradient computed from a rounded output (test_second_order._gradient_floor)
SEED = 20261207
HVP = Callable[[list[np.ndarray], np.ndarray, list[np.ndarray]], list[np.ndarray]]


@dataclass
class Bounds:
    """The error model of one record: ``f_error = ops * terms * eps * max(1, max|f|)`` (each
    output element is at most ``terms`` summed terms, each after a chain of ``ops`` rounded
    operations of at most ``max|f|`` in size: special functions' documented errors are a few
    ulp, within 8 ulp); ``derivative_error = ops * terms * eps * max(1, max|g|)`` with ``g`` the
    gradient of <1, f> (the reverse pass has the same chain and sums, on values of the gradient's
    size), plus ``TERMS_ULPS`` eps for the second order (a gradient computed from a rounded output)."""

    f_error: float
    derivative_error: float

    @classmethod
    def of(cls, spec: Spec, fx: np.ndarray, g1: Sequence[np.ndarray]) -> Bounds:
        k = spec.ops * spec.terms * EPS
        gmax = max((float(np.max(np.abs(g), initial=0.0)) for g in g1), default=0.0)
        return cls(k * max(1.0, float(np.max(np.abs(fx), initial=0.0))), k * max(1.0, gmax))


def check_first_order(spec: Spec, f: Callable[[list[np.ndarray]], np.ndarray],
                      vjp: Callable[[list[np.ndarray], np.ndarray], list[np.ndarray]], xs: list[np.ndarray],
                      bounds: Bounds, seed: int = SEED) -> float:
    """The reverse-mode gradient (a VJP with a seeded random cotangent) against central finite
    differences along one direction per input and one random one (check_vjp); the worst ratio."""
    from pytest_dlconform.api import check_vjp

    res = check_vjp(f, xs, vjp, seed=seed, directions=len(xs) + 1, f_error=bounds.f_error,
                    derivative_error=bounds.derivative_error, names=[f"{spec.name}[{i}]" for i in range(len(xs))])
    return float(res.max_error_ratio)


def check_second_order(spec: Spec, vjp: Callable[[list[np.ndarray], np.ndarray], list[np.ndarray]], hvp: HVP,
                       xs: list[np.ndarray], out_shape: tuple[int, ...], bounds: Bounds, mode: str,
                       seed: int = SEED) -> Any:
    """H v of <w, f> against finite differences of the framework's own gradient (check_hvp, as
    suites/autodiff/test_second_order.py calls it), then the table's classification: a linear or
    piecewise-linear record's H v must be exactly 0."""
    from pytest_dlconform.api import check_hvp

    res = check_hvp(vjp, hvp, xs, out_shape, seed=seed, tangents=1, projections=1,
                    derivative_error=bounds.derivative_error + TERMS_ULPS * EPS, mode=f"{spec.ns}.{spec.name} {mode}")
    assert_zero_hessian(spec, float(res.max_abs_hvp), float(res.max_abs_fd), mode)
    return res
