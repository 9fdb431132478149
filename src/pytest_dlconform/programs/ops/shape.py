"""Shape ops: pure data movement (permute, reshape, slice, gather, concat, ...).

Exact and 1-Lipschitz: they add no rounding and preserve the magnitude bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .. import autocast as ac
from ..core import Array, Draw, OpSpec, Params, PlanFn, Shape, Template
from ..records import AUTOCAST_PROMOTE, Autocast, OpRecord, each, param_class, records
from .common import _any, _axes_extra, _draw_axis, _draw_dims, _lst, _rank_at_least, _unary


def _move(name: str, ref: Callable[[Array, Params], Array], torch: Template, tf: Template,
          accepts: Callable[[Sequence[Shape]], bool], plan: PlanFn,
          extras: Callable[[Params, Sequence[Shape]], dict[str, str]] | None = None) -> OpSpec:
    """Pure data movement: exact, 1-Lipschitz, bound preserved."""
    return OpSpec(name, "shape", 1, torch, tf, _unary(ref), accepts, plan, lambda bs, ss, p: bs[0],
                  lambda xs, out, p, ws: ((1.0,), 0.0), extras=extras)


def _permute_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"perm": tuple(draw(st.permutations(range(len(shapes[0])))))}


def _prime_factors(n: int) -> list[int]:
    out, f = [], 2
    while n > 1:
        while n % f == 0:
            out.append(f)
            n //= f
        f += 1
    return out


def _reshape_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    factors = draw(st.permutations(_prime_factors(math.prod(shapes[0]))))
    dims: list[int] = []
    for f in factors:
        if dims and draw(st.booleans()):
            dims[-1] *= f
        else:
            dims.append(f)
    if draw(st.booleans()):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    if dims and draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1  # let the framework infer one dim
    return {"shape": tuple(dims)}


def _flip_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"dims": _draw_dims(draw, len(shapes[0]))}


def _roll_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    dims = _draw_dims(draw, len(shapes[0]))
    n = [shapes[0][d] for d in dims]
    return {"shifts": tuple(draw(st.integers(-2 * k, 2 * k)) for k in n), "dims": dims}


def _slice_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any] | None:
    axis = draw(st.integers(0, len(shapes[0]) - 1))
    n = shapes[0][axis]
    start = draw(st.none() | st.integers(-n, n - 1))
    stop = draw(st.none() | st.integers(-n, n))
    step = draw(st.integers(1, 3))
    if not range(n)[slice(start, stop, step)]:
        return None
    return {"axis": axis, "start": start, "stop": stop, "step": step}


def _slice_index(p: Params) -> tuple[Any, ...]:
    return (slice(None),) * p["axis"] + (slice(p["start"], p["stop"], p["step"]),)


def _slice_extras(p: Params, s: Sequence[Shape]) -> dict[str, str]:
    part = ":".join("" if v is None else str(v) for v in (p["start"], p["stop"], p["step"]))
    return {"index": ", ".join([":"] * p["axis"] + [part])}


def _gather_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    axis = _draw_axis(draw, len(shapes[0]))
    n = shapes[0][axis]
    return {"axis": axis, "indices": tuple(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n + 2)))}


def _broadcast_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any] | None:
    lead = draw(st.lists(st.integers(1, 3), max_size=2))
    target = tuple(lead) + tuple(draw(st.integers(1, 3)) if n == 1 else n for n in shapes[0])
    return {"shape": target} if math.prod(target) <= 4096 else None


def _shape_ops() -> list[OpSpec]:
    return [
        _move("permute", lambda x, p: np.transpose(x, p["perm"]), "torch.permute({a}, {perm})",
              "tf.transpose({a}, perm={tf_perm})", _rank_at_least(2), _permute_plan,
              extras=lambda p, s: {"tf_perm": _lst(p["perm"])}),
        _move("reshape", lambda x, p: np.reshape(x, p["shape"]), "torch.reshape({a}, {shape})",
              "tf.reshape({a}, {tf_shape})", _any, _reshape_plan, extras=lambda p, s: {"tf_shape": _lst(p["shape"])}),
        _move("flip", lambda x, p: np.flip(x, p["dims"]), "torch.flip({a}, dims={dims})",
              "tf.reverse({a}, axis={axes})", _rank_at_least(1), _flip_plan, extras=_axes_extra),
        _move("roll", lambda x, p: np.roll(x, p["shifts"], p["dims"]), "torch.roll({a}, shifts={shifts}, dims={dims})",
              "tf.roll({a}, shift={tf_shifts}, axis={axes})", _rank_at_least(1), _roll_plan,
              extras=lambda p, s: {"tf_shifts": _lst(p["shifts"]), **_axes_extra(p, s)}),
        # Basic slicing with a positive step (torch has no negative steps).
        _move("slice", lambda x, p: x[_slice_index(p)], "{a}[{index}]", "{a}[{index}]", _rank_at_least(1),
              _slice_plan, extras=_slice_extras),
        # Repeated indices: the gradient must accumulate (scatter-add).
        _move("gather", lambda x, p: np.take(x, p["indices"], axis=p["axis"]),
              "torch.index_select({a}, {axis}, torch.tensor({indices}, device={a}.device))",
              "tf.gather({a}, {tf_indices}, axis={axis})", _rank_at_least(1), _gather_plan,
              extras=lambda p, s: {"tf_indices": _lst(p["indices"])}),
        _move("broadcast_to", lambda x, p: np.broadcast_to(x, p["shape"]).copy(), "torch.broadcast_to({a}, {shape})",
              "tf.broadcast_to({a}, {tf_shape})", _any, _broadcast_plan,
              extras=lambda p, s: {"tf_shape": _lst(p["shape"])}),
        OpSpec("concat", "shape", 2, "torch.cat([{a}, {b}], dim={axis})", "tf.concat([{a}, {b}], axis={axis})",
               lambda xs, p, ws: np.concatenate(xs, axis=p["axis"]), _concatenable, _concat_plan,
               lambda bs, ss, p: max(bs), lambda xs, out, p, ws: ((1.0, 1.0), 0.0)),
        OpSpec("stack", "shape", 2, "torch.stack([{a}, {b}], dim={axis})", "tf.stack([{a}, {b}], axis={axis})",
               lambda xs, p, ws: np.stack(xs, axis=p["axis"]), lambda s: s[0] == s[1],
               lambda draw, s, b: {"axis": draw(st.integers(-len(s[0]) - 1, len(s[0])))},
               lambda bs, ss, p: max(bs), lambda xs, out, p, ws: ((1.0, 1.0), 0.0)),
    ]


def _concatenable(shapes: Sequence[Shape]) -> bool:
    a, b = shapes
    return len(a) == len(b) >= 1 and sum(x != y for x, y in zip(a, b)) <= 1


def _concat_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    a, b = shapes
    differ = [d for d, (x, y) in enumerate(zip(a, b)) if x != y]
    axis = differ[0] if differ else draw(st.integers(0, len(a) - 1))
    return {"axis": axis - len(a) if draw(st.booleans()) else axis}


def shape_records() -> list[OpRecord]:
    """The data-movement ops (all linear); gather's repeated indices make its gradient accumulate."""
    classes = {"slice": each(step=(1, 2, 3)), "gather": (param_class(), param_class(indices=(0, 0)))}
    specs = _shape_ops()
    autocast = {"stack": Autocast(ac.call(lambda t, x: t.stack(x), ac.M, ac.M), cpu=AUTOCAST_PROMOTE)}
    return records(specs, {s.name: {"linear": True, **({"params": classes[s.name]} if s.name in classes else {}),
                                    **({"autocast": autocast[s.name]} if s.name in autocast else {})}
                           for s in specs})
