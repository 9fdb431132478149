"""Contractions: matmul, einsum (one and two operands), tensordot and linear with constant weights."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from .. import autocast as ac
from ..core import Array, Draw, LipFn, OpSpec, Params, Shape, _amax
from ..records import AUTOCAST_LOWER, Autocast, DocumentedLimit, GraphNames, OpRecord, each, param_class, records
from .common import _broadcastable, _rank_at_least

_LETTERS: Final = "abcdefghij"


def _matmul_options(a: Shape, b: Shape) -> list[tuple[bool, bool]]:
    if len(a) < 2 or len(b) < 2 or not _broadcastable([a[:-2], b[:-2]]):
        return []
    return [(ta, tb) for ta in (False, True) for tb in (False, True)
            if (a[-2] if ta else a[-1]) == (b[-1] if tb else b[-2])]


def _matmul_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    a = np.swapaxes(xs[0], -1, -2) if p["transpose_a"] else xs[0]
    b = np.swapaxes(xs[1], -1, -2) if p["transpose_b"] else xs[1]
    return np.matmul(a, b)


def _matmul_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    ta, tb = draw(st.sampled_from(_matmul_options(*shapes)))
    return {"transpose_a": ta, "transpose_b": tb}


def _inner(shape: Shape, p: Params) -> int:
    return shape[-2] if p["transpose_a"] else shape[-1]


def _matmul_torch(p: Params, s: Sequence[Shape]) -> str:
    a = "{a}.mT" if p["transpose_a"] else "{a}"
    b = "{b}.mT" if p["transpose_b"] else "{b}"
    return f"torch.matmul({a}, {b})"


def _einsum_letters(eq: str) -> tuple[list[str], str]:
    ins, out = eq.split("->")
    return ins.split(","), out


def _einsum_sum_size(eq: str, shapes: Sequence[Shape]) -> int:
    ins, out = _einsum_letters(eq)
    sizes = {c: n for sub, s in zip(ins, shapes) for c, n in zip(sub, s)}
    return math.prod(n for c, n in sizes.items() if c not in out)


def _einsum1_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    shape = shapes[0]
    subs = list(_LETTERS[: len(shape)])
    pairs = [(i, j) for i in range(len(shape)) for j in range(i + 1, len(shape)) if shape[i] == shape[j]]
    if pairs and draw(st.booleans()):
        i, j = draw(st.sampled_from(pairs))
        subs[j] = subs[i]  # a repeated letter: a diagonal
    letters = sorted(set(subs))
    out = draw(st.lists(st.sampled_from(letters), unique=True, max_size=len(letters)))
    return {"equation": "".join(subs) + "->" + "".join(out)}


def _einsum2_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    a, b = shapes
    sub_a = _LETTERS[: len(a)]
    fresh = iter(_LETTERS[len(a):])
    sub_b = ""
    for n in b:
        shared = [c for c, m in zip(sub_a, a) if m == n and c not in sub_b]
        sub_b += draw(st.sampled_from(shared)) if shared and draw(st.booleans()) else next(fresh)
    letters = sorted(set(sub_a + sub_b))
    out = draw(st.lists(st.sampled_from(letters), unique=True, max_size=len(letters)))
    sizes = dict(zip(sub_a + sub_b, a + b))
    while math.prod(sizes[c] for c in out) > 4096:  # an outer product of two big inputs
        out.pop()
    return {"equation": f"{sub_a},{sub_b}->{''.join(out)}"}


def _einsum_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    n = _einsum_sum_size(p["equation"], [x.shape for x in xs])
    if len(xs) == 1:
        return (float(n),), n
    return (n * _amax(xs[1]), n * _amax(xs[0])), n


def _einsum_bound(bs: Sequence[float], ss: Sequence[Shape], p: Params) -> float:
    return _einsum_sum_size(p["equation"], ss) * math.prod(bs)


def _tensordot_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"axis": draw(st.integers(0, len(shapes[0]) - 1)), "k": draw(st.integers(1, 4)),
            "seed": draw(st.integers(0, 2**16))}


def _weight_lip(axis: int) -> LipFn:
    """Lipschitz constant of a contraction with a constant weight over its ``axis``."""

    def lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
        w = ws[0]  # a bias (ws[1]) shifts the output and changes no Lipschitz constant
        return (float(np.max(np.sum(np.abs(w), axis=axis))),), w.shape[axis]

    return lip


def _linear_tf(p: Params, s: Sequence[Shape]) -> str:
    # tf.linalg.matmul needs rank >= 2; F.linear also takes vectors.
    core = "tf.linalg.matmul({a}, {w}, transpose_b=True)" if len(s[0]) >= 2 else "tf.linalg.matvec({w}, {a})"
    return core + (" + {w1}" if p["bias"] else "")


def _linear_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    out = np.tensordot(xs[0], ws[0], axes=([-1], [1]))
    return out + ws[1] if p["bias"] else out


def _contraction_ops() -> list[OpSpec]:
    return [
        OpSpec("matmul", "contraction", 2, _matmul_torch,
               "tf.linalg.matmul({a}, {b}, transpose_a={transpose_a}, transpose_b={transpose_b})", _matmul_ref,
               lambda s: bool(_matmul_options(*s)), _matmul_plan,
               lambda bs, ss, p: _inner(ss[0], p) * bs[0] * bs[1],
               lambda xs, out, p, ws: ((_inner(xs[0].shape, p) * _amax(xs[1]), _inner(xs[0].shape, p) * _amax(xs[0])),
                                       _inner(xs[0].shape, p))),
        OpSpec("einsum", "contraction", 1, "torch.einsum({equation}, {a})", "tf.einsum({equation}, {a})",
               lambda xs, p, ws: np.asarray(np.einsum(p["equation"], xs[0])), lambda s: 1 <= len(s[0]) <= 4,
               _einsum1_plan, _einsum_bound, _einsum_lip),
        OpSpec("einsum2", "contraction", 2, "torch.einsum({equation}, {a}, {b})", "tf.einsum({equation}, {a}, {b})",
               lambda xs, p, ws: np.asarray(np.einsum(p["equation"], xs[0], xs[1])),
               lambda s: len(s[0]) >= 1 and len(s[1]) >= 1 and len(s[0]) + len(s[1]) <= 6,
               _einsum2_plan, _einsum_bound, _einsum_lip),
        OpSpec("tensordot", "contraction", 1, "torch.tensordot({a}, {w}, dims=([{axis}], [0]))",
               "tf.tensordot({a}, {w}, axes=[[{axis}], [0]])",
               lambda xs, p, ws: np.tensordot(xs[0], ws[0], axes=([p["axis"]], [0])), _rank_at_least(1),
               _tensordot_plan, lambda bs, ss, p: 2.0 * ss[0][p["axis"]] * bs[0], _weight_lip(0),
               weights=lambda ss, p: ((ss[0][p["axis"]], p["k"]),)),
        OpSpec("linear", "contraction", 1, lambda p, s: "F.linear({a}, {w}, {w1})" if p["bias"] else "F.linear({a}, {w})",
               _linear_tf, _linear_ref, _rank_at_least(1),
               lambda draw, s, b: {"k": draw(st.integers(1, 4)), "bias": draw(st.booleans()),
                                   "seed": draw(st.integers(0, 2**16))},
               lambda bs, ss, p: 2.0 * ss[0][-1] * bs[0] + 2.0, _weight_lip(1),
               weights=lambda ss, p: ((p["k"], ss[0][-1]),) + (((p["k"],),) if p["bias"] else ())),
    ]


def _repeated_index(p: Params) -> bool:
    """An operand of the equation names one index twice (a diagonal or a trace)."""
    return any(len(set(term)) < len(term) for term in p["equation"].split("->")[0].split(","))


#: TF.js's tf.einsum (what the converter maps TensorFlow's Einsum to) documents the limitation.
_TFJS_EINSUM_LIMIT = DocumentedLimit(
    "tfjs", _repeated_index,
    "https://js.tensorflow.org/api/latest/#einsum: 'Does not support duplicate axes for any given input tensor. "
    "E.g., equation 'ii->' is not supported.'")


def contraction_records() -> list[OpRecord]:
    """The contractions: matmul with each transpose, linear with and without bias."""
    return records(_contraction_ops(), {
        "matmul": {"params": tuple(param_class(transpose_a=a, transpose_b=b) for a in (False, True) for b in (False, True)),
                   "autocast": Autocast(ac.method("matmul", ac.M, ac.M), cpu=AUTOCAST_LOWER, cuda=AUTOCAST_LOWER),
                   "graph": GraphNames("MatMul", "MmBackward0")},
        "linear": {"params": each(bias=(False, True)), "linear": True,
                   "autocast": Autocast(ac.function("linear", ac.M, ac.M, ac.V), cpu=AUTOCAST_LOWER,
                                        cuda=AUTOCAST_LOWER)},
        "einsum": {"linear": True, "documented_limits": (_TFJS_EINSUM_LIMIT,)}, "tensordot": {"linear": True},
    })
