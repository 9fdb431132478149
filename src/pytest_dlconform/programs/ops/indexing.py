"""Indexing with accumulation: scatter_add, index_add, index_put and embedding lookups.

The float operands are differentiated (``self`` and the scattered values, the embedding
table); the indices are parameters the plan draws (from a seed, rendered into the program
as constants) and always REPEAT: a scatter must add every value sent to one place (the
forward accumulates), and the transpose of a lookup must add the cotangents of every
position that read one row (the embedding's gradient accumulates). ``_repeat`` forces a
repeated index in every group that has two entries.

TensorFlow has no scatter along a dim: ``tf.tensor_scatter_nd_add`` takes full coordinates,
which the templates spell out (``_nd_index``), or the leading coordinate after moving
the dim to the front. ``index_put(accumulate=False)`` is documented only for distinct
indices ("undefined if indices contain duplicate elements"): that class puts at the
distinct indices ``_distinct`` makes from the drawn ones.

Error model: an output entry sums ``1 + m`` terms (``m`` the largest number of values sent
to one place), so the Lipschitz constant of the scattered operand is ``m`` in the infinity
norm and the rounding work is ``m``; a lookup is exact, and its transpose sums ``m``
cotangents (work ``m``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from ..core import Array, Draw, OpSpec, Params, Shape
from ..records import OpRecord, with_classes
from .common import _lst, _norm_axis, _rank_at_least

SEED_MAX: Final = 2**16


def _repeat(index: Array, axis: int) -> Array:
    """Entry 1 along ``axis`` repeats entry 0: every group of two or more has a repeat."""
    if index.shape[axis] >= 2:
        moved = np.moveaxis(index, axis, 0)  # a view: writing it writes index
        moved[1] = moved[0]
    return index


def scatter_index(shape: Shape, axis: int, n: int, seed: int) -> Array:
    """Indices in ``0 .. n-1`` of ``shape`` (the scattered values' shape), repeats along ``axis``."""
    index = np.random.default_rng(seed).integers(0, n, size=shape)
    return _repeat(index, _norm_axis(axis, len(shape)))


def _multiplicity(index: Array, axis: int) -> int:
    """The most values a scatter along ``axis`` sends to one place."""
    moved = np.moveaxis(index, axis, -1).reshape(-1, index.shape[axis])
    return max(int(np.bincount(row).max()) for row in moved) if moved.size else 0


def _nd_index(index: Array, axis: int) -> list[list[int]]:
    """Full coordinates for tf.tensor_scatter_nd_add, one per entry of ``index`` (C order)."""
    out = []
    for pos in product(*(range(n) for n in index.shape)):
        coord = list(pos)
        coord[axis] = int(index[pos])
        out.append(coord)
    return out


# --------------------------------------------------------------------------- scatter_add


def _scatter_accepts(shapes: Sequence[Shape]) -> bool:
    a, b = shapes
    return len(a) == len(b) >= 1


def _scatter_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any] | None:
    a, b = shapes
    # torch: index.size(d) <= self.size(d) for d != dim (index has src's shape).
    ok = [d for d in range(len(a)) if all(b[e] <= a[e] for e in range(len(a)) if e != d)]
    if not ok:
        return None
    dim = draw(st.sampled_from(ok))
    return {"dim": dim - len(a) if draw(st.booleans()) else dim, "seed": draw(st.integers(0, SEED_MAX))}


def _scatter_idx(p: Params, shapes: Sequence[Shape]) -> Array:
    a, b = shapes
    dim = _norm_axis(p["dim"], len(a))
    return scatter_index(b, dim, a[dim], p["seed"])


def _scatter_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    a, b = xs
    dim = _norm_axis(p["dim"], a.ndim)
    index = _scatter_idx(p, [a.shape, b.shape])
    out = a.copy()
    coords = np.array(_nd_index(index, dim), dtype=int).reshape(-1, a.ndim)
    np.add.at(out, tuple(coords.T), b.reshape(-1))
    return out


def _scatter_extras(p: Params, s: Sequence[Shape]) -> dict[str, str]:
    index = _scatter_idx(p, s)
    dim = _norm_axis(p["dim"], len(s[0]))
    return {"index": repr(index.tolist()), "nd_index": repr(_nd_index(index, dim))}


def _scatter_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    a, b = xs
    m = _multiplicity(_scatter_idx(p, [a.shape, b.shape]), _norm_axis(p["dim"], a.ndim))
    return (1.0, float(m)), float(m)


# --------------------------------------------------------------------------- index_add / index_put


