"""The pieces of the op records' analytic derivatives, in float64 numpy.

The edge cases (:mod:`.edges`) compare gradients at extreme magnitudes with each record's
``derivative``, so the pieces stay accurate there: no intermediate overflows where the
derivative is finite (sigmoid' = sigmoid(x) sigmoid(-x), sech^2 from sigmoids).
tests/integration/test_op_edges_oracle.py checks every derivative against central
differences of the op's reference.
"""

from __future__ import annotations

import math
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
