"""Convolutions with every documented parameter, NCHW: conv2d_full (groups, stride, dilation,
padding as an int, 'same' or 'valid', padding_mode zeros/reflect/replicate/circular) and
conv_transpose2d (stride, padding, output_padding, groups, dilation). Weights are constants
(``_weight``: multiples of 1/8 in [-2, 2]); no bias.

torch: ``F.conv2d`` with ``padding=`` for zeros, ``F.pad(mode=...)`` then ``padding=0`` for the
other modes (what ``nn.Conv2d(padding_mode=...)`` does); ``F.conv_transpose2d``.

TensorFlow (NHWC): groups as ``tf.split`` / ``tf.concat`` of one convolution per group,
because ``tf.nn.conv2d``'s grouped form (input depth a multiple of the filter's) refuses its
float64 gradient on CPU ("Gradients for grouped convolutions are not supported on CPU", TF
2.21, undocumented); dilation through ``tf.nn.convolution(dilations=...)``, because
``tf.nn.conv2d(dilations=2)``'s input gradient refuses float64 on CPU ("Current CPU
implementations do not yet support dilation rates larger than 1"); padding modes through
``tf.pad`` (REFLECT) and ``tf.concat`` (replicate, circular: TensorFlow has no such mode).
``tf.nn.conv2d_transpose(dilations=2)`` refuses on CPU even forward (same message) although
its documentation describes the parameter: the transposed convolution's TF template dilates
the filter explicitly (zeros between taps, the documented meaning of dilation) and passes
``dilations=1`` (a finding: ``docs/findings.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from .. import autocast as ac
from ..core import Array, Draw, OpSpec, Params, Shape
from ..records import AUTOCAST_LOWER, Autocast, OpRecord, with_classes
from .pooling import valid_plan

MODES: Final[dict[str, Any]] = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _hint_channels(draw: Draw, max_side: int) -> Shape:
    """An image with an even channel count, so groups=2 divides it."""
    side = st.integers(min(3, max_side), max_side)
    return (draw(st.integers(1, 2)), draw(st.sampled_from((2, 4))), draw(side), draw(side))


def _pads(shape: Shape, p: Params) -> tuple[tuple[int, int], tuple[int, int]]:
    """(top, bottom), (left, right) as torch pads for conv2d_full."""
    pad, d = p["padding"], p["dilation"]
    if pad == "valid":
        return (0, 0), (0, 0)
    if pad == "same":
        out = []
        for k in p["kernel"]:
            total = d * (k - 1)
            out.append((total // 2, total - total // 2))
        return out[0], out[1]
    return (pad, pad), (pad, pad)


def _correlate(xp: Array, w: Array, s: int, d: int, groups: int) -> Array:
    """Cross-correlation of a padded NCHW input with (O, C/g, kh, kw), per group."""
    n, _, h, wd = xp.shape
    o, cg, kh, kw = w.shape
    ho, wo = (h - d * (kh - 1) - 1) // s + 1, (wd - d * (kw - 1) - 1) // s + 1
    if ho < 1 or wo < 1:
        raise ValueError(f"output size ({ho}, {wo}) < 1")
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for g in range(groups):
        xg, wg = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for i, j in product(range(kh), range(kw)):
            patch = xg[:, :, i * d: i * d + s * (ho - 1) + 1: s, j * d: j * d + s * (wo - 1) + 1: s]
            out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    return out


def _conv_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    if x.shape[1] % p["groups"]:
        raise ValueError(f"{x.shape[1]} channels are not divisible by groups={p['groups']}")
    if p["padding"] == "same" and p["stride"] != 1:
        raise ValueError("padding='same' needs stride 1")
    (t, b), (lft, r) = _pads(x.shape, p)
    if p["padding_mode"] == "reflect" and max(t, b, lft, r) >= min(x.shape[2:]):
        raise ValueError("reflect padding must be smaller than the input")
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (lft, r)), mode=MODES[p["padding_mode"]])
    return _correlate(xp, ws[0], p["stride"], p["dilation"], p["groups"])


# --------------------------------------------------------------------------- templates


def _conv_torch(p: Params, shapes: Sequence[Shape]) -> str:
    common = f"stride={p['stride']}, dilation={p['dilation']}, groups={p['groups']}"
    if p["padding_mode"] == "zeros":
        return f"F.conv2d({{a}}, {{w}}, padding={p['padding']!r}, {common})"
    (t, b), (lft, r) = _pads(shapes[0], p)
    return f"F.conv2d(F.pad({{a}}, {(lft, r, t, b)}, mode={p['padding_mode']!r}), {{w}}, padding=0, {common})"


def _tf_pad_axis(x: str, axis: int, lo: int, hi: int, mode: str) -> str:
    """Expression padding NHWC ``x`` along ``axis`` by (lo, hi) replicating or wrapping."""
    if lo == hi == 0:
        return x
    sl = lambda spec: "[" + ", ".join(spec if a == axis else ":" for a in range(4)) + "]"
    parts = []
    if mode == "replicate":
        if lo:
            parts.append(f"tf.repeat({x}{sl('0:1')}, {lo}, axis={axis})")
        parts.append(x)
        if hi:
            parts.append(f"tf.repeat({x}{sl('-1:')}, {hi}, axis={axis})")
    else:  # circular
        if lo:
            parts.append(f"{x}{sl(f'-{lo}:')}")
        parts.append(x)
        if hi:
            parts.append(f"{x}{sl(f'0:{hi}')}")
    return f"tf.concat([{', '.join(parts)}], axis={axis})"


def _conv_tf(p: Params, shapes: Sequence[Shape]) -> str:
    x = "tf.transpose({a}, (0, 2, 3, 1))"
    (t, b), (lft, r) = _pads(shapes[0], p)
    mode, s, d, g = p["padding_mode"], p["stride"], p["dilation"], p["groups"]
    if mode == "zeros" and p["padding"] in ("same", "valid"):
        padding = repr(p["padding"].upper())
    elif mode == "zeros" and d == 1:
        padding = repr([[0, 0], [t, b], [lft, r], [0, 0]])
    else:
        if mode in ("zeros", "reflect"):
            x = f"tf.pad({x}, {[[0, 0], [t, b], [lft, r], [0, 0]]}, mode={MODES[mode].upper()!r})"
        else:
            x = _tf_pad_axis(_tf_pad_axis(x, 1, t, b, mode), 2, lft, r, mode)
        padding = "'VALID'"
    if d == 1:
        conv = f"tf.nn.conv2d(xg, wg, strides={s}, padding={padding})"
    else:
        conv = f"tf.nn.convolution(xg, wg, strides={s}, padding={padding}, dilations={d})"
    return (f"tf.transpose(tf.concat([{conv} for xg, wg in zip(tf.split({x}, {g}, axis=3), "
            f"tf.split(tf.transpose({{w}}, (2, 3, 1, 0)), {g}, axis=3))], axis=3), (0, 3, 1, 2))")


# --------------------------------------------------------------------------- transposed


def _conv_t_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    """out[n, o, y, x] += in[n, c, h, w] * W[c, o, i, j] at y = h s - p + i d (per group)."""
    x, w = xs[0], ws[0]
    s, pad, op, d, groups = p["stride"], p["padding"], p["output_padding"], p["dilation"], p["groups"]
    n, c, h, wd = x.shape
    cin, og, kh, kw = w.shape
    if c % groups or cin != c:
        raise ValueError(f"{c} channels do not fit groups={groups}")
    if op >= max(s, d):
        raise ValueError("output_padding must be smaller than stride or dilation")
    full = (h - 1) * s + d * (kh - 1) + 1 + op, (wd - 1) * s + d * (kw - 1) + 1 + op
    out = np.zeros((n, og * groups, *full))
    cg = c // groups
    for g in range(groups):
        xg, wg = x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg]
        for i, j in product(range(kh), range(kw)):
            contrib = np.einsum("nchw,co->nohw", xg, wg[:, :, i, j])
            out[:, g * og:(g + 1) * og, i * d: i * d + s * (h - 1) + 1: s, j * d: j * d + s * (wd - 1) + 1: s] += contrib
    ho, wo = full[0] - 2 * pad, full[1] - 2 * pad
    if ho < 1 or wo < 1:
        raise ValueError(f"output size ({ho}, {wo}) < 1")
    return out[:, :, pad: pad + ho, pad: pad + wo]


def _conv_t_torch(p: Params, shapes: Sequence[Shape]) -> str:
    return ("F.conv_transpose2d({a}, {w}, stride={stride}, padding={padding}, output_padding={output_padding}, "
            "groups={groups}, dilation={dilation})")


def _dilated_filter(w: str, shape: Shape, d: int) -> str:
    """TF expression: the (kh, kw, O, C) filter ``w`` with d - 1 zeros between taps."""
    if d == 1:
        return w
    kh, kw, o, c = shape
    rows = (f"tf.reshape(tf.concat([{w}[:, None]] + [tf.zeros_like({w}[:, None])] * {d - 1}, axis=1), "
            f"({kh * d}, {kw}, {o}, {c}))[:{d * (kh - 1) + 1}]")
    kh2 = d * (kh - 1) + 1
    return (f"tf.reshape(tf.concat([{rows}[:, :, None]] + [tf.zeros_like({rows}[:, :, None])] * {d - 1}, axis=2), "
            f"({kh2}, {kw * d}, {o}, {c}))[:, :{d * (kw - 1) + 1}]")


def _conv_t_tf(p: Params, shapes: Sequence[Shape]) -> str:
    n, c, h, wd = shapes[0]
    s, pad, op, d, g = p["stride"], p["padding"], p["output_padding"], p["dilation"], p["groups"]
    kh, kw = p["kernel"]
    og = p["out_per_group"]
    filt = _dilated_filter("tf.transpose({w}, (2, 3, 1, 0))", (kh, kw, og, c), d)
    full = ((h - 1) * s + d * (kh - 1) + 1, (wd - 1) * s + d * (kw - 1) + 1)
    conv = (f"tf.nn.conv2d_transpose(xg, wg, output_shape=({n}, {full[0]}, {full[1]}, {og}), strides={s}, "
            "padding='VALID')")
    y = (f"tf.concat([{conv} for xg, wg in zip(tf.split(tf.transpose({{a}}, (0, 2, 3, 1)), {g}, axis=3), "
         f"tf.split({filt}, {g}, axis=3))], axis=3)")
    if op:
        y = f"tf.pad({y}, [[0, 0], [0, {op}], [0, {op}], [0, 0]])"
    ho, wo = full[0] + op - 2 * pad, full[1] + op - 2 * pad
    return f"tf.transpose({y}[:, {pad}:{pad + ho}, {pad}:{pad + wo}, :], (0, 3, 1, 2))"


# --------------------------------------------------------------------------- plans and bounds


def _kernel(draw: Draw, shape: Shape) -> tuple[int, int]:
    return (draw(st.integers(1, min(3, shape[2]))), draw(st.integers(1, min(3, shape[3]))))


def _conv_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    dilation = draw(st.sampled_from((1, 2)))
    padding = draw(st.sampled_from((0, 1, "same", "valid")))
    # 'same' needs stride 1 (torch); tf.nn.convolution: dilations > 1 need strides 1.
    stride = 1 if dilation > 1 or padding == "same" else draw(st.integers(1, 2))
    groups = draw(st.sampled_from((1, 2))) if shapes[0][1] % 2 == 0 else 1
    return {"out_per_group": draw(st.integers(1, 2)), "kernel": _kernel(draw, shapes[0]), "stride": stride,
            "padding": padding, "dilation": dilation, "groups": groups,
            "padding_mode": draw(st.sampled_from(tuple(MODES))), "seed": draw(st.integers(0, 2**16))}


def _conv_t_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    stride, dilation = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    return {"out_per_group": draw(st.integers(1, 2)), "kernel": _kernel(draw, shapes[0]), "stride": stride,
            "padding": draw(st.integers(0, 1)), "output_padding": draw(st.integers(0, max(stride, dilation) - 1)),
            "dilation": dilation, "groups": draw(st.sampled_from((1, 2))) if shapes[0][1] % 2 == 0 else 1,
            "seed": draw(st.integers(0, 2**16))}


def _conv_weights(ss: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    return ((p["groups"] * p["out_per_group"], ss[0][1] // p["groups"], *p["kernel"]),)


def _conv_t_weights(ss: Sequence[Shape], p: Params) -> tuple[Shape, ...]:
    return ((ss[0][1], p["out_per_group"], *p["kernel"]),)


def _conv_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    # An output entry is a sum over C/g * kh * kw taps: |J| row sum <= sum |w[o]|; an input
    # entry read by several taps (reflect, circular) adds |w1 + w2| <= |w1| + |w2|.
    w = ws[0]
    return (float(np.max(np.sum(np.abs(w), axis=(1, 2, 3)))),), float(w[0].size)


def _conv_t_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    w = ws[0]
    cg = w.shape[0] // p["groups"]
    per_o = [np.sum(np.abs(w[g * cg:(g + 1) * cg]), axis=(0, 2, 3)) for g in range(p["groups"])]
    return (float(np.max(np.concatenate(per_o))),), float(cg * w.shape[2] * w.shape[3])


def _image(shapes: Sequence[Shape]) -> bool:
    return len(shapes[0]) == 4


def _convolution_ops() -> list[OpSpec]:
    taps = lambda ss, p: 2.0 * ss[0][1] / p["groups"] * p["kernel"][0] * p["kernel"][1]
    return [
        OpSpec("conv2d_full", "nn", 1, _conv_torch, _conv_tf, _conv_ref, _image,
               valid_plan(_conv_plan, _conv_ref, _conv_weights),
               lambda bs, ss, p: taps(ss, p) * bs[0], _conv_lip, weights=_conv_weights, hint=_hint_channels,
               composable=False),
        OpSpec("conv_transpose2d", "nn", 1, _conv_t_torch, _conv_t_tf, _conv_t_ref, _image,
               valid_plan(_conv_t_plan, _conv_t_ref, _conv_t_weights),
               lambda bs, ss, p: taps(ss, p) * bs[0], _conv_t_lip, weights=_conv_t_weights, hint=_hint_channels,
               composable=False),
    ]



def convolution_records() -> list[OpRecord]:
    """The convolutions. Parameter classes: defaults first (stride 1, padding 0, dilation 1,
    groups 1, zeros; output_padding 0), then each other documented value."""
    return with_classes(_convolution_ops(), {
    "conv2d_full": [
        {"groups": 1, "stride": 1, "padding": 0, "dilation": 1, "padding_mode": "zeros"},
        {"groups": 2, "stride": 2, "padding": 1, "dilation": 1, "padding_mode": "zeros"},
        {"groups": 1, "stride": 1, "padding": "same", "dilation": 2, "padding_mode": "zeros"},
        {"groups": 2, "stride": 1, "padding": "valid", "dilation": 1, "padding_mode": "zeros"},
        {"groups": 1, "stride": 1, "padding": 1, "dilation": 1, "padding_mode": "reflect"},
        {"groups": 1, "stride": 2, "padding": 1, "dilation": 1, "padding_mode": "replicate"},
        {"groups": 2, "stride": 1, "padding": 1, "dilation": 2, "padding_mode": "circular"},
        {"groups": 1, "stride": 1, "padding": "same", "dilation": 1, "padding_mode": "reflect"},
    ],
    "conv_transpose2d": [
        {"stride": 1, "padding": 0, "output_padding": 0, "groups": 1, "dilation": 1},
        {"stride": 2, "padding": 1, "output_padding": 1, "groups": 1, "dilation": 1},
        {"stride": 2, "padding": 0, "output_padding": 0, "groups": 2, "dilation": 1},
        {"stride": 1, "padding": 1, "output_padding": 0, "groups": 2, "dilation": 2},
        {"stride": 2, "padding": 1, "output_padding": 1, "groups": 1, "dilation": 2},
        {"stride": 1, "padding": 0, "output_padding": 1, "groups": 1, "dilation": 2},
    ],
    }, {"conv_transpose2d": {"autocast": Autocast(ac.function("conv_transpose2d", ac.IMG2, ac.normal(2, 3, 2, 2)),
                                                 cpu=AUTOCAST_LOWER, cuda=AUTOCAST_LOWER, aten="conv_transpose2d.input")}})
