"""Smooth elementwise unary ops (tanh, gelu, log(x^2 + c), exp(k tanh x), ...).

Smooth everywhere, so they may read any register. Their error propagation needs no
``lip``: it uses the numerical derivative of the reference (see :mod:`..errors`).
``_elementwise`` also builds the piecewise family's rows (:mod:`.piecewise`). Each record
carries the op's analytic derivative and its documented extreme and non-finite cases.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from .. import autocast as ac
from ..core import INPUT_MAX, ULPS, Array, OpSpec, Params, PlanFn, Shape, Template
from ..derivatives import _gelu_d, _mish_d, _sech2, _sig
from ..records import BOTH, IEEE_FORMULA, TF_API, TF_EXAMPLE, Autocast, GraphNames, OpRecord, each, records
from .common import _any, _choices, _no_params, _unary


def _sigmoid(x: Array) -> Array:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _elementwise(name: str, ref: Callable[[Array, Params], Array], torch: Template, tf: Template,
                 bound: Callable[[float, Params], float], *, category: str = "elementwise",
                 plan: PlanFn = _no_params, kinks: Callable[[Params], tuple[float, ...]] | None = None,
                 abs_scale: Callable[[Array, Params], Array] | None = None,
                 extras: Callable[[Params, Sequence[Shape]], dict[str, str]] | None = None,
                 deriv_scale: Callable[[Array, Params], Array] | None = None) -> OpSpec:
    return OpSpec(name, category, 1, torch, tf, _unary(ref), _any, plan, lambda bs, ss, p: bound(bs[0], p),
                  extras=extras, kinks=kinks, abs_scale=abs_scale, deriv_scale=deriv_scale)


def _at_most(limit: float) -> Callable[[float, Params], float]:
    """Bounded output, but only for arguments up to INPUT_MAX (keeps oscillation tame)."""
    return lambda b, p: limit if b <= INPUT_MAX else math.inf


def _abs_x(x: Array, p: Params) -> Array:
    return np.abs(x)


def _gelu_ref(x: Array, p: Params) -> Array:
    if p["approximate"] == "tanh":
        z = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        return x * _sigmoid(2 * z)  # 0.5 * (1 + tanh(z)) == sigmoid(2z), without cancellation
    return 0.5 * x * _erfc(-x / math.sqrt(2))


def _gelu_tf(p: Params, shapes: Sequence[Shape]) -> str:
    if p["approximate"] == "tanh":
        return "0.5 * {a} * (1.0 + tf.math.tanh(0.7978845608028654 * ({a} + 0.044715 * tf.math.pow({a}, 3.0))))"
    return "0.5 * {a} * tf.math.erfc(-0.7071067811865476 * {a})"


def _smooth_ops() -> list[OpSpec]:
    c_opts = (1.0, 0.25, 0.0625, 4.0)
    return [
        _elementwise("tanh", lambda x, p: np.tanh(x), "torch.tanh({a})", "tf.math.tanh({a})", lambda b, p: 1.0),
        _elementwise("sigmoid", lambda x, p: _sigmoid(x), "torch.sigmoid({a})", "tf.math.sigmoid({a})", lambda b, p: 1.0),
        _elementwise("sin", lambda x, p: np.sin(x), "torch.sin({a})", "tf.math.sin({a})", _at_most(1.0)),
        _elementwise("cos", lambda x, p: np.cos(x), "torch.cos({a})", "tf.math.cos({a})", _at_most(1.0)),
        _elementwise("atan", lambda x, p: np.arctan(x), "torch.atan({a})", "tf.math.atan({a})", lambda b, p: 2.0),
        _elementwise("asinh", lambda x, p: np.arcsinh(x), "torch.asinh({a})", "tf.math.asinh({a})",
                     lambda b, p: math.log(2 * b + 1) + 1),
        _elementwise("erf", lambda x, p: _erf(x), "torch.erf({a})", "tf.math.erf({a})", lambda b, p: 1.0),
        _elementwise("logsigmoid", lambda x, p: -np.logaddexp(0.0, -x), "F.logsigmoid({a})",
                     "tf.math.log_sigmoid({a})", lambda b, p: b + 1),
        # Same default in both: the exact erf form (torch approximate='none', TF False).
        # tf.nn.gelu is not used: in TF 2.21 it builds its constants with
        # math_ops.cast(0.7071067811865476, dtype), which goes through float32, so float64
        # gelu is only float32-accurate (relative error ~3e-8). Composed from tf.math.
        # x * (1 + erf(..)) / 2 cancels for x << 0: abs_scale allows it.
        _elementwise("gelu", _gelu_ref, "F.gelu({a}, approximate={approximate})", _gelu_tf, lambda b, p: b,
                     plan=_choices(approximate=("none", "tanh")), abs_scale=_abs_x),
        _elementwise("silu", lambda x, p: x * _sigmoid(x), "F.silu({a})", "tf.nn.silu({a})", lambda b, p: 1.1 * b + 1),
        # tf.nn has no mish (keras.activations.mish does): composed from public tf.math ops.
        _elementwise("mish", lambda x, p: x * np.tanh(np.logaddexp(0.0, x)), "F.mish({a})",
                     "{a} * tf.math.tanh(tf.math.softplus({a}))", lambda b, p: b + 1),
        # Both frameworks compose it (torch: input - input.tanh()), so its tangent rule is
        # u - sech^2(x) u: terms of size 1 that cancel to tanh^2(x) u near 0.
        _elementwise("tanhshrink", lambda x, p: x - np.tanh(x), "F.tanhshrink({a})", "{a} - tf.math.tanh({a})",
                     lambda b, p: b + 1, abs_scale=_abs_x, deriv_scale=lambda x, p: 1.0 + 1.0 / np.cosh(x) ** 2),
        _elementwise("square", lambda x, p: np.square(x), "torch.square({a})", "tf.math.square({a})", lambda b, p: b * b),
        _elementwise("cube", lambda x, p: x * x * x, "torch.pow({a}, 3)", "tf.math.pow({a}, 3.0)", lambda b, p: b**3),
        _elementwise("sqrt_c", lambda x, p: np.sqrt(x * x + p["c"]), "torch.sqrt(torch.square({a}) + {c})",
                     "tf.math.sqrt(tf.math.square({a}) + {c})", lambda b, p: math.sqrt(b * b + p["c"]),
                     plan=_choices(c=c_opts)),
        # log(t) with t = x^2 + c rounded: an absolute error of u, whatever x.
        _elementwise("log_c", lambda x, p: np.log(x * x + p["c"]), "torch.log(torch.square({a}) + {c})",
                     "tf.math.log(tf.math.square({a}) + {c})",
                     lambda b, p: max(abs(math.log(p["c"])), math.log(b * b + p["c"])),
                     plan=_choices(c=c_opts), abs_scale=lambda x, p: np.ones_like(x)),
        _elementwise("rsqrt_c", lambda x, p: 1 / np.sqrt(x * x + p["c"]), "torch.rsqrt(torch.square({a}) + {c})",
                     "tf.math.rsqrt(tf.math.square({a}) + {c})", lambda b, p: p["c"] ** -0.5, plan=_choices(c=c_opts)),
        _elementwise("log1p_sq", lambda x, p: np.log1p(x * x), "torch.log1p(torch.square({a}))",
                     "tf.math.log1p(tf.math.square({a}))", lambda b, p: math.log1p(b * b)),
        _elementwise("pow_c", lambda x, p: (x * x + p["c"]) ** p["p"], "torch.pow(torch.square({a}) + {c}, {p})",
                     "tf.math.pow(tf.math.square({a}) + {c}, {p})",
                     lambda b, p: (b * b + p["c"]) ** p["p"] if p["p"] > 0 else p["c"] ** p["p"],
                     plan=_choices(c=c_opts, p=(0.5, -0.5, 1.5, -1.5, 0.25)),
                     abs_scale=lambda x, p: abs(p["p"]) * (x * x + p["c"]) ** p["p"]),
        # exp only of a bounded argument, so it never overflows (float32 included).
        _elementwise("exp_tanh", lambda x, p: np.exp(p["k"] * np.tanh(x)), "torch.exp({k} * torch.tanh({a}))",
                     "tf.math.exp({k} * tf.math.tanh({a}))", lambda b, p: math.exp(p["k"]),
                     plan=_choices(k=(1.0, 0.5, 2.0, 4.0)),
                     abs_scale=lambda x, p: p["k"] * np.exp(p["k"] * np.tanh(x))),
    ]


_C: Final = (1.0, 0.25, 0.0625, 4.0)
_INF: Final = math.inf


def _at_inf(op: str, *values: tuple[float, float]) -> Callable[[Params], Rows]:
    """TensorFlow's documented example at +-inf: (input, output) pairs."""
    return lambda p: [(x, y, ("tensorflow",), TF_EXAMPLE.format(op=op)) for x, y in values]


