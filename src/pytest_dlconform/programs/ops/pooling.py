"""Pooling with every documented parameter: max_pool2d (padding, dilation, ceil_mode) and
avg_pool2d_pad (padding, ceil_mode, count_include_pad, divisor_override), NCHW.

References follow torch's documented output size (``floor`` or ``ceil`` of
``(H + 2p - d (k - 1) - 1) / s + 1``, a window that would start in the right padding is
dropped) and its padding semantics: max pooling pads with -inf, average pooling with zeros
that count in the divisor only with ``count_include_pad``; a window overhanging the padded
input in ceil mode divides by the part inside input + padding (torch's
``min(start + k, H + p) - start``, ``aten/src/ATen/native/cpu/AvgPoolKernel.cpp``).

TensorFlow: ``tf.nn.max_pool2d`` / ``tf.nn.avg_pool2d`` with ``'VALID'`` or ``'SAME'`` where
torch's parameters correspond, ``tf.pad`` with -inf otherwise (see ``_max_pool_tf``); dilation through
``tf.nn.pool(dilations=...)`` (which documents strides 1 with dilations > 1, so samples with
dilation use stride 1); average pooling's explicit padding (``tf.nn.avg_pool2d`` accepts only
the two strings) as a window sum over ``tf.pad`` divided by torch's divisor.

Ties: at a tie the max-pooling gradient is not a derivative (finite differences see the
average of the tied entries' pieces), and the regimes have exact ties (dyadic values, the
zeros of "mixed"). As the ordering ops do (:mod:`.ordering`), max_pool2d pools
``v = x + K * R``: ``R`` is a random permutation of the H * W positions of each (n, c) plane
(from the plan's seed, the same constant in numpy and both frameworks) and ``K = 256 >
2 * INPUT_MAX``, so entries of ``v`` differ by at least 128, no window has a tie in any
dtype's rounding (float16's step at 4096 is 4), and the framework still has to find each
window's maximum (which R makes different per window and plane). Neither framework documents
which tied entry receives the gradient, so no tie is checked. Error model: one rounded
addition at magnitude up to ``K (H W - 1) + |x|``, inside the output's magnitude (work >= 1);
the pooling itself is exact. In the "tiny" regime ``x`` is below the rounding of ``K R``:
finite differences are inconclusive there (counted; the forward value is still checked).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import product
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from .. import autocast as ac
from ..core import Array, Draw, OpSpec, Params, PlanFn, RefFn, Shape
from ..records import Autocast, OpRecord, with_classes
from .hints import _hint_image

#: The separation of the pooled values: entries of x + K R differ by >= K - 2 * INPUT_MAX.
K: Final = 256.0


def separation(shape: Shape, seed: int) -> Array:
    """R: a random permutation of the H * W positions of each (n, c) plane."""
    n, c, h, w = shape
    r = np.argsort(np.random.default_rng(seed).random((n * c, h * w)), axis=1)
    return r.reshape(shape).astype(np.float64)


def _out_size(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    """torch's pooling output size (pooling_output_shape)."""
    num = n + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1  # the last window would start in the right padding
    return out


