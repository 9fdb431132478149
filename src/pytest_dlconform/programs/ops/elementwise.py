"""Smooth elementwise unary ops (tanh, gelu, log(x^2 + c), exp(k tanh x), ...).

Smooth everywhere, so they may read any register. Their error propagation needs no
``lip``: it uses the numerical derivative of the reference (see :mod:`..errors`).
``_elementwise`` also builds the piecewise family's rows (:mod:`.piecewise`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..core import INPUT_MAX, Array, OpSpec, Params, PlanFn, Shape, Template
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