Rows = list[tuple[float, float, tuple[str, ...], str]]


def _formula_at_inf(formula: str, *values: tuple[float, float]) -> Callable[[Params], Rows]:
    """The documented formula at +-inf, both frameworks."""
    return lambda p: [(x, y, BOTH, f"{IEEE_FORMULA}: {formula}") for x, y in values]


def _gelu_cancellation(xs: Sequence[Array], p: Params, gradient: bool) -> float:
    """Backward: TensorFlow composes gelu (``0.5 x (1 + tanh z)``, ``0.5 x erfc(-x/sqrt 2)``), so
    its tangent rule sums ``0.5 (1 + |t|) + 0.5 |x| (1 + t^2) |z'|`` (tanh form) or
    ``0.5 (1 + |erf(x / sqrt 2)|) + |x| phi(x)`` (erf form: ``Phi = 0.5 (1 + erf)``, as both
    frameworks compute it), terms that cancel for x << 0."""
    if not gradient:
        return 0.0
    x = xs[0]
    if p["approximate"] == "tanh":
        t = np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))
        dz = 0.7978845608028654 * (1 + 3 * 0.044715 * x**2)
        return float(np.max(0.5 * (1 + np.abs(t)) + 0.5 * np.abs(x) * (1 + t**2) * dz))
    # Phi(x) = 0.5 (1 + erf(x / sqrt 2)): the sum of 1 and erf cancels for x << 0, so Phi
    # carries 0.5 u (1 + |erf|) absolutely (torch's CPU kernel, float32: 2.8e-9 at x = -5.6,
    # explore seed 20261201, where Phi + |x| phi alone allowed 1.3e-12).
    phi = np.exp(-0.5 * x**2) / np.sqrt(2 * np.pi)
    erf = 1.0 - _erfc(x / np.sqrt(2))
    return float(np.max(0.5 * (1 + np.abs(erf)) + np.abs(x) * phi))