def _geometry(x: Array, p: Params, dilation: int) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(output size, right padding incl. ceil overhang) per spatial dim, checked like torch."""
    (kh, kw), s, pad = p["kernel"], p["stride"], p["padding"]
    outs, rights = [], []
    for n, k in zip(x.shape[2:], (kh, kw)):
        eff = dilation * (k - 1) + 1
        if pad > eff // 2:
            raise ValueError(f"padding {pad} exceeds half the effective kernel {eff}")
        out = _out_size(n, k, s, pad, dilation, p["ceil_mode"])
        if out < 1:
            raise ValueError(f"output size {out} < 1")
        outs.append(out)
        rights.append(max(0, (out - 1) * s + eff - n - pad))
    return (outs[0], outs[1]), (rights[0], rights[1]), (kh, kw)


def _windows(xp: Array, out: tuple[int, int], k: tuple[int, int], s: int, d: int) -> list[Array]:
    """The k_h * k_w strided views of the padded input, one per window tap."""
    return [xp[:, :, i * d: i * d + s * (out[0] - 1) + 1: s, j * d: j * d + s * (out[1] - 1) + 1: s]
            for i, j in product(range(k[0]), range(k[1]))]


def _max_pool_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x, d, pad = xs[0], p["dilation"], p["padding"]
    x = x + K * separation(x.shape, p["seed"])
    out, right, k = _geometry(x, p, d)
    xp = np.pad(x, ((0, 0), (0, 0), (pad, right[0]), (pad, right[1])), constant_values=-np.inf)
    y = np.max(np.stack(_windows(xp, out, k, p["stride"], d)), axis=0)
    if np.isneginf(y).any():
        raise ValueError("a window lies entirely in the padding")
    return y


def _avg_divisor(shape: Shape, p: Params) -> tuple[Array, Array]:
    """(divisor, real elements) per output position (H_out, W_out), torch's rule."""
    (kh, kw), s, pad = p["kernel"], p["stride"], p["padding"]
    dims = []
    for n, k, out in zip(shape[2:], (kh, kw), _avg_out(shape, p)):
        start = np.arange(out) * s - pad
        end = np.minimum(start + k, n + pad)
        size = end - start  # counts the padding, not the ceil overhang beyond it
        real = np.minimum(end, n) - np.maximum(start, 0)
        dims.append((size, real))
    (sh, rh), (sw, rw) = dims
    real = np.outer(rh, rw).astype(np.float64)
    if p["divisor_override"] is not None:
        div = np.full(real.shape, float(p["divisor_override"]))
    else:
        div = np.outer(sh, sw).astype(np.float64) if p["count_include_pad"] else real
    return div, real


def _avg_out(shape: Shape, p: Params) -> tuple[int, int]:
    out, _, _ = _geometry(np.zeros((1, 1, *shape[2:])), p, 1)
    return out


def _avg_pool_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x, pad = xs[0], p["padding"]
    out, right, k = _geometry(x, p, 1)
    xp = np.pad(x, ((0, 0), (0, 0), (pad, right[0]), (pad, right[1])))
    div, _ = _avg_divisor(x.shape, p)
    return np.sum(np.stack(_windows(xp, out, k, p["stride"], 1)), axis=0) / div


# --------------------------------------------------------------------------- TensorFlow


