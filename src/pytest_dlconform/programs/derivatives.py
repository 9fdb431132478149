"""Analytic first derivatives of the op library's elementwise ops, in float64 numpy.

The edge-case table (:mod:`.edges`) compares gradients at extreme magnitudes with these, so
each is written to stay accurate there: no intermediate overflows where the derivative is
finite (sigmoid' = sigmoid(x) sigmoid(-x), sech^2 from sigmoids, asinh' = 1 / hypot(1, x)).
tests/integration/test_op_edges_oracle.py checks each against central differences of the
op's reference.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import numpy as np

from .core import Array, Params

SELU_ALPHA: Final = 1.6732632423543772848170429916717
SELU_SCALE: Final = 1.0507009873554804934193349852946


def _sig(x: Array) -> Array:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _sech2(x: Array) -> Array:
    return 4.0 * _sig(2 * x) * _sig(-2 * x)


def _gelu_d(x: Array, p: Params) -> Array:
    if p["approximate"] == "tanh":
        c, k = math.sqrt(2 / math.pi), 0.044715
        z = c * (x + k * x**3)
        return _sig(2 * z) + 0.5 * x * _sech2(z) * c * (1 + 3 * k * x * x)
    return 0.5 * np.vectorize(math.erfc, otypes=[np.float64])(-x / math.sqrt(2)) + x * np.exp(-0.5 * x * x) / math.sqrt(
        2 * math.pi)


def _mish_d(x: Array, p: Params) -> Array:
    t = np.tanh(np.logaddexp(0.0, x))
    return t + x * _sech2(np.logaddexp(0.0, x)) * _sig(x)


def _hardswish_d(x: Array, p: Params) -> Array:
    return np.where(x <= -3, 0.0, np.where(x >= 3, 1.0, (2 * x + 3) / 6))


#: f'(x) of each elementwise op, written to stay accurate (no spurious overflow) at extremes.
DERIVATIVES: Final[dict[str, Callable[[Array, Params], Array]]] = {
    "tanh": lambda x, p: _sech2(x),
    "sigmoid": lambda x, p: _sig(x) * _sig(-x),
    "sin": lambda x, p: np.cos(x),
    "cos": lambda x, p: -np.sin(x),
    "atan": lambda x, p: 1 / (1 + x * x),
    "asinh": lambda x, p: 1 / np.hypot(1.0, x),
    "erf": lambda x, p: 2 / math.sqrt(math.pi) * np.exp(-x * x),
    "logsigmoid": lambda x, p: _sig(-x),
    "gelu": _gelu_d,
    "silu": lambda x, p: _sig(x) * (1 + x * _sig(-x)),
    "mish": _mish_d,
    "tanhshrink": lambda x, p: np.tanh(x) ** 2,
    "square": lambda x, p: 2 * x,
    "cube": lambda x, p: 3 * x * x,
    "sqrt_c": lambda x, p: x / np.sqrt(x * x + p["c"]),
    "log_c": lambda x, p: 2 * x / (x * x + p["c"]),
    "rsqrt_c": lambda x, p: -x / (x * x + p["c"]) / np.sqrt(x * x + p["c"]),
    "log1p_sq": lambda x, p: 2 * x / (1 + x * x),
    "pow_c": lambda x, p: 2 * p["p"] * x * (x * x + p["c"]) ** (p["p"] - 1),
    "exp_tanh": lambda x, p: p["k"] * _sech2(x) * np.exp(p["k"] * np.tanh(x)),
    "relu": lambda x, p: np.where(x > 0, 1.0, 0.0),
    "leaky_relu": lambda x, p: np.where(x > 0, 1.0, p["negative_slope"]),
    "elu": lambda x, p: np.where(x > 0, 1.0, p["alpha"] * np.exp(np.minimum(x, 0.0))),
    "selu": lambda x, p: SELU_SCALE * np.where(x > 0, 1.0, SELU_ALPHA * np.exp(np.minimum(x, 0.0))),
    "celu": lambda x, p: np.where(x > 0, 1.0, np.exp(np.minimum(x, 0.0) / p["alpha"])),
    "softplus": lambda x, p: np.where(p["beta"] * x > p["threshold"], 1.0, _sig(p["beta"] * x)),
    "softsign": lambda x, p: 1 / (1 + np.abs(x)) ** 2,
    "hardtanh": lambda x, p: np.where((x > p["min_val"]) & (x < p["max_val"]), 1.0, 0.0),
    "relu6": lambda x, p: np.where((x > 0) & (x < 6), 1.0, 0.0),
    "hardsigmoid": lambda x, p: np.where((x > -3) & (x < 3), 1 / 6, 0.0),
    "hardswish": _hardswish_d,
    "abs": lambda x, p: np.sign(x),
}




#: Ops whose documented formula is a composition that torch differentiates op by op (torch's
#: softsign is input / (input.abs() + 1)): the tangent rule sums terms of these sizes, which
#: cancel (1 / (1 + |x|) - |x| / (1 + |x|)**2), as OpSpec.deriv_scale says for tanhshrink.
TANGENT_TERMS: Final[dict[str, Callable[[Array], Array]]] = {"softsign": lambda x: 2 / (1 + np.abs(x))}
