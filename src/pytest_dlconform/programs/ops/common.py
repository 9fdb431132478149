"""Helpers shared by the op families: shape predicates, parameter plans, axis handling.

Also :func:`_jacobian_norm`, the batched central difference that gives the Lipschitz
constant of ops acting on trailing dims (matrix builders, layer norm).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import product
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ..core import Array, Draw, Params, PlanFn, RefFn, Shape, _amax
from ..records import DtypeExclusion, ParamClass, Pick, param_class

#: The dtype sentences of the linear-algebra pages: torch.linalg's functions and the
#: TensorFlow op definitions behind tf.linalg (MatrixDeterminant, Svd, Qr,
#: SelfAdjointEigV2, ...). Neither lists a 16-bit float but TensorFlow's half.
_TORCH_LINALG = "Supports input of float, double, cfloat and cdouble dtypes"
_TF_LINALG = "input: Must be one of the following types: half, float32, float64, complex64, complex128"


def linalg_dtypes(api: str) -> tuple[DtypeExclusion, ...]:
    """The dtypes torch.linalg.<api> and tf.linalg.<api> document no kernel for, quoted."""
    return (DtypeExclusion("torch", ("float16", "bfloat16"), f"torch.linalg.{api} documentation: {_TORCH_LINALG!r}"),
            DtypeExclusion("tensorflow", ("bfloat16",), f"tf.linalg.{api} documentation: {_TF_LINALG!r}"))


def _any(shapes: Sequence[Shape]) -> bool:
    return True


def _rank_at_least(r: int) -> Callable[[Sequence[Shape]], bool]:
    return lambda shapes: len(shapes[0]) >= r


def _square(shapes: Sequence[Shape]) -> bool:
    s = shapes[0]
    return len(s) >= 2 and s[-1] == s[-2]


def _broadcastable(shapes: Sequence[Shape]) -> bool:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return False
    return True


def _no_params(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {}


def _choices(**options: Sequence[Any]) -> PlanFn:
    """Plan drawing each parameter from its options; the first option is the default."""

    def plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
        return {k: draw(st.sampled_from(v)) for k, v in options.items()}

    return plan


def _norm_axis(axis: int, rank: int) -> int:
    return axis % rank


def _draw_axis(draw: Draw, rank: int) -> int:
    axis = draw(st.integers(0, rank - 1))
    return axis - rank if draw(st.booleans()) else axis


def _draw_dims(draw: Draw, rank: int) -> tuple[int, ...]:
    dims = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return tuple(d - rank if draw(st.booleans()) else d for d in dims)


def _reduced_size(shape: Shape, dims: Sequence[int]) -> int:
    return math.prod(shape[_norm_axis(d, len(shape))] for d in dims)


def _lst(values: Sequence[Any]) -> str:
    return repr(list(values))


def _unary(f: Callable[[Array, Params], Array]) -> RefFn:
    return lambda xs, p, ws: f(xs[0], p)


def _axes_extra(p: Params, s: Sequence[Shape]) -> dict[str, str]:
    return {"axes": _lst(p["dims"])}


def _jacobian_norm(fn: Callable[[Array], Array], x: Array, event_ndim: int) -> float:
    """Largest row sum of |J| for fn acting independently on the trailing event_ndim dims.

    One batched central difference per event entry (the same entry of every batch member
    moves at once), so the cost is the event size, not the input size.
    """
    out = fn(x)
    rows = np.zeros(out.shape)
    for idx in product(*(range(n) for n in x.shape[x.ndim - event_ndim :])):
        sl: tuple[Any, ...] = (Ellipsis, *idx)
        h = 2.0**-20 * max(1.0, _amax(x[sl]))
        xp, xm = x.copy(), x.copy()
        xp[sl] += h
        xm[sl] -= h
        rows += np.abs(fn(xp) - fn(xm)) / (2 * h)
    return 1.25 * _amax(rows)


LAST = Pick("last", lambda s: (-1,))
FIRST = Pick("first", lambda s: (0,))
ALL = Pick("all", lambda s: tuple(range(len(s[0]))))
#: The parameter classes of reductions over ``dims`` (sum, mean, logsumexp, amax, amin).
DIMS: tuple[ParamClass, ...] = (param_class(dims=LAST, keepdims=False), param_class(dims=ALL, keepdims=True),
                                param_class(dims=FIRST, keepdims=False))
#: The operand classes of binary ops: same shape, either operand broadcast.
OPERANDS = ("same", "broadcast_b", "broadcast_a")


def lse(x: Array) -> Array:
    """log(sum(exp(x))) on the last axis, in float64 without overflow."""
    m = np.max(x, axis=-1, keepdims=True)
    return np.squeeze(m, -1) + np.log(np.sum(np.exp(x - m), axis=-1))


def softmax(x: Array) -> Array:
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def exp_weights_cancellation(xs: Sequence[Array], p: Params, gradient: bool) -> float:
    """Backward of an op that evaluates ``exp(x - m)`` (softmax weights) at primal values: the
    exponent errs by ``u (|x| + |m|) <= 2 u max|x|``, a relative error of the weights that grows
    with the inputs' magnitude, not with the tangents' (negligible in float64, 13 u in bfloat16
    at |x| = 29: explore soak, TensorFlow logcumsumexp)."""
    return 2.0 * max(_amax(v) for v in xs) if gradient else 0.0
