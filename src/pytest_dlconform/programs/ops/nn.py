"""Neural-network ops in torch's NCHW layout: conv2d, avg_pool2d, layer_norm.

TensorFlow's CPU kernels are NHWC: its templates transpose in and out (``_nchw_tf``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .. import autocast as ac
from ..core import Array, Draw, OpSpec, Params, Shape, _amax
from ..records import AUTOCAST_FLOAT32, AUTOCAST_LOWER, Autocast, OpRecord, each, records
from .common import _jacobian_norm, _lst, _rank_at_least


def _conv2d_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x, w = xs[0], ws[0]
    s, d = p["stride"], 1
    kh, kw = w.shape[-2:]
    ho = (x.shape[2] - d * (kh - 1) - 1) // s + 1
    wo = (x.shape[3] - d * (kw - 1) - 1) // s + 1
    out = np.zeros((x.shape[0], w.shape[0], ho, wo))
    for i, j in product(range(kh), range(kw)):
        patch = x[:, :, i * d : i * d + s * (ho - 1) + 1 : s, j * d : j * d + s * (wo - 1) + 1 : s]
        out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out


def _conv2d_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    # No dilation: TF's CPU Conv2D runs dilations > 1 forward, but its gradient
    # (Conv2DBackpropInput) refuses them: "Current CPU implementations do not yet support
    # dilation rates larger than 1".
    h, w = shapes[0][2:]
    kernel = (draw(st.integers(1, min(3, h))), draw(st.integers(1, min(3, w))))
    return {"out_channels": draw(st.integers(1, 3)), "kernel": kernel, "stride": draw(st.integers(1, 2)),
            "seed": draw(st.integers(0, 2**16))}


def _avg_pool_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    (kh, kw), s = p["kernel"], p["stride"]
    ho, wo = (x.shape[2] - kh) // s + 1, (x.shape[3] - kw) // s + 1
    out = np.zeros((*x.shape[:2], ho, wo))
    for i, j in product(range(kh), range(kw)):
        out += x[:, :, i : i + s * (ho - 1) + 1 : s, j : j + s * (wo - 1) + 1 : s]
    return out / (kh * kw)


def _avg_pool_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    h, w = shapes[0][2:]
    return {"kernel": (draw(st.integers(1, min(3, h))), draw(st.integers(1, min(3, w)))),
            "stride": draw(st.integers(1, 2))}


def _nchw_tf(core: str) -> str:
    """TF convolutions and pools are NHWC on CPU: transpose in and out of torch's NCHW."""
    return f"tf.transpose({core.format(x='tf.transpose({a}, (0, 2, 3, 1))')}, (0, 3, 1, 2))"


def _layer_norm_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    axes = tuple(range(x.ndim - p["k"], x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + p["eps"])


def _layer_norm_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float]:
    norm = _jacobian_norm(lambda x: _layer_norm_ref([x], p, ws), xs[0], p["k"])
    return (norm,), math.prod(xs[0].shape[-p["k"]:])


def _image(shapes: Sequence[Shape]) -> bool:
    return len(shapes[0]) == 4


def _nn_ops() -> list[OpSpec]:
    kernel = lambda ss, p: ((p["out_channels"], ss[0][1], *p["kernel"]),)
    return [
        OpSpec("conv2d", "nn", 1, "F.conv2d({a}, {w}, stride={stride})",
               _nchw_tf("tf.nn.conv2d({x}, tf.transpose({{w}}, (2, 3, 1, 0)), strides={{stride}}, padding='VALID')"),
               _conv2d_ref, _image, _conv2d_plan, lambda bs, ss, p: 2.0 * ss[0][1] * math.prod(p["kernel"]) * bs[0],
               lambda xs, out, p, ws: ((float(np.max(np.sum(np.abs(ws[0]), axis=(1, 2, 3)))),),
                                       ws[0][0].size), weights=kernel),
        # torch's stride defaults to kernel_size; TF has no default: passed explicitly to both.
        OpSpec("avg_pool2d", "nn", 1, "F.avg_pool2d({a}, kernel_size={kernel}, stride={stride})",
               _nchw_tf("tf.nn.avg_pool2d({x}, ksize={{kernel}}, strides={{stride}}, padding='VALID')"),
               _avg_pool_ref, _image, _avg_pool_plan, lambda bs, ss, p: bs[0],
               lambda xs, out, p, ws: ((1.0,), math.prod(p["kernel"]))),
        # Default eps differs: torch 1e-5, keras.layers.LayerNormalization 1e-3.
        OpSpec("layer_norm", "nn", 1, "F.layer_norm({a}, {normalized_shape}, eps={eps})",
               "tf.nn.batch_normalization({a}, *tf.nn.moments({a}, axes={axes}, keepdims=True), offset=None, "
               "scale=None, variance_epsilon={eps})",
               _layer_norm_ref, _rank_at_least(1),
               lambda draw, s, b: {"k": draw(st.integers(1, min(3, len(s[0])))),
                                   "eps": draw(st.sampled_from((1e-5, 1e-3, 0.25)))},
               lambda bs, ss, p: math.sqrt(math.prod(ss[0][-p["k"]:])), _layer_norm_lip,
               extras=lambda p, s: {"normalized_shape": repr(s[0][len(s[0]) - p["k"]:]),
                                    "axes": _lst(range(len(s[0]) - p["k"], len(s[0])))}),
    ]


def _layer_norm_cancellation(xs: Sequence[Array], p: Params, gradient: bool) -> float:
    """``x - mean`` errs by ``n u max|x|`` and is divided by ``sigma = sqrt(var + eps)``, also
    where the output is identically 0 (one normalised entry, L = 0); its backward's terms
    ``(g - mean g) / sigma`` and ``y mean(g y) / sigma`` are of size ``|g| / sigma``, and the
    ``y`` in the second (twice: ``y`` and ``mean(g y)``) carries the forward's
    ``n u max|x| / sigma``: ``2n (1 + max|x| / sigma) / sigma`` (torch float32, n = 2,
    eps = 0.25, |x| ~ 29, sigma = 5.5: 1.7e-8 where ``2n / sigma`` allowed 1.2e-8, the two
    terms cancelling to ``eps / sigma**2`` of their size)."""
    x = xs[0]
    axes = tuple(range(x.ndim - p["k"], x.ndim))
    n = int(np.prod([x.shape[a] for a in axes]))
    sigma = float(np.min(np.sqrt(np.var(x, axis=axes) + p["eps"])))
    return n * (2.0 * (1.0 + _amax(x) / sigma) if gradient else _amax(x)) / sigma


#: F.layer_norm over the last axis, as torch's autocast check calls it.
_LAYER_NORM_CALL = ac.call(lambda t, x: ac.functional("layer_norm")(t)(x[0], x[0].shape[-1:]), ac.M)


def nn_records() -> list[OpRecord]:
    """Convolution, pooling and layer norm in their composable form."""
    return records(_nn_ops(), {"conv2d": {"params": each(stride=(1, 2)), "linear": True,
                                          "autocast": Autocast(ac.function("conv2d", ac.IMG2, ac.normal(3, 2, 2, 2)),
                                                               cpu=AUTOCAST_LOWER, cuda=AUTOCAST_LOWER)},
                               "avg_pool2d": {"params": each(stride=(1, 2)), "linear": True},
                               "layer_norm": {"params": each(eps=(1e-5, 1e-3, 0.25)), "cancellation": _layer_norm_cancellation,
                                              "autocast": Autocast(_LAYER_NORM_CALL, cuda=AUTOCAST_FLOAT32)}})
