"""Scaled dot-product attention, ``softmax(Q K^T * scale + mask) V``, with a boolean mask
(True takes part), an additive float mask, ``is_causal`` (lower-triangular) and ``scale``
(default ``1 / sqrt(E)``); dropout_p = 0.

The one input holds Q, K and V stacked on dim 1, shape (B, 3, L, E), so the gradient of each
is checked. torch: ``F.scaled_dot_product_attention`` on (B, L, E). TensorFlow has no SDPA
op of its own; Keras documents ``keras.ops.dot_product_attention(query, key, value, bias,
mask, scale, is_causal)`` on (B, T, N, H) (a boolean ``mask`` where True takes part, an
additive mask as ``bias``), which with the TensorFlow backend runs TensorFlow ops: the
template uses it with one head. Masks are constants rebuilt from the seed; a boolean mask
keeps the diagonal, so no row is fully masked (torch documents NaN there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
from hypothesis import strategies as st

from ..core import Array, Draw, OpSpec, Params, Shape, _amax
from .losses import _full_jacobian_norm


def _hint_qkv(draw: Draw, max_side: int) -> Shape:
    return (draw(st.integers(1, 2)), 3, draw(st.integers(2, max_side)), draw(st.integers(1, max_side)))


def _qkv(shapes: Sequence[Shape]) -> bool:
    return len(shapes[0]) == 4 and shapes[0][1] == 3


def _mask(length: int, p: Params) -> Array | None:
    rng = np.random.default_rng(p["seed"])
    if p["mask"] == "bool":
        return (rng.random((length, length)) < 0.6) | np.eye(length, dtype=bool)
    if p["mask"] == "float":
        return rng.integers(-16, 17, size=(length, length)) / 8.0
    return None


def _scores(x: Array, p: Params) -> Array:
    """The logits QK^T * scale with the masks applied (-inf where masked)."""
    q, k = x[:, 0], x[:, 1]
    scale = p["scale"] if p["scale"] is not None else 1.0 / math.sqrt(x.shape[-1])
    s = np.einsum("bie,bje->bij", q, k) * scale
    m = _mask(x.shape[2], p)
    if m is not None and p["mask"] == "bool":
        s = np.where(m, s, -np.inf)
    elif m is not None:
        s = s + m
    if p["is_causal"]:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    return s


def _sdpa_ref(xs: Sequence[Array], p: Params, ws: Sequence[Array]) -> Array:
    x = xs[0]
    s = _scores(x, p)
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return np.einsum("bij,bje->bie", e / np.sum(e, axis=-1, keepdims=True), x[:, 2])


def _finite_amax(s: Array) -> float:
    return _amax(np.where(np.isfinite(s), s, 0.0))


def _sdpa_lip(xs: Sequence[Array], out: Array, p: Params, ws: Sequence[Array]) -> tuple[Sequence[float], float, float]:
    # Rounding work: the two contractions (E and L terms); inner: the logits' rounding
    # (absolute, u |s|) moves the softmax weights by a relative 2 u |s|, the output by that
    # times max|V|.
    x = xs[0]
    lip = _full_jacobian_norm(lambda v: _sdpa_ref([v], p, ws), x)
    inner = 2.0 * _finite_amax(_scores(x, p)) * _amax(x[:, 2])
    return (lip,), float(x.shape[2] + x.shape[3]), inner


def sdpa_gradient_term(xs: Sequence[Array], p: Params) -> float:
    """Units of u per unit tangent: the backward recomputes the softmax weights from rounded
    logits (relative error 2 |s|, as for softmax's 2 max|x|) and uses them twice (the
    products with dV and the row sums of P * dP), each term of a Jacobian entry <= lip:
    ``8 max(1, |s|) lip``."""
    lip = _full_jacobian_norm(lambda v: _sdpa_ref([v], p, []), xs[0])
    return 8.0 * max(1.0, _finite_amax(_scores(xs[0], p))) * lip


def _sdpa_torch(p: Params, shapes: Sequence[Shape]) -> str:
    m = _mask(shapes[0][2], p)
    if m is None:
        mask = "None"
    elif p["mask"] == "bool":
        mask = f"torch.tensor({m.tolist()!r}, dtype=torch.bool, device={{a}}.device)"
    else:
        mask = f"torch.tensor({m.tolist()!r}, dtype={{a}}.dtype, device={{a}}.device)"
    return (f"F.scaled_dot_product_attention({{a}}[:, 0], {{a}}[:, 1], {{a}}[:, 2], attn_mask={mask}, dropout_p=0.0, "
            f"is_causal={p['is_causal']!r}, scale={p['scale']!r})")


def _sdpa_tf(p: Params, shapes: Sequence[Shape]) -> str:
    m = _mask(shapes[0][2], p)
    values = None if m is None else m.tolist()
    bias = f"tf.constant({values!r}, dtype={{a}}.dtype)" if p["mask"] == "float" else "None"
    mask = f"tf.constant({values!r}, dtype=tf.bool)" if p["mask"] == "bool" else "None"
    q, k, v = (f"{{a}}[:, {i}, :, None, :]" for i in range(3))
    # Keras's TensorFlow backend rounds ``scale`` to float32 (``tf.cast(scale, logits.dtype)``
    # of a Python float converts it to a float32 tensor first) and computes the default
    # 1 / sqrt(H) in float32: a relative error of up to 3e-8 in float64 programs (a finding,
    # the report of issue 12 part B). The scale is passed as a tensor of the program's dtype,
    # the default as the documented 1 / sqrt(H).
    value = p["scale"] if p["scale"] is not None else 1.0 / math.sqrt(shapes[0][3])
    scale = f"tf.constant({value!r}, dtype={{a}}.dtype)"
    return (f"__import__('keras').ops.dot_product_attention({q}, {k}, {v}, bias={bias}, mask={mask}, "
            f"scale={scale}, is_causal={p['is_causal']!r})[:, :, 0, :]")


def _sdpa_plan(draw: Draw, shapes: Sequence[Shape], bounds: Sequence[float]) -> dict[str, Any]:
    mask = draw(st.sampled_from((None, "bool", "float")))
    # torch: attn_mask and is_causal together raise ("Explicit attn_mask should not be set
    # when is_causal=True"): causal samples have no explicit mask.
    return {"mask": mask, "is_causal": draw(st.booleans()) if mask is None else False,
            "scale": draw(st.sampled_from((None, 0.5, 0.125))), "seed": draw(st.integers(0, 2**16))}


def _attention_ops() -> list[OpSpec]:
    return [
        OpSpec("sdpa", "attention", 1, _sdpa_torch, _sdpa_tf, _sdpa_ref, _qkv, _sdpa_plan,
               lambda bs, ss, p: bs[0], _sdpa_lip, hint=_hint_qkv, composable=False),
    ]


#: Parameter classes (samples.py): no mask, not causal, default scale first.
PARAMS: Final[dict[str, list[dict[str, Any]]]] = {
    "sdpa": [
        {"mask": None, "is_causal": False, "scale": None},
        {"mask": "bool", "is_causal": False, "scale": None},
        {"mask": "float", "is_causal": False, "scale": 0.5},
        {"mask": None, "is_causal": True, "scale": None},
        {"mask": None, "is_causal": True, "scale": 0.125},
        {"mask": "bool", "is_causal": False, "scale": 0.125},
    ],
}
