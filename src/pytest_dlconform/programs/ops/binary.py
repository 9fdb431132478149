"""Binary elementwise ops with broadcasting (add, sub, mul, a / (b^2 + c), logaddexp)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .. import autocast as ac
from ..core import Array, OpSpec, Params, PlanFn, Shape, Template, _amax
from ..records import TORCH_API, Autocast, OpRecord, each, records
from .common import OPERANDS, _broadcastable, _choices, _lst, _no_params, exp_weights_cancellation


def _binary(name: str, ref: Callable[[Array, Array, Params], Array], torch: Template, tf: Template,
            bound: Callable[[float, float, Params], float], lip: Callable[[Array, Array, Params], tuple[float, float]],
            plan: PlanFn = _no_params, extras: Callable[[Params, Sequence[Shape]], dict[str, str]] | None = None) -> OpSpec:
    return OpSpec(
        name, "binary", 2, torch, tf, lambda xs, p, ws: ref(xs[0], xs[1], p), _broadcastable, plan,
        lambda bs, ss, p: bound(bs[0], bs[1], p), lambda xs, out, p, ws: (lip(xs[0], xs[1], p), 1.0), extras=extras,
    )


def _binary_ops() -> list[OpSpec]:
    ones = lambda a, b, p: (1.0, 1.0)
    # max over t of 2|t|/(t^2+c)^2 is (9 / (8 sqrt 3)) c^-1.5
    div_lip = lambda a, b, p: (1 / p["c"], _amax(a) * 0.65 * p["c"] ** -1.5)
    bshape = lambda p, s: {"shape": _lst(np.broadcast_shapes(*s))}
    return [
        _binary("add", lambda a, b, p: a + b, "torch.add({a}, {b})", "tf.math.add({a}, {b})",
                lambda x, y, p: x + y, ones),
        _binary("sub", lambda a, b, p: a - b, "torch.sub({a}, {b})", "tf.math.subtract({a}, {b})",
                lambda x, y, p: x + y, ones),
        _binary("mul", lambda a, b, p: a * b, "torch.mul({a}, {b})", "tf.math.multiply({a}, {b})",
                lambda x, y, p: x * y, lambda a, b, p: (_amax(b), _amax(a))),
        _binary("div_c", lambda a, b, p: a / (b * b + p["c"]), "torch.div({a}, torch.square({b}) + {c})",
                "tf.math.divide({a}, tf.math.square({b}) + {c})", lambda x, y, p: x / p["c"], div_lip,
                plan=_choices(c=(1.0, 0.25, 4.0))),
        # TF has no broadcasting logaddexp outside tf.experimental.numpy: logsumexp of a stack.
        _binary("logaddexp", lambda a, b, p: np.logaddexp(a, b), "torch.logaddexp({a}, {b})",
                "tf.math.reduce_logsumexp(tf.stack([tf.broadcast_to({a}, {shape}), tf.broadcast_to({b}, {shape})]), axis=0)",
                lambda x, y, p: max(x, y) + 1, ones, extras=bshape),
    ]


def binary_records() -> list[OpRecord]:
    """The binary ops, each with its operand classes; logaddexp is documented as stable."""
    operands = {"params": each(operands=OPERANDS)}
    inf = float("inf")
    return records(_binary_ops(), {
        "add": {**operands, "linear": True, "autocast": Autocast(ac.method("add", ac.M, ac.M), aten="add.Tensor")},
        "sub": {**operands, "linear": True},
        "mul": {**operands, "autocast": Autocast(ac.method("mul", ac.M, ac.M), aten="mul.Tensor")},
        "div_c": {"params": each(c=(1.0, 0.25, 4.0), operands=OPERANDS)},
        "logaddexp": {**operands, "stable": True, "cancellation": exp_weights_cancellation,
                      "stable_source": f"{TORCH_API}torch.logaddexp.html: 'useful in statistics where the calculated "
                                       "probabilities of events may be so small as to exceed the range of normal "
                                       "floating point numbers'; TensorFlow: tf.math.reduce_logsumexp of the pair (its "
                                       "stability sentence)",
                      "nonfinite_vectors": (("-inf,0|-inf,-inf|inf,0", ((-inf, -inf, inf), (0.0, -inf, 0.0)),
                                             (0.0, -inf, inf)),)},
    })