def _index_add_accepts(shapes: Sequence[Shape]) -> bool:
    a, b = shapes
    return len(a) == len(b) >= 1 and sum(x != y for x, y in zip(a, b)) <= 1


def _index_add_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    a, b = shapes
    differ = [d for d in range(len(a)) if a[d] != b[d]]
    dim = differ[0] if differ else draw(st.integers(0, len(a) - 1))
    return {"dim": dim - len(a) if draw(st.booleans()) else dim, "alpha": draw(st.sampled_from((1.0, 0.5, -2.0))),
            "seed": draw(st.integers(0, SEED_MAX))}


def _index(p: Params, n: int, k: int) -> list[int]:
    return [int(i) for i in scatter_index((k,), 0, n, p["seed"])]


def _add_idx(p: Params, shapes: Sequence[Shape]) -> list[int]:
    a, b = shapes
    dim = _norm_axis(p["dim"], len(a))
    if any(a[d] != b[d] for d in range(len(a)) if d != dim):
        # A class's dim where the operands differ elsewhere (numpy would broadcast): drawn again.
        raise ValueError(f"index_add along {dim}: self {a} and source {b} must agree in every other dim")
    return _index(p, a[dim], b[dim])


def _index_add_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    a, b = xs
    dim = _norm_axis(p["dim"], a.ndim)
    out = np.moveaxis(a.copy(), dim, 0)
    np.add.at(out, _add_idx(p, [a.shape, b.shape]), p["alpha"] * np.moveaxis(b, dim, 0))
    return np.moveaxis(out, 0, dim)


def _front(p: Params, s: Sequence[Shape]) -> list[int]:
    """The permutation that swaps the dim with the first one (its own inverse)."""
    perm = list(range(len(s[0])))
    dim = _norm_axis(p["dim"], len(s[0]))
    perm[0], perm[dim] = perm[dim], perm[0]
    return perm


def _index_add_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    m = max(np.bincount(_add_idx(p, [xs[0].shape, xs[1].shape])))
    return (1.0, float(m) * abs(p["alpha"])), float(m + 1)


def _index_put_accepts(shapes: Sequence[Shape]) -> bool:
    a, b = shapes
    return len(a) == len(b) >= 1 and a[1:] == b[1:]


def _index_put_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    a, b = shapes
    # Distinct indices (accumulate=False) need as many rows as values.
    accumulate = draw(st.booleans()) if b[0] <= a[0] else True
    return {"accumulate": accumulate, "seed": draw(st.integers(0, SEED_MAX))}


def distinct(index: Sequence[int], n: int) -> list[int]:
    """The drawn indices with each repeat replaced by the smallest index not yet used."""
    if len(index) > n:
        raise ValueError(f"{len(index)} distinct indices do not fit in {n}")  # drawn again
    seen: set[int] = set()
    out = []
    for i in index:
        j = i if i not in seen else min(set(range(n)) - seen)
        seen.add(j)
        out.append(j)
    return out


def _put_idx(p: Params, shapes: Sequence[Shape]) -> list[int]:
    a, b = shapes
    index = _index(p, a[0], b[0])
    return index if p["accumulate"] else distinct(index, a[0])


def _index_put_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    a, b = xs
    out = a.copy()
    idx = _put_idx(p, [a.shape, b.shape])
    if p["accumulate"]:
        np.add.at(out, idx, b)
    else:
        out[idx] = b
    return out


def _index_put_tf(p: Params, s: Sequence[Shape]) -> str:
    fn = "tf.tensor_scatter_nd_add" if p["accumulate"] else "tf.tensor_scatter_nd_update"
    return f"{fn}({{a}}, tf.constant({[[i] for i in _put_idx(p, s)]!r}), {{b}})"


def _index_put_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    m = max(np.bincount(_put_idx(p, [xs[0].shape, xs[1].shape])))
    return (1.0, float(m)), float(m + 1)


# --------------------------------------------------------------------------- embedding


def _embedding_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"ids_shape": draw(st.sampled_from(((5,), (2, 3)))), "seed": draw(st.integers(0, SEED_MAX)),
            "tf_api": draw(st.sampled_from(("embedding_lookup", "gather")))}


def embedding_ids(p: Params, vocab: int) -> Array:
    ids = np.random.default_rng(p["seed"]).integers(0, vocab, size=p["ids_shape"])
    flat = ids.reshape(-1)
    flat[1] = flat[0]  # a repeated id: its row's gradient is a sum
    return flat.reshape(ids.shape)