def _mish_cancellation(xs: Sequence[Array], p: Params, gradient: bool) -> float:
    """Backward: both frameworks differentiate ``x tanh(softplus(x))`` with ``1 - t**2`` from
    the rounded ``t = tanh(softplus(x))``, which carries ``ULPS u |t|`` absolutely, times
    ``|x| sigmoid(x)``: ``2 ULPS |t| |x| sigmoid(x)``. XLA's float64 t at x = 16.5 is 1.5 ulp
    from eager's; times x the gradients then differ by 1.1e-14 where 2.6e-15 was allowed
    (compiled backward, regime "large")."""
    if not gradient:
        return 0.0
    x = xs[0]
    t = np.tanh(np.logaddexp(0.0, x))
    return float(np.max(2.0 * ULPS * np.abs(t) * np.abs(x) * _sig(x)))


def _silu_cancellation(xs: Sequence[Array], p: Params, gradient: bool) -> float:
    """Backward: ``s (1 + x (1 - s))`` with ``1 - s`` from the rounded ``s = sigmoid(x)``
    (``ULPS u s`` absolutely), times ``|x| s``: ``ULPS |x| s**2`` (XLA float64 at x in
    [16, 64]: 1.8e-15 from eager where 1.5e-15 was allowed, regime "large")."""
    return float(np.max(ULPS * np.abs(xs[0]) * _sig(xs[0]) ** 2)) if gradient else 0.0


