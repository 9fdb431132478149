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
