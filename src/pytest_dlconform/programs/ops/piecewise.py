"""Piecewise elementwise ops with kinks (relu, elu, hardtanh, torch's softplus, ...).

They only ever read input registers, and :func:`~..inputs.make_inputs` keeps those inputs
``KINK_MARGIN`` away from the kinks each row declares, so finite differences stay valid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from .. import autocast as ac
from ..core import Array, OpSpec, Params, PlanFn, Shape, Template
from ..derivatives import SELU_ALPHA, SELU_SCALE, _hardswish_d, _sig
from ..records import (
    AUTOCAST_FLOAT32,
    BOTH,
    IEEE_FORMULA,
    TF_API,
    TORCH_API,
    Autocast,
    GraphNames,
    OpRecord,
    each,
    param_class,
    records,
)
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


_INF: Final = math.inf
Rows = list[tuple[float, float, tuple[str, ...], str]]


def _at_inf(formula: str, up: float, down: float | Callable[[Params], float]) -> Callable[[Params], Rows]:
    """The documented formula at +inf and -inf, both frameworks."""
    src = f"{IEEE_FORMULA}: {formula}"
    return lambda p: [(_INF, up, BOTH, src), (-_INF, down(p) if callable(down) else down, BOTH, src)]


def _clip_rule(low: Callable[[Params], float | None]) -> Callable[[Params, float], int]:
    """Flat outside, linear inside: convex at the lower kink (rule 2), concave at the upper (3)."""
    return lambda p, k: 2 if k == low(p) else 3


def _clip_sides(low: Callable[[Params], float | None], slope: float) -> Callable[[Params, float], tuple[float, float]]:
    return lambda p, k: (0.0, slope) if k == low(p) else (slope, 0.0)


def _elu_rule(p: Params, k: float) -> int:
    if p["alpha"] == 1.0:
        return 1  # C1 at 0: both one-sided derivatives are 1
    return 2 if p["alpha"] < 1 else 4  # slopes alpha < 1: a convex left piece


def _hardtanh_inf(p: Params) -> Rows:
    return [(_INF, p.get("max_val", 1.0), BOTH, f"{IEEE_FORMULA}: max_val if x > max_val; {TF_API}"
             "tf/clip_by_value: 'Any values greater than clip_value_max are set to clip_value_max'"),
            (-_INF, p.get("min_val", -1.0), BOTH, f"{IEEE_FORMULA}: min_val if x < min_val; {TF_API}"
             "tf/clip_by_value: 'Any values less than clip_value_min are set to clip_value_min'")]


def _softplus_inf(p: Params) -> Rows:
    return [(_INF, _INF, BOTH, f"{TORCH_API}torch.nn.Softplus.html: reverts to the linear function when input x beta "
             "> threshold"), (-_INF, 0.0, BOTH, f"{IEEE_FORMULA}: log(1 + exp(beta x)) / beta")]


def piecewise_records() -> list[OpRecord]:
    """The piecewise ops with their derivatives, kink conventions and values at +-inf."""
    leaky = "x if x >= 0, slope * x otherwise"
    celu = "max(0, x) + min(0, alpha (exp(x / alpha) - 1))"
    min_val = lambda p: p.get("min_val")
    return records(_piecewise_ops(), {
        "relu": {"autocast": Autocast(ac.function("relu", ac.M)), "graph": GraphNames("Relu", "ReluBackward0"),
                 "piecewise_linear": True, "derivative": lambda x, p: np.where(x > 0, 1.0, 0.0), "kink_rule": lambda p, k: 2,
                 "one_sided": lambda p, k: (0.0, 1.0), "nonfinite": _at_inf("max(0, x)", _INF, 0.0)},
        "leaky_relu": {"piecewise_linear": True, "params": each(negative_slope=(0.125, 0.25, 0.5, 0.0625)),
                       "derivative": lambda x, p: np.where(x > 0, 1.0, p["negative_slope"]),
                       "kink_rule": lambda p, k: 2, "one_sided": lambda p, k: (p.get("negative_slope", 0.0), 1.0),
                       "nonfinite": _at_inf(leaky, _INF, -_INF)},
        "elu": {"params": each(alpha=(1.0, 0.5, 1.5)),
                "derivative": lambda x, p: np.where(x > 0, 1.0, p["alpha"] * np.exp(np.minimum(x, 0.0))),
                "kink_rule": _elu_rule, "one_sided": lambda p, k: (p.get("alpha", 1.0), 1.0),
                "extreme_source": f"{TF_API}tf/nn/elu: example tf.nn.elu(-1000.0) = -1.0",
                "nonfinite": lambda p: [(_INF, _INF, BOTH, f"{IEEE_FORMULA}: x if x > 0"),
                                        (-_INF, -p.get("alpha", 1.0), BOTH, f"{IEEE_FORMULA}: alpha (exp(x) - 1)")]},
        # the slope drops at 0 with a convex left piece: neither rule 2 nor 3
        "selu": {"derivative": lambda x, p: SELU_SCALE * np.where(x > 0, 1.0, SELU_ALPHA * np.exp(np.minimum(x, 0.0))),
                 "kink_rule": lambda p, k: 4, "one_sided": lambda p, k: (SELU_SCALE * SELU_ALPHA, SELU_SCALE),
                 "nonfinite": lambda p: [(_INF, _INF, BOTH, f"{IEEE_FORMULA}: scale x"),
                                         (-_INF, -SELU_SCALE * SELU_ALPHA, BOTH,
                                          f"{IEEE_FORMULA}: scale alpha (exp(x) - 1)")]},
        "celu": {"params": each(alpha=(1.0, 0.5, 2.0)),
                 "derivative": lambda x, p: np.where(x > 0, 1.0, np.exp(np.minimum(x, 0.0) / p["alpha"])),
                 "kink_rule": lambda p, k: 1, "one_sided": lambda p, k: (1.0, 1.0),
                 "nonfinite": _at_inf(celu, _INF, lambda p: -p.get("alpha", 1.0))},
        # Thresholds 20 (default), 1 and 5: inputs fall on both sides of beta * x = threshold.
        # Linear above beta x = threshold, softplus (derivative sigmoid(beta x)) up to it.
        "softplus": {"autocast": Autocast(ac.function("softplus", ac.M), cuda=AUTOCAST_FLOAT32),
                     "params": (param_class(beta=1.0, threshold=20.0), param_class(beta=0.5, threshold=1.0),
                                param_class(beta=2.0, threshold=5.0)),
                     "derivative": lambda x, p: np.where(p["beta"] * x > p["threshold"], 1.0, _sig(p["beta"] * x)),
                     "kink_rule": lambda p, k: 4, "one_sided": lambda p, k: (float(_sig(np.array(p["beta"] * k))), 1.0),
                     "kink_exact": False,  # log1p(exp(threshold)) / beta, rounded
                     "extreme_source": f"{TORCH_API}torch.nn.Softplus.html: 'For numerical stability the "
                                       "implementation reverts to the linear function when input x beta > threshold'",
                     "nonfinite": _softplus_inf},
        # torch's softsign is input / (input.abs() + 1), differentiated op by op: the tangent
        # rule sums terms of these sizes, which cancel (1 / (1 + |x|) - |x| / (1 + |x|)**2).
        "softsign": {"derivative": lambda x, p: 1 / (1 + np.abs(x)) ** 2, "tangent_terms": lambda x: 2 / (1 + np.abs(x)),
                     "kink_rule": lambda p, k: 1, "one_sided": lambda p, k: (1.0, 1.0),
                     "own_program_ids": "TensorFlow's forward mode through tf.nn.softsign (docs/findings.md)"},
        "hardtanh": {"piecewise_linear": True,
                     "params": (param_class(min_val=-1.0, max_val=1.0), param_class(min_val=-2.0, max_val=0.5),
                                param_class(min_val=-0.5, max_val=2.0)),
                     "derivative": lambda x, p: np.where((x > p["min_val"]) & (x < p["max_val"]), 1.0, 0.0),
                     "kink_rule": _clip_rule(min_val), "one_sided": _clip_sides(min_val, 1.0),
                     "nonfinite": _hardtanh_inf},
        "relu6": {"piecewise_linear": True, "derivative": lambda x, p: np.where((x > 0) & (x < 6), 1.0, 0.0),
                  "kink_rule": _clip_rule(lambda p: 0.0), "one_sided": _clip_sides(lambda p: 0.0, 1.0),
                  "nonfinite": _at_inf("min(max(0, x), 6)", 6.0, 0.0)},
        "hardsigmoid": {"own_program_ids": "torch's float64 backward of F.hardsigmoid (docs/findings.md)",
                        "piecewise_linear": True, "derivative": lambda x, p: np.where((x > -3) & (x < 3), 1 / 6, 0.0),
                        "kink_rule": _clip_rule(lambda p: -3.0), "one_sided": _clip_sides(lambda p: -3.0, 1 / 6),
                        "nonfinite": lambda p: [(_INF, 1.0, BOTH, f"{IEEE_FORMULA}: 1 if x >= 3"),
                                                (-_INF, 0.0, BOTH, f"{IEEE_FORMULA}: 0 if x <= -3")]},
        # TensorFlow's hardswish here is x * relu6(x + 3) / 6, which is -inf * 0 at -inf: undefined.
        "hardswish": {"derivative": _hardswish_d, "kink_rule": lambda p, k: 4,
                      "one_sided": lambda p, k: (0.0, -0.5) if k == -3.0 else (1.5, 1.0),
                      "nonfinite": lambda p: [(_INF, _INF, BOTH, f"{IEEE_FORMULA}: x if x >= 3"),
                                              (-_INF, 0.0, ("torch",), f"{IEEE_FORMULA}: 0 if x <= -3")]},
        "abs": {"piecewise_linear": True, "derivative": lambda x, p: np.sign(x), "kink_rule": lambda p, k: 2,
                "one_sided": lambda p, k: (-1.0, 1.0),
                "nonfinite": _at_inf("|x|", _INF, _INF)},
    })
