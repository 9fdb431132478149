"""Piecewise elementwise ops with kinks (relu, elu, hardtanh, torch's softplus, ...).

They only ever read input registers, and :func:`~..inputs.make_inputs` keeps those inputs
``KINK_MARGIN`` away from the kinks each row declares, so finite differences stay valid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from ..core import Array, OpSpec, Params, PlanFn, Shape, Template
from .common import _choices, _no_params
from .elementwise import _elementwise


def _piecewise(name: str, ref: Callable[[Array, Params], Array], torch: Template, tf: Template,
               bound: Callable[[float, Params], float], kinks: Callable[[Params], tuple[float, ...]],
               plan: PlanFn = _no_params, abs_scale: Callable[[Array, Params], Array] | None = None) -> OpSpec:
    return _elementwise(name, ref, torch, tf, bound, category="piecewise", plan=plan, kinks=kinks, abs_scale=abs_scale)


_SELU_ALPHA: Final = 1.6732632423543772848170429916717
_SELU_SCALE: Final = 1.0507009873554804934193349852946


def _elu_ref(x: Array, alpha: float) -> Array:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def _softplus_ref(x: Array, p: Params) -> Array:
    bx = p["beta"] * x
    return np.where(bx > p["threshold"], x, np.logaddexp(0.0, bx) / p["beta"])


def _hardsigmoid_ref(x: Array) -> Array:
    return np.clip(x / 6 + 0.5, 0.0, 1.0)


def _elu_tf(p: Params, shapes: Sequence[Shape]) -> str:
    # tf.nn.elu has no alpha (it is 1): other alphas are composed from public ops.
    if p["alpha"] == 1.0:
        return "tf.nn.elu({a})"
    return "tf.where({a} > 0, {a}, {alpha} * tf.math.expm1(tf.minimum({a}, 0.0)))"


def _piecewise_ops() -> list[OpSpec]:
    zero = lambda p: (0.0,)
    neg = lambda x, p: np.where(x < 0, 1.0, 0.0)  # exp(x) - 1 may cancel for x < 0
    return [
        _piecewise("relu", lambda x, p: np.maximum(x, 0.0), "torch.relu({a})", "tf.nn.relu({a})", lambda b, p: b, zero),
        # Defaults differ: torch negative_slope=0.01, tf.nn.leaky_relu alpha=0.2. TF's LeakyRelu
        # keeps alpha in a float32 attribute, so in float64 its slope is float32(alpha): only
        # slopes exact in float32 are drawn here (0.01 and 0.2 would differ by ~2e-10).
        _piecewise("leaky_relu", lambda x, p: np.where(x > 0, x, p["negative_slope"] * x),
                   "F.leaky_relu({a}, negative_slope={negative_slope})", "tf.nn.leaky_relu({a}, alpha={negative_slope})",
                   lambda b, p: b, zero, plan=_choices(negative_slope=(0.125, 0.25, 0.5, 0.0625))),
        # elu with alpha != 1 has a kink at 0 (slopes alpha and 1); alpha == 1 is C1 only.
        _piecewise("elu", lambda x, p: _elu_ref(x, p["alpha"]), "F.elu({a}, alpha={alpha})", _elu_tf,
                   lambda b, p: max(b, p["alpha"]), zero, plan=_choices(alpha=(1.0, 0.5, 1.5)),
                   abs_scale=lambda x, p: p["alpha"] * neg(x, p)),
        _piecewise("selu", lambda x, p: _SELU_SCALE * _elu_ref(x, _SELU_ALPHA), "F.selu({a})", "tf.nn.selu({a})",
                   lambda b, p: 1.06 * max(b, 1.7), zero, abs_scale=lambda x, p: 2 * neg(x, p)),
        _piecewise("celu", lambda x, p: np.where(x > 0, x, p["alpha"] * np.expm1(np.minimum(x, 0.0) / p["alpha"])),
                   "F.celu({a}, alpha={alpha})",
                   "tf.where({a} > 0, {a}, {alpha} * tf.math.expm1(tf.minimum({a}, 0.0) / {alpha}))",
                   lambda b, p: max(b, p["alpha"]), zero, plan=_choices(alpha=(1.0, 0.5, 2.0)),
                   abs_scale=lambda x, p: p["alpha"] * neg(x, p)),
        # torch's softplus returns x where beta*x > threshold: a jump of log1p(exp(-threshold))/beta,
        # hence piecewise. TF's softplus has neither beta nor threshold: composed with tf.where.
        _piecewise("softplus", _softplus_ref, "F.softplus({a}, beta={beta}, threshold={threshold})",
                   "tf.where({beta} * {a} > {threshold}, {a}, tf.math.softplus({beta} * {a}) / {beta})",
                   lambda b, p: b + 1 / p["beta"], lambda p: (p["threshold"] / p["beta"],),
                   plan=_choices(beta=(1.0, 0.5, 2.0), threshold=(20.0, 1.0, 5.0))),
        _piecewise("softsign", lambda x, p: x / (1 + np.abs(x)), "F.softsign({a})", "tf.nn.softsign({a})",
                   lambda b, p: 1.0, zero),
        _piecewise("hardtanh", lambda x, p: np.clip(x, p["min_val"], p["max_val"]),
                   "F.hardtanh({a}, min_val={min_val}, max_val={max_val})",
                   "tf.clip_by_value({a}, {min_val}, {max_val})", lambda b, p: 2.0,
                   lambda p: (p["min_val"], p["max_val"]),
                   plan=_choices(min_val=(-1.0, -2.0, -0.5), max_val=(1.0, 0.5, 2.0))),
        _piecewise("relu6", lambda x, p: np.clip(x, 0.0, 6.0), "F.relu6({a})", "tf.nn.relu6({a})",
                   lambda b, p: 6.0, lambda p: (0.0, 6.0)),
        # torch: relu6(x + 3) / 6. Keras 2's hard_sigmoid was 0.2 x + 0.5: composed here instead.
        _piecewise("hardsigmoid", lambda x, p: _hardsigmoid_ref(x), "F.hardsigmoid({a})",
                   "tf.nn.relu6({a} + 3.0) / 6.0", lambda b, p: 1.0, lambda p: (-3.0, 3.0)),
        _piecewise("hardswish", lambda x, p: x * _hardsigmoid_ref(x), "F.hardswish({a})",
                   "{a} * tf.nn.relu6({a} + 3.0) / 6.0", lambda b, p: b, lambda p: (-3.0, 3.0)),
        _piecewise("abs", lambda x, p: np.abs(x), "torch.abs({a})", "tf.math.abs({a})", lambda b, p: b, zero),
    ]
