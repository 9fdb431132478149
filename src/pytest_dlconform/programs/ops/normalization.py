"""Normalisation with batch statistics: batch_norm in training mode (per channel over N and
the spatial dims; momentum only updates running statistics, which are None here, so the
output does not depend on it), group_norm (num_groups, eps) and instance_norm (eps). No
affine weight or bias. Variances are biased (divided by n), as torch documents for training.

torch: ``F.batch_norm(x, None, None, training=True, momentum=m, eps=eps)``,
``F.group_norm``, ``F.instance_norm``. TensorFlow: ``tf.nn.moments`` +
``tf.nn.batch_normalization`` over the rows (group norm on ``(N, G, -1)``; Keras's
GroupNormalization layer, whose epsilon default 1e-3 differs from torch's 1e-5, costs a layer
build per call).

Each op normalises the rows of :func:`rows` (the entries sharing one mean and variance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from .. import autocast as ac
from ..core import Array, Draw, OpSpec, Params, Shape
from ..records import AUTOCAST_FLOAT32, Autocast, OpRecord, with_classes
from .common import _lst
from .convolution import _hint_channels
from .hints import _hint_image
from .pooling import valid_plan

_EPS: Final = (1e-5, 1e-3, 0.25)


def rows(name: str, x: Array, p: Params) -> Array:
    """x as (groups, n): each row is the set of entries normalised together."""
    if name == "batch_norm":
        return np.moveaxis(x, 1, 0).reshape(x.shape[1], -1)
    if name == "group_norm":
        return x.reshape(x.shape[0] * p["num_groups"], -1)
    return x.reshape(x.shape[0] * x.shape[1], -1)


def _unrows(name: str, r: Array, shape: Shape) -> Array:
    if name == "batch_norm":
        moved = (shape[1], shape[0], *shape[2:])
        return np.moveaxis(r.reshape(moved), 0, 1)
    return r.reshape(shape)


def _normalise(r: Array, eps: float) -> Array:
    mean = np.mean(r, axis=-1, keepdims=True)
    var = np.mean((r - mean) ** 2, axis=-1, keepdims=True)
    return (r - mean) / np.sqrt(var + eps)


def _ref(name: str) -> Any:
    def ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
        x = xs[0]
        if name == "group_norm" and x.shape[1] % p["num_groups"]:
            raise ValueError(f"{x.shape[1]} channels are not divisible by num_groups={p['num_groups']}")
        r = rows(name, x, p)
        if name != "group_norm" and r.shape[1] < 2:
            # torch: "Expected more than 1 value per channel when training" (batch_norm),
            # "Expected more than 1 spatial element when training" (instance_norm)
            raise ValueError(f"{name} in training needs more than 1 value per mean")
        return _unrows(name, _normalise(r, p["eps"]), x.shape)

    return ref


def _lip(name: str) -> Any:
    def lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
        # The Jacobian's terms without cancellation, an upper bound on the Lipschitz constant:
        # dy_i/dx_j = (delta_ij - 1/n) / s - y_i y_j / (n s), so sum_j |terms| =
        # (2 + |y_i| mean|y|) / s. The true row sum can cancel to ~0 (two values per mean give
        # y = +-1 whatever x), while the tangent rule still rounds terms of size 1/s: explore
        # seed 305551, batch_norm on (2, 2), a transposed-layout gradient 8.6e-16 apart from
        # the contiguous one where a numerical Lipschitz constant allowed 8e-17.
        r = rows(name, xs[0], p)
        s = np.sqrt(np.var(r, axis=-1, keepdims=True) + p["eps"])
        y = np.abs((r - np.mean(r, axis=-1, keepdims=True)) / s)
        terms = (2.0 + y * np.mean(y, axis=-1, keepdims=True)) / s
        return (float(np.max(terms)),), float(r.shape[1])

    return lip


def cancellation(name: str, x: Array, p: Params, gradient: bool) -> float:
    """As layer_norm's (docs/tolerances.md): ``x - mean`` errs by ``n u max|x|`` and is divided
    by ``sigma = sqrt(var + eps)``; the backward's terms are of size ``|g| / sigma``."""
    r = rows(name, x, p)
    n = r.shape[1]
    sigma = float(np.min(np.sqrt(np.var(r, axis=-1) + p["eps"])))
    return n * (2.0 if gradient else float(np.max(np.abs(x)))) / sigma