def _tf_padding(shape: Shape, p: Params, dilation: int) -> str | None:
    """'VALID' or 'SAME' where torch's geometry is exactly TF's, else None."""
    out, right, k = _geometry(np.zeros((1, 1, *shape[2:])), p, dilation)
    if dilation != 1:
        return None
    if p["padding"] == 0 and right == (0, 0):
        return "VALID"
    same = []
    for n, kk, o in zip(shape[2:], k, out):
        tf_out = -(-n // p["stride"])
        total = max((tf_out - 1) * p["stride"] + kk - n, 0)
        same.append(tf_out == o and total // 2 == p["padding"])
    return "SAME" if all(same) else None


def _paddings(shape: Shape, p: Params, dilation: int) -> list[list[int]]:
    _, right, _ = _geometry(np.zeros((1, 1, *shape[2:])), p, dilation)
    return [[0, 0], [p["padding"], right[0]], [p["padding"], right[1]], [0, 0]]


def _nhwc(core: str) -> str:
    return f"tf.transpose({core}, (0, 3, 1, 2))"


_X: Final = "tf.transpose({a}, (0, 2, 3, 1))"


def _separated(framework: str, shape: Shape, p: Params) -> str:
    r = separation(shape, p["seed"]).astype(int).tolist()
    if framework == "torch":
        return f"({{a}} + {K!r} * torch.tensor({r!r}, dtype={{a}}.dtype, device={{a}}.device))"
    return f"tf.transpose({{a}} + {K!r} * tf.constant({r!r}, dtype={{a}}.dtype), (0, 2, 3, 1))"


def _max_pool_torch(p: Params, shapes: Sequence[Shape]) -> str:
    return (f"F.max_pool2d({_separated('torch', shapes[0], p)}, kernel_size={p['kernel']}, stride={p['stride']}, "
            f"padding={p['padding']}, dilation={p['dilation']}, ceil_mode={p['ceil_mode']})")


def _max_pool_tf(p: Params, shapes: Sequence[Shape]) -> str:
    k, s, d = list(p["kernel"]), p["stride"], p["dilation"]
    named = _tf_padding(shapes[0], p, d)
    v = _separated("tf", shapes[0], p)
    if d == 1 and named:
        return _nhwc(f"tf.nn.max_pool2d({v}, ksize={k}, strides={s}, padding={named!r})")
    # Explicit paddings as tf.pad with -inf: tf.nn.max_pool2d's own explicit padding runs
    # forward and backward, but forward mode (ForwardAccumulator) raises "Attr 'padding' of
    # 'MaxPoolGradGrad' Op passed string 'EXPLICIT' not in: "SAME", "VALID"" (TF 2.21, a
    # finding: docs/findings.md).
    padded = f"tf.pad({v}, {_paddings(shapes[0], p, d)}, constant_values=float('-inf'))"
    if d == 1:
        return _nhwc(f"tf.nn.max_pool2d({padded}, ksize={k}, strides={s}, padding='VALID')")
    return _nhwc(f"tf.nn.pool({padded}, window_shape={k}, pooling_type='MAX', strides=[{s}, {s}], "
                 f"padding='VALID', dilations=[{d}, {d}])")


def _avg_pool_tf(p: Params, shapes: Sequence[Shape]) -> str:
    k, s = list(p["kernel"]), p["stride"]
    named = _tf_padding(shapes[0], p, 1)
    if p["divisor_override"] is None and (named == "VALID" or (named == "SAME" and not p["count_include_pad"])):
        return _nhwc(f"tf.nn.avg_pool2d({_X}, ksize={k}, strides={s}, padding={named!r})")
    div, _ = _avg_divisor(shapes[0], p)
    window_sum = f"tf.nn.avg_pool2d(tf.pad({_X}, {_paddings(shapes[0], p, 1)}), ksize={k}, strides={s}, padding='VALID')"
    divisor = f"tf.constant({(div / math.prod(k)).tolist()!r}, dtype={{a}}.dtype)[None, :, :, None]"
    return _nhwc(f"({window_sum} / {divisor})")


# --------------------------------------------------------------------------- plans and bounds


def valid_plan(plan: PlanFn, ref: RefFn, weights: Callable[[Sequence[Shape], Params], tuple[Shape, ...]] | None = None,
               tries: int = 8) -> PlanFn:
    """``plan``, drawn again until the reference accepts its parameters for the shapes (an
    output size below 1, padding above half the kernel, ...); None after ``tries`` draws."""

    def checked(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any] | None:
        for _ in range(tries):
            p = plan(draw, shapes, bounds)
            if p is None:
                continue
            ws = [np.zeros(w) for w in weights(shapes, p)] if weights else []
            try:
                ref([np.zeros(s) for s in shapes], p, ws)
            except ValueError:
                continue
            return p
        return None

    return checked


def _kernel(draw: Draw, shape: Shape) -> tuple[int, int]:
    h, w = shape[2:]
    return (draw(st.integers(2, max(2, min(3, h)))), draw(st.integers(2, max(2, min(3, w)))))


def _max_pool_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    dilation = draw(st.sampled_from((1, 2)))
    # tf.nn.pool: "If any value of dilation_rate is > 1, then all values of strides must be 1".
    stride = 1 if dilation > 1 else draw(st.integers(1, 2))
    return {"kernel": _kernel(draw, shapes[0]), "stride": stride, "padding": draw(st.integers(0, 1)),
            "dilation": dilation, "ceil_mode": draw(st.booleans()), "seed": draw(st.integers(0, 2**16))}


def _avg_pool_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    return {"kernel": _kernel(draw, shapes[0]), "stride": draw(st.integers(1, 2)), "padding": draw(st.integers(0, 1)),
            "ceil_mode": draw(st.booleans()), "count_include_pad": draw(st.booleans()),
            "divisor_override": draw(st.sampled_from((None, 3)))}


def _overlap(p: Params) -> float:
    """How many windows one input entry can fall in: the terms its gradient sums."""
    (kh, kw), s, d = p["kernel"], p["stride"], p.get("dilation", 1)
    return float(math.ceil((d * (kh - 1) + 1) / s) * math.ceil((d * (kw - 1) + 1) / s))


def _avg_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    div, real = _avg_divisor(xs[0].shape, p)
    return (float(np.max(real / div)),), max(float(math.prod(p["kernel"])), _overlap(p))


def _avg_bound(bs: Sequence[float], ss: Sequence[Shape], p: Params) -> float:
    (kh, kw) = p["kernel"]
    div = p["divisor_override"] or 1
    return bs[0] * kh * kw / div


def _image(shapes: Sequence[Shape]) -> bool:
    return len(shapes[0]) == 4


def _pooling_ops() -> list[OpSpec]:
    return [
        # Pooling is exact (its output is one of its inputs; v costs one rounding, inside the
        # output's magnitude); the backward sums the cotangents of the windows an entry wins.
        OpSpec("max_pool2d", "nn", 1, _max_pool_torch, _max_pool_tf, _max_pool_ref, _image,
               valid_plan(_max_pool_plan, _max_pool_ref), lambda bs, ss, p: bs[0] + K * math.prod(ss[0][2:]),
               lambda xs, out, p, ws: ((1.0,), _overlap(p)), hint=_hint_image, composable=False),
        OpSpec("avg_pool2d_pad", "nn", 1,
               "F.avg_pool2d({a}, kernel_size={kernel}, stride={stride}, padding={padding}, ceil_mode={ceil_mode}, "
               "count_include_pad={count_include_pad}, divisor_override={divisor_override})",
               _avg_pool_tf, _avg_pool_ref, _image, valid_plan(_avg_pool_plan, _avg_pool_ref), _avg_bound, _avg_lip,
               hint=_hint_image, composable=False),
    ]



def pooling_records() -> list[OpRecord]:
    """The pooling ops. Parameter classes: every documented parameter at its default and other
    values; torch's default stride is the kernel size, TensorFlow's 'SAME' is the 3x3 stride-1
    padding-1 class."""
    return with_classes(_pooling_ops(), {
    "max_pool2d": [
        {"kernel": (2, 2), "stride": 2, "padding": 0, "dilation": 1, "ceil_mode": False},
        {"stride": 1, "padding": 0, "dilation": 1, "ceil_mode": False},
        {"stride": 2, "padding": 1, "dilation": 1, "ceil_mode": False},
        {"stride": 2, "padding": 0, "dilation": 1, "ceil_mode": True},
        {"stride": 1, "padding": 1, "dilation": 2, "ceil_mode": False},
        {"stride": 2, "padding": 1, "dilation": 1, "ceil_mode": True},
        {"kernel": (3, 3), "stride": 1, "padding": 1, "dilation": 1, "ceil_mode": False},
    ],
    "avg_pool2d_pad": [
        {"kernel": (2, 2), "stride": 2, "padding": 0, "ceil_mode": False, "count_include_pad": True,
         "divisor_override": None},
        {"stride": 1, "padding": 1, "ceil_mode": False, "count_include_pad": True, "divisor_override": None},
        {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False, "divisor_override": None},
        {"kernel": (3, 3), "stride": 1, "padding": 1, "ceil_mode": False, "count_include_pad": False,
         "divisor_override": None},
        {"stride": 1, "padding": 1, "ceil_mode": False, "count_include_pad": True, "divisor_override": 3},
        {"stride": 2, "padding": 0, "ceil_mode": True, "count_include_pad": True, "divisor_override": None},
        {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": True, "divisor_override": 5},
    ],
    }, {"max_pool2d": {"autocast": Autocast(ac.call(lambda t, x: ac.functional("max_pool2d")(t)(x[0], 2), ac.IMG2))}})