def elementwise_records() -> list[OpRecord]:
    """The smooth elementwise ops with their derivatives and documented edge cases."""
    sigmoid = "1 / (1 + exp(-x))"
    logsigmoid = "log(1 / (1 + exp(-x))); TF: -softplus(-x)"
    return records(_smooth_ops(), {
        "tanh": {"autocast": Autocast(ac.method("tanh", ac.M)), "graph": GraphNames("Tanh", "TanhBackward0"),
                 "derivative": lambda x, p: _sech2(x), "nonfinite": _at_inf("tanh", (_INF, 1.0), (-_INF, -1.0))},
        "sigmoid": {"autocast": Autocast(ac.method("sigmoid", ac.M)), "graph": GraphNames("Sigmoid", "SigmoidBackward0"),
                    "derivative": lambda x, p: _sig(x) * _sig(-x),
                    "extreme_source": f"{TF_API}tf/math/sigmoid: 'For x in (-inf, inf), sigmoid(x) in (0, 1)' and its "
                                      "example tf.sigmoid([-128., 0., 128.]) = [0., 0.5, 1.]",
                    "nonfinite": _formula_at_inf(sigmoid, (_INF, 1.0), (-_INF, 0.0))},
        "sin": {"graph": GraphNames("Sin", "SinBackward0"), "derivative": lambda x, p: np.cos(x), "tiny_only": True,
                "nonfinite": _at_inf("sin", (_INF, math.nan), (-_INF, math.nan))},
        "cos": {"graph": GraphNames("Cos", "CosBackward0"), "derivative": lambda x, p: -np.sin(x), "tiny_only": True,
                "nonfinite": _at_inf("cos", (_INF, math.nan), (-_INF, math.nan))},
        "atan": {"derivative": lambda x, p: 1 / (1 + x * x)},
        "asinh": {"derivative": lambda x, p: 1 / np.hypot(1.0, x), "magnitude": "square",
                  "nonfinite": _at_inf("asinh", (_INF, _INF), (-_INF, -_INF))},
        "erf": {"derivative": lambda x, p: 2 / math.sqrt(math.pi) * np.exp(-x * x)},
        "logsigmoid": {"derivative": lambda x, p: _sig(-x),
                       "extreme_source": f"{TF_API}tf/math/log_sigmoid: 'For numerical stability, we use "
                                         "y = -tf.nn.softplus(-x)'",
                       "nonfinite": _formula_at_inf(logsigmoid, (_INF, 0.0), (-_INF, -_INF))},
        # tanh-gelu's formula has 0.044715 x**3
        "gelu": {"autocast": Autocast(ac.function("gelu", ac.M)),
                 "params": each(approximate=("none", "tanh")), "derivative": _gelu_d, "cancellation": _gelu_cancellation,
                 "magnitude": lambda p: "cube" if p.get("approximate") == "tanh" else "linear"},
        "silu": {"derivative": lambda x, p: _sig(x) * (1 + x * _sig(-x)), "cancellation": _silu_cancellation},
        "mish": {"derivative": _mish_d, "cancellation": _mish_cancellation},
        "tanhshrink": {"derivative": lambda x, p: np.tanh(x) ** 2},
        "square": {"derivative": lambda x, p: 2 * x, "magnitude": "square"},
        "cube": {"derivative": lambda x, p: 3 * x * x, "magnitude": "cube"},
        "sqrt_c": {"params": each(c=_C), "derivative": lambda x, p: x / np.sqrt(x * x + p["c"]), "magnitude": "square"},
        "log_c": {"params": each(c=_C), "derivative": lambda x, p: 2 * x / (x * x + p["c"]), "magnitude": "square"},
        # x**3 in its derivative's |x|**-3: -x (x**2 + c)**-1.5
        "rsqrt_c": {"params": each(c=_C), "derivative": lambda x, p: -x / (x * x + p["c"]) / np.sqrt(x * x + p["c"]),
                    "magnitude": "cube"},
        "log1p_sq": {"derivative": lambda x, p: 2 * x / (1 + x * x), "magnitude": "square"},
        # (x**2 + c)**p: its limit depends on p (edges.largest_magnitude)
        "pow_c": {"params": each(p=(0.5, -0.5, 1.5, -1.5, 0.25), c=_C),
                  "derivative": lambda x, p: 2 * p["p"] * x * (x * x + p["c"]) ** (p["p"] - 1), "magnitude": "pow"},
        "exp_tanh": {"params": each(k=(1.0, 0.5, 2.0, 4.0)),
                     "derivative": lambda x, p: p["k"] * _sech2(x) * np.exp(p["k"] * np.tanh(x))},
    })