def _embedding_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    return xs[0][embedding_ids(p, xs[0].shape[0])]


def _embedding_tf(p: Params, s: Sequence[Shape]) -> str:
    ids = repr(embedding_ids(p, s[0][0]).tolist())
    if p["tf_api"] == "gather":
        return f"tf.gather({{a}}, tf.constant({ids}))"
    return f"tf.nn.embedding_lookup({{a}}, tf.constant({ids}))"


def _embedding_extras(p: Params, s: Sequence[Shape]) -> dict[str, str]:
    return {"ids": repr(embedding_ids(p, s[0][0]).tolist()), "vocab": str(s[0][0]),
            "out_shape": repr(tuple(p["ids_shape"]) + tuple(s[0][1:]))}


def _embedding_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    ids = embedding_ids(p, xs[0].shape[0])
    return (1.0,), float(np.bincount(ids.reshape(-1)).max())


def _indexing_ops() -> list[OpSpec]:
    # A-priori magnitude: at most a whole column of the scattered operand lands on one place.
    two = lambda bs, ss, p: bs[0] + max(ss[1]) * bs[1]
    return [
        OpSpec("scatter_add", "indexing", 2, "torch.scatter_add({a}, {dim}, torch.tensor({index}, device={a}.device), {b})",
               "tf.tensor_scatter_nd_add({a}, tf.constant({nd_index}), tf.reshape({b}, [-1]))",
               _scatter_ref, _scatter_accepts, _scatter_plan, two, _scatter_lip, extras=_scatter_extras,
               composable=False),
        OpSpec("index_add", "indexing", 2,
               "torch.index_add({a}, {dim}, torch.tensor({index}, device={a}.device), {b}, alpha={alpha})",
               "tf.transpose(tf.tensor_scatter_nd_add(tf.transpose({a}, {perm}), tf.constant({index2}), "
               "{alpha} * tf.transpose({b}, {perm})), {perm})",
               _index_add_ref, _index_add_accepts, _index_add_plan,
               lambda bs, ss, p: bs[0] + abs(p["alpha"]) * max(ss[1]) * bs[1], _index_add_lip,
               extras=lambda p, s: {"index": repr(_add_idx(p, s)), "index2": repr([[i] for i in _add_idx(p, s)]),
                                    "perm": _lst(_front(p, s))},
               composable=False),
        OpSpec("index_put", "indexing", 2,
               "torch.index_put({a}, (torch.tensor({idx}, device={a}.device),), {b}, accumulate={accumulate})",
               _index_put_tf, _index_put_ref, _index_put_accepts, _index_put_plan,
               lambda bs, ss, p: bs[0] + ss[1][0] * bs[1], _index_put_lip,
               extras=lambda p, s: {"idx": repr(_put_idx(p, s))}, composable=False),
        # F.embedding takes a 2-D table: a table of any rank >= 1 is looked up as (V, -1) rows.
        OpSpec("embedding", "indexing", 1,
               "F.embedding(torch.tensor({ids}, device={a}.device), {a}.reshape({vocab}, -1)).reshape({out_shape})",
               _embedding_tf, _embedding_ref, _rank_at_least(1), _embedding_plan, lambda bs, ss, p: bs[0],
               _embedding_lip, extras=_embedding_extras, composable=False),
    ]


def indexing_records() -> list[OpRecord]:
    """Indexing with accumulation. Parameter classes: ``index_put``'s ``accumulate`` False
    (default; distinct indices, the only documented case) and True (repeated indices add);
    ``index_add``'s ``alpha`` 1 (default), 0.5, -2 and dims -1 and 0; ``scatter_add``'s dims;
    ``embedding`` with a 1-D and a 2-D index tensor, TensorFlow through
    ``tf.nn.embedding_lookup`` and ``tf.gather`` (``padding_idx``, ``scale_grad_by_freq`` and
    ``sparse``, whose gradients are not the function's derivative by documentation, are checked
    in suites/autodiff/test_documented_gradients.py)."""
    return with_classes(_indexing_ops(), {
        "scatter_add": [{"dim": -1}, {"dim": 0}],
        "index_add": [{"dim": -1, "alpha": 1.0}, {"dim": 0, "alpha": 0.5}, {"dim": -1, "alpha": -2.0}],
        "index_put": [{"accumulate": False}, {"accumulate": True}],
        "embedding": [{"ids_shape": (5,), "tf_api": "embedding_lookup"}, {"ids_shape": (2, 3), "tf_api": "gather"}],
    })