def min_variance(name: str, x: Array, p: Params) -> float:
    """The smallest variance + eps over the op's rows (float16's range check)."""
    return float(np.min(np.var(rows(name, x, p), axis=-1))) + p["eps"]


def _hint_batch(draw: Draw, max_side: int) -> Shape:
    spatial = draw(st.lists(st.integers(1, max_side), max_size=2))
    return (draw(st.integers(2, 3)), draw(st.integers(1, 3)), *spatial)


def _tf_normalise(x: str, axes: Sequence[int], eps: float) -> str:
    """TensorFlow template: ``x`` normalised by its moments over ``axes``, no offset or scale."""
    return (f"tf.nn.batch_normalization({x}, *tf.nn.moments({x}, axes={_lst(axes)}, keepdims=True), offset=None, "
            f"scale=None, variance_epsilon={eps!r})")


def _bn_tf(p: Params, shapes: Sequence[Shape]) -> str:
    return _tf_normalise("{a}", [0, *range(2, len(shapes[0]))], p["eps"])


def _gn_tf(p: Params, shapes: Sequence[Shape]) -> str:
    # tf ops, not keras.layers.GroupNormalization: a layer built per call cost ~10 s of a
    # loaded ci run in the per-op tests (measured); the formula is the same.
    rows = f"tf.reshape({{a}}, ({shapes[0][0]}, {p['num_groups']}, -1))"
    return f"tf.reshape({_tf_normalise(rows, [2], p['eps'])}, {list(shapes[0])})"


def _normalization_ops() -> list[OpSpec]:
    eps = lambda draw: draw(st.sampled_from(_EPS))
    bound = lambda bs, ss, p: math.sqrt(math.prod(ss[0]))
    return [
        OpSpec("batch_norm", "nn", 1,
               "F.batch_norm({a}, None, None, training=True, momentum={momentum}, eps={eps})", _bn_tf,
               _ref("batch_norm"), lambda ss: len(ss[0]) >= 2,
               valid_plan(lambda draw, s, b: {"eps": eps(draw), "momentum": draw(st.sampled_from((0.1, 0.5)))},
                          _ref("batch_norm")),
               bound, _lip("batch_norm"), hint=_hint_batch, composable=False),
        OpSpec("group_norm", "nn", 1, "F.group_norm({a}, {num_groups}, eps={eps})", _gn_tf,
               _ref("group_norm"), lambda ss: len(ss[0]) == 4,
               valid_plan(lambda draw, s, b: {"eps": eps(draw), "num_groups": draw(st.sampled_from((1, 2)))},
                          _ref("group_norm")),
               bound, _lip("group_norm"), hint=_hint_channels, composable=False),
        OpSpec("instance_norm", "nn", 1, "F.instance_norm({a}, eps={eps})",
               lambda p, s: _tf_normalise("{a}", [2, 3], p["eps"]),
               _ref("instance_norm"), lambda ss: len(ss[0]) == 4,
               valid_plan(lambda draw, s, b: {"eps": eps(draw)}, _ref("instance_norm")),
               bound, _lip("instance_norm"), hint=_hint_image, composable=False),
    ]


def _cycle(**options: Sequence[Any]) -> list[dict[str, Any]]:
    n = max(len(v) for v in options.values())
    return [{k: v[i % len(v)] for k, v in options.items()} for i in range(n)]


def _cancellation(name: str) -> Any:
    return lambda xs, p, gradient: cancellation(name, xs[0], p, gradient)


#: F.group_norm with one group, as torch's autocast check calls it.
_GROUP_NORM_CALL = ac.call(lambda t, x: ac.functional("group_norm")(t)(x[0], 1), ac.IMG2)


def normalization_records() -> list[OpRecord]:
    """The normalisations with batch statistics. Parameter classes: torch's defaults first
    (eps 1e-5, momentum 0.1), Keras's epsilon default 1e-3, and a large eps."""
    return with_classes(_normalization_ops(), {
        "batch_norm": _cycle(eps=_EPS, momentum=(0.1, 0.5)),
        "group_norm": _cycle(num_groups=(1, 2), eps=_EPS),
        "instance_norm": _cycle(eps=_EPS),
    }, {name: {"cancellation": _cancellation(name),
               **({"autocast": Autocast(_GROUP_NORM_CALL, cuda=AUTOCAST_FLOAT32)} if name == "group_norm" else {})}
        for name in ("batch_norm", "group_norm", "instance_norm")})


#: The ops whose float16 range check reads :func:`min_variance`.
NORM_OPS: Final = tuple(s.name for s in _normalization_ops())
