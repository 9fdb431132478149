"""Ordering ops (sort, topk, amax/amin) and the cumulative product.

Sorting and max/min are piecewise linear in their input, with kinks wherever two entries
tie: finite differences there see the average of two pieces (central differences of sort
at a tie give 1/2 to each tied entry, a 3-way tie of amax gives 1/2 instead of the documented
1/3), and near a tie within the step they see a mix. The library's input regimes have exact
ties (dyadic values, the zeros of "mixed") and near ties (tiny values closer than a relative
step of 1.2e-4). So these ops sort ``v = x + K * R``: ``R`` is a random permutation of
``0 .. m-1`` over each group of entries the op orders (drawn from the plan's seed, the same
in numpy and both frameworks), or for amax/amin a one-hot winner per group, with
``K = 256 > 2 * INPUT_MAX``: entries of ``v`` differ by at least ``K - 2 * 64 = 128``, so the
order is known, no tie is possible, and the gradient (a routing of the cotangent through the
sorting permutation) is checked by finite differences on every regime. The framework still
has to find the order: ``R`` is random per group. Ties themselves, where finite differences
are not valid, are checked against the documented conventions in
``suites/autodiff/test_documented_gradients.py`` (amax's even split, the routing of sort and
top-k through their returned indices, top-k's lower index first).

Error model: ``v`` costs one rounded addition (work 1) at magnitude up to ``K (m - 1) + |x|``;
the rest is exact data movement (Lipschitz 1 in the infinity norm). In the "tiny" regime
``x`` is below the rounding of ``K R``, so finite differences are inconclusive there (counted,
the forward value still checked).

cumprod is smooth everywhere (a polynomial), exact zeros included, where a backward that
divides by the input fails (TensorFlow's does: tensorflow#119430). Its per-op inputs keep off
exact zeros (declared as ``kinks``, see the row); the documented gradient-at-zeros test
(suites/autodiff/test_documented_gradients.py) puts one and two zeros in each row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from ..core import Array, Draw, OpSpec, Params, Shape, _amax
from ..records import OpRecord, with_classes
from .common import DIMS, _draw_axis, _draw_dims, _lst, _norm_axis, _rank_at_least, _unary

#: The separation of the ordered values: entries of x + K R differ by >= K - 2 * INPUT_MAX.
K: Final = 256.0
SEED_MAX: Final = 2**16


def ranks(shape: Shape, axes: Sequence[int], seed: int) -> Array:
    """A random permutation of ``0 .. m-1`` over the entries of each group along ``axes``."""
    rank = len(shape)
    axes = sorted({_norm_axis(a, rank) for a in axes})
    rest = [d for d in range(rank) if d not in axes]
    g = math.prod(shape[d] for d in rest)
    m = math.prod(shape[d] for d in axes)
    r = np.argsort(np.random.default_rng(seed).random((g, m)), axis=1).astype(np.float64)
    r = r.reshape([shape[d] for d in rest] + [shape[d] for d in axes])
    return np.transpose(r, np.argsort(rest + axes))


def winners(shape: Shape, axes: Sequence[int], seed: int) -> Array:
    """One-hot per group along ``axes``: the entry that ``ranks`` ranks last."""
    r = ranks(shape, axes, seed)
    m = math.prod(shape[_norm_axis(a, len(shape))] for a in axes)
    return (r == m - 1).astype(np.float64)


def _const(values: Array, framework: str) -> str:
    lit = repr(values.astype(int).tolist())
    if framework == "torch":
        return f"torch.tensor({lit}, dtype={{a}}.dtype, device={{a}}.device)"
    return f"tf.constant({lit}, dtype={{a}}.dtype)"


def _axis_of(p: Params) -> tuple[int, ...]:
    return (p["axis"],)


def _separated(p: Params, shape: Shape) -> Array:
    return ranks(shape, _axis_of(p) if "axis" in p else p["dims"], p["seed"])


# --------------------------------------------------------------------------- sort


def _sort_ref(x: Array, p: Params) -> Array:
    v = np.sort(x + K * _separated(p, x.shape), axis=p["axis"])
    return np.flip(v, p["axis"]) if p["descending"] else v


def _sort_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"axis": _draw_axis(draw, len(shapes[0])), "descending": draw(st.booleans()),
            "stable": draw(st.booleans()), "seed": draw(st.integers(0, SEED_MAX))}


def _sort_torch(p: Params, s: Sequence[Shape]) -> str:
    v = f"({{a}} + {K} * {_const(_separated(p, s[0]), 'torch')})"
    return f"torch.sort({v}, dim={{axis}}, descending={{descending}}, stable={{stable}}).values"


def _sort_tf(p: Params, s: Sequence[Shape]) -> str:
    v = f"({{a}} + {K} * {_const(_separated(p, s[0]), 'tf')})"
    return f"tf.sort({v}, axis={{axis}}, direction={'DESCENDING' if p['descending'] else 'ASCENDING'!r})"


# --------------------------------------------------------------------------- topk


def _topk_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    axis = _draw_axis(draw, len(shapes[0]))
    return {"axis": axis, "k": draw(st.integers(1, shapes[0][axis])), "largest": draw(st.booleans()),
            "sorted": draw(st.booleans()), "seed": draw(st.integers(0, SEED_MAX))}


def _topk_ref(x: Array, p: Params) -> Array:
    n = x.shape[p["axis"]]
    if not 1 <= p["k"] <= n:
        raise ValueError(f"k={p['k']} is not in 1..{n}")  # a class's k that does not fit: drawn again
    v = np.sort(x + K * _separated(p, x.shape), axis=p["axis"])
    v = np.flip(v, p["axis"]) if p["largest"] else v
    return np.take(v, range(p["k"]), axis=p["axis"])


def _topk_torch(p: Params, s: Sequence[Shape]) -> str:
    v = f"({{a}} + {K} * {_const(_separated(p, s[0]), 'torch')})"
    core = f"torch.topk({v}, {{k}}, dim={{axis}}, largest={{largest}}, sorted={{sorted}}).values"
    # sorted=False leaves the order unspecified: the values are compared sorted.
    return core if p["sorted"] else f"torch.sort({core}, dim={{axis}}, descending={{largest}}).values"


def _topk_tf(p: Params, s: Sequence[Shape]) -> str:
    # tf.math.top_k works on the last axis and returns the largest: transpose, and negate for
    # the smallest (torch's largest=False).
    rank, ax = len(s[0]), _norm_axis(p["axis"], len(s[0]))
    perm = list(range(rank))
    perm[ax], perm[-1] = perm[-1], perm[ax]
    sign = "" if p["largest"] else "-"
    v = f"tf.transpose({{a}} + {K} * {_const(_separated(p, s[0]), 'tf')}, {_lst(perm)})"
    core = f"{sign}tf.math.top_k({sign}{v}, k={{k}}, sorted={{sorted}}).values"
    if not p["sorted"]:
        core = f"tf.sort({core}, axis=-1, direction={'DESCENDING' if p['largest'] else 'ASCENDING'!r})"
    return f"tf.transpose({core}, {_lst(perm)})"


# --------------------------------------------------------------------------- amax / amin


def _minmax_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"dims": _draw_dims(draw, len(shapes[0])), "keepdims": draw(st.booleans()),
            "seed": draw(st.integers(0, SEED_MAX))}


def _minmax(name: str, sign: float, np_fn: Callable[..., Array], torch_fn: str, tf_fn: str) -> OpSpec:
    def v_of(x: Array, p: Params) -> Array:
        return x + sign * K * winners(x.shape, p["dims"], p["seed"])

    def template(framework: str, fn: str) -> Callable[[Params, Sequence[Shape]], str]:
        def render(p: Params, s: Sequence[Shape]) -> str:
            v = f"({{a}} {'+' if sign > 0 else '-'} {K} * {_const(winners(s[0], p['dims'], p['seed']), framework)})"
            if framework == "torch":
                return f"{fn}({v}, dim={{dims}}, keepdim={{keepdims}})"
            return f"{fn}({v}, axis={_lst(p['dims'])}, keepdims={{keepdims}})"

        return render

    return OpSpec(
        name, "reduction", 1, template("torch", torch_fn), template("tf", tf_fn),
        _unary(lambda x, p: np.asarray(np_fn(v_of(x, p), axis=p["dims"], keepdims=p["keepdims"]))),
        _rank_at_least(1), _minmax_plan, lambda bs, ss, p: bs[0] + K,
        lambda xs, out, p, ws: ((1.0,), 1.0), composable=False,
    )


# --------------------------------------------------------------------------- cumprod


def _cumprod_ref(x: Array, p: Params) -> Array:
    ax = _norm_axis(p["axis"], x.ndim)
    y = np.flip(x, ax) if p["reverse"] else x
    c = np.cumprod(y, axis=ax)
    if p["exclusive"]:
        head = np.ones_like(np.take(c, [0], axis=ax))
        c = np.concatenate([head, np.take(c, range(c.shape[ax] - 1), axis=ax)], axis=ax)
    return np.flip(c, ax) if p["reverse"] else c


def _cumprod_torch(p: Params, s: Sequence[Shape]) -> str:
    # torch.cumprod has neither TF's exclusive nor reverse: flips, and a shift by one.
    ax, n = _norm_axis(p["axis"], len(s[0])), s[0][_norm_axis(p["axis"], len(s[0]))]
    x = "torch.flip({a}, dims=({axis},))" if p["reverse"] else "{a}"
    c = f"torch.cumprod({x}, dim={{axis}})"
    if p["exclusive"]:
        c = (f"(lambda c: torch.cat([torch.ones_like(c.narrow({ax}, 0, 1)), c.narrow({ax}, 0, {n - 1})], "
             f"dim={ax}))({c})")
    return f"torch.flip({c}, dims=({{axis}},))" if p["reverse"] else c


def _cumprod_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any] | None:
    # Products over at most 4 entries (as prod): |x|**4 <= 64**4 fits float32 with room.
    ok = [a for a, n in enumerate(shapes[0]) if n <= 4]
    if not ok:
        return None
    axis = draw(st.sampled_from(ok))
    return {"axis": axis - len(shapes[0]) if draw(st.booleans()) else axis,
            "exclusive": draw(st.booleans()), "reverse": draw(st.booleans())}


def _cumprod_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    n = int(xs[0].shape[p["axis"]])
    return (n * max(1.0, _amax(xs[0])) ** (n - 1),), float(n)


def _ordering_ops() -> list[OpSpec]:
    def axis_len(s: Sequence[Shape], p: Params) -> int:
        return s[0][p["axis"]]

    return [
        OpSpec("sort_sep", "reduction", 1, _sort_torch, _sort_tf, _unary(_sort_ref), _rank_at_least(1), _sort_plan,
               lambda bs, ss, p: bs[0] + K * (axis_len(ss, p) - 1), lambda xs, out, p, ws: ((1.0,), 1.0),
               composable=False),
        OpSpec("topk_sep", "reduction", 1, _topk_torch, _topk_tf, _unary(_topk_ref), _rank_at_least(1), _topk_plan,
               lambda bs, ss, p: bs[0] + K * (axis_len(ss, p) - 1), lambda xs, out, p, ws: ((1.0,), 1.0),
               composable=False),
        _minmax("amax_sep", 1.0, np.max, "torch.amax", "tf.math.reduce_max"),
        _minmax("amin_sep", -1.0, np.min, "torch.amin", "tf.math.reduce_min"),
        OpSpec("cumprod", "reduction", 1, _cumprod_torch,
               "tf.math.cumprod({a}, axis={axis}, exclusive={exclusive}, reverse={reverse})",
               _unary(_cumprod_ref), _rank_at_least(1), _cumprod_plan,
               lambda bs, ss, p: max(1.0, bs[0]) ** axis_len(ss, p), _cumprod_lip,
               # Not a kink (cumprod is a polynomial): the inputs of the per-op, low-precision
               # and compiled suites keep KINK_MARGIN off exact zeros, because TensorFlow's
               # gradient is wrong there (div_no_nan(out, x): tensorflow#119430, docs/findings.md)
               # and a failing example spends minutes shrinking in every run. Exact zeros are
               # checked, in both frameworks, by test_documented_gradients.py (one and two zeros
               # per row, exclusive and reverse), where the divergence is pinned to the zero entries.
               kinks=lambda p: (0.0,), composable=False),
    ]


def ordering_records() -> list[OpRecord]:
    """Sorting, top-k, max/min over dims and cumulative products. Parameter classes:
    ``sort_sep``'s ``descending`` and ``stable`` each way, dim -1 (default) and 0;
    ``topk_sep``'s ``k`` 1 and 2, ``largest`` and ``sorted`` each way; amax/amin take the
    reductions' dims classes; ``cumprod``'s dim and TensorFlow's ``exclusive`` and ``reverse``."""
    records = with_classes(_ordering_ops(), {
        "sort_sep": [{"axis": -1, "descending": False, "stable": False}, {"axis": 0, "descending": True, "stable": True},
                     {"axis": -1, "descending": True, "stable": False}],
        "topk_sep": [{"axis": -1, "k": 1, "largest": True, "sorted": True},
                     {"axis": 0, "k": 2, "largest": False, "sorted": True},
                     {"axis": -1, "k": 2, "largest": True, "sorted": False}],
        "cumprod": [{"axis": -1, "exclusive": False, "reverse": False},
                    {"axis": 0, "exclusive": True, "reverse": False},
                    {"axis": -1, "exclusive": False, "reverse": True}, {"axis": 0, "exclusive": True, "reverse": True}],
    })
    return [replace(r, params=DIMS) if r.name in ("amax_sep", "amin_sep") else r for r in records]
